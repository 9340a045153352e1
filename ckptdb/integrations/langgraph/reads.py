"""Reading checkpoints back: ``get_tuple`` and ``list``, each byte verified by ckptdb."""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
)

from ...extension import (
    SEALED_METADATA,
    Row,
    Session,
    canonical_json,
    metadata_from_json,
)
from ._cache import Loaded, Unknown
from .content import Content
from .pending import SEALED_TYPE, PendingWrites
from .rows import CHECKPOINT_COLUMNS, CheckpointRow, checkpoint_row
from .threads import configurable, thread_of

#: Rows fetched per read transaction while listing.
LIST_PAGE = 64

#: The row with this id, only if no newer one exists in its thread and namespace.
_NEWEST_IS = (
    "thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3 AND NOT EXISTS (SELECT 1"
    " FROM lg_checkpoint n WHERE n.thread_id = ?1 AND n.checkpoint_ns = ?2"
    " AND n.checkpoint_id > ?3)"
)


def metadata_clause(
    wanted: dict[str, Any], dialect: str = "sqlite"
) -> tuple[str | None, builtins.list[Any], bool]:
    """A SQL condition on ``lg_checkpoint`` rows that keeps every checkpoint whose LangGraph
    metadata may hold all of ``wanted``'s scalar pairs (strings, numbers, booleans, None),
    its parameters, and whether it covers every pair. It is a superset: metadata SQL cannot
    read (sealed in a key scope) passes, and Python checks each result with ``==`` after
    reading it; pairs with other values (maps, lists) are left to Python alone."""
    if dialect == "postgresql":
        return _metadata_clause_pg(wanted)
    terms: builtins.list[str] = []
    values: builtins.list[Any] = []
    for key, value in wanted.items():
        if not isinstance(key, str) or '"' in key or "\\" in key:
            continue
        path = f'$.langgraph."{key}"'
        if value is None:
            terms.append("json_extract(k.metadata, ?) IS NULL")
            values.append(path)
        elif isinstance(value, str) or (type(value) is int and 1 < abs(value) < 2**63):
            # ckptdb stores metadata as canonical JSON, so a matching pair appears in the
            # text spelled exactly so: instr() rejects nearly every row before the JSON
            # parser runs (the match may be nested elsewhere: json_extract decides).
            terms.append("instr(k.metadata, ?) > 0 AND json_extract(k.metadata, ?) = ?")
            values.extend((canonical_json(key) + ":" + canonical_json(value), path, value))
        elif isinstance(value, int | float):  # 1 == 1.0 == True: no single spelling
            terms.append("json_extract(k.metadata, ?) = ?")
            values.extend((path, value))
    if not terms:
        return None, [], False
    # The ckptdb metadata is read through the public ``checkpoints`` view: one scan of the
    # small manifest rows, never the checkpoint content.
    clause = (
        "ckpt_id IN (SELECT k.checkpoint_id FROM checkpoints k WHERE instr(k.metadata, ?) > 0"
        " OR (" + " AND ".join(terms) + "))"
    )
    sealed = canonical_json(SEALED_METADATA) + ":"
    return clause, [sealed, *values], len(terms) == len(wanted)


def _metadata_clause_pg(wanted: dict[str, Any]) -> tuple[str | None, builtins.list[Any], bool]:
    """:func:`metadata_clause` on PostgreSQL: strings, None and integers beyond the booleans'
    range are pushed (jsonb compares them exactly as the stored canonical JSON says them);
    other numbers are left to Python (1 == 1.0 == True there, not in jsonb)."""
    terms: builtins.list[str] = []
    values: builtins.list[Any] = []
    for key, value in wanted.items():
        if not isinstance(key, str):
            continue
        if value is None:  # missing or null, as SQLite's json_extract reads both
            terms.append(
                "coalesce(k.metadata::jsonb -> 'langgraph' -> ?, 'null'::jsonb) = 'null'::jsonb"
            )
            values.append(key)
        elif isinstance(value, str) or (type(value) is int and 1 < abs(value) < 2**63):
            # The canonical spelling must appear in the text (strpos rejects nearly every
            # row before jsonb parses it); jsonb decides.
            terms.append(
                "strpos(k.metadata, ?) > 0 AND (k.metadata::jsonb -> 'langgraph' -> ?) = ?::jsonb"
            )
            spelled = canonical_json(value)
            values.extend((canonical_json(key) + ":" + spelled, key, spelled))
    if not terms:
        return None, [], False
    clause = (
        "ckpt_id IN (SELECT k.checkpoint_id FROM checkpoints k WHERE strpos(k.metadata, ?) > 0"
        " OR (" + " AND ".join(terms) + "))"
    )
    sealed = canonical_json(SEALED_METADATA) + ":"
    return clause, [sealed, *values], len(terms) == len(wanted)


#: The rows of one thread's checkpoint namespace (``_one`` keeps the newest).
_OF_PAIR = "thread_id = ? AND checkpoint_ns = ?"


class _Gone:
    """The row's ckptdb checkpoint was collected (see ``Reads._one``)."""


#: The answer for a row whose ckptdb checkpoint was collected.
GONE = _Gone()


