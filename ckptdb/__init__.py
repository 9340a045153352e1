"""ckptdb: a single-file, transactional checkpoint database.

>>> import ckptdb
>>> with ckptdb.open("agent.ckpt") as db:                       # doctest: +SKIP
...     ack = db.commit("brain-1", {"state.json": b"{}"}, metadata={"turn": 1})
...     db.current("brain-1").read("state.json")
"""

from __future__ import annotations

__version__ = "0.8.6"

from . import errors
from .database import Database, open
from .errors import (
    BusyTimeoutError,
    CheckpointNotFoundError,
    CkptdbError,
    CommitOutcomeUnknownError,
    ConflictError,
    CorruptionError,
    DatabaseFileError,
    EntryNotFoundError,
    InvalidInputError,
    LineageMismatchError,
    LoadRefusedError,
    LoadTooLargeError,
    NamespaceNotFoundError,
    NotFoundError,
    NoUsableCheckpointError,
    QuotaExceededError,
    SchemaError,
    SchemaPinTooNewError,
)
from .extension import Session
from .models import (
    CheckpointInfo,
    CommitAck,
    EntryInfo,
    FallbackReceipt,
    GcReport,
    NamespaceInfo,
    Pin,
    Pointer,
    PointerMove,
    Problem,
    PruneReport,
    Quota,
    Receipt,
    RevisionMismatch,
    VerifyReport,
)
from .ops.checkpoint import Checkpoint
from .ops.load import LoadResult
from .replication import open_replica, replicate, restore
from .retention import KeepBest, RetentionPolicy
from .types import UNSET, BlobRef, Entry

__all__ = [
    "UNSET",
    "BlobRef",
    "BusyTimeoutError",
    "Checkpoint",
    "CheckpointInfo",
    "CheckpointNotFoundError",
    "CkptdbError",
    "CommitAck",
    "CommitOutcomeUnknownError",
    "ConflictError",
    "CorruptionError",
    "Database",
    "DatabaseFileError",
    "Entry",
    "EntryInfo",
    "EntryNotFoundError",
    "FallbackReceipt",
    "GcReport",
    "InvalidInputError",
    "KeepBest",
    "LineageMismatchError",
    "LoadRefusedError",
    "LoadResult",
    "LoadTooLargeError",
    "NamespaceInfo",
    "NamespaceNotFoundError",
    "NoUsableCheckpointError",
    "NotFoundError",
    "Pin",
    "Pointer",
    "PointerMove",
    "Problem",
    "PruneReport",
    "Quota",
    "QuotaExceededError",
    "Receipt",
    "RetentionPolicy",
    "RevisionMismatch",
    "SchemaError",
    "SchemaPinTooNewError",
    "Session",
    "VerifyReport",
    "__version__",
    "errors",
    "open",
    "open_replica",
    "replicate",
    "restore",
]
