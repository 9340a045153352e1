"""The lineage of a namespace as a graph (``ckptdb log --graph`` / ``--all``).

Which checkpoints: by default the lineage of CURRENT and of the fallback (after a commit
with ``base=`` -- a branch, or LangGraph time travel -- the fallback is the old tip, so the
branch shows); with ``all`` every stored checkpoint of the namespace (pinned or retained ones
that are no longer on the CURRENT lineage included).

The drawing follows ``git log --graph``: newest first (a child always comes before its
parent: its generation is larger), one lane per line of descent, ``*`` for a checkpoint,
``|`` for a lane passing by, and a connector line (``|/``) where a branch joins the lane of
the checkpoint it was based on.
"""

from __future__ import annotations

import heapq

from .. import errors, models
from ..store import checkpoints, pins, pointers
from ..store.rows import CheckpointRow
from .checkpoint import Checkpoint
from .unit import Unit, reads

#: Lanes drawn one by one; the lanes beyond share one column with a count, so a line is
#: at most ``2 * MAX_LANES`` characters plus that column (``*+5990``: the checkpoint and
#: 5,990 other lanes; ``|+5990``: 5,991 lanes passing by). Siblings branched from one
#: checkpoint (LangGraph retries from one state make thousands) each hold a lane until
#: their common parent: drawn in full, the output would grow with their square.
MAX_LANES = 16


def layout(
    nodes: list[tuple[str, str | None]], max_lanes: int = MAX_LANES
) -> list[tuple[int, list[str]]]:
    """Lanes for ``nodes`` -- (id, parent id), children before parents -- as
    (column, drawing lines) per node. Pure: no database. Lanes from ``max_lanes`` on are
    collapsed into one column (see :data:`MAX_LANES`); the column returned is the node's
    true lane. Time and output are linear in the nodes (for a bounded ``max_lanes``)."""
    present = {n for n, _ in nodes}
    lanes: list[str | None] = []  # the parent each lane is waiting for
    waiting: dict[str, list[int]] = {}  # parent -> the lanes waiting for it
    free: list[int] = []  # a heap of lanes that were freed (some may since be gone)
    over = 0  # lanes at max_lanes or beyond that are waiting for something
    out: list[tuple[int, list[str]]] = []

    def drawn(col: int, joining: set[int]) -> list[str]:
        row = [" "] * (2 * min(len(lanes), max_lanes))
        for i in range(min(len(lanes), max_lanes)):
            if i == col:
                row[2 * i] = "*"
            elif lanes[i] is not None and i not in joining:
                row[2 * i] = "|"
        return row

    def overflow(symbol: str, others: int) -> str:
        return symbol + (f"+{others}" if others else "")

    for node, parent in nodes:
        waiters = sorted(waiting.pop(node, []))
        lines: list[str] = []
        if waiters:
            col, joining = waiters[0], waiters[1:]
            if joining:
                gone = set(joining)
                row = drawn(-1, gone)
                for j in joining:
                    if j < max_lanes:
                        row[2 * j - 1] = "/"
                over_joining = sum(1 for j in joining if j >= max_lanes)
                staying = over - over_joining
                if over_joining and col < max_lanes:
                    row[2 * max_lanes - 1] = "/"  # collapsed lanes merge to the left
                if staying:
                    row.append(overflow("|", staying - 1))
                lines.append("".join(row).rstrip())
                for j in joining:
                    lanes[j] = None
                    heapq.heappush(free, j)
                over -= over_joining
        else:
            col = len(lanes)
            while free:
                candidate = heapq.heappop(free)
                if candidate < len(lanes) and lanes[candidate] is None:
                    col = candidate
                    break
            if col == len(lanes):
                lanes.append(None)
        row = drawn(col, set())
        own = 1 if col >= max_lanes and lanes[col] is not None else 0
        if col >= max_lanes:
            row.append(overflow("*", over - own))
        elif over:
            row.append(overflow("|", over - 1))
        lines.append("".join(row).rstrip())
        was = lanes[col]
        lanes[col] = parent if parent in present else None
        if col >= max_lanes:
            over += (lanes[col] is not None) - (was is not None)
        if lanes[col] is not None:
            waiting.setdefault(str(parent), []).append(col)
        else:
            heapq.heappush(free, col)
        while lanes and lanes[-1] is None:
            lanes.pop()
        out.append((col, lines))
    return out


def _rows(tx: Unit, namespace_id: int) -> list[CheckpointRow]:
    rows = []
    for _, cid in checkpoints.seqs_of_namespace(tx.conn, namespace_id):
        row = checkpoints.checkpoint_by_id(tx.conn, cid)
        if row is not None:
            rows.append(row)
    return rows


@reads
def log(tx: Unit, namespace: str, *, all: bool, limit: int | None) -> models.LineageLog:
    """See :meth:`ckptdb.Database.log` (inside a read transaction)."""
    conn = tx.conn
    ptr = pointers.pointer(conn, namespace)
    if ptr is None:
        raise errors.NamespaceNotFoundError(f"namespace {namespace!r} has no checkpoint")
    pointers.check_pointer(ptr)
    on_lineage = {row.id for row in checkpoints.lineage(conn, ptr.current_id)}
    if all:
        rows = _rows(tx, ptr.namespace_id)
    else:
        chosen = {row.id: row for row in checkpoints.lineage(conn, ptr.current_id)}
        if ptr.fallback_id is not None:
            chosen.update((r.id, r) for r in checkpoints.lineage(conn, ptr.fallback_id))
        rows = list(chosen.values())
    rows = [r for r in rows if r.namespace == namespace]
    rows.sort(key=lambda r: (r.generation, r.created_at_ms, r.id), reverse=True)
    if limit is not None:
        rows = rows[:limit]
    pinned: dict[str, list[str]] = {}
    for p in pins.list_pins(conn, namespace):
        pinned.setdefault(p.checkpoint_id, []).append(p.name)
    drawn = layout([(r.id, r.parent_id) for r in rows])
    nodes = []
    for row, (column, lines) in zip(rows, drawn, strict=True):
        info = Checkpoint(tx.handle, row, checkpoints.entries_of(conn, row.seq)).info
        markers: list[str] = []
        if row.id == ptr.current_id:
            markers.append("current")
        if row.id == ptr.fallback_id:
            markers.append("fallback")
        if row.id in pinned:
            markers.append("pinned")
        nodes.append(
            models.LogNode(
                id=row.id,
                generation=row.generation,
                created_at=info.created_at,
                parent_id=row.parent_id,
                entry_count=row.entry_count,
                total_size=row.total_size,
                metadata=info.metadata,
                markers=markers,  # type: ignore[arg-type]
                pins=sorted(pinned.get(row.id, [])),
                on_lineage=row.id in on_lineage,
                column=column,
                graph=lines,
            )
        )
    return models.LineageLog(
        namespace=namespace,
        current_id=ptr.current_id,
        fallback_id=ptr.fallback_id,
        revision=ptr.revision,
        all=all,
        nodes=nodes,
    )
