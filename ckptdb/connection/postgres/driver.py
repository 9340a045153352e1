"""The connection ckptdb works through on PostgreSQL: statements with the SQLite engine's
parameter marks, explicit transactions and transaction-scoped locks, errors translated.

Its statement methods are those of the SQLite connection (``execute``, ``one``, ``scalar``,
``iterate``, ``executemany``, ``execute_script``, ``changes``) so that the store can run one
statement text on either engine where the two agree. What differs is said by
:attr:`PgConnection.dialect`.

Transactions (see docs/postgresql.md, "Transactions"):

* :meth:`PgConnection.write_transaction` -- ``BEGIN ISOLATION LEVEL READ COMMITTED``. Many
  writers run at once; what SQLite gets by serializing them, a writer here takes explicitly:
  a compare-and-swap ``UPDATE`` (its row lock, then the re-check of its ``WHERE`` on the
  newest row version) or a transaction-scoped advisory lock on a name (:meth:`lock`).
  A COMMIT whose connection is lost is reported as ``CommitOutcomeUnknownError``.
* :meth:`PgConnection.read_transaction` -- ``REPEATABLE READ READ ONLY``: one snapshot for
  every statement of the block, as an SQLite read transaction gives.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ... import errors
from ..busy import LockWaits
from .placeholders import bind
from .session import SESSION_MARK, PgIntegrationSession
from .translate import DRIVER_ERRORS, lost, translate

Row = tuple[Any, ...]
Params = Sequence[Any] | Mapping[str, Any]

#: How long a statement waits for a row or advisory lock before it gives up
#: (``BusyTimeoutError``), as SQLite's busy timeout bounds a writer's wait.
DEFAULT_LOCK_TIMEOUT_S: Final = 5.0


def display_name(url: str) -> str:
    """``url`` as messages show it: user, host, port and database, never the password
    (an unparsable URL is shown as "a PostgreSQL database")."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "a PostgreSQL database"
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = str(parts.get("host") or "")
    port = f":{parts['port']}" if parts.get("port") else ""
    where = f"[{host}]" if host.startswith("/") else host
    return f"postgresql://{user}{where}{port}/{parts.get('dbname') or ''}"


