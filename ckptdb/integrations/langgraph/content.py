"""The verified content of a ckptdb checkpoint holding a LangGraph checkpoint: read (and
verified, through ckptdb) once, then served from the saver's cache, and built into a fresh
LangGraph checkpoint on every hand-out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from ... import errors
from . import _layout
from ._cache import Loaded
from ._core import SaverCore
from .serialization import loads


def _spliced(loaded: Loaded, blobs: dict[str, bytes]) -> bytes | None:
    """The whole checkpoint as one msgpack document, or None when it cannot be built at
    the byte level. Envelope v1: inline values first, then blob channels (the order the
    per-value decoding used); v2: those serialized apart added to the ones inside."""
    parts = [
        *loaded.values.items(),
        *((ch, (t, blobs[d])) for ch, (t, d) in loaded.blobs.items()),
    ]
    if loaded.version < 2:
        return _layout.splice(loaded.checkpoint, parts)
    return _layout.merge(loaded.checkpoint, parts)


def channels_inside(serde: SerializerProtocol, checkpoint: _layout.Typed) -> frozenset[str]:
    """The channels whose values ride inside a version 2 ``checkpoint``: read from its
    bytes when they are plain msgpack, else by deserializing it."""
    found = _layout.inside(checkpoint)
    if found is not None:
        return found
    whole = loads(serde, *checkpoint)
    values = whole.get("channel_values") if isinstance(whole, dict) else None
    if not isinstance(values, dict):
        raise errors.CorruptionError("a stored LangGraph checkpoint has no map of channel values")
    return frozenset(str(channel) for channel in values)


class Content(SaverCore):
    """Reading and building checkpoint content (see the module docstring)."""

    def _load(self, checkpoint_id: str) -> tuple[Loaded, dict[str, bytes]] | None:
        """Read (and verify, through ckptdb) one checkpoint's content and cache it; None
        when it no longer exists."""
        return self._load_many([checkpoint_id]).get(checkpoint_id)

    def _load_many(self, checkpoint_ids: list[str]) -> dict[str, tuple[Loaded, dict[str, bytes]]]:
        """Read (and verify, through ckptdb) the content of many checkpoints and cache it,
        by id; those that no longer exist (collected outside the saver, e.g. by `ckptdb gc`)
        are left out. Three reads whatever their number: the manifests, the envelopes, the
        channel blobs."""
        found = self.db.get_many(checkpoint_ids, prefetch=(_layout.ENVELOPE_ENTRY,))
        envelopes = self.db.read_many((cp, _layout.ENVELOPE_ENTRY) for cp in found.values())
        decoded = [
            (cp, raw, _layout.decode_envelope(raw, cp.id))
            for cp, raw in zip(found.values(), envelopes, strict=True)
        ]
        wanted = [(cp, entry) for cp, _, env in decoded for entry, _ in env.blobs.values()]
        channel_bytes = iter(self.db.read_many(wanted))
        out: dict[str, tuple[Loaded, dict[str, bytes]]] = {}
        for cp, raw, env in decoded:
            blobs: dict[str, bytes] = {}
            refs: dict[str, tuple[str, str]] = {}
            for ch, (entry, type_) in env.blobs.items():
                digest = cp.ref(entry).digest
                blobs[digest] = next(channel_bytes)
                refs[ch] = (type_, digest)
            loaded = Loaded(
                cp.metadata_json,
                env.checkpoint,
                env.values,
                refs,
                len(raw),
                env.version,
            )
            self._cache.put_content(cp.id, loaded, blobs)
            out[cp.id] = (loaded, blobs)
        return out

    def _cached_or_load(self, checkpoint_id: str) -> tuple[Loaded, dict[str, bytes]] | None:
        """A checkpoint's content from the cache, else read and verified (None: gone)."""
        return self._cache.content(checkpoint_id) or self._load(checkpoint_id)

    def _content(
        self,
        ckpt_id: str,
        hot: tuple[Loaded, bytes] | None = None,
        loaded_now: tuple[Loaded, dict[str, bytes]] | None = None,
    ) -> tuple[Loaded, Callable[[], Checkpoint]] | None:
        """The verified content of a ckptdb checkpoint (cached, or read and verified once)
        and how to build a fresh LangGraph checkpoint of it (deserialized on every call, so
        callers never share objects); None when the checkpoint no longer exists. ``hot``:
        its spliced cache entry if the caller already took it; ``loaded_now``: its content if
        the caller already has it (from the cache, or just read by :meth:`_load_many`)."""
        if hot is None and loaded_now is None:
            hot = self._cache.spliced(ckpt_id)
        if hot is not None:
            spliced_hot = hot[1]
            return hot[0], lambda: self._checkpoint_of(spliced_hot)
        hit = loaded_now or self._cached_or_load(ckpt_id)
        if hit is None:
            return None
        loaded, blobs = hit
        spliced = _spliced(loaded, blobs)
        if spliced is not None:
            self._cache.put_spliced(ckpt_id, spliced)
            return loaded, lambda: self._checkpoint_of(spliced)

        def build() -> Checkpoint:
            checkpoint, values = self._decoded(loaded)
            for ch, (t, d) in loaded.values.items():
                values[ch] = loads(self.serde, t, d)
            for ch, (type_, digest) in loaded.blobs.items():
                values[ch] = loads(self.serde, type_, blobs[digest])
            return checkpoint

        return loaded, build

    def _decoded(self, loaded: Loaded) -> tuple[Checkpoint, dict[str, Any]]:
        """The stored checkpoint deserialized (one call) and its channel values map: the
        values that ride inside it (envelope v2), else a new empty map put in it (v1)."""
        checkpoint = loads(self.serde, *loaded.checkpoint)
        if not isinstance(checkpoint, dict):
            raise errors.CorruptionError("a stored LangGraph checkpoint is not a map")
        if loaded.version < 2:
            values: dict[str, Any] = {}
            checkpoint["channel_values"] = values
        else:
            inside = checkpoint.get("channel_values")
            if not isinstance(inside, dict):
                raise errors.CorruptionError(
                    "a stored LangGraph checkpoint has no map of channel values"
                )
            values = inside
        return cast(Checkpoint, checkpoint), values

    def _stored_values(
        self, loaded: Loaded, blobs: dict[str, bytes], channels: Iterable[str]
    ) -> dict[str, Any]:
        """The values this checkpoint stores for those of ``channels`` it has a value of,
        deserialized: the checkpoint itself at most once, and only when one of them rides
        inside it."""
        out: dict[str, Any] = {}
        rest: list[str] = []
        for ch in channels:
            if ch in loaded.values:
                out[ch] = loads(self.serde, *loaded.values[ch])
            elif ch in loaded.blobs:
                type_, digest = loaded.blobs[ch]
                out[ch] = loads(self.serde, type_, blobs[digest])
            else:
                rest.append(ch)
        if rest and loaded.version >= 2 and not self._inside(loaded).isdisjoint(rest):
            values = self._decoded(loaded)[1]
            out.update((ch, values[ch]) for ch in rest if ch in values)
        return out

    def _inside(self, loaded: Loaded) -> frozenset[str]:
        """The channels whose values ride inside a v2 checkpoint (remembered in it)."""
        if loaded.inside is None:
            loaded.inside = channels_inside(self.serde, loaded.checkpoint)
        return loaded.inside

    def _checkpoint_of(self, spliced: bytes) -> Checkpoint:
        checkpoint = loads(self.serde, "msgpack", spliced)
        if not isinstance(checkpoint, dict):  # pragma: no cover - splice checks the map
            raise errors.CorruptionError("a stored LangGraph checkpoint is not a map")
        return cast(Checkpoint, checkpoint)
