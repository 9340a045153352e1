"""A fault-injecting SQLite VFS for the reliability harness (tests and tools share it).

It sits over the default VFS and can fail the Nth ``xWrite`` / ``xSync`` / ``xTruncate`` /
``xFileSize`` call with ``SQLITE_IOERR`` or ``SQLITE_FULL``, once or persistently -- the way
SQLite's own test suite proves that every fault point leaves the database consistent. It
also keeps, for each file, the image "as of its last successful sync", so a test can
build the file set a power loss at the moment of the fault would leave behind.

This is test machinery: it deliberately talks to apsw directly and is not part of the
ckptdb package.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import apsw

Op = Literal["write", "sync", "truncate", "filesize"]
ErrorKind = Literal["ioerr", "full"]


class InjectedFault(Exception):
    """Raised into SQLite (as IOERR/FULL) at the chosen call."""


@dataclass
class FaultPlan:
    """Which call to fail. ``nth`` counts calls of ``op`` (1-based) while the plan is armed."""

    op: Op
    nth: int
    error: ErrorKind = "ioerr"
    persistent: bool = False
    fired: bool = False
    counts: dict[str, int] = field(
        default_factory=lambda: {"write": 0, "sync": 0, "truncate": 0, "filesize": 0}
    )
    fired_at: str | None = None


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.plan: FaultPlan | None = None
        self.armed = False
        # path -> bytes of the file as of its last successful xSync (None: never synced)
        self.synced: dict[str, bytes | None] = {}
        self.track_sync_images = False


class FaultVFS(apsw.VFS):
    """Register under ``name``; open databases with ``ckptdb.open(path, vfs=name)``."""

    def __init__(self, name: str = "faultvfs") -> None:
        self.name = name
        self.state = _State()
        super().__init__(name, "")

    def xOpen(self, name: Any, flags: list[int]) -> FaultFile:
        return FaultFile(self, name, flags)

    # -- control ---------------------------------------------------------------------

    @contextmanager
    def armed(self, plan: FaultPlan) -> Iterator[FaultPlan]:
        """Count calls and fire the fault only inside this block."""
        with self.state.lock:
            self.state.plan = plan
            self.state.armed = True
        try:
            yield plan
        finally:
            with self.state.lock:
                self.state.armed = False
                self.state.plan = None

    def count_calls(self) -> FaultPlan:
        """A plan that never fires: arm it to count the calls an operation makes."""
        return FaultPlan(op="write", nth=10**12)

    def track_sync_images(self, enabled: bool = True) -> None:
        """Keep each file's image as of its last successful sync (costs a copy per sync)."""
        self.state.track_sync_images = enabled

    def power_loss_image(self, db_path: str, dest_path: str) -> None:
        """Write the files a power loss now would leave: each as of its last sync."""
        for suffix in ("", "-wal", "-shm"):
            src = db_path + suffix
            image = self.state.synced.get(src)
            dst = dest_path + suffix
            if os.path.exists(dst):
                os.remove(dst)
            if suffix == "-shm":
                continue  # shared memory does not survive a power loss
            if image is not None:
                with open(dst, "wb") as fh:
                    fh.write(image)
            elif src not in self.state.synced and os.path.exists(src) and suffix == "":
                shutil.copyfile(src, dst)

    def check(self, op: Op) -> None:
        """Called by FaultFile before each operation; raises to inject the fault."""
        st = self.state
        with st.lock:
            plan = st.plan
            if plan is None or not st.armed:
                return
            plan.counts[op] += 1
            if op != plan.op:
                return
            hit = plan.counts[op] == plan.nth or (plan.persistent and plan.counts[op] > plan.nth)
            if not hit:
                return
            plan.fired = True
            plan.fired_at = plan.fired_at or f"{op}#{plan.counts[op]}"
            error = plan.error
        if error == "full":
            raise apsw.FullError("injected SQLITE_FULL")
        raise apsw.IOError("injected SQLITE_IOERR")


class FaultFile(apsw.VFSFile):
    """A file of :class:`FaultVFS`."""

    def __init__(self, vfs: FaultVFS, name: Any, flags: list[int]) -> None:
        self._vfs = vfs
        self._path = name.filename() if hasattr(name, "filename") else str(name)
        super().__init__("", name, flags)

    def xWrite(self, data: bytes, offset: int) -> None:
        self._vfs.check("write")
        super().xWrite(data, offset)

    def xSync(self, flags: int) -> None:
        self._vfs.check("sync")
        super().xSync(flags)
        if self._vfs.state.track_sync_images and self._path:
            try:
                with open(self._path, "rb") as fh:
                    self._vfs.state.synced[self._path] = fh.read()
            except FileNotFoundError:
                self._vfs.state.synced[self._path] = None

    def xTruncate(self, newsize: int) -> None:
        self._vfs.check("truncate")
        super().xTruncate(newsize)

    def xFileSize(self) -> int:
        self._vfs.check("filesize")
        return int(super().xFileSize())
