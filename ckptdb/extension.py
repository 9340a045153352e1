"""What an integration (e.g. the LangGraph saver) may use beyond the public API: a session
to run SQL on its *own* tables, inside transactions the Database opens."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from . import models
from .ops.verify import register_hook
from .store.rows import check_types

__all__ = ["Params", "Row", "Session", "check_types", "register_verify_hook"]

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


def register_verify_hook(
    migration_set: str, hook: Callable[[Session, bool], list[models.Problem]]
) -> None:
    """Have ``Database.verify`` (and ``ckptdb verify``) check an integration's own tables.

    On every file where the migration set ``migration_set`` is applied, ``hook(session,
    quick)`` runs inside verify's read transaction, after the core checks; the problems it
    returns join the report (and make it not ``ok``). Only SQL on the set's own tables
    belongs there. A later registration for the same set replaces the earlier one."""
    register_hook(migration_set, hook)
