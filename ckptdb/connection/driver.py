"""The connection ckptdb works through: statements (from :class:`StatementRunner`),
explicit transactions, WAL maintenance and the authorizer slot shared by the read-only
sandbox (operator SQL) and integration sessions."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, Literal

import apsw

from .. import errors
from . import sandbox, walhook
from .busy import LockWaits, write_lock_timeout
from .checkpointer import Checkpointer
from .confinement import Confinement, IntegrationSession
from .statements import Params, Row, StatementRunner
from .translate import force_close, translate

Synchronous = Literal["off", "normal", "full", "extra"]
Authorizer = Callable[[int, str | None, str | None, str | None, str | None], int]


class Connection(StatementRunner):
    """An apsw connection plus the few operations ckptdb needs, with errors translated.

    Not shared between threads without the owner's lock: :class:`ckptdb.Database` holds
    one per handle and serializes access itself.
    """

    #: Which engine the store is talking to (the PostgreSQL connection says "postgresql").
    dialect: Final = "sqlite"

    def __init__(
        self,
        raw: apsw.Connection,
        path: str,
        readonly: bool,
        synchronous: Synchronous = "full",
        lock_waits: LockWaits | None = None,
    ) -> None:
        super().__init__(raw)
        self.path = path
        self.readonly = readonly
        self.synchronous = synchronous
        self.lock_waits = lock_waits or LockWaits()
        self._lock = threading.RLock()
        #: Installed by the first integration session and kept (see .confinement).
        self._confinement: Confinement | None = None
        #: Called inside every write transaction, right after ``BEGIN IMMEDIATE`` and before
        #: the caller's first statement: it sees the file as it is under the write lock,
        #: not as it was when this connection opened (ops/handle.py turns ``secure_delete``
        #: on there once the file has key scopes).
        self.on_write_begin: Callable[[], None] | None = None
        #: Runs the WAL's checkpoints on a thread of its own (see .checkpointer); stopped
        #: first when this connection closes, so that this close stays the last one.
        self.checkpointer: Checkpointer | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent).

        Closing the last connection checkpoints the WAL, which writes; if that fails the
        connection is still released and the error is raised (the data is safe in the WAL
        and the next open recovers it).
        """
        if self.checkpointer is not None:
            self.checkpointer.close()
        try:
            if not self.readonly and self.replicated_quietly():
                # Replicated: the checkpoint-and-delete of the WAL on last close is Litestream's.
                self._raw.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
            self._raw.close()
        except apsw.Error as exc:
            self._raw.close(True)
            raise translate(exc, "closing the database") from exc

    @property
    def lost(self) -> bool:
        """Always False: a file has no session to lose (an I/O error is reported as one)."""
        return False

    def abandon(self) -> None:
        """Close on an error path, while another exception is already propagating: a
        failure to close (e.g. the final checkpoint hitting the same I/O error) must not
        replace that exception. The WAL keeps the data; the next open recovers it."""
        if self.checkpointer is not None:
            self.checkpointer.close()
        force_close(self._raw)

    def litestream_managed(self) -> bool:
        """True when Litestream has set this file up for replication (its tables exist).

        While a file is replicated, Litestream alone may restart the WAL: ckptdb then runs
        only PASSIVE checkpoints, none on close, and sets no WAL size limit. Litestream's
        tables stay in the file (and in restored copies), so this holds for a file that was
        ever replicated -- by ``ckptdb replicate`` or by a Litestream run any other way."""
        marks = ",".join("?" * len(walhook.LITESTREAM_TABLES))
        found = self.scalar(
            f"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ({marks})",
            walhook.LITESTREAM_TABLES,
        )
        return bool(found)

    def replicated_quietly(self) -> bool:
        """:meth:`litestream_managed`, False when the schema cannot be read: a path that
        must go on (closing, configuring) does not fail on a damaged schema."""
        try:
            return self.litestream_managed()
        except errors.CkptdbError:
            return False

    @property
    def in_transaction(self) -> bool:
        """True while a transaction is open on this connection."""
        return bool(self._raw.in_transaction)

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

    # -- the authorizer: operator SQL reads only, integration sessions stay off core rows --

    def prepare_readonly(self, sql: str) -> sandbox.PreparedStatement:
        """Prepare -- never run -- the first statement of ``sql`` under the read-only
        authorizer: its text, the text after it and its parameter names. A statement that
        would write is refused here (ReadOnlyError), before anything runs."""
        with self._lock, self._authorized_by(sandbox.authorize_read):
            return sandbox.prepare_first(self._raw, sql)

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
        with (
            self._lock,
            self._authorized_by(sandbox.authorize_read),
            sandbox.stream(self._raw, sql, params, check, steps) as result,
        ):
            yield result

    def integration_session(self, protected: frozenset[str]) -> IntegrationSession:
        """A session for an integration's statements, to use as ``with
        conn.integration_session(core_tables) as session:`` inside a transaction the
        caller opened. It may read any table and write rows of any table but the
        ``protected`` ones (and SQLite's and Litestream's); DDL, ATTACH/DETACH,
        transaction control and pragmas that are not plain reads are refused with
        :class:`ckptdb.errors.IntegrationWriteRefusedError` before they run. See
        :mod:`ckptdb.connection.confinement` for how, at ~no cost per statement."""
        confinement = self._confinement
        if confinement is None or (
            confinement.requested is not protected and confinement.requested != protected
        ):
            # Installing an authorizer expires every prepared statement, so cached session
            # statements are checked again against the new table set.
            confinement = Confinement(protected)
            self._raw.set_authorizer(confinement.authorize)
            self._confinement = confinement
        return IntegrationSession(self._raw, confinement)

    @contextmanager
    def _authorized_by(self, authorizer: Authorizer) -> Iterator[None]:
        """Run the block under ``authorizer``, then put back the standing one (the
        integration sessions' confinement, if any)."""
        self._raw.set_authorizer(authorizer)
        try:
            yield
        finally:
            standing = self._confinement
            self._raw.set_authorizer(standing.authorize if standing is not None else None)

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
            except apsw.BusyError as exc:
                raise write_lock_timeout("BEGIN IMMEDIATE", self.path, self.lock_waits) from exc
            except apsw.Error as exc:
                raise translate(exc, "BEGIN IMMEDIATE") from exc
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
                raise translate(exc, "COMMIT") from exc
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
                raise translate(exc, "SAVEPOINT") from exc
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
                raise translate(exc, "RELEASE") from exc

    def lock(self, name: str) -> None:
        """Serialize with every other writer that locks ``name`` until this transaction
        ends. SQLite's write transaction already serializes every writer, so nothing more
        is taken here (the PostgreSQL connection takes an advisory lock)."""
        if not self._raw.in_transaction:
            raise errors.CkptdbError("internal: a lock needs an open write transaction")

    def try_lock(self, name: str) -> bool:
        """:meth:`lock` without waiting: always taken on SQLite (no other writer runs)."""
        self.lock(name)
        return True

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
                raise translate(exc, "BEGIN") from exc
            try:
                yield
            finally:
                if self._raw.in_transaction:
                    try:
                        self._raw.execute("COMMIT")
                    except apsw.Error as exc:
                        self._rollback_quietly()
                        raise translate(exc, "end of read transaction") from exc

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
            raise translate(exc, "backup") from exc
        finally:
            dest.close()
