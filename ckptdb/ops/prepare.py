"""Turning caller values into prepared blobs, before the commit transaction.

Hashing happens here, outside the write lock. A value no larger than the file's chunk size
(or a stream that fits the commit's in-memory budget) is kept in memory to be stored inline
by the commit; a larger one is cut into chunks that are *staged*, each in its own short
transaction (content-addressed, so harmless until a manifest references them). Memory stays
bounded by a couple of chunks whatever the value size.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from array import array
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

from .. import errors
from ..connection.engine import relaxed_sync
from ..store import codec
from ..store.blobs import BlobStore, PreparedBlob
from ..store.crypto import PLAINTEXT, Scope
from ..store.digests import BackgroundHash, DigestList
from ..store.encoding import EncodedChunk
from ..types import Addressed, BlobRef
from .progress import CountingReader

#: Streamed/path entries small enough to inline are read into memory only up to this many
#: bytes per commit; beyond it they are staged as chunks so memory stays bounded.
INLINE_BUDGET = 64 * 1024 * 1024
#: Staged chunks are written in transactions of up to this many stored bytes.
STAGE_BATCH_BYTES = 1024 * 1024
#: After this many chunks in a row that zstd could not shrink, a stream's chunks are
#: stored raw without trying, except every RAW_PROBE_EVERY-th, which probes again.
RAW_AFTER = 16
RAW_PROBE_EVERY = 64
#: Chunks being hashed and compressed ahead of the writer at most.
ENCODE_WINDOW = 8
#: Values shorter than this are stored as they are, without trying zstd: its frame header
#: and block header (about a dozen bytes) leave nothing to gain below it.
MIN_COMPRESS = 64


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


def prepare_value(
    blobs: BlobStore,
    value: Any,
    budget: list[int],
    now_ms: int,
    on_bytes: Callable[[int], None] | None = None,
    scope: Scope = PLAINTEXT,
    staged: list[int] | None = None,
) -> PreparedBlob:
    """Hash ``value``; stage it as chunks when it is large. ``budget`` is the remaining
    in-memory allowance of this commit for streamed values (mutated). ``on_bytes(n)`` is
    told of every ``n`` bytes read from a path or stream (byte progress). ``scope``: the
    key scope of the namespace -- how the bytes are addressed and sealed. ``staged``
    collects the ids of the chunks staging inserted (not found stored already)."""
    kind = type(value)
    if kind is bytes:  # the common case first
        return _prepare_bytes(blobs, value, now_ms, scope, staged=staged)
    if kind is Addressed:
        # Hashed by the caller for this very scope: not hashed again. (For another scope --
        # one created since -- the address is the scope's own, computed here.)
        digest = value.digest if value.scope_id == scope.scope_id else None
        return _prepare_bytes(blobs, value.data, now_ms, scope, digest, staged=staged)
    if kind is BlobRef:
        return PreparedBlob(value.digest, value.size, reference=True, scope=scope)
    if isinstance(value, bytes | bytearray | memoryview):
        return _prepare_bytes(blobs, bytes(value), now_ms, scope, staged=staged)
    if isinstance(value, str):
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise errors.InvalidEntryError(
                f"a str value holds a lone surrogate at index {exc.start} (often bytes that "
                "are not UTF-8, decoded with surrogateescape); pass valid text, or bytes"
            ) from exc
        return _prepare_bytes(blobs, data, now_ms, scope, staged=staged)
    if isinstance(value, os.PathLike):
        snapshot = _open_regular_file(value)
        source: io.RawIOBase = (
            snapshot if on_bytes is None else CountingReader(snapshot, on_bytes, owns=True)
        )
        with io.BufferedReader(source) as reader:  # closing it closes the file
            prepared = _prepare_stream(blobs, reader, budget, now_ms, scope, staged)
            snapshot.check_unchanged()
            return prepared
    if hasattr(value, "read"):
        stream = value if on_bytes is None else CountingReader(value, on_bytes)
        return _prepare_stream(blobs, stream, budget, now_ms, scope, staged)  # type: ignore[arg-type]
    raise errors.InvalidEntryError(
        f"cannot store a {type(value).__name__}; give bytes, str, a pathlib.Path, a binary "
        "file object, a ckptdb.BlobRef or ckptdb.Entry(...)"
    )


def inline(data: bytes, scope: Scope, digest: str | None = None) -> PreparedBlob:
    """A blob stored whole in its row (encoded here, outside the lock); ``digest``: its
    address in ``scope`` when the caller computed it already."""
    size = len(data)
    if scope is PLAINTEXT:
        digest = digest or hashlib.sha256(data).hexdigest()
        if size < MIN_COMPRESS:
            return PreparedBlob(digest, size, data)
        codec_id, stored = codec.encode(data)
        return PreparedBlob(digest, size, data, codec_id, stored)
    digest = digest or scope.address(data)
    codec_id, stored, sealed_digest = scope.encode(
        data, digest, compress=size >= MIN_COMPRESS, blob=True
    )
    return PreparedBlob(
        digest,
        size,
        inline=data,
        inline_codec=codec_id,
        inline_stored=stored,
        scope=scope,
        inline_sealed_digest=sealed_digest,
    )


def _prepare_bytes(
    blobs: BlobStore,
    data: bytes,
    now_ms: int,
    scope: Scope,
    digest: str | None = None,
    *,
    staged: list[int] | None = None,
) -> PreparedBlob:
    if len(data) <= blobs.chunker.inline_limit:
        return inline(data, scope, digest)
    if len(data) <= blobs.chunk_size:
        # Held in memory anyway: cut, hash and compress here, write inside the commit
        # transaction (one transaction; a dedup hit costs a lookup, not a write).
        chunks = [
            EncodedChunk.of(piece, scope=scope, cache=blobs.encodings)
            for piece in blobs.chunker.cut(data)
        ]
        return PreparedBlob(
            digest or scope.address(data),
            len(data),
            chunk_digests=DigestList(c.digest for c in chunks),
            chunks=chunks,
            scope=scope,
        )
    # Too large to hold until the commit: staged, cut exactly as the same bytes always are.
    return _stage(blobs, blobs.chunker.cut(data), now_ms, scope, staged)


def _prepare_stream(
    blobs: BlobStore,
    source: IO[bytes],
    budget: list[int],
    now_ms: int,
    scope: Scope,
    staged: list[int] | None,
) -> PreparedBlob:
    # A stream that ends within the limit is cut like the same bytes given in memory; a
    # longer one is cut as it is read (its length puts it in the chunker's large tier).
    limit = max(blobs.chunk_size, blobs.chunker.whole_limit)
    head = _read_exact(source, limit + 1)
    if len(head) <= limit:
        if len(head) <= budget[0]:
            budget[0] -= len(head)
            return _prepare_bytes(blobs, head, now_ms, scope, staged=staged)
        return _stage(blobs, blobs.chunker.cut(head), now_ms, scope, staged)
    return _stage(blobs, blobs.chunker.cut_stream(_Joined(head, source)), now_ms, scope, staged)


class _Joined(io.RawIOBase):
    """Bytes already read from a stream, then the rest of the stream."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        super().__init__()
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._head:
            n = min(len(view), len(self._head))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return _fill(self._rest, view[: len(view)]) if len(view) else 0


