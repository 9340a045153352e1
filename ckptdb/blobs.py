"""Blobs: turning caller values into hashed, content-addressed storage and back.

Storage model (see ``migrations/0001_core.sql``): a blob no larger than the file's chunk size
is stored inline in its ``blob`` row, inside the commit transaction. A larger blob (or a
streamed one that does not fit the in-memory budget) is cut into fixed-size chunks that
are *staged* before the commit, each in its own short transaction: chunk bytes go to
``chunk_data`` (written once, never updated), a small ``chunk`` row carries digest, size
and ``last_touched_ms``. A chunk that already exists is only touched. Memory stays bounded
by a couple of chunks whatever the blob size.

Reads verify everything they hand out: an inline blob against its digest before it is
returned; a chunked blob's chunk list against ``chunk_list_digest`` before the first byte,
every chunk against its own digest before its bytes are returned, and the whole blob
against its digest at the end.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

from . import canonical, errors, validation
from .connection import Connection

DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024
MIN_CHUNK_SIZE = 64 * 1024
MAX_CHUNK_SIZE = 256 * 1024 * 1024
#: Streamed/path entries small enough to inline are read into memory only up to this many
#: bytes per commit; beyond it they are staged as chunks so memory stays bounded.
INLINE_BUDGET = 64 * 1024 * 1024


class Entry:
    """An entry value with optional attributes that become part of the manifest.

    ``value`` is bytes, str (stored as UTF-8), a path (``os.PathLike``) or a binary file
    object (streamed). ``media_type`` (e.g. ``application/json``) and ``schema`` (a schema
    pin such as ``graph-snapshot/v3``) are recorded in the manifest and the checkpoint id.
    """

    __slots__ = ("media_type", "schema", "value")

    def __init__(self, value: Any, *, media_type: str | None = None, schema: str | None = None):
        self.value = value
        self.media_type = validation.optional_label(
            media_type, "media_type", validation.MAX_MEDIA_TYPE_CHARS
        )
        self.schema = validation.optional_label(schema, "schema", validation.MAX_SCHEMA_CHARS)

    def __repr__(self) -> str:
        kind = type(self.value).__name__
        return f"Entry({kind}, media_type={self.media_type!r}, schema={self.schema!r})"


class BlobRef:
    """Content already stored in this database, named by its digest and size.

    Committing a ``BlobRef`` re-uses the stored blob without sending, hashing or comparing
    its bytes again -- what an integration does for the parts of a state that did not
    change (``Checkpoint.ref(name)`` gives the reference of an entry). The commit checks,
    inside its transaction, that the blob still exists with that size; if GC removed it
    meanwhile the commit fails with the retryable BlobMissingError (commit the bytes).
    """

    __slots__ = ("digest", "size")

    def __init__(self, digest: str, size: int) -> None:
        if not isinstance(digest, str) or not validation.is_full_id(digest):
            raise errors.InvalidEntryError(f"BlobRef digest {digest!r} is not a sha256 hex digest")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise errors.InvalidEntryError(f"BlobRef size {size!r} is not a byte count")
        self.digest = digest
        self.size = size

    def __repr__(self) -> str:
        return f"BlobRef({self.digest[:12]}, {self.size})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BlobRef) and (other.digest, other.size) == (
            self.digest,
            self.size,
        )

    def __hash__(self) -> int:
        return hash((self.digest, self.size))


@dataclass
class PreparedBlob:
    """A blob ready to be referenced by the commit transaction."""

    digest: str
    size: int
    inline: bytes | None = None
    chunk_ids: list[int] = field(default_factory=list)
    chunk_digests: list[str] = field(default_factory=list)
    bytes_staged: int = 0
    reference: bool = False  # a BlobRef: the blob must already exist

    @property
    def chunk_list_digest(self) -> str | None:
        """Digest over the ordered chunk digests (None for an inline blob)."""
        return None if self.inline is not None else canonical.chunk_list_digest(self.chunk_digests)


@dataclass
class PreparedEntry:
    """A validated entry name with its prepared blob."""

    name: str
    blob: PreparedBlob
    media_type: str | None
    schema: str | None

    def record(self) -> canonical.EntryRecord:
        """The entry as it takes part in the checkpoint identity."""
        return canonical.EntryRecord(
            self.name, self.blob.digest, self.blob.size, self.media_type, self.schema
        )


class _FileSnapshot(io.RawIOBase):
    """A regular file read as it was when opened: never more than its size then (a file
    that grows while read -- a log, or the database's own WAL -- cannot make a commit read
    forever), and :meth:`check_unchanged` refuses it if it changed meanwhile."""

    def __init__(self, fd: int, path: str) -> None:
        super().__init__()
        self._fd = fd
        self._path = path
        st = os.fstat(fd)
        self._opened = (st.st_size, st.st_mtime_ns)
        self._left = st.st_size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer).cast("B")
        got = os.readv(self._fd, [view[: min(len(view), self._left)]])
        self._left -= got
        return got

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()

    def check_unchanged(self) -> None:
        """InvalidEntryError if the file changed size or was modified while it was read."""
        st = os.fstat(self._fd)
        if self._left != 0 or (st.st_size, st.st_mtime_ns) != self._opened:
            raise errors.InvalidEntryError(
                f"{self._path!r} changed while it was being read; ckptdb stores a file as it "
                "was at one moment. Commit it again once it is no longer being written."
            )


def _open_regular_file(path: os.PathLike[str] | str) -> _FileSnapshot:
    """Open a path for reading without following a symlink; refuse non-regular files."""
    try:
        # O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer before
        # fstat can refuse it; regular files ignore the flag.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if os.path.islink(path):
            raise errors.InvalidEntryError(
                f"{os.fspath(path)!r} is a symlink; ckptdb does not follow symlinks. Pass the "
                "resolved path (Path.resolve()) if you mean its target."
            ) from exc
        raise errors.InvalidEntryError(f"cannot open {os.fspath(path)!r}: {exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.InvalidEntryError(
                f"{os.fspath(path)!r} is not a regular file; entries are read from regular files"
            )
        return _FileSnapshot(fd, os.fspath(path))
    except OSError as exc:
        os.close(fd)
        raise errors.InvalidEntryError(f"cannot stat {os.fspath(path)!r}: {exc}") from exc
    except BaseException:
        os.close(fd)
        raise


def _read_exact(source: IO[bytes], n: int) -> bytes:
    """Read ``n`` bytes, looping over short reads (pipes, sockets); fewer only at EOF."""
    buf = bytearray(n)
    got = _fill(source, memoryview(buf))
    del buf[got:]
    return bytes(buf)


def _fill(source: IO[bytes], view: memoryview) -> int:
    """Fill ``view`` from ``source``; returns how many bytes arrived (short only at EOF)."""
    readinto = getattr(source, "readinto", None)
    pos = 0
    while pos < len(view):
        if readinto is not None:
            got = readinto(view[pos:])
            if got is None:
                raise errors.InvalidEntryError("entry stream is non-blocking and had no data")
        else:
            data = source.read(len(view) - pos)
            if data is None:
                raise errors.InvalidEntryError("entry stream is non-blocking and had no data")
            if not isinstance(data, bytes | bytearray | memoryview):
                raise errors.InvalidEntryError(
                    "entry stream returned str; open files in binary mode ('rb')"
                )
            got = len(data)
            view[pos : pos + got] = data
        if not got:
            break
        pos += got
    return pos


class _BackgroundHash:
    """sha256 over a sequence of buffers, updated in order on a helper thread.

    The whole-blob digest of a chunked blob is computed while the caller hashes each
    chunk and SQLite reads or writes it (hashlib and SQLite both release the GIL), so a
    large entry is hashed twice -- per chunk and whole -- in about the time of once.
    A buffer handed to :meth:`update` must not change until its future is done.
    """

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptdb-hash")
        self._pending: list[Future[None]] = []

    def update(self, data: bytes | memoryview) -> Future[None]:
        """Queue ``data``; returns the future to wait on before reusing its buffer."""
        future = self._pool.submit(self._hash.update, data)
        self._pending.append(future)
        return future

    def hexdigest(self) -> str:
        """The digest of everything queued (waits for it)."""
        for future in self._pending:
            future.result()
        self._pending.clear()
        return self._hash.hexdigest()

    def close(self) -> None:
        """Stop the helper thread (after the queued work)."""
        self._pool.shutdown(wait=True)


def verified_inline(stored: object, size: int, digest: str) -> bytes | None:
    """The inline bytes of a blob row when they have ``size`` and ``digest``, else None. A
    damaged record can hold a value of any type where the bytes should be."""
    data = b"" if stored is None else stored
    if not isinstance(data, bytes) or len(data) != size:
        return None
    return data if hashlib.sha256(data).hexdigest() == digest else None


class BlobStore:
    """SQL for blobs and chunks, on one connection."""

    def __init__(self, conn: Connection, chunk_size: int) -> None:
        self.conn = conn
        self.chunk_size = chunk_size
        #: digests whose damaged stored bytes were rewritten from a caller's verified bytes
        self.repaired: list[str] = []

    # -- preparing (outside the commit transaction) ------------------------------------------

    def prepare(self, value: Any, budget: list[int], now_ms: int) -> PreparedBlob:
        """Hash ``value``; stage it as chunks when it is large. ``budget`` is the remaining
        in-memory allowance of this commit for streamed values (mutated)."""
        if isinstance(value, BlobRef):
            return PreparedBlob(value.digest, value.size, reference=True)
        if isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
            return self._prepare_bytes(data, now_ms)
        if isinstance(value, str):
            try:
                data = value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise errors.InvalidEntryError(
                    f"a str value holds a lone surrogate at index {exc.start} (often bytes that "
                    "are not UTF-8, decoded with surrogateescape); pass valid text, or bytes"
                ) from exc
            return self._prepare_bytes(data, now_ms)
        if isinstance(value, os.PathLike):
            snapshot = _open_regular_file(value)
            with io.BufferedReader(snapshot) as reader:  # closing it closes the file
                prepared = self._prepare_stream(reader, budget, now_ms)
                snapshot.check_unchanged()
                return prepared
        if hasattr(value, "read"):
            return self._prepare_stream(value, budget, now_ms)
        raise errors.InvalidEntryError(
            f"cannot store a {type(value).__name__}; give bytes, str, a pathlib.Path, a binary "
            "file object, a ckptdb.BlobRef or ckptdb.Entry(...)"
        )

    def _prepare_bytes(self, data: bytes, now_ms: int) -> PreparedBlob:
        if len(data) <= self.chunk_size:
            return PreparedBlob(hashlib.sha256(data).hexdigest(), len(data), inline=data)
        return self._stage(io.BytesIO(data), [], now_ms)

    def _prepare_stream(self, source: IO[bytes], budget: list[int], now_ms: int) -> PreparedBlob:
        first = _read_exact(source, self.chunk_size)
        more = b"" if len(first) < self.chunk_size else _read_exact(source, self.chunk_size)
        if not more and len(first) <= budget[0]:
            budget[0] -= len(first)
            return PreparedBlob(hashlib.sha256(first).hexdigest(), len(first), inline=first)
        return self._stage(source, [first, more], now_ms)

    def _stage(self, source: IO[bytes], head: list[bytes], now_ms: int) -> PreparedBlob:
        """Write a stream as chunks, one short transaction per chunk.

        ``head`` holds chunks already read from ``source`` (each full-sized but the last,
        which ends the stream if it is short). Memory stays at a few chunks: the rest is
        read into one reused buffer and written to SQLite with incremental blob I/O.

        Staging transactions run with synchronous=NORMAL (no fsync each): the commit
        transaction that later references the chunks fsyncs the WAL, which makes every frame
        written before it durable too; a staged chunk that is never referenced is garbage.
        """
        whole = _BackgroundHash()
        blob = PreparedBlob(digest="", size=0)

        def stage(piece: bytes | memoryview) -> Future[None]:
            queued = whole.update(piece)
            digest = hashlib.sha256(piece).hexdigest()
            chunk_id, written = self.stage_chunk(digest, piece, now_ms)
            blob.chunk_ids.append(chunk_id)
            blob.chunk_digests.append(digest)
            blob.size += len(piece)
            blob.bytes_staged += written
            return queued

        try:
            with self.conn.relaxed_sync():
                at_eof = False
                for piece in head:
                    if piece:
                        stage(piece)
                    if len(piece) < self.chunk_size:
                        at_eof = True
                        break
                # Two buffers in turn: one is refilled while the other is still hashed.
                buffers = [memoryview(bytearray(self.chunk_size)) for _ in range(2)]
                in_flight: list[Future[None] | None] = [None, None]
                turn = 0
                while not at_eof:
                    previous = in_flight[turn]
                    if previous is not None:
                        previous.result()
                    got = _fill(source, buffers[turn])
                    if got:
                        in_flight[turn] = stage(buffers[turn][:got])
                    at_eof = got < self.chunk_size
                    turn ^= 1
            blob.digest = whole.hexdigest()
        finally:
            whole.close()
        if not blob.chunk_ids:
            blob.inline = b""
        return blob

    def stage_chunk(self, digest: str, data: bytes | memoryview, now_ms: int) -> tuple[int, int]:
        """Store one chunk in its own short transaction. Returns (chunk_id, bytes written).

        A chunk that already exists is touched (``last_touched_ms``, so GC's grace period
        restarts) and its stored bytes are compared with ``data``: if they were damaged,
        they are rewritten from ``data`` (which hashes to the digest), so a new checkpoint
        never inherits corrupt bytes through deduplication.
        """
        with self.conn.write_transaction():
            row = self.conn.one(
                "SELECT c.chunk_id, d.data = ? FROM chunk c"
                " LEFT JOIN chunk_data d ON d.chunk_id = c.chunk_id WHERE c.digest = ?",
                (data, digest),
            )
            if row is not None:
                chunk_id = int(row[0])
                self.conn.execute(
                    "UPDATE chunk SET last_touched_ms = ? WHERE chunk_id = ?", (now_ms, chunk_id)
                )
                if row[1] == 1:
                    return chunk_id, 0
                self.conn.execute("DELETE FROM chunk_data WHERE chunk_id = ?", (chunk_id,))
                self.repaired.append(digest)
            else:
                self.conn.execute(
                    "INSERT INTO chunk (digest, size, last_touched_ms) VALUES (?, ?, ?)",
                    (digest, len(data), now_ms),
                )
                chunk_id = self.conn.last_insert_rowid()
            # zeroblob + incremental write: the bytes go straight into the row's pages
            # instead of being copied into a bound parameter and a record first.
            self.conn.execute(
                "INSERT INTO chunk_data (chunk_id, data) VALUES (?, zeroblob(?))",
                (chunk_id, len(data)),
            )
            self.conn.write_blob("chunk_data", "data", chunk_id, data)
            return chunk_id, len(data)

    # -- inside the commit transaction ------------------------------------------------------

    def insert(self, blob: PreparedBlob, now_ms: int) -> tuple[int, int]:
        """Make sure the blob row exists. Returns (blob_id, new bytes written).

        For a chunked blob, every staged chunk must still exist: GC may have reclaimed a
        staged chunk whose grace period ran out before this commit. Then the commit fails
        with the retryable ChunkMissingError instead of publishing missing bytes.
        """
        if blob.reference:
            return self._referenced(blob)
        if blob.inline is not None:
            # New content is the common case: one statement when it is.
            self.conn.execute(
                "INSERT OR IGNORE INTO blob (digest, size, chunk_count, inline_data,"
                " created_at_ms) VALUES (?, ?, 0, ?, ?)",
                (blob.digest, blob.size, blob.inline, now_ms),
            )
            if self.conn.changes() == 1:
                return self.conn.last_insert_rowid(), blob.size
        row = self.conn.one(
            "SELECT blob_id, chunk_count, inline_data = ? FROM blob WHERE digest = ?",
            (blob.inline, blob.digest),
        )
        if row is not None:
            if blob.inline is not None and row[1] == 0 and row[2] != 1:
                # The stored copy was damaged; the caller's bytes hash to the digest.
                self.conn.execute(
                    "UPDATE blob SET inline_data = ? WHERE blob_id = ?", (blob.inline, row[0])
                )
                self.repaired.append(blob.digest)
                return int(row[0]), blob.size
            # Chunks staged for it (new or repaired) are still bytes this commit wrote.
            return int(row[0]), blob.bytes_staged
        chunk_ids = self.resolve_chunks(blob.chunk_digests)
        missing = sum(1 for c in chunk_ids if c is None)
        if missing:
            raise errors.ChunkMissingError(
                f"{missing} staged chunk(s) of blob {blob.digest[:12]} were garbage-collected "
                "before the commit; nothing was published. Retry the commit (it re-stages them)."
            )
        self.conn.execute(
            "INSERT INTO blob (digest, size, chunk_count, chunk_list_digest, created_at_ms)"
            " VALUES (?, ?, ?, ?, ?)",
            (blob.digest, blob.size, len(blob.chunk_ids), blob.chunk_list_digest, now_ms),
        )
        blob_id = self.conn.last_insert_rowid()
        self.conn.executemany(
            "INSERT INTO blob_chunk (blob_id, seq, chunk_id) VALUES (?, ?, ?)",
            [(blob_id, seq, chunk_id) for seq, chunk_id in enumerate(chunk_ids)],
        )
        return blob_id, blob.bytes_staged

    def _referenced(self, blob: PreparedBlob) -> tuple[int, int]:
        row = self.conn.one("SELECT blob_id, size FROM blob WHERE digest = ?", (blob.digest,))
        if row is None:
            raise errors.BlobMissingError(
                f"the referenced blob {blob.digest[:12]} is not stored (never was, or it was "
                "garbage-collected); nothing was published. Commit the bytes instead.",
                digest=blob.digest,
            )
        if int(row[1]) != blob.size:
            raise errors.InvalidEntryError(
                f"the referenced blob {blob.digest[:12]} has {row[1]} bytes, not {blob.size}"
            )
        return int(row[0]), 0

    def resolve_chunks(self, digests: list[str]) -> list[int | None]:
        """The chunk id of each digest now (None where the chunk is gone).

        Chunks are looked up by digest inside the commit transaction, never by the id
        staging returned: GC may delete a staged chunk and SQLite may give its rowid to the
        next chunk inserted, so an id alone could silently name other bytes.
        """
        found: dict[str, int] = {}
        unique = sorted(set(digests))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
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
            "SELECT chunk_count, inline_data FROM blob WHERE blob_id = ?", (blob_id,)
        )
        if row is None:
            raise errors.CheckpointNotFoundError(
                f"blob {digest[:12]} is gone (its checkpoint was garbage-collected)", **where
            )
        if row[0] == 0:
            data = verified_inline(row[1], size, digest)
            if data is None:
                raise errors.CorruptionError(
                    f"stored bytes of entry {where.get('entry')!r} do not match digest "
                    f"{digest[:12]}; nothing was returned",
                    reason="blob_digest_mismatch",
                    **where,
                )
            return data
        reader = ChunkedBlobReader(self, blob_id, digest, size, where)
        try:
            return reader.readall()
        finally:
            reader.close()

    def chunk_list(self, blob_id: int) -> tuple[str | None, list[tuple[int, str, int]]]:
        """(stored chunk_list_digest, [(chunk_id, chunk digest, size)]) of a chunked blob."""
        with self.conn.read_transaction():
            list_digest = self.conn.scalar(
                "SELECT chunk_list_digest FROM blob WHERE blob_id = ?", (blob_id,)
            )
            rows = self.conn.execute(
                "SELECT bc.chunk_id, c.digest, c.size FROM blob_chunk bc"
                " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id"
                " WHERE bc.blob_id = ? ORDER BY bc.seq",
                (blob_id,),
            )
        return list_digest, [(int(r[0]), r[1], r[2]) for r in rows]

    def read_chunk_into(self, chunk_id: int, buffer: bytearray) -> int | None:
        """Read one chunk's stored (unverified) bytes into ``buffer``; returns the length,
        or None if the chunk is gone."""
        return self.conn.read_blob_into("chunk_data", "data", chunk_id, buffer)

    def blob_exists(self, blob_id: int) -> bool:
        """True while the blob row exists."""
        return self.conn.one("SELECT 1 FROM blob WHERE blob_id = ?", (blob_id,)) is not None


class ChunkedBlobReader(io.RawIOBase):
    """A read-only binary stream over a chunked blob that verifies before it hands out.

    Memory is bounded by one chunk. Reads take one short read transaction per chunk, so a
    long-lived stream never blocks writers or checkpoints.
    """

    def __init__(
        self, store: BlobStore, blob_id: int, digest: str, size: int, where: dict[str, Any]
    ) -> None:
        super().__init__()
        self._store = store
        self._blob_id = blob_id
        self._digest = digest
        self._size = size
        self._where = where
        list_digest, chunks = store.chunk_list(blob_id)
        if list_digest is None and not chunks and not store.blob_exists(blob_id):
            raise errors.CheckpointNotFoundError(
                f"blob {digest[:12]} is gone (its checkpoint was garbage-collected)", **where
            )
        if any(c[1] is None for c in chunks):
            self._corrupt("a chunk of the blob is missing", "chunk_missing")
        digests = [str(c[1]) for c in chunks]
        if list_digest != canonical.chunk_list_digest(digests):
            self._corrupt("the chunk list does not match its digest", "chunk_list_mismatch")
        if sum(int(c[2]) for c in chunks) != size:
            self._corrupt("chunk sizes do not add up to the entry size", "blob_size_mismatch")
        self._chunks = [(c[0], str(c[1]), int(c[2])) for c in chunks]
        self._next = 0
        largest = max((c[2] for c in self._chunks), default=0)
        # Two buffers in turn: the whole-blob hash of one runs while the next is read.
        self._buffers = [bytearray(largest), bytearray(largest)]
        self._in_flight: list[Future[None] | None] = [None, None]
        self._buffer = memoryview(b"")
        self._whole = _BackgroundHash()
        self._position = 0

    def _corrupt(self, what: str, detail_code: str) -> None:
        raise errors.CorruptionError(
            f"entry {self._where.get('entry')!r} (blob {self._digest[:12]}): {what}; "
            "nothing more was returned",
            reason=detail_code,
            **self._where,
        )

    def readable(self) -> bool:
        return True

    def _load_next(self) -> bool:
        if self._next >= len(self._chunks):
            return False
        chunk_id, digest, size = self._chunks[self._next]
        self._buffer = memoryview(b"")  # the caller has taken everything from it
        turn = self._next % 2
        previous = self._in_flight[turn]
        if previous is not None:
            previous.result()  # its whole-blob hashing must be done before it is refilled
        scratch = self._buffers[turn]
        got = self._store.read_chunk_into(chunk_id, scratch)
        data = memoryview(scratch)[: got or 0]
        if got is None or got != size or hashlib.sha256(data).hexdigest() != digest:
            data.release()
            if not self._store.blob_exists(self._blob_id):
                raise errors.CheckpointNotFoundError(
                    f"blob {self._digest[:12]} was garbage-collected while being read",
                    **self._where,
                )
            self._corrupt(f"chunk {self._next} does not match its digest", "chunk_digest_mismatch")
        self._in_flight[turn] = self._whole.update(data)
        self._next += 1
        # The last chunk is only handed out once the whole blob matches its digest.
        if self._next == len(self._chunks) and self._whole.hexdigest() != self._digest:
            self._corrupt("the blob digest does not match", "blob_digest_mismatch")
        self._buffer = data
        return True

    def close(self) -> None:
        """Release the helper thread (also when the stream was not read to the end)."""
        if not self.closed:
            self._whole.close()
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
            parts.append(bytes(self._buffer))
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
            piece = bytes(self._buffer)
            self._buffer = memoryview(b"")
            self._position += len(piece)
            yield piece
