"""The one module that talks to apsw.

Everything SQLite-specific about *how* we talk to the file lives here: open flags, the
per-connection pragmas, the busy handler, the explicit write-transaction helper and the
translation of apsw exceptions into ckptdb errors. Modules above this one issue SQL through
:class:`Connection` and never see an apsw object or exception.

Settings and why (see also docs/performance.md):

* ``journal_mode=WAL`` -- readers never block writers and a commit is one append + fsync.
* ``synchronous=FULL`` by default -- in WAL mode this fsyncs the WAL on every commit, so an
  acknowledged commit survives power loss. ``NORMAL`` is available for callers that accept
  losing the last commits on power loss (the file stays consistent either way).
* ``foreign_keys=ON`` -- the schema uses foreign keys as a last line of defence (an entry
  never names a missing blob, a pin never a missing checkpoint; since schema v6 the CURRENT
  pointer's rule is checked by the code that deletes checkpoints instead, see
  migrations/0006).
* A busy handler that polls about every millisecond up to ``busy_timeout`` seconds --
  SQLite's default back-off hands the lock over in ~29 ms, polling in <1 ms -- so concurrent
  writers queue instead of failing; past the timeout the caller gets ``BusyTimeoutError``.
* ``trusted_schema=OFF`` and ``SQLITE_DBCONFIG_DEFENSIVE`` -- a file handed to us may be
  hostile; it must not be able to run functions from its schema or let SQL corrupt it.
* ``journal_size_limit`` -- large staged blobs grow the WAL; truncate it back after a
  checkpoint so the disk space is returned.
* page size and ``auto_vacuum=INCREMENTAL`` are fixed when the file is created
  (:func:`initialize_new_file`): they cannot change once tables exist in WAL mode.
"""

from __future__ import annotations

import os
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import apsw

from .. import errors
from . import walhook

Synchronous = Literal["off", "normal", "full", "extra"]
SqlValue = None | int | float | str | bytes
Row = tuple[Any, ...]
Params = Sequence[Any] | dict[str, Any]

#: ``PRAGMA application_id`` of every ckptdb file: the bytes "ckpt" read as a big-endian int.
APPLICATION_ID = 0x636B7074
#: Page size of a new file. Measured against 8 and 16 KiB (docs/performance.md): 4 KiB
#: is faster for small commits (every page a commit touches goes to the WAL and is
#: fsynced) and no slower for large ones (chunks are overflow pages either way).
DEFAULT_PAGE_SIZE = 4096
DEFAULT_BUSY_TIMEOUT = 30.0
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
CACHE_SIZE_KIB = 8 * 1024
_BUSY_POLL_SECONDS = 0.001
#: Tables Litestream creates in every database it replicates (known companions of the
#: ckptdb schema). A file that holds them is, or was, replicated: ckptdb then leaves every
#: WAL restart to Litestream (see :meth:`Connection.litestream_managed`).
LITESTREAM_TABLES = ("_litestream_seq", "_litestream_lock")

_T = TypeVar("_T")


def sqlite_version() -> str:
    """The version of the SQLite library ckptdb runs on (bundled with apsw)."""
    return str(apsw.sqlite_lib_version())


def _translate(exc: BaseException, what: str) -> errors.CkptdbError:
    """Map an apsw exception onto the ckptdb hierarchy (the original is kept as __cause__)."""
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
            f"{detail}. Another process held the write lock longer than the busy timeout; "
            "retry, or open the database with a larger busy_timeout."
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
        return ConstraintViolation(f"{detail}.")
    return SqlFailure(f"{detail}.")


# The error classes live with every other one in ckptdb.errors (one vocabulary).
ConstraintViolation = errors.ConstraintViolationError
SqlFailure = errors.SqlError


#: apsw's "bind nothing yet" marker (what apsw.ext.query_info passes to prepare a statement
#: without its parameters).
_NULL_BINDINGS: Any = getattr(apsw, "_null_bindings")  # noqa: B009 - private, so no attribute


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


#: What a statement can raise from the driver: apsw's errors, and text that cannot be
#: decoded (a damaged record) or encoded (a lone surrogate in an argument).
_DRIVER_ERRORS = (apsw.Error, UnicodeDecodeError, UnicodeEncodeError, MemoryError)

