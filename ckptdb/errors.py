"""The ckptdb error hierarchy.

Every error a caller can see is a :class:`CkptdbError` with a stable ``code`` (a short
snake_case string that never changes once released), a message that says what happened and
what to do, and ``retryable`` telling whether the same call may succeed if repeated.
Programs should branch on ``code`` or on the class, never on the message text.

Each class also carries ``exit_status``: the status the ``ckptdb`` command exits with when
it reports that error. A subclass inherits its base's status unless it states its own, so a
new error lands in its family's status (1, "a bug", for a direct subclass of
:class:`CkptdbError`) without being listed anywhere else. docs/cli.md shows the table of
every status with its meaning and its codes, generated from these classes
(:func:`exit_statuses`) by tools/gen_cli_docs.py; the statuses that are no error (0
success, 2 usage, 11 import-from skipped items, 13 succeeded degraded) are the command's
own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar


class CkptdbError(Exception):
    """Base class of every error raised by ckptdb."""

    code: ClassVar[str] = "ckptdb_error"
    retryable: ClassVar[bool] = False
    #: The ``ckptdb`` command's exit status for this error; 1 says "a bug: please report it".
    exit_status: ClassVar[int] = 1

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: ``code``, ``message``, ``retryable`` and details."""
        out: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
        }
        for key, value in self.details.items():
            if value is None or isinstance(value, str | int | float | bool):
                out[key] = value
            elif isinstance(value, list | tuple):
                out[key] = [v if isinstance(v, str | int | float | bool) else str(v) for v in value]
            else:
                out[key] = str(value)
        return out


# --- bad input -------------------------------------------------------------------------


class InvalidInputError(CkptdbError):
    """An argument was rejected before anything was written."""

    code = "invalid_input"
    exit_status = 7


class InvalidNameError(InvalidInputError):
    """An entry name is not a safe POSIX relative path."""

    code = "invalid_entry_name"


class InvalidNamespaceError(InvalidInputError):
    """A namespace name is empty, too long or contains forbidden characters."""

    code = "invalid_namespace"


class InvalidMetadataError(InvalidInputError):
    """Metadata is not a JSON object of bounded size."""

    code = "invalid_metadata"


class InvalidEntryError(InvalidInputError):
    """An entry value cannot be read (wrong type, not a regular file, a symlink, ...)."""

    code = "invalid_entry"


class InvalidReferenceError(InvalidInputError):
    """A checkpoint reference (id, prefix, ``ns@current``, ``ns~N``) is malformed or ambiguous."""

    code = "invalid_reference"


class InvalidQueryError(InvalidInputError):
    """A read-only SQL query given to ``query`` / ``ckptdb sql`` is not valid SQL."""

    code = "invalid_query"


class UnsafePathError(InvalidInputError):
    """A filesystem path would follow a symlink or escape its target directory."""

    code = "unsafe_path"


class SourceError(InvalidInputError):
    """An import source cannot be imported as a whole (wrong layout, unreadable pointer,
    inconsistent or hostile content). Nothing was imported."""

    code = "invalid_source"


class SourceTooNewError(SourceError):
    """An import source was written by a newer version of its tool than ckptdb understands."""

    code = "source_too_new"


# --- lookups ---------------------------------------------------------------------------


class NotFoundError(CkptdbError):
    """Something named by the caller does not exist."""

    code = "not_found"
    exit_status = 3


class CheckpointNotFoundError(NotFoundError):
    """No checkpoint has the given id (it never existed or was garbage-collected)."""

    code = "checkpoint_not_found"


class EntryNotFoundError(NotFoundError):
    """The checkpoint has no entry with the given name."""

    code = "entry_not_found"


class NamespaceNotFoundError(NotFoundError):
    """The namespace has no CURRENT checkpoint."""

    code = "namespace_not_found"


# --- concurrency and publishing -----------------------------------------------------------


class ConflictError(CkptdbError):
    """Compare-and-swap failed: CURRENT is not what the caller expected. Nothing was written."""

    code = "conflict"
    exit_status = 4

    def __init__(self, message: str, *, expected: str | None, actual: str | None, **kw: Any):
        super().__init__(message, expected=expected, actual=actual, **kw)
        self.expected = expected
        self.actual = actual


