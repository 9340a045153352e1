"""Integration sessions: the statements an integration (the LangGraph saver, a host's own
tables) runs inside a transaction ckptdb opened, kept off ckptdb's own tables by SQLite's
authorizer -- enforced, not only documented.

A session may read any table and write rows of any table except the protected ones (the
core schema's tables, named by the caller; SQLite's own ``sqlite_*`` and Litestream's
tables always). It may not run DDL (an integration changes its schema only through
``Database.apply_migration_set``), ATTACH/DETACH (so no VACUUM either), ANALYZE or
REINDEX of a named table or index, transaction control (BEGIN/COMMIT/ROLLBACK/SAVEPOINT/
RELEASE: the transaction belongs to ckptdb) or a pragma that is not a plain read. A refused
statement fails while SQLite prepares it, before it runs: it writes nothing, and the
transaction around it stays open and usable -- the caller decides whether to go on or let
the error roll the transaction back.

Why it costs ~nothing per statement: SQLite consults the authorizer only while it
*prepares* a statement, and apsw caches prepared statements by their text. So

* one authorizer, :class:`Confinement`, is installed once per connection and stays: it
  allows everything unless its ``active`` flag is up, which a session raises around its
  own statements only. (``sqlite3_set_authorizer`` expires every prepared statement, so
  swapping authorizers per session would re-prepare all of ckptdb's statements.)
* a statement prepared outside a session and found in the cache would never be checked:
  so a session's statement text always starts with :data:`SESSION_MARK`, a comment none of
  ckptdb's own SQL starts with, and its cache entries are its own -- prepared with the
  flag up, every time, including when SQLite re-prepares an expired one.
* apsw looks up each statement after the first of a multi-statement text in the cache by
  its own text (which could be ckptdb's): such a text runs without the cache.

The flag belongs to the connection, which one thread uses at a time (the handle's lock):
a statement another thread prepared on it meanwhile would be judged as the session's.

What the authorizer cannot see: a bare ``REINDEX`` (or ``REINDEX collation``) asks it
nothing; it rebuilds indexes and changes no row.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final

import apsw

from .. import errors
from .sandbox import READ_ACTIONS, is_read_pragma
from .statements import Params, Row
from .translate import DRIVER_ERRORS, translate
from .walhook import LITESTREAM_TABLES

#: The comment every statement of a session starts with (see the module docstring).
SESSION_MARK = "/* ckptdb integration session */ "

_ROW_WRITES = frozenset({apsw.SQLITE_INSERT, apsw.SQLITE_UPDATE, apsw.SQLITE_DELETE})
_SAVEPOINT_STATEMENTS = {"BEGIN": "SAVEPOINT", "RELEASE": "RELEASE", "ROLLBACK": "ROLLBACK TO"}
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_temp_master", "sqlite_schema"})
_OK = int(apsw.SQLITE_OK)


class Confinement:
    """The standing authorizer of a connection that runs integration sessions: allows
    everything while ``active`` is down; while it is up, refuses (raises
    :class:`ckptdb.errors.IntegrationWriteRefusedError`) what a session may not do."""

    __slots__ = ("active", "protected", "requested")

    def __init__(self, protected: frozenset[str]) -> None:
        #: The table names as the caller gave them (to tell whether a later call asks for
        #: the same confinement).
        self.requested = protected
        #: Lower-cased names of every table a session may not write (besides ``sqlite_*``).
        self.protected = frozenset(name.lower() for name in (*protected, *LITESTREAM_TABLES))
        #: Up while a session's statement is prepared and run.
        self.active = False

    def authorize(
        self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None
    ) -> int:
        """SQLite's authorizer callback (``sqlite3_set_authorizer``)."""
        if not self.active or action in READ_ACTIONS:
            return _OK
        if action in _ROW_WRITES:
            table = (arg1 or "").lower()
            if table not in self.protected and not table.startswith("sqlite_"):
                return _OK
        elif action == apsw.SQLITE_PRAGMA and is_read_pragma(arg1, arg2):
            return _OK
        raise _refusal(action, arg1, arg2)


_WHY_TRANSACTION = (
    "the session runs inside the transaction ckptdb opened, which commits when the block "
    "ends and rolls back if it raises"
)
_WHY_SCHEMA = (
    "an integration changes its schema only through Database.apply_migration_set (a "
    "migration set, versioned and checksummed)"
)
_WHY_OTHER = "an integration session reads any table and writes rows of its own tables only"