_READ_ACTIONS = frozenset(
    {apsw.SQLITE_SELECT, apsw.SQLITE_READ, apsw.SQLITE_FUNCTION, apsw.SQLITE_RECURSIVE}
)
#: Pragmas an operator may read (``PRAGMA name``, no value).
_READ_PRAGMAS = frozenset(
    {
        "application_id", "collation_list", "compile_options", "database_list",
        "freelist_count", "function_list", "integrity_check", "journal_mode", "page_count",
        "page_size", "quick_check", "schema_version", "table_list", "user_version",
    }
)  # fmt: skip
#: Pragmas whose argument names what to read (``PRAGMA table_info(t)``), never a new value.
_READ_PRAGMAS_WITH_ARG = frozenset(
    {
        "foreign_key_list", "index_info", "index_list", "index_xinfo", "integrity_check",
        "quick_check", "table_info", "table_xinfo",
    }
)  # fmt: skip


def _authorize_read(
    action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None
) -> int:
    """The authorizer of operator queries: reading only (see query_readonly)."""
    if action in _READ_ACTIONS:
        return int(apsw.SQLITE_OK)
    if action == apsw.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        if (arg2 is None and name in _READ_PRAGMAS) or name in _READ_PRAGMAS_WITH_ARG:
            return int(apsw.SQLITE_OK)
    return int(apsw.SQLITE_DENY)


def _close_blob(blob: apsw.Blob) -> None:
    """Close a blob handle on a path where its read already failed: the close repeats that
    error, which is reported (translated) by the caller."""
    try:
        blob.close()
    except apsw.Error:
        return


def _force_close(raw: apsw.Connection) -> None:
    """Release a connection whatever happens, on a path where another error is already
    being reported: apsw's forced close still lets a VFS error surface, and that second
    error would hide the first (the one that says what went wrong)."""
    try:
        raw.close(True)
    except apsw.Error:
        return  # closed anyway; the caller raises the original error


class LockWaits:
    """How often and how long this connection waited for a lock another one held, and how
    long it is willing to wait (``timeout``; None = forever)."""

    def __init__(self, timeout: float | None = DEFAULT_BUSY_TIMEOUT) -> None:
        self.waits = 0
        self.seconds = 0.0
        self.timeout = timeout


def _busy_handler(stats: LockWaits) -> Callable[[int], bool]:
    deadline_box: list[float] = [0.0, 0.0]

    def handler(count: int) -> bool:
        now = time.monotonic()
        if count == 0:
            timeout = stats.timeout
            deadline_box[0] = now + (timeout if timeout is not None else float("inf"))
            deadline_box[1] = now
            stats.waits += 1
        if now >= deadline_box[0]:
            stats.seconds += now - deadline_box[1]
            return False
        # Poll every millisecond at first (a commit usually hands the lock over within a
        # few), then back off with jitter up to 20 ms: every retry starts and ends a read
        # transaction, and a crowd of writers retrying at 1 kHz each keeps dirtying the
        # shared-memory index, which on ext4 can stall the lock holder's fsync for seconds.
        delay = _BUSY_POLL_SECONDS if count < 10 else min(0.02, 0.001 * 1.3 ** (count - 10))
        time.sleep(delay * (0.5 + random.random()))  # noqa: S311 - jitter, not crypto
        stats.seconds += time.monotonic() - now
        return True

    return handler


