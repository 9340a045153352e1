"""Renderers of the lineage commands: namespaces, log, diff, history, receipts."""

from __future__ import annotations

import json
from typing import Any

from ...models import CheckpointDiff, LineageLog, LogNode, NamespaceInfo, PointerMove, Receipt
from ..output import count, echo, print_json, size, summary, table, when

#: Characters of metadata a ``log`` line shows (the last column: enough for a LangGraph
#: checkpoint's step, source, run and checkpoint ids; ``show`` prints all of it).
LOG_METADATA_WIDTH = 240
_LOG_SYMBOL = {"current": "*", "fallback": "~", "pinned": "P"}
_DIFF_SIGN = {"added": "+", "removed": "-", "changed": "~"}


def namespaces(rows: list[NamespaceInfo], as_json: bool) -> None:
    """``namespaces``: one row per namespace."""
    if as_json:
        print_json(rows)
        return
    table(
        ["namespace", "current", "generation", "revision", "checkpoints", "updated"],
        [
            [
                r.name,
                r.current_id[:12],
                r.generation,
                r.revision,
                r.checkpoint_count,
                when(r.updated_at),
            ]
            for r in rows
        ],
    )


def _marks(node: LogNode) -> str:
    words = [{"current": "CURRENT", "fallback": "fallback"}.get(m, "") for m in node.markers]
    words = [w for w in words if w] + [f"pin: {p}" for p in node.pins]
    return f"({', '.join(words)})" if words else ""


def log(result: LineageLog, graph: bool, as_json: bool) -> None:
    """``log``: a table of the lineage, or with ``graph`` the git-log-like drawing."""
    if as_json:
        print_json(
            [
                {
                    "id": n.id,
                    "short_id": n.id[:12],
                    "generation": n.generation,
                    "created_at": when(n.created_at),
                    "entry_count": n.entry_count,
                    "total_size": n.total_size,
                    "metadata": n.metadata,
                    "parent_id": n.parent_id,
                    "markers": n.markers,
                    "pins": n.pins,
                    "on_lineage": n.on_lineage,
                    **({"graph": n.graph, "column": n.column} if graph else {}),
                }
                for n in result.nodes
            ]
        )
        return
    fallback = result.fallback_id[:12] if result.fallback_id else "none"
    echo(
        f"namespace {result.namespace}: CURRENT {result.current_id[:12]}, fallback {fallback}, "
        f"pointer revision {result.revision}"
    )
    if graph:
        width = max((len(line) for n in result.nodes for line in n.graph), default=1)
        for n in result.nodes:
            for line in n.graph[:-1]:
                echo(line)
            echo(
                f"{n.graph[-1].ljust(width)}  {n.id[:12]}  gen {n.generation}  "
                f"{when(n.created_at)}  {count(n.entry_count, 'entry')}  "
                f"{size(n.total_size)}  {_marks(n)}  "
                f"{summary(n.metadata, LOG_METADATA_WIDTH)}".rstrip()
            )
        return
    table(
        ["", "id", "gen", "created", "entries", "size", "metadata"],
        [
            [
                "".join(_LOG_SYMBOL[m] for m in n.markers) + ("" if n.on_lineage else "o"),
                n.id[:12],
                n.generation,
                when(n.created_at),
                n.entry_count,
                size(n.total_size),
                summary(n.metadata, LOG_METADATA_WIDTH),
            ]
            for n in result.nodes
        ],
    )


def _json_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _relation(d: CheckpointDiff) -> str:
    """How A stands to B, in words."""
    if d.relation == "same":
        return "A and B are the same checkpoint"
    if d.relation == "unrelated":
        return "A and B are unrelated (no common stored ancestor)"
    back_a, back_b = d.generations_a or 0, d.generations_b or 0  # set when A and B are related
    if d.relation == "ancestor":
        return f"A is an ancestor of B ({count(back_b, 'generation')} back)"
    if d.relation == "descendant":
        return f"A descends from B ({count(back_a, 'generation')} later)"
    return (
        f"A and B are siblings: common ancestor {str(d.common_ancestor_id)[:12]} "
        f"({back_a} and {count(back_b, 'generation')} back)"
    )


def diff(d: CheckpointDiff, as_json: bool) -> None:
    """``diff``: how A stands to B, then the entries and metadata keys that differ."""
    if as_json:
        print_json(d)
        return
    echo(f"A {d.a[:12]} ({d.namespace_a}, {size(d.size_a)})")
    echo(f"B {d.b[:12]} ({d.namespace_b}, {size(d.size_b)})")
    echo(_relation(d))
    differ = "entry differs" if len(d.entries) == 1 else "entries differ"
    echo(f"{len(d.entries)} {differ}, {d.unchanged} unchanged")
    for e in d.entries:
        if e.change == "added":
            detail = size(e.size_b or 0)
        elif e.change == "removed":
            detail = size(e.size_a or 0)
        elif not e.content_changed:
            detail = (
                f"same bytes; media type {e.media_type_a} -> {e.media_type_b}, schema pin "
                f"{e.schema_pin_a} -> {e.schema_pin_b}"
            )
        else:
            detail = (
                f"{size(e.size_a or 0)} -> {size(e.size_b or 0)}, {size(e.bytes_shared)} shared"
            )
        echo(f"  {_DIFF_SIGN[e.change]} {e.name}  {detail}")
    for m in d.metadata:
        if m.change == "added":
            text = f"+ {m.key} = {_json_value(m.b)}"
        elif m.change == "removed":
            text = f"- {m.key} = {_json_value(m.a)}"
        else:
            text = f"~ {m.key}: {_json_value(m.a)} -> {_json_value(m.b)}"
        echo(f"  metadata {text}")


def history(moves: list[PointerMove], as_json: bool) -> None:
    """``history``: the moves of a CURRENT pointer."""
    if as_json:
        print_json(moves)
        return
    table(
        ["revision", "current", "fallback", "reason", "at"],
        [
            [m.revision, m.current_id[:12], (m.fallback_id or "")[:12], m.reason, when(m.at)]
            for m in moves
        ],
    )


def receipts(rows: list[Receipt], as_json: bool) -> None:
    """``receipts``: one row per receipt, its body summarized."""
    if as_json:
        print_json(rows)
        return
    table(
        ["id", "kind", "namespace", "checkpoint", "at", "body"],
        [
            [
                r.receipt_id,
                r.kind,
                r.namespace,
                (r.checkpoint_id or "")[:12],
                when(r.at),
                summary(r.body, 60),
            ]
            for r in rows
        ],
    )