def lock_key(name: str) -> int:
    """The 64-bit advisory-lock key of a name (first 8 bytes of its sha256, signed)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class PgConnection:
    """A psycopg connection plus the few operations ckptdb needs, with errors translated.

    Not shared between threads without the owner's lock (as the SQLite connection)."""

    #: Which engine the store is talking to.
    dialect: Final = "postgresql"

    def __init__(
        self,
        raw: psycopg.Connection[Row],
        url: str,
        readonly: bool,
        *,
        writes_in_transactions_only: bool = False,
    ) -> None:
        self._raw = raw
        #: how messages name this database (the URL without its password), as the SQLite
        #: connection's ``path`` names its file; the URL itself is not kept
        self.path = display_name(url)
        self.readonly = readonly
        self._lock = threading.RLock()
        self._in_transaction = False
        self._writing = False  # the open transaction is a write transaction
        #: True when a statement outside a write transaction cannot write (see ``open``).
        self.writes_in_transactions_only = writes_in_transactions_only or readonly
        # Every session default is read-only then: a write transaction says it writes.
        self._write_begin = "BEGIN ISOLATION LEVEL READ COMMITTED" + (
            " READ WRITE" if writes_in_transactions_only and not readonly else ""
        )
        # A BEGIN not sent yet, and the queries to run right after it (prefetch): they go
        # in one round trip with the transaction's first statement, or just before it when
        # that statement takes parameters (see _begin).
        self._pending: list[tuple[str, Callable[[list[Row]], None] | None]] = []
        self._rowcount = -1
        self._cursor_names = itertools.count()
        #: how often and how long this connection waited for an advisory lock (ckptdb's
        #: own: a namespace, a quota's prefix, the schema) another transaction held
        self.lock_waits = LockWaits(None)
        #: called right after each write transaction began (the handle drops its caches
        #: of rows other writers may change there: this engine has no data version)
        self.on_write_begin: Callable[[], None] | None = None

    @classmethod
    def open(
        cls,
        url: str,
        *,
        readonly: bool = False,
        lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT_S,
        connect_timeout: float = 10.0,
        writes_in_transactions_only: bool = False,
    ) -> PgConnection:
        """Connect to the database at ``url`` (a libpq URL or key=value string).
        ``readonly``: every transaction is read-only (a write is ``ReadOnlyError``).
        ``lock_timeout``: seconds a statement waits for a lock (None: as long as it takes).
        ``writes_in_transactions_only``: a statement outside :meth:`write_transaction` is
        read-only too -- so a read of one statement needs no transaction around it (its own
        snapshot, as on SQLite) and still cannot write (the handle's connection)."""
        if (lock_timeout is not None and lock_timeout <= 0) or connect_timeout <= 0:
            raise errors.InvalidInputError("lock_timeout and connect_timeout must be > 0 s")
        # (0 is PostgreSQL's "no limit"; a timeout below a millisecond rounds up to one.)
        wait_ms = 0 if lock_timeout is None else max(1, round(lock_timeout * 1000))
        options = f"-c lock_timeout={wait_ms}"
        if readonly or writes_in_transactions_only:
            options += " -c default_transaction_read_only=on"
        try:
            raw = psycopg.connect(
                url,
                autocommit=True,  # BEGIN and COMMIT are this class's, never implicit
                connect_timeout=max(1, round(connect_timeout)),
                options=options,
                application_name="ckptdb",
            )
        except DRIVER_ERRORS as exc:
            raise translate(exc, f"connecting to {display_name(url)}") from exc
        return cls(raw, url, readonly, writes_in_transactions_only=writes_in_transactions_only)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent); an open transaction is rolled back by the
        server."""
        self._raw.close()

    def abandon(self) -> None:
        """Close on an error path without raising (another exception is propagating)."""
        try:
            self._raw.close()
        except DRIVER_ERRORS:
            return

    @property
    def lost(self) -> bool:
        """True when the session is gone (the server ended it, crashed, or the network
        dropped it) without this side closing it."""
        return bool(self._raw.broken)

    @property
    def closed(self) -> bool:
        """True once the connection is closed or lost."""
        return bool(self._raw.closed or self._raw.broken)

    @property
    def in_transaction(self) -> bool:
        """True while a transaction of this connection is open."""
        return self._in_transaction

    @property
    def in_write_transaction(self) -> bool:
        """True while a write transaction of this connection is open (a row lock taken
        outside one would be refused, or released at once)."""
        return self._in_transaction and self._writing

    @property
    def backend_pid(self) -> int:
        """The server process serving this connection (``pg_stat_activity.pid``)."""
        return int(self._raw.info.backend_pid)

    # -- statements ----------------------------------------------------------------------

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement and return all its rows (none for a statement without)."""
        text, values = bind(sql, params)
        try:
            with self._lock:
                if not self._pending:
                    cursor = self._raw.execute(text, values)
                elif not values and not sql.startswith(SESSION_MARK):
                    # One round trip for all (the simple protocol takes several statements;
                    # without parameters the text is the caller's, its % signs single). Never
                    # a session's statement: the guard reads the text the client sent, which
                    # must start with the session's mark (migration 5).
                    cursor = self._send_pending(sql)
                else:
                    cursor = self._send_pending_piped(text, values)
                self._rowcount = cursor.rowcount
                return cursor.fetchall() if cursor.description is not None else []
        except DRIVER_ERRORS as exc:
            raise translate(exc, "PostgreSQL") from exc

    def execute_script(self, sql: str) -> None:
        """Run every statement of a script without parameters (a migration)."""
        try:
            with self._lock:
                self._send_pending()
                self._raw.execute(sql.encode(), prepare=False)
        except DRIVER_ERRORS as exc:
            raise translate(exc, "PostgreSQL") from exc

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement once per parameter row (pipelined: one round trip)."""
        if not rows:
            return
        text = bind(sql, rows[0])[0]
        values = [bind(sql, row)[1] for row in rows]
        try:
            with self._lock, self._raw.cursor() as cursor:
                self._send_pending()
                cursor.executemany(text, values)
                self._rowcount = cursor.rowcount
        except DRIVER_ERRORS as exc:
            raise translate(exc, "PostgreSQL") from exc

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row of a query, or None."""
        rows = self.execute(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Params = ()) -> Any:
        """The first column of the first row, or None when there is no row."""
        row = self.one(sql, params)
        return None if row is None else row[0]

    def iterate(self, sql: str, params: Params = (), *, batch: int = 1000) -> Iterator[Row]:
        """Stream the rows of a large query in batches (a server-side cursor, so the whole
        result never sits in memory); inside a transaction, whose snapshot it reads."""
        if not self._in_transaction:
            raise errors.CkptdbError("internal: iterate() needs an open transaction")
        text, values = bind(sql, params)
        with self._lock:
            cursor = self._raw.cursor(name=f"ckptdb_{next(self._cursor_names)}")
        try:
            try:
                with self._lock:
                    self._send_pending()
                cursor.execute(text, values)
                while rows := cursor.fetchmany(batch):
                    yield from rows
            except DRIVER_ERRORS as exc:
                raise translate(exc, "PostgreSQL") from exc
        finally:
            if not self.closed:
                cursor.close()

    def insert_returning(self, sql: str, params: Params, key: str) -> int:
        """Run one ``INSERT`` of a single row and return the identity ``key`` it was given."""
        return int(self.execute(f"{sql} RETURNING {key}", params)[0][0])

    def changes(self) -> int:
        """Rows changed by the most recent INSERT, UPDATE or DELETE."""
        return max(self._rowcount, 0)

    # -- transactions ----------------------------------------------------------------------

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        """``BEGIN`` (read committed) ... ``COMMIT``; ROLLBACK when the block raises. A
        connection lost at COMMIT means the outcome is unknown:
        ``CommitOutcomeUnknownError``, never success."""
        with self._lock:
            if self._in_transaction:
                raise errors.CkptdbError(
                    "internal: write_transaction entered while a transaction is open"
                )
            self._begin(self._write_begin)
            self._writing = True
            try:
                if self.on_write_begin is not None:
                    self.on_write_begin()
                yield
            except BaseException:
                self._rollback_quietly()
                raise
            if self._pending:  # not one statement: nothing to commit
                self._pending = []
                self._in_transaction = self._writing = False
                return
            try:
                self._raw.execute("COMMIT")
            except DRIVER_ERRORS as exc:
                self._in_transaction = self._writing = False
                if lost(exc):
                    raise errors.CommitOutcomeUnknownError(
                        f"COMMIT: the connection to PostgreSQL was lost ({exc}); the "
                        "transaction may or may not have committed. Retry the same call: "
                        "it converges on the same result."
                    ) from exc
                raise translate(exc, "COMMIT") from exc
            self._in_transaction = self._writing = False

    @contextmanager
    def read_transaction(self) -> Iterator[None]:
        """One snapshot for every statement of the block (``REPEATABLE READ READ ONLY``).
        Inside another transaction it simply joins it."""
        with self._lock:
            if self._in_transaction:
                yield
                return
            self._begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield
            except BaseException:
                self._rollback_quietly()
                raise
            if self._pending:  # not one statement: nothing to end
                self._pending = []
                self._in_transaction = self._writing = False
                return
            try:
                self._raw.execute("COMMIT")
            except DRIVER_ERRORS as exc:
                raise translate(exc, "end of read transaction") from exc
            finally:
                self._in_transaction = self._writing = False

    @contextmanager
    def savepoint(self, name: str = "ckptdb_member") -> Iterator[None]:
        """``SAVEPOINT name`` ... ``RELEASE`` inside the open transaction. An error in the
        block rolls back to the savepoint -- undoing only the block's writes, and leaving
        the transaction usable (a failed statement would otherwise abort all of it) -- and
        propagates."""
        with self._lock:
            if not self._in_transaction:
                raise errors.CkptdbError("internal: savepoint outside a transaction")
            self.execute(f"SAVEPOINT {name}")
            try:
                yield
            except BaseException:
                if not self.closed:
                    try:
                        self._raw.execute(f"ROLLBACK TO SAVEPOINT {name}")
                        self._raw.execute(f"RELEASE SAVEPOINT {name}")
                    except DRIVER_ERRORS:
                        self._rollback_quietly()
                raise
            self.execute(f"RELEASE SAVEPOINT {name}")

    def lock(self, name: str) -> None:
        """Take the transaction-scoped advisory lock of ``name``: another transaction that
        asks for it waits until this one ends (up to the lock timeout: BusyTimeoutError)."""
        if not self._in_transaction:
            raise errors.CkptdbError("internal: an advisory lock needs an open transaction")
        # The key inline (an integer): a statement without parameters goes in one round
        # trip with a BEGIN not sent yet -- a write transaction's first statement is often
        # this lock. The statement tries it without waiting first and says whether it
        # then had to wait (counted in ``lock_waits``), in the same round trip: a second
        # one for a busy lock cost a contended fleet 15 % of its commits.
        key = lock_key(name)
        started = time.monotonic()
        waited = 0
        try:
            waited = self.scalar(
                f"SELECT CASE WHEN pg_try_advisory_xact_lock({key}) THEN 0 ELSE (SELECT 1"
                f" FROM (SELECT pg_advisory_xact_lock({key})) AS waited) END"
            )
        except errors.BusyTimeoutError:  # gave up waiting (lock timeout, deadlock)
            waited = 1
            raise
        finally:
            if waited:
                self.lock_waits.waits += 1
                self.lock_waits.seconds += time.monotonic() - started

    def try_lock(self, name: str) -> bool:
        """:meth:`lock` without waiting: False when another transaction holds ``name``."""
        if not self._in_transaction:
            raise errors.CkptdbError("internal: an advisory lock needs an open transaction")
        return bool(self.scalar(f"SELECT pg_try_advisory_xact_lock({lock_key(name)})"))

    def stream_readonly(
        self, sql: str, params: Params, timeout: float | None
    ) -> AbstractContextManager[tuple[list[str], Iterator[Row]]]:
        """An operator's one read-only statement, streamed (see :mod:`.query`)."""
        from . import query  # noqa: PLC0415 - the operator's path only

        return query.stream_readonly(self, sql, params, timeout)

    def raw_for_query(self) -> psycopg.Connection[Row]:
        """The driver's connection inside the open transaction, its BEGIN sent -- for
        :mod:`.query` alone, which streams through a server-side cursor of its own."""
        with self._lock:
            try:
                self._send_pending()
            except DRIVER_ERRORS as exc:
                raise translate(exc, "BEGIN") from exc
        return self._raw

    def integration_session(self, protected: frozenset[str]) -> PgIntegrationSession:
        """A session for an integration's statements inside the open transaction, kept off
        ckptdb's tables by the guard triggers (``protected`` is what the schema's triggers
        guard: ckptdb's core tables) -- see :mod:`.session`."""
        del protected  # the schema names them (migration 4), not the caller
        if not self._in_transaction and not self.writes_in_transactions_only:
            raise errors.CkptdbError("internal: an integration session needs a transaction")
        return PgIntegrationSession(self)

    def _begin(self, statement: str) -> None:
        """Open a transaction: ``statement`` is sent with the transaction's first statement
        (one round trip less when that one takes no parameters), or not at all when the
        block runs none. A BEGIN cannot fail on its own but for a lost connection, which
        the first statement reports all the same."""
        self._pending = [(statement, None)]
        self._in_transaction = True

    def prefetch(self, sql: str, deliver: Callable[[list[Row]], None]) -> None:
        """Run the query ``sql`` (no parameters) right after the BEGIN of the transaction
        just opened, in the same round trip as it, and hand its rows to ``deliver`` then:
        a read every transaction needs (the quota rules) costs no round trip of its own.
        Outside a transaction whose BEGIN is still to be sent, it runs at once."""
        with self._lock:
            if self._pending:
                self._pending.append((sql, deliver))
                return
        deliver(self.execute(sql))

    def _send_pending(self, then: str | None = None) -> Any:
        """Send the BEGIN not sent yet and the queries to run after it, and ``then`` (a
        statement without parameters), as one simple-protocol round trip; deliver the
        queries' rows; return the cursor on ``then``'s result. Nothing to send: None (the
        caller holds the lock and translates errors)."""
        pending, self._pending = self._pending, []
        if not pending:
            return None
        texts = [sql for sql, _ in pending] + ([then] if then is not None else [])
        cursor = self._raw.execute("; ".join(texts).encode(), prepare=False)
        for i, (_, deliver) in enumerate(pending):
            if i:
                cursor.nextset()
            if deliver is not None:
                deliver(cursor.fetchall())
        if then is not None:
            cursor.nextset()
        return cursor

    def _send_pending_piped(self, text: Any, values: Any) -> Any:
        """Send the BEGIN not sent yet, the queries to run after it and the statement
        ``text`` with its parameters in one pipeline (one round trip: the extended protocol
        keeps each statement's own text, so a session's statement is still the text the
        guard reads); deliver the queries' rows; return the cursor on the statement."""
        pending, self._pending = self._pending, []
        with self._raw.pipeline():
            sent = [(self._raw.execute(sql.encode(), prepare=False), then) for sql, then in pending]
            cursor = self._raw.execute(text, values)
        for query, deliver in sent:
            if deliver is not None:
                deliver(query.fetchall())
        return cursor

    def _rollback_quietly(self) -> None:
        # A failing ROLLBACK (the connection is gone) is secondary to the error already
        # propagating: the server rolls back a transaction whose session ended.
        self._in_transaction = self._writing = False
        if self._pending:  # never sent: nothing to roll back
            self._pending = []
            return
        if self.closed:
            return
        try:
            self._raw.execute("ROLLBACK")
        except DRIVER_ERRORS:
            return
