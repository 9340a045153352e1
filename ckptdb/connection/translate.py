"""apsw's exceptions turned into ckptdb errors: the one vocabulary callers see."""

from __future__ import annotations

import apsw

from .. import errors

#: What a statement can raise from the driver: apsw's errors, and text that cannot be
#: decoded (a damaged record) or encoded (a lone surrogate in an argument).
DRIVER_ERRORS = (apsw.Error, UnicodeDecodeError, UnicodeEncodeError, MemoryError)

#: The error of a statement SQLite refused for no more specific reason (the class lives
#: with every other one in ckptdb.errors: one vocabulary).
SqlFailure = errors.SqlError


def translate(exc: BaseException, what: str) -> errors.CkptdbError:
    """Map an apsw exception onto the ckptdb hierarchy (the caller keeps the original as
    ``__cause__``); ``what`` names the step that failed."""
    detail = f"{what}: {exc}"
    if isinstance(exc, UnicodeDecodeError):
        return errors.CorruptionError(
            f"{what}: a stored text value is not valid UTF-8 (the record is damaged); run "
            "`ckptdb verify` and restore from a backup or export",
            reason="invalid_text",
        )
    if isinstance(exc, UnicodeEncodeError):
        return errors.InvalidInputError(
            f"{what}: a text argument is not valid Unicode (it holds a lone surrogate, e.g. "
            "from bytes that are not UTF-8); pass valid text"
        )
    if isinstance(exc, MemoryError):
        return errors.CorruptionError(
            f"{what}: SQLite ran out of memory reading a record; a damaged record can claim a "
            "huge size. Run `ckptdb verify`.",
            reason="out_of_memory",
        )
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return errors.BusyTimeoutError(
            f"{detail}. Another process or connection held the lock longer than the busy timeout"
        )
    if isinstance(exc, apsw.FullError):
        return errors.DiskFullError(
            f"{detail}. The disk or quota is full; nothing was committed. Free space and retry."
        )
    if isinstance(exc, apsw.IOError):
        return errors.StorageError(
            f"{detail}. The operating system reported an I/O error; nothing was committed."
        )
    if isinstance(exc, apsw.CorruptError):
        return errors.CorruptionError(
            f"{detail}. The SQLite file structure is damaged; run `ckptdb verify` and restore "
            "from a backup or export."
        )
    if isinstance(exc, apsw.NotADBError):
        return errors.NotADatabaseError(f"{detail}. The file is not an SQLite database.")
    if isinstance(exc, apsw.ReadOnlyError):
        return errors.ReadOnlyError(
            f"{detail}. The database is read-only (opened read-only, or the file or its "
            "directory is not writable)."
        )
    if isinstance(exc, apsw.AuthError):
        return errors.ReadOnlyError(
            "the statement was refused: this connection only reads (INSERT, UPDATE, DELETE, "
            "DDL, ATTACH, VACUUM, transactions and pragmas that set values are not allowed); "
            "nothing was changed"
        )
    if isinstance(exc, apsw.CantOpenError):
        return errors.StorageError(f"{detail}. The file or its -wal/-shm could not be opened.")
    if isinstance(exc, apsw.ConstraintError):
        return errors.ConstraintViolationError(f"{detail}.")
    return SqlFailure(f"{detail}.")


def force_close(raw: apsw.Connection) -> None:
    """Release a connection whatever happens, on a path where another error is already
    being reported: apsw's forced close still lets a VFS error surface, and that second
    error would hide the first (the one that says what went wrong)."""
    try:
        raw.close(True)
    except apsw.Error:
        return  # closed anyway; the caller raises the original error