class Connection:
    """An apsw connection plus the few operations ckptdb needs, with errors translated.

    Not shared between threads without the owner's lock: :class:`ckptdb.Database` holds
    one per handle and serializes access itself.
    """

    def __init__(
        self,
        raw: apsw.Connection,
        path: str,
        readonly: bool,
        synchronous: Synchronous = "full",
        lock_waits: LockWaits | None = None,
    ) -> None:
        self._raw = raw
        self.path = path
        self.readonly = readonly
        self.synchronous = synchronous
        self.lock_waits = lock_waits or LockWaits()
        self._lock = threading.RLock()
        #: Called inside every write transaction, right after ``BEGIN IMMEDIATE`` and before
        #: the caller's first statement: it sees the file as it is under the write lock,
        #: not as it was when this connection opened (ops/handle.py turns ``secure_delete``
        #: on there once the file has key scopes).
        self.on_write_begin: Callable[[], None] | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent).

        Closing the last connection checkpoints the WAL, which writes; if that fails the
        connection is still released and the error is raised (the data is safe in the WAL
        and the next open recovers it).
        """
        try:
            if not self.readonly and self._replicated_quietly():
                # Replicated: the checkpoint-and-delete of the WAL on last close is Litestream's.
                self._raw.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
            self._raw.close()
        except apsw.Error as exc:
            self._raw.close(True)
            raise _translate(exc, "closing the database") from exc

    def abandon(self) -> None:
        """Close on an error path, while another exception is already propagating: a
        failure to close (e.g. the final checkpoint hitting the same I/O error) must not
        replace that exception. The WAL keeps the data; the next open recovers it."""
        _force_close(self._raw)

    def litestream_managed(self) -> bool:
        """True when Litestream has set this file up for replication (its tables exist).

        While a file is replicated, Litestream alone may restart the WAL: ckptdb then runs
        only PASSIVE checkpoints, none on close, and sets no WAL size limit. Litestream's
        tables stay in the file (and in restored copies), so this holds for a file that was
        ever replicated -- by ``ckptdb replicate`` or by a Litestream run any other way."""
        marks = ",".join("?" * len(LITESTREAM_TABLES))
        found = self.scalar(
            f"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ({marks})",
            LITESTREAM_TABLES,
        )
        return bool(found)

    def _replicated_quietly(self) -> bool:
        try:
            return self.litestream_managed()
        except errors.CkptdbError:
            return False  # a damaged schema: closing must still release the connection

    @property
    def in_transaction(self) -> bool:
        """True while a transaction is open on this connection."""
        return bool(self._raw.in_transaction)

    # -- statements ----------------------------------------------------------------------

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement and return all its rows."""
        try:
            return self._raw.execute(sql, params).fetchall()
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, "SQLite") from exc

    def execute_script(self, sql: str) -> None:
        """Run every statement of a script (the cursor is drained so none is skipped)."""
        try:
            for _ in self._raw.execute(sql):
                pass
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, "SQLite") from exc

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement once per parameter row."""
        if not rows:
            return
        try:
            for _ in self._raw.executemany(sql, rows):
                pass
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, "SQLite") from exc

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row of a query, or None."""
        try:
            for row in self._raw.execute(sql, params):
                return tuple(row)
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, "SQLite") from exc
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
            except _DRIVER_ERRORS as exc:
                raise _translate(exc, "SQLite") from exc
        finally:
            cursor.close()

    def query(self, sql: str, params: Params = ()) -> tuple[list[str], list[Row]]:
        """Column names and rows of one statement (for the read-only SQL console)."""
        cursor = self._raw.cursor()
        try:
            cursor.execute(sql, params)
            try:
                names = [d[0] for d in cursor.get_description()]
            except apsw.ExecutionCompleteError:
                names = []
            rows = cursor.fetchall() if names else []
            return names, rows
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, "SQL") from exc
        finally:
            cursor.close()

    def write_blob(self, table: str, column: str, rowid: int, data: bytes | memoryview) -> None:
        """Write ``data`` into a zeroblob of the same length with incremental blob I/O."""
        try:
            blob = self._raw.blob_open("main", table, column, rowid, True)
            try:
                blob.write(data)
            finally:
                blob.close()
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, f"writing {table}.{column}") from exc

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
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, f"reading {table}.{column}") from exc
        try:
            out = read(blob)
        except _DRIVER_ERRORS as exc:
            _close_blob(blob)
            raise _translate(exc, f"reading {table}.{column}") from exc
        try:
            blob.close()
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, f"reading {table}.{column}") from exc
        return out

    def query_readonly(self, sql: str, params: Params = ()) -> tuple[list[str], list[Row]]:
        """Run an operator's query with an authorizer that allows reading only.

        Anything that would write -- INSERT/UPDATE/DELETE, DDL, ATTACH/DETACH, VACUUM
        (including VACUUM INTO), transactions, pragmas that set a value -- is refused before
        it runs, whatever the connection's own mode.
        """

        with self._lock:
            self._raw.set_authorizer(_authorize_read)
            try:
                return self.query(sql, params)
            except SqlFailure as exc:
                raise errors.InvalidQueryError(
                    f"{exc} Check the query (one read-only statement: SELECT, WITH or a "
                    "read-only PRAGMA); schema/README.md lists the tables and views."
                ) from exc
            finally:
                self._raw.set_authorizer(None)

    # -- operator queries, one statement at a time (issue 12; policy in ckptdb.ops.query) -----

    def prepare_readonly(self, sql: str) -> PreparedStatement:
        """Prepare -- never run -- the first statement of ``sql`` under the read-only
        authorizer: its text, the text after it and its parameter names. A statement that
        would write is refused here (ReadOnlyError), before anything runs."""
        found: list[PreparedStatement] = []

        def trace(cursor: apsw.Cursor, first: str, _bindings: Any) -> bool:
            names = tuple(cursor.bindings_names)
            found.append(PreparedStatement(first, sql[len(first) :], names, bool(cursor.has_vdbe)))
            return False  # stop: prepared only

        with self._lock:
            cursor = self._raw.cursor()
            cursor.exec_trace = trace
            self._raw.set_authorizer(_authorize_read)
            try:
                cursor.execute(sql, _NULL_BINDINGS)
            except apsw.ExecTraceAbort:
                pass
            except _DRIVER_ERRORS as exc:
                raise _translate(exc, "SQL") from exc
            finally:
                self._raw.set_authorizer(None)
                cursor.close()
        return found[0] if found else PreparedStatement("", "", (), False)

    @contextmanager
    def stream_readonly(
        self, sql: str, params: Params, check: Callable[[], None], steps: int = 1000
    ) -> Iterator[tuple[list[str], Iterator[Row]]]:
        """Run ``sql`` (one statement, see :meth:`prepare_readonly`) under the read-only
        authorizer and yield its column names (in order, repeats kept) and a row iterator
        that reads one row at a time. ``check`` is called every ``steps`` virtual-machine
        steps while SQLite works; whatever it raises (a timeout, KeyboardInterrupt from
        Ctrl-C) interrupts the statement and propagates. The statement is finalized and
        the handlers removed when the block ends, however it ends."""

        def progress() -> bool:
            check()
            return False

        with self._lock:
            cursor = self._raw.cursor()
            prepared: list[str] = []

            def trace(traced: apsw.Cursor, _sql: str, _bindings: object) -> bool:
                # Column names while the statement is prepared: a query that returns no
                # rows still has them (its output still gets a header).
                prepared[:] = [d[0] for d in traced.get_description()]
                return True

            cursor.exec_trace = trace
            self._raw.set_authorizer(_authorize_read)
            self._raw.set_progress_handler(progress, steps)
            try:
                try:
                    cursor.execute(sql, params)
                    complete = False
                    try:
                        names = [d[0] for d in cursor.get_description()]
                    except apsw.ExecutionCompleteError:
                        names, complete = list(prepared), True
                except _DRIVER_ERRORS as exc:
                    raise _translate(exc, "SQL") from exc

                def rows() -> Iterator[Row]:
                    if not names or complete:
                        return
                    try:
                        for row in cursor:
                            yield tuple(row)
                    except _DRIVER_ERRORS as exc:
                        raise _translate(exc, "SQL") from exc

                yield names, rows()
            finally:
                self._raw.set_progress_handler(None)
                self._raw.set_authorizer(None)
                with suppress(apsw.Error):
                    cursor.close(True)

    @contextmanager
    def progress_check(self, check: Callable[[], None], steps: int = 1000) -> Iterator[None]:
        """Call ``check`` every ``steps`` virtual-machine steps of every statement run in
        the block; whatever it raises interrupts the statement and propagates (a deadline
        for reads of a foreign file, e.g. an import source)."""

        def progress() -> bool:
            check()
            return False

        with self._lock:
            self._raw.set_progress_handler(progress, steps)
            try:
                yield
            finally:
                self._raw.set_progress_handler(None)

    def changes(self) -> int:
        """Rows changed by the most recent INSERT/UPDATE/DELETE."""
        return int(self._raw.changes())

    def last_insert_rowid(self) -> int:
        """Rowid of the most recent successful INSERT."""
        return int(self._raw.last_insert_rowid())

    def pragma(self, name: str, value: SqlValue = None) -> Any:
        """Read (value None) or set one pragma; returns the first column of its result."""
        try:
            return self._raw.pragma(name, value) if value is not None else self._raw.pragma(name)
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, f"PRAGMA {name}") from exc

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``, never a silent savepoint.

        An error inside the block rolls back (only if a transaction is still open) and the
        original error propagates. An I/O error *at* COMMIT means the outcome is unknown:
        it is reported as :class:`ckptdb.errors.CommitOutcomeUnknownError`, never as success.
        """
        with self._lock:
            if self._raw.in_transaction:
                raise errors.CkptdbError(
                    "internal: write_transaction entered while a transaction is open"
                )
            try:
                self._raw.execute("BEGIN IMMEDIATE")
            except apsw.Error as exc:
                raise _translate(exc, "BEGIN IMMEDIATE") from exc
            try:
                if self.on_write_begin is not None:
                    self.on_write_begin()
                yield
            except BaseException:
                self._rollback_quietly()
                raise
            try:
                self._raw.execute("COMMIT")
            except apsw.BusyError as exc:
                # COMMIT could not get its lock: the transaction is still open and has not
                # committed, so the outcome is known (nothing written).
                self._rollback_quietly()
                raise _translate(exc, "COMMIT") from exc
            except apsw.FullError as exc:
                # Out of space while writing the transaction's frames: the commit record is
                # what could not be written, so nothing is published. Said as disk_full --
                # free space first; a retry then converges as after any failed commit.
                self._rollback_quietly()
                raise errors.DiskFullError(
                    f"COMMIT failed: the disk is full ({exc}). Nothing was acknowledged. Free "
                    "space, then retry: the retry converges on the same result."
                ) from exc
            except apsw.Error as exc:
                self._rollback_quietly()
                raise errors.CommitOutcomeUnknownError(
                    f"COMMIT failed ({type(exc).__name__}: {exc}); the outcome is unknown. "
                    "Nothing was acknowledged. Retrying the same operation is safe: it "
                    "converges on the same result whether or not this attempt landed."
                ) from exc

    @contextmanager
    def savepoint(self, name: str = "ckptdb_member") -> Iterator[None]:
        """``SAVEPOINT name`` ... ``RELEASE name`` inside the open write transaction.

        An error in the block rolls back to the savepoint -- undoing only the block's
        writes -- and propagates. Some errors (I/O, disk full) make SQLite roll back the
        whole transaction itself; and if ``ROLLBACK TO`` fails the transaction is rolled
        back here. Either way :attr:`in_transaction` is then False, which is how the
        caller tells "only this block was undone" from "everything was undone".
        """
        with self._lock:
            if not self._raw.in_transaction:
                raise errors.CkptdbError("internal: savepoint outside a transaction")
            try:
                self._raw.execute(f"SAVEPOINT {name}")
            except apsw.Error as exc:
                raise _translate(exc, "SAVEPOINT") from exc
            try:
                yield
            except BaseException:
                if self._raw.in_transaction:
                    try:
                        self._raw.execute(f"ROLLBACK TO {name}")
                        self._raw.execute(f"RELEASE {name}")
                    except apsw.Error:
                        # Undoing the block failed: what the transaction holds is no longer
                        # known, so none of it may commit.
                        self._rollback_quietly()
                raise
            try:
                self._raw.execute(f"RELEASE {name}")
            except apsw.Error as exc:
                self._rollback_quietly()
                raise _translate(exc, "RELEASE") from exc

    @contextmanager
    def read_transaction(self) -> Iterator[None]:
        """A consistent snapshot for several reads (``BEGIN`` ... ``COMMIT``).

        Nested use (inside a write or read transaction) simply joins the open transaction.
        """
        with self._lock:
            if self._raw.in_transaction:
                yield
                return
            try:
                self._raw.execute("BEGIN")
            except apsw.Error as exc:
                raise _translate(exc, "BEGIN") from exc
            try:
                yield
            finally:
                if self._raw.in_transaction:
                    try:
                        self._raw.execute("COMMIT")
                    except apsw.Error as exc:
                        self._rollback_quietly()
                        raise _translate(exc, "end of read transaction") from exc

    def _rollback_quietly(self) -> None:
        # Only roll back what is open: apsw would otherwise replace the real error with
        # "cannot rollback - no transaction is active". A failing ROLLBACK is secondary to
        # the error already propagating, so it is recorded as a note on that error instead.
        if self._raw.in_transaction:
            try:
                self._raw.execute("ROLLBACK")
            except apsw.Error:
                # The connection is unusable after a failed rollback; SQLite rolls the
                # transaction back itself when the connection closes or is reused.
                return

    @contextmanager
    def relaxed_sync(self) -> Iterator[None]:
        """Run the block with synchronous=NORMAL (no fsync per commit), then restore.

        Only for writes that a later synchronous commit makes durable (staged chunks).
        """
        if self.synchronous not in ("full", "extra"):
            yield
            return
        self.pragma("synchronous", "NORMAL")
        try:
            yield
        finally:
            self.pragma("synchronous", self.synchronous.upper())

    # -- maintenance --------------------------------------------------------------------

    def wal_checkpoint(
        self, mode: Literal["PASSIVE", "FULL", "RESTART", "TRUNCATE"], wait: float | None = None
    ) -> Row:
        """Run a WAL checkpoint; returns (busy, log frames, checkpointed frames).

        RESTART and TRUNCATE block new writers while they wait for readers to leave old
        snapshots: ``wait`` bounds that wait (seconds) instead of the busy timeout, so
        reclaiming space never starves writers behind a steady stream of readers.
        """
        if walhook.replicator_running(self.path):
            return (0, -1, -1)  # only Litestream checkpoints a file it replicates (walhook)
        if mode != "PASSIVE" and self.litestream_managed():
            mode = "PASSIVE"  # a WAL restart under Litestream would break its replication
        previous = self.lock_waits.timeout
        if wait is not None:
            self.lock_waits.timeout = wait
        try:
            row = self.one(f"PRAGMA wal_checkpoint({mode})")
        except errors.BusyTimeoutError:
            return (1, -1, -1)
        finally:
            self.lock_waits.timeout = previous
        return row if row is not None else (0, 0, 0)

    def empty_wal_for_replicator(self, wait: float) -> bool:
        """Checkpoint every frame and truncate the WAL to nothing, for a replicator about to
        start (it holds the replicator lock, so no ckptdb connection restarts the WAL until
        Litestream runs). Returns False if readers kept it from finishing within ``wait``.

        Litestream 0.5.x, starting on a WAL that another connection restarted while no
        Litestream ran, trusts its old position as long as the frame it last copied is
        still at its offset (a shorter new generation leaves old frames behind it), and
        never ships what the old generation held after that frame. An empty WAL makes it
        take a snapshot instead."""
        previous = self.lock_waits.timeout
        self.lock_waits.timeout = wait
        try:
            row = self.one("PRAGMA wal_checkpoint(TRUNCATE)")
        except errors.BusyTimeoutError:
            return False
        finally:
            self.lock_waits.timeout = previous
        return row is None or not row[0]

    def backup_to(self, dest_path: str) -> None:
        """Copy a consistent snapshot of the database to a new file (online backup API)."""
        dest = apsw.Connection(dest_path)
        try:
            with dest.backup("main", self._raw, "main") as backup:
                while not backup.done:
                    backup.step(1024)
        except apsw.Error as exc:
            raise _translate(exc, "backup") from exc
        finally:
            dest.close()


def open_connection(
    path: str,
    *,
    readonly: bool = False,
    synchronous: Synchronous = "full",
    busy_timeout: float | None = DEFAULT_BUSY_TIMEOUT,
    vfs: str | None = None,
) -> Connection:
    """Open an existing file (the caller has created/probed it) with ckptdb's settings."""
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    try:
        raw = (
            apsw.Connection(path, flags=flags, vfs=vfs)
            if vfs
            else apsw.Connection(path, flags=flags)
        )
    except apsw.Error as exc:
        raise _translate(exc, f"opening {path}") from exc
    waits = LockWaits(busy_timeout)
    try:
        raw.set_busy_handler(_busy_handler(waits))
        raw.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
        raw.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
        for pragma, value in (
            ("foreign_keys", "ON"),
            ("synchronous", synchronous.upper()),
            ("cache_size", -CACHE_SIZE_KIB),
            ("journal_size_limit", JOURNAL_SIZE_LIMIT),
        ):
            raw.pragma(pragma, value)
        conn = Connection(raw, path, readonly, synchronous, waits)
        if not readonly:
            # Replaces SQLite's automatic checkpoint: none while a replicator runs (walhook).
            raw.set_wal_hook(walhook.wal_hook(path))
        if not readonly and conn._replicated_quietly():
            raw.pragma("journal_size_limit", -1)  # Litestream decides when the WAL shrinks
    except apsw.Error as exc:
        _force_close(raw)  # the configuration error is the one to report
        raise _translate(exc, f"configuring {path}") from exc
    return conn


