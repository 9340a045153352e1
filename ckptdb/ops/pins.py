"""Pins: names that keep a checkpoint from GC and every retention rule (``store/pins`` owns
the table)."""

from __future__ import annotations

from .. import models
from ..store import checkpoints, pins, pointers
from .unit import Unit, holds, writes


@writes
def pin(tx: Unit, name: str, checkpoint_id: str, *, note: str | None, replace: bool) -> models.Pin:
    """See :meth:`ckptdb.Database.pin` (``checkpoint_id`` resolved, ``name`` validated)."""
    target = checkpoints.require_checkpoint(tx.conn, checkpoint_id)
    if tx.conn.dialect != "sqlite":
        # Other writers run at once here: hold the namespace (as GC's batch does before it
        # deletes) and read the checkpoint again, so it cannot go between read and pin.
        pointers.lock_namespace(tx.conn, target.namespace)
        target = checkpoints.require_checkpoint(tx.conn, checkpoint_id)
    return pins.pin(tx.conn, name, target, note=note, replace=replace, now_ms=tx.now_ms)


@writes
def unpin(tx: Unit, name: str) -> models.Pin:
    """See :meth:`ckptdb.Database.unpin`."""
    return pins.unpin(tx.conn, name)


@holds()
def list_pins(tx: Unit, namespace: str | None) -> list[models.Pin]:
    """See :meth:`ckptdb.Database.pins`."""
    return pins.list_pins(tx.conn, namespace)
