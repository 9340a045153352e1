"""Integration sessions on PostgreSQL: an integration's statements inside a transaction
ckptdb opened, kept off ckptdb's own tables (the ``ckptdb.extension.Session`` protocol, as
:mod:`ckptdb.connection.confinement` gives it on SQLite).

PostgreSQL has no authorizer, so the confinement is in two parts:

* every session statement is sent starting with :data:`SESSION_MARK` (a comment none of
  ckptdb's own statements starts with), and every core table has a statement-level trigger
  (migrations 4 and 5 of this engine) that refuses a write while the statement the client
  sent starts with it -- also a write made by a function that statement called. ckptdb's
  own statements around a session (a commit's, whose ``on_publish`` hook the session
  serves) write as before, and a session costs no statement of its own. The server raises
  SQLSTATE ``CK001``: :class:`IntegrationWriteRefusedError`.
* a statement that is not a query or a row write (DDL, ``SET``/``RESET``, transaction
  control, ``COPY``, ``LOCK``, ``VACUUM``, ...) is refused here, by its first keyword,
  before it is sent: it writes nothing and the transaction stays usable.

One difference from SQLite, said in docs/postgresql.md: a statement the *server* refuses
(the guard, a constraint) aborts the transaction, so the block must end -- its error rolls
the transaction back. SQLite refuses while preparing and leaves the transaction usable.

A read session runs in a ``READ ONLY`` transaction, which refuses every write by itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from ... import errors

if TYPE_CHECKING:
    from .driver import Params, PgConnection, Row

#: What every session statement starts with: the SQLite engine's mark
#: (``confinement.SESSION_MARK``), which this engine's guard trigger looks for (migration 5).
SESSION_MARK: Final = "/* ckptdb integration session */ "

#: The first keywords a session's statement may start with: queries and row writes.
_ALLOWED: Final = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "TABLE"})
_TRANSACTION: Final = frozenset(
    {"BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE"}
)
_SCHEMA: Final = frozenset(
    {"CREATE", "DROP", "ALTER", "TRUNCATE", "COMMENT", "GRANT", "REVOKE", "REINDEX", "CLUSTER"}
)


def first_keyword(sql: str) -> str:
    """The statement's first word, upper-cased, after blanks, comments and opening
    parentheses ("" when there is none)."""
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch.isspace() or ch == "(":
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            break
    end = i
    while end < n and (sql[end].isalpha() or sql[end] == "_"):
        end += 1
    return sql[i:end].upper()


def refusal(keyword: str) -> errors.IntegrationWriteRefusedError:
    """The error for a statement a session may not send (see the module docstring)."""
    if keyword in _TRANSACTION:
        why = (
            "the session runs inside the transaction ckptdb opened, which commits when the "
            "block ends and rolls back if it raises"
        )
    elif keyword in _SCHEMA:
        why = (
            "an integration changes its schema only through Database.apply_migration_set (a "
            "migration set, versioned and checksummed)"
        )
    elif keyword in {"SET", "RESET"}:
        why = "a session sets no server setting (its transaction's settings are ckptdb's)"
    else:
        why = "an integration session runs queries and writes rows of its own tables only"
    shown = keyword or "an empty statement"
    return errors.IntegrationWriteRefusedError(
        f"{shown} refused: {why}. The statement was not sent; nothing was written.",
        statement=keyword,
        target="",
    )


class PgIntegrationSession:
    """Statements of an integration in the transaction ckptdb opened on ``conn`` (see the
    module docstring). Use it as a context manager; it works inside its block only."""

    __slots__ = ("_conn", "_open")

    #: Which SQL spelling the session takes where the engines differ.
    dialect: Final = "postgresql"

    def __init__(self, conn: PgConnection) -> None:
        self._conn = conn
        self._open = True

    def __enter__(self) -> PgIntegrationSession:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self._open = False

    def _check(self, sql: str) -> str:
        """``sql`` marked as a session's, or the refusal of a statement it may not send."""
        if not self._open:
            raise errors.ClosedError(
                "this integration session has ended (its with block is over); run "
                "statements inside the block that opened it"
            )
        keyword = first_keyword(sql)
        if keyword not in _ALLOWED:
            raise refusal(keyword)
        return SESSION_MARK + sql

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement; return all its rows."""
        return self._conn.execute(self._check(sql), params)

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement per parameter row."""
        self._conn.executemany(self._check(sql), rows)

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row, or None."""
        rows = self.execute(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Params = ()) -> Any:
        """The first column of the first row, or None."""
        row = self.one(sql, params)
        return None if row is None else row[0]

    def changes(self) -> int:
        """Rows changed by the last statement."""
        return self._conn.changes()