def open_probe(path: str) -> Connection:
    """A read-only, non-creating connection used to inspect a file before trusting it.

    Read-only so that opening a foreign database can never roll back its journal or
    otherwise change a byte of it. When no -wal file exists the main file holds the whole
    database, so it is opened ``immutable``: SQLite then creates no -wal/-shm beside a
    file we may be about to refuse.
    """
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    wal = path + "-wal"
    immutable = not os.path.exists(wal) or os.path.getsize(wal) == 0
    uri = "file:" + urllib.parse.quote(os.path.abspath(path))
    if immutable:
        uri += "?immutable=1"
    try:
        raw = apsw.Connection(uri, flags=flags)
        raw.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
        raw.set_busy_handler(_busy_handler(LockWaits()))
    except apsw.Error as exc:
        raise _translate(exc, f"opening {path}") from exc
    return Connection(raw, path, readonly=True)


def initialize_new_file(conn: Connection, page_size: int) -> None:
    """Fix the settings that can only be chosen before the first table exists.

    Must run on an empty file: page size and auto-vacuum are baked into the file header
    once any table is created, and the page size cannot change in WAL mode.
    """
    conn.pragma("page_size", page_size)
    conn.pragma("auto_vacuum", "INCREMENTAL")
    # A cache size given in KiB was turned into a page count at the old page size.
    conn.pragma("cache_size", -CACHE_SIZE_KIB)
    mode = _switch_to_wal(conn)
    if str(mode).lower() != "wal":
        raise errors.StorageError(
            f"could not switch {conn.path} to WAL mode (got {mode!r}); the filesystem may not "
            "support shared memory (network filesystems do not)"
        )


