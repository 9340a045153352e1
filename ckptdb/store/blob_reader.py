"""The pipelined, verifying stream over a chunked blob: :class:`ChunkedBlobReader`.

Reads verify everything they hand out, after decoding, hashing each byte once: before the
first byte, the blob row against what the manifest says (digest, size, key scope) and the
chunk list against the row's ``chunk_list_digest``; then every chunk against its own
digest before its bytes are returned. A full check (``full=True``: ``Checkpoint.verify``,
a fallback walk) and every read in a key scope also hash the whole blob against its digest
before the last piece (see :class:`ChunkedBlobReader` for why plaintext reads need not).
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

from .. import canonical, errors
from . import codec
from .digests import DigestList
from .encoding import decoded

if TYPE_CHECKING:
    from .blob_reads import BlobReads

#: A chunked blob below this size is read whole in one query (each chunk verified before
#: the bytes are returned); larger ones go through the pipelined :class:`ChunkedBlobReader`.
READ_AT_ONCE = 8 * 1024 * 1024
#: A streaming read fetches chunks in windows of at most this many stored bytes (and at
#: most this many chunks), each window in one short read transaction.
READ_WINDOW_BYTES = 4 * 1024 * 1024
_WINDOW_ROWS = 64
#: A streaming read of a blob this large verifies on helper threads while the caller
#: consumes (a smaller one is done before threads would have started).
PARALLEL_READ_MIN = READ_AT_ONCE
#: ... fetching at most this many bytes (stored or decoded) ahead of the caller ...
READ_AHEAD_BYTES = 12 * 1024 * 1024
#: ... and letting the whole-blob hash (when there is one) fall at most this many bytes
#: behind it.
_WHOLE_BEHIND_BYTES = 8 * 1024 * 1024


def corruption(
    where: dict[str, Any], digest: str, what: str, reason: str
) -> errors.CorruptionError:
    """The error for damage found in a chunked blob before any more of it was returned."""
    return errors.CorruptionError(
        f"entry {where.get('entry')!r} (blob {digest[:12]}): {what}; nothing more was returned",
        reason=reason,
        **where,
    )


def gone(where: dict[str, Any], digest: str) -> errors.CheckpointNotFoundError:
    """The error for a blob whose row is no longer stored (its checkpoint was collected)."""
    return errors.CheckpointNotFoundError(
        f"blob {digest[:12]} is gone (its checkpoint was garbage-collected)", **where
    )


#: One fetched chunk, values as stored: (digest, size, codec, stored bytes or None).
_Fetched: TypeAlias = tuple[Any, Any, Any, bytes | None]
#: One fetched window: (its verification on the helper, or None; index of its first
#: chunk; its chunks; the bytes it holds, stored or decoded, whichever is more).
_Window: TypeAlias = tuple["Future[list[bytes]] | None", int, list[_Fetched], int]


class ChunkedBlobReader(io.RawIOBase):
    """A read-only binary stream over a chunked blob that verifies before it hands out.

    Before the first byte, the blob row must name what the manifest names (digest, size,
    key scope ``scope_id``), and one pass over the chunk list checks it against the row's
    ``chunk_list_digest`` and the sizes against the blob's, keeping the verified digests
    compactly. Bytes are then fetched in windows of chunks (one short read transaction
    each, at most :data:`READ_WINDOW_BYTES` of stored bytes, each chunk copied once out of
    SQLite's pages by incremental blob I/O), each chunk decoded and checked against its
    digest before any of its bytes are handed out. So memory is bounded by the
    read-ahead, and a long-lived stream never blocks writers or checkpoints.

    One hash pass per byte: the chain manifest -> blob digest (same row as) chunk list
    digest -> chunk digests -> chunk bytes catches every single damage before a damaged
    byte comes out (a chunk's bytes by its digest; a chunk row's digest, a ``blob_chunk``
    row and ``chunk_list_digest`` by the list digest; the blob row's digest by the
    manifest). What it does not catch is a *forged* list -- chunks reordered and the list
    digest recomputed -- which in plaintext only someone who could forge the manifest as
    well can write. So the whole blob is hashed against its digest too (before the last
    chunk is handed out) when ``full`` asks for the explicit full check, and always in a
    key scope, where a list digest anyone can recompute must not stand in for an address
    only the key holder can make.

    A blob of at least :data:`PARALLEL_READ_MIN` bytes is read as a pipeline (hashlib,
    zstd, OpenSSL and SQLite's blob reads all release the GIL): the caller's thread fetches
    windows up to :data:`READ_AHEAD_BYTES` ahead and hands out verified chunks; a helper
    decodes and verifies each fetched window, in order; with the whole-blob hash, another
    feeds it the verified windows, in order, at most :data:`_WHOLE_BEHIND_BYTES` behind.
    (Work goes to the helpers a window at a time, so futures and thread wake-ups are paid
    per window, not per chunk.) Helpers never touch the connection: every statement runs
    on the caller's thread, inside ``snapshot`` -- a read snapshot the caller's layer opens
    for each fetch (for a stream read piece by piece: the handle's lock and a read
    transaction, ``ops/read``) -- or, ``snapshot`` None, inside the caller's own open read
    transaction. :meth:`close` stops the helpers.
    """

    def __init__(
        self,
        store: BlobReads,
        blob_id: int,
        digest: str,
        size: int,
        where: dict[str, Any],
        *,
        scope_id: int | None,
        full: bool = False,
        snapshot: Callable[[], AbstractContextManager[object]] | None = None,
    ) -> None:
        super().__init__()
        self._store = store
        self._blob_id = blob_id
        self._digest = digest
        self._size = size
        self._where = where
        self._snapshot = snapshot if snapshot is not None else nullcontext
        self._digests = DigestList()
        conn = store.conn
        total = 0
        with self._snapshot():
            list_digest, self._scope = store.chunked_head(blob_id, digest, size, scope_id, where)
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
        #: the whole-blob hash, when this read checks the whole digest too
        self._whole = self._scope.hasher() if full or self._scope.sealed else None
        self._verifier: ThreadPoolExecutor | None = None
        self._hasher: ThreadPoolExecutor | None = None
        self._hashing: deque[tuple[Future[None], int]] = deque()
        self._hashing_bytes = 0
        if size >= PARALLEL_READ_MIN and len(self._digests) > 1:
            self._verifier = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptdb-verify")
            if self._whole is not None:
                self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptdb-hash")

    def _corrupt(self, what: str, detail_code: str) -> NoReturn:
        raise corruption(self._where, self._digest, what, detail_code)

    def readable(self) -> bool:
        return True

    # -- fetching (the caller's thread, inside a snapshot) -------------------------------

    def _fetch_window(self) -> None:
        """Fetch the next window of chunks in one read transaction and queue each for
        verification. Metadata and bytes come from one snapshot (a repair that re-encodes
        a chunk between them cannot pair one chunk's codec with another encoding)."""
        store = self._store
        conn = store.conn
        fetched: list[_Fetched] = []
        with self._snapshot():
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
        whole = self._whole
        if whole is not None:
            for raw in raws:
                whole.update(raw)

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
            with self._snapshot():
                gone = not self._store.blob_exists(self._blob_id)
            if gone:
                raise errors.CheckpointNotFoundError(
                    f"blob {self._digest[:12]} was garbage-collected while being read",
                    **self._where,
                )
            self._corrupt(f"chunk {self._next} does not match its digest", "chunk_digest_mismatch")
        raw = self._ready.popleft()
        self._next += 1
        # With the whole-blob check, the last chunk is only handed out once the whole blob
        # matches its digest.
        if self._whole is not None and self._next == len(self._digests):
            for done, _ in self._hashing:
                done.result()
            self._hashing.clear()
            if self._whole.hexdigest() != self._digest:
                self._corrupt("the blob digest does not match", "blob_digest_mismatch")
        self._current = raw
        self._buffer = memoryview(raw)
        return True

    def _take_window(self) -> None:
        """Make the next fetched window's verified chunks ready (and queue them for the
        whole-blob hash, if this read checks it)."""
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
        work is cancelled, what is running finishes, and the threads exit."""
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
