"""The saver's one cache: what it learnt once and may use again, in one LRU with one bound
and one lock (a saver is shared between threads).

It holds two kinds of things:

* **Immutable, verified content**, named by digests: the envelope of a ckptdb checkpoint
  (:class:`Loaded`, by checkpoint id), channel blobs (by digest, so an unchanged channel is
  one entry however many checkpoints use it), the whole LangGraph checkpoint spliced into
  one msgpack document (by checkpoint id, see :func:`._layout.merge`: a hot ``get_tuple``
  deserializes it in one call), and pending writes whose seal held (by digest: a row equal
  to a remembered one matches without hashing it again). What an id names never changes,
  so content read and verified once -- or written by this saver -- is handed out again
  without reading or hashing; whether it still *exists* can change (GC, prune, another
  process), so readers ask the database about existence in their own read transaction.
  Values stay serialized and are deserialized on every hand-out: callers never share
  mutable objects.
* **Hints** about the file: per ``(thread_id, checkpoint_ns)`` a :class:`ThreadState` (its
  registered namespace, this saver's last put there, the blobs that put stored and which
  channels were small enough to ride inside its checkpoint), the
  record sealer of a namespace, the key ids whose scope exists, and per thread when this
  saver last recorded its activity (for a TTL: a refresh is skipped within the refresh
  interval; a missed one only makes the thread's record lag). Each is re-validated
  where it matters: a stale parent fails the commit, which looks it up again; a collected
  blob fails it with BlobMissingError, and the put sends the bytes.

Every entry costs its bytes plus :data:`ENTRY_COST`; the least recently used go first once
the total passes ``max_bytes``, and an entry over a quarter of it is not kept (it would
flush everything else).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ... import BlobRef
from ...extension import RecordSealer
from ._layout import Typed

#: The cache's bound, in bytes (see :data:`ENTRY_COST`).
MAX_BYTES = 128 * 1024 * 1024
#: What an entry costs besides the bytes it holds (key, record, dict slot): bounds the
#: number of small entries too.
ENTRY_COST = 256


class Unknown:
    """Not in the cache (a namespace's sealer may be None: not encrypted)."""


#: What :meth:`SaverCache.sealer` returns for a namespace it does not know.
UNKNOWN = Unknown()


# Hot records are plain slotted classes, not frozen dataclasses: a frozen one pays a
# setattr call per field on every put. Neither is changed after it is made (but for
# Loaded.inside, a memo).
@dataclass(slots=True)
class Loaded:
    """What one ckptdb checkpoint holds for LangGraph, verified, still serialized."""

    metadata: str  # the ckptdb metadata, JSON text: LangGraph's is its "langgraph" member
    checkpoint: Typed  # the checkpoint; from envelope v2 on with channel values inside
    values: dict[str, Typed]  # inline channel values serialized apart
    blobs: dict[str, tuple[str, str]]  # channel -> (type, blob digest)
    size: int  # bytes the record holds (its share of the cache's bound)
    version: int = 1  # of the envelope
    #: The channels whose values ride inside ``checkpoint`` (v2), once known: the one field
    #: filled in after the record is made (by whoever first needs it; always the same set).
    inside: frozenset[str] | None = None


@dataclass(slots=True)
class ThreadState:
    """What this saver knows of one ``(thread_id, checkpoint_ns)`` pair."""

    namespace: str  # its ckptdb namespace, as registered in lg_namespace
    confirmed: bool  # this saver's own commit registered (or re-checked) that row
    last_put: tuple[str, str] | None  # (LangGraph id, ckptdb id) of this saver's last put
    channels: dict[str, BlobRef]  # the blob of each channel that put stored
    #: The LangGraph version of each channel whose value rode inside that put's checkpoint:
    #: a hint that the channel is small (its value is not sized again while its version
    #: stays the same), never a claim about its content.
    versions: dict[str, object] = field(default_factory=dict)


def _thread_cost(state: ThreadState) -> int:
    return ENTRY_COST * (1 + len(state.channels) + len(state.versions))


#: A cache key: the kind of entry, then what names it.
Key = tuple[str, ...]


class SaverCache:
    """The one bounded LRU of a saver (see the module docstring); thread-safe."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[Key, tuple[int, Any]] = OrderedDict()  # key -> (cost, value)
        self._bytes = 0

    # -- hints --------------------------------------------------------------------------------

    def thread(self, thread_id: str, ns: str) -> ThreadState | None:
        """What is known of the pair, or None."""
        key = ("thread", thread_id, ns)
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            state: ThreadState = item[1]
            return state

    def put_thread(self, thread_id: str, ns: str, state: ThreadState) -> None:
        """Remember ``state`` for the pair."""
        with self._lock:
            self._add(("thread", thread_id, ns), _thread_cost(state), state)
            self._shrink()

    def remember_put(
        self,
        thread_id: str,
        ns: str,
        state: ThreadState,
        checkpoint_id: str,
        loaded: Loaded,
        blobs: Mapping[str, bytes],
    ) -> None:
        """After a put: the pair's new state, and the content it committed as checkpoint
        ``checkpoint_id`` (``blobs``: digest -> bytes of its blob channels) -- known and
        verified by construction, since the id is the digest of exactly these entries."""
        with self._lock:
            self._add(("thread", thread_id, ns), _thread_cost(state), state)
            self._add(("envelope", checkpoint_id), ENTRY_COST + loaded.size, loaded)
            if blobs:
                self._add_blobs(blobs)
            self._shrink()

    def forget_thread(self, thread_id: str, ns: str) -> None:
        """Drop what is known of the pair (deleted, moved, or a hint proved stale)."""
        with self._lock:
            self._drop(("thread", thread_id, ns))

    def touched(self, thread_id: str) -> int | None:
        """When this saver last recorded the thread's activity (epoch ms), or None."""
        with self._lock:
            item = self._items.get(("touched", thread_id))
        if item is None:
            return None
        at_ms: int = item[1]
        return at_ms

    def put_touched(self, thread_id: str, at_ms: int | None) -> None:
        """Remember when this saver recorded the thread's activity (None: forget it, e.g.
        once the thread's record was removed)."""
        with self._lock:
            if at_ms is None:
                self._drop(("touched", thread_id))
            else:
                self._add(("touched", thread_id), ENTRY_COST, at_ms)
                self._shrink()

    def sealer(self, namespace: str) -> RecordSealer | Unknown | None:
        """The namespace's record sealer (None: not encrypted), or :data:`UNKNOWN`."""
        with self._lock:
            item = self._items.get(("sealer", namespace))
        if item is None:
            return UNKNOWN
        sealer: RecordSealer | None = item[1]
        return sealer

    def put_sealer(self, namespace: str, sealer: RecordSealer | None) -> None:
        """Remember the namespace's record sealer (None: not encrypted)."""
        with self._lock:
            self._add(("sealer", namespace), ENTRY_COST, sealer)
            self._shrink()

    def scope_ready(self, key_id: str) -> bool:
        """Whether this saver made sure the key scope of ``key_id`` exists."""
        with self._lock:
            return ("scope", key_id) in self._items

    def put_scope_ready(self, key_id: str) -> None:
        """Remember that the key scope of ``key_id`` exists."""
        with self._lock:
            self._add(("scope", key_id), ENTRY_COST, True)
            self._shrink()

    # -- verified content -----------------------------------------------------------------------

    def content(self, checkpoint_id: str) -> tuple[Loaded, dict[str, bytes]] | None:
        """The envelope and every blob it needs, or None unless all are cached."""
        with self._lock:
            item = self._items.get(("envelope", checkpoint_id))
            if item is None:
                return None
            loaded: Loaded = item[1]
            blobs: dict[str, bytes] = {}
            for _type, digest in loaded.blobs.values():
                found = self._items.get(("blob", digest))
                if found is None:
                    return None
                self._items.move_to_end(("blob", digest))
                blobs[digest] = found[1]
            self._items.move_to_end(("envelope", checkpoint_id))
            return loaded, blobs

    def put_content(self, checkpoint_id: str, loaded: Loaded, blobs: Mapping[str, bytes]) -> None:
        """Remember a verified checkpoint (``blobs``: digest -> bytes of its blob channels)."""
        with self._lock:
            self._add(("envelope", checkpoint_id), ENTRY_COST + loaded.size, loaded)
            self._add_blobs(blobs)
            self._shrink()

    def blob(self, digest: str) -> bytes | None:
        """The cached (verified) bytes of a blob, or None."""
        with self._lock:
            item = self._items.get(("blob", digest))
        if item is None:
            return None
        data: bytes = item[1]
        return data

    def spliced(self, checkpoint_id: str) -> tuple[Loaded, bytes] | None:
        """The envelope and the spliced checkpoint, or None unless both are cached."""
        with self._lock:
            data = self._items.get(("spliced", checkpoint_id))
            envelope = self._items.get(("envelope", checkpoint_id))
            if data is None or envelope is None:
                return None
            self._items.move_to_end(("spliced", checkpoint_id))
            self._items.move_to_end(("envelope", checkpoint_id))
            return envelope[1], data[1]

    def put_spliced(self, checkpoint_id: str, data: bytes) -> None:
        """Remember the spliced form of a checkpoint."""
        with self._lock:
            self._add(("spliced", checkpoint_id), ENTRY_COST + len(data), data)
            self._shrink()

    def sealed(self, digest: str, row: tuple[object, ...]) -> bool:
        """Whether ``row`` (a pending write's sealed columns) equals one whose ``digest``
        was computed or checked before -- then it matches the digest without hashing."""
        with self._lock:
            item = self._items.get(("write", digest))
            if item is None or item[1] != row:
                return False
            self._items.move_to_end(("write", digest))
            return True

    def put_sealed(self, digest: str, row: tuple[object, ...]) -> None:
        """Remember that ``digest`` seals ``row`` (checked, or computed when written)."""
        size = sum(len(v) if isinstance(v, bytes | str) else 8 for v in row)
        with self._lock:
            self._add(("write", digest), ENTRY_COST + size, row)
            self._shrink()

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    # -- the bound (callers hold the lock) ------------------------------------------------------

    def _add(self, key: Key, cost: int, value: object) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old[0]
        if cost > self.max_bytes // 4:
            return  # a huge value would flush everything else
        self._items[key] = (cost, value)
        self._bytes += cost

    def _add_blobs(self, blobs: Mapping[str, bytes]) -> None:
        for digest, data in blobs.items():
            key = ("blob", digest)
            if key in self._items:
                self._items.move_to_end(key)  # the same bytes: a digest names them
            else:
                self._add(key, ENTRY_COST + len(data), data)

    def _drop(self, key: Key) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old[0]

    def _shrink(self) -> None:
        while self._bytes > self.max_bytes:
            _, (cost, _) = self._items.popitem(last=False)
            self._bytes -= cost
