"""The commit path: prepare outside the write transaction, publish inside one, and resolve a
COMMIT whose outcome is unknown.

A commit is a :class:`CommitPlan`: the front object builds it from validated arguments,
:func:`prepare` hashes (and, for large values, stages) its entries, and :func:`publish`
writes manifest, entries and pointer move inside one write transaction -- a unit of work
that ``ops/group`` opens, alone or for a batch. Publish reads CURRENT from the handle's
cache when this handle's own last commit to the namespace left it there and no other
connection committed since (``ops/handle``), else from the file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import canonical, errors, models
from ..canonical import EntryRecord
from ..connection import Connection
from ..extension import Session
from ..store import CORE_TABLES, blob_scans, checkpoints, pointers
from ..store.blobs import BlobStore, PreparedBlob
from ..store.crypto import PLAINTEXT, Scope
from ..store.receipts import store_receipt
from ..store.rows import CurrentSummary, PointerRow
from ..types import Entry, _Unset
from . import gc, quota
from .handle import Handle
from .prepare import INLINE_BUDGET, inline, prepare_value
from .progress import CommitBytes
from .unit import Unit, writing

__all__ = ["CommitPlan", "commit", "discard_staged", "prepare", "publish", "set_current"]

Hook = Callable[[Session, models.CommitAck], None]


class CommitPlan:
    """One commit: the caller's validated arguments, then (after :func:`prepare`) its
    entries as records in name order with their prepared blobs, and (after
    :func:`publish`) the id it tried to publish."""

    __slots__ = (
        "attempted_id",
        "base",
        "blobs",
        "code_revision",
        "expect_current",
        "label",
        "metadata_json",
        "names",
        "namespace",
        "on_publish",
        "progress",
        "reason",
        "records",
        "references",
        "scope",
        "staged",
        "staged_at_ms",
        "total_size",
        "values",
    )

    def __init__(
        self,
        namespace: str,
        names: list[str],
        values: Mapping[str, Any],
        *,
        metadata_json: str,
        expect_current: str | _Unset | None,
        reason: str,
        base: str | None,
        on_publish: Hook | None,
        progress: Callable[[int, int], None] | None,
        code_revision: str | None,
        label: str | None = None,
    ) -> None:
        self.namespace = namespace
        #: entry names, sorted (the order the identity is computed in)
        self.names = names
        #: the caller's values by name (dropped once prepared)
        self.values: Mapping[str, Any] | None = values
        self.metadata_json = metadata_json
        self.expect_current = expect_current
        self.reason = reason
        self.base = base
        self.on_publish = on_publish
        self.progress = progress
        self.code_revision = code_revision
        #: the caller's name for the checkpoint, unique in the namespace (None: none)
        self.label = label
        #: the key scope the entries were addressed and sealed for
        self.scope: Scope = PLAINTEXT
        self.records: list[EntryRecord] = []
        self.blobs: list[PreparedBlob] = []
        self.total_size = 0
        #: True when an entry is a reference (a BlobRef) to a stored blob
        self.references = False
        self.attempted_id: str | None = None
        #: chunks :func:`prepare` staged that were not stored before (by id), and the time
        #: it stamped them with: what a failed commit may take back (:func:`discard_staged`)
        self.staged: list[int] = []
        self.staged_at_ms = 0


def prepare(blobs: BlobStore, plan: CommitPlan, scope: Scope, now_ms: int) -> None:
    """Hash every entry value of ``plan`` for ``scope`` (a namespace in a key scope is
    addressed with the scope's keyed hash and sealed, so its plaintext never reaches the
    file) and stage the large ones in short transactions of their own."""
    values = plan.values
    assert values is not None
    plan.scope = scope
    if scope is not PLAINTEXT:
        plan.metadata_json = scope.seal_metadata(plan.metadata_json)
    budget = [INLINE_BUDGET]
    counter = None if plan.progress is None else CommitBytes(plan.progress, values)
    plan.staged_at_ms = now_ms
    inline_limit = blobs.chunker.inline_limit
    records = plan.records
    prepared = plan.blobs
    total = 0
    for name in plan.names:
        value = values[name]
        media_type = schema = None
        if type(value) is Entry:
            media_type, schema, value = value.media_type, value.schema_pin, value.value
        if type(value) is bytes and len(value) <= inline_limit:
            blob = inline(value, scope)  # the common case, without the dispatch
        else:
            blob = prepare_value(
                blobs,
                value,
                budget,
                now_ms,
                None if counter is None else counter.read,
                scope,
                plan.staged,
            )
        if blob.reference:
            plan.references = True
        records.append(EntryRecord(name, blob.digest, blob.size, media_type, schema))
        prepared.append(blob)
        total += blob.size
        if counter is not None:
            counter.entry_done(name, 0 if blob.reference else blob.size)
    plan.total_size = total
    plan.values = None


def commit(handle: Handle, plan: CommitPlan) -> models.CommitAck:
    """Prepare ``plan`` (unless it was, outside the handle) and publish it in a write
    transaction of its own; when COMMIT itself fails, resolve the outcome. The lone
    committer's path: nothing of group commit is paid here.

    It is :func:`~.unit.holding` spelled out (the lock, ``Handle.enter``, the owner put
    back): this runs once per commit, and the generators would be a third of its
    bookkeeping."""
    with handle.lock:
        outer = handle.enter(write=True, keeps_heads=True)
        try:
            tx = Unit(handle, handle.store, writes=True)
            try:
                if plan.values is not None:
                    keyring = tx.store.blobs.keyring
                    scope = keyring.known_scope(plan.namespace) or keyring.scope_for_namespace(
                        tx.conn, plan.namespace
                    )
                    prepare(tx.store.blobs, plan, scope, tx.now_ms)
                try:
                    with tx.conn.write_transaction():
                        ack = publish(tx, plan)
                except errors.CommitOutcomeUnknownError as exc:
                    handle.forget_heads()
                    return _resolve_unknown_outcome(handle, plan, exc)
            except errors.DiskFullError as exc:
                raise discard_staged(tx, [plan], exc) from exc
            handle.remember_heads(tx.moved)  # only once COMMIT returned
            return ack
        finally:
            handle.owner = outer  # what Handle.use does on leaving


def discard_staged(
    tx: Unit, plans: list[CommitPlan], failure: errors.DiskFullError
) -> errors.DiskFullError:
    """The disk filled up and ``plans`` failed: delete the chunks they staged themselves
    (inserted, not dedup hits) that nothing references or touched since, so they do not
    outlive the commits -- best effort, in a transaction of its own that the full disk may
    refuse too. Returns the error to raise instead of ``failure``: it says what became of
    those chunks and which command recovers."""
    path = tx.handle.path
    recover = (
        f"`ckptdb gc {path} --grace 0s` (db.gc(grace=0)) deletes them -- run it only while no "
        "other commit runs: the grace period is what protects the chunks a commit stages"
    )
    staged = [plan for plan in plans if plan.staged]
    if not staged:
        return errors.DiskFullError(
            f"{failure} To make room, `ckptdb gc {path}` deletes what retention does not keep; "
            "chunks that failed or killed commits staged are kept for the grace period, and "
            f"{recover}.",
            **failure.details,
        )
    count = sum(len(plan.staged) for plan in staged)
    try:
        deleted, freed = _delete_staged(tx, staged)
    except errors.CkptdbError as cleanup:
        return errors.DiskFullError(
            f"{failure} The {count} chunks the commit had staged could not be deleted "
            f"({cleanup.code}); once there is a little room, {recover}.",
            **failure.details,
            staged_chunks=count,
        )
    for plan in staged:
        plan.staged = []
    return errors.DiskFullError(
        f"{failure} The {deleted} chunks ({freed / 2**20:.1f} MiB) the commit had staged were "
        f"deleted again. To make room, `ckptdb gc {path}` deletes what retention does not keep.",
        **failure.details,
        staged_chunks_deleted=deleted,
    )


def _delete_staged(tx: Unit, plans: list[CommitPlan]) -> tuple[int, int]:
    """Delete what :func:`discard_staged` may, in one write transaction that also hands
    the freed pages back on SQLite (so the file can shrink without first growing by
    them). Returns (chunks, bytes)."""
    conn = tx.conn
    deleted = freed = 0
    with conn.write_transaction():
        free_before = gc.free_pages(conn) if isinstance(conn, Connection) else 0
        for plan in plans:
            count, size = blob_scans.delete_staged_chunks(conn, plan.staged, plan.staged_at_ms)
            deleted += count
            freed += size
        if isinstance(conn, Connection):
            gc.release_pages(conn, free_before)
    return deleted, freed


def _resolve_unknown_outcome(
    handle: Handle, plan: CommitPlan, failure: errors.CommitOutcomeUnknownError
) -> models.CommitAck:
    """COMMIT failed: reopen, read CURRENT, and acknowledge only what a successful commit
    has since made durable."""
    try:
        handle.reconnect()
        with writing(handle) as tx:
            ptr = pointers.pointer(tx.conn, plan.namespace)
            landed = ptr is not None and ptr.current_id == plan.attempted_id
            if ptr is not None and landed:
                pointers.confirm(tx.conn, ptr, tx.now_ms)
    except errors.CkptdbError as exc:
        handle.mark_broken()
        raise errors.CommitOutcomeUnknownError(
            f"{failure} Confirming it after reopening failed too ({exc}).",
            namespace=plan.namespace,
            checkpoint_id=plan.attempted_id,
        ) from exc
    if ptr is None or not landed:
        raise errors.CommitOutcomeUnknownError(
            f"COMMIT failed ({failure.__cause__}); after reopening, CURRENT of "
            f"{plan.namespace!r} does not name {str(plan.attempted_id)[:12]}. Retry the "
            "commit: a retry converges on the same checkpoint whether or not this attempt "
            "reaches the disk later.",
            namespace=plan.namespace,
            checkpoint_id=plan.attempted_id,
        ) from failure
    summary = ptr.current_summary()
    return _ack(
        plan,
        ptr.current_id,
        summary.parent_id,
        summary.generation,
        ptr.revision,
        created=True,
        stored=0,
        now_ms=ptr.updated_at_ms,
    )


def _ack(
    plan: CommitPlan,
    checkpoint_id: str,
    parent_id: str | None,
    generation: int,
    revision: int,
    *,
    created: bool,
    stored: int,
    now_ms: int,
    evicted_ids: list[str] | None = None,
) -> models.CommitAck:
    """The acknowledgement of ``plan`` landing as ``checkpoint_id`` (``evicted_ids``: what
    an evicting quota deleted to make room for it)."""
    return models.CommitAck.of(
        checkpoint_id,
        plan.namespace,
        parent_id,
        generation,
        revision,
        created,
        len(plan.records),
        plan.total_size,
        stored,
        now_ms,
        evicted_ids or [],
    )


def publish(tx: Unit, plan: CommitPlan) -> models.CommitAck:
    """Publish a prepared ``plan`` inside the unit's write transaction and return its
    acknowledgement; the pointer it moved goes into ``tx.moved`` (the handle caches it once
    the transaction committed)."""
    conn = tx.conn
    ns = plan.namespace
    now_ms = tx.now_ms
    pointers.lock_namespace(conn, ns)
    ptr = tx.moved.get(ns) or tx.handle.heads.get(ns)
    if ptr is None:
        ptr = pointers.pointer(conn, ns)
    if ptr is not None and ptr.scope_id != plan.scope.scope_id:
        _scope_changed(tx, ns)
    current_id = ptr.current_id if ptr is not None else None
    entries_json = canonical.entries_json(plan.records)
    summary = ptr.summary if ptr is not None else None

    base: tuple[str, int] | None = None  # (id, generation)
    if plan.base is not None:
        if summary is not None and plan.base == current_id:
            base = (plan.base, summary.generation)  # on CURRENT (LangGraph's every put)
        else:
            found = checkpoints.require_checkpoint(conn, plan.base)
            if found.namespace != ns:
                raise errors.InvalidReferenceError(
                    f"base {plan.base[:12]} belongs to namespace {found.namespace!r}, not {ns!r}"
                )
            base = (found.id, found.generation)

    if ptr is not None and summary is not None:
        # Idempotence: CURRENT already holds exactly this content on top of the parent this
        # commit asks for (a retry of a commit that landed, or an unchanged state).
        if base is not None:
            expected_parent: str | None = base[0]
        elif isinstance(plan.expect_current, _Unset):
            expected_parent = summary.parent_id
        else:
            expected_parent = plan.expect_current
        # Cheap checks first: only a CURRENT with the same metadata, entry count and size
        # can hold the same content, and only then is its id worth recomputing.
        if (
            summary.parent_id == expected_parent
            and summary.metadata_json == plan.metadata_json
            and summary.entry_count == len(plan.records)
            and summary.total_size == plan.total_size
            and (plan.label is None or checkpoints.label_of(conn, ptr.current_seq) == plan.label)
        ):
            same = canonical.checkpoint_id(
                ns, summary.parent_id, summary.generation, entries_json, plan.metadata_json
            )
            if same == current_id:
                plan.attempted_id = same
                _, stored, repaired = _ensure_blobs(tx, plan)
                _record_repairs(tx, repaired, ns, same)
                pointers.confirm(conn, ptr, now_ms)
                ack = _ack(
                    plan,
                    same,
                    summary.parent_id,
                    summary.generation,
                    ptr.revision,
                    created=False,
                    stored=stored,
                    now_ms=now_ms,
                )
                if plan.on_publish is not None:
                    _run_hook(tx, plan.on_publish, ack)
                return ack

    if not isinstance(plan.expect_current, _Unset) and plan.expect_current != current_id:
        raise errors.ConflictError(
            f"namespace {ns!r}: expected CURRENT to be {_short(plan.expect_current)} but it is "
            f"{_short(current_id)}; nothing was written. Re-read CURRENT, rebase your change "
            "on it and commit again with expect_current set to it.",
            expected=plan.expect_current,
            actual=current_id,
            namespace=ns,
        )

    if base is not None:
        parent_id: str | None = base[0]
        generation = base[1] + 1
    else:
        parent_id = current_id
        # (A pointer whose checkpoint row is damaged has no summary: that raises.)
        generation = (summary or ptr.current_summary()).generation + 1 if ptr is not None else 1
    checkpoint_id = canonical.checkpoint_id(
        ns, parent_id, generation, entries_json, plan.metadata_json
    )
    plan.attempted_id = checkpoint_id

    if ptr is not None:
        namespace_id = ptr.namespace_id
    else:
        namespace_id, scope_id = checkpoints.ensure_namespace(conn, ns, now_ms)
        if scope_id != plan.scope.scope_id:
            _scope_changed(tx, ns)
    rows, stored, repaired = _ensure_blobs(tx, plan)
    seq, inserted = checkpoints.insert(
        conn,
        checkpoint_id=checkpoint_id,
        namespace_id=namespace_id,
        parent_id=parent_id,
        generation=generation,
        created_at_ms=now_ms,
        metadata_json=plan.metadata_json,
        total_size=plan.total_size,
        entries=rows,
        code_revision=plan.code_revision,
        label=plan.label,
    )
    if repaired:
        _record_repairs(tx, repaired, ns, checkpoint_id)
    head = pointers.move(
        conn,
        namespace=ns,
        namespace_id=namespace_id,
        previous=ptr,
        new_seq=seq,
        new_id=checkpoint_id,
        reason=plan.reason,
        now_ms=now_ms,
        current=CurrentSummary(
            parent_id, generation, len(plan.records), plan.total_size, plan.metadata_json
        ),
        scope_id=plan.scope.scope_id,
    )
    # Quotas, once the new checkpoint is CURRENT (protected, like its fallback) and before
    # the hook: a refusal raises and the transaction (or this member's savepoint) rolls back.
    # A stored manifest CURRENT moved back to adds nothing to count.
    quotas = tx.store.quotas
    evicted = (
        quota.enforce(tx, ns, namespace_id, checkpoint_id)
        if inserted and (quotas.rows or not quotas.loaded)
        else []
    )
    ack = _ack(
        plan,
        checkpoint_id,
        parent_id,
        generation,
        head.revision,
        created=True,
        stored=stored,
        now_ms=now_ms,
        evicted_ids=evicted,
    )
    if plan.on_publish is not None:
        _run_hook(tx, plan.on_publish, ack)
    tx.moved[ns] = head
    return ack


def _run_hook(tx: Unit, hook: Hook, ack: models.CommitAck) -> None:
    """An integration's ``on_publish`` hook, in the commit's transaction, confined to the
    integration's own tables."""
    with tx.conn.integration_session(CORE_TABLES) as session:
        hook(session, ack)