class _Uncached:
    """Answering would need a read beyond the one statement (see ``Reads._one``)."""


#: The answer when the fast path would need another read.
UNCACHED = _Uncached()


class Reads(PendingWrites, Content):
    """Reading checkpoints back: ``get_tuple`` and ``list``, each byte verified by ckptdb."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (``checkpoint_id``), or the newest one of the
        thread and checkpoint namespace; None when there is none. Pending writes come in
        ``writes_sort_key`` order."""
        thread_id, ns, conf = thread_of(config)
        thread_value = conf["thread_id"]
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
        state = self._cache.thread(thread_id, ns)
        hint = None if state is None else state.last_put
        if hint is not None:
            with self.db.read_session(snapshot=False) as s:
                fast = self._one_from_cache(s, _NEWEST_IS, (thread_id, ns, hint[0]), thread_value)
            if isinstance(fast, CheckpointTuple):
                return fast
        with self.db.read_session() as s:
            if s.dialect == "postgresql":
                # One statement: PostgreSQL runs the newest-row subquery inside the join
                # as fast as on its own, and each statement is a round trip to the server.
                newest = self._one_with_writes(s, _OF_PAIR, (thread_id, ns), thread_value)
            else:
                # The newest id first, then the by-id join: SQLite runs the ORDER BY ...
                # LIMIT 1 subquery inside the join several times slower than on its own.
                newest_id = s.scalar(
                    "SELECT checkpoint_id FROM lg_checkpoint WHERE thread_id = ?"
                    " AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
                    (thread_id, ns),
                )
                newest = (
                    None
                    if newest_id is None
                    else self._one_with_writes(s, by_id, (thread_id, ns, newest_id), thread_value)
                )
            if newest is None:
                return None
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
            conf = configurable(config)
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
        pushed = True
        if wanted:
            matching, values, pushed = metadata_clause(wanted, self._dialect)
            if matching:
                where.append(matching)
                params.extend(values)
        remaining = limit
        cursor: tuple[str, str, str] | None = None
        while True:
            # When SQL applied the whole filter (or there is none) every row is a result
            # (unless collected or sealed), so a page need not be longer than what is still
            # wanted; Python checks each result against the filter all the same.
            size = LIST_PAGE if not pushed or remaining is None else min(LIST_PAGE, remaining)
            clause = list(where)
            args = list(params)
            if cursor is not None:
                clause.append("(checkpoint_id, thread_id, checkpoint_ns) < (?, ?, ?)")
                args.extend(cursor)
            sql = (
                f"SELECT {CHECKPOINT_COLUMNS} FROM lg_checkpoint"
                + (" WHERE " + " AND ".join(clause) if clause else "")
                + " ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC LIMIT ?"
            )
            with self.db.read_session() as s:
                rows = [checkpoint_row(r) for r in s.execute(sql, (*args, size))]
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

    def _one_with_writes(
        self, s: Session, where: str, params: Sequence[Any], thread_value: Any
    ) -> CheckpointTuple | _Gone | None:
        """The newest ``lg_checkpoint`` row matching ``where`` and its pending writes, in
        one statement (a join), built into a tuple; None when no row matches, :data:`GONE`
        when the row's ckptdb checkpoint was collected. Inside the caller's read snapshot:
        the content may be read and verified after the statement."""
        found = self._one(s, where, params, thread_value, cached_only=False)
        if isinstance(found, _Uncached):  # pragma: no cover - only cached_only returns it
            raise AssertionError("unreachable")
        return found

    def _one_from_cache(
        self, s: Session, where: str, params: Sequence[Any], thread_value: Any
    ) -> CheckpointTuple | _Gone | _Uncached | None:
        """:meth:`_one_with_writes` for a caller outside a read snapshot: the one statement
        and nothing more -- :data:`UNCACHED` when the answer would need another read (the
        checkpoint's content, or the thread's key scope for a sealed write), since a second
        read could see a later state than the statement did (a prune or GC in between);
        the caller then asks again inside a snapshot."""
        return self._one(s, where, params, thread_value, cached_only=True)

    def _one(
        self,
        s: Session,
        where: str,
        params: Sequence[Any],
        thread_value: Any,
        *,
        cached_only: bool,
    ) -> CheckpointTuple | _Gone | _Uncached | None:
        digest = "w.digest" if self._digest_sql == "digest" else "NULL"
        # Served from the cache alone, whether ckptdb still holds the checkpoint is asked
        # in the same statement, through the public ``checkpoints`` view (an indexed lookup
        # by id). Otherwise the content is read in the caller's snapshot, which tells it
        # too: the view (costly to prepare on a fresh connection) is left out.
        held = (
            "EXISTS (SELECT 1 FROM checkpoints k WHERE k.checkpoint_id = c.ckpt_id)"
            if cached_only
            else "NULL"
        )
        found = s.execute(
            "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,"
            " c.ckpt_id, w.task_id, w.channel, w.type, w.value, w.task_path, w.idx,"
            f" {digest}, w.write_id, {held}"
            f" FROM (SELECT {CHECKPOINT_COLUMNS} FROM lg_checkpoint WHERE {where}"
            " ORDER BY checkpoint_id DESC LIMIT 1) c LEFT JOIN lg_write w"
            " ON w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns"
            " AND w.checkpoint_id = c.checkpoint_id",
            params,
        )
        if not found:
            return None
        row = checkpoint_row(found[0])
        writes_of = [(*f[:3], *f[5:12]) for f in found if f[12] is not None]
        if not cached_only:
            tuples = self._tuples(s, [row], thread_value, writes=self._pending(writes_of))
            return tuples[0] if tuples else GONE  # GONE: collected outside the saver
        if found[0][13] != 1:
            return GONE  # collected outside the saver (e.g. `ckptdb gc`)
        hot = self._cache.spliced(row.ckpt_id)
        if hot is None or not self._scope_known(row, found):
            return UNCACHED
        tuples = self._tuples(
            s,
            [row],
            thread_value,
            writes=self._pending(writes_of),
            present={row.ckpt_id},
            hot={row.ckpt_id: hot},
        )
        return tuples[0] if tuples else GONE

    def _scope_known(self, row: CheckpointRow, found: Sequence[Row]) -> bool:
        """Whether the writes of ``row`` (``found``) open without another read: none is
        sealed, or the thread's namespace and its key scope are already known."""
        if any(isinstance(f[7], str) and f[7].startswith(SEALED_TYPE) for f in found):
            state = self._cache.thread(row.thread_id, row.checkpoint_ns)
            return state is not None and not isinstance(
                self._cache.sealer(state.namespace), Unknown
            )
        return True

    def _tuples(
        self,
        s: Session,
        rows: Sequence[CheckpointRow],
        thread_value: Any,
        wanted: dict[str, Any] | None = None,
        *,
        writes: dict[tuple[str, str, str], builtins.list[PendingWrite]] | None = None,
        present: set[str] | None = None,
        hot: dict[str, tuple[Loaded, bytes] | None] | None = None,
    ) -> builtins.list[CheckpointTuple]:
        """The checkpoints of ``rows`` that still exist and whose metadata contains
        ``wanted``, in order. Within the caller's read snapshot: what neither cache holds
        is read and verified in one go (then cached), which also tells whether it still
        exists; one statement asks whether the cached ones do, one reads every pending
        write. ``present``: the ckptdb ids the caller already knows exist in this snapshot;
        ``hot``: spliced cache entries the caller already took (so one that another thread
        evicts meanwhile is not read again)."""
        kept: builtins.list[tuple[CheckpointRow, Checkpoint, dict[str, Any]]] = []
        # Each row's cache entries are taken once; what neither cache holds is read and
        # verified in one go, not checkpoint by checkpoint.
        taken: dict[str, tuple[Loaded, bytes] | None] = dict(hot or {})
        known: dict[str, tuple[Loaded, dict[str, bytes]]] = {}
        cold: builtins.list[str] = []
        for r in rows:
            cid = r.ckpt_id
            if present is not None and cid not in present:
                continue
            if cid in known or cid in cold or taken.get(cid):
                continue
            taken[cid] = self._cache.spliced(cid)
            if taken[cid] is None:
                cached = self._cache.content(cid)
                if cached is None:
                    cold.append(cid)
                else:
                    known[cid] = cached
        if present is None:
            # A cached checkpoint may have been collected since (e.g. by `ckptdb gc`); a
            # cold one that was is simply not found by the read below.
            warm = [cid for cid, hit in taken.items() if hit] + list(known)
            present = self.db.existing(warm) if warm else set()
        if cold:
            fetched = self._load_many(cold)
            known.update(fetched)
            present = present | fetched.keys()
        for row in rows:
            cid = row.ckpt_id
            if cid not in present:
                continue  # gone, or collected since the rows were listed
            content = self._content(cid, taken.get(cid), known.get(cid))
            if content is None:
                continue
            loaded, build = content
            stored = metadata_from_json(loaded.metadata, row.ckpt_id).get("langgraph")
            metadata = stored if isinstance(stored, dict) else {}
            if wanted and not all(metadata.get(k) == v for k, v in wanted.items()):
                continue
            kept.append((row, build(), metadata))
        if writes is None:
            writes = self._writes_of(s, [k[0] for k in kept]) if kept else {}
        out: builtins.list[CheckpointTuple] = []
        for row, checkpoint, metadata in kept:
            config: RunnableConfig = {
                "configurable": {
                    "thread_id": thread_value if thread_value is not None else row.thread_id,
                    "checkpoint_ns": row.checkpoint_ns,
                    "checkpoint_id": row.checkpoint_id,
                }
            }
            parent: RunnableConfig | None = None
            if row.parent_id:
                parent = {
                    "configurable": {
                        "thread_id": config["configurable"]["thread_id"],
                        "checkpoint_ns": row.checkpoint_ns,
                        "checkpoint_id": row.parent_id,
                    }
                }
            key = (row.thread_id, row.checkpoint_ns, row.checkpoint_id)
            out.append(
                CheckpointTuple(
                    config,
                    checkpoint,
                    cast(CheckpointMetadata, metadata),
                    parent,
                    writes.get(key, []),
                )
            )
        return out
