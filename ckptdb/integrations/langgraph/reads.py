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

from ._core import _ROW_COLUMNS, LIST_PAGE, SaverCore, _configurable, _row, _thread


class Reads(SaverCore):
    """Reading checkpoints back: ``get_tuple`` and ``list``, each byte verified by ckptdb."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (``checkpoint_id``), or the newest one of the
        thread and checkpoint namespace; None when there is none. Pending writes come in
        ``writes_sort_key`` order."""
        thread_id, ns = _thread(config)
        thread_value = _configurable(config)["thread_id"]
        checkpoint_id = get_checkpoint_id(config)
        with self.db.read_session() as s:
            if checkpoint_id:
                found = s.one(
                    f"SELECT {_ROW_COLUMNS} FROM lg_checkpoint"
                    " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    (thread_id, ns, str(checkpoint_id)),
                )
                return None if found is None else self._tuple(s, _row(found), thread_value)
            rows = s.execute(
                f"SELECT {_ROW_COLUMNS} FROM lg_checkpoint WHERE thread_id = ?"
                " AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 8",
                (thread_id, ns),
            )
            for values in rows:
                tup = self._tuple(s, _row(values), thread_value)
                if tup is not None:
                    return tup
            if len(rows) < 8:
                return None
        # Unusual: the newest rows point at collected checkpoints; walk the rest.
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
            page: builtins.list[CheckpointTuple] = []
            with self.db.read_session() as s:
                rows = [_row(r) for r in s.execute(sql, (*args, LIST_PAGE))]
                for row in rows:
                    value = thread_value if thread_value is not None else row.thread_id
                    tup = self._tuple(s, row, value, wanted)
                    if tup is not None:
                        page.append(tup)
                        if remaining is not None:
                            remaining -= 1
                            if remaining == 0:
                                break
            if page:
                yield page
            if len(rows) < LIST_PAGE or remaining == 0:
                return
            last = rows[-1]
            cursor = (last.checkpoint_id, last.thread_id, last.checkpoint_ns)

    # -- writing --------------------------------------------------------------------------
