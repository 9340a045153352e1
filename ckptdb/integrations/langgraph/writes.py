"""Writing: ``put`` (one ckptdb commit per LangGraph checkpoint) and ``put_writes``."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from ... import BlobRef, errors
from ...extension import Addressed
from . import _layout, activity, sealing
from ._cache import ThreadState
from .pending import PendingWrites
from .publish import Encoded, Publish
from .serialization import dumps, dumps_each, size_bound
from .threads import thread_of

#: What a put knows of a thread it has not put on (or whose blobs must be sent again).
_NO_STATE = ThreadState("", False, None, {})


_INSERT = (
    "INSERT INTO lg_write (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
    " type, value, task_path, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: A special channel's write replaces the one before it as a new row (a new write_id: it
#: sorts after the writes it follows), on either engine.
_REPLACE = {
    "sqlite": _INSERT.replace("INSERT", "INSERT OR REPLACE", 1),
    "postgresql": _INSERT
    + " ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET"
    " write_id = DEFAULT, channel = excluded.channel, type = excluded.type,"
    " value = excluded.value, task_path = excluded.task_path, digest = excluded.digest",
}


class Writes(Publish, PendingWrites):
    """Writing: ``put`` (one ckptdb commit per LangGraph checkpoint) and ``put_writes``."""

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint durably, as one ckptdb commit; its parent is the
        ``checkpoint_id`` of ``config`` (a fork when that is not the newest checkpoint).
        Channel values already stored (by content) are not stored again."""
        thread_id, ns, conf = thread_of(config)
        checkpoint_id = checkpoint.get("id")
        if not isinstance(checkpoint_id, str) or not checkpoint_id:
            raise errors.InvalidInputError("checkpoint['id'] must be a non-empty str")
        state = self._cache.thread(thread_id, ns)
        namespace = self._namespace(config, thread_id, ns) if state is None else state.namespace
        parent = conf.get("checkpoint_id") or None
        parent_id = None if parent is None else str(parent)
        md = get_checkpoint_metadata(config, metadata)
        run, ck_meta = _layout.checkpoint_metadata(md, thread_id, ns, checkpoint_id)
        previous = _NO_STATE if state is None else state
        for attempt in (1, 2):
            entries, encoded = self._encode(checkpoint, parent_id, namespace, previous)
            try:
                self._commit(
                    namespace,
                    thread_id,
                    ns,
                    checkpoint_id,
                    parent_id,
                    run,
                    entries,
                    ck_meta,
                    "lg.put",
                    state=state,
                    put=encoded,
                )
                break
            except errors.BlobMissingError:
                # A blob this put re-used was collected meanwhile (prune, maybe in another
                # process): send every value again, once.
                if attempt == 2:
                    raise
                if state is not None:
                    state = ThreadState(state.namespace, state.confirmed, state.last_put, {})
                previous = _NO_STATE
        return {
            "configurable": {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _encode(
        self,
        checkpoint: Checkpoint,
        parent_id: str | None,
        namespace: str,
        previous: ThreadState,
    ) -> tuple[dict[str, Any], Encoded]:
        """The entries of the ckptdb checkpoint holding ``checkpoint`` (see
        :meth:`_entries`), and what the put remembers of them.

        The checkpoint is serialized in one call with every value that rides inline inside
        it (envelope version 2). Which values are small is learnt without serializing
        them twice: a channel that rode inside this saver's last put on the thread
        (``previous``) and whose LangGraph version did not change since rides inside
        again, unsized; a plain string, bytes or number is sized by its length; anything
        else -- and every channel stored as a blob last time, whose bytes are compared with
        that blob -- is serialized on its own, and rides inside only if it came out small
        (then the one call serializes it again, which costs little for a small value).
        Versions only steer that choice: the content stored is always the value given."""
        serde = self.serde
        inline_max = self.inline_max
        blobs_before = previous.channels
        versions = checkpoint.get("channel_versions") or {}
        # The channels that rode inside the last put and still have the version they had.
        try:
            unchanged: dict[str, object] = dict(previous.versions.items() & versions.items())
        except TypeError:  # an unhashable version: no hint
            unchanged = {}
        hints: dict[str, object] = {}
        within: dict[str, Any] = {}
        unsized: dict[str, Any] = {}
        for channel, value in checkpoint.get("channel_values", {}).items():
            if channel in unchanged and type(value) is not bytearray:
                within[channel] = value
                hints[channel] = unchanged[channel]
                continue
            if channel not in blobs_before:
                bound = size_bound(value)
                if bound is not None and bound <= inline_max:
                    within[channel] = value
                    if (version := versions.get(channel)) is not None:
                        hints[channel] = version
                    continue
            unsized[channel] = value
        apart: dict[str, _layout.Typed] = {}
        for channel, typed in dumps_each(serde, unsized).items():
            value = unsized[channel]
            # msgpack gives a bytearray back as bytes (size_bound never vouches for one):
            # it keeps its own type, apart.
            if len(typed[1]) > inline_max or type(value) is bytearray:
                apart[channel] = typed
                continue
            within[channel] = value
            if (version := versions.get(channel)) is not None:
                hints[channel] = version
        # channel_values first (the merge keeps the key's place and takes the caller's value,
        # replaced next): a reader adds the blob values at the byte level (_layout.merge).
        whole: dict[str, Any] = {"channel_values": None, **checkpoint}
        whole["channel_values"] = within
        encoded = self._entries(
            dumps(serde, whole), parent_id, frozenset(within), apart, namespace, blobs_before, hints
        )
        return encoded.entries, encoded

    def _entries(
        self,
        checkpoint: _layout.Typed,
        parent_id: str | None,
        within: frozenset[str],
        apart: dict[str, _layout.Typed],
        namespace: str,
        previous: Mapping[str, BlobRef],
        versions: dict[str, object],
    ) -> Encoded:
        """The entries holding a serialized LangGraph checkpoint in ``namespace``
        (``checkpoint`` serialized with the values of the ``within`` channels, ``apart``
        the other values serialized one by one): values of ``apart`` up to ``inline_max``
        bytes inline in the envelope, each larger one an entry of its own. ``versions``:
        the version of each ``within`` channel, remembered as a hint for the next put.

        Each larger value is hashed at most once: here, and handed to ckptdb with its
        digest (``Addressed``), which does not hash it again. One whose bytes are those of
        the blob ``previous`` names for its channel (this saver's last put on the thread)
        is sent as that BlobRef: ckptdb re-uses the stored blob without receiving, hashing
        or comparing the bytes again. The decision is by content, never by LangGraph's
        channel versions, so a caller that changes a value without bumping its version is
        still stored exactly: equal to the bytes of that blob held in the verified cache
        (which hash to its digest), or else by its digest.
        """
        inline: dict[str, _layout.Typed] = {}
        entries: dict[str, Any] = {}
        names: dict[str, tuple[str, str]] = {}  # channel -> (entry, type), for the envelope
        refs: dict[str, tuple[str, str]] = {}
        blobs: dict[str, bytes] = {}
        channels: dict[str, BlobRef] = {}
        inline_max = self.inline_max
        for channel, typed in apart.items():
            type_, data = typed
            size = len(data)
            if size <= inline_max:
                inline[channel] = typed
                continue
            before = previous.get(channel)
            if (
                before is not None
                and before.size == size
                and self._cache.blob(before.digest) == data
            ):
                # The very bytes of a verified blob (so of its digest): no hashing.
                ref: BlobRef = before
                value: BlobRef | Addressed = before
            else:
                addressed = self._addressed(namespace, data)
                ref = BlobRef(addressed.digest, size)
                value = ref if ref == before else addressed
            name = _layout.channel_entry(channel)
            entries[name] = value
            names[channel] = (name, type_)
            refs[channel] = (type_, ref.digest)
            blobs[ref.digest] = data
            channels[channel] = ref
        envelope = _layout.encode_envelope(checkpoint, parent_id, inline, names)
        entries[_layout.ENVELOPE_ENTRY] = envelope
        return Encoded(
            entries, channels, checkpoint, within, inline, refs, blobs, len(envelope), versions
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store pending writes of a task against the checkpoint named by ``config``, in one
        ``BEGIN IMMEDIATE`` transaction. A write already stored for ``(task_id, idx)`` is
        kept, except the special channels (error, interrupt, ...), which are replaced."""
        thread_id, ns, _conf = thread_of(config)
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            raise errors.InvalidInputError("put_writes needs configurable.checkpoint_id")
        keep: builtins.list[tuple[Any, ...]] = []
        replace: builtins.list[tuple[Any, ...]] = []
        namespace = self._namespace(config, thread_id, ns)
        for idx, (channel, value) in enumerate(writes):
            type_, data = dumps(self.serde, value)
            index = WRITES_IDX_MAP.get(channel, idx)
            row = self._seal_write(
                namespace,
                (thread_id, ns, str(checkpoint_id), str(task_id), index, channel, type_, data,
                 task_path or ""),
            )  # fmt: skip
            sealed = sealing.sealed_row(row)
            (replace if index < 0 else keep).append(sealed)
            # Sealed here from the caller's values: reading it back need not hash it again.
            self._cache.put_sealed(sealed[9], sealed[:9])
        touch_at = self._activity_due(thread_id)
        with self.db.write_session() as s:
            if keep:
                s.executemany(_INSERT + " ON CONFLICT DO NOTHING", keep)
            if replace:
                s.executemany(_REPLACE[s.dialect], replace)
            if touch_at is not None:
                activity.touch(s, thread_id, touch_at)
        if touch_at is not None:
            self._cache.put_touched(thread_id, touch_at)
