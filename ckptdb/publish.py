"""The publish protocol: manifest + entries + pointer move in one write transaction.

Everything here runs *inside* a ``BEGIN IMMEDIATE`` transaction opened by the caller; the
expensive work (validation, hashing, staging of large blobs) happened before the lock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from . import canonical, catalog, errors, models
from .blobs import BlobStore, PreparedEntry
from .connection import Connection
from .receipts import store_receipt


class _Unset:
    """Type of :data:`UNSET`."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


#: "No compare-and-swap": the caller did not state which checkpoint it expects as CURRENT.
UNSET: Final = _Unset()


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
) -> models.CommitAck:
    """The acknowledgement of ``plan`` landing as ``checkpoint_id``."""
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
        committed_at=models.from_ms(now_ms),
    )


def confirm(conn: Connection, ptr: catalog.PointerRow, now_ms: int) -> None:
    """Write a tiny change so the enclosing transaction's COMMIT syncs the WAL.

    Used when CURRENT already names the checkpoint being committed: the frames that hold it
    may come from an attempt whose COMMIT failed, and a successful commit after them is what
    makes them durable before we acknowledge.
    """
    conn.execute(
        "UPDATE pointer SET confirmed_at_ms = ? WHERE namespace_id = ?",
        (now_ms, ptr.namespace_id),
    )


def publish(conn: Connection, blobs: BlobStore, plan: CommitPlan, now_ms: int) -> models.CommitAck:
    """Publish ``plan`` (inside an open write transaction) and return its acknowledgement."""
    ns = plan.namespace
    ptr = catalog.pointer(conn, ns)
    current_id = ptr.current_id if ptr is not None else None
    entries_json = canonical.entries_json(plan.records())
    total_size = sum(e.blob.size for e in plan.entries)

    base = None
    if plan.base is not None:
        base = catalog.require_checkpoint(conn, plan.base)
        if base.namespace != ns:
            raise errors.InvalidReferenceError(
                f"base {plan.base[:12]} belongs to namespace {base.namespace!r}, not {ns!r}"
            )

    summary = ptr.summary if ptr is not None else None
    if ptr is not None and summary is not None:
        # Idempotence: CURRENT already holds exactly this content on top of the parent this
        # commit asks for (a retry of a commit that landed, or an unchanged state).
        if base is not None:
            expected_parent: str | None = base.id
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
                _, stored = _ensure_blobs(conn, blobs, plan, now_ms)
                _record_repairs(conn, blobs, ns, same, now_ms)
                confirm(conn, ptr, now_ms)
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
        parent_id: str | None = base.id
        generation = base.generation + 1
    else:
        parent_id = current_id
        generation = ptr.current_summary().generation + 1 if ptr is not None else 1
    checkpoint_id = canonical.checkpoint_id(
        ns, parent_id, generation, entries_json, plan.metadata_json
    )
    plan.attempted_id = checkpoint_id

    namespace_id = ptr.namespace_id if ptr is not None else ensure_namespace(conn, ns, now_ms)
    blob_ids, stored = _ensure_blobs(conn, blobs, plan, now_ms)
    conn.execute(
        "INSERT OR IGNORE INTO checkpoint (id, namespace_id, parent_id, generation,"
        " created_at_ms, metadata, entry_count, total_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            checkpoint_id,
            namespace_id,
            parent_id,
            generation,
            now_ms,
            plan.metadata_json,
            len(plan.entries),
            total_size,
        ),
    )
    if conn.changes() == 0:
        # The same manifest was published before (then CURRENT moved away and back).
        existing = catalog.checkpoint_by_id(conn, checkpoint_id)
        assert existing is not None
        seq = existing.seq
    else:
        seq = conn.last_insert_rowid()
        conn.executemany(
            "INSERT INTO entry (checkpoint_seq, name, blob_id, media_type, schema_pin)"
            " VALUES (?, ?, ?, ?, ?)",
            [
                (seq, e.name, blob_id, e.media_type, e.schema)
                for e, blob_id in zip(plan.entries, blob_ids, strict=True)
            ],
        )
    _record_repairs(conn, blobs, ns, checkpoint_id, now_ms)
    revision = move_pointer(
        conn,
        namespace=ns,
        namespace_id=namespace_id,
        previous=ptr,
        new_seq=seq,
        new_id=checkpoint_id,
        reason=plan.reason,
        now_ms=now_ms,
    )
    ack = build_ack(plan, checkpoint_id, parent_id, generation, revision, True, stored, now_ms)
    if plan.on_publish is not None:
        plan.on_publish(conn, ack)
    return ack


def _ensure_blobs(
    conn: Connection, blobs: BlobStore, plan: CommitPlan, now_ms: int
) -> tuple[list[int], int]:
    """Blob ids of the plan's entries (inserting new blobs, repairing damaged copies) and
    the number of bytes written."""
    ids: list[int] = []
    stored = 0
    for entry in plan.entries:
        blob_id, written = blobs.insert(entry.blob, now_ms)
        ids.append(blob_id)
        stored += written
    return ids, stored


def _record_repairs(
    conn: Connection, blobs: BlobStore, namespace: str, checkpoint_id: str, now_ms: int
) -> None:
    if not blobs.repaired:
        return
    # Damaged stored bytes were rewritten from a commit's bytes, which hash to the digest.
    store_receipt(
        conn,
        "repair",
        {"digests": sorted(set(blobs.repaired)), "by_commit": checkpoint_id},
        namespace=namespace,
        checkpoint_id=checkpoint_id,
        at_ms=now_ms,
    )
    blobs.repaired.clear()


def ensure_namespace(conn: Connection, namespace: str, now_ms: int) -> int:
    """Id of the namespace row, creating it if needed."""
    existing = catalog.namespace_id(conn, namespace)
    if existing is not None:
        return existing
    conn.execute("INSERT INTO namespace (name, created_at_ms) VALUES (?, ?)", (namespace, now_ms))
    return conn.last_insert_rowid()


def move_pointer(
    conn: Connection,
    *,
    namespace: str,
    namespace_id: int,
    previous: catalog.PointerRow | None,
    new_seq: int,
    new_id: str,
    reason: str,
    now_ms: int,
) -> int:
    """Point CURRENT at ``new_id`` (the old current becomes the fallback); append the move
    to the pointer history. Returns the new pointer revision."""
    revision = previous.revision + 1 if previous is not None else 1
    fallback_seq = previous.current_seq if previous is not None else None
    fallback_id = previous.current_id if previous is not None else None
    previous_digest = previous.digest if previous is not None else None
    digest = canonical.pointer_digest(namespace, revision, new_id, fallback_id, previous_digest)
    conn.execute(
        "INSERT INTO pointer (namespace_id, current_seq, fallback_seq, revision, digest,"
        " previous_digest, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (namespace_id) DO UPDATE SET current_seq = excluded.current_seq,"
        " fallback_seq = excluded.fallback_seq, revision = excluded.revision,"
        " digest = excluded.digest, previous_digest = excluded.previous_digest,"
        " updated_at_ms = excluded.updated_at_ms, confirmed_at_ms = NULL",
        (namespace_id, new_seq, fallback_seq, revision, digest, previous_digest, now_ms),
    )
    conn.execute(
        "INSERT INTO pointer_history (namespace_id, revision, current_id, fallback_id,"
        " previous_digest, digest, reason, at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (namespace_id, revision, new_id, fallback_id, previous_digest, digest, reason, now_ms),
    )
    return revision


def _short(checkpoint_id: str | None) -> str:
    return "empty (no checkpoint)" if checkpoint_id is None else checkpoint_id[:12]
