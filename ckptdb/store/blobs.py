"""The blob tables: ``blob``, ``blob_chunk``, ``chunk`` and ``chunk_data``.

Storage model (migrations 0001 and 0004): a blob below the file's chunker's inline limit is
stored whole in its ``blob`` row; a larger one is a list of chunks (``blob_chunk``) cut by
the file's chunker (``store/chunking.py``). Every stored byte passes through the codec
chain (``store/codec.py``), its codec id stored beside it. Chunk bytes go to ``chunk_data``
(written once, only rewritten to repair damage); a small ``chunk`` row carries digest,
sizes, codec and ``last_touched_ms``. A chunk that already exists is not written again.
Chunks of a value held in memory are written inside the commit transaction; those of a
stream are *staged* before it in short transactions of their own (``ops/prepare.py``).

Reads verify everything they hand out, after decoding: an inline blob against its
digest; a chunked blob's chunk list against ``chunk_list_digest`` before the first byte,
every chunk against its own digest before its bytes are returned, and the whole blob
against its digest before the last piece.
"""

from __future__ import annotations

import io
import threading
from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeAlias, overload

from .. import canonical, errors
from ..connection import Connection
from . import codec
from .chunking import Chunker
from .crypto import PLAINTEXT, Scope
from .rows import check_types
from .scopes import Keyring

#: A chunked blob below this size is read whole in one query (each chunk still verified
#: before the whole is); larger ones go through the pipelined :class:`ChunkedBlobReader`.
READ_AT_ONCE = 8 * 1024 * 1024
#: Digests looked up, and chunk-list rows written, per statement batch.
_ID_BATCH = 500
#: Buffers queued for the whole-blob hash at most (memory stays bounded if it falls behind).
_HASH_WINDOW = 32
#: A streaming read fetches chunks in windows of at most this many stored bytes (and at
#: most this many chunks), each window in one short read transaction.
READ_WINDOW_BYTES = 4 * 1024 * 1024
_WINDOW_ROWS = 64
#: A streaming read of a blob this large verifies on helper threads while the caller
#: consumes (a smaller one is done before threads would have started).
PARALLEL_READ_MIN = READ_AT_ONCE
#: ... fetching at most this many bytes (stored or decoded) ahead of the caller ...
READ_AHEAD_BYTES = 12 * 1024 * 1024
#: ... and letting the whole-blob hash fall at most this many bytes behind it.
_WHOLE_BEHIND_BYTES = 8 * 1024 * 1024
#: Chunk bytes up to this size are bound as a parameter; larger ones are written with
#: incremental blob I/O (no copy into a record first).
_BIND_LIMIT = 256 * 1024


class DigestList(Sequence[str]):
    """Hex sha256 digests kept as 32 raw bytes each: the chunk list of a 1 GiB blob cut
    into 8 KiB chunks has ~130,000 of them, which as Python strings would cost ~15 MB."""

    __slots__ = ("_raw",)

    def __init__(self, digests: Iterable[str] = ()) -> None:
        self._raw = bytearray()
        for digest in digests:
            self.append(digest)

    def append(self, digest: str) -> None:
        """Add one hex digest at the end."""
        self._raw += bytes.fromhex(digest)

    def __len__(self) -> int:
        return len(self._raw) // 32

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._raw[32 * index : 32 * index + 32].hex()

    def __iter__(self) -> Iterator[str]:
        raw = self._raw
        for start in range(0, len(raw), 32):
            yield raw[start : start + 32].hex()


class EncodingCache:
    """The stored encodings this handle made recently, by (key scope, content address).

    A value that changes a little per checkpoint (a growing message list) is cut into the
    same chunks every time; compressing (and sealing) each again was a quarter of such a
    commit's CPU. The encoding of bytes is a function of the bytes (zstd is deterministic;
    a seal under another nonce opens the same), so one made earlier for the same address
    is as good as a new one. Bounded by the stored bytes it holds; thread-safe (group
    commit prepares in several threads)."""

    #: chunks above this are not kept (large-tier chunks of big files would only churn it)
    MAX_CHUNK = 64 * 1024

    def __init__(self, max_bytes: int = 16 * 1024 * 1024) -> None:
        self._max_bytes = max_bytes
        self._held = 0
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[int | None, str], tuple[int, int, bytes, bytes | None]]
        self._items = OrderedDict()

    def get(
        self, scope_id: int | None, digest: str, size: int
    ) -> tuple[int, bytes, bytes | None] | None:
        """(codec id, stored bytes, sealed digest) made for this address, if held."""
        with self._lock:
            hit = self._items.get((scope_id, digest))
            if hit is None or hit[0] != size:
                return None
            self._items.move_to_end((scope_id, digest))
            return hit[1], hit[2], hit[3]

    def put(
        self,
        scope_id: int | None,
        digest: str,
        size: int,
        encoding: tuple[int, bytes, bytes | None],
    ) -> None:
        """Remember an encoding just made (dropping the least recently used)."""
        if size > self.MAX_CHUNK:
            return
        codec_id, stored, sealed_digest = encoding
        with self._lock:
            old = self._items.pop((scope_id, digest), None)
            if old is not None:
                self._held -= len(old[2])
            self._items[(scope_id, digest)] = (size, codec_id, stored, sealed_digest)
            self._held += len(stored)
            while self._held > self._max_bytes and self._items:
                _, dropped = self._items.popitem(last=False)
                self._held -= len(dropped[2])

    def clear(self) -> None:
        """Forget everything (e.g. when key scopes changed)."""
        with self._lock:
            self._items.clear()
            self._held = 0


@dataclass(frozen=True, slots=True)
class EncodedChunk:
    """One chunk ready to store: its content address, raw size and stored encoding (and,
    in a key scope, the scope and the sha256 of the sealed bytes)."""

    digest: str
    size: int
    codec: int
    stored: bytes
    scope_id: int | None = None
    sealed_digest: bytes | None = None

    @classmethod
    def of(
        cls,
        raw: bytes | memoryview,
        *,
        compress: bool = True,
        scope: Scope = PLAINTEXT,
        cache: EncodingCache | None = None,
    ) -> EncodedChunk:
        """Hash and encode raw bytes (outside any lock; hashlib, zstd and OpenSSL release
        the GIL). ``compress=False`` stores them raw without trying (a stream found
        incompressible); ``scope`` addresses and seals them for a key scope; ``cache``
        supplies (and keeps) the encoding made earlier for the same address."""
        data = raw if isinstance(raw, bytes) else bytes(raw)
        digest = scope.address(data)
        encoding = None if cache is None else cache.get(scope.scope_id, digest, len(data))
        if encoding is None:
            encoding = scope.encode(data, digest, compress=compress)
            if cache is not None:
                cache.put(scope.scope_id, digest, len(data), encoding)
        codec_id, stored, sealed_digest = encoding
        return cls(digest, len(data), codec_id, stored, scope.scope_id, sealed_digest)


