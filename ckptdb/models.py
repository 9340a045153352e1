"""Pydantic models returned to callers. All serialize to JSON (``model_dump_json``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .errors import CorruptionError


def from_ms(ms: int) -> datetime:
    """A UTC datetime from integer milliseconds since the epoch."""
    try:
        return datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError) as exc:
        raise CorruptionError(
            f"a stored time ({ms!r}) is not a valid time; the record is damaged",
            reason="wrong_type",
        ) from exc


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EntryInfo(_Model):
    """One named item of a checkpoint."""

    name: str
    digest: str = Field(description="sha256 of the entry's bytes, lowercase hex")
    size: int
    media_type: str | None = None
    schema_pin: str | None = None


class CheckpointInfo(_Model):
    """An immutable checkpoint manifest."""

    id: str
    namespace: str
    parent_id: str | None
    generation: int
    created_at: datetime
    metadata: dict[str, Any]
    entries: list[EntryInfo]
    code_revision: str | None = Field(
        default=None,
        description="the code revision of the program that wrote it (open(code_revision=...));"
        " recorded beside the manifest, not part of the id; None when not given",
    )
    label: str | None = Field(
        default=None,
        description="the caller's own name for it (commit(label=...)), unique in its"
        " namespace; recorded beside the manifest, not part of the id",
    )

    @property
    def total_size(self) -> int:
        """Sum of the entry sizes (logical bytes)."""
        return sum(e.size for e in self.entries)


class CommitAck(_Model):
    """Acknowledgement of a durable commit: returned only after COMMIT succeeded."""

    checkpoint_id: str
    namespace: str
    parent_id: str | None
    generation: int
    pointer_revision: int
    created: bool = Field(
        description="False when the checkpoint was already CURRENT (an idempotent retry)"
    )
    entry_count: int
    logical_bytes: int = Field(description="sum of entry sizes")
    bytes_stored: int = Field(description="bytes of new blob content written by this commit")
    bytes_deduplicated: int = Field(description="bytes that were already stored")
    created_at: datetime = Field(
        description="when this commit was acknowledged (the checkpoint's created_at for a "
        "new checkpoint); the same name as CheckpointInfo.created_at"
    )
    evicted_ids: list[str] = Field(
        default_factory=list,
        description="checkpoints an evict quota deleted in this commit's transaction to make "
        "room for it (also listed in its quota_evict receipt); empty after an "
        "outcome-unknown recovery, where the receipt is the record",
    )

    @classmethod
    def of(
        cls,
        checkpoint_id: str,
        namespace: str,
        parent_id: str | None,
        generation: int,
        pointer_revision: int,
        created: bool,
        entry_count: int,
        logical_bytes: int,
        bytes_stored: int,
        created_at_ms: int,
        evicted_ids: list[str],
    ) -> CommitAck:
        """The acknowledgement of values the commit path computed itself, built without
        pydantic's validation or ``model_construct``'s per-field walk (one per commit):
        exactly the model ``model_construct`` would give (a test holds them equal)."""
        ack = cls.__new__(cls)
        _set(ack, "__dict__", {
            "checkpoint_id": checkpoint_id, "namespace": namespace, "parent_id": parent_id,
            "generation": generation, "pointer_revision": pointer_revision, "created": created,
            "entry_count": entry_count, "logical_bytes": logical_bytes,
            "bytes_stored": bytes_stored,
            "bytes_deduplicated": max(logical_bytes - bytes_stored, 0),
            "created_at": datetime.fromtimestamp(created_at_ms / 1000, tz=UTC),
            "evicted_ids": evicted_ids,
        })  # fmt: skip
        _set(ack, "__pydantic_fields_set__", _ACK_FIELDS)
        _set(ack, "__pydantic_extra__", None)
        _set(ack, "__pydantic_private__", None)
        return ack


_set = object.__setattr__
_ACK_FIELDS = frozenset(CommitAck.model_fields)


class Pointer(_Model):
    """The CURRENT pointer of a namespace."""

    namespace: str
    current_id: str
    fallback_id: str | None
    revision: int
    digest: str
    previous_digest: str | None
    updated_at: datetime


class PointerMove(_Model):
    """One row of a namespace's pointer history."""

    namespace: str
    revision: int
    current_id: str
    fallback_id: str | None
    previous_digest: str | None
    digest: str
    reason: str
    at: datetime


