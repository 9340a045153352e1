"""The replication commands: ``ckptdb replicate`` (supervise Litestream until stopped) and
``ckptdb restore`` (a replica into a new file, verified before it is moved into place)."""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

import click

from ..replication import replicate as start_replication
from ..replication import restore as run_restore
from .app import EXIT_DEGRADED
from .command import command, json_option
from .output import echo
from .render import replication as render


@click.command("replicate")
@click.argument("db")
@click.option("--to", "to", required=True, help="Replica URL (file:///dir, s3://bucket/path).")
@click.option("--status", "show_status", is_flag=True, help="Print the status periodically.")
@click.option("--every", default=5.0, show_default=True, help="Seconds between statuses.")
@click.option("--sync-interval", default=1.0, show_default=True, help="Seconds between uploads.")
@json_option
@command
def replicate_command(
    db: str, to: str, show_status: bool, every: float, sync_interval: float, as_json: bool
) -> None:
    """Replicate DB to a Litestream replica until stopped (Ctrl-C or SIGTERM).

    Credentials come from the environment only (AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY for S3). With --status the position and lag are printed every
    --every seconds (one JSON document per line with --json)."""
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with start_replication(db, to=to, sync_interval=sync_interval) as rep:
            if not as_json:
                echo(f"replicating {rep.database} to {rep.replica.display} (pid {rep.pid})")
            while not stop.wait(every if show_status else 0.5):
                if show_status:
                    render.replication_status(rep.status(), as_json)
            if show_status:
                render.replication_status(rep.status(), as_json)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not as_json:
        echo("stopped")


@click.command("restore")
@click.argument("url")
@click.argument("dest")
@click.option("--checkpoint", default=None, help="Earliest position holding this id.")
@click.option("--at", "at", default=None, help="Newest position at or before this time.")
@click.option("--force", is_flag=True, help="Replace DEST if it exists (never while in use).")
@click.option(
    "--recover",
    is_flag=True,
    help="If the newest position does not restore and verify, walk back to the newest "
    "one that does (exit 13 when positions were skipped).",
)
@json_option
@command
def restore_command(
    url: str,
    dest: str,
    checkpoint: str | None,
    at: str | None,
    force: bool,
    recover: bool,
    as_json: bool,
) -> None:
    """Restore the replica at URL into DEST, verified before it is moved into place.

    The newest position by default; --checkpoint ID restores the state just after that
    checkpoint was published, --at TIME (RFC 3339) the newest state at or before it.
    --force replaces an existing DEST, but never one a process has open (exit 10,
    restore_target_in_use: stop what uses it first). --recover restores the newest
    position that restores and verifies, lists every newer position it skipped on
    stderr and exits 13 if it skipped any."""
    report = run_restore(url, dest, checkpoint=checkpoint, at=at, force=force, recover=recover)
    render.restored(report, as_json)
    if report.skipped:
        sys.exit(EXIT_DEGRADED)


COMMANDS = [replicate_command, restore_command]
