"""The one package that talks to apsw (and, in :mod:`.postgres`, to psycopg).

Everything SQLite-specific about *how* ckptdb talks to the file lives here; modules above
issue SQL through :class:`Connection` and never see an apsw object or exception. The
PostgreSQL engine's connection lives in the subpackage :mod:`.postgres`, imported only when
a PostgreSQL URL is opened (docs/postgresql.md).

| module | its one job |
| --- | --- |
| :mod:`.statements` | running statements and incremental blob I/O, errors translated |
| :mod:`.driver` | :class:`Connection`: transactions, WAL maintenance, the authorizer slot |
| :mod:`.translate` | apsw exceptions turned into ckptdb errors |
| :mod:`.busy` | waiting for another connection's lock (the polling busy handler) |
| :mod:`.opening` | opening a file with ckptdb's settings; a new file's fixed settings |
| :mod:`.probe` | read-only connections on files not trusted yet |
| :mod:`.sandbox` | operator SQL: read-only, refused before it runs |
| :mod:`.confinement` | integration sessions: kept off ckptdb's own tables |
| :mod:`.walhook` | who may checkpoint the WAL of a replicated file |
| :mod:`.checkpointer` | WAL checkpoints on a thread and connection of their own |
| :mod:`.faults` | a fault-injecting VFS for the reliability harness |
| :mod:`.slow_sync` | a VFS whose fsync is a fixed sleep, for benchmarks |
| :mod:`.litestream_vfs` | Litestream's read-replica VFS |
| :mod:`.postgres` | the PostgreSQL engine's connection (psycopg) |
"""

from __future__ import annotations

from .busy import DEFAULT_BUSY_TIMEOUT, LockWaits
from .confinement import IntegrationSession
from .driver import Connection, Synchronous
from .opening import (
    APPLICATION_ID,
    CACHE_SIZE_KIB,
    DEFAULT_PAGE_SIZE,
    JOURNAL_SIZE_LIMIT,
    ensure_wal,
    initialize_new_file,
    open_connection,
    open_memory,
)
from .probe import open_foreign_readonly, open_probe
from .sandbox import PreparedStatement
from .statements import Params, Row, SqlValue
from .translate import SqlFailure
from .walhook import LITESTREAM_TABLES

__all__ = [
    "APPLICATION_ID",
    "CACHE_SIZE_KIB",
    "DEFAULT_BUSY_TIMEOUT",
    "DEFAULT_PAGE_SIZE",
    "JOURNAL_SIZE_LIMIT",
    "LITESTREAM_TABLES",
    "Connection",
    "IntegrationSession",
    "LockWaits",
    "Params",
    "PreparedStatement",
    "Row",
    "SqlFailure",
    "SqlValue",
    "Synchronous",
    "ensure_wal",
    "initialize_new_file",
    "open_connection",
    "open_foreign_readonly",
    "open_memory",
    "open_probe",
]
