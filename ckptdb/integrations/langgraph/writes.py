"""Writing: ``put`` (one ckptdb commit per LangGraph checkpoint) and ``put_writes``."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
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

from ... import errors
from . import _layout, sealing
from ._core import SaverCore, _configurable, _thread


class Writes(SaverCore):
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
        thread_id, ns = _thread(config)
        conf = _configurable(config)
        parent = conf.get("checkpoint_id") or None
        checkpoint_id = checkpoint.get("id")
        if not isinstance(checkpoint_id, str) or not checkpoint_id:
            raise errors.InvalidInputError("checkpoint['id'] must be a non-empty str")
        namespace = self._namespace(config, thread_id, ns)
        key = (thread_id, ns)
        parent_id = None if parent is None else str(parent)
        entries, remembered, encoded = self._encode(checkpoint, parent_id, key, namespace)
        md = dict(get_checkpoint_metadata(config, metadata))
        run, ck_meta = _layout.checkpoint_metadata(md, thread_id, ns, checkpoint_id)
        try:
            ack = self._commit(
                namespace, thread_id, ns, checkpoint_id, parent_id, run, entries, ck_meta, "lg.put"
            )
        except errors.BlobMissingError:
            # A blob this put re-used was collected meanwhile (prune, maybe in another
            # process): send every value again.
            self._channels.pop(key, None)
            entries, remembered, encoded = self._encode(checkpoint, parent_id, key, namespace)
            ack = self._commit(
                namespace, thread_id, ns, checkpoint_id, parent_id, run, entries, ck_meta, "lg.put"
            )
        # What was just committed is known and verified by construction (the id is the
        # digest of exactly these entries): the next get_tuple need not read it back.
        # (Its spliced form is built by the first read: most puts are never read back.)
        self._cache.put(ack.checkpoint_id, encoded.loaded(md), encoded.blob_bytes)
        if len(self._channels) > 10_000:
            self._channels.clear()
        self._channels[key] = remembered
        return {
            "configurable": {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

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
        thread_id, ns = _thread(config)
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            raise errors.InvalidInputError("put_writes needs configurable.checkpoint_id")
        keep: builtins.list[tuple[Any, ...]] = []
        replace: builtins.list[tuple[Any, ...]] = []
        namespace = self._namespace(config, thread_id, ns)
        for idx, (channel, value) in enumerate(writes):
            type_, data = self._dumps(value)
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
        columns = (
            " INTO lg_write (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            " type, value, task_path, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        with self.db.write_session() as s:
            if keep:
                s.executemany("INSERT OR IGNORE" + columns, keep)
            if replace:
                s.executemany("INSERT OR REPLACE" + columns, replace)
