"""Reading checkpoints back: ``get_tuple`` and ``list``, each byte verified by ckptdb."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    CheckpointTuple,
    get_checkpoint_id,
)

from ._core import (
    _ROW_COLUMNS,
    LIST_PAGE,
    SaverCore,
    _configurable,
    _Gone,
    _row,
    _thread,
    _Uncached,
)

#: The row with this id, only if no newer one exists in its thread and namespace.
_NEWEST_IS = (
    "thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3 AND NOT EXISTS (SELECT 1"
    " FROM lg_checkpoint n WHERE n.thread_id = ?1 AND n.checkpoint_ns = ?2"
    " AND n.checkpoint_id > ?3)"
)


class Reads(SaverCore):
    """Reading checkpoints back: ``get_tuple`` and ``list``, each byte verified by ckptdb."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (``checkpoint_id``), or the newest one of the
        thread and checkpoint namespace; None when there is none. Pending writes come in
        ``writes_sort_key`` order."""
        thread_id, ns = _thread(config)
        thread_value = _configurable(config)["thread_id"]
        checkpoint_id = get_checkpoint_id(config)
        by_id = "thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        # The hot cases -- a checkpoint by id, or the newest when it is this saver's last
        # put (no newer row) -- are one statement (the row, its writes and whether ckptdb
        # still holds the checkpoint, joined). When the content is in the verified cache
        # nothing else is read, so that statement's own snapshot is the whole answer and
        # needs no BEGIN/COMMIT around it; otherwise it is asked again inside a snapshot.
        if checkpoint_id:
            params = (thread_id, ns, str(checkpoint_id))
            with self.db.read_session(snapshot=False) as s:
                fast = self._one_from_cache(s, by_id, params, thread_value)
            if not isinstance(fast, _Uncached):
                return None if isinstance(fast, _Gone) else fast
            with self.db.read_session() as s:
                found = self._one_with_writes(s, by_id, params, thread_value)
            return None if isinstance(found, _Gone) else found
        hint = self._last_put.get((thread_id, ns))
        if hint is not None:
            with self.db.read_session(snapshot=False) as s:
                fast = self._one_from_cache(s, _NEWEST_IS, (thread_id, ns, hint[0]), thread_value)
            if isinstance(fast, CheckpointTuple):
                return fast
        with self.db.read_session() as s:
            # The newest id first, then the by-id join: SQLite runs the ORDER BY ... LIMIT 1
            # subquery inside the join several times slower than on its own.
            newest_id = s.scalar(
                "SELECT checkpoint_id FROM lg_checkpoint WHERE thread_id = ?"
                " AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
                (thread_id, ns),
            )
            if newest_id is None:
                return None
            newest = self._one_with_writes(s, by_id, (thread_id, ns, newest_id), thread_value)
            if not isinstance(newest, _Gone):
                return newest
        # Unusual: the newest row points at a collected checkpoint; walk the rest.
        return next(self.list(config, limit=1), None)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by LangGraph checkpoint id): of one thread (and, when
        ``checkpoint_ns`` is given, one checkpoint namespace) or of every thread when
        ``config`` is None; only those whose metadata contains every ``filter`` pair,
        created before ``before``'s checkpoint, at most ``limit``.

        No lock or transaction is held between the tuples it yields."""
        for page in self._pages(config, filter, before, limit):
            yield from page

    def _pages(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[builtins.list[CheckpointTuple]]:
        if limit is not None and limit <= 0:
            return
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        thread_value: Any = None
        if config is not None:
            conf = _configurable(config)
            thread_value = conf["thread_id"]
            where.append("thread_id = ?")
            params.append(str(thread_value))
            if conf.get("checkpoint_ns") is not None:
                where.append("checkpoint_ns = ?")
                params.append(str(conf["checkpoint_ns"]))
            if cid := get_checkpoint_id(config):
                where.append("checkpoint_id = ?")
                params.append(str(cid))
        if before is not None and (before_id := get_checkpoint_id(before)):
            where.append("checkpoint_id < ?")
            params.append(str(before_id))
        wanted = dict(filter) if filter else None
        if wanted and isinstance(wanted.get("run_id"), str):
            where.append("run_id = ?")
            params.append(wanted["run_id"])
        remaining = limit
        cursor: tuple[str, str, str] | None = None
        while True:
            # Without a metadata filter every stored row is a result (unless collected), so
            # a page need not be longer than what is still wanted.
            size = LIST_PAGE if wanted or remaining is None else min(LIST_PAGE, remaining)
            clause = list(where)
            args = list(params)
            if cursor is not None:
                clause.append("(checkpoint_id, thread_id, checkpoint_ns) < (?, ?, ?)")
                args.extend(cursor)
            sql = (
                f"SELECT {_ROW_COLUMNS} FROM lg_checkpoint"
                + (" WHERE " + " AND ".join(clause) if clause else "")
                + " ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC LIMIT ?"
            )
            with self.db.read_session() as s:
                rows = [_row(r) for r in s.execute(sql, (*args, size))]
                page = self._tuples(s, rows, thread_value, wanted)
            if remaining is not None:
                page = page[:remaining]
                remaining -= len(page)
            if page:
                yield page
            if len(rows) < size or remaining == 0:
                return
            last = rows[-1]
            cursor = (last.checkpoint_id, last.thread_id, last.checkpoint_ns)

    # -- writing --------------------------------------------------------------------------
