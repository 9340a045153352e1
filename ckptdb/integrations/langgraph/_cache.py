"""A per-saver cache of immutable, already-verified checkpoint content.

A ckptdb checkpoint id is the digest of its manifest, and a blob's name is the digest of
its bytes: what an id names can never change, so content read (and verified) once, or
written by this saver, may be handed out again without reading or hashing it again. What
*can* change is whether it still exists (GC, prune, another process): callers ask the
database which cached ids are still stored (``Database.existing``) in the same read
transaction as the ``lg_checkpoint`` rows, so a collected checkpoint still reads as gone.

Values are kept serialized (the serializer's ``[type, bytes]`` pairs) and deserialized on
every hand-out, so callers never share mutable objects. Three bounded LRU maps behind one
lock (a saver is shared between threads): envelopes by ckptdb checkpoint id, channel blobs
by digest (an unchanged channel is one cache entry however many checkpoints use it), and
-- by checkpoint id -- the whole LangGraph checkpoint spliced into one msgpack document
(see :func:`._layout.splice`), so a hot ``get_tuple`` deserializes it in one call. A fourth
map remembers pending writes whose seal (:mod:`.sealing`) held, by digest, with the sealed
columns: a row equal to a remembered one matches its digest without hashing it again
(``get_delta_channel_history`` re-reads every ancestor's writes on every call).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from ._layout import Typed

#: Envelopes kept (each a few hundred bytes plus its inline values).
MAX_ENVELOPES = 4096
#: Bytes of channel blobs kept.
MAX_BLOB_BYTES = 64 * 1024 * 1024
#: Bytes of spliced checkpoints kept (each one the size of its whole state).
MAX_SPLICED_BYTES = 32 * 1024 * 1024
#: Bytes of pending-write values whose seal is known to hold.
MAX_WRITE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Loaded:
    """What one ckptdb checkpoint holds for LangGraph, verified, still serialized."""

    metadata: str  # LangGraph's metadata, JSON text
    checkpoint: Typed  # the checkpoint without channel values
    values: dict[str, Typed]  # inline channel values
    blobs: dict[str, tuple[str, str]]  # channel -> (type, blob digest)


class VerifiedCache:
    """Bounded LRU caches of :class:`Loaded` envelopes and blob bytes (thread-safe)."""

    def __init__(
        self,
        max_envelopes: int = MAX_ENVELOPES,
        max_blob_bytes: int = MAX_BLOB_BYTES,
        max_spliced_bytes: int = MAX_SPLICED_BYTES,
    ) -> None:
        self._lock = threading.Lock()
        self._envelopes: OrderedDict[str, Loaded] = OrderedDict()
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self._blob_bytes = 0
        self._spliced: OrderedDict[str, bytes] = OrderedDict()
        self._spliced_bytes = 0
        self._writes: OrderedDict[str, tuple[object, ...]] = OrderedDict()
        self._write_bytes = 0
        self.max_write_bytes = MAX_WRITE_BYTES
        self.max_envelopes = max_envelopes
        self.max_blob_bytes = max_blob_bytes
        self.max_spliced_bytes = max_spliced_bytes
        self.hits = 0
        self.misses = 0

    def get(self, checkpoint_id: str) -> tuple[Loaded, dict[str, bytes]] | None:
        """The envelope and every blob it needs, or None unless all are cached."""
        with self._lock:
            loaded = self._envelopes.get(checkpoint_id)
            if loaded is None:
                self.misses += 1
                return None
            blobs: dict[str, bytes] = {}
            for _type, digest in loaded.blobs.values():
                data = self._blobs.get(digest)
                if data is None:
                    self.misses += 1
                    return None
                self._blobs.move_to_end(digest)
                blobs[digest] = data
            self._envelopes.move_to_end(checkpoint_id)
            self.hits += 1
            return loaded, blobs

    def spliced(self, checkpoint_id: str) -> tuple[Loaded, bytes] | None:
        """The envelope and the spliced checkpoint, or None unless both are cached."""
        with self._lock:
            data = self._spliced.get(checkpoint_id)
            loaded = self._envelopes.get(checkpoint_id)
            if data is None or loaded is None:
                return None
            self._spliced.move_to_end(checkpoint_id)
            self._envelopes.move_to_end(checkpoint_id)
            self.hits += 1
            return loaded, data

    def put_spliced(self, checkpoint_id: str, data: bytes) -> None:
        """Remember the spliced form of a checkpoint whose envelope is cached."""
        if len(data) > self.max_spliced_bytes // 4:
            return
        with self._lock:
            old = self._spliced.pop(checkpoint_id, None)
            if old is not None:
                self._spliced_bytes -= len(old)
            self._spliced[checkpoint_id] = data
            self._spliced_bytes += len(data)
            while self._spliced_bytes > self.max_spliced_bytes and self._spliced:
                _, gone = self._spliced.popitem(last=False)
                self._spliced_bytes -= len(gone)

    def sealed(self, digest: str, row: tuple[object, ...]) -> bool:
        """Whether ``row`` (a pending write's sealed columns) equals one whose ``digest``
        was computed or checked before -- then it matches the digest without hashing."""
        with self._lock:
            known = self._writes.get(digest)
            if known is None or known != row:
                return False
            self._writes.move_to_end(digest)
            return True

    def put_sealed(self, digest: str, row: tuple[object, ...]) -> None:
        """Remember that ``digest`` seals ``row`` (checked, or computed when written)."""
        size = sum(len(v) if isinstance(v, bytes | str) else 8 for v in row)
        if size > self.max_write_bytes // 4:
            return
        with self._lock:
            if digest in self._writes:
                self._writes.move_to_end(digest)
                return
            self._writes[digest] = row
            self._write_bytes += size
            while self._write_bytes > self.max_write_bytes and self._writes:
                _, old = self._writes.popitem(last=False)
                self._write_bytes -= sum(len(v) if isinstance(v, bytes | str) else 8 for v in old)

    def blob(self, digest: str) -> bytes | None:
        """The cached (verified) bytes of a blob, or None."""
        with self._lock:
            return self._blobs.get(digest)

    def put(self, checkpoint_id: str, loaded: Loaded, blobs: dict[str, bytes]) -> None:
        """Remember a verified checkpoint (``blobs``: digest -> bytes of its blob channels)."""
        with self._lock:
            self._envelopes[checkpoint_id] = loaded
            self._envelopes.move_to_end(checkpoint_id)
            while len(self._envelopes) > self.max_envelopes:
                gone, _ = self._envelopes.popitem(last=False)
                self._drop_spliced(gone)
            for digest, data in blobs.items():
                if len(data) > self.max_blob_bytes // 4:
                    continue  # a huge value would flush everything else
                if digest in self._blobs:
                    self._blobs.move_to_end(digest)
                    continue
                self._blobs[digest] = data
                self._blob_bytes += len(data)
            while self._blob_bytes > self.max_blob_bytes and self._blobs:
                _, old = self._blobs.popitem(last=False)
                self._blob_bytes -= len(old)

    def forget(self, checkpoint_ids: set[str]) -> None:
        """Drop envelopes (of checkpoints known to be gone)."""
        with self._lock:
            for cid in checkpoint_ids:
                self._envelopes.pop(cid, None)
                self._drop_spliced(cid)

    def _drop_spliced(self, checkpoint_id: str) -> None:
        data = self._spliced.pop(checkpoint_id, None)
        if data is not None:
            self._spliced_bytes -= len(data)

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._envelopes.clear()
            self._blobs.clear()
            self._blob_bytes = 0
            self._spliced.clear()
            self._spliced_bytes = 0
            self._writes.clear()
            self._write_bytes = 0
