"""The ``ckptdb replicate`` and ``ckptdb restore`` commands (registered by ckptdb.cli)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import click

from ..cli_output import echo, json_text
from .replicator import replicate as start_replication
from .restore import restore as run_restore


def register(
    main: click.Group,
    *,
    command: Callable[[Any], Any],
    json_option: Callable[[Any], Any],
    print_json: Callable[[Any], None],
) -> None:
    """Add ``replicate`` and ``restore`` to the ``ckptdb`` command group."""

    @main.command("replicate")
    @click.argument("db")
    @click.option("--to", "to", required=True, help="Replica URL (file:///dir, s3://bucket/path).")
    @click.option("--status", "show_status", is_flag=True, help="Print the status periodically.")
    @click.option("--every", default=5.0, show_default=True, help="Seconds between statuses.")
    @click.option(
        "--sync-interval", default=1.0, show_default=True, help="Seconds between uploads."
    )
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
                        _show(rep.status(), as_json, print_json)
                if show_status:
                    _show(rep.status(), as_json, print_json)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if not as_json:
            echo("stopped")

    @main.command("restore")
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
        if as_json:
            print_json(report)
        else:
            echo(
                f"restored {report.destination} from {report.replica_url} "
                f"(txid {report.txid if report.txid is not None else '-'}): "
                f"{report.namespaces} namespaces, {report.checkpoints_verified} checkpoints "
                f"and {report.bytes_checked} bytes verified in {report.seconds:.2f} s"
            )
        if report.skipped:
            echo(
                f"warning: recovery skipped {len(report.skipped)} newer position(s) of the "
                f"replica; restored txid {report.txid}, which is older than the newest:",
                err=True,
            )
            for position in report.skipped:
                echo(f"  txid {position.txid}: {position.reason}", err=True)
            from ..cli import EXIT_DEGRADED  # noqa: PLC0415 (ckptdb.cli registers this module)

            sys.exit(EXIT_DEGRADED)


def _show(status: Any, as_json: bool, print_json: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json_text(status.model_dump(mode="json"), None))
        return
    echo(
        f"running={status.running} pid={status.pid} local_txid={status.local_txid} "
        f"replicated_txid={status.replicated_txid} lag_txids={status.lag_txids} "
        f"lag_seconds={status.lag_seconds} restarts={status.restarts} "
        f"last_error={status.last_error or '-'}"
    )
