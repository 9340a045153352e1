"""WAL checkpoints off the committing thread: a thread and connection of their own.

In WAL mode every committed byte is written twice: appended to the WAL at COMMIT, then
copied into the database file by a checkpoint. SQLite's automatic checkpoint (and
:func:`.walhook.wal_hook`, which stands in for it) runs that copy on the thread that just
committed, so a large write alternates between staging chunks and copying them: profiled
on a 256 MiB entry, the inline checkpoints were 59 % of the commit's time. A
:class:`Checkpointer` runs them on its own thread and connection instead, so the copy of
what is committed overlaps the staging of what comes next (a second core does it). Only
after bulk commits (:data:`.walhook.BULK_PAGES`): small commits keep checkpointing inline,
which lets the WAL restart between them (handed off, it grew and each commit cost more).

It changes nothing about durability: a checkpoint only copies frames that are already
committed and fsynced in the WAL, and a crash at any point of one leaves those frames in
the WAL for the next open to use. Bounds:

* The WAL restarts only once a checkpoint has copied every frame while no write is in
  progress, so while a writer outpaces the copier the WAL keeps growing. Past
  :data:`.walhook.INLINE_PAGES` the committing thread waits for the copier and then checkpoints
  itself (the inline behaviour): the WAL never holds much more than that.
* It never checkpoints while a replicator runs (see :mod:`.walhook`); it checks again
  right before each checkpoint, as the inline path does.
* It starts on the first request (a handle that never fills :data:`.walhook.
  AUTOCHECKPOINT_PAGES` of WAL has no thread) and is stopped, its connection closed without
  a checkpoint, before the handle's own connection closes: the handle's close stays the
  last one, which checkpoints and removes the WAL as before.
* A file opened through a custom VFS (the fault-injecting one, a slow-fsync shim)
  checkpoints inline: the fault harness counts every I/O call in a deterministic order.
"""

from __future__ import annotations

import threading

import apsw

from . import walhook

#: The longest the committing thread waits for the copier before checkpointing itself.
WAIT_SECONDS = 30.0


class Checkpointer:
    """PASSIVE checkpoints of one database file, on a thread of their own (see module)."""

    def __init__(self, path: str, synchronous: str) -> None:
        self._path = path
        # A checkpoint's fsyncs follow its connection's synchronous setting: the handle's.
        self._synchronous = synchronous
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._requested = False
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        """Ask for a checkpoint soon (from the WAL hook, after a commit: never blocks)."""
        with self._lock:
            if self._closed:
                return
            self._requested = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"ckptdb-checkpointer:{self._path}", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def wait_idle(self, timeout: float = WAIT_SECONDS) -> None:
        """Wait until no checkpoint is requested or running (at most ``timeout``)."""
        with self._lock:
            self._wake.wait_for(lambda: not (self._requested or self._busy), timeout)

    def close(self) -> None:
        """Stop the thread (after the checkpoint it is running) and close its connection.
        Idempotent."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._wake.notify_all()
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        try:
            conn = apsw.Connection(self._path, flags=apsw.SQLITE_OPEN_READWRITE)
        except apsw.Error:
            self._stop()  # checkpoints fall back to the committing thread (closed copier)
            return
        try:
            conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
            conn.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
            # The handle's own close is the last one: it checkpoints and removes the WAL.
            conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
            conn.pragma("synchronous", self._synchronous.upper())
            while self._next():
                try:
                    if not walhook.replicator_running(self._path):
                        walhook.checkpoint_quietly(conn, "main")
                finally:
                    with self._lock:
                        self._busy = False
                        self._wake.notify_all()
        finally:
            self._stop()
            conn.close(True)

    def _next(self) -> bool:
        """Wait for a request; False once closed."""
        with self._lock:
            self._wake.wait_for(lambda: self._requested or self._closed)
            if self._closed:
                return False
            self._requested = False
            self._busy = True
            return True

    def _stop(self) -> None:
        with self._lock:
            self._closed = True
            self._requested = False
            self._wake.notify_all()

    @property
    def closed(self) -> bool:
        """Whether the copier stopped (closed, or could not start its connection)."""
        return self._closed