class BlobMissingError(CkptdbError):
    """A commit referenced stored content (BlobRef) that is not there (any more): GC may
    have collected it. Nothing was written; commit the bytes instead."""

    code = "blob_missing"
    exit_status = 8
    retryable = True


class ProtectedError(CkptdbError):
    """The operation would delete a pinned checkpoint (unpin it, or ask to, first) or a
    namespace's CURRENT or fallback (which nothing may delete)."""

    code = "protected"
    exit_status = 4


class ChunkMissingError(CkptdbError):
    """A staged chunk vanished before the commit referenced it (GC reclaimed it); retry."""

    code = "chunk_missing"
    exit_status = 8
    retryable = True


class CommitOutcomeUnknownError(CkptdbError):
    """COMMIT itself failed: the checkpoint may or may not be durable.

    No acknowledgement was given. Calling ``commit`` again with the same arguments is safe
    and converges: it returns the same checkpoint id whether or not the first attempt landed.
    """

    code = "commit_outcome_unknown"
    exit_status = 8
    retryable = True


class BusyTimeoutError(CkptdbError):
    """Another connection held the write lock longer than the busy timeout."""

    code = "busy_timeout"
    exit_status = 8
    retryable = True


class StorageError(CkptdbError):
    """The operating system reported an I/O error; the transaction was rolled back."""

    code = "io_error"
    exit_status = 8
    retryable = True


class DiskFullError(StorageError):
    """The disk (or a quota) is full; the transaction was rolled back. Not retryable until
    space is freed (then a retry converges as usual)."""

    code = "disk_full"
    retryable = False


class ReadOnlyError(CkptdbError):
    """A write was attempted on a database opened read-only."""

    code = "read_only"
    exit_status = 9


class IntegrationWriteRefusedError(CkptdbError):
    """An integration session tried what only ckptdb may do: write a core table, change
    the schema, attach a database, control the transaction or set a pragma. Refused
    before the statement ran: nothing was written and the transaction is still open."""

    code = "integration_write_refused"


class ClosedError(CkptdbError):
    """The database handle was closed."""

    code = "closed"


# --- integrity ------------------------------------------------------------------------


