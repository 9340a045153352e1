"""Who may checkpoint the WAL of a file that Litestream replicates.

Litestream replicates by copying WAL frames. SQLite restarts the WAL (overwriting it from
the start) once a checkpoint has copied every frame into the database file and no reader
still needs one; frames Litestream had not copied by then are gone from the replica's
history, and a restore of the newest position fails SQLite's integrity check or lacks
committed transactions. Litestream guards against this with a long-running read
transaction, which is lost when Litestream dies (or, in 0.5.x, when a control-socket
``/sync`` request with ``wait``/``timeout`` returns). So the rule here: **while a ckptdb
replicator runs for a file, ckptdb never checkpoints it** -- only Litestream does, after
copying every frame. SQLite's automatic checkpoint is replaced by :func:`wal_hook`, which
keeps the automatic PASSIVE checkpoint for every other file.

A replicator announces itself by holding an exclusive ``flock`` on
:func:`replicator_lock_path` for as long as it runs (the kernel drops it however the
replicator dies); probing it costs one ``open``/``flock``/``close`` and happens only when
the WAL has reached the checkpoint threshold.

Since ckptdb then leaves the WAL to Litestream, a writer must also leave Litestream a
chance to take the write lock: Litestream polls for it with SQLite's default back-off (up
to 100 ms between tries) while ckptdb's writers poll every millisecond, so a tight commit
loop never lets Litestream in and the WAL grows without bound. Past
:data:`YIELD_PAGES` WAL pages the committing thread pauses :data:`YIELD_SECONDS` after
each commit, with the write lock free, until Litestream has checkpointed and restarted
the WAL.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from typing import Protocol

import apsw

#: Tables Litestream creates in every database it replicates (known companions of the
#: ckptdb schema). A file that holds them is, or was, replicated: ckptdb then leaves every
#: WAL restart to Litestream (see :meth:`ckptdb.connection.Connection.litestream_managed`).
LITESTREAM_TABLES = ("_litestream_seq", "_litestream_lock")
#: SQLite's default automatic-checkpoint threshold (pages in the WAL).
AUTOCHECKPOINT_PAGES = 1000
#: WAL pages past which the committing thread stops handing checkpoints to a
#: :class:`.checkpointer.Checkpointer`, waits for it and checkpoints itself (16,000 pages:
#: 64 MiB at the default page size, the size ``journal_size_limit`` truncates the WAL to).
INLINE_PAGES = 16 * AUTOCHECKPOINT_PAGES
#: Pages a commit must add to the WAL for its checkpoint to go to the checkpointer: bulk
#: writes (a large entry's staging batches add ~256 pages each). Small commits checkpoint
#: inline as before: handed off, the WAL rarely got a moment with every frame copied and no
#: commit in progress, so it stopped restarting and grew, and each small commit cost
#: ~60 % more CPU (measured: 190 -> 310 us, the WAL at 66 MB instead of 4 MB).
BULK_PAGES = 128
#: WAL pages past which a writer pauses after each commit while a replicator runs: four
#: times Litestream's own PASSIVE checkpoint threshold (1,000 pages), so a writer only
#: slows down once Litestream has fallen behind.
YIELD_PAGES = 4000
#: Longer than the longest sleep of SQLite's default busy handler (100 ms), which
#: Litestream's driver uses: one of its polls lands in every pause.
YIELD_SECONDS = 0.12


def replicator_lock_path(database: str) -> str:
    """The lock file a running replicator of ``database`` holds (``flock``, exclusive)."""
    folder, name = os.path.split(os.path.abspath(database))
    return os.path.join(folder, f".{name}-ckptdb-replicate.lock")


def replicator_running(database: str) -> bool:
    """True while some process holds the replicator lock of ``database``."""
    try:
        fd = os.open(replicator_lock_path(database), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        # flock locks belong to the open file description: probing (and closing) this
        # descriptor never touches SQLite's POSIX locks, nor the holder's flock.
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class Copier(Protocol):
    """What the hook needs of a :class:`.checkpointer.Checkpointer` (the thread that runs
    checkpoints off the committing thread)."""

    @property
    def closed(self) -> bool:
        """Whether it stopped (checkpoints then run inline)."""

    def request(self) -> None:
        """Ask for a checkpoint soon, without blocking."""

    def wait_idle(self) -> None:
        """Wait until no checkpoint is requested or running."""


def wal_hook(
    database: str, checkpointer: Copier | None = None
) -> Callable[[apsw.Connection, str, int], int]:
    """A WAL hook that stands in for SQLite's automatic checkpoint (see module doc); with a
    ``checkpointer``, the checkpoint after a bulk commit (:data:`BULK_PAGES`) is handed to
    its thread while the WAL is below :data:`INLINE_PAGES` (see :mod:`.checkpointer`).

    It runs after each commit, with the write lock already released."""

    seen = [0]  # WAL pages after the previous commit

    def hook(conn: apsw.Connection, name: str, pages: int) -> int:
        added = pages - seen[0] if pages > seen[0] else pages  # fewer: the WAL restarted
        seen[0] = pages
        if pages < AUTOCHECKPOINT_PAGES:
            return apsw.SQLITE_OK
        if replicator_running(database):
            if pages >= YIELD_PAGES:
                time.sleep(YIELD_SECONDS)
            return apsw.SQLITE_OK
        if checkpointer is not None and not checkpointer.closed:
            if added >= BULK_PAGES and pages < INLINE_PAGES:
                checkpointer.request()
                return apsw.SQLITE_OK
            checkpointer.wait_idle()  # small commits, or the WAL outgrew the copier
        checkpoint_quietly(conn, name)
        return apsw.SQLITE_OK

    return hook


def checkpoint_quietly(conn: apsw.Connection, name: str) -> None:
    """A PASSIVE checkpoint of ``name`` whose failure is left for the next one to retry."""
    try:
        conn.wal_checkpoint(name, apsw.SQLITE_CHECKPOINT_PASSIVE)
    except apsw.BusyError:
        return  # another connection is checkpointing: it does the same work
    except apsw.Error:
        # The commit has already succeeded: an error here must not turn it into a
        # failed commit (SQLite's own automatic checkpoint ignores errors the same
        # way). The frames stay in the WAL; the next checkpoint retries.
        return
