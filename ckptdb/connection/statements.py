"""Running statements on one apsw connection, errors translated: the base of
:class:`~ckptdb.connection.driver.Connection`.

Also incremental blob I/O: a large value is written into a zeroblob and read back without
SQLite copying it into a record first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import apsw

from .translate import DRIVER_ERRORS, translate

SqlValue = None | int | float | str | bytes
Row = tuple[Any, ...]
Params = Sequence[Any] | dict[str, Any]

_T = TypeVar("_T")


class StatementRunner:
    """Statements, pragmas and blob I/O on an apsw connection, with ckptdb's errors."""

    def __init__(self, raw: apsw.Connection) -> None:
        self._raw = raw

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement and return all its rows."""
        try:
            return self._raw.execute(sql, params).fetchall()
        except DRIVER_ERRORS as exc:
            raise translate(exc, "SQLite") from exc

    def execute_script(self, sql: str) -> None:
        """Run every statement of a script (the cursor is drained so none is skipped)."""
        try:
            for _ in self._raw.execute(sql):
                pass
        except DRIVER_ERRORS as exc:
            raise translate(exc, "SQLite") from exc

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement once per parameter row."""
        if not rows:
            return
        try:
            for _ in self._raw.executemany(sql, rows):
                pass
        except DRIVER_ERRORS as exc:
            raise translate(exc, "SQLite") from exc

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row of a query, or None."""
        try:
            for row in self._raw.execute(sql, params):
                return tuple(row)
        except DRIVER_ERRORS as exc:
            raise translate(exc, "SQLite") from exc
        return None

    def scalar(self, sql: str, params: Params = ()) -> Any:
        """The first column of the first row, or None when there is no row."""
        row = self.one(sql, params)
        return None if row is None else row[0]

    def iterate(self, sql: str, params: Params = ()) -> Iterator[Row]:
        """Stream rows of a large query; the cursor is closed even if the caller stops early."""
        cursor = self._raw.cursor()
        try:
            try:
                yield from cursor.execute(sql, params)
            except DRIVER_ERRORS as exc:
                raise translate(exc, "SQLite") from exc
        finally:
            cursor.close()

    def changes(self) -> int:
        """Rows changed by the most recent INSERT/UPDATE/DELETE."""
        return int(self._raw.changes())

    def insert_returning(self, sql: str, params: Params, key: str) -> int:
        """Run one ``INSERT`` of a single row and return its rowid (``key`` names the
        column: on SQLite, the rowid alias)."""
        self.execute(sql, params)
        return int(self._raw.last_insert_rowid())

    def last_insert_rowid(self) -> int:
        """Rowid of the most recent successful INSERT."""
        return int(self._raw.last_insert_rowid())

    def pragma(self, name: str, value: SqlValue = None) -> Any:
        """Read (value None) or set one pragma; returns the first column of its result."""
        try:
            return self._raw.pragma(name, value) if value is not None else self._raw.pragma(name)
        except DRIVER_ERRORS as exc:
            raise translate(exc, f"PRAGMA {name}") from exc

    # -- incremental blob I/O -----------------------------------------------------------

    def write_blob(self, table: str, column: str, rowid: int, data: bytes | memoryview) -> None:
        """Write ``data`` into a zeroblob of the same length with incremental blob I/O."""
        try:
            blob = self._raw.blob_open("main", table, column, rowid, True)
            try:
                blob.write(data)
            finally:
                blob.close()
        except DRIVER_ERRORS as exc:
            raise translate(exc, f"writing {table}.{column}") from exc

    def read_blob_into(self, table: str, column: str, rowid: int, buffer: bytearray) -> int | None:
        """Read a whole BLOB value into ``buffer`` (grown if needed) with incremental blob
        I/O; returns its length, or None when the row does not exist."""

        def into(blob: apsw.Blob) -> int:
            length = int(blob.length())
            if len(buffer) < length:
                buffer.extend(bytes(length - len(buffer)))
            blob.read_into(buffer, 0, length)
            return length

        return self._read_blob(table, column, rowid, into)

    def read_blob(self, table: str, column: str, rowid: int) -> bytes | None:
        """A whole BLOB (or TEXT) value as bytes with incremental blob I/O, or None when the
        row does not exist or holds no BLOB or TEXT. One copy, from SQLite's pages into the
        result: a ``SELECT`` of a large value copies it twice (into a record, then out)."""
        return self._read_blob(table, column, rowid, lambda blob: bytes(blob.read()))

    def _read_blob(
        self, table: str, column: str, rowid: int, read: Callable[[apsw.Blob], _T]
    ) -> _T | None:
        """Open a value for incremental reading, ``read`` it, close it; None when the row
        does not exist (or holds a value of another type); errors translated."""
        try:
            blob = self._raw.blob_open("main", table, column, rowid, False)
        except apsw.SQLError:
            return None  # no such row, or a value of another type (NULL, a number)
        except DRIVER_ERRORS as exc:
            raise translate(exc, f"reading {table}.{column}") from exc
        try:
            out = read(blob)
        except DRIVER_ERRORS as exc:
            _close_blob(blob)
            raise translate(exc, f"reading {table}.{column}") from exc
        try:
            blob.close()
        except DRIVER_ERRORS as exc:
            raise translate(exc, f"reading {table}.{column}") from exc
        return out


def _close_blob(blob: apsw.Blob) -> None:
    """Close a blob handle on a path where its read already failed: the close repeats that
    error, which is reported (translated) by the caller."""
    try:
        blob.close()
    except apsw.Error:
        return
