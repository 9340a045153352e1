"""The replicator lock: one replicator per database file, across processes.

``<dir>/.<name>-ckptdb-replicate.lock`` is held with an exclusive ``flock`` for as long as a
replicator runs. The kernel drops the lock when the holder dies, however it dies, so a
crashed replicator never blocks the next one. While it is held, ckptdb runs no WAL
checkpoint on the file (``ckptdb/connection/walhook.py``): Litestream alone does."""

from __future__ import annotations

import fcntl
import os

from .. import errors
from ..connection.walhook import replicator_lock_path, replicator_running


def lock_path(database: str) -> str:
    """The lock file of a database path (one definition, shared with the connection layer,
    which skips checkpoints while it is held)."""
    return replicator_lock_path(database)


class ReplicatorLock:
    """Held while a replicator runs; ``acquire`` refuses if another process holds it."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.path = lock_path(database)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`ReplicatorRunningError`."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise errors.ReplicatorRunningError(
                f"a replicator already runs for {self.database}"
                f"{f' (pid {holder})' if holder else ''}; stop it first -- two replicators "
                "on one file would race each other's WAL handling",
                pid=holder,
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def is_locked(database: str) -> bool:
    """True while some process holds the replicator lock of ``database``."""
    return replicator_running(database)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