_CHUNK_INSERT = (
    " INTO chunk (digest, size, last_touched_ms, codec, stored_size, scope_id, sealed_digest)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _chunk_row(chunk: EncodedChunk, now_ms: int) -> tuple[object, ...]:
    return (
        chunk.digest,
        chunk.size,
        now_ms,
        chunk.codec,
        len(chunk.stored),
        chunk.scope_id,
        chunk.sealed_digest,
    )


def decoded(
    codec_id: object,
    stored: object,
    size: int,
    scope: Scope = PLAINTEXT,
    digest: str = "",
    *,
    blob: bool = False,
) -> bytes | None:
    """The raw bytes of a stored value, or None when it does not decode to ``size`` bytes
    (a damaged record may hold any type where the bytes should be; a sealed one must open
    under ``scope`` with the associated data of ``digest``)."""
    data = b"" if stored is None else stored
    if not isinstance(data, bytes) or type(codec_id) is not int:
        return None
    if codec_id == codec.RAW and not scope.sealed:
        return data if len(data) == size else None
    if scope.sealed and not _is_hex_digest(digest):
        return None
    try:
        return scope.decode(codec_id, data, size, digest, blob=blob)
    except errors.CkptdbError:
        return None


def _is_hex_digest(value: object) -> bool:
    if not isinstance(value, str) or len(value) != 64:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


@dataclass
class PreparedBlob:
    """A blob ready to be referenced by the commit transaction."""

    digest: str
    size: int
    #: the raw bytes of a blob stored whole (inline), and how they are stored
    inline: bytes | None = None
    inline_codec: int = codec.RAW
    inline_stored: bytes | None = None
    #: the key scope the blob was addressed (and its bytes sealed) for
    scope: Scope = PLAINTEXT
    inline_sealed_digest: bytes | None = None
    chunk_ids: array[int] = field(default_factory=lambda: array("q"))
    chunk_digests: DigestList = field(default_factory=DigestList)
    #: chunks still to be written, inside the commit transaction (a value held in memory)
    chunks: list[EncodedChunk] = field(default_factory=list)
    bytes_staged: int = 0
    reference: bool = False  # a BlobRef: the blob must already exist
    #: digests of stored chunks whose damaged bytes staging rewrote from this value
    repaired: list[str] = field(default_factory=list)

    @property
    def chunk_list_digest(self) -> str | None:
        """Digest over the ordered chunk digests (None for an inline blob)."""
        return None if self.inline is not None else canonical.chunk_list_digest(self.chunk_digests)


class BackgroundHash:
    """sha256 over a sequence of buffers, updated in order on a helper thread.

    The whole-blob digest of a chunked blob is computed while the caller hashes each
    chunk and SQLite reads or writes it (hashlib and SQLite both release the GIL), so a
    large entry is hashed twice -- per chunk and whole -- in about the time of once.
    A buffer handed to :meth:`update` must not change until its future is done.
    """

    def __init__(self, scope: Scope = PLAINTEXT) -> None:
        self._hash = scope.hasher()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptdb-hash")
        # One worker runs the updates in order. A bounded window of futures keeps memory
        # bounded if the hashing falls behind (each queued buffer is held until hashed).
        self._window: deque[Future[None]] = deque()

    def update(self, data: bytes | memoryview) -> Future[None]:
        """Queue ``data``; returns the future to wait on before reusing its buffer."""
        future = self._pool.submit(self._hash.update, data)
        self._window.append(future)
        while len(self._window) > _HASH_WINDOW:
            self._window.popleft().result()
        return future

    def hexdigest(self) -> str:
        """The digest of everything queued (waits for it)."""
        if self._window:
            self._window[-1].result()
            self._window.clear()
        return self._hash.hexdigest()

    def close(self) -> None:
        """Stop the helper thread (after the queued work)."""
        self._pool.shutdown(wait=True)


def verified_inline(
    stored: object,
    size: int,
    digest: str,
    codec_id: object = codec.RAW,
    scope: Scope = PLAINTEXT,
) -> bytes | None:
    """The raw bytes of an inline blob when they decode to ``size`` bytes with ``digest``,
    else None. A damaged record can hold a value of any type where the bytes should be."""
    data = decoded(codec_id, stored, size, scope, digest, blob=True)
    if data is None:
        return None
    return data if scope.address(data) == digest else None


class BlobStore:
    """The ``blob``, ``blob_chunk``, ``chunk`` and ``chunk_data`` tables, on one connection.

    The only code that reads or writes them. The one state kept between calls is the
    cache of chunk encodings (never of stored bytes: what SQLite holds is read each time); a
    function that repairs damaged bytes says so in what it returns.
    """

    def __init__(
        self,
        conn: Connection,
        chunk_size: int,
        chunker: Chunker,
        keyring: Keyring | None = None,
        encodings: EncodingCache | None = None,
    ) -> None:
        self.conn = conn
        self.chunk_size = chunk_size
        self.chunker = chunker
        #: the handle's keys: which scope a stored record's ``scope_id`` names
        self.keyring = keyring if keyring is not None else Keyring()
        #: encodings of chunks this handle made recently (shared with its offline store)
        self.encodings = encodings if encodings is not None else EncodingCache()

    # -- chunks (staged before the commit transaction, each in its own) ------------------

    def stage_chunks(
        self, chunks: list[EncodedChunk], now_ms: int
    ) -> tuple[list[int], int, list[str]]:
        """Store chunks in one short transaction of their own (before the commit that will
        reference them). Returns (chunk ids, stored bytes written, digests repaired)."""
        with self.conn.write_transaction():
            return self.put_chunks(chunks, now_ms, touch=True)

    def put_chunks(
        self, chunks: list[EncodedChunk], now_ms: int, *, touch: bool
    ) -> tuple[list[int], int, list[str]]:
        """Make sure every chunk is stored (inside the caller's write transaction). Returns
        (chunk ids in order, stored bytes written, digests whose damaged copies were
        rewritten).

        A chunk that already exists has its stored bytes compared with ours; if they differ
        and do not decode to bytes with the digest (damage), they are rewritten from ours,
        so a new checkpoint never inherits corrupt bytes through deduplication. ``touch``
        restarts an existing chunk's grace period (staging, where the referencing commit
        comes later); inside the commit transaction the reference itself protects it.
        """
        ids: list[int] = []
        written = 0
        repaired: list[str] = []
        for chunk in chunks:
            if touch:
                # Staging a stream: new chunks are the common case, so try the insert first.
                self.conn.execute("INSERT OR IGNORE" + _CHUNK_INSERT, _chunk_row(chunk, now_ms))
                if self.conn.changes() == 1:
                    chunk_id = self.conn.last_insert_rowid()
                    self._write_chunk_bytes(chunk_id, chunk.stored)
                    ids.append(chunk_id)
                    written += len(chunk.stored)
                    continue
            # The stored bytes come back only when they differ from ours (rare: another
            # encoding, or damage), so a dedup hit copies nothing out of SQLite.
            # (Sealed bytes never compare equal -- a fresh nonce each time -- so a dedup
            # hit in a key scope opens the stored copy to check it.)
            row = self.conn.one(
                "SELECT c.chunk_id, d.data = ?1, c.codec,"
                " CASE WHEN d.data = ?1 THEN NULL ELSE d.data END, c.scope_id FROM chunk c"
                " LEFT JOIN chunk_data d ON d.chunk_id = c.chunk_id WHERE c.digest = ?2",
                (chunk.stored, chunk.digest),
            )
            if row is None:
                # Written by the commit that references it: only references protect it, so
                # its grace period is over from the start (a later staging touch restarts it).
                ids.append(self.insert_chunk(chunk, now_ms if touch else 0))
                written += len(chunk.stored)
                continue
            chunk_id = int(row[0])
            ids.append(chunk_id)
            if touch:
                self.touch_chunk(chunk_id, now_ms)
            if row[1] == 1:
                continue
            if row[4] == chunk.scope_id:
                scope = self.keyring.scope(self.conn, chunk.scope_id)
                if scope.holds_same(
                    row[2], row[3], chunk.codec, chunk.stored, chunk.digest, chunk.size
                ):
                    continue  # sealed intact: our encoding under another nonce
                raw = decoded(row[2], row[3], chunk.size, scope, chunk.digest)
                if raw is not None and scope.address(raw) == chunk.digest:
                    continue  # stored intact in another encoding
            self.conn.execute("DELETE FROM chunk_data WHERE chunk_id = ?", (chunk_id,))
            self.conn.execute(
                "UPDATE chunk SET codec = ?, stored_size = ?, scope_id = ?, sealed_digest = ?"
                " WHERE chunk_id = ?",
                (chunk.codec, len(chunk.stored), chunk.scope_id, chunk.sealed_digest, chunk_id),
            )
            self._write_chunk_bytes(chunk_id, chunk.stored)
            written += len(chunk.stored)
            repaired.append(chunk.digest)
        return ids, written, repaired

    def find_chunk(self, digest: str) -> int | None:
        """The id of the chunk with this digest, if stored."""
        value = self.conn.scalar("SELECT chunk_id FROM chunk WHERE digest = ?", (digest,))
        return None if value is None else int(value)

    def touch_chunk(self, chunk_id: int, now_ms: int) -> None:
        """Restart a chunk's grace period (a dedup hit touches this small row, never the
        bytes)."""
        self.conn.execute(
            "UPDATE chunk SET last_touched_ms = ? WHERE chunk_id = ?", (now_ms, chunk_id)
        )

    def insert_chunk(self, chunk: EncodedChunk, now_ms: int) -> int:
        """Insert a new chunk whose encoding the caller made or verified (inside a write
        transaction). Returns its id."""
        self.conn.execute("INSERT" + _CHUNK_INSERT, _chunk_row(chunk, now_ms))
        chunk_id = self.conn.last_insert_rowid()
        self._write_chunk_bytes(chunk_id, chunk.stored)
        return chunk_id

    def _write_chunk_bytes(self, chunk_id: int, data: bytes | memoryview) -> None:
        if len(data) <= _BIND_LIMIT:
            self.conn.execute(
                "INSERT INTO chunk_data (chunk_id, data) VALUES (?, ?)", (chunk_id, data)
            )
            return
        # zeroblob + incremental write: large bytes go straight into the row's pages
        # instead of being copied into a bound parameter and a record first.
        self.conn.execute(
            "INSERT INTO chunk_data (chunk_id, data) VALUES (?, zeroblob(?))",
            (chunk_id, len(data)),
        )
        self.conn.write_blob("chunk_data", "data", chunk_id, data)

    # -- blobs (inside the commit transaction) -------------------------------------------

    def insert(self, blob: PreparedBlob, now_ms: int) -> tuple[int, int, bool]:
        """Make sure the blob row exists. Returns (blob_id, new bytes written, repaired).

        For a chunked blob, every staged chunk must still exist: GC may have reclaimed a
        staged chunk whose grace period ran out before this commit. Then the commit fails
        with the retryable ChunkMissingError instead of publishing missing bytes.
        """
        scope_id = blob.scope.scope_id
        if blob.reference:
            blob_id, _ = self.find_blob(blob.digest, expect_size=blob.size, scope_id=scope_id)
            return blob_id, 0, False
        if blob.inline is not None:
            stored = blob.inline if blob.inline_stored is None else blob.inline_stored
            # New content is the common case: one statement when it is.
            self.conn.execute(
                "INSERT OR IGNORE INTO blob (digest, size, chunk_count, inline_data,"
                " created_at_ms, codec, scope_id, sealed_digest) VALUES (?, ?, 0, ?, ?, ?, ?, ?)",
                (
                    blob.digest,
                    blob.size,
                    stored,
                    now_ms,
                    blob.inline_codec,
                    scope_id,
                    blob.inline_sealed_digest,
                ),
            )
            if self.conn.changes() == 1:
                return self.conn.last_insert_rowid(), len(stored), False
            # As for chunks: the stored copy comes back only when it differs from ours.
            row = self.conn.one(
                "SELECT blob_id, chunk_count, inline_data = ?1, codec,"
                " CASE WHEN inline_data = ?1 THEN NULL ELSE inline_data END, scope_id FROM blob"
                " WHERE digest = ?2",
                (stored, blob.digest),
            )
            if row is None:
                raise errors.CorruptionError(
                    f"blob {blob.digest[:12]} is stored but cannot be found by its digest (a "
                    "damaged index); run `ckptdb verify`",
                    reason="index_damaged",
                )
            if (
                row[1] == 0
                and row[2] != 1
                and (
                    row[5] != scope_id
                    or not (
                        blob.scope.holds_same(
                            row[3],
                            row[4],
                            blob.inline_codec,
                            stored,
                            blob.digest,
                            blob.size,
                            blob=True,
                        )
                        or verified_inline(row[4], blob.size, blob.digest, row[3], blob.scope)
                    )
                )
            ):
                # The stored copy was damaged; the caller's bytes hash to the digest.
                self.conn.execute(
                    "UPDATE blob SET inline_data = ?, codec = ?, scope_id = ?, sealed_digest = ?"
                    " WHERE blob_id = ?",
                    (stored, blob.inline_codec, scope_id, blob.inline_sealed_digest, row[0]),
                )
                return int(row[0]), len(stored), True
            return int(row[0]), 0, False
        existing = self.blob_id(blob.digest, scope_id=scope_id)
        if existing is not None:
            # Chunks staged for it (new or repaired) are still bytes this commit wrote.
            return existing, blob.bytes_staged, False
        written = blob.bytes_staged
        if blob.chunks:
            _, written_now, repaired = self.put_chunks(blob.chunks, now_ms, touch=False)
            written += written_now
            blob.repaired.extend(repaired)
        blob_id = self.insert_chunked(
            blob.digest,
            blob.size,
            blob.chunk_digests,
            blob.chunk_list_digest,
            now_ms,
            scope_id=scope_id,
        )
        return blob_id, written, False

    def insert_inline(
        self, digest: str, size: int, stored: bytes, codec_id: int, now_ms: int
    ) -> int:
        """Insert a new plaintext inline blob whose stored bytes the caller verified.
        Returns its id."""
        self.conn.execute(
            "INSERT INTO blob (digest, size, chunk_count, inline_data, created_at_ms, codec)"
            " VALUES (?, ?, 0, ?, ?, ?)",
            (digest, size, stored, now_ms, codec_id),
        )
        return self.conn.last_insert_rowid()

    def insert_chunked(
        self,
        digest: str,
        size: int,
        chunk_digests: Sequence[str],
        list_digest: str | None,
        now_ms: int,
        *,
        scope_id: int | None = None,
    ) -> int:
        """Insert a chunked blob over already written chunks (inside the commit
        transaction), its chunk list in bounded batches. ChunkMissingError (retryable, and
        the caller's transaction rolls back) when GC took a staged chunk meanwhile."""
        self.conn.execute(
            "INSERT INTO blob (digest, size, chunk_count, chunk_list_digest, created_at_ms,"
            " scope_id) VALUES (?, ?, ?, ?, ?, ?)",
            (digest, size, len(chunk_digests), list_digest, now_ms, scope_id),
        )
        blob_id = self.conn.last_insert_rowid()
        for start in range(0, len(chunk_digests), _ID_BATCH):
            part = list(chunk_digests[start : start + _ID_BATCH])
            chunk_ids = self.resolve_chunks(part)
            missing = sum(1 for c in chunk_ids if c is None)
            if missing:
                raise errors.ChunkMissingError(
                    f"{missing} staged chunk(s) of blob {digest[:12]} were garbage-collected "
                    "before the commit; nothing was published. Retry (it re-stages them)."
                )
            self.conn.executemany(
                "INSERT INTO blob_chunk (blob_id, seq, chunk_id) VALUES (?, ?, ?)",
                [(blob_id, start + i, chunk_id) for i, chunk_id in enumerate(chunk_ids)],
            )
        return blob_id

    def find_blob(
        self, digest: str, *, expect_size: int | None = None, scope_id: int | None = None
    ) -> tuple[int, int]:
        """(blob_id, size) of a stored blob of key scope ``scope_id`` (None: plaintext);
        BlobMissingError when it is not stored there."""
        row = self.conn.one(
            "SELECT blob_id, size FROM blob WHERE digest = ? AND scope_id IS ?", (digest, scope_id)
        )
        if row is None:
            raise errors.BlobMissingError(
                f"the referenced blob {digest[:12]} is not stored (never was, or it was "
                "garbage-collected); nothing was published. Commit the bytes instead.",
                digest=digest,
            )
        if expect_size is not None and int(row[1]) != expect_size:
            raise errors.InvalidEntryError(
                f"the referenced blob {digest[:12]} has {row[1]} bytes, not {expect_size}"
            )
        return int(row[0]), int(row[1])

    def blob_id(self, digest: str, *, scope_id: int | None = None) -> int | None:
        """The id of the blob with this digest in key scope ``scope_id``, if stored."""
        value = self.conn.scalar(
            "SELECT blob_id FROM blob WHERE digest = ? AND scope_id IS ?", (digest, scope_id)
        )
        return None if value is None else int(value)

    def inline_stored(self, blob_id: int) -> tuple[object, object]:
        """(codec, stored bytes) of an inline blob, as stored (unverified)."""
        row = self.conn.one("SELECT codec, inline_data FROM blob WHERE blob_id = ?", (blob_id,))
        return (None, None) if row is None else (row[0], row[1])

    def chunk_list_digest(self, blob_id: int) -> object:
        """The stored (unverified) chunk list digest of a blob."""
        return self.conn.scalar("SELECT chunk_list_digest FROM blob WHERE blob_id = ?", (blob_id,))

    def scope_of_blob(self, blob_id: int) -> Scope:
        """The key scope a stored blob names (PLAINTEXT when none, or the blob is gone)."""
        return self.keyring.scope(
            self.conn, self.conn.scalar("SELECT scope_id FROM blob WHERE blob_id = ?", (blob_id,))
        )

    def resolve_chunks(self, digests: Sequence[str]) -> list[int | None]:
        """The chunk id of each digest now (None where the chunk is gone).

        Chunks are looked up by digest inside the commit transaction, never by the id
        staging returned: GC may delete a staged chunk and SQLite may give its rowid to the
        next chunk inserted, so an id alone could silently name other bytes.
        """
        found: dict[str, int] = {}
        unique = sorted(set(digests))
        for start in range(0, len(unique), _ID_BATCH):
            part = unique[start : start + _ID_BATCH]
            marks = ",".join("?" * len(part))
            found.update(
                (str(d), int(c))
                for d, c in self.conn.execute(
                    f"SELECT digest, chunk_id FROM chunk WHERE digest IN ({marks})", part
                )
            )
        return [found.get(d) for d in digests]

    # -- reading ---------------------------------------------------------------------------

    def read_all(self, blob_id: int, digest: str, size: int, where: dict[str, Any]) -> bytes:
        """All bytes of a blob, verified against ``digest`` before they are returned."""
        row = self.conn.one(
            "SELECT chunk_count, inline_data, codec, scope_id FROM blob WHERE blob_id = ?",
            (blob_id,),
        )
        if row is None:
            raise errors.CheckpointNotFoundError(
                f"blob {digest[:12]} is gone (its checkpoint was garbage-collected)", **where
            )
        scope = self.keyring.scope(self.conn, row[3])
        if row[0] == 0:
            data = verified_inline(row[1], size, digest, row[2], scope)
            if data is None:
                raise errors.CorruptionError(
                    f"stored bytes of entry {where.get('entry')!r} do not match digest "
                    f"{digest[:12]}; nothing was returned",
                    reason="blob_digest_mismatch",
                    **where,
                )
            return data
        if size < READ_AT_ONCE:
            return self._read_small_chunked(blob_id, digest, size, where, scope)
        reader = ChunkedBlobReader(self, blob_id, digest, size, where)
        try:
            return reader.readall()
        finally:
            reader.close()

    def _read_small_chunked(
        self, blob_id: int, digest: str, size: int, where: dict[str, Any], scope: Scope
    ) -> bytes:
        """A chunked blob small enough to hold whole: every chunk in one query, each
        verified, then the whole (inside the caller's read transaction)."""
        list_digest = self.chunk_list_digest(blob_id)
        rows = self.conn.execute(
            "SELECT c.digest, c.size, coalesce(c.codec, 0), d.data FROM blob_chunk bc"
            " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id"
            " LEFT JOIN chunk_data d ON d.chunk_id = bc.chunk_id"
            " WHERE bc.blob_id = ? ORDER BY bc.seq",
            (blob_id,),
        )

        def corrupt(what: str, reason: str) -> errors.CorruptionError:
            return errors.CorruptionError(
                f"entry {where.get('entry')!r} (blob {digest[:12]}): {what}; nothing was returned",
                reason=reason,
                **where,
            )

        if not rows and not self.blob_exists(blob_id):
            raise errors.CheckpointNotFoundError(
                f"blob {digest[:12]} is gone (its checkpoint was garbage-collected)", **where
            )
        if any(not isinstance(r[0], str) or not isinstance(r[1], int) for r in rows):
            raise corrupt("a chunk of the blob is missing", "chunk_missing")
        if list_digest != canonical.chunk_list_digest(str(r[0]) for r in rows):
            raise corrupt("the chunk list does not match its digest", "chunk_list_mismatch")
        parts: list[bytes] = []
        for index, (chunk_digest, chunk_size, codec_id, stored) in enumerate(rows):
            raw = decoded(codec_id, stored, chunk_size, scope, chunk_digest)
            if raw is None or scope.address(raw) != chunk_digest:
                raise corrupt(f"chunk {index} does not match its digest", "chunk_digest_mismatch")
            parts.append(raw)
        data = b"".join(parts)
        if len(data) != size:
            raise corrupt("chunk sizes do not add up to the entry size", "blob_size_mismatch")
        if scope.address(data) != digest:
            raise corrupt("the blob digest does not match", "blob_digest_mismatch")
        return data

    def chunk_list(
        self, blob_id: int
    ) -> tuple[str | None, list[tuple[int, str | None, int, int, int]]]:
        """(stored chunk_list_digest, [(chunk_id, chunk digest, size, codec, stored size)])
        of a chunked blob; digest and size are None where the chunk is gone. Values are
        type-checked."""
        with self.conn.read_transaction():
            list_digest = self.conn.scalar(
                "SELECT chunk_list_digest FROM blob WHERE blob_id = ?", (blob_id,)
            )
            rows = self.conn.execute(
                "SELECT bc.chunk_id, c.digest, c.size, coalesce(c.codec, 0),"
                " coalesce(c.stored_size, c.size, 0) FROM blob_chunk bc"
                " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id"
                " WHERE bc.blob_id = ? ORDER BY bc.seq",
                (blob_id,),
            )
        check_types((list_digest,), ((str, type(None)),), "blob row")
        for r in rows:
            check_types(r, (int, (str, type(None)), (int, type(None)), int, int), "chunk list row")
        return list_digest, [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def read_chunk(self, chunk_id: int) -> bytes | None:
        """One chunk's stored (unverified) bytes, copied once out of SQLite's pages; None
        if the chunk's bytes are gone (or are no BLOB)."""
        return self.conn.read_blob("chunk_data", "data", chunk_id)

    def read_chunk_into(self, chunk_id: int, buffer: bytearray) -> int | None:
        """Read one chunk's stored (unverified) bytes into ``buffer``; returns the length,
        or None if the chunk is gone."""
        return self.conn.read_blob_into("chunk_data", "data", chunk_id, buffer)

    def blob_exists(self, blob_id: int) -> bool:
        """True while the blob row exists."""
        return self.conn.one("SELECT 1 FROM blob WHERE blob_id = ?", (blob_id,)) is not None


#: One fetched chunk, values as stored: (digest, size, codec, stored bytes or None).
_Fetched: TypeAlias = tuple[Any, Any, Any, bytes | None]
#: One fetched window: (its verification on the helper, or None; index of its first
#: chunk; its chunks; the bytes it holds, stored or decoded, whichever is more).
_Window: TypeAlias = tuple["Future[list[bytes]] | None", int, list[_Fetched], int]


class ChunkedBlobReader(io.RawIOBase):
    """A read-only binary stream over a chunked blob that verifies before it hands out.

    Before the first byte, one pass over the chunk list checks it against its digest and
    the sizes against the blob's, keeping the verified digests compactly. Bytes are then
    fetched in windows of chunks (one short read transaction each, at most
    :data:`READ_WINDOW_BYTES` of stored bytes, each chunk copied once out of SQLite's pages
    by incremental blob I/O), each chunk decoded and checked against its digest before any
    of its bytes are handed out, and the last one only once the whole blob matches. So
    memory is bounded by the read-ahead, and a long-lived stream never blocks writers or
    checkpoints.

    A blob of at least :data:`PARALLEL_READ_MIN` bytes is read as a pipeline over three
    threads (hashlib, zstd, OpenSSL and SQLite's blob reads all release the GIL): the
    caller's thread fetches windows up to :data:`READ_AHEAD_BYTES` ahead and hands out
    verified chunks; one helper decodes and verifies each fetched window, in order; another
    feeds the whole-blob hash with the verified windows, in order, at most
    :data:`_WHOLE_BEHIND_BYTES` behind. (Work goes to the helpers a window at a time, so
    futures and thread wake-ups are paid per window, not per chunk.) Helpers
    never touch the connection: every statement runs on the caller's thread, inside
    ``guard`` (the handle's lock, for a stream read piece by piece) or inside the caller's
    own read transaction (``guard`` None). :meth:`close` stops both helpers.
    """

    def __init__(
        self,
        store: BlobStore,
        blob_id: int,
        digest: str,
        size: int,
        where: dict[str, Any],
        *,
        guard: Callable[[], AbstractContextManager[object]] | None = None,
    ) -> None:
        super().__init__()
        self._store = store
        self._blob_id = blob_id
        self._digest = digest
        self._size = size
        self._where = where
        self._guard = guard if guard is not None else nullcontext
        self._digests = DigestList()
        conn = store.conn
        total = 0
        with self._guard(), conn.read_transaction():
            list_digest = store.chunk_list_digest(blob_id)
            self._scope = store.scope_of_blob(blob_id)
            for row in conn.iterate(
                "SELECT c.digest, c.size FROM blob_chunk bc"
                " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id WHERE bc.blob_id = ?"
                " ORDER BY bc.seq",
                (blob_id,),
            ):
                chunk_digest, chunk_size = row
                if not (
                    isinstance(chunk_digest, str)
                    and isinstance(chunk_size, int)
                    and len(chunk_digest) == 64
                ):
                    self._corrupt("a chunk of the blob is missing", "chunk_missing")
                try:
                    self._digests.append(chunk_digest)
                except ValueError:
                    self._corrupt("a chunk digest is not hex", "chunk_list_mismatch")
                total += chunk_size
            exists = list_digest is not None or bool(self._digests) or store.blob_exists(blob_id)
        if not exists:
            raise errors.CheckpointNotFoundError(
                f"blob {digest[:12]} is gone (its checkpoint was garbage-collected)", **where
            )
        if list_digest != canonical.chunk_list_digest(self._digests):
            self._corrupt("the chunk list does not match its digest", "chunk_list_mismatch")
        if total != size:
            self._corrupt("chunk sizes do not add up to the entry size", "blob_size_mismatch")
        #: fetched windows in order: (their verification or None, first index, rows, cost)
        self._ahead: deque[_Window] = deque()
        self._ahead_bytes = 0
        #: verified raw chunks of the window being handed out, and whether one after them
        #: failed verification (reported once they are taken)
        self._ready: deque[bytes] = deque()
        self._ready_failed = False
        self._next = 0  # index of the next chunk to hand out
        self._fetched = 0  # index of the next chunk to fetch
        self._buffer = memoryview(b"")
        self._current = b""
        self._position = 0
        self._failure: errors.CkptdbError | None = None
        self._whole = self._scope.hasher()
        self._verifier: ThreadPoolExecutor | None = None
        self._hasher: ThreadPoolExecutor | None = None
        self._hashing: deque[tuple[Future[None], int]] = deque()
        self._hashing_bytes = 0
        if size >= PARALLEL_READ_MIN and len(self._digests) > 1:
            self._verifier = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptdb-verify")
            self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptdb-hash")

    def _corrupt(self, what: str, detail_code: str) -> NoReturn:
        raise errors.CorruptionError(
            f"entry {self._where.get('entry')!r} (blob {self._digest[:12]}): {what}; "
            "nothing more was returned",
            reason=detail_code,
            **self._where,
        )

    def readable(self) -> bool:
        return True

    # -- fetching (the caller's thread, inside the guard) ---------------------------------

    def _fetch_window(self) -> None:
        """Fetch the next window of chunks in one read transaction and queue each for
        verification. Metadata and bytes come from one snapshot (a repair that re-encodes
        a chunk between them cannot pair one chunk's codec with another encoding)."""
        store = self._store
        conn = store.conn
        fetched: list[_Fetched] = []
        with self._guard(), conn.read_transaction():
            rows = conn.execute(
                "SELECT bc.chunk_id, c.digest, c.size, coalesce(c.codec, 0) FROM blob_chunk bc"
                " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id"
                " WHERE bc.blob_id = ? AND bc.seq >= ? ORDER BY bc.seq LIMIT ?",
                (self._blob_id, self._fetched, _WINDOW_ROWS),
            )
            if not rows and not store.blob_exists(self._blob_id):
                raise errors.CheckpointNotFoundError(
                    f"blob {self._digest[:12]} was garbage-collected while being read",
                    **self._where,
                )
            taken = 0
            for chunk_id, chunk_digest, chunk_size, codec_id in rows:
                stored = store.read_chunk(chunk_id) if type(chunk_id) is int else None
                fetched.append((chunk_digest, chunk_size, codec_id, stored))
                taken += len(stored or b"")
                if taken >= READ_WINDOW_BYTES:
                    break
        cost = 0
        for row in fetched:
            raw_size = row[1] if type(row[1]) is int else 0
            cost += max(len(row[3] or b""), min(raw_size, codec.MAX_RAW_SIZE))
        first = self._fetched
        future = (
            None
            if self._verifier is None
            else self._verifier.submit(self._verified_window, first, fetched)
        )
        self._ahead.append((future, first, fetched, cost))
        self._ahead_bytes += cost
        self._fetched = first + len(fetched)

    def _read_ahead(self) -> None:
        """Keep up to READ_AHEAD_BYTES fetched ahead of the caller (one window at least)."""
        limit = READ_AHEAD_BYTES if self._verifier is not None else 0
        while self._fetched < len(self._digests) and (not self._ahead or self._ahead_bytes < limit):
            before = self._fetched
            self._fetch_window()
            if self._fetched == before:
                return  # the list ended early: the caller reports the missing chunk

    # -- verifying (a helper thread, or the caller's for a small blob) --------------------

    def _verified_window(self, first: int, rows: list[_Fetched]) -> list[bytes]:
        """The raw bytes of the fetched chunks from index ``first`` on that decode and
        match their verified digests, up to the first that does not (the list is then
        shorter than ``rows``). Touches no connection and no state the caller changes."""
        out: list[bytes] = []
        scope = self._scope
        for index, (chunk_digest, chunk_size, codec_id, stored) in enumerate(rows, first):
            expected = self._digests[index]
            if chunk_digest != expected or type(chunk_size) is not int:
                break
            raw = decoded(codec_id, stored, chunk_size, scope, expected)
            if raw is None or scope.address(raw) != expected:
                break
            out.append(raw)
        return out

    def _hash_window(self, raws: list[bytes]) -> None:
        for raw in raws:
            self._whole.update(raw)

    # -- handing out (the caller's thread) ------------------------------------------------

    def _load_next(self) -> bool:
        if self._failure is not None:
            raise self._failure  # damage found once stays reported: nothing after it
        if self._next >= len(self._digests):
            return False
        try:
            return self._hand_out_next()
        except (errors.CorruptionError, errors.CheckpointNotFoundError) as exc:
            self._failure = exc
            raise

    def _hand_out_next(self) -> bool:
        self._buffer = memoryview(b"")  # the caller has taken everything from it
        self._current = b""
        if not self._ready and not self._ready_failed:
            self._take_window()
        if not self._ready:
            with self._guard():
                gone = not self._store.blob_exists(self._blob_id)
            if gone:
                raise errors.CheckpointNotFoundError(
                    f"blob {self._digest[:12]} was garbage-collected while being read",
                    **self._where,
                )
            self._corrupt(f"chunk {self._next} does not match its digest", "chunk_digest_mismatch")
        raw = self._ready.popleft()
        self._next += 1
        # The last chunk is only handed out once the whole blob matches its digest.
        if self._next == len(self._digests):
            for done, _ in self._hashing:
                done.result()
            self._hashing.clear()
            if self._whole.hexdigest() != self._digest:
                self._corrupt("the blob digest does not match", "blob_digest_mismatch")
        self._current = raw
        self._buffer = memoryview(raw)
        return True

    def _take_window(self) -> None:
        """Make the next fetched window's verified chunks ready, and queue them for the
        whole-blob hash."""
        if not self._ahead:
            self._read_ahead()
            if not self._ahead:
                self._corrupt(f"chunk {self._next} is missing", "chunk_missing")
        future, first, rows, cost = self._ahead.popleft()
        self._ahead_bytes -= cost
        # Fetch the next window now, while the helper verifies what is already queued.
        self._read_ahead()
        raws = self._verified_window(first, rows) if future is None else future.result()
        self._ready.extend(raws)
        self._ready_failed = len(raws) < len(rows)
        if self._hasher is None:
            self._hash_window(raws)
            return
        size = sum(len(raw) for raw in raws)
        self._hashing.append((self._hasher.submit(self._hash_window, raws), size))
        self._hashing_bytes += size
        # Bounded memory: wait when the whole-blob hash falls this far behind.
        while self._hashing_bytes > _WHOLE_BEHIND_BYTES and len(self._hashing) > 1:
            done, n = self._hashing.popleft()
            done.result()
            self._hashing_bytes -= n

    def close(self) -> None:
        """Stop the helper threads (also when the stream was not read to the end): queued
        verifications are cancelled, the one running finishes, and both threads exit."""
        if not self.closed:
            try:
                for pool in (self._verifier, self._hasher):
                    if pool is not None:
                        pool.shutdown(wait=True, cancel_futures=True)
            finally:
                self._ahead.clear()
                self._ready.clear()
                self._hashing.clear()
                self._buffer = memoryview(b"")
                self._current = b""
        super().close()

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        while not self._buffer:
            if not self._load_next():
                return 0
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        self._position += n
        return n

    def readall(self) -> bytes:
        parts: list[bytes] = []
        if self._buffer:
            parts.append(bytes(self._buffer))
            self._buffer = memoryview(b"")
        while self._load_next():
            parts.append(self._current)  # the verified chunk itself, not a copy
            self._buffer = memoryview(b"")
        data = b"".join(parts)
        self._position += len(data)
        return data

    def tell(self) -> int:
        return self._position

    def iter_chunks(self) -> Iterator[bytes]:
        """Yield the remaining bytes as verified chunk-sized pieces."""
        if self._buffer:
            yield bytes(self._buffer)
            self._buffer = memoryview(b"")
        while self._load_next():
            piece = self._current  # the verified chunk itself, not a copy
            self._buffer = memoryview(b"")
            self._position += len(piece)
            yield piece


# -- scans and deletion (GC and verify) ---------------------------------------------------
# GC passes the names of its temporary tables of candidate ids (one ``seq`` column).


def listed_blob_totals(conn: Connection, blob_table: str) -> tuple[int, int]:
    """(count, inline bytes) of the blobs a temporary table lists."""
    row = conn.one(
        "SELECT count(*), coalesce(sum(CASE WHEN chunk_count = 0 THEN size ELSE 0 END), 0)"
        f" FROM blob WHERE blob_id IN (SELECT seq FROM temp.{blob_table})"
    )
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def chunks_freed_with(conn: Connection, blob_table: str, cutoff_ms: int) -> tuple[int, int]:
    """(count, bytes) of the chunks that deleting the listed blobs would free, with the
    orphans past their grace period (a dry run's estimate)."""
    row = conn.one(
        "SELECT count(*), coalesce(sum(size), 0) FROM chunk c WHERE c.last_touched_ms < ? AND ("
        "  c.chunk_id IN (SELECT bc.chunk_id FROM blob_chunk bc"
        f"   WHERE bc.blob_id IN (SELECT seq FROM temp.{blob_table}))"
        "  AND NOT EXISTS (SELECT 1 FROM blob_chunk bc2 WHERE bc2.chunk_id = c.chunk_id"
        f"   AND bc2.blob_id NOT IN (SELECT seq FROM temp.{blob_table}))"
        "  OR NOT EXISTS (SELECT 1 FROM blob_chunk bc3 WHERE bc3.chunk_id = c.chunk_id))",
        (cutoff_ms,),
    )
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def list_chunks_of(conn: Connection, blob_table: str, chunk_table: str) -> None:
    """Add to a temporary table (one ``seq`` column) the distinct chunk ids the listed
    blobs use, without a round trip through Python."""
    conn.execute(
        f"INSERT OR IGNORE INTO temp.{chunk_table} (seq) SELECT DISTINCT chunk_id"
        f" FROM blob_chunk WHERE blob_id IN (SELECT seq FROM temp.{blob_table})"
    )


def delete_listed(conn: Connection, blob_table: str) -> tuple[int, int]:
    """Delete the listed blobs and their chunk lists. Returns (count, inline bytes)."""
    listed = f"(SELECT seq FROM temp.{blob_table})"
    # Chunk lists first, in one statement: the ON DELETE CASCADE would run a sub-program
    # per blob row (kept as the schema's safety net; it then finds nothing).
    conn.execute(f"DELETE FROM blob_chunk WHERE blob_id IN {listed}")
    # RETURNING counts what was deleted in the same pass (no separate totals query).
    rows = conn.execute(f"DELETE FROM blob WHERE blob_id IN {listed} RETURNING size, chunk_count")
    # A damaged size counts as 0, as SQL's sum() of a non-numeric text would.
    return len(rows), sum(size for size, chunks in rows if chunks == 0 and type(size) is int)


def delete_unused_chunks(conn: Connection, candidates_sql: str, cutoff_ms: int) -> tuple[int, int]:
    """Delete the candidate chunks no blob references whose grace period is over
    (``candidates_sql`` may use the :cutoff parameter). Returns (count, bytes)."""
    rows = conn.execute(
        f"DELETE FROM chunk WHERE chunk_id IN ({candidates_sql}) AND last_touched_ms < :cutoff"
        " AND NOT EXISTS (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = chunk.chunk_id)"
        " RETURNING size",
        {"cutoff": cutoff_ms},
    )
    return len(rows), sum(r[0] for r in rows if type(r[0]) is int)


def delete_orphan_chunks(conn: Connection, cutoff_ms: int, limit: int) -> tuple[int, int]:
    """Delete up to ``limit`` staged chunks no blob references whose grace period is over."""
    return delete_unused_chunks(
        conn,
        "SELECT c.chunk_id FROM chunk c WHERE c.last_touched_ms < :cutoff AND NOT EXISTS"
        f" (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = c.chunk_id) LIMIT {int(limit)}",
        cutoff_ms,
    )


def count_chunks(conn: Connection) -> int:
    """Number of stored chunks."""
    return int(conn.scalar("SELECT count(*) FROM chunk") or 0)


def count_blobs(conn: Connection) -> int:
    """Number of stored blobs."""
    return int(conn.scalar("SELECT count(*) FROM blob") or 0)


def iter_chunks_with_bytes(conn: Connection) -> Iterator[tuple[Any, ...]]:
    """(chunk_id, digest, size, codec, stored size, stored bytes, scope_id, sealed_digest)
    of every chunk, values as stored (for verify)."""
    return conn.iterate(
        "SELECT c.chunk_id, c.digest, c.size, c.codec, c.stored_size, d.data, c.scope_id,"
        " c.sealed_digest FROM chunk c LEFT JOIN chunk_data d ON d.chunk_id = c.chunk_id"
    )


def iter_blob_rows(conn: Connection, *, with_inline: bool) -> Iterator[tuple[Any, ...]]:
    """(blob_id, digest, size, chunk_count, chunk_list_digest, inline bytes or None, codec,
    scope_id, sealed_digest) of every blob, values as stored (for verify)."""
    return conn.iterate(
        "SELECT blob_id, digest, size, chunk_count, chunk_list_digest,"
        f" {'inline_data' if with_inline else 'NULL'}, codec, scope_id, sealed_digest FROM blob"
    )


def chunk_rows_of(conn: Connection, blob_id: int) -> list[tuple[Any, ...]]:
    """(seq, chunk_id, digest, size) of a blob's chunk list in order, values as stored
    (digest and size None where the chunk is gone)."""
    return conn.execute(
        "SELECT bc.seq, bc.chunk_id, c.digest, c.size FROM blob_chunk bc"
        " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id WHERE bc.blob_id = ? ORDER BY bc.seq",
        (blob_id,),
    )


def chunk_raw(conn: Connection, chunk_id: int, scope: Scope = PLAINTEXT) -> bytes | None:
    """The decoded (unverified) bytes of one chunk, or None when they do not decode."""
    row = conn.one(
        "SELECT c.codec, d.data, c.size, c.digest FROM chunk c JOIN chunk_data d"
        " ON d.chunk_id = c.chunk_id WHERE c.chunk_id = ?",
        (chunk_id,),
    )
    if row is None or not isinstance(row[2], int):
        return None
    return decoded(row[0], row[1], row[2], scope, row[3] if isinstance(row[3], str) else "")


def stored_bytes(conn: Connection) -> tuple[int, int]:
    """(inline bytes, chunk bytes) stored, after compression."""
    row = conn.one(
        "SELECT (SELECT coalesce(sum(length(inline_data)), 0) FROM blob WHERE chunk_count = 0),"
        " (SELECT coalesce(sum(coalesce(stored_size, size)), 0) FROM chunk)"
    )
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def delete_scope_records(conn: Connection, scope_id: int) -> tuple[int, int]:
    """Delete every blob and chunk of a key scope (its namespaces are gone: nothing else
    can reference them). Returns (blobs, chunks) deleted."""
    conn.execute(
        "DELETE FROM blob_chunk WHERE blob_id IN (SELECT blob_id FROM blob WHERE scope_id = ?)",
        (scope_id,),
    )
    blobs = len(conn.execute("DELETE FROM blob WHERE scope_id = ? RETURNING blob_id", (scope_id,)))
    # A chunk of the scope still listed by a blob of another scope cannot exist (addresses
    # are keyed per scope); the NOT EXISTS keeps the foreign key safe even so.
    chunks = len(
        conn.execute(
            "DELETE FROM chunk WHERE scope_id = ? AND NOT EXISTS"
            " (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = chunk.chunk_id) RETURNING chunk_id",
            (scope_id,),
        )
    )
    return blobs, chunks


def scope_record_counts(conn: Connection, scope_id: int) -> tuple[int, int]:
    """(blobs, chunks) stored for a key scope."""
    row = conn.one(
        "SELECT (SELECT count(*) FROM blob WHERE scope_id = ?1),"
        " (SELECT count(*) FROM chunk WHERE scope_id = ?1)",
        (scope_id,),
    )
    return (0, 0) if row is None else (int(row[0]), int(row[1]))
