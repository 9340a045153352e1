"""Renderers of the checkpoint commands: init, commit, current, show, checkout,
set-current, fork."""

from __future__ import annotations

import json

from ... import Checkpoint
from ...models import CheckoutResult, CheckpointInfo, CommitAck, CopyReport, Pointer, Stats
from ..output import count, echo, print_json, size, table, when


def initialized(stats: Stats, as_json: bool) -> None:
    """``init``: the file that is ready."""
    if as_json:
        print_json(stats)
        return
    echo(f"database {stats.path} is ready (schema version {stats.schema_version})")


def commit_ack(ack: CommitAck, as_json: bool) -> None:
    """``commit``: the checkpoint, what it stored, what a quota evicted."""
    if as_json:
        print_json(ack)
        return
    state = "committed" if ack.created else "unchanged (already CURRENT)"
    echo(f"{state} {ack.checkpoint_id}")
    echo(
        f"namespace {ack.namespace}  generation {ack.generation}  "
        f"{count(ack.entry_count, 'entry')}  {size(ack.logical_bytes)}: "
        f"{size(ack.bytes_stored)} stored, "
        f"{size(ack.bytes_deduplicated)} deduplicated"
    )
    if ack.evicted_ids:
        echo(f"a quota evicted {count(len(ack.evicted_ids), 'older checkpoint')}:")
        for cid in ack.evicted_ids:
            echo(f"  {cid}")


def current(cp: Checkpoint, pointer: Pointer | None, as_json: bool) -> None:
    """``current``: the CURRENT checkpoint and its pointer."""
    if as_json:
        print_json({"checkpoint": cp.info, "pointer": pointer})
        return
    assert pointer is not None  # cp was read as its CURRENT a moment before
    echo(cp.id)
    echo(
        f"generation {cp.generation}  created {when(cp.created_at)}  "
        f"{count(len(cp.entries), 'entry')}  {size(cp.total_size)}  "
        f"pointer revision {pointer.revision}"
    )


def manifest(info: CheckpointInfo, as_json: bool) -> None:
    """``show``: a checkpoint's manifest."""
    if as_json:
        print_json(info)
        return
    echo(f"checkpoint  {info.id}")
    echo(f"namespace   {info.namespace}")
    echo(f"parent      {info.parent_id or '-'}")
    echo(f"generation  {info.generation}")
    echo(f"created     {when(info.created_at)}")
    echo(f"revision    {info.code_revision or '-'}")
    if info.label is not None:
        echo(f"label       {info.label}")
    echo(f"metadata    {json.dumps(info.metadata, ensure_ascii=False, sort_keys=True)}")
    echo("")
    table(
        ["entry", "size", "digest", "media type", "schema"],
        [[e.name, size(e.size), e.digest, e.media_type, e.schema_pin] for e in info.entries],
    )


def checkout_result(result: CheckoutResult, as_json: bool) -> None:
    """``checkout``: what was written where; a fallback is said on stderr."""
    if as_json:
        print_json(result)
    else:
        echo(
            f"checked out {result.checkpoint_id[:12]} ({count(result.files, 'file')}, "
            f"{size(result.bytes)}) into {result.target}"
        )
    if result.disposition == "degraded_fallback":
        echo(
            f"warning: fell back: {str(result.requested_id)[:12]} does not verify (or fails "
            f"your checks), so its newest usable ancestor {result.checkpoint_id[:12]} was "
            "checked out instead "
            f"(fallback receipt #{result.receipt_id}; `ckptdb receipts DB --kind fallback`)",
            err=True,
        )
        for r in result.rejected:
            echo(f"  rejected {r.checkpoint_id[:12]}: {r.code}", err=True)


def pointer_moved(namespace: str, before: Pointer | None, pointer: Pointer, as_json: bool) -> None:
    """``set-current``: the new CURRENT and fallback, and why an old CURRENT was not kept."""
    if as_json:
        print_json(pointer)
        return
    echo(f"{namespace}: CURRENT is now {pointer.current_id} (revision {pointer.revision})")
    fallback = pointer.fallback_id[:12] if pointer.fallback_id else "none"
    if before is not None and before.current_id not in (pointer.fallback_id, pointer.current_id):
        echo(
            f"fallback: {fallback} ({before.current_id[:12]} is damaged and was not made the "
            "fallback; see `ckptdb receipts DB --kind set_current`)"
        )
    else:
        echo(f"fallback: {fallback}")


def fork_report(report: CopyReport, source: str, target: str, as_json: bool) -> None:
    """``fork``: how many checkpoints were copied and the new CURRENT."""
    if as_json:
        print_json(report)
        return
    echo(
        f"{target}: {count(len(report.copies), 'checkpoint')} of {source} copied "
        f"({report.created} new, no blob bytes); CURRENT is {report.current_id}"
    )
