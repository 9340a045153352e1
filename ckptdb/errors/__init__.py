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

from ._base import (
    AdvisedError,
    BlobMissingError,
    BusyTimeoutError,
    CheckpointNotFoundError,
    ChunkMissingError,
    CkptdbError,
    ClosedError,
    CommitOutcomeUnknownError,
    ConflictError,
    ConstraintViolationError,
    CorruptionError,
    DatabaseFileError,
    DiskFullError,
    EngineUnsupportedError,
    EntryNotFoundError,
    IntegrationWriteRefusedError,
    InvalidEntryError,
    InvalidExportError,
    InvalidInputError,
    InvalidMetadataError,
    InvalidNameError,
    InvalidNamespaceError,
    InvalidPolicyError,
    InvalidQueryError,
    InvalidReferenceError,
    LabelTakenError,
    MigrationChecksumError,
    MigrationFailedError,
    MigrationHistoryError,
    MigrationPendingError,
    MultipleStatementsError,
    NamespaceNotFoundError,
    NotADatabaseError,
    NotCkptdbError,
    NotFoundError,
    NoUsableCheckpointError,
    ProtectedError,
    QueryInterruptedError,
    QueryParameterError,
    QueryTimeoutError,
    ReadOnlyError,
    SchemaError,
    SchemaMismatchError,
    SchemaTooNewError,
    SourceError,
    SourceTimeoutError,
    SourceTooNewError,
    SqlError,
    StorageError,
    TruncatedDatabaseError,
    UnsafePathError,
    ValidatorRejectedError,
)
from .keys import (
    EncryptedScopeError,
    InvalidKeyError,
    InvalidLocationError,
    InvalidStoreKeyError,
    KeyMismatchError,
    KeyShreddedError,
    KeyUnavailableError,
    LocationCorruptError,
    LocationNotFoundError,
    ScopeChangedError,
    ScopeConflictError,
)
from .loading import (
    FieldMismatch,
    InvalidLoadCheckError,
    InvalidQuotaError,
    LineageMismatchError,
    LoadRefusedError,
    LoadTooLargeError,
    QuotaExceededError,
    SchemaPinTooNewError,
)
from .replication import (
    ReplicaDamagedError,
    ReplicaNotFoundError,
    ReplicationError,
    ReplicationTimeoutError,
    ReplicatorRunningError,
    ReplicatorUnavailableError,
    RestoreTargetExistsError,
    RestoreTargetInUseError,
    UnsupportedFeatureError,
)

__all__ = [
    "AdvisedError",
    "BlobMissingError",
    "BusyTimeoutError",
    "CheckpointNotFoundError",
    "ChunkMissingError",
    "CkptdbError",
    "ClosedError",
    "CommitOutcomeUnknownError",
    "ConflictError",
    "ConstraintViolationError",
    "CorruptionError",
    "DatabaseFileError",
    "DiskFullError",
    "EncryptedScopeError",
    "EngineUnsupportedError",
    "EntryNotFoundError",
    "FieldMismatch",
    "IntegrationWriteRefusedError",
    "InvalidEntryError",
    "InvalidExportError",
    "InvalidInputError",
    "InvalidKeyError",
    "InvalidLoadCheckError",
    "InvalidLocationError",
    "InvalidMetadataError",
    "InvalidNameError",
    "InvalidNamespaceError",
    "InvalidPolicyError",
    "InvalidQueryError",
    "InvalidQuotaError",
    "InvalidReferenceError",
    "InvalidStoreKeyError",
    "KeyMismatchError",
    "KeyShreddedError",
    "KeyUnavailableError",
    "LabelTakenError",
    "LineageMismatchError",
    "LoadRefusedError",
    "LoadTooLargeError",
    "LocationCorruptError",
    "LocationNotFoundError",
    "MigrationChecksumError",
    "MigrationFailedError",
    "MigrationHistoryError",
    "MigrationPendingError",
    "MultipleStatementsError",
    "NamespaceNotFoundError",
    "NoUsableCheckpointError",
    "NotADatabaseError",
    "NotCkptdbError",
    "NotFoundError",
    "ProtectedError",
    "QueryInterruptedError",
    "QueryParameterError",
    "QueryTimeoutError",
    "QuotaExceededError",
    "ReadOnlyError",
    "ReplicaDamagedError",
    "ReplicaNotFoundError",
    "ReplicationError",
    "ReplicationTimeoutError",
    "ReplicatorRunningError",
    "ReplicatorUnavailableError",
    "RestoreTargetExistsError",
    "RestoreTargetInUseError",
    "SchemaError",
    "SchemaMismatchError",
    "SchemaPinTooNewError",
    "SchemaTooNewError",
    "ScopeChangedError",
    "ScopeConflictError",
    "SourceError",
    "SourceTimeoutError",
    "SourceTooNewError",
    "SqlError",
    "StorageError",
    "TruncatedDatabaseError",
    "UnsafePathError",
    "UnsupportedFeatureError",
    "ValidatorRejectedError",
    "exit_statuses",
]


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