class CorruptionError(CkptdbError):
    """Stored bytes or rows do not match their digests. No wrong bytes were returned."""

    code = "corrupt"
    exit_status = 5

    def __init__(
        self,
        message: str,
        *,
        checkpoint_id: str | None = None,
        entry: str | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(message, checkpoint_id=checkpoint_id, entry=entry, **kw)
        self.checkpoint_id = checkpoint_id
        self.entry = entry


class ValidatorRejectedError(CkptdbError):
    """The host-supplied validator rejected a checkpoint."""

    code = "rejected_by_validator"
    exit_status = 5

    def __init__(self, message: str, *, checkpoint_id: str, **kw: Any) -> None:
        super().__init__(message, checkpoint_id=checkpoint_id, **kw)
        self.checkpoint_id = checkpoint_id


class NoUsableCheckpointError(CkptdbError):
    """Neither CURRENT nor any ancestor along its lineage verified."""

    code = "no_usable_checkpoint"
    exit_status = 5


# --- the file itself and its schema ----------------------------------------------------


class DatabaseFileError(CkptdbError):
    """The file cannot be used as a ckptdb database. It was not modified."""

    code = "bad_database_file"
    exit_status = 6


class NotADatabaseError(DatabaseFileError):
    """The file is not an SQLite database at all."""

    code = "not_a_database"


class NotCkptdbError(DatabaseFileError):
    """The file is an SQLite database that belongs to some other application."""

    code = "not_ckptdb"


class TruncatedDatabaseError(DatabaseFileError):
    """The file is shorter than its own header says: it was truncated or partly copied."""

    code = "truncated_database"


class SchemaError(CkptdbError):
    """The database schema and this version of ckptdb do not agree."""

    code = "schema_error"
    exit_status = 6


class SchemaTooNewError(SchemaError):
    """The database was written by a newer ckptdb; upgrade ckptdb to open it."""

    code = "schema_too_new"


class MigrationChecksumError(SchemaError):
    """An applied migration differs from the one this ckptdb ships (it was edited)."""

    code = "migration_checksum_mismatch"


class MigrationHistoryError(SchemaError):
    """The recorded migration history has a gap or names a migration this ckptdb lacks."""

    code = "migration_history_invalid"


class MigrationPendingError(SchemaError):
    """The database needs migrations and the caller asked not to apply them."""

    code = "migration_pending"


class MigrationFailedError(SchemaError):
    """A migration failed; the database stays at the last completed version."""

    code = "migration_failed"


class ConstraintViolationError(CkptdbError):
    """A schema constraint fired: a ckptdb bug or a damaged database. Run ``ckptdb verify``."""

    code = "constraint_violation"
    exit_status = 5


class SqlError(CkptdbError):
    """SQLite rejected a statement (e.g. a query given to ``Database.query``)."""

    code = "sql_error"
    exit_status = 7


class InvalidPolicyError(InvalidInputError):
    """A retention policy with a rule that is out of range or unknown."""

    code = "invalid_policy"


class SchemaMismatchError(SchemaError):
    """The file's schema is not what its recorded migrations produce (an object added,
    removed or changed outside ckptdb, any trigger): it is refused before any write."""

    code = "schema_mismatch"


# --- files ckptdb did not write: hostile sources, operator queries (issue 12) ------------
# Kept in one block so the codes added for issue 12 are easy to find and review.


class MultipleStatementsError(InvalidQueryError):
    """``query`` / ``ckptdb sql`` got more than one statement; nothing ran."""

    code = "multiple_statements"


class QueryParameterError(InvalidQueryError):
    """A query parameter (``:name`` / ``?``) is missing, unknown or of a type SQLite cannot
    bind; nothing ran."""

    code = "invalid_query_parameter"


class QueryTimeoutError(CkptdbError):
    """A read-only query ran longer than its timeout and was interrupted (nothing was
    changed). Narrow the query or give a larger timeout."""

    code = "query_timeout"
    exit_status = 12


class QueryInterruptedError(CkptdbError):
    """A read-only query was interrupted by the user (Ctrl-C); nothing was changed."""

    code = "query_interrupted"
    exit_status = 130


class InvalidExportError(SourceError):
    """A ckptdb file given to ``import`` does not hold what it claims (a pointer naming a
    checkpoint of another namespace, a broken pointer digest chain, a row out of range).
    Nothing was imported: the destination is unchanged."""

    code = "invalid_export"


class SourceTimeoutError(SourceError):
    """Reading an import source took longer than its deadline (a hostile source can make a
    read endless); the read was interrupted and nothing more was imported."""

    code = "source_timeout"


# --- replication (Litestream; ckptdb.replicate) ------------------------------------------


class ReplicationError(CkptdbError):
    """Replication through Litestream failed or was refused."""

    code = "replication_error"
    exit_status = 10


class ReplicatorUnavailableError(ReplicationError):
    """Litestream (the binary or the litestream-vfs extension) is missing or will not run;
    install ``ckptdb[replicate]``."""

    code = "replicator_unavailable"


class ReplicatorRunningError(ReplicationError):
    """Another replicator already runs for this database file; only one may."""

    code = "replicator_running"


class ReplicationTimeoutError(ReplicationError):
    """The replica did not hold the checkpoint before the timeout; it is durable locally
    but not yet known to be off the machine. Waiting again is safe."""

    code = "replication_timeout"
    retryable = True


class RestoreTargetExistsError(ReplicationError):
    """The restore destination exists; pass ``force=True`` to replace it."""

    code = "restore_target_exists"


class RestoreTargetInUseError(ReplicationError):
    """The restore destination is open in a process (a reader, a writer or a replicator):
    replacing it would leave that process working on a file nobody can see any more, and
    everything it committed afterwards would be lost. Nothing was changed; stop what uses
    it, then restore again."""

    code = "restore_target_in_use"
    retryable = True


class ReplicaNotFoundError(NotFoundError):
    """The replica URL holds no replica (nothing was replicated there, or the URL is wrong),
    or it holds no position matching the requested checkpoint or time."""

    code = "replica_not_found"


class ReplicaDamagedError(CorruptionError):
    """The replica could not be restored or read back intact (missing or damaged files,
    failed verification). The destination was not touched."""

    code = "replica_damaged"


class UnsupportedFeatureError(SchemaError):
    """The file uses a storage feature this ckptdb does not have (written by a newer one)."""

    code = "unsupported_feature"


# --- keys and encryption ---------------------------------------------------------------
# Messages and details of these errors name key ids, never key material.


class InvalidKeyError(InvalidInputError):
    """A key given to ckptdb is not 32 bytes, or a key provider returned something else."""

    code = "invalid_key"
    exit_status = 14


class KeyUnavailableError(CkptdbError):
    """The key of a key scope was not given to this handle: that scope cannot be read or
    written (every other scope works). Open with ``keys={key_id: key}``."""

    code = "key_unavailable"
    exit_status = 14


class KeyMismatchError(CkptdbError):
    """The key given for a key id does not open the scope's wrapped data key (a wrong key,
    the key from before a rotation, or an altered wrapped key). Nothing was written."""

    code = "key_mismatch"
    exit_status = 14


class KeyShreddedError(CkptdbError):
    """The key scope was shredded: its data is gone for good and its prefix takes no new
    namespaces."""

    code = "key_shredded"
    exit_status = 14


class ScopeConflictError(InvalidInputError):
    """A key scope cannot be created as asked: its prefix overlaps another scope's, its key
    id is taken, or namespaces already exist under the prefix (they hold plaintext)."""

    code = "scope_conflict"


class ScopeChangedError(CkptdbError):
    """Encryption settings of a namespace changed while a commit was being prepared (another
    handle created a key scope): nothing was written; commit again."""

    code = "scope_changed"
    retryable = True


class EncryptedScopeError(InvalidInputError):
    """An operation would carry an encrypted namespace's content out of its key scope in
    plaintext (export, copy to another file): refused."""

    code = "encrypted_scope"


# --- the host store seam (ckptdb.host_store) ---------------------------------------------


class InvalidStoreKeyError(InvalidInputError):
    """A host store's ``put`` got a key it cannot take as a label: a key is a non-empty str of
    at most 1024 characters with no NUL and no lone surrogate. Nothing was stored."""

    code = "invalid_store_key"


class InvalidLocationError(InvalidInputError):
    """A host store's ``get`` got something its ``put`` could never have returned (not a str,
    malformed, or naming another store's objects). Pass only locations this store returned."""

    code = "invalid_location"


class LocationNotFoundError(NotFoundError):
    """A host store location names nothing the store holds: it was never written there, or
    it was deleted (or garbage-collected) since."""

    code = "location_not_found"


class LocationCorruptError(CorruptionError):
    """The bytes stored at a host store location no longer match their digest; none were
    returned. Put the bytes again from their source, if there is one."""

    code = "location_corrupt"


# --- the reader's checks at load (issue 14, section 3) -----------------------------------
# A reader states what it needs of the checkpoint it restores: its lineage (metadata
# fields), the entry schema versions it can read, a size bound. A checkpoint that is intact
# but does not satisfy them is refused with one of these (never with CorruptionError).


class InvalidLoadCheckError(InvalidInputError):
    """A check given to ``load`` / ``checkout`` (``expect``, ``accept_schemas``,
    ``max_bytes``) is malformed; nothing was read."""

    code = "invalid_load_check"


@dataclass(frozen=True)
class FieldMismatch:
    """One metadata field whose value is not the one the reader expected.

    ``expected`` and ``found`` are canonical JSON texts (``'"r7"'``, ``'3'``); ``found`` is
    None when the checkpoint's metadata has no such field."""

    field: str
    expected: str
    found: str | None

    def describe(self, limit: int = 120) -> str:
        """``field 'run_id': expected "r7", found "r6"`` (long values shortened)."""
        found = "missing" if self.found is None else _shorten(self.found, limit)
        return f"field {self.field!r}: expected {_shorten(self.expected, limit)}, found {found}"


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class LoadRefusedError(CkptdbError):
    """An intact checkpoint does not satisfy a check the reader gave (its lineage, the
    schema versions it can read, a size bound). Nothing was returned or written."""

    code = "load_refused"
    exit_status = 15

    def __init__(self, message: str, *, checkpoint_id: str, **kw: Any) -> None:
        super().__init__(message, checkpoint_id=checkpoint_id, **kw)
        self.checkpoint_id = checkpoint_id


class LineageMismatchError(LoadRefusedError):
    """The checkpoint's metadata does not match ``expect``: it belongs to another run,
    plan or state than the caller's. ``mismatches`` names each field, expected and found."""

    code = "lineage_mismatch"

    def __init__(
        self,
        message: str,
        *,
        checkpoint_id: str,
        mismatches: Sequence[FieldMismatch],
        **kw: Any,
    ) -> None:
        super().__init__(
            message, checkpoint_id=checkpoint_id, fields=[m.field for m in mismatches], **kw
        )
        self.mismatches: tuple[FieldMismatch, ...] = tuple(mismatches)

    @property
    def fields(self) -> list[str]:
        """Names of the mismatching fields, sorted."""
        return [m.field for m in self.mismatches]

    def to_dict(self) -> dict[str, Any]:
        """As :meth:`CkptdbError.to_dict`, plus ``mismatches``: ``field``, ``expected``,
        ``found`` (canonical JSON text; None when missing) for each field."""
        out = super().to_dict()
        out["mismatches"] = [
            {"field": m.field, "expected": m.expected, "found": m.found} for m in self.mismatches
        ]
        return out


class SchemaPinTooNewError(LoadRefusedError):
    """An entry is pinned to a newer version of a schema than the reader accepts
    (``accept_schemas``): code that reads version N must not mis-read version N+1."""

    code = "schema_pin_too_new"

    def __init__(
        self,
        message: str,
        *,
        checkpoint_id: str,
        entry: str,
        pin: str,
        schema: str,
        version: int,
        accepted: int,
        **kw: Any,
    ) -> None:
        super().__init__(
            message,
            checkpoint_id=checkpoint_id,
            entry=entry,
            pin=pin,
            schema=schema,
            version=version,
            accepted=accepted,
            **kw,
        )
        self.entry = entry
        self.pin = pin
        self.schema = schema
        self.version = version
        self.accepted = accepted


class LoadTooLargeError(LoadRefusedError):
    """The checkpoint holds more bytes than ``max_bytes`` allows; refused before any of
    its bytes was read."""

    code = "load_too_large"

    def __init__(
        self, message: str, *, checkpoint_id: str, size: int, max_bytes: int, **kw: Any
    ) -> None:
        super().__init__(message, checkpoint_id=checkpoint_id, size=size, max_bytes=max_bytes, **kw)
        self.size = size
        self.max_bytes = max_bytes


# --- quotas (issue 14) -------------------------------------------------------------------


class InvalidQuotaError(InvalidInputError):
    """A quota given to ``set_quota`` / ``clear_quota`` (prefix, limits, ``applies_to``,
    ``on_exceed``) is malformed or out of range. Nothing was written."""

    code = "invalid_quota"


class QuotaExceededError(CkptdbError):
    """A commit would have taken a namespace (or all the namespaces under a prefix) past a
    stored quota: refused, and nothing of that commit was written (for an ``evict`` quota:
    not even an eviction, because evicting every unprotected checkpoint would not have made
    room). The details name the quota, the limit and the usage the commit would have
    reached. Not retryable as it is: raise or clear the quota, or free room first."""

    code = "quota_exceeded"
    exit_status = 16


def exit_statuses() -> dict[str, int]:
    """The ``ckptdb`` command's exit status for every error code: the classes defined here
    and every subclass imported so far (the storage codecs', an integration's)."""
    statuses: dict[str, int] = {}
    todo: list[type[CkptdbError]] = [CkptdbError]
    while todo:
        cls = todo.pop()
        statuses[cls.code] = cls.exit_status
        todo.extend(cls.__subclasses__())
    return statuses
