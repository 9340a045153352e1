"""Renderers of the commands that move checkpoints between files and stores: export,
import, import-from."""

from __future__ import annotations

from ...models import ImportReport, TransferReceipt
from ..output import count, echo, print_json, size


def transfer_receipt(receipt: TransferReceipt, as_json: bool) -> None:
    """``export`` / ``import``: what was copied; pointer conflicts on stderr."""
    if as_json:
        print_json(receipt)
        return
    echo(
        f"{receipt.kind}: {count(receipt.checkpoints_copied, 'checkpoint')} copied "
        f"({receipt.checkpoints_present} already present), "
        f"{count(receipt.blobs_copied, 'blob')}, "
        f"{size(receipt.bytes_copied)} -> {receipt.destination}"
    )
    if receipt.pointers_moved:
        echo(f"CURRENT set for: {', '.join(receipt.pointers_moved)}")
    for c in receipt.conflicts:
        echo(
            f"conflict: {c.namespace}: CURRENT is {str(c.current)[:12]}, the source has "
            f"{c.incoming[:12]} (not an ancestor); left unchanged (use --overwrite)",
            err=True,
        )


def import_report(report: ImportReport, as_json: bool) -> None:
    """``import-from``: what was imported; each skipped item on stderr."""
    if as_json:
        print_json(report)
        return
    new = sum(1 for i in report.imported if i.created)
    verb = "would import" if report.dry_run else "imported"
    echo(
        f"{verb} {count(new, 'checkpoint')} ({len(report.imported) - new} already present) "
        f"into {', '.join(report.namespaces) or '-'}; {len(report.skipped)} skipped"
    )
    for skip in report.skipped:
        echo(f"skipped {skip.source_id}: {skip.code}: {skip.detail}", err=True)
