"""The core of the error hierarchy: the base class and the families every layer raises."""

from __future__ import annotations

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


class AdvisedError(CkptdbError):
    """An error whose message is what happened (``situation``), then what a Python caller
    can do about it (the class's ``advice``: an argument of ``ckptdb.open``). A front end
    with means of its own -- the ``ckptdb`` command's options -- states its own advice
    instead, with :meth:`advised`."""

    #: what a Python caller can do about it: the end of the message
    advice: ClassVar[str] = ""

    def __init__(self, situation: str, **details: Any) -> None:
        super().__init__(f"{situation}; {self.advice}", **details)
        self.situation = situation

    def advised(self, advice: str) -> str:
        """The message with ``advice`` in place of the advice for a Python caller."""
        return f"{self.situation}; {advice}"


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


class LabelTakenError(ConflictError):
    """A commit's ``label`` already names another checkpoint of the namespace (a label
    names one checkpoint, forever), or the commit's content is stored already under
    another label. Nothing was written."""

    code = "label_taken"

    def __init__(self, message: str, *, label: str, checkpoint_id: str | None, **kw: Any):
        super().__init__(message, expected=None, actual=checkpoint_id, label=label, **kw)
        self.label = label


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


class BusyTimeoutError(AdvisedError):
    """Another connection held the write lock longer than the busy timeout. The message
    says how long this one waited and, where the operating system tells (Linux), which
    process held the lock."""

    code = "busy_timeout"
    exit_status = 8
    retryable = True
    advice = "retry, or open the database with a longer busy_timeout= (seconds; None: no limit)"


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


class EngineUnsupportedError(CkptdbError):
    """The operation is not available on this database's engine yet (a PostgreSQL database
    serves part of the API in this release: docs/postgresql.md lists which). Refused before
    anything was written."""

    code = "engine_unsupported"
    exit_status = 6


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