def _scope_changed(tx: Unit, namespace: str) -> None:
    """The commit was prepared for another key scope than the namespace has now (another
    handle created a key scope meanwhile): nothing of it may be written."""
    tx.keyring.forget()
    raise errors.ScopeChangedError(
        f"namespace {namespace!r}: its encryption settings changed while the commit was "
        "prepared (another handle created a key scope); nothing was written. Commit again.",
        namespace=namespace,
    )


def _ensure_blobs(tx: Unit, plan: CommitPlan) -> tuple[list[tuple[Any, ...]], int, list[str]]:
    """The entry rows of the plan -- (name, blob id, media type, schema pin), inserting new
    blobs and repairing damaged copies --, the bytes written, and the digests whose damaged
    stored bytes this commit rewrote."""
    rows: list[tuple[Any, ...]] = []
    stored = 0
    repaired: list[str] = []
    blobs = tx.store.blobs
    insert = blobs.insert
    now_ms = tx.now_ms
    refs = [b for b in plan.blobs if b.reference] if plan.references else None
    known = blobs.find_referenced(refs) if refs else {}  # every BlobRef, one statement
    for record, blob in zip(plan.records, plan.blobs, strict=True):
        if blob.reference:
            rows.append((record.name, known[blob.digest], record.media_type, record.schema_pin))
            continue
        blob_id, written, fixed = insert(blob, now_ms)
        rows.append((record.name, blob_id, record.media_type, record.schema_pin))
        stored += written
        if blob.repaired:
            repaired.extend(blob.repaired)
        if fixed:
            repaired.append(blob.digest)
    return rows, stored, repaired


