"""Operator queries: ``Database.query`` / ``Database.query_stream`` and ``ckptdb sql``.

The rules (docs/cli.md has the operator's view):

* **One statement.** The text is prepared (never run) statement by statement first:
  blanks, comments and stray semicolons around the statement are fine; a second statement
  is refused with :class:`~ckptdb.errors.MultipleStatementsError` and nothing runs. A
  statement that would write is refused with ReadOnlyError while it is prepared, wherever
  it appears in the text.
* **Parameters** are bound, never spliced: a mapping for named parameters (``:name``,
  ``$name``, ``@name``; keys with or without the prefix), a sequence for ``?``. A missing or
  unknown name, a wrong count or a value SQLite cannot hold is a typed
  :class:`~ckptdb.errors.QueryParameterError` before anything runs.
* **Columns** come back in order, repeated names kept (``SELECT 1 AS x, 2 AS x`` has two
  columns). Where a row must become a JSON object, :func:`json_keys` keeps every column by
  suffixing repeats (``x``, ``x:2``, ``x:3``, ...).
* **JSON is always valid**: :func:`json_cell` turns BLOBs into ``{"hex": ...}`` and the
  non-finite floats SQLite can produce (``SELECT 1e999``) into the strings ``"Infinity"``,
  ``"-Infinity"`` and ``"NaN"`` (JSON has no such numbers).
* **A time limit**: ``timeout`` seconds (default 30; None for none) of SQLite working on the
  statement -- the time the caller spends between rows does not count. Past it the
  statement is interrupted (a progress handler polled every 1,000 virtual-machine steps)
  and :class:`~ckptdb.errors.QueryTimeoutError` is raised. Ctrl-C (KeyboardInterrupt)
  interrupts it the same way and propagates as KeyboardInterrupt. Either way the statement
  is finalized and nothing is left running.
* **Rows are streamed**: :func:`stream` reads one row at a time; only :func:`run` (behind
  ``Database.query``, which returns a list) collects them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from .. import errors, models
from ..connection import Connection, Params, PreparedStatement, Row, SqlFailure
from .handle import Handle
from .unit import holding

if TYPE_CHECKING:
    from ..connection.postgres import PgConnection

DEFAULT_TIMEOUT = 30.0
_MAX_TIMEOUT = 7 * 24 * 3600.0
_HINT = (
    "Check the query (one read-only statement: SELECT, WITH or a read-only PRAGMA); "
    "schema/README.md lists the tables and views."
)
_INT64 = (-(2**63), 2**63 - 1)
#: What a caller may pass: a mapping for named parameters, a sequence for ``?``.
QueryParams = Sequence[Any] | Mapping[str, Any]


@dataclass
class QueryStream:
    """Columns (in order, repeats kept) and an iterator reading one row at a time."""

    columns: list[str]
    rows: Iterator[Row]


def check_timeout(timeout: float | None) -> float | None:
    """``timeout`` if it is None or a positive, finite number of seconds (at most a week)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise errors.InvalidInputError(f"timeout must be a number of seconds, not {timeout!r}")
    value = float(timeout)
    if not (0 < value <= _MAX_TIMEOUT):
        raise errors.InvalidInputError(
            f"timeout must be more than 0 and at most {_MAX_TIMEOUT:.0f} seconds (got "
            f"{timeout!r}); give None for no limit"
        )
    return value


def _statement(conn: Connection, sql: str) -> PreparedStatement:
    """The one statement of ``sql``; typed refusals for none or several."""
    if not isinstance(sql, str) or not sql.strip():
        raise errors.InvalidQueryError("the query is empty; give one read-only statement")
    found: PreparedStatement | None = None
    text = sql
    while text.strip():
        try:
            prepared = conn.prepare_readonly(text)
        except SqlFailure as exc:
            raise errors.InvalidQueryError(f"{exc} {_HINT}") from exc
        if prepared.is_statement:
            if found is not None:
                raise errors.MultipleStatementsError(
                    "the query holds more than one statement; give exactly one (nothing was "
                    "run). Run each statement separately.",
                    second=prepared.text.strip()[:200],
                )
            found = prepared
        if not prepared.text or prepared.remaining == text:
            break  # nothing consumed: only blanks or comments are left
        text = prepared.remaining
    if found is None:
        raise errors.InvalidQueryError(
            "the query holds no statement (only blanks or comments); give one read-only statement"
        )
    return found


