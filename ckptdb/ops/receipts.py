"""Receipts: the durable, digest-bound record of an act (``store/receipts`` owns the table)."""

from __future__ import annotations

from typing import Any

from .. import models
from ..store import receipts
from .unit import Unit, holds


@holds()
def record(
    tx: Unit,
    kind: str,
    body: dict[str, Any],
    *,
    namespace: str | None = None,
    checkpoint_id: str | None = None,
) -> int | None:
    """Store a receipt in a write transaction of its own, stamped with the unit's time;
    None on a read-only handle (an act done there -- a verify, a fallback -- is reported,
    not recorded)."""
    if tx.readonly:
        return None
    with tx.write_batch():
        return receipts.store_receipt(
            tx.conn, kind, body, namespace=namespace, checkpoint_id=checkpoint_id, at_ms=tx.now_ms
        )


@holds()
def list_receipts(tx: Unit, kind: str | None, limit: int | None) -> list[models.Receipt]:
    """Stored receipts, newest first, optionally of one kind."""
    return receipts.list_receipts(tx.conn, kind=kind, limit=limit)
