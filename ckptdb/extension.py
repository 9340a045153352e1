"""What an integration (e.g. the LangGraph saver) may use beyond the public API: a session
to run SQL on its *own* tables, inside transactions the Database opens."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from . import canonical, models
from .ops.verify import register_hook
from .store.crypto import SEALED_METADATA, Scope
from .store.rows import check_types
from .types import Addressed
from .validation import metadata_from_json

__all__ = [
    "SEALED_METADATA",
    "Addressed",
    "Params",
    "RecordSealer",
    "Row",
    "Session",
    "canonical_json",
    "check_types",
    "metadata_from_json",
    "register_verify_hook",
]

#: How ckptdb writes metadata: canonical JSON text (sorted keys, no spaces, no escaping of
#: non-ASCII), the very text the checkpoint id covers -- so a key and value spelled with it
#: can be searched for in the stored text.
canonical_json: Callable[[Any], str] = canonical.dumps

Row = tuple[Any, ...]
Params = Sequence[Any] | dict[str, Any]


class Session(Protocol):
    """Statements inside a transaction opened by ``Database.write_session`` /
    ``read_session`` / ``commit(on_publish=...)`` -- except ``read_session(snapshot=False)``,
    where each statement reads its own snapshot. Errors are ckptdb errors.

    ``dialect`` says which engine runs the statements (``"sqlite"`` or ``"postgresql"``), for
    the few statements an integration spells differently on each (an upsert's ``max`` is
    ``greatest`` there, ...). On PostgreSQL a statement the server refuses rolls the whole
    transaction back (docs/postgresql.md, "Integration sessions")."""

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        ...

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


class RecordSealer:
    """Seals an integration's own rows for a namespace in an encrypted key scope (from
    ``Database.record_sealer``): the LangGraph saver seals its pending writes with it, so no
    plaintext of an encrypted thread lands in its tables either.

    ``seal(data, context)`` returns AES-256-GCM ciphertext under a key of the scope (a fresh
    nonce each time); ``context`` is whatever identifies the row (say, its key columns), and
    ``open`` refuses, with CorruptionError, bytes sealed for another context or scope.
    """

    __slots__ = ("_scope",)

    @property
    def scope_id(self) -> int | None:
        """The key scope's id (what :class:`Addressed` names the scope by)."""
        return self._scope.scope_id

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    @property
    def key_id(self) -> str:
        """The key id of the scope."""
        return str(self._scope.key_id)

    def seal(self, data: bytes, context: bytes) -> bytes:
        """``data`` sealed, bound to ``context``."""
        return self._scope.seal_record(bytes(data), bytes(context))

    def open(self, sealed: bytes, context: bytes) -> bytes:
        """The data sealed for ``context``, or CorruptionError."""
        return self._scope.open_record(bytes(sealed), bytes(context))
