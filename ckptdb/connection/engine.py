"""What the store needs of a connection, on either engine.

:class:`~ckptdb.connection.driver.Connection` (SQLite, apsw) and
:class:`~ckptdb.connection.postgres.PgConnection` (PostgreSQL, psycopg) both provide it. A
store function that runs on both engines takes an :class:`EngineConnection`; one that needs
SQLite's own features (pragmas, incremental blob I/O, ``sqlite_schema``) keeps taking a
``Connection`` until it is ported (docs/postgresql.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from .. import errors
from .busy import LockWaits
from .driver import Connection
from .statements import Params, Row


class EngineConnection(Protocol):
    """Statements and what they run against (see the module docstring)."""

    #: how messages name the database: a file's path, or a URL without its password
    path: str
    #: True when the connection cannot write
    readonly: bool
    #: called right after each write transaction began (the handle checks its caches there)
    on_write_begin: Callable[[], None] | None
    #: how often and how long this connection waited for a lock another one held
    lock_waits: LockWaits

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``: which SQL spelling the engine takes where the
        two differ."""
        ...

    @property
    def lost(self) -> bool:
        """True when the connection to the database is gone (a server's session ended):
        every statement would fail, and the handle opens a new one before its next use."""
        ...

    @property
    def in_transaction(self) -> bool:
        """True while a transaction of this connection is open."""
        ...

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement and return all its rows."""
        ...

    def execute_script(self, sql: str) -> None:
        """Run every statement of a script (no parameters)."""
        ...

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement once per parameter row."""
        ...

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row of a query, or None."""
        ...

    def scalar(self, sql: str, params: Params = ()) -> Any:
        """The first column of the first row, or None."""
        ...

    def iterate(self, sql: str, params: Params = ()) -> Iterator[Row]:
        """Stream the rows of a large query."""
        ...

    def changes(self) -> int:
        """Rows changed by the most recent INSERT, UPDATE or DELETE."""
        ...

    def lock(self, name: str) -> None:
        """Serialize with other writers that lock ``name``, until this transaction ends."""
        ...

    def try_lock(self, name: str) -> bool:
        """:meth:`lock` without waiting: False when another transaction holds ``name``."""
        ...

    def insert_returning(self, sql: str, params: Params, key: str) -> int:
        """Run one ``INSERT`` of a single row and return the ``key`` column the engine gave
        it (SQLite: the rowid; PostgreSQL: its identity column, by ``RETURNING``)."""
        ...

    def write_transaction(self) -> AbstractContextManager[None]:
        """A write transaction around the block: COMMIT when it ends, ROLLBACK if it
        raises."""
        ...

    def read_transaction(self) -> AbstractContextManager[None]:
        """One consistent snapshot for every statement of the block."""
        ...

    def savepoint(self, name: str = "ckptdb_member") -> AbstractContextManager[None]:
        """A savepoint inside the open write transaction: an error in the block undoes only
        the block's writes (and propagates)."""
        ...

    def integration_session(self, protected: frozenset[str]) -> AbstractContextManager[Any]:
        """An integration's session inside the open transaction (``ckptdb.extension.Session``),
        kept off the ``protected`` tables (see :mod:`.confinement` and
        :mod:`.postgres.session`)."""
        ...

    def close(self) -> None:
        """Close the connection (idempotent)."""
        ...

    def abandon(self) -> None:
        """Close on an error path without raising (another exception is propagating)."""
        ...


def sqlite_only(conn: EngineConnection, what: str) -> Connection:
    """``conn`` as the SQLite connection ``what`` needs, or EngineUnsupportedError when the
    database is on another engine (the parts of the API not yet ported: docs/postgresql.md)."""
    if isinstance(conn, Connection):
        return conn
    raise errors.EngineUnsupportedError(
        f"{what} is not available on {conn.dialect} in this release (see docs/postgresql.md, "
        "'What runs on PostgreSQL'); nothing was written. Use an SQLite database for it, or "
        "export the namespaces to one."
    )


def relaxed_sync(conn: EngineConnection) -> AbstractContextManager[None]:
    """Staging's relaxed durability on SQLite (see ``Connection.relaxed_sync``); nothing on
    PostgreSQL, whose commits cost no fsync of the client's."""
    return conn.relaxed_sync() if isinstance(conn, Connection) else nullcontext()
