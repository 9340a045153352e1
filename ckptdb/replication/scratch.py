"""The private scratch directory of a replicator: Litestream's generated configuration, its
control socket and its log, in ``<tmp>/ckptdb-replicate-XXXXXXXX`` (0700).

A replicator removes its directory when it stops. One killed before it could (SIGKILL, a
crash, power loss) cannot, so the directory holds an owner lock: ``owner.lock``, kept under
an exclusive ``flock`` for the replicator's whole life and released by the kernel however
its process dies. Every replicator, before making its own directory, removes those whose
owner lock nobody holds (:func:`sweep`). The lock file gets its name only once it is
locked, so a directory being set up is never taken for an abandoned one; directories
without an owner lock (left by releases before 0.7.0) are not touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile

#: The name every scratch directory starts with (the rest is mkdtemp's).
PREFIX = "ckptdb-replicate-"
#: The file in a scratch directory its owner keeps locked for as long as it runs.
OWNER_LOCK = "owner.lock"


class ScratchDirectory:
    """A fresh private directory, locked as its owner's until :meth:`remove`."""

    def __init__(self) -> None:
        sweep()
        #: The directory (0700, like every directory mkdtemp makes).
        self.path = tempfile.mkdtemp(prefix=PREFIX)
        pending = os.path.join(self.path, OWNER_LOCK + ".new")
        fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(pending, os.path.join(self.path, OWNER_LOCK))
        self._fd: int | None = fd

    def remove(self) -> None:
        """Delete the directory and what it holds, then drop the lock (idempotent)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            _delete(self.path)
        finally:
            os.close(fd)


def sweep(root: str | None = None) -> list[str]:
    """Remove the scratch directories under ``root`` (the system temporary directory by
    default) whose owner died, and return their paths. A directory whose owner lock is
    held or missing, or that is not this user's own, is left alone."""
    root = root or tempfile.gettempdir()
    removed = []
    for name in os.listdir(root):
        if not name.startswith(PREFIX):
            continue
        path = os.path.join(root, name)
        fd = _owner_lock_if_abandoned(path)
        if fd is None:
            continue
        try:
            _delete(path)  # under the dead owner's lock: no other sweeper deletes it too
        finally:
            os.close(fd)
        removed.append(path)
    return removed


def _owner_lock_if_abandoned(path: str) -> int | None:
    """The owner lock of scratch directory ``path``, taken, when its owner is gone; None
    when ``path`` is no scratch directory of this user or its owner lives."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return None  # another user's, or not a directory at all
        fd = os.open(os.path.join(path, OWNER_LOCK), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # gone meanwhile, or no owner lock (being set up, or an older release's)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None  # its replicator is alive
    return fd


def _delete(path: str) -> None:
    """Remove the flat directory ``path``; what another sweeper removed first is skipped."""
    with contextlib.suppress(FileNotFoundError), os.scandir(path) as listing:
        for item in listing:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(item.path)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(path)