def _record_repairs(tx: Unit, repaired: list[str], namespace: str, checkpoint_id: str) -> None:
    if not repaired:
        return
    # Damaged stored bytes were rewritten from a commit's bytes, which hash to the digest.
    store_receipt(
        tx.conn,
        "repair",
        {"digests": sorted(set(repaired)), "by_commit": checkpoint_id},
        namespace=namespace,
        checkpoint_id=checkpoint_id,
        at_ms=tx.now_ms,
    )


def set_current(
    tx: Unit,
    namespace: str,
    checkpoint_id: str,
    *,
    expect_current: str | _Unset | None,
    reason: str,
    fallback: tuple[int, str] | bool | None = True,
) -> PointerRow:
    """Move CURRENT to an existing checkpoint of the namespace (inside the unit's write
    transaction); returns the new pointer. ``fallback`` as in :func:`pointers.move`."""
    conn = tx.conn
    pointers.lock_namespace(conn, namespace)
    target = checkpoints.require_checkpoint(conn, checkpoint_id)
    if target.namespace != namespace:
        raise errors.InvalidReferenceError(
            f"checkpoint {checkpoint_id[:12]} belongs to namespace "
            f"{target.namespace!r}, not {namespace!r}"
        )
    ptr = pointers.pointer(conn, namespace)
    current = ptr.current_id if ptr else None
    if not isinstance(expect_current, _Unset) and expect_current != current:
        raise errors.ConflictError(
            f"namespace {namespace!r}: expected CURRENT {expect_current} but it is {current}",
            expected=expect_current,
            actual=current,
        )
    pointers.move(
        conn,
        namespace=namespace,
        namespace_id=target.namespace_id,
        previous=ptr,
        new_seq=target.seq,
        new_id=target.id,
        reason=reason,
        now_ms=tx.now_ms,
        fallback=fallback,
    )
    new = pointers.pointer(conn, namespace)
    if new is None:
        raise errors.CorruptionError(
            f"the pointer of {namespace!r} cannot be read back after moving it",
            namespace=namespace,
            reason="pointer_missing",
        )
    return new


def _short(checkpoint_id: str | None) -> str:
    return "empty (no checkpoint)" if checkpoint_id is None else checkpoint_id[:12]
