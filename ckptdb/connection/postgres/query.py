"""Operator queries on PostgreSQL (``Database.query`` / ``ckptdb sql``): one read-only
statement, streamed, with a time limit -- the rules of :mod:`ckptdb.ops.query`, kept by the
server's means.

* **Read-only**: the statement runs in a ``READ ONLY`` transaction (a write anywhere in it,
  a writable CTE included, is ``ReadOnlyError`` before anything is written), and it must
  start with ``SELECT``, ``WITH``, ``VALUES`` or ``TABLE``.
* **One statement**: a second one is refused by the server while it parses the text (the
  extended protocol takes one command), before anything runs.
* **A time limit**: ``statement_timeout`` for the statement and each fetch of its rows; the
  caller's budget counts the rest.
* **Values as on SQLite**: ``numeric`` becomes an int or a float, ``boolean`` 0 or 1,
  dates and times ISO 8601 text, ``json``/``jsonb`` JSON text, UUIDs text; bytes stay bytes.
"""

from __future__ import annotations

import datetime
import decimal
import itertools
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import psycopg

from ... import errors
from .placeholders import translate
from .session import first_keyword
from .translate import DRIVER_ERRORS
from .translate import translate as translate_error

if TYPE_CHECKING:
    from .driver import PgConnection, Row

#: What a query may start with.
QUERY_KEYWORDS: Final = frozenset({"SELECT", "WITH", "VALUES", "TABLE"})
_WRITES: Final = frozenset(
    {"INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "DROP", "ALTER", "TRUNCATE", "COPY",
     "GRANT", "REVOKE", "VACUUM", "REINDEX", "CLUSTER", "COMMENT", "LOCK", "CALL", "DO",
     "SET", "RESET"}
)  # fmt: skip
_HINT = (
    "Check the query (one read-only statement: SELECT or WITH); schema/README.md lists "
    "the tables and views."
)
_BATCH = 500
_names = itertools.count()


def parameters(sql: str) -> list[str | None]:
    """The parameters ``sql`` takes, in order: a name for each distinct ``:name``, None for
    each distinct ``?`` / ``?NNN`` position."""
    marks = translate(sql).marks
    if all(isinstance(m, int) for m in marks):
        return [None] * len(set(marks))
    return list(dict.fromkeys(str(m) for m in marks if isinstance(m, str)))


def check_statement(sql: str) -> None:
    """Refuse, before anything is sent, what is not a query."""
    keyword = first_keyword(sql)
    if keyword in QUERY_KEYWORDS:
        return
    if keyword in _WRITES:
        raise errors.ReadOnlyError(
            f"the query would write ({keyword}); queries are read-only. Nothing was run."
        )
    raise errors.InvalidQueryError(
        f"the query starts with {keyword or 'nothing'}, not a query. {_HINT}"
    )


def plain(value: Any) -> Any:
    """A value as SQLite would give it (see the module docstring)."""
    if value is None or isinstance(value, str | bytes | float):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _typed(exc: psycopg.Error, timeout: float | None) -> errors.CkptdbError:
    state = exc.sqlstate or ""
    if state == "57014":
        return errors.QueryTimeoutError(
            f"the query ran longer than its timeout ({timeout:g} s) and was interrupted; "
            "nothing was changed. Narrow it (WHERE, LIMIT) or give a larger timeout "
            "(--timeout SECONDS).",
            timeout=timeout,
        )
    if state == "42601" and "multiple commands" in str(exc):
        return errors.MultipleStatementsError(
            "the query holds more than one statement; give exactly one (nothing was run). "
            "Run each statement separately.",
            second="",
        )
    if state == "0A000" and "data-modifying" in str(exc):  # a writable CTE
        return errors.ReadOnlyError(
            "the query would write (a data-modifying WITH); queries are read-only. Nothing was run."
        )
    if state[:2] in {"42", "22", "0A", "21"}:
        return errors.InvalidQueryError(f"{str(exc).strip()}. {_HINT}")
    return translate_error(exc, "the query")


@contextmanager
def stream_readonly(
    conn: PgConnection,
    sql: str,
    params: Sequence[Any] | Mapping[str, Any],
    timeout: float | None,
) -> Iterator[tuple[list[str], Iterator[Row]]]:
    """Run the one read-only statement ``sql`` (SQLite's parameter marks) in a read-only
    snapshot and stream its rows: ``(columns, rows)``, valid inside the block."""
    check_statement(sql)
    bound = translate(sql)
    values = bound.params(params)
    with conn.read_transaction():
        raw = conn.raw_for_query()
        try:
            if timeout is not None:
                raw.execute(f"SET LOCAL statement_timeout = {max(1, round(timeout * 1000))}")
            cursor = raw.cursor(name=f"ckptdb_query_{next(_names)}")
            cursor.execute(bound.sql, values)
            columns = [d.name for d in cursor.description or []]
        except DRIVER_ERRORS as exc:
            raise _typed(exc, timeout) from exc

        def rows() -> Iterator[Row]:
            try:
                while batch := cursor.fetchmany(_BATCH):
                    for row in batch:
                        yield tuple(plain(v) for v in row)
            except DRIVER_ERRORS as exc:
                raise _typed(exc, timeout) from exc

        # On an error the transaction's rollback closes the cursor with it.
        yield columns, rows()
        try:
            cursor.close()
        except DRIVER_ERRORS as exc:
            raise _typed(exc, timeout) from exc