def _refusal(
    action: int, arg1: str | None, arg2: str | None
) -> errors.IntegrationWriteRefusedError:
    """The error that says what was refused and why."""
    statement = str(apsw.mapping_authorizer_function.get(action, f"action {action}"))
    statement = statement.removeprefix("SQLITE_").replace("_", " ")
    target = arg1 or ""
    subject = ""  # how the message names the target, when not simply quoted
    if action in _ROW_WRITES and target.lower() in _SCHEMA_TABLES:
        # DDL writes the schema table first: the CREATE/DROP/ALTER itself is never asked.
        statement, target, why = "schema change", "", _WHY_SCHEMA
    elif action in _ROW_WRITES:
        owner = (
            "SQLite's own"
            if target.lower().startswith("sqlite_")
            else "ckptdb's (it changes only through ckptdb's API)"
        )
        subject = f"on table {target!r}"
        why = (
            f"an integration session writes only the integration's own tables; this one is {owner}"
        )
    elif action == apsw.SQLITE_TRANSACTION:
        statement, target, why = target, "", _WHY_TRANSACTION
    elif action == apsw.SQLITE_SAVEPOINT:
        statement, target, why = (
            _SAVEPOINT_STATEMENTS.get(target, "SAVEPOINT"),
            arg2 or "",
            _WHY_TRANSACTION,
        )
    elif action == apsw.SQLITE_PRAGMA:
        why = (
            "a session only reads pragmas (PRAGMA user_version, PRAGMA table_info(t), ...): "
            "it sets none and runs no maintenance pragma"
        )
    elif action == apsw.SQLITE_ALTER_TABLE:
        target, why = arg2 or "", _WHY_SCHEMA  # arg1 is the database's name
    elif action in (apsw.SQLITE_ATTACH, apsw.SQLITE_DETACH):
        why = "a session works on this database only (VACUUM, which attaches one, neither)"
    elif statement.startswith(("CREATE", "DROP", "ALTER")):
        why = _WHY_SCHEMA
    else:
        why = _WHY_OTHER
    subject = subject or (repr(target) if target else "")
    return errors.IntegrationWriteRefusedError(
        f"{statement}{' ' if subject else ''}{subject} refused: {why}. The statement did not "
        "run; nothing was written.",
        statement=statement,
        target=target,
    )


class IntegrationSession:
    """Statements of an integration inside a transaction ckptdb opened, confined by the
    connection's :class:`Confinement` (the ``ckptdb.extension.Session`` protocol).

    Use it as a context manager: it works inside its ``with`` block only, so a hook that
    kept it cannot run statements later, outside the transaction it was given for."""

    __slots__ = ("_confinement", "_open", "_raw")

    #: Which SQL spelling the session takes where the engines differ.
    dialect: Final = "sqlite"

    def __init__(self, raw: apsw.Connection, confinement: Confinement) -> None:
        self._raw = raw
        self._confinement = confinement
        self._open = True

    def __enter__(self) -> IntegrationSession:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self._open = False

    def _begin(self) -> None:
        """Raise the confinement flag for one statement; the caller lowers it once the
        statement is drained (an expired statement is re-prepared while it steps)."""
        if not self._open:
            raise errors.ClosedError(
                "this integration session has ended (its with block is over); run "
                "statements inside the block that opened it"
            )
        self._confinement.active = True

    def _start(self, sql: str, params: Params) -> apsw.Cursor:
        self._begin()
        if ";" in sql:
            return self._raw.execute(SESSION_MARK + sql, params, can_cache=False)
        return self._raw.execute(SESSION_MARK + sql, params)

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement; return all its rows."""
        # _start spelled out: an integration's hook runs this once per commit.
        if not self._open:
            self._begin()  # raises ClosedError
        confinement = self._confinement
        confinement.active = True
        try:
            return self._raw.execute(
                SESSION_MARK + sql, params, can_cache=";" not in sql
            ).fetchall()
        except DRIVER_ERRORS as exc:
            raise translate(exc, "SQLite") from exc
        finally:
            confinement.active = False

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement per parameter row."""
        if not rows:
            return
        try:
            self._begin()
            can_cache = ";" not in sql
            for _ in self._raw.executemany(SESSION_MARK + sql, rows, can_cache=can_cache):
                pass
        except DRIVER_ERRORS as exc:
            raise translate(exc, "SQLite") from exc
        finally:
            self._confinement.active = False

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row, or None."""
        try:
            for row in self._start(sql, params):
                return tuple(row)
        except DRIVER_ERRORS as exc:
            raise translate(exc, "SQLite") from exc
        finally:
            self._confinement.active = False
        return None

    def scalar(self, sql: str, params: Params = ()) -> Any:
        """The first column of the first row, or None."""
        row = self.one(sql, params)
        return None if row is None else row[0]

    def changes(self) -> int:
        """Rows changed by the last statement."""
        return int(self._raw.changes())
