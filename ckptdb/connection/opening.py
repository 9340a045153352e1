"""Opening a ckptdb file with ckptdb's settings, and fixing a new file's own settings.

Settings and why (see also docs/performance.md):

* ``journal_mode=WAL`` -- readers never block writers and a commit is one append + fsync.
* ``synchronous=FULL`` by default -- in WAL mode this fsyncs the WAL on every commit, so an
  acknowledged commit survives power loss. ``NORMAL`` is available for callers that accept
  losing the last commits on power loss (the file stays consistent either way).
* ``foreign_keys=ON`` -- the schema uses foreign keys as a last line of defence (an entry
  never names a missing blob, a pin never a missing checkpoint; since schema v6 the CURRENT
  pointer's rule is checked by the code that deletes checkpoints instead, see
  migrations/0006).
* A busy handler that polls about every millisecond up to ``busy_timeout`` seconds
  (:mod:`.busy`), so concurrent writers queue instead of failing; past the timeout the
  caller gets ``BusyTimeoutError``.
* ``trusted_schema=OFF`` and ``SQLITE_DBCONFIG_DEFENSIVE`` -- a file handed to us may be
  hostile; it must not be able to run functions from its schema or let SQL corrupt it.
* ``journal_size_limit`` -- large staged blobs grow the WAL; truncate it back after a
  checkpoint so the disk space is returned.
* page size and ``auto_vacuum=INCREMENTAL`` are fixed when the file is created
  (:func:`initialize_new_file`): they cannot change once tables exist in WAL mode.
"""

from __future__ import annotations

import time

import apsw

from .. import errors
from . import walhook
from .busy import DEFAULT_BUSY_TIMEOUT, POLL_SECONDS, LockWaits, busy_handler
from .checkpointer import Checkpointer
from .driver import Connection, Synchronous
from .translate import DRIVER_ERRORS, force_close, translate

#: ``PRAGMA application_id`` of every ckptdb file: the bytes "ckpt" read as a big-endian int.
APPLICATION_ID = 0x636B7074
#: Page size of a new file. Measured against 8 and 16 KiB (docs/performance.md): 4 KiB
#: is faster for small commits (every page a commit touches goes to the WAL and is
#: fsynced) and no slower for large ones (chunks are overflow pages either way).
DEFAULT_PAGE_SIZE = 4096
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
CACHE_SIZE_KIB = 8 * 1024


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
        raise translate(exc, f"opening {path}") from exc
    waits = LockWaits(busy_timeout)
    try:
        raw.set_busy_handler(busy_handler(waits))
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
            # Replaces SQLite's automatic checkpoint: none while a replicator runs (walhook);
            # run on a thread of its own unless a custom VFS must see every I/O in order.
            if vfs is None:
                conn.checkpointer = Checkpointer(path, synchronous)
            raw.set_wal_hook(walhook.wal_hook(path, conn.checkpointer))
        if not readonly and conn.replicated_quietly():
            raw.pragma("journal_size_limit", -1)  # Litestream decides when the WAL shrinks
    except apsw.Error as exc:
        force_close(raw)  # the configuration error is the one to report
        raise translate(exc, f"configuring {path}") from exc
    return conn


def open_memory() -> Connection:
    """A private in-memory database (to build the schema a set of migrations produces)."""
    try:
        raw = apsw.Connection(":memory:")
        raw.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
    except apsw.Error as exc:
        raise translate(exc, "opening an in-memory database") from exc
    return Connection(raw, ":memory:", readonly=False)


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


def ensure_wal(conn: Connection) -> None:
    """Put an existing ckptdb file (back) into WAL mode if something switched it off."""
    mode = str(conn.pragma("journal_mode")).lower()
    if mode != "wal" and str(_switch_to_wal(conn)).lower() != "wal":
        raise errors.StorageError(f"could not switch {conn.path} to WAL mode")


def _switch_to_wal(conn: Connection) -> object:
    """``PRAGMA journal_mode=WAL``, retried within the busy timeout.

    When several processes create the same file at once, SQLite answers this pragma with
    SQLITE_BUSY without calling the busy handler: the connection holds a read lock and
    would have to wait for another that is switching the file, and waiting there could
    deadlock. Retrying the whole statement drops that read lock first."""
    waits = conn.lock_waits
    deadline = time.monotonic() + (waits.timeout if waits.timeout is not None else float("inf"))
    delay = POLL_SECONDS
    while True:
        try:
            # Through the apsw connection: SQLITE_BUSY here means "retry", not a timeout.
            return conn._raw.pragma("journal_mode", "WAL")
        except apsw.BusyError as exc:
            now = time.monotonic()
            if now >= deadline:
                raise translate(exc, "PRAGMA journal_mode") from exc
            waits.waits += 1
            time.sleep(min(delay, deadline - now))
            waits.seconds += time.monotonic() - now
            delay = min(0.02, delay * 1.5)
        except DRIVER_ERRORS as exc:
            raise translate(exc, "PRAGMA journal_mode") from exc