class NamespaceInfo(_Model):
    """A namespace and its CURRENT pointer."""

    name: str
    current_id: str
    fallback_id: str | None
    generation: int
    revision: int
    checkpoint_count: int
    updated_at: datetime


class Rejection(_Model):
    """Why one checkpoint was not usable during a fallback walk: damage (``corrupt...``),
    the validator, or a check the reader gave (``lineage_mismatch``,
    ``schema_pin_too_new``)."""

    checkpoint_id: str
    code: str
    detail: str
    entry: str | None = None
    fields: list[str] | None = Field(
        default=None, description="lineage_mismatch: the metadata fields that did not match"
    )


class RevisionMismatch(_Model):
    """A loaded checkpoint was written by another code revision than the reader's (both
    known). A note, never a refusal: the state may need the reader's attention."""

    checkpoint_id: str
    written_by: str = Field(description="the code_revision recorded with the checkpoint")
    reading: str = Field(description="the code_revision of the handle that loaded it")


class FallbackReceipt(_Model):
    """What a ``load(..., fallback=True)`` did: requested, selected and rejected."""

    kind: Literal["fallback"] = "fallback"
    receipt_id: int | None = Field(description="row in the receipt table; None if not stored")
    namespace: str
    requested_id: str
    selected_id: str | None
    disposition: Literal["exact", "degraded_fallback", "none_usable"]
    rejected: list[Rejection]
    pointer_digest: str
    at: datetime


#: What ``verify`` can find -- its own vocabulary, apart from the error codes of exceptions
#: (``ckptdb.errors``) and the free-text reasons recorded with pointer moves.
FindingCode = Literal[
    "sqlite_integrity",
    "foreign_key",
    "schema_mismatch",
    "unreadable",
    "chunk_corrupt",
    "chunk_missing",
    "blob_corrupt",
    "blob_chunk_list",
    "manifest_mismatch",
    "lineage_generation",
    "entry_corrupt",
    "entry_blob_missing",
    "blob_ref_missing",
    "blob_ref_stray",
    "pointer_mismatch",
    "pointer_missing",
    "history_mismatch",
    "history_chain",
    "history_truncated",
    "receipt_mismatch",
    "key_mismatch",
    "scope_mismatch",
    # contributed by integrations' verify hooks (ckptdb.extension.register_verify_hook);
    # the LangGraph saver's tables:
    "lg_write_mismatch",
    "lg_write_unsealed",
    "lg_write_damaged",
    "lg_row_damaged",
]


class Problem(_Model):
    """One integrity problem found by ``verify``."""

    code: FindingCode
    detail: str
    checkpoint_id: str | None = None
    namespace: str | None = None
    entry: str | None = None
    digest: str | None = None


class VerifyReport(_Model):
    """Result of ``Database.verify``."""

    ok: bool
    quick: bool
    sqlite_integrity: str
    checkpoints_checked: int
    blobs_checked: int
    chunks_checked: int
    bytes_checked: int
    pointers_checked: int
    problems: list[Problem]
    receipt_id: int | None
    #: why no receipt could be stored (e.g. the disk is full); the report itself is whole
    receipt_error: str | None = None
    #: key ids of the key scopes checked without their key: every sealed record's stored
    #: bytes were checked against their sha256, but not opened (pass keys= to open them)
    sealed_only: list[str] = []
    at: datetime


class Receipt(_Model):
    """A stored receipt (fallback, verify, gc, migration, ...)."""

    receipt_id: int
    kind: str
    namespace: str | None
    checkpoint_id: str | None
    at: datetime
    body: dict[str, Any]
    digest: str