def _value(name: str, value: Any, *, keep_bool: bool = False) -> Any:
    if isinstance(value, bool):
        return value if keep_bool else int(value)
    if value is None or isinstance(value, str | bytes | float):
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise errors.QueryParameterError(
                f"parameter {name}: {value} does not fit SQLite's 64-bit integers"
            )
        return value
    raise errors.QueryParameterError(
        f"parameter {name}: a {type(value).__name__} cannot be bound (give None, int, float, "
        "str or bytes)"
    )


def bind(
    wanted: Sequence[str | None], params: QueryParams | None, *, keep_bool: bool = False
) -> Params:
    """The parameters to bind, checked against the statement's own placeholders
    (``wanted``: a name per named one, None per positional one). ``keep_bool``: a bool
    stays one (PostgreSQL has the type; SQLite takes 0 and 1)."""
    given: QueryParams = () if params is None else params
    if isinstance(given, Mapping):
        named = {str(k).lstrip(":$@"): v for k, v in given.items()}
        if any(w is None for w in wanted):
            raise errors.QueryParameterError(
                "the statement has positional parameters (?); pass a sequence, not names"
            )
        names = [str(w) for w in wanted]
        missing = sorted(set(names) - named.keys())
        unknown = sorted(named.keys() - set(names))
        if missing or unknown:
            detail = "; ".join(
                part
                for part in (
                    f"missing: {', '.join(':' + m for m in missing)}" if missing else "",
                    f"not in the statement: {', '.join(':' + u for u in unknown)}"
                    if unknown
                    else "",
                )
                if part
            )
            raise errors.QueryParameterError(
                f"query parameters do not match the statement ({detail}); the statement "
                f"takes: {', '.join(':' + n for n in names) or 'no parameters'}. Give each "
                "with --param NAME=VALUE (or in the params mapping).",
                missing=missing,
                unknown=unknown,
            )
        return {n: _value(":" + n, named[n], keep_bool=keep_bool) for n in names}
    if isinstance(given, str | bytes) or not isinstance(given, Sequence):
        raise errors.QueryParameterError(
            "params must be a mapping (named parameters) or a sequence (positional ?)"
        )
    if len(given) != len(wanted):
        raise errors.QueryParameterError(
            f"the statement takes {len(wanted)} parameter(s) but {len(given)} were given"
        )
    return [_value(f"#{i + 1}", v, keep_bool=keep_bool) for i, v in enumerate(given)]


class _Budget:
    """Seconds SQLite may still spend on the statement; checked from the progress handler."""

    def __init__(self, timeout: float | None) -> None:
        self.limit = timeout
        self.used = 0.0
        self.started: float | None = None

    def start(self) -> None:
        self.started = time.monotonic()

    def stop(self) -> None:
        if self.started is not None:
            self.used += time.monotonic() - self.started
            self.started = None

    def check(self) -> None:
        if self.limit is None or self.started is None:
            return
        if self.used + (time.monotonic() - self.started) > self.limit:
            raise errors.QueryTimeoutError(
                f"the query ran longer than its timeout ({self.limit:g} s) and was "
                "interrupted; nothing was changed. Narrow it (WHERE, LIMIT) or give a larger "
                "timeout (--timeout SECONDS).",
                timeout=self.limit,
            )

    def timed(self, rows: Iterator[Row]) -> Iterator[Row]:
        while True:
            self.start()
            try:
                row = next(rows)
            except StopIteration:
                return
            finally:
                self.stop()
            yield row


