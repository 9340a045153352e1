"""Waiting for a lock another connection holds: SQLite's busy handler, polling, and what a
caller is told when the wait runs out.

SQLite's default back-off hands the lock over in ~29 ms; polling about every millisecond
hands it over in <1 ms, so concurrent writers queue instead of failing. Past the timeout
the statement fails with SQLITE_BUSY, which the caller sees as ``BusyTimeoutError``: for a
write transaction (:func:`write_lock_timeout`) it says how long it waited and, where Linux
tells, which process holds the write lock.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable

from .. import errors

DEFAULT_BUSY_TIMEOUT = 30.0
POLL_SECONDS = 0.001
#: In WAL mode SQLite's write lock is a POSIX lock on this byte of the -shm file (the WAL
#: index's lock bytes start at offset 120; the write lock is the first of them).
WAL_WRITE_LOCK_BYTE = 120
#: Where Linux lists every file lock with the process holding it.
PROC_LOCKS = "/proc/locks"


class LockWaits:
    """How often and how long this connection waited for a lock another one held, and how
    long it is willing to wait (``timeout``; None = forever)."""

    def __init__(self, timeout: float | None = DEFAULT_BUSY_TIMEOUT) -> None:
        self.waits = 0
        self.seconds = 0.0
        self.timeout = timeout
        #: how long the latest wait lasted when it gave up (None: the latest wait got the
        #: lock, or none gave up yet)
        self.gave_up_after: float | None = None


def busy_handler(stats: LockWaits) -> Callable[[int], bool]:
    """The busy handler of one connection: polls until ``stats.timeout``, counting the
    waits into ``stats``."""
    deadline_box: list[float] = [0.0, 0.0]

    def handler(count: int) -> bool:
        now = time.monotonic()
        if count == 0:
            timeout = stats.timeout
            deadline_box[0] = now + (timeout if timeout is not None else float("inf"))
            deadline_box[1] = now
            stats.waits += 1
            stats.gave_up_after = None
        if now >= deadline_box[0]:
            stats.seconds += now - deadline_box[1]
            stats.gave_up_after = now - deadline_box[1]
            return False
        # Poll every millisecond at first (a commit usually hands the lock over within a
        # few), then back off with jitter up to 20 ms: every retry starts and ends a read
        # transaction, and a crowd of writers retrying at 1 kHz each keeps dirtying the
        # shared-memory index, which on ext4 can stall the lock holder's fsync for seconds.
        delay = POLL_SECONDS if count < 10 else min(0.02, 0.001 * 1.3 ** (count - 10))
        time.sleep(delay * (0.5 + random.random()))  # noqa: S311 - jitter, not crypto
        stats.seconds += time.monotonic() - now
        return True

    return handler


def write_lock_timeout(what: str, path: str, stats: LockWaits) -> errors.BusyTimeoutError:
    """The error of a write transaction that could not get the write lock of ``path``
    (``what``: the statement that waited)."""
    holder = write_lock_holder(path)
    waited = stats.gave_up_after
    wait = "did not get" if waited is None else f"waited {waited:.1f} s for"
    return errors.BusyTimeoutError(
        f"{what}: {wait} the write lock of {path}, which "
        f"{holder or 'another process or connection'} holds",
        waited_seconds=None if waited is None else round(waited, 3),
        holder=holder,
    )


def write_lock_holder(path: str) -> str | None:
    """Who holds the WAL write lock of the database at ``path`` -- ``"process 4242
    (python3)"``, or ``"another connection of this process"`` -- as Linux lists SQLite's
    lock on the -shm file in /proc/locks; None where that cannot be told (another
    operating system, the holder's process not visible from here, the lock released)."""
    try:
        shm = os.stat(path + "-shm")
        with open(PROC_LOCKS, encoding="ascii", errors="replace") as fh:
            listing = fh.read()
    except OSError:
        return None
    file_id = f"{os.major(shm.st_dev):02x}:{os.minor(shm.st_dev):02x}:{shm.st_ino}"
    for line in listing.splitlines():
        # "3: POSIX  ADVISORY  WRITE 10264 fe:00:2147775 120 120"; a waiter's line has
        # "->" after the number and is not a holder.
        fields = line.split()
        if len(fields) != 8 or fields[3] != "WRITE" or fields[5] != file_id:
            continue
        start, end = fields[6], fields[7]
        if not start.isdigit() or int(start) > WAL_WRITE_LOCK_BYTE:
            continue
        if end != "EOF" and (not end.isdigit() or int(end) < WAL_WRITE_LOCK_BYTE):
            continue
        pid = int(fields[4]) if fields[4].isdigit() else 0
        if pid <= 0:
            return None  # an open-file-description lock, or a process in another namespace
        if pid == os.getpid():
            return "another connection of this process"
        return f"process {pid} ({_process_name(pid)})"
    return None


def _process_name(pid: int) -> str:
    """The short name the kernel keeps for a process, printable characters only."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            name = fh.read().strip()
    except OSError:
        return "name unknown"
    return "".join(ch if ch.isprintable() else "?" for ch in name) or "name unknown"
