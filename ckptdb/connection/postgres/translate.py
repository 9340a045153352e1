"""psycopg's exceptions turned into ckptdb errors: the same vocabulary as on SQLite.

PostgreSQL names every failure with a five-character SQLSTATE; its class (the first two
characters) decides the ckptdb error, a few states more precisely. A failure with no state
is the connection itself (refused, dropped, the server gone).
"""

from __future__ import annotations

import psycopg

from ... import errors

#: What a statement can raise from the driver.
DRIVER_ERRORS = (psycopg.Error,)

#: States a writer retries: another transaction won a lock or a serialization race.
_RETRY = {"40001", "40P01", "55P03", "57014"}
#: The server going away under a session (admin or crash shutdown, not accepting yet).
_SERVER_GONE = {"57P01", "57P02", "57P03"}
#: The state of a session's write refused by a core table's guard (migration 4).
GUARD_STATE = "CK001"
#: Text PostgreSQL cannot store: a NUL character, a byte sequence invalid in UTF-8.
_BAD_TEXT = {"22021", "22P05"}


def lost(exc: BaseException) -> bool:
    """True when ``exc`` says the connection is gone (so the outcome of a COMMIT in flight
    is unknown): no state at all, a connection-class state (08) or a server shutdown."""
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state is None:  # raised by the client: a dead connection, or a value it refused
        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    return state.startswith("08") or state in _SERVER_GONE


def translate(exc: BaseException, what: str) -> errors.CkptdbError:
    """Map a psycopg exception onto the ckptdb hierarchy (the caller keeps the original as
    ``__cause__``); ``what`` names the step that failed."""
    if isinstance(exc, UnicodeEncodeError):
        return errors.InvalidInputError(
            f"{what}: a text argument is not valid Unicode (it holds a lone surrogate, e.g. "
            "from bytes that are not UTF-8); pass valid text"
        )
    state = exc.sqlstate if isinstance(exc, psycopg.Error) else None
    detail = f"{what}: {str(exc).strip() or type(exc).__name__}"
    if lost(exc):
        return errors.StorageError(
            f"{detail}. The connection to the PostgreSQL server was lost or refused; nothing "
            "was acknowledged. Check that the server is up, then retry."
        )
    if state is None and isinstance(exc, psycopg.DataError):
        state = "22021"  # the client refuses a NUL in text before sending it
    if state is None:
        return errors.SqlError(f"{detail}.")
    if state == GUARD_STATE and isinstance(exc, psycopg.Error):
        return errors.IntegrationWriteRefusedError(
            f"{str(exc).strip()}. The statement did not run; nothing was written, and on "
            "PostgreSQL the transaction around it rolls back.",
            statement=str(exc.diag.message_detail or ""),
            target=str(exc.diag.table_name or ""),
        )
    if state in _RETRY:
        return errors.BusyTimeoutError(
            f"{detail}. Another transaction held a lock this one needed, or won a race with "
            "it; nothing was committed. Retry."
        )
    if state in _BAD_TEXT:
        return errors.InvalidInputError(
            f"{detail}. PostgreSQL cannot store this text (a NUL character, or bytes that are "
            "not UTF-8); pass text without them"
        )
    if state == "53100":
        return errors.DiskFullError(
            f"{detail}. The server's disk is full; nothing was committed. Free space and retry."
        )
    if state.startswith("53") or state.startswith("58"):
        return errors.StorageError(f"{detail}. The server ran out of a resource or failed.")
    if state in {"25006", "42501"}:
        return errors.ReadOnlyError(
            f"{detail}. This session may not write here (a read-only transaction, or a role "
            "without the privilege); nothing was changed"
        )
    if state.startswith("23"):
        return errors.ConstraintViolationError(f"{detail}.")
    if state == "XX001":
        return errors.CorruptionError(
            f"{detail}. The server found a damaged data page; restore from a backup or export."
        )
    return errors.SqlError(f"{detail}.")
