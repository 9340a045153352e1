"""``get_delta_channel_history`` (LangGraph's ``DeltaChannel``, beta) in one query walk.

LangGraph's default walks the parent chain with one ``get_tuple`` per ancestor (each
reading and decoding every channel and every pending write). Here the ancestors come from
one recursive query over ``lg_checkpoint`` (in pages of :data:`WALK_PAGE`, so a channel
seeded nearby never walks a long thread to its root), their existence from one
``Database.existing``, the pending writes *of the requested channels only* from one query,
and which channels each ancestor stores from the verified envelope cache -- only the seed
values themselves are deserialized (a small one with the checkpoint it rides in).

The result equals the default implementation's (``tests/test_langgraph_delta.py`` compares
them on forked threads): writes oldest to newest, each checkpoint's in ``writes_sort_key``
order, the target's own writes excluded, and per channel the value stored at the nearest
ancestor holding one as ``seed`` (omitted when the walk reached the root or a missing
checkpoint first).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
    writes_sort_key,
)

from ...extension import Session, check_types
from .content import Content
from .pending import PendingWrites
from .rows import CHECKPOINT_COLUMNS, WRITE_TYPES, CheckpointRow, batches, checkpoint_row
from .threads import thread_of

#: Ancestors fetched per step of the walk.
WALK_PAGE = 64


class DeltaHistory(PendingWrites, Content):
    """The ``DeltaChannel`` read path (see the module docstring)."""

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per requested channel: the pending writes of the target's ancestors since the
        nearest one that stores a value of the channel (oldest first), and that value as
        ``seed``. Same result as LangGraph's default walk, in a few statements per
        :data:`WALK_PAGE` ancestors."""
        if not channels:
            return {}
        thread_id, ns, _conf = thread_of(config)
        wanted = list(dict.fromkeys(channels))
        # per channel, the writes of each visited checkpoint, newest checkpoint first
        collected: dict[str, builtins.list[builtins.list[PendingWrite]]] = {c: [] for c in wanted}
        seeds: dict[str, Any] = {}
        remaining = set(wanted)
        with self.db.read_session() as s:
            cid = get_checkpoint_id(config)
            if cid:
                target = s.one(
                    f"SELECT {CHECKPOINT_COLUMNS} FROM lg_checkpoint"
                    " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    (thread_id, ns, str(cid)),
                )
            else:
                target = s.one(
                    f"SELECT {CHECKPOINT_COLUMNS} FROM lg_checkpoint WHERE thread_id = ?"
                    " AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
                    (thread_id, ns),
                )
            start = None
            gone = False
            if target is not None:
                row = checkpoint_row(target)
                if self.db.existing([row.ckpt_id]):  # get_tuple would return it
                    start = row.parent_id
                else:
                    gone = not cid
        if gone:  # the newest was collected: get_tuple resolves the target then
            found = self.get_tuple(config)
            start = (
                None
                if found is None or found.parent_config is None
                else (get_checkpoint_id(found.parent_config))
            )
        seen: set[str] = set()
        while start is not None and remaining:
            if start in seen:
                break  # a cycle of parent links (a damaged file): the default would loop
            seen.add(start)
            start = self._walk_page(thread_id, ns, start, remaining, collected, seeds)
        result: dict[str, DeltaChannelHistory] = {}
        for ch in wanted:
            # gathered newest checkpoint first: oldest first is the other way round
            writes = [w for ws in reversed(collected[ch]) for w in ws]
            entry: DeltaChannelHistory = {"writes": writes}
            if ch in seeds:
                entry["seed"] = seeds[ch]
            result[ch] = entry
        return result

    def _walk_page(
        self,
        thread_id: str,
        ns: str,
        start: str,
        remaining: set[str],
        collected: dict[str, builtins.list[builtins.list[PendingWrite]]],
        seeds: dict[str, Any],
    ) -> str | None:
        """Visit up to WALK_PAGE ancestors from ``start``; returns where to go on, or None
        when the walk is over (root, a missing checkpoint, or every channel seeded)."""
        with self.db.read_session() as s:
            chain = [
                checkpoint_row(r)
                for r in s.execute(
                    "WITH RECURSIVE chain(thread_id, checkpoint_ns, checkpoint_id,"
                    " parent_checkpoint_id, ckpt_id, depth) AS ("
                    f" SELECT {CHECKPOINT_COLUMNS}, 0 FROM lg_checkpoint"
                    " WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
                    " UNION ALL"
                    " SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id,"
                    " c.parent_checkpoint_id, c.ckpt_id, chain.depth + 1"
                    " FROM chain JOIN lg_checkpoint c ON c.thread_id = ?1"
                    " AND c.checkpoint_ns = ?2 AND c.checkpoint_id = chain.parent_checkpoint_id"
                    " WHERE chain.depth + 1 < ?4)"
                    f" SELECT {CHECKPOINT_COLUMNS} FROM chain ORDER BY depth",
                    (thread_id, ns, start, WALK_PAGE),
                )
            ]
            present = self.db.existing({r.ckpt_id for r in chain}) if chain else set()
            visited: builtins.list[CheckpointRow] = []
            for r in chain:
                if r.ckpt_id not in present:
                    break  # get_tuple would return None: the default walk stops here
                visited.append(r)
            writes = self._channel_writes(s, visited, sorted(remaining))
        for r in visited:
            hit = self._cached_or_load(r.ckpt_id)
            if hit is None:
                return None
            loaded, blobs = hit
            # this checkpoint's writes, in its own order, as one chunk per channel
            chunk: dict[str, builtins.list[PendingWrite]] = {}
            for w in writes.get(r.checkpoint_id, []):
                if w[1] in remaining:
                    chunk.setdefault(w[1], []).append(w)
            for ch, ws in chunk.items():
                collected[ch].append(ws)
            found = self._stored_values(loaded, blobs, remaining)
            seeds.update(found)
            remaining.difference_update(found)
            if not remaining:
                return None
        if len(visited) < len(chain) or len(chain) < WALK_PAGE:
            return None  # a missing checkpoint, or the root was reached
        return chain[-1].parent_id

    def _channel_writes(
        self, s: Session, rows: Sequence[CheckpointRow], channels: Sequence[str]
    ) -> dict[str, builtins.list[PendingWrite]]:
        """checkpoint_id -> the pending writes of ``channels`` stored there (verified), in
        ``writes_sort_key`` order; one statement per 150 checkpoints."""
        if not rows or not channels:
            return {}
        grouped: dict[str, builtins.list[Any]] = {}
        thread_id, ns = rows[0].thread_id, rows[0].checkpoint_ns
        chan_marks = ", ".join("?" * len(channels))
        for part in batches(rows, 150):
            marks = ", ".join("?" * len(part))
            for w in s.execute(
                "SELECT checkpoint_id, task_id, channel, type, value, task_path, idx,"
                f" {self._digest_sql} FROM lg_write WHERE thread_id = ? AND checkpoint_ns = ?"
                f" AND checkpoint_id IN ({marks}) AND channel IN ({chan_marks})",
                (thread_id, ns, *(r.checkpoint_id for r in part), *channels),
            ):
                check_types(w[1:7], WRITE_TYPES, "pending write")
                self._check_write(
                    (thread_id, ns, w[0], w[1], w[6], w[2], w[3], w[4], w[5]),
                    w[7],
                    f"{w[0]!r} task {w[1]!r} idx {w[6]}",
                )
                grouped.setdefault(str(w[0]), []).append(w[1:7])
        out: dict[str, builtins.list[PendingWrite]] = {}
        for key, ws in grouped.items():
            ws.sort(key=lambda r: writes_sort_key(r[4], r[0], r[5]))
            out[key] = [(r[0], r[1], self._write_value((thread_id, ns, key), r)) for r in ws]
        return out