class CheckoutResult(_Model):
    """What ``checkout`` wrote. With fallback, ``checkpoint_id`` is what was written and
    ``requested_id`` what was asked for; they differ exactly when ``disposition`` is
    ``degraded_fallback``."""

    checkpoint_id: str
    namespace: str
    target: str
    files: int
    bytes: int
    requested_id: str | None = Field(default=None, description="the checkpoint asked for")
    disposition: Literal["exact", "degraded_fallback"] = Field(
        default="exact", description="degraded_fallback: an older, verified checkpoint was used"
    )
    receipt_id: int | None = Field(
        default=None, description="the fallback receipt, when the checkout fell back"
    )
    rejected: list[Rejection] = Field(
        default_factory=list, description="checkpoints that did not verify, and why"
    )
    revision_mismatch: RevisionMismatch | None = Field(
        default=None, description="set when the checkpoint was written by another code revision"
    )


class NamespaceUsage(_Model):
    """What one namespace holds (the ``namespace_usage`` view): what quotas count."""

    namespace: str
    checkpoints: int = Field(description="stored checkpoints of the namespace")
    logical_bytes: int = Field(
        description="sum of their total sizes (what loads return; what max_bytes counts)"
    )
    stored_bytes: int = Field(
        description="stored bytes of the distinct blobs and chunks they reference, after "
        "compression; content shared with other namespaces counts in each of them"
    )


class Stats(_Model):
    """Sizes and counts of a database file."""

    path: str
    file_bytes: int
    wal_bytes: int
    page_size: int
    page_count: int
    free_pages: int
    schema_version: int
    chunk_size: int
    namespaces: int
    checkpoints: int
    blobs: int
    chunks: int
    logical_bytes: int = Field(description="sum of entry sizes over all stored checkpoints")
    stored_bytes: int = Field(description="bytes of distinct blob content actually stored")
    dedup_ratio: float = Field(description="logical_bytes / stored_bytes (1.0 = no sharing)")
    usage: list[NamespaceUsage] = Field(
        default_factory=list, description="per namespace, by name (the namespace_usage view)"
    )


class PointerConflict(_Model):
    """An import that would have moved a CURRENT pointer sideways (reported, not applied)."""

    namespace: str
    current: str | None
    incoming: str


class TransferReceipt(_Model):
    """What an export or import copied."""

    kind: Literal["export", "import"]
    receipt_id: int | None
    source: str
    destination: str
    namespaces: list[str]
    checkpoints_copied: int
    checkpoints_present: int = Field(description="already there (content-addressed: skipped)")
    blobs_copied: int
    chunks_copied: int
    bytes_copied: int
    pointers_moved: list[str]
    conflicts: list[PointerConflict]


class QueryResult(_Model):
    """Columns and rows of a read-only SQL query."""

    columns: list[str]
    rows: list[list[Any]]


class Pin(_Model):
    """A named reference protecting a checkpoint from GC."""

    name: str
    checkpoint_id: str
    namespace: str
    created_at: datetime
    note: str | None


class GraceHold(_Model):
    """Unreferenced chunks a GC kept because they were touched within its grace period (a
    commit in flight may be staging them; a failed or killed one left them)."""

    chunks: int
    bytes: int = Field(description="their size (raw bytes, like GcReport.bytes_freed)")
    first_free_at: datetime | None = Field(
        description="when the oldest of them is past the grace period (None: no chunk held)"
    )
    all_free_at: datetime | None = Field(
        description="when the newest is: a GC with the same grace after it collects them "
        "all, unless a commit references or stages them again"
    )


class GcReport(_Model):
    """What a GC did (or, with ``dry_run``, would do)."""

    dry_run: bool
    receipt_id: int | None
    policy: dict[str, Any] | None = Field(
        description="the explicit policy, or None when each namespace's stored policy applied"
    )
    namespaces: list[str]
    grace_seconds: float
    checkpoints_examined: int
    checkpoints_kept: int
    checkpoints_deleted: int
    deleted_ids: list[str]
    blobs_deleted: int
    chunks_deleted: int
    bytes_freed: int = Field(description="stored blob/chunk bytes released")
    file_bytes_before: int
    file_bytes_after: int
    pages_reclaimed: int
    history_trimmed: int = Field(description="pointer-history rows removed (keep_history)")
    grace_held: GraceHold = Field(
        description="what the grace period kept: unreferenced chunks touched within it"
    )
    at: datetime


