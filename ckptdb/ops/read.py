"""The read path of entry bytes: every byte handed out is verified first.

An inline blob is checked against its digest before it is returned; a chunked one streams
through :class:`~ckptdb.store.blob_reader.ChunkedBlobReader`, which checks the blob row
against the manifest and the chunk list against its digest before the first byte, and
each chunk against its own digest before its bytes are returned: one hash pass per byte.
:func:`verify_entry` (``Checkpoint.verify``: the explicit full check a fallback walk and a
rollback make) also hashes the whole blob against its digest, as every read in a key
scope does. Streams take the handle's lock and a read snapshot (a unit of work,
``ops/unit``) for each window of chunks they fetch, so a long-lived reader never blocks
other users of the handle for long; decoding and hashing run on the reader's helper
threads, outside the lock.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import IO, Any

from ..store.blob_reader import ChunkedBlobReader
from ..store.rows import EntryRow
from .handle import Handle
from .unit import reading


def read_entry(handle: Handle, checkpoint_id: str, entry: EntryRow) -> bytes:
    """All bytes of an entry, verified."""
    where = {"checkpoint_id": checkpoint_id, "entry": entry.name}
    with reading(handle) as tx:
        return tx.blobs.read_all(
            entry.blob_id, entry.digest, entry.size, where, scope_id=entry.scope_id
        )


def read_entries(
    handle: Handle, wanted: Sequence[tuple[str, EntryRow, bytes | None]]
) -> list[bytes]:
    """The bytes of many entries -- (checkpoint id, entry, its bytes if the checkpoint
    already holds them verified) each -- verified, in order, in one read snapshot (the
    small ones in one statement; none when every one is held)."""
    missing = [(cid, e) for cid, e, held in wanted if held is None]
    if not missing:
        return [held for _, _, held in wanted if held is not None]
    with reading(handle) as tx:
        found = iter(
            tx.blobs.read_many(
                [
                    (
                        e.blob_id,
                        e.digest,
                        e.size,
                        e.scope_id,
                        {"checkpoint_id": cid, "entry": e.name},
                    )
                    for cid, e in missing
                ]
            )
        )
    return [next(found) if held is None else held for _, _, held in wanted]


def open_entry(handle: Handle, checkpoint_id: str, entry: EntryRow) -> IO[bytes]:
    """A verified binary stream over an entry, bounded in memory by its read-ahead (a few
    windows of chunks, whatever the entry size)."""
    if entry.chunk_count == 0:
        return io.BytesIO(read_entry(handle, checkpoint_id, entry))
    where = {"checkpoint_id": checkpoint_id, "entry": entry.name}
    return io.BufferedReader(LockedReader(handle, entry, where), buffer_size=256 * 1024)


def iter_entry(handle: Handle, checkpoint_id: str, entry: EntryRow) -> Iterator[bytes]:
    """An entry's bytes as verified pieces of at most one chunk each."""
    if entry.chunk_count == 0:
        yield read_entry(handle, checkpoint_id, entry)
        return
    where = {"checkpoint_id": checkpoint_id, "entry": entry.name}
    reader = LockedReader(handle, entry, where)
    try:
        yield from reader.iter_chunks()
    finally:
        reader.close()


def verify_entry(handle: Handle, checkpoint_id: str, entry: EntryRow) -> None:
    """Read an entry through, its whole-content digest included (the explicit full check);
    CorruptionError for damage. Memory stays bounded as for a stream."""
    if entry.chunk_count == 0:
        read_entry(handle, checkpoint_id, entry)  # an inline blob is checked whole anyway
        return
    where = {"checkpoint_id": checkpoint_id, "entry": entry.name}
    reader = LockedReader(handle, entry, where, full=True)
    try:
        for _ in reader.iter_chunks():
            pass  # reading verifies; the bytes themselves are not needed
    finally:
        reader.close()


class LockedReader(io.RawIOBase):
    """A chunked-entry stream that takes the handle's lock for each window of chunks it
    fetches (and only then: decoding, verifying and copying out run without it, so other
    users of the handle -- a commit, GC -- wait for a fetch at most, never for a hash).
    ``full``: also check the whole-content digest (see :func:`verify_entry`)."""

    def __init__(
        self, handle: Handle, entry: EntryRow, where: dict[str, Any], *, full: bool = False
    ) -> None:
        super().__init__()
        with handle.use() as store:
            self._inner = ChunkedBlobReader(
                store.blobs,
                entry.blob_id,
                entry.digest,
                entry.size,
                where,
                scope_id=entry.scope_id,
                full=full,
                snapshot=lambda: reading(handle),
            )

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._inner.readinto(buffer)

    def readall(self) -> bytes:
        return self._inner.readall()

    def tell(self) -> int:
        return self._inner.tell()

    def close(self) -> None:
        if not self.closed:
            self._inner.close()
        super().close()

    def iter_chunks(self) -> Iterator[bytes]:
        """Verified chunk-sized pieces."""
        return self._inner.iter_chunks()
