"""Renderers of what is kept and what is deleted: gc, prune, drop-namespace and the stored
retention policies."""

from __future__ import annotations

import json
from typing import Any

from ... import RetentionPolicy
from ...models import GcReport, PruneReport
from ..output import echo, print_json, size, table

#: Checkpoint ids a ``gc --dry-run`` plan lists for people (--json has all).
GC_PLAN_IDS = 20
_KEPT_BECAUSE = {"protected": "a CURRENT, a fallback or pinned"}


def gc_report(report: GcReport, policy_unset: bool, as_json: bool) -> None:
    """``gc``: what was (or would be) deleted and the space returned; ``policy_unset`` says
    that no rule was given or stored, so everything was kept."""
    if as_json:
        print_json(report)
        return
    if policy_unset:
        echo(
            "no retention policy is set, so every checkpoint is kept; pass --keep-* rules "
            "(e.g. --keep-last 10 --keep-within 7d) or store a policy with "
            "`ckptdb retention set DB --keep-...`"
        )
    verb = "would delete" if report.dry_run else "deleted"
    echo(
        f"{verb} {report.checkpoints_deleted} of {report.checkpoints_examined} checkpoints "
        f"({report.checkpoints_kept} kept), {report.blobs_deleted} blobs, "
        f"{report.chunks_deleted} chunks: {size(report.bytes_freed)} freed"
    )
    if not report.dry_run:
        echo(
            f"file {size(report.file_bytes_before)} -> {size(report.file_bytes_after)} "
            f"({report.pages_reclaimed} pages returned); receipt #{report.receipt_id}"
        )
    elif report.deleted_ids:
        for cid in report.deleted_ids[:GC_PLAN_IDS]:
            echo(f"  {cid}")
        if len(report.deleted_ids) > GC_PLAN_IDS:
            echo(f"  ... and {len(report.deleted_ids) - GC_PLAN_IDS} more (--json lists all)")


def prune_report(report: PruneReport, as_json: bool) -> None:
    """``prune`` / ``drop-namespace``: what was (or would be) deleted, and what was kept."""
    if as_json:
        print_json(report)
        return
    verb = "would delete" if report.dry_run else "deleted"
    echo(
        f"{verb} {report.checkpoints_deleted} checkpoints, {report.blobs_deleted} blobs, "
        f"{report.chunks_deleted} chunks: {size(report.bytes_freed)} freed"
    )
    for skip in report.skipped:
        echo(f"kept {skip.checkpoint_id[:12]}: {_KEPT_BECAUSE.get(skip.code, skip.detail)}")


def dropped(namespace: str, report: PruneReport, as_json: bool) -> None:
    """``drop-namespace``: as :func:`prune_report`, or that there was nothing to drop."""
    if not report.namespaces and not as_json:
        echo(f"nothing to drop: there is no namespace {namespace!r} (any more)")
        return
    prune_report(report, as_json)


def _rules(policy: RetentionPolicy) -> dict[str, Any]:
    return policy.model_dump(exclude_defaults=True, mode="json")


def policies(stored: dict[str, RetentionPolicy], as_json: bool) -> None:
    """``retention show``: the rules of each scope ('*': database-wide)."""
    rows = {scope: _rules(p) for scope, p in stored.items()}
    if as_json:
        print_json(rows)
        return
    table(["scope", "rules"], [[scope, json.dumps(r)] for scope, r in sorted(rows.items())])


def policy_stored(namespace: str | None, policy: RetentionPolicy, as_json: bool) -> None:
    """``retention set``: the scope and the rules now stored for it."""
    out = {"scope": namespace or "*", "policy": _rules(policy)}
    if as_json:
        print_json(out)
    else:
        echo(f"retention for {out['scope']}: {json.dumps(out['policy'])}")


def policy_cleared(namespace: str | None, removed: bool, as_json: bool) -> None:
    """``retention clear``: whether the scope had a policy to remove."""
    if as_json:
        print_json({"scope": namespace or "*", "removed": removed})
    else:
        echo(("removed" if removed else "no policy for") + f" {namespace or '*'}")
