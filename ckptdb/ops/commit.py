"""The commit path: prepare outside the lock, publish in one write transaction, and resolve
a COMMIT whose outcome is unknown.

Publish = manifest + entries + pointer move inside one ``BEGIN IMMEDIATE`` transaction; the
expensive work (validation, hashing, staging of large blobs) happened before the lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import canonical, errors, models
from ..connection import Connection
from ..store import Store, checkpoints, pointers
from ..store.crypto import PLAINTEXT, Scope
from ..store.receipts import store_receipt
from ..store.rows import PointerRow
from ..types import UNSET, Entry, _Unset
from . import quota
from .handle import Handle
from .prepare import INLINE_BUDGET, PreparedEntry, prepare
from .progress import CommitBytes

__all__ = ["UNSET", "CommitPlan", "build_ack", "commit", "publish", "set_current"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class CommitPlan:
    """A validated, prepared commit."""

    namespace: str
    entries: list[PreparedEntry]
    metadata_json: str
    expect_current: str | _Unset | None
    reason: str
    base: str | None = None
    on_publish: Callable[[Connection, models.CommitAck], None] | None = None
    attempted_id: str | None = field(default=None)
    #: the key scope the entries were addressed and sealed for
    scope: Scope = PLAINTEXT
    #: recorded beside a new checkpoint (the writing handle's ``code_revision``)
    code_revision: str | None = None

    def records(self) -> list[canonical.EntryRecord]:
        """Entry records in name order (the order the identity is computed in)."""
        return [e.record() for e in self.entries]


def build_ack(
    plan: CommitPlan,
    checkpoint_id: str,
    parent_id: str | None,
    generation: int,
    revision: int,
    created: bool,
    stored: int,
    now_ms: int,
    evicted_ids: list[str] | None = None,
) -> models.CommitAck:
    """The acknowledgement of ``plan`` landing as ``checkpoint_id`` (``evicted_ids``: what
    an evicting quota deleted to make room for it)."""
    logical = sum(e.blob.size for e in plan.entries)
    # Built from values this module computed, so pydantic's validation is skipped.
    return models.CommitAck.model_construct(
        checkpoint_id=checkpoint_id,
        namespace=plan.namespace,
        parent_id=parent_id,
        generation=generation,
        pointer_revision=revision,
        created=created,
        entry_count=len(plan.entries),
        logical_bytes=logical,
        bytes_stored=stored,
        bytes_deduplicated=max(logical - stored, 0),
        created_at=models.from_ms(now_ms),
        evicted_ids=evicted_ids or [],
    )


def prepare_plan(
    store: Store,
    namespace: str,
    names: list[str],
    entries: Mapping[str, Any],
    *,
    metadata_json: str,
    expect_current: str | _Unset | None,
    reason: str,
    base: str | None,
    on_publish: Callable[[Connection, models.CommitAck], None] | None,
    progress: Callable[[int, int], None] | None,
    code_revision: str | None = None,
) -> CommitPlan:
    """Hash every entry value and stage the large ones (outside the commit transaction)."""
    now = _now_ms()
    budget = [INLINE_BUDGET]
    # Resolved before any byte is hashed: a namespace in a key scope is addressed with the
    # scope's keyed hash and sealed, so its plaintext never reaches the file.
    scope = store.keyring.scope_for_namespace(store.conn, namespace)
    metadata_json = scope.seal_metadata(metadata_json)
    prepared: list[PreparedEntry] = []
    counter = None if progress is None else CommitBytes(progress, entries)  # bytes
    for name in names:
        value = entries[name]
        media_type = schema = None
        if isinstance(value, Entry):
            media_type, schema, value = value.media_type, value.schema, value.value
        blob = prepare(
            store.blobs, value, budget, now, None if counter is None else counter.read, scope
        )
        prepared.append(PreparedEntry(name, blob, media_type, schema))
        if counter is not None:
            counter.entry_done(name, 0 if blob.reference else blob.size)
    return CommitPlan(
        namespace,
        prepared,
        metadata_json,
        expect_current,
        reason,
        base=base,
        on_publish=on_publish,
        scope=scope,
        code_revision=code_revision,
    )


def commit(handle: Handle, store: Store, plan: CommitPlan) -> models.CommitAck:
    """Publish a prepared plan; when COMMIT itself fails, resolve the outcome."""
    try:
        with store.conn.write_transaction():
            return publish(store, plan, _now_ms())
    except errors.CommitOutcomeUnknownError as exc:
        return _resolve_unknown_outcome(handle, plan, exc)


def _resolve_unknown_outcome(
    handle: Handle, plan: CommitPlan, failure: errors.CommitOutcomeUnknownError
) -> models.CommitAck:
    """COMMIT failed: reopen, read CURRENT, and acknowledge only what a successful commit
    has since made durable."""
    try:
        conn = handle.reconnect().conn
        with conn.write_transaction():
            ptr = pointers.pointer(conn, plan.namespace)
            landed = ptr is not None and ptr.current_id == plan.attempted_id
            if ptr is not None and landed:
                pointers.confirm(conn, ptr, _now_ms())
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
    return build_ack(
        plan,
        ptr.current_id,
        summary.parent_id,
        summary.generation,
        ptr.revision,
        created=True,
        stored=0,
        now_ms=ptr.updated_at_ms,
    )


def publish(store: Store, plan: CommitPlan, now_ms: int) -> models.CommitAck:
    """Publish ``plan`` (inside an open write transaction) and return its acknowledgement."""
    conn = store.conn
    ns = plan.namespace
    ptr = pointers.pointer(conn, ns)
    if ptr is not None and ptr.scope_id != plan.scope.scope_id:
        _scope_changed(store, ns)
    current_id = ptr.current_id if ptr is not None else None
    entries_json = canonical.entries_json(plan.records())
    total_size = sum(e.blob.size for e in plan.entries)

    summary = ptr.summary if ptr is not None else None
    base: tuple[str, int] | None = None  # (id, generation)
    if plan.base is not None:
        if ptr is not None and summary is not None and plan.base == ptr.current_id:
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
            and summary.entry_count == len(plan.entries)
            and summary.total_size == total_size
        ):
            same = canonical.checkpoint_id(
                ns, summary.parent_id, summary.generation, entries_json, plan.metadata_json
            )
            if same == ptr.current_id:
                plan.attempted_id = same
                _, stored, repaired = _ensure_blobs(store, plan, now_ms)
                _record_repairs(conn, repaired, ns, same, now_ms)
                pointers.confirm(conn, ptr, now_ms)
                ack = build_ack(
                    plan,
                    same,
                    summary.parent_id,
                    summary.generation,
                    ptr.revision,
                    False,
                    stored,
                    now_ms,
                )
                if plan.on_publish is not None:
                    plan.on_publish(conn, ack)
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
        generation = ptr.current_summary().generation + 1 if ptr is not None else 1
    checkpoint_id = canonical.checkpoint_id(
        ns, parent_id, generation, entries_json, plan.metadata_json
    )
    plan.attempted_id = checkpoint_id

    if ptr is not None:
        namespace_id = ptr.namespace_id
    else:
        namespace_id, scope_id = checkpoints.ensure_namespace(conn, ns, now_ms)
        if scope_id != plan.scope.scope_id:
            _scope_changed(store, ns)
    blob_ids, stored, repaired = _ensure_blobs(store, plan, now_ms)
    seq, inserted = checkpoints.insert(
        conn,
        checkpoint_id=checkpoint_id,
        namespace_id=namespace_id,
        parent_id=parent_id,
        generation=generation,
        created_at_ms=now_ms,
        metadata_json=plan.metadata_json,
        total_size=total_size,
        entries=[
            (e.name, blob_id, e.media_type, e.schema)
            for e, blob_id in zip(plan.entries, blob_ids, strict=True)
        ],
        code_revision=plan.code_revision,
    )
    _record_repairs(conn, repaired, ns, checkpoint_id, now_ms)
    revision = pointers.move(
        conn,
        namespace=ns,
        namespace_id=namespace_id,
        previous=ptr,
        new_seq=seq,
        new_id=checkpoint_id,
        reason=plan.reason,
        now_ms=now_ms,
    )
    # Quotas, once the new checkpoint is CURRENT (protected, like its fallback) and before
    # the hook: a refusal raises and the transaction (or this member's savepoint) rolls back.
    # A stored manifest CURRENT moved back to adds nothing to count.
    evicted = quota.enforce(store, ns, namespace_id, checkpoint_id, now_ms) if inserted else []
    ack = build_ack(
        plan, checkpoint_id, parent_id, generation, revision, True, stored, now_ms, evicted
    )
    if plan.on_publish is not None:
        plan.on_publish(conn, ack)
    return ack


def _scope_changed(store: Store, namespace: str) -> None:
    """The commit was prepared for another key scope than the namespace has now (another
    handle created a scope meanwhile): nothing of it may be written."""
    store.keyring.forget()
    raise errors.ScopeChangedError(
        f"namespace {namespace!r}: its encryption settings changed while the commit was "
        "prepared (another handle created a key scope); nothing was written. Commit again.",
        namespace=namespace,
    )


def _ensure_blobs(store: Store, plan: CommitPlan, now_ms: int) -> tuple[list[int], int, list[str]]:
    """Blob ids of the plan's entries (inserting new blobs, repairing damaged copies), the
    bytes written, and the digests whose damaged stored bytes this commit rewrote."""
    ids: list[int] = []
    stored = 0
    repaired: list[str] = []
    for entry in plan.entries:
        blob_id, written, fixed = store.blobs.insert(entry.blob, now_ms)
        ids.append(blob_id)
        stored += written
        repaired.extend(entry.blob.repaired)
        if fixed:
            repaired.append(entry.blob.digest)
    return ids, stored, repaired


def _record_repairs(
    conn: Connection, repaired: list[str], namespace: str, checkpoint_id: str, now_ms: int
) -> None:
    if not repaired:
        return
    # Damaged stored bytes were rewritten from a commit's bytes, which hash to the digest.
    store_receipt(
        conn,
        "repair",
        {"digests": sorted(set(repaired)), "by_commit": checkpoint_id},
        namespace=namespace,
        checkpoint_id=checkpoint_id,
        at_ms=now_ms,
    )


def set_current(
    store: Store,
    namespace: str,
    checkpoint_id: str,
    *,
    expect_current: str | _Unset | None,
    reason: str,
    fallback: tuple[int, str] | bool | None = True,
) -> PointerRow:
    """Move CURRENT to an existing checkpoint of the namespace (inside a write
    transaction); returns the new pointer. ``fallback`` as in :func:`pointers.move`."""
    conn = store.conn
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
        now_ms=_now_ms(),
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
