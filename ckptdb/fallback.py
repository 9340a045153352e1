"""Loading a namespace with verification and explicit, receipted fallback."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from . import catalog, errors, models
from .checkpoint import Checkpoint

if TYPE_CHECKING:
    from .connection import Connection
    from .database import Database

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


def _verified(db: Database, conn: Connection, row: catalog.CheckpointRow) -> Checkpoint:
    with conn.read_transaction():
        cp = Checkpoint(db, row, catalog.entries_of(conn, row.seq))
    cp.verify()
    return cp


def _validate(cp: Checkpoint, validator: Validator | None) -> None:
    if validator is None:
        return
    try:
        verdict = validator(cp)
    except errors.CkptdbError:
        raise
    except Exception as exc:
        raise errors.ValidatorRejectedError(
            f"validator rejected checkpoint {cp.id[:12]}: {type(exc).__name__}: {exc}",
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
        detail=exc.message,
        entry=entry if isinstance(entry, str) else None,
    )


def load_with_fallback(
    db: Database,
    conn: Connection,
    namespace: str,
    *,
    fallback: bool,
    validator: Validator | None,
    start_id: str | None = None,
) -> LoadResult:
    """See :meth:`ckptdb.Database.load` (``start_id``: walk from that checkpoint of the
    namespace instead of from CURRENT)."""
    ptr = catalog.pointer(conn, namespace)
    if ptr is None:
        raise errors.NamespaceNotFoundError(
            f"namespace {namespace!r} has no checkpoint yet; commit one first",
            namespace=namespace,
        )
    catalog.check_pointer(ptr)  # a damaged pointer fails closed: we do not guess what is current
    requested = start_id or ptr.current_id
    rejected: list[models.Rejection] = []
    next_id: str | None = requested
    last_generation: int | None = None
    selected: Checkpoint | None = None
    while next_id is not None:
        row = catalog.checkpoint_by_id(conn, next_id)
        if row is None or (last_generation is not None and row.generation >= last_generation):
            break  # the stored lineage ends here (older ancestors were garbage-collected)
        try:
            cp = _verified(db, conn, row)
            _validate(cp, validator)
        except (
            errors.CorruptionError,
            errors.ValidatorRejectedError,
            errors.CheckpointNotFoundError,
        ) as exc:
            if not fallback:
                raise
            rejected.append(_rejection(row.id, exc))
            next_id, last_generation = row.parent_id, row.generation
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
    receipt_id = db._record_receipt(
        "fallback",
        body,
        namespace=namespace,
        checkpoint_id=selected.id if selected is not None else requested,
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
