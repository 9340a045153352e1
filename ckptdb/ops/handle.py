"""The handle: one connection's store, the lock that serializes its users, and its life.

A :class:`Handle` is what the front object and the checkpoint handles share. It knows how
to reconnect after a COMMIT whose outcome is unknown (the connection may be unusable) and
whether the file still needs migrations; it rebuilds the store in exactly one place. It
owns the per-handle caches a unit of work (:mod:`.unit`) carries -- verified manifests,
the pointers this handle last wrote, the quota rows -- and the one clock.

Caches of rows another process may change are checked once per write transaction, right
after ``BEGIN IMMEDIATE``, with one ``PRAGMA data_version``: it moves only when another
connection committed, so while it holds still every cached pointer, quota row and "no key
scope yet" answer is exactly the file's (this handle's own changes update or drop them).
PostgreSQL has no such counter (and other writers commit at any moment): there the caches
of rows other writers change are dropped at the start of every write transaction.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from .. import errors
from ..connection import Connection
from ..connection.engine import EngineConnection
from ..store import Store, quotas, schema, scopes
from ..store.chunking import Chunker
from ..store.migrations import AppliedMigration, Migration
from ..store.rows import CheckpointRow, EntryRow, PointerRow
from ..store.scopes import Keyring
from .unit import Clock, system_clock

if TYPE_CHECKING:
    from ..connection.postgres import PgConnection

#: Verified manifests remembered per handle.
MANIFEST_CACHE = 4096
#: Pointers remembered per handle (the namespaces it committed to last).
HEADS_CACHE = 4096


class Handle:
    """A store behind a re-entrant lock, with reconnect and migration state."""

    def __init__(
        self,
        conn: EngineConnection,
        *,
        path: str,
        chunk_size: int,
        pending: list[Migration],
        reopen: Callable[[], EngineConnection],
        chunker: Chunker | None = None,
        keyring: Keyring | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.path = path
        #: the one clock every unit of work on this handle reads
        self.clock = clock
        #: the host's keys and this file's key scopes (kept across reconnects)
        self.keyring = keyring if keyring is not None else Keyring()
        self.lock = threading.RLock()
        self.pending = pending
        self._reopen = reopen
        #: the current store (use inside :meth:`use`; a reconnect replaces it)
        self.store = Store.on(conn, chunk_size, chunker, self.keyring)
        self._closed = False
        self._broken = False
        #: the thread inside use(), if any: a commit from that thread (an on_publish hook,
        #: a read session) must not queue behind a leader that waits for this very lock.
        #: Only that thread can have set it to its own id, so comparing needs no lock.
        self.owner: int | None = None
        # Manifests that verified, by id (immutable, so a cached one stays true); bounded.
        self._manifests: OrderedDict[str, tuple[CheckpointRow, list[EntryRow]]] = OrderedDict()
        #: the pointer of each namespace as this handle's last commit to it left it: a
        #: commit then moves it without reading it first (valid while no other connection
        #: committed: see the module docstring); bounded like the manifests
        self.heads: dict[str, PointerRow] = {}
        self._data_version: int | None = None
        self._scoped = False
        #: how the file's schema differs from ckptdb's (only a read-only handle opens such
        #: a file, for inspection)
        self.schema_problems: list[str] = []
        #: every migration set's applied migrations as the open read them (None: not
        #: kept, or changed since): an integration's set found complete there needs no
        #: second read (see ``ops/migrate.apply_set``)
        self.history_at_open: dict[str, list[AppliedMigration]] | None = None
        self._watch_writes()
        self._read_scopes()

    def verified_manifest(self, row: CheckpointRow) -> list[EntryRow] | None:
        """The entries of ``row``'s manifest if this very row verified before, else None."""
        with self.lock:
            cached = self._manifests.get(row.id)
            if cached is None or cached[0] != row:
                return None
            self._manifests.move_to_end(row.id)
            return cached[1]

    def remember_manifest(self, row: CheckpointRow, entries: list[EntryRow]) -> None:
        """Remember a manifest that verified."""
        with self.lock:
            self._manifests[row.id] = (row, entries)
            while len(self._manifests) > MANIFEST_CACHE:
                self._manifests.popitem(last=False)

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    @contextmanager
    def use(
        self, *, write: bool = False, schema_work: bool = False, keeps_heads: bool = False
    ) -> Iterator[Store]:
        """Hold the lock and yield the store; refuse a closed handle, a file that still needs
        migrations (unless ``schema_work``) and writes on a read-only handle. A writer that
        may move pointers other than through a commit's publish (anything but
        ``keeps_heads``) drops the cached pointers first."""
        with self.lock:
            outer = self.enter(write=write, schema_work=schema_work, keeps_heads=keeps_heads)
            try:
                yield self.store
            finally:
                self.owner = outer

    def enter(
        self, *, write: bool = False, schema_work: bool = False, keeps_heads: bool = False
    ) -> int | None:
        """:meth:`use` spelled out, for the commit path (which holds the lock itself):
        call with :attr:`lock` held; put what it returns back into :attr:`owner` when done."""
        if self._closed or self.pending or (write and self.store.conn.readonly):
            self._refuse(write=write, schema_work=schema_work)
        if self.store.conn.lost:
            # The server ended the session (PostgreSQL) since the last use.
            self.store.conn.abandon()
            self._reconnect()
        elif self._broken:
            # A failed COMMIT could not be resolved on a fresh connection; try again now.
            self._reconnect()
        if write and not keeps_heads:
            self.heads.clear()
        outer = self.owner
        self.owner = threading.get_ident()
        return outer

    def check_writable(self) -> None:
        """The refusals of ``use(write=True)``, without taking the lock: so a commit
        prepared outside the lock reports a closed, unmigrated or read-only handle before
        anything about its entries. :meth:`use` checks again, authoritatively."""
        self._refuse(write=True, schema_work=False)

    def _refuse(self, *, write: bool, schema_work: bool) -> None:
        if self._closed:
            raise errors.ClosedError("the database handle is closed; open it again")
        if self.pending and not schema_work:
            raise errors.MigrationPendingError(
                f"{self.path} needs schema migrations "
                f"{[m.version for m in self.pending]} before it can be used; open it with "
                "migrate='auto' or run `ckptdb migrate DB up`"
            )
        # A reconnect keeps the mode, so the current connection answers for the next one.
        if write and self.store.conn.readonly:
            raise errors.ReadOnlyError(f"{self.path} was opened read-only")

    def reconnect(self) -> Store:
        """Close the connection and open a new one (after a failed COMMIT)."""
        with self.lock:
            self.store.conn.close()
            return self._reconnect()

    def _reconnect(self) -> Store:
        self.store = Store.on(
            self._reopen(), self.store.chunk_size, self.store.chunker, self.keyring
        )
        self.heads.clear()
        self._watch_writes()
        self._read_scopes()
        self._broken = False
        return self.store

    def _watch_writes(self) -> None:
        # Called inside every write transaction, right after BEGIN IMMEDIATE, under the
        # write lock (not while migrations are pending: the tables may not exist yet;
        # ``set_layout`` comes back here after them).
        #
        # Whether this connection zeroes what it frees is decided there, from the file as
        # it is then -- never from what this handle saw when it opened: another process may
        # create the first key scope at any time, and a page or cell freed (or left behind
        # by a rebalance) without zeroing would keep that scope's wrapped key, records or
        # metadata after a rotation or a shred. A file without key scopes pays none of
        # secure_delete's extra I/O (a GC of large entries writes ~6x the bytes with it on:
        # docs/security.md). Scopes are never removed (a shred leaves a tombstone), so once
        # on it stays on.
        conn = self.store.conn
        if conn.readonly or self.pending:
            conn.on_write_begin = None
            return
        self._data_version = None
        self._scoped = False
        if not isinstance(conn, Connection):
            # PostgreSQL has no data version, and other writers commit at any moment: the
            # caches of rows they may change are dropped at every write transaction.
            shared = cast("PgConnection", conn)

            def begin_shared() -> None:
                self.heads.clear()
                quotas.prefetch(shared, self.store.quotas)  # read with the BEGIN

            conn.on_write_begin = begin_shared
            return

        def begin() -> None:
            version = schema.data_version(conn)
            if version == self._data_version:
                return  # nobody else committed: every cache holds
            self._data_version = version
            self.heads.clear()
            self.store.quotas.invalidate()
            if not self._scoped and scopes.any_scope(conn):
                scopes.zero_deleted_content(conn)
                self._scoped = True

        conn.on_write_begin = begin

    def remember_heads(self, moved: dict[str, PointerRow]) -> None:
        """Cache the pointers a unit's commits moved, once its COMMIT returned (bounded:
        the namespaces committed to longest ago go first)."""
        heads = self.heads
        for namespace, ptr in moved.items():
            heads.pop(namespace, None)  # re-inserted: the newest at the end
            heads[namespace] = ptr
        while len(heads) > HEADS_CACHE:
            del heads[next(iter(heads))]

    def forget_heads(self) -> None:
        """Drop the cached pointers (this handle moved or deleted pointers by other means
        than a commit, or a commit's transaction did not COMMIT)."""
        self.heads.clear()

    def _read_scopes(self) -> None:
        # The key scopes are read here, once, into the keyring's cache: a commit's prepare
        # step (outside the write lock, one per member of a group) then finds them in
        # memory instead of reading the file. Not while migrations are pending.
        if not self.pending:
            self.keyring.rows(self.store.conn)

    def scopes_changed(self) -> None:
        """This handle changed the file's key scopes: forget what it knew, read them again."""
        with self.lock:
            self.keyring.forget()
            self._read_scopes()
            self._data_version = None  # look for the first scope again

    def mark_broken(self) -> None:
        """The connection is unusable: reconnect before its next use."""
        self._broken = True

    def set_layout(self, chunk_size: int, chunker: Chunker) -> None:
        """The file's layout became readable (after its migrations)."""
        with self.lock:
            self.store = Store.on(self.store.conn, chunk_size, chunker, self.keyring)
            self._watch_writes()
            self._read_scopes()

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close(abandon=exc_type is not None)

    def close(self, *, abandon: bool = False) -> None:
        """Close (``abandon``: without raising, while another error propagates)."""
        with self.lock:
            if not self._closed:
                self._closed = True
                if abandon:
                    self.store.conn.abandon()
                else:
                    self.store.conn.close()
