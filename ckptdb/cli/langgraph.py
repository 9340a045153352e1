"""Commands on a file's LangGraph threads (``ckptdb[langgraph]``): ``ckptdb langgraph
expire``, the sweep of threads whose time-to-live ran out."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

import click

from .. import errors
from ..retention import duration_seconds
from .command import GroupDbLast, command, json_option, open_database
from .render import langgraph as render


@click.group(cls=GroupDbLast)
def langgraph() -> None:
    """The LangGraph threads a CkptdbSaver keeps in DB.

    Usage: ckptdb langgraph expire DB --ttl DURATION [OPTIONS].
    """


@langgraph.command()
@click.argument("db")
@click.option(
    "--ttl",
    required=True,
    metavar="DURATION",
    help="Threads not used (put, pending write) within this are expired, e.g. 30d, 12h.",
)
@click.option(
    "--strategy",
    type=click.Choice(["delete", "keep_latest"]),
    default="delete",
    show_default=True,
    help="Delete an expired thread, or prune it to its newest checkpoint.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="Sweep at most N expired threads (oldest first); the rest wait for the next run.",
)
@click.option("--dry-run", is_flag=True, help="Show what would expire; change nothing.")
@json_option
@command
def expire(
    db: str,
    ttl: str,
    strategy: Literal["delete", "keep_latest"],
    limit: int | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Expire the threads not used within --ttl.

    Oldest first, each expired LangGraph thread is deleted (--strategy delete) or pruned to
    its newest checkpoint (keep_latest). Pinned checkpoints stay, and their threads are
    listed as kept; a copy_thread fork expires on its own. The space goes back to the OS as
    for delete_thread. A saver created with ttl=ThreadTTL(...) runs the same sweep.
    """
    try:
        from ..integrations.langgraph import CkptdbSaver, ThreadTTL  # noqa: PLC0415 - optional
    except ModuleNotFoundError as exc:
        raise errors.InvalidInputError(
            f"`ckptdb langgraph` needs LangGraph, which is not installed ({exc.name}); "
            "install it with: pip install 'ckptdb[langgraph]'"
        ) from exc
    policy = ThreadTTL(
        timedelta(seconds=duration_seconds(ttl)), strategy=strategy, sweep_interval=None
    )
    with open_database(db, readonly=dry_run) as handle:
        # A saver creates its tables (migration set "langgraph"): never in a file that no
        # saver wrote to.
        if "langgraph" not in handle.migration_status().sets:
            raise errors.NotFoundError(f"{db} holds no LangGraph threads (no CkptdbSaver used it)")
        with CkptdbSaver(handle, ttl=policy) as saver:
            report = saver.sweep_expired(limit=limit, dry_run=dry_run)
    render.expired(report, as_json)


COMMANDS = [langgraph]
