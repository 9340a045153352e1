"""Moving CURRENT explicitly (``set_current``) without hiding damage.

Two rules (issue 12, section 6):

* The target is verified -- manifest against its id and every byte of every entry --
  before CURRENT moves to it, unless the caller turns verification off.
* Moving CURRENT away from a checkpoint known to be damaged does not make that checkpoint
  the fallback (a fallback is protected from GC, keeps ``verify`` red and is what
  ``NS@fallback`` names). The previous fallback is kept when it is intact and is not the
  target; otherwise the namespace has no fallback until the next move.

"Known to be damaged" is decided by verifying the current checkpoint (manifest and bytes)
when verification is on -- an explicit rollback is rare and this is the only way to know
now. With verification off, a stored fallback receipt (digest-bound) that rejected the
current checkpoint as corrupt decides; a validator's rejection is not damage.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import errors
from ..store import checkpoints, pointers, receipts
from ..store.rows import PointerRow
from ..types import _Unset
from . import commit as commit_op
from .checkpoint import Checkpoint
from .unit import Unit, holds

#: How many of the newest fallback receipts are consulted when verification is off.
RECEIPTS_CONSULTED = 100


@dataclass(frozen=True)
class Damage:
    """Why the checkpoint CURRENT named is considered damaged."""

    checkpoint_id: str
    code: str
    detail: str


def _verify(tx: Unit, checkpoint_id: str) -> errors.CkptdbError | None:
    """None when the checkpoint's manifest and bytes verify, else the error found."""
    try:
        with tx.read_batch():
            row = checkpoints.require_checkpoint(tx.conn, checkpoint_id)
            cp = Checkpoint(tx.handle, row, checkpoints.entries_of(tx.conn, row.seq))
        cp.verify()
    except (errors.CorruptionError, errors.CheckpointNotFoundError) as exc:
        return exc
    return None


def _damage_from_receipts(tx: Unit, namespace: str, checkpoint_id: str) -> Damage | None:
    for receipt in receipts.list_receipts(tx.conn, kind="fallback", limit=RECEIPTS_CONSULTED):
        if receipt.namespace != namespace:
            continue
        for rejected in receipt.body.get("rejected", []):
            if (
                isinstance(rejected, dict)
                and rejected.get("checkpoint_id") == checkpoint_id
                and str(rejected.get("code", "")).startswith(("corrupt", "checkpoint_not_found"))
            ):
                return Damage(
                    checkpoint_id,
                    str(rejected["code"]),
                    f"fallback receipt #{receipt.receipt_id}: {rejected.get('detail', '')}",
                )
    return None


def _damage_of_current(tx: Unit, ptr: PointerRow, *, verify: bool) -> Damage | None:
    if verify:
        exc = _verify(tx, ptr.current_id)
        if exc is None:
            return None
        reason = exc.details.get("reason")
        return Damage(
            ptr.current_id, exc.code if reason is None else f"{exc.code}:{reason}", exc.message
        )
    return _damage_from_receipts(tx, ptr.namespace, ptr.current_id)


@holds(write=True)
def set_current(
    tx: Unit,
    namespace: str,
    checkpoint_id: str,
    *,
    expect_current: str | _Unset | None,
    reason: str,
    verify: bool,
) -> tuple[PointerRow, Damage | None]:
    """See :meth:`ckptdb.Database.set_current`. Returns the new pointer and, when the
    checkpoint CURRENT named was damaged (so it did not become the fallback), why."""
    conn = tx.conn
    if verify:
        problem = _verify(tx, checkpoint_id)
        if problem is not None:
            raise errors.CorruptionError(
                f"checkpoint {checkpoint_id[:12]} does not verify, so CURRENT was not moved "
                f"to it: {problem.message}. Choose a verified checkpoint (a load with "
                "fallback finds the newest one), or turn verification off to move anyway.",
                namespace=namespace,
                checkpoint_id=checkpoint_id,
                reason="target_damaged",
            )
    with tx.read_batch():
        before = pointers.pointer(conn, namespace)
    damage: Damage | None = None
    fallback: tuple[int, str] | bool | None = True
    if before is not None and (before.current_id != checkpoint_id or not before.current_stored):
        pointers.check_pointer(before)
        damage = (
            _damage_of_current(tx, before, verify=verify)
            if before.current_stored
            # The pointer's seq names no stored checkpoint of the namespace: what it names
            # cannot be the fallback, even when it is the target (the repair of the seq).
            else Damage(before.current_id, "corrupt:pointer_dangling", "CURRENT's row is missing")
        )
        if damage is not None:
            fallback = None
            kept = before.fallback_id
            if kept is not None and kept not in (checkpoint_id, before.current_id):
                intact = not verify or _verify(tx, kept) is None
                row = checkpoints.checkpoint_by_id(conn, kept) if intact else None
                if row is not None:
                    fallback = (row.seq, row.id)
    with tx.write_batch():
        if before is not None:
            now = pointers.pointer(conn, namespace)
            if now is None or now.revision != before.revision:
                # CURRENT moved while it was being verified: decide again, never guess.
                raise errors.ConflictError(
                    f"namespace {namespace!r}: CURRENT moved while set_current was verifying "
                    "it; nothing was changed. Try again.",
                    expected=before.current_id,
                    actual=None if now is None else now.current_id,
                )
        if isinstance(fallback, tuple):
            # Chosen outside this transaction: it must still be the row it was (nothing
            # but this check keeps a pointer from naming a deleted checkpoint, since v6).
            still = checkpoints.checkpoint_by_id(conn, fallback[1])
            if still is None or still.seq != fallback[0]:
                raise errors.ConflictError(
                    f"namespace {namespace!r}: the fallback chosen for it "
                    f"({fallback[1][:12]}) was deleted while set_current was verifying; "
                    "nothing was changed. Try again.",
                    expected=fallback[1],
                    actual=None,
                )
        ptr = commit_op.set_current(
            tx,
            namespace,
            checkpoint_id,
            expect_current=expect_current,
            reason=reason,
            fallback=fallback,
        )
        if damage is not None:
            receipts.store_receipt(
                conn,
                "set_current",
                {
                    "from_id": damage.checkpoint_id,
                    "to_id": checkpoint_id,
                    "fallback_id": ptr.fallback_id,
                    "damaged_code": damage.code,
                    "damaged_detail": damage.detail[:2000],
                    "revision": ptr.revision,
                },
                namespace=namespace,
                checkpoint_id=checkpoint_id,
                at_ms=tx.now_ms,
            )
    return ptr, damage
