"""The lineage of a namespace as a graph (``ckptdb log --graph`` / ``--all``).

Which checkpoints: by default the lineage of CURRENT and of the fallback (after a commit
with ``base=`` -- a fork, or LangGraph time travel -- the fallback is the old tip, so the
fork shows); with ``all`` every stored checkpoint of the namespace (pinned or retained ones
that are no longer on the CURRENT lineage included).

The drawing follows ``git log --graph``: newest first (a child always comes before its
parent: its generation is larger), one lane per line of descent, ``*`` for a checkpoint,
``|`` for a lane passing by, and a connector line (``|/``) where a fork joins the lane of
the checkpoint it was based on.
"""

from __future__ import annotations

from .. import errors, models
from ..store import Store, checkpoints, pins, pointers
from ..store.rows import CheckpointRow
from .checkpoint import Checkpoint
from .handle import Handle


def layout(nodes: list[tuple[str, str | None]]) -> list[tuple[int, list[str]]]:
    """Lanes for ``nodes`` -- (id, parent id), children before parents -- as
    (column, drawing lines) per node. Pure: no database."""
    present = {n for n, _ in nodes}
    lanes: list[str | None] = []
    out: list[tuple[int, list[str]]] = []
    for node, parent in nodes:
        waiting = [i for i, want in enumerate(lanes) if want == node]
        lines: list[str] = []
        if waiting:
            col = waiting[0]
            joining = waiting[1:]
            if joining:
                row = [" "] * (2 * len(lanes))
                for i, want in enumerate(lanes):
                    if want is not None and i not in joining:
                        row[2 * i] = "|"
                for j in joining:
                    row[2 * j - 1] = "/"
                    lanes[j] = None
                lines.append("".join(row).rstrip())
        else:
            free = [i for i, want in enumerate(lanes) if want is None]
            col = free[0] if free else len(lanes)
            if col == len(lanes):
                lanes.append(None)
        row = [" "] * (2 * len(lanes))
        for i, want in enumerate(lanes):
            if i == col:
                row[2 * i] = "*"
            elif want is not None:
                row[2 * i] = "|"
        lines.append("".join(row).rstrip())
        lanes[col] = parent if parent in present else None
        while lanes and lanes[-1] is None:
            lanes.pop()
        out.append((col, lines))
    return out


def _rows(store: Store, namespace_id: int) -> list[CheckpointRow]:
    rows = []
    for _, cid in checkpoints.seqs_of_namespace(store.conn, namespace_id):
        row = checkpoints.checkpoint_by_id(store.conn, cid)
        if row is not None:
            rows.append(row)
    return rows


def log(
    handle: Handle, store: Store, namespace: str, *, all: bool, limit: int | None
) -> models.LineageLog:
    """See :meth:`ckptdb.Database.log` (inside a read transaction)."""
    conn = store.conn
    ptr = pointers.pointer(conn, namespace)
    if ptr is None:
        raise errors.NamespaceNotFoundError(f"namespace {namespace!r} has no checkpoint")
    pointers.check_pointer(ptr)
    on_lineage = {row.id for row in checkpoints.lineage(conn, ptr.current_id)}
    if all:
        rows = _rows(store, ptr.namespace_id)
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
        info = Checkpoint(handle, row, checkpoints.entries_of(conn, row.seq)).info
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
