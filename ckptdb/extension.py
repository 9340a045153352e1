"""What an integration (e.g. the LangGraph saver) may use beyond the public API: a session
to run SQL on its *own* tables, inside transactions the Database opens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .store.rows import check_types

__all__ = ["Params", "Row", "Session", "check_types"]

Row = tuple[Any, ...]
Params = Sequence[Any] | dict[str, Any]


class Session(Protocol):
    """Statements inside a transaction opened by ``Database.write_session`` /
    ``read_session`` / ``commit(on_publish=...)``. Errors are ckptdb errors."""

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement; return all its rows."""
        ...

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement per parameter row."""
        ...

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row, or None."""
        ...

    def scalar(self, sql: str, params: Params = ()) -> Any:
        """The first column of the first row, or None."""
        ...

    def changes(self) -> int:
        """Rows changed by the last statement."""
        ...
