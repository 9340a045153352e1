"""Renderers of the replication commands: replicate (its status lines), restore."""

from __future__ import annotations

from ...replication import ReplicationStatus, RestoreReport
from ..output import count, echo, print_json, print_json_line


def replication_status(status: ReplicationStatus, as_json: bool) -> None:
    """``replicate --status``: one line (with --json one JSON document per line)."""
    if as_json:
        print_json_line(status)
        return
    echo(
        f"running={status.running} pid={status.pid} local_txid={status.local_txid} "
        f"replicated_txid={status.replicated_txid} lag_txids={status.lag_txids} "
        f"lag_seconds={status.lag_seconds} restarts={status.restarts} "
        f"last_error={status.last_error or '-'}"
    )


def restored(report: RestoreReport, as_json: bool) -> None:
    """``restore``: what was restored and verified; positions skipped on stderr."""
    if as_json:
        print_json(report)
    else:
        echo(
            f"restored {report.destination} from {report.replica_url} "
            f"(txid {report.txid if report.txid is not None else '-'}): "
            f"{count(report.namespaces, 'namespace')}, "
            f"{count(report.checkpoints_verified, 'checkpoint')} "
            f"and {count(report.bytes_checked, 'byte')} verified in {report.seconds:.2f} s"
        )
    if report.skipped:
        echo(
            f"warning: recovery skipped {count(len(report.skipped), 'newer position')} of the "
            f"replica; restored txid {report.txid}, which is older than the newest:",
            err=True,
        )
        for position in report.skipped:
            echo(f"  txid {position.txid}: {position.reason}", err=True)
