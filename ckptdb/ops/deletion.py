"""Deleting chosen checkpoints with GC's sweep machinery: ``drop_namespace`` (a whole
namespace), ``prune`` (by metadata), and the step both share (:func:`delete_selected`),
which skips what is protected, deletes in one transaction or in GC's sized batches, and
stores a receipt. GC itself (``ops/gc.py``) decides what a retention policy dooms; this
module deletes what its caller chose."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from .. import errors, models, validation
from ..connection import Connection
from ..connection.engine import EngineConnection
from ..extension import Session
from ..store import (
    CORE_TABLES,
    checkpoint_scans,
    checkpoints,
    pins,
    pointers,
    scopes,
    settings,
)
from ..store.gc_batch import GcBatch
from ..store.receipts import store_receipt
from .gc import (
    RECLAIM_MIN_PAGES,
    SWEEP_BATCH,
    Sweep,
    bulk_delete_settings,
    delete_batch,
    estimate,
    protected_among,
    receipt_ids,
    reclaim,
    sweep,
)
from .handle import Handle
from .unit import Unit, holding, holds


def delete_selected(
    tx: Unit,
    *,
    kind: str,
    select: Callable[[], list[tuple[int, str]]],
    namespaces: list[str],
    dry_run: bool,
    grace_seconds: float,
    exempt: Callable[[], set[int]] = set,
    prologue: Callable[[], None] | None = None,
    epilogue: Callable[[Sweep], None] | None = None,
) -> models.PruneReport:
    """Delete the checkpoints ``select()`` returns as (seq, id), skipping (and reporting)
    protected ones, with the sweep machinery of GC and a receipt.

    ``exempt()`` names protected seqs the operation itself will unprotect in ``prologue``
    (which runs in its own write transaction before sweeping, e.g. removing a dropped
    namespace's pointer); ``epilogue`` runs in the transaction that stores the receipt.
    """
    conn = tx.conn
    file = conn if isinstance(conn, Connection) else None  # (SQLite: pages to hand back)
    now_ms = tx.now_ms
    cutoff_ms = now_ms - int(grace_seconds * 1000)
    with conn.read_transaction():
        rows = select()
        protected = protected_among(conn, [seq for seq, _ in rows]) - exempt()
    skipped = [
        models.Rejection(
            checkpoint_id=cid, code="protected", detail="CURRENT, fallback or pinned; kept"
        )
        for seq, cid in rows
        if seq in protected
    ]
    doomed = [seq for seq, _ in rows if seq not in protected]
    receipt_id = None
    if dry_run:
        with conn.read_transaction():
            swept = estimate(conn, doomed, cutoff_ms)
    elif len(doomed) <= SWEEP_BATCH:
        # A small deletion (a LangGraph thread, a namespace of a few hundred checkpoints)
        # is one transaction: the pointer, the checkpoints, what becomes unreferenced and
        # the receipt commit together, without the bulk settings a long sweep needs.
        with conn.write_transaction():
            if prologue is not None:
                prologue()
            swept = delete_batch(conn, doomed, cutoff_ms)
            swept.deleted_ids.sort()
            GcBatch.drop_tables(conn)
            receipt_id = _store_deletion_receipt(
                conn, kind, namespaces, skipped, swept, now_ms, epilogue
            )
        # In a file with key scopes every deletion ends with the WAL truncated: no frame
        # may keep a deleted record of a scope (docs/security.md).
        if file is not None and (
            scopes.any_scope(file) or int(file.pragma("freelist_count")) > RECLAIM_MIN_PAGES
        ):
            reclaim(file)
    else:
        if prologue is not None:
            with conn.write_transaction():
                prologue()
        swept = Sweep()
        with bulk_delete_settings(file) if file is not None else nullcontext():
            sweep(conn, doomed, cutoff_ms, swept)
        swept.deleted_ids.sort()  # once: the receipt and the report sort again (now O(n))
        with conn.write_transaction():
            GcBatch.drop_tables(conn)
            receipt_id = _store_deletion_receipt(
                conn, kind, namespaces, skipped, swept, now_ms, epilogue
            )
        if file is not None:
            reclaim(file)
    return models.PruneReport(
        kind=kind,  # type: ignore[arg-type]
        dry_run=dry_run,
        receipt_id=receipt_id,
        namespaces=namespaces,
        checkpoints_deleted=len(swept.deleted_ids),
        deleted_ids=sorted(swept.deleted_ids),
        skipped=skipped,
        blobs_deleted=swept.blobs,
        chunks_deleted=swept.chunks,
        bytes_freed=swept.bytes_freed,
        at=models.from_ms(now_ms),
    )


def _store_deletion_receipt(
    conn: EngineConnection,
    kind: str,
    namespaces: list[str],
    skipped: list[models.Rejection],
    swept: Sweep,
    now_ms: int,
    epilogue: Callable[[Sweep], None] | None,
) -> int:
    """Run ``epilogue`` (which may delete more, counted in ``swept``) and store the receipt
    of a deletion (inside the caller's write transaction); returns the receipt's id."""
    if epilogue is not None:
        epilogue(swept)
    body: dict[str, Any] = {
        "namespaces": namespaces,
        "checkpoints_deleted": len(swept.deleted_ids),
        "skipped": [s.checkpoint_id for s in skipped],
        "blobs_deleted": swept.blobs,
        "chunks_deleted": swept.chunks,
        "bytes_freed": swept.bytes_freed,
        **receipt_ids(swept.deleted_ids),
    }
    return store_receipt(
        conn,
        kind,
        body,
        namespace=namespaces[0] if len(namespaces) == 1 else None,
        checkpoint_id=None,
        at_ms=now_ms,
    )


#: An integration's hook run in the transaction that drops a namespace (``on_drop``).
DropHook = Callable[[Session], None]


def drop_namespace(
    handle: Handle,
    namespace: str,
    *,
    force: bool,
    dry_run: bool,
    on_drop: DropHook | None = None,
) -> models.PruneReport:
    """See :meth:`ckptdb.Database.drop_namespace`: a namespace already dropped (or never
    there) is nothing to do, which is success (``on_drop`` then runs in a transaction of
    its own: the integration's rows may outlive an earlier, interrupted drop)."""
    with holding(handle, write=not dry_run) as tx:
        try:
            return drop_namespace_in(tx, namespace, force=force, dry_run=dry_run, on_drop=on_drop)
        except errors.NamespaceNotFoundError:
            if on_drop is not None and not dry_run:
                with tx.conn.write_transaction():
                    _run_drop_hook(tx.conn, on_drop)
            return models.PruneReport(
                kind="drop_namespace",
                dry_run=dry_run,
                receipt_id=None,
                namespaces=[],
                checkpoints_deleted=0,
                deleted_ids=[],
                skipped=[],
                blobs_deleted=0,
                chunks_deleted=0,
                bytes_freed=0,
                at=models.from_ms(tx.now_ms),
            )


def drop_namespace_in(
    tx: Unit, namespace: str, *, force: bool, dry_run: bool, on_drop: DropHook | None = None
) -> models.PruneReport:
    """Drop ``namespace`` with ``tx`` (NamespaceNotFoundError when there is none);
    ``on_drop`` runs in the transaction that stores the receipt (not on a dry run)."""
    conn = tx.conn
    ns_id = checkpoints.namespace_id(conn, namespace)
    if ns_id is None:
        raise errors.NamespaceNotFoundError(f"no namespace {namespace!r}")
    held = pins.list_pins(conn, namespace)
    if held and not force:
        raise errors.ProtectedError(
            f"namespace {namespace!r} has pinned checkpoints "
            f"({', '.join(p.name for p in held)}); unpin them first or force the drop, "
            "which removes those pins too",
            pins=[p.name for p in held],
        )

    def exempt() -> set[int]:
        return pointers.protected_seqs(conn, ns_id) | pins.pinned_in_namespace(conn, ns_id)

    def prologue() -> None:
        pointers.lock_namespace(conn, namespace)  # no commit to it meanwhile (PostgreSQL)
        pins.delete_in_namespace(conn, ns_id)
        pointers.delete(conn, ns_id)

    def epilogue(swept: Sweep) -> None:
        # A commit that landed after the checkpoints were selected and before the prologue
        # removed the pointer is not among them (none lands after: without a pointer a
        # commit is refused, see pointers.move): it goes too, or the namespace would stay
        # behind without a pointer.
        late = [seq for seq, _ in checkpoints.seqs_of_namespace(conn, ns_id)]
        if late:
            extra = delete_batch(conn, late, tx.now_ms)
            swept.deleted_ids.extend(extra.deleted_ids)
            swept.deleted_ids.sort()
            swept.blobs += extra.blobs
            swept.chunks += extra.chunks
            swept.bytes_freed += extra.bytes_freed
        checkpoints.delete_namespace_if_empty(conn, ns_id)
        settings.clear_policy(conn, namespace)
        if on_drop is not None:
            _run_drop_hook(conn, on_drop)

    return delete_selected(
        tx,
        kind="drop_namespace",
        select=lambda: checkpoints.seqs_of_namespace(conn, ns_id),
        namespaces=[namespace],
        dry_run=dry_run,
        grace_seconds=0.0,
        exempt=exempt,
        prologue=prologue,
        epilogue=epilogue,
    )


def _run_drop_hook(conn: EngineConnection, hook: DropHook) -> None:
    """An integration's ``on_drop`` hook, inside the caller's write transaction, confined
    to the integration's own tables (as ``on_publish`` is)."""
    with conn.integration_session(CORE_TABLES) as session:
        hook(session)


@holds(write=True)
def prune(
    tx: Unit,
    where: dict[str, Any],
    *,
    namespaces: list[str] | None,
    dry_run: bool,
) -> models.PruneReport:
    """See :meth:`ckptdb.Database.prune`."""
    conn = tx.conn

    def select() -> list[tuple[int, str]]:
        out = []
        for seq, cid, ns, meta in checkpoint_scans.iter_metadata(conn):
            if namespaces is not None and ns not in namespaces:
                continue
            # Unreadable metadata cannot be matched: CorruptionError, nothing deleted.
            values = validation.metadata_from_json(meta, cid)
            if all(k in values and values[k] == v for k, v in where.items()):
                out.append((seq, cid))
        return out

    return delete_selected(
        tx,
        kind="prune",
        select=select,
        namespaces=namespaces or ["*"],
        dry_run=dry_run,
        grace_seconds=0.0,
    )