class PruneReport(_Model):
    """What ``drop_namespace`` or ``prune`` deleted (or would delete)."""

    kind: Literal["drop_namespace", "prune"]
    dry_run: bool
    receipt_id: int | None
    namespaces: list[str]
    checkpoints_deleted: int
    deleted_ids: list[str]
    skipped: list[Rejection] = Field(description="matching checkpoints that are protected")
    blobs_deleted: int
    chunks_deleted: int
    bytes_freed: int
    at: datetime


class ImportedItem(_Model):
    """One source checkpoint that became (or already was) a ckptdb checkpoint."""

    source_id: str = Field(description="the checkpoint's id or path in the source store")
    namespace: str
    checkpoint_id: str | None = Field(description="None in a dry run for a new checkpoint")
    created: bool = Field(description="False when it was already imported (idempotent)")


class SkippedItem(_Model):
    """Something in the source that was not imported, and why."""

    source_id: str
    code: str
    detail: str


class ImportReport(_Model):
    """What ``ckptdb import-from`` imported and skipped."""

    kind: str
    source: str
    dry_run: bool
    receipt_id: int | None
    namespaces: list[str]
    imported: list[ImportedItem]
    skipped: list[SkippedItem]
    at: datetime


class MigrationInfo(_Model):
    """One migration: shipped (pending) or applied (with when and by which ckptdb)."""

    migration_set: str
    version: int
    name: str
    checksum: str
    applied_at: datetime | None = None
    ckptdb_version: str | None = None
    sql: str | None = Field(default=None, description="the SQL, in a plan")


class MigrationStatus(_Model):
    """Where a file's schema stands relative to this ckptdb."""

    path: str
    file_version: int
    code_version: int
    up_to_date: bool
    pending: list[MigrationInfo]
    sets: dict[str, int] = Field(description="every migration set in the file -> its version")
    checkpoints_to_move: int = Field(
        0,
        description="checkpoints whose entries are still in the format-2 layout (schema 7"
        " reads them as they are; `migrate up` moves them, in bounded transactions)",
    )


class MigrationResult(_Model):
    """What ``migrate up`` did."""

    path: str
    from_version: int
    to_version: int
    applied: list[MigrationInfo]
    backup_path: str | None
    backup_verified: bool
    receipt_id: int | None
    checkpoints_moved: int = Field(
        0, description="checkpoints whose entries this run moved into the format-3 layout"
    )


class EntryDiff(_Model):
    """One entry that differs between two checkpoints (``a`` is the first, ``b`` the second)."""

    name: str
    change: Literal["added", "removed", "changed"] = Field(
        description="added: only in b; removed: only in a; changed: in both, different"
    )
    size_a: int | None = Field(description="size in a (None when added)")
    size_b: int | None = Field(description="size in b (None when removed)")
    digest_a: str | None
    digest_b: str | None
    content_changed: bool = Field(
        description="False when only the media type or schema pin changed, not the bytes"
    )
    bytes_shared: int = Field(
        description="bytes of b's content also stored in a's (same chunk digests; 0 unless "
        "changed). Large entries are chunked: an entry that changed a little shares the rest"
    )
    media_type_a: str | None = None
    media_type_b: str | None = None
    schema_pin_a: str | None = None
    schema_pin_b: str | None = None


class MetadataDiff(_Model):
    """One top-level metadata key that differs."""

    key: str
    change: Literal["added", "removed", "changed"]
    a: Any = Field(default=None, description="the value in a (absent when added)")
    b: Any = Field(default=None, description="the value in b (absent when removed)")


class CheckpointDiff(_Model):
    """What changed from checkpoint ``a`` to checkpoint ``b`` (``Database.diff(a, b)``)."""

    a: str = Field(description="id of the first checkpoint")
    b: str = Field(description="id of the second checkpoint")
    namespace_a: str
    namespace_b: str
    relation: Literal["same", "ancestor", "descendant", "siblings", "unrelated"] = Field(
        description="how a stands to b: same checkpoint; a is an ancestor of b; a is a "
        "descendant of b; siblings (a common ancestor, neither descends from the other); "
        "unrelated (no common ancestor among the stored lineage)"
    )
    common_ancestor_id: str | None = Field(
        description="the newest checkpoint both lineages share (a or b itself when one "
        "descends from the other; None when unrelated)"
    )
    generations_a: int | None = Field(description="generations from the common ancestor to a")
    generations_b: int | None = Field(description="generations from the common ancestor to b")
    entries: list[EntryDiff] = Field(description="differing entries, by name")
    unchanged: int = Field(description="entries identical in both")
    size_a: int = Field(description="total entry bytes of a")
    size_b: int = Field(description="total entry bytes of b")
    metadata: list[MetadataDiff] = Field(description="differing top-level metadata keys")

    @property
    def empty(self) -> bool:
        """True when the two manifests have the same entries and metadata."""
        return not self.entries and not self.metadata