def _switch_to_wal(conn: Connection) -> object:
    """``PRAGMA journal_mode=WAL``, retried within the busy timeout.

    When several processes create the same file at once, SQLite answers this pragma with
    SQLITE_BUSY without calling the busy handler: the connection holds a read lock and
    would have to wait for another that is switching the file, and waiting there could
    deadlock. Retrying the whole statement drops that read lock first."""
    waits = conn.lock_waits
    deadline = time.monotonic() + (waits.timeout if waits.timeout is not None else float("inf"))
    delay = _BUSY_POLL_SECONDS
    while True:
        try:
            return conn._raw.pragma("journal_mode", "WAL")
        except apsw.BusyError as exc:
            now = time.monotonic()
            if now >= deadline:
                raise _translate(exc, "PRAGMA journal_mode") from exc
            waits.waits += 1
            time.sleep(min(delay, deadline - now))
            waits.seconds += time.monotonic() - now
            delay = min(0.02, delay * 1.5)
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, "PRAGMA journal_mode") from exc


def ensure_wal(conn: Connection) -> None:
    """Put an existing ckptdb file (back) into WAL mode if something switched it off."""
    mode = str(conn.pragma("journal_mode")).lower()
    if mode != "wal" and str(_switch_to_wal(conn)).lower() != "wal":
        raise errors.StorageError(f"could not switch {conn.path} to WAL mode")


def open_memory() -> Connection:
    """A private in-memory database (to build the schema a set of migrations produces)."""
    try:
        raw = apsw.Connection(":memory:")
        raw.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
    except apsw.Error as exc:
        raise _translate(exc, "opening an in-memory database") from exc
    return Connection(raw, ":memory:", readonly=False)


def open_foreign_readonly(path: str) -> Connection:
    """A read-only connection on a file another program wrote (an import source):
    :func:`open_probe` -- read-only, ``immutable`` when no WAL is beside it,
    ``trusted_schema=OFF`` -- plus ``SQLITE_DBCONFIG_DEFENSIVE``. Bound its reads with
    :meth:`Connection.progress_check`."""
    conn = open_probe(path)
    try:
        conn._raw.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
    except apsw.Error as exc:
        _force_close(conn._raw)
        raise _translate(exc, f"configuring {path}") from exc
    return conn