@contextmanager
def stream(
    handle: Handle,
    sql: str,
    params: QueryParams | None = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> Iterator[QueryStream]:
    """Run one read-only statement and stream its rows (see the module docstring); the
    handle is held until the block ends."""
    limit = check_timeout(timeout)
    with holding(handle) as tx:
        conn = tx.conn
        if isinstance(conn, Connection):
            with _stream(conn, sql, params, limit) as qs:
                yield qs
        else:
            with _stream_server(cast("PgConnection", conn), sql, params, limit) as qs:
                yield qs


@contextmanager
def _stream(
    conn: Connection, sql: str, params: QueryParams | None, limit: float | None
) -> Iterator[QueryStream]:
    statement = _statement(conn, sql)
    bound = bind(statement.parameters, params)
    budget = _Budget(limit)
    budget.start()  # SQLite computes the first row while the statement starts
    try:
        with conn.stream_readonly(statement.text, bound, budget.check) as (columns, rows):
            budget.stop()
            yield QueryStream(columns, _failures_typed(budget.timed(rows)))
    except SqlFailure as exc:
        raise errors.InvalidQueryError(f"{exc} {_HINT}") from exc
    finally:
        budget.stop()


@contextmanager
def _stream_server(
    conn: PgConnection, sql: str, params: QueryParams | None, limit: float | None
) -> Iterator[QueryStream]:
    """:func:`_stream` on PostgreSQL: the server parses, refuses and times the statement
    (``connection/postgres/query.py``); the budget counts the time spent fetching rows."""
    if not isinstance(sql, str) or not sql.strip():
        raise errors.InvalidQueryError("the query is empty; give one read-only statement")
    from ..connection.postgres.query import parameters  # noqa: PLC0415 - optional driver

    wanted = parameters(sql)
    if any(w is not None for w in wanted) and not isinstance(params, Mapping | None):
        raise errors.QueryParameterError(
            "the statement has named parameters (:name); pass a mapping, not a sequence"
        )
    bound = bind(wanted, params, keep_bool=True)
    budget = _Budget(limit)
    budget.start()
    try:
        with conn.stream_readonly(sql, bound, limit) as (columns, rows):
            budget.stop()
            yield QueryStream(columns, budget.timed(_checked(rows, budget)))
    finally:
        budget.stop()


def _checked(rows: Iterator[Row], budget: _Budget) -> Iterator[Row]:
    """The rows, the budget checked after each (the server bounds each fetch itself)."""
    for row in rows:
        budget.check()
        yield row


def _failures_typed(rows: Iterator[Row]) -> Iterator[Row]:
    try:
        yield from rows
    except SqlFailure as exc:  # a run-time error (e.g. integer overflow in an expression)
        raise errors.InvalidQueryError(f"{exc} {_HINT}") from exc


def run(
    handle: Handle,
    sql: str,
    params: QueryParams | None = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> models.QueryResult:
    """:func:`stream`, collected into a :class:`~ckptdb.models.QueryResult`."""
    with stream(handle, sql, params, timeout=timeout) as result:
        return models.QueryResult(columns=result.columns, rows=[list(r) for r in result.rows])


def json_keys(columns: Sequence[str]) -> list[str]:
    """Unique object keys for ``columns``, in order: a repeated name gets ``:2``, ``:3``...
    (skipping any suffix that is itself a column name)."""
    taken = set(columns)
    seen: set[str] = set()
    keys = []
    for name in columns:
        key = name
        if key in seen:
            n = 2
            while f"{name}:{n}" in taken or f"{name}:{n}" in seen:
                n += 1
            key = f"{name}:{n}"
        seen.add(key)
        keys.append(key)
    return keys


def json_cell(value: Any) -> Any:
    """A value as valid JSON: BLOB -> ``{"hex": ...}``, inf/-inf/nan -> strings."""
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value