class LogNode(_Model):
    """One checkpoint of a namespace as ``log`` shows it (``Database.log``)."""

    id: str
    generation: int
    created_at: datetime
    parent_id: str | None
    entry_count: int
    total_size: int
    metadata: dict[str, Any]
    markers: list[Literal["current", "fallback", "pinned"]]
    pins: list[str] = Field(description="names of the pins on this checkpoint")
    on_lineage: bool = Field(description="True when CURRENT descends from it (or it is CURRENT)")
    column: int = Field(description="its lane in the graph drawing (0 = leftmost)")
    graph: list[str] = Field(
        description="the drawing: connector lines first (branches joining), the node's line last"
    )


class LineageLog(_Model):
    """The checkpoints of a namespace, newest first, with a git-log-like graph."""

    namespace: str
    current_id: str
    fallback_id: str | None
    revision: int
    all: bool = Field(
        description="True: every stored checkpoint of the namespace; False: "
        "the lineage of CURRENT and of the fallback"
    )
    nodes: list[LogNode]


class KeyScope(_Model):
    """An encryption key scope (``Database.set_encryption``); never any key material."""

    key_id: str = Field(description="the host's name for the key that wraps the data key")
    prefix: str = Field(description="namespaces whose names start with it are encrypted")
    algorithm: str
    key_generation: int = Field(description="1, plus one per rotate_key")
    seal_metadata: bool = Field(description="checkpoint metadata is sealed too")
    shredded: bool
    namespaces: int = Field(description="namespaces in the scope now")
    created_at: datetime
    rotated_at: datetime | None
    shredded_at: datetime | None


class ShredReport(_Model):
    """What ``Database.shred_key`` removed."""

    key_id: str
    prefix: str
    receipt_id: int | None
    namespaces: list[str] = Field(description="the scope's namespaces, deleted")
    checkpoints_deleted: int
    blobs_deleted: int
    chunks_deleted: int
    wal_truncated: bool = Field(
        description="the WAL was checkpointed and truncated, so no old frame of the scope's "
        "pages is left in it (False when readers held it, or Litestream manages the WAL)"
    )
    at: datetime


class CopyReport(_Model):
    """What ``Database.copy_checkpoints`` copied: every copy shares its source's blobs."""

    namespace: str = Field(description="the namespace the copies went to")
    copies: dict[str, str] = Field(description="source checkpoint id -> id of its copy")
    created: int = Field(
        description="copies stored by this call (the others existed already: same content, "
        "same parent, same id)"
    )
    current_id: str | None = Field(description="CURRENT of the namespace afterwards")
    pointer_revision: int | None = Field(description="the pointer's revision afterwards")
    evicted_ids: list[str] = Field(
        default_factory=list,
        description="checkpoints an evict quota deleted in the same transaction",
    )


class Quota(_Model):
    """A stored quota: a limit on what the namespaces under ``prefix`` may hold, checked by
    every commit under it inside the commit transaction (``Database.set_quota``)."""

    prefix: str = Field(description="namespaces whose names start with this ('' = all)")
    applies_to: Literal["each", "total"] = Field(
        description="each: every namespace under the prefix on its own; total: all of them together"
    )
    max_checkpoints: int | None = Field(description="stored checkpoints allowed (None: no limit)")
    max_bytes: int | None = Field(
        description="logical bytes allowed (sum of checkpoint total sizes; None: no limit)"
    )
    on_exceed: Literal["refuse", "evict"] = Field(
        description="refuse: the commit fails with quota_exceeded; evict: the oldest "
        "unprotected checkpoints under the quota are deleted until the commit fits"
    )
    updated_at: datetime