def _stage(
    blobs: BlobStore,
    pieces: Iterable[bytes | memoryview],
    now_ms: int,
    scope: Scope,
    staged: list[int] | None,
) -> PreparedBlob:
    """Write a stream's chunks before the commit, in short transactions of their own that
    each hold up to :data:`STAGE_BATCH_BYTES` of chunks. Memory stays at one batch; the
    ids of the chunks inserted (not found stored) go into ``staged``.

    Staging transactions run with synchronous=NORMAL (no fsync each): the commit
    transaction that later references the chunks fsyncs the WAL, which makes every frame
    written before it durable too; a staged chunk that is never referenced is garbage.
    """
    whole = BackgroundHash(scope)
    chunk_ids: array[int] = array("q")
    chunk_digests = DigestList()
    repaired: list[str] = []
    blob = PreparedBlob(
        digest="",
        size=0,
        scope=scope,
        chunk_ids=chunk_ids,
        chunk_digests=chunk_digests,
        repaired=repaired,
    )
    batch: list[EncodedChunk] = []
    batch_bytes = 0
    # Trying to compress random or already-compressed data costs ~1 ms/MB for nothing:
    # after a run of chunks zstd could not shrink, store raw, probing again now and then.
    incompressible = 0

    def flush() -> None:
        nonlocal batch, batch_bytes
        if not batch:
            return
        # Each batch in a short transaction of its own, before the commit that will
        # reference the chunks.
        inserted: list[int] = []
        with blobs.conn.write_transaction():
            ids, written, fixed = blobs.put_chunks(batch, now_ms, touch=True, inserted=inserted)
        if staged is not None:
            staged.extend(inserted)  # only once they committed: a rolled-back id is reused
        chunk_ids.extend(ids)
        blob.bytes_staged += written
        repaired.extend(fixed)
        batch, batch_bytes = [], 0

    # Hashing and compressing the next chunks (hashlib and zstd release the GIL) runs on a
    # helper thread while this one cuts and writes: a bounded window of chunks in flight.
    encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptdb-encode")
    in_flight: deque[tuple[int, Future[EncodedChunk]]] = deque()

    def take_one() -> None:
        nonlocal batch_bytes, incompressible
        size, future = in_flight.popleft()
        chunk = future.result()
        incompressible = incompressible + 1 if codec.compression_of(chunk.codec) == codec.RAW else 0
        batch.append(chunk)
        batch_bytes += len(chunk.stored)
        chunk_digests.append(chunk.digest)
        blob.size += size
        if batch_bytes >= STAGE_BATCH_BYTES:
            flush()

    try:
        with relaxed_sync(blobs.conn):
            for piece in pieces:
                if not piece:
                    continue
                data = piece if isinstance(piece, bytes) else bytes(piece)
                whole.update(data)  # immutable bytes: safe to hash on the helper thread
                probe = incompressible < RAW_AFTER or incompressible % RAW_PROBE_EVERY == 0
                in_flight.append(
                    (
                        len(data),
                        encoder.submit(
                            EncodedChunk.of,
                            data,
                            compress=probe,
                            scope=scope,
                            cache=blobs.encodings,
                        ),
                    )
                )
                if len(in_flight) >= ENCODE_WINDOW:
                    take_one()
            while in_flight:
                take_one()
            flush()
        blob.digest = whole.hexdigest()
    finally:
        encoder.shutdown(wait=True, cancel_futures=True)
        whole.close()
    if not blob.chunk_digests:
        return inline(b"", scope)
    return blob
