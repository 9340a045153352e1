"""A fault-injecting SQLite VFS for the reliability harness (tests and tools share it).

It sits over the default VFS and can fail the Nth ``xWrite`` / ``xSync`` / ``xTruncate`` /
``xFileSize`` call with ``SQLITE_IOERR`` or ``SQLITE_FULL``, once or persistently -- the way
SQLite's own test suite proves that every fault point leaves the database consistent.

While armed it also tracks, for each file it writes, the file's image "as of its last
successful sync", and at the moment a fault fires it captures two images of every watched
database file set:

* ``crash``  -- the files as the operating system holds them (what a killed process leaves);
* ``power``  -- each file as of its last successful sync (what a power loss leaves: every
  write that was not synced is lost; the -shm is never kept).

Test machinery for ckptdb's own reliability harness (and a host that wants to inject
faults under its own use of ckptdb). It lives in the connection package because it is an
SQLite VFS: nothing outside ``ckptdb.connection`` talks to apsw. A VFS is registered under
its name; open a database through it with ``ckptdb.open(path, vfs=fault.name)``.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import apsw

Op = Literal["write", "sync", "truncate", "filesize"]
ErrorKind = Literal["ioerr", "full"]
OPS: tuple[Op, ...] = ("write", "sync", "truncate", "filesize")
SUFFIXES = ("", "-wal")


@dataclass
class FaultPlan:
    """Which call to fail. ``nth`` counts calls of ``op`` (1-based) while the plan is armed."""

    op: Op
    nth: int
    error: ErrorKind = "ioerr"
    persistent: bool = False
    fired: bool = False
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    fired_at: str | None = None


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.plan: FaultPlan | None = None
        self.armed = False
        self.synced: dict[str, bytes | None] = {}  # path -> image at its last sync
        self.watch: list[str] = []  # database paths whose images are captured
        self.images_dir: Path | None = None


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


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
    def armed(
        self,
        plan: FaultPlan,
        *,
        watch: list[str | os.PathLike[str]] = (),  # type: ignore[assignment]
        images_dir: Path | None = None,
    ) -> Iterator[FaultPlan]:
        """Count calls and fire the fault only inside this block. With ``watch`` and
        ``images_dir``, capture crash/power images of those databases when it fires."""
        st = self.state
        with st.lock:
            st.plan = plan
            st.armed = True
            st.watch = [os.fspath(p) for p in watch]
            st.images_dir = images_dir
            # Baseline: what is on disk when arming was made durable by the commit before.
            st.synced = {db + s: _read(db + s) for db in st.watch for s in SUFFIXES}
        try:
            yield plan
        finally:
            with st.lock:
                st.armed = False
                st.plan = None

    def count_calls(self) -> FaultPlan:
        """A plan that never fires: arm it to count the calls an operation makes."""
        return FaultPlan(op="write", nth=10**12)

    def _capture(self) -> None:
        st = self.state
        if st.images_dir is None:
            return
        for db in st.watch:
            base = os.path.basename(db)
            for kind in ("crash", "power"):
                folder = st.images_dir / kind
                folder.mkdir(parents=True, exist_ok=True)
                for suffix in SUFFIXES:
                    data = _read(db + suffix) if kind == "crash" else st.synced.get(db + suffix)
                    target = folder / (base + suffix)
                    if data is not None:
                        target.write_bytes(data)

    def power_image(self, db: str | os.PathLike[str], dest: Path) -> None:
        """Write the power-loss image of ``db`` now (after the armed block too)."""
        dest.mkdir(parents=True, exist_ok=True)
        for suffix in SUFFIXES:
            data = self.state.synced.get(os.fspath(db) + suffix)
            if data is not None:
                (dest / (os.path.basename(db) + suffix)).write_bytes(data)

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
            count = plan.counts[op]
            if not (count == plan.nth or (plan.persistent and count > plan.nth)):
                return
            first = not plan.fired
            plan.fired = True
            plan.fired_at = plan.fired_at or f"{op}#{count}"
            if first:
                self._capture()
            error = plan.error
        if error == "full":
            raise apsw.FullError("injected SQLITE_FULL")
        raise apsw.IOError("injected SQLITE_IOERR")

    def synced(self, path: str) -> None:
        """Record a successful sync of ``path``."""
        st = self.state
        with st.lock:
            if st.armed and path in st.synced:
                st.synced[path] = _read(path)


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
        self._vfs.synced(self._path)

    def xTruncate(self, newsize: int) -> None:
        self._vfs.check("truncate")
        super().xTruncate(newsize)

    def xFileSize(self) -> int:
        self._vfs.check("filesize")
        return int(super().xFileSize())


def copy_image(folder: Path, name: str, dest: Path) -> Path | None:
    """Copy an image (db + wal) from ``folder`` to ``dest``; None if it has no db file."""
    src = folder / name
    if not src.exists():
        return None
    dest.mkdir(parents=True, exist_ok=True)
    for suffix in SUFFIXES:
        if (folder / (name + suffix)).exists():
            shutil.copyfile(folder / (name + suffix), dest / (name + suffix))
    return dest / name
