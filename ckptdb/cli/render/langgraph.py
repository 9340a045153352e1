"""Renderers of the ``ckptdb langgraph`` commands: what a TTL sweep expired and kept."""

from __future__ import annotations

from ...integrations.langgraph.ttl import TTLSweepReport
from ..output import count, echo, print_json, when

#: Expired threads a report lists for people (--json has all).
LISTED_THREADS = 20


def expired(report: TTLSweepReport, as_json: bool) -> None:
    """``langgraph expire``: the threads expired (or that would be), those kept and why."""
    if as_json:
        print_json(report)
        return
    verb = "would expire" if report.dry_run else "expired"
    action = "delete" if report.strategy == "delete" else "keep only the newest checkpoint"
    echo(
        f"{verb} {count(len(report.threads_expired), 'thread')} not used since "
        f"{when(report.idle_before)} ({action}; {len(report.threads_kept)} kept): "
        f"{count(report.checkpoints_deleted, 'LangGraph checkpoint')} "
        f"{'to delete' if report.dry_run else 'deleted'}, {report.took_s:.2f} s"
    )
    for thread_id in report.threads_expired[:LISTED_THREADS]:
        echo(f"  {thread_id}")
    if len(report.threads_expired) > LISTED_THREADS:
        echo(f"  ... and {len(report.threads_expired) - LISTED_THREADS} more (--json lists all)")
    for kept in report.threads_kept:
        echo(f"kept {kept.thread_id} ({kept.reason}): {kept.detail}")
    if not report.complete:
        echo("more threads have expired: run it again (or without --limit)")
