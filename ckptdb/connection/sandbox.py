"""The read-only sandbox of operator SQL (``ckptdb sql``, ``Database.query``).

An operator's statement runs under an authorizer that allows reading only: anything that
would write -- INSERT/UPDATE/DELETE, DDL, ATTACH/DETACH, VACUUM (including VACUUM INTO),
transactions, pragmas that set a value -- is refused while SQLite prepares it, before it
runs, whatever the connection's own mode. The functions here prepare and run; the caller
(:class:`~ckptdb.connection.driver.Connection`) installs :func:`authorize_read` around
them. The policy of what to do with a refused or slow query is in :mod:`ckptdb.ops.query`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import apsw

from .statements import Params, Row
from .translate import DRIVER_ERRORS, translate

#: Authorizer requests that only read.
READ_ACTIONS = frozenset(
    {apsw.SQLITE_SELECT, apsw.SQLITE_READ, apsw.SQLITE_FUNCTION, apsw.SQLITE_RECURSIVE}
)
#: Pragmas that only read (``PRAGMA name``, no value). The ``litestream_*`` ones are the
#: position of a replica read through litestream-vfs (answered by the VFS itself).
_READ_PRAGMAS = frozenset(
    {
        "application_id", "collation_list", "compile_options", "database_list",
        "freelist_count", "function_list", "integrity_check", "journal_mode", "page_count",
        "page_size", "quick_check", "schema_version", "table_list", "user_version",
        "litestream_lag", "litestream_time", "litestream_txid",
    }
)  # fmt: skip
#: Pragmas whose argument names what to read (``PRAGMA table_info(t)``), never a new value.
_READ_PRAGMAS_WITH_ARG = frozenset(
    {
        "foreign_key_list", "index_info", "index_list", "index_xinfo", "integrity_check",
        "quick_check", "table_info", "table_xinfo",
    }
)  # fmt: skip

#: apsw's "bind nothing yet" marker (what apsw.ext.query_info passes to prepare a statement
#: without its parameters).
_NULL_BINDINGS: Any = getattr(apsw, "_null_bindings")  # noqa: B009 - private, so no attribute


def is_read_pragma(name: str | None, argument: str | None) -> bool:
    """Whether ``PRAGMA name`` (``argument``: its value or argument, None when absent)
    only reads."""
    name = (name or "").lower()
    return (argument is None and name in _READ_PRAGMAS) or name in _READ_PRAGMAS_WITH_ARG


def authorize_read(
    action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None
) -> int:
    """The authorizer of operator queries: reading only."""
    if action in READ_ACTIONS:
        return int(apsw.SQLITE_OK)
    if action == apsw.SQLITE_PRAGMA and is_read_pragma(arg1, arg2):
        return int(apsw.SQLITE_OK)
    return int(apsw.SQLITE_DENY)


@dataclass(frozen=True)
class PreparedStatement:
    """What :meth:`Connection.prepare_readonly` learned about the first statement."""

    text: str
    #: The text after the first statement (comments, blanks, or more statements).
    remaining: str
    #: Parameter names without their prefix ("namespace" for ``:namespace``); None for ``?``.
    parameters: tuple[str | None, ...]
    #: False when the text holds no statement at all (empty, blanks, comments).
    is_statement: bool


def prepare_first(raw: apsw.Connection, sql: str) -> PreparedStatement:
    """Prepare -- never run -- the first statement of ``sql``: its text, the text after it
    and its parameter names."""
    found: list[PreparedStatement] = []

    def trace(cursor: apsw.Cursor, first: str, _bindings: Any) -> bool:
        names = tuple(cursor.bindings_names)
        found.append(PreparedStatement(first, sql[len(first) :], names, bool(cursor.has_vdbe)))
        return False  # stop: prepared only

    cursor = raw.cursor()
    cursor.exec_trace = trace
    try:
        cursor.execute(sql, _NULL_BINDINGS)
    except apsw.ExecTraceAbort:
        pass
    except DRIVER_ERRORS as exc:
        raise translate(exc, "SQL") from exc
    finally:
        cursor.close()
    return found[0] if found else PreparedStatement("", "", (), False)


@contextmanager
def stream(
    raw: apsw.Connection, sql: str, params: Params, check: Callable[[], None], steps: int
) -> Iterator[tuple[list[str], Iterator[Row]]]:
    """Run one statement and yield its column names (in order, repeats kept) and a row
    iterator that reads one row at a time; ``check`` runs every ``steps`` virtual-machine
    steps. The statement is finalized and the progress handler removed when the block
    ends, however it ends."""

    def progress() -> bool:
        check()
        return False

    cursor = raw.cursor()
    prepared: list[str] = []

    def trace(traced: apsw.Cursor, _sql: str, _bindings: object) -> bool:
        # Column names while the statement is prepared: a query that returns no rows
        # still has them (its output still gets a header).
        prepared[:] = [d[0] for d in traced.get_description()]
        return True

    cursor.exec_trace = trace
    raw.set_progress_handler(progress, steps)
    try:
        try:
            cursor.execute(sql, params)
            complete = False
            try:
                names = [d[0] for d in cursor.get_description()]
            except apsw.ExecutionCompleteError:
                names, complete = list(prepared), True
        except DRIVER_ERRORS as exc:
            raise translate(exc, "SQL") from exc

        def rows() -> Iterator[Row]:
            if not names or complete:
                return
            try:
                for row in cursor:
                    yield tuple(row)
            except DRIVER_ERRORS as exc:
                raise translate(exc, "SQL") from exc

        yield names, rows()
    finally:
        raw.set_progress_handler(None)
        with suppress(apsw.Error):
            cursor.close(True)
