"""What the store needs of a connection, on either engine.

:class:`~ckptdb.connection.driver.Connection` (SQLite, apsw) and
:class:`~ckptdb.connection.postgres.PgConnection` (PostgreSQL, psycopg) both provide it. A
store function that runs on both engines takes an :class:`EngineConnection`; one that needs
SQLite's own features (pragmas, incremental blob I/O, ``sqlite_schema``) keeps taking a
``Connection`` until it is ported (docs/postgresql.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from .statements import Params, Row


class EngineConnection(Protocol):
    """Statements and what they run against (see the module docstring)."""

    #: how messages name the database: a file's path, or a URL without its password
    path: str
    #: True when the connection cannot write
    readonly: bool

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``: which SQL spelling the engine takes where the
        two differ."""
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
