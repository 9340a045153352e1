"""A SQLite VFS whose fsync costs a fixed time: a stand-in for a slow disk in benchmarks.

This VM's own fsync is a write-back cache whose cost swings from 0.05 to 4 ms between runs,
so it cannot be the yardstick for anything that trades fsyncs for throughput (group
commit). This shim sits over the default VFS, as :mod:`.faults` does, and replaces every
``xSync`` with a sleep of ``sync_ms``: a run sees the same, known fsync cost whatever the
machine's disk does at that moment. The sleep releases the GIL, as a real fsync does.

Benchmarks only: nothing is synced, so a power loss can lose what was committed through it
(a killed process loses nothing: every write still reaches the operating system).

Register it once (registering is process-wide) and open a database through it with
``ckptdb.open(path, vfs=slow.name)``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import apsw

from .. import errors


class SlowSyncVFS(apsw.VFS):
    """The default VFS, except that every sync of a file is a sleep of ``sync_ms``."""

    def __init__(self, name: str = "ckptdb-slow-sync", *, sync_ms: float = 2.0) -> None:
        if sync_ms < 0:
            raise errors.InvalidInputError(f"sync_ms must be >= 0, not {sync_ms}")
        self.name = name
        #: the emulated cost of one fsync, in seconds (may be changed between runs)
        self.sync_seconds = sync_ms / 1000
        self._lock = threading.Lock()
        self._syncs = 0
        super().__init__(name, "")

    @property
    def syncs(self) -> int:
        """The syncs made through this VFS so far (each one paid ``sync_seconds``)."""
        return self._syncs

    def xOpen(self, name: Any, flags: list[int]) -> SlowSyncFile:
        return SlowSyncFile(self, name, flags)

    def sync(self) -> None:
        """One sync of a file of this VFS: the sleep that stands for it, counted."""
        time.sleep(self.sync_seconds)
        with self._lock:
            self._syncs += 1


class SlowSyncFile(apsw.VFSFile):
    """A file of :class:`SlowSyncVFS`."""

    def __init__(self, vfs: SlowSyncVFS, name: Any, flags: list[int]) -> None:
        self._vfs = vfs
        super().__init__("", name, flags)

    def xSync(self, flags: int) -> None:
        self._vfs.sync()
