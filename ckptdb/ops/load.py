"""Loading a namespace with verification and explicit, receipted fallback."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .. import errors, models, validation
from ..connection import Connection
from ..store import Store, checkpoints, pointers, receipts
from ..store.rows import CheckpointRow, PointerRow
from .checkpoint import Checkpoint
from .handle import Handle

Validator = Callable[[Checkpoint], object]
Disposition = Literal["exact", "degraded_fallback"]


@dataclass(frozen=True)
class LoadResult:
    """What :meth:`Database.load` returns."""

    checkpoint: Checkpoint
    disposition: Disposition
    receipt: models.FallbackReceipt | None

    @property
    def degraded(self) -> bool:
        """True when an older checkpoint than CURRENT was returned."""
        return self.disposition == "degraded_fallback"


def _row(conn: Connection, checkpoint_id: str) -> CheckpointRow | None:
    """The stored row of a checkpoint, or None when no row has that id. When the lookup
    through the index on ids fails or finds nothing (collected by GC -- or hidden by a
    damaged index), the table itself is searched."""
    try:
        with conn.read_transaction():
            row = checkpoints.checkpoint_by_id(conn, checkpoint_id)
    except errors.CorruptionError:
        row = None  # a damaged index page; the table may still hold the row intact
    if row is None:
        with conn.read_transaction():
            row = checkpoints.checkpoint_by_id(conn, checkpoint_id, scan=True)
    return row


def _manifest(handle: Handle, conn: Connection, namespace: str, row: CheckpointRow) -> Checkpoint:
    """The checkpoint with its manifest checked against its id. Raises CorruptionError for
    a damaged manifest, and for a checkpoint of another namespace (reached only through
    damage)."""
    with conn.read_transaction():
        cp = Checkpoint(handle, row, checkpoints.entries_of(conn, row.seq))
    checkpoints.check_namespace(namespace, cp.namespace, cp.id)
    return cp


def _parent_of_damaged(
    handle: Handle,
    conn: Connection,
    ptr: PointerRow,
    checkpoint_id: str,
    row: CheckpointRow | None,
) -> str | None:
    """The next candidate after a checkpoint whose manifest (and so its parent link) cannot
    be trusted.

    Its stored parent link is taken when the parent it names is an intact checkpoint of the
    namespace exactly one generation older (damage would have to forge both fields to pass).
    Otherwise: what CURRENT named before this checkpoint became CURRENT, from records whose
    digest proves them intact (the pointer, then the pointer history) -- its parent for any
    ordinary commit. None when neither says.
    """
    if row is not None and row.parent_id is not None:
        try:
            parent = _row(conn, row.parent_id)
            if parent is not None:
                verified = _manifest(handle, conn, ptr.namespace, parent)
                if verified.generation == row.generation - 1:
                    return verified.id
        except errors.CorruptionError:
            pass  # the link is not usable; the sealed records below decide
    if checkpoint_id == ptr.current_id:
        return ptr.fallback_id  # covered by the pointer digest, checked by the caller
    try:
        moves = pointers.moves_to(conn, ptr.namespace_id, checkpoint_id)
    except errors.CorruptionError:
        return None  # a damaged history row: no trusted record (the walk ends here)
    return next((m.fallback_id for m in moves if m.intact()), None)


def _validate(cp: Checkpoint, validator: Validator | None) -> None:
    if validator is None:
        return
    try:
        verdict = validator(cp)
    except errors.CkptdbError:
        raise
    except Exception as exc:
        raise errors.ValidatorRejectedError(
            f"validator rejected checkpoint {cp.id[:12]}: {type(exc).__name__}: "
            + validation.safe_text(str(exc)),
            checkpoint_id=cp.id,
        ) from exc
    if verdict is False:
        raise errors.ValidatorRejectedError(
            f"validator rejected checkpoint {cp.id[:12]}", checkpoint_id=cp.id
        )


def _rejection(checkpoint_id: str, exc: errors.CkptdbError) -> models.Rejection:
    reason = exc.details.get("reason")
    code = exc.code if reason is None else f"{exc.code}:{reason}"
    entry = exc.details.get("entry")
    return models.Rejection(
        checkpoint_id=checkpoint_id,
        code=code,
        detail=validation.safe_text(exc.message),
        entry=entry if isinstance(entry, str) else None,
    )


def load_with_fallback(
    handle: Handle,
    store: Store,
    namespace: str,
    *,
    fallback: bool,
    validator: Validator | None,
    start_id: str | None = None,
) -> LoadResult:
    """See :meth:`ckptdb.Database.load` (``start_id``: walk from that checkpoint of the
    namespace instead of from CURRENT)."""
    conn = store.conn
    ptr = pointers.pointer(conn, namespace)
    if ptr is None:
        raise errors.NamespaceNotFoundError(
            f"namespace {namespace!r} has no checkpoint yet; commit one first",
            namespace=namespace,
        )
    pointers.check_pointer(ptr)  # a damaged pointer fails closed: we do not guess what is current
    requested = start_id or ptr.current_id
    rejected: list[models.Rejection] = []
    next_id: str | None = requested
    seen: set[str] = set()
    selected: Checkpoint | None = None
    # Parent links are followed only out of a manifest that hashed to its id; past a
    # damaged manifest the walk continues from what CURRENT named before it (digest-sealed
    # pointer records), so damage can neither skip an intact ancestor nor leave the
    # namespace.
    while next_id is not None and next_id not in seen:
        seen.add(next_id)
        row: CheckpointRow | None = None
        cp: Checkpoint | None = None
        try:
            row = _row(conn, next_id)
            if row is None:
                if next_id != ptr.current_id:
                    break  # the stored lineage ends here (older ancestors were collected)
                raise errors.CorruptionError(
                    f"CURRENT of {namespace!r} names {next_id[:12]}, which cannot be read",
                    checkpoint_id=next_id,
                    reason="current_missing",
                )
            cp = _manifest(handle, conn, namespace, row)
            cp.verify()
            _validate(cp, validator)
        except (
            errors.CorruptionError,
            errors.ValidatorRejectedError,
            errors.CheckpointNotFoundError,
        ) as exc:
            if not fallback:
                raise
            rejected.append(_rejection(next_id, exc))
            next_id = (
                cp.parent_id
                if cp is not None
                else _parent_of_damaged(handle, conn, ptr, next_id, row)
            )
            continue
        selected = cp
        break

    if selected is not None and not rejected:
        return LoadResult(selected, "exact", None)

    now_ms = time.time_ns() // 1_000_000
    disposition = "degraded_fallback" if selected is not None else "none_usable"
    body = {
        "disposition": disposition,
        "pointer_digest": ptr.digest,
        "rejected": [r.model_dump() for r in rejected],
        "requested_id": requested,
        "selected_id": selected.id if selected is not None else None,
    }
    receipt_id = receipts.record(
        conn,
        "fallback",
        body,
        namespace=namespace,
        checkpoint_id=selected.id if selected is not None else requested,
        at_ms=now_ms,
    )
    receipt = models.FallbackReceipt(
        receipt_id=receipt_id,
        namespace=namespace,
        requested_id=requested,
        selected_id=selected.id if selected is not None else None,
        disposition=disposition,  # type: ignore[arg-type]
        rejected=rejected,
        pointer_digest=ptr.digest,
        at=models.from_ms(now_ms),
    )
    if selected is None:
        summary = "; ".join(f"{r.checkpoint_id[:12]}: {r.code}" for r in rejected)
        raise errors.NoUsableCheckpointError(
            f"namespace {namespace!r}: no usable checkpoint — {requested[:12]} and every stored "
            f"ancestor failed verification ({summary}). Nothing was returned; receipt "
            f"{receipt_id} records the details. Restore from a backup or export.",
            namespace=namespace,
            receipt_id=receipt_id,
            rejected=[r.checkpoint_id for r in rejected],
        )
    return LoadResult(selected, "degraded_fallback", receipt)
