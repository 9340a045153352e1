"""``ckptdb.replicate``: Litestream supervised for one database, a status, and the barrier.

The barrier (:meth:`Replicator.wait`) is end to end. For a checkpoint id it

1. checks that the checkpoint is in the local file (so its publishing transaction has
   committed and is in the WAL);
2. asks Litestream over its control socket to sync now -- a plain request, never one with
   ``wait`` or ``timeout``, which in Litestream 0.5.x drops the read transaction that
   protects unreplicated WAL frames (see :meth:`ControlClient.sync`); this only shortens
   the wait, and the result's transaction id goes into the receipt;
3. reads the checkpoint back *from the replica storage*: a read-only ckptdb handle opened
   through litestream-vfs on the replica URL (the same code path as ``open_replica``) must
   find its manifest. A manifest, its entries and the pointer move are one SQLite
   transaction and Litestream ships whole transactions, so finding the manifest in the
   replica proves the whole publish -- and everything committed before it -- is there.

Only then does ``wait`` return; otherwise it raises ``ReplicationTimeoutError``. With
``retain=True`` it also pins the checkpoint as ``replicated:<namespace>`` (moving the pin
forward only), so GC never removes the newest checkpoint known to be off the machine, and
stores a ``replication.barrier`` receipt.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from .. import errors
from ..connection import litestream_vfs as vfs
from ..connection import open_connection
from ..database import Database
from ..database import open as open_database
from . import ltx
from .binaries import litestream_binary, vfs_extension
from .config import ReplicaURL, render
from .control import ControlClient
from .lock import ReplicatorLock
from .models import BarrierReceipt, ReplicationStatus
from .scratch import ScratchDirectory
from .supervisor import Supervisor

PIN_PREFIX = "replicated:"
DEFAULT_SYNC_INTERVAL = 1.0


def child_env(overrides: Mapping[str, str | None] | None) -> dict[str, str]:
    """This process's environment with ``overrides`` applied (None removes a variable)."""
    env = dict(os.environ)
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


class Replicator:
    """A running replication of one database file. Create with :func:`replicate`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        to: str,
        *,
        sync_interval: float = DEFAULT_SYNC_INTERVAL,
        monitor_interval: float = 0.1,
        poll_interval: float = 0.1,
        retain: bool = True,
        env: Mapping[str, str | None] | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        for name, value in (
            ("sync_interval", sync_interval),
            ("monitor_interval", monitor_interval),
            ("poll_interval", poll_interval),
            ("start_timeout", start_timeout),
        ):
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise errors.InvalidInputError(f"{name} must be a positive number of seconds")
        self.database = os.path.abspath(os.fspath(path))
        self.replica = ReplicaURL.from_path_or_url(to)
        self.sync_interval = float(sync_interval)
        self.monitor_interval = float(monitor_interval)
        self.poll_interval = float(poll_interval)
        self.retain = retain
        self.start_timeout = float(start_timeout)
        self._env = child_env(env)
        self._lock = ReplicatorLock(self.database)
        self._db: Database | None = None
        self._view: Database | None = None
        self._dir: ScratchDirectory | None = None
        self._supervisor: Supervisor | None = None
        self._control: ControlClient | None = None
        self._barrier_lock = threading.Lock()
        self._last_barrier: BarrierReceipt | None = None
        self._behind_since: float | None = None
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> Replicator:
        """Start Litestream and return once the replica holds the database."""
        if not os.path.isfile(self.database):
            raise errors.DatabaseFileError(
                f"{self.database} does not exist; create the database before replicating it"
            )
        binary = litestream_binary()
        self._lock.acquire()
        try:
            self._db = open_database(self.database, create=False)
            self._empty_wal()
            self._dir = ScratchDirectory()
            config_path = os.path.join(self._dir.path, "litestream.json")
            socket_path = os.path.join(self._dir.path, "control.sock")
            text = render(
                self.database,
                self.replica,
                socket_path=socket_path,
                sync_interval=self.sync_interval,
                monitor_interval=self.monitor_interval,
                busy_timeout=5.0,
            )
            fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            self._control = ControlClient(socket_path)
            self._supervisor = Supervisor(
                [binary, "replicate", "-config", config_path, "-no-expand-env"],
                env=self._env,
                log_path=os.path.join(self._dir.path, "litestream.log"),
            )
            try:
                self._supervisor.start()
            except OSError as exc:
                raise errors.ReplicatorUnavailableError(f"cannot start litestream: {exc}") from exc
            self._await_first_sync()
        except BaseException:
            self.stop()
            raise
        return self

    def _empty_wal(self) -> None:
        """Leave Litestream an empty WAL to start on (``Connection.empty_wal_for_replicator``
        says why): it then snapshots the file instead of trusting a stale position."""
        conn = open_connection(self.database, busy_timeout=self.start_timeout)
        try:
            emptied = conn.empty_wal_for_replicator(wait=self.start_timeout)
        finally:
            conn.close()
        if not emptied:
            raise errors.ReplicatorUnavailableError(
                f"cannot start replicating {self.database}: readers kept its WAL from being "
                f"checkpointed for {self.start_timeout:.0f} s (Litestream must start on an "
                "empty WAL). End long read transactions, then start again."
            )

    def _await_first_sync(self) -> None:
        """Return once the replica lists the position Litestream built from the file as it
        is now (a replica left by an earlier run is not enough)."""
        assert self._control is not None and self._supervisor is not None
        deadline = time.monotonic() + self.start_timeout
        last: errors.CkptdbError | None = None
        while time.monotonic() < deadline:
            try:
                self._control.sync(self.database, timeout=min(10.0, self.start_timeout))
                local = self._control.txid(self.database)
                head = ltx.head_txid(ltx.list_files(self.replica, env=self._env))
                if local and head is not None and head >= local:
                    return
            except errors.ReplicationError as exc:
                last = exc
            time.sleep(0.1)
        reason = self._supervisor.last_error() or (str(last) if last else "no answer")
        raise errors.ReplicatorUnavailableError(
            f"litestream did not replicate {self.database} to {self.replica.display} within "
            f"{self.start_timeout:.0f} s: {reason}"
        )

    def stop(self) -> None:
        """Stop Litestream (it finishes its last sync) and release everything; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._supervisor is not None:
                self._supervisor.stop()
        finally:
            for handle in (self._view, self._db):
                if handle is not None:
                    handle.close()
            self._lock.release()
            if self._dir is not None:
                self._dir.remove()

    def __enter__(self) -> Replicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        """The pid of the running Litestream process (None between restarts)."""
        return self._supervisor.pid if self._supervisor is not None else None

    def kill_litestream(self) -> None:
        """SIGKILL the Litestream child (a drill: the supervisor restarts it)."""
        if self._supervisor is not None:
            self._supervisor.kill_child()

    # -- the barrier --------------------------------------------------------------------

    def _read_back(self) -> Database:
        if self._view is None:
            name = vfs.configure(
                self.replica.url, poll_interval=self.poll_interval, extension=vfs_extension()
            )
            self._view = open_database(name, readonly=True, vfs=vfs.VFS_NAME, virtual=True)
        return self._view

    def wait(self, checkpoint_id: str, timeout: float = 30.0) -> BarrierReceipt:
        """Return once the replica itself holds ``checkpoint_id`` (read back through
        litestream-vfs); raise :class:`~ckptdb.errors.ReplicationTimeoutError` otherwise."""
        if self._closed or self._db is None or self._control is None:
            raise errors.ClosedError("the replicator is stopped")
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise errors.InvalidInputError("timeout must be a positive number of seconds")
        began = time.monotonic()
        deadline = began + timeout
        local = self._db.get(checkpoint_id)  # CheckpointNotFoundError if it never committed
        txid: int | None = None
        try:
            # A plain sync (never wait/timeout: see ControlClient.sync) only shortens the
            # wait; the read-back below is the proof.
            result = self._control.sync(
                self.database, timeout=max(1.0, min(10.0, deadline - time.monotonic()))
            )
            txid = int(result.get("txid") or 0) or None
        except errors.ReplicationError:
            pass  # Litestream is restarting: its own sync loop will get there; keep reading
        with self._barrier_lock:
            view = self._read_back()
            while True:
                replica_txid = _view_txid(view)
                try:
                    view.get(local.id)
                    break
                except errors.CheckpointNotFoundError:
                    pass  # not on the replica yet: poll again
                if time.monotonic() >= deadline:
                    raise errors.ReplicationTimeoutError(
                        f"checkpoint {local.id[:12]} is not in the replica "
                        f"{self.replica.display} after {timeout:g} s (replica at txid "
                        f"{replica_txid}); it is durable locally. Check status().last_error, "
                        "then wait again.",
                        checkpoint_id=local.id,
                        last_error=self._supervisor.last_error() if self._supervisor else None,
                    )
                time.sleep(min(0.01, self.poll_interval / 4))
        pinned = self._retain(local.namespace, local.id, local.generation) if self.retain else None
        receipt = BarrierReceipt(
            checkpoint_id=local.id,
            namespace=local.namespace,
            txid=txid,
            replica_txid=replica_txid,
            waited_seconds=round(time.monotonic() - began, 6),
            confirmed_at=datetime.now(UTC),
            pinned_as=pinned,
        )
        if self.retain:
            self._db.record_receipt(
                "replication.barrier",
                {
                    "replica": self.replica.display,
                    "txid": txid,
                    "replica_txid": replica_txid,
                    "waited_seconds": receipt.waited_seconds,
                },
                namespace=local.namespace,
                checkpoint_id=local.id,
            )
        self._last_barrier = receipt
        return receipt

    def _retain(self, namespace: str, checkpoint_id: str, generation: int) -> str:
        """Move the ``replicated:<namespace>`` pin to this checkpoint unless it already
        protects a newer one (waits may return out of order)."""
        assert self._db is not None
        name = PIN_PREFIX + namespace
        for pin in self._db.pins(namespace):
            if pin.name == name:
                if pin.checkpoint_id == checkpoint_id:
                    return name
                try:
                    if self._db.get(pin.checkpoint_id).generation >= generation:
                        return name
                except errors.CheckpointNotFoundError:
                    pass  # the pinned checkpoint was collected: the pin moves to this one
        self._db.pin(
            checkpoint_id,
            name,
            note=f"newest checkpoint confirmed in {self.replica.display}",
            replace=True,
        )
        return name

    # -- status -------------------------------------------------------------------------

    def status(self) -> ReplicationStatus:
        """Where replication stands: local and replicated transaction ids, lag, errors."""
        assert self._supervisor is not None and self._control is not None
        local: int | None = None
        try:
            local = self._control.txid(self.database)
        except errors.ReplicationError:
            local = None
        try:
            files = ltx.list_files(self.replica, env=self._env)
        except errors.ReplicationError:
            files = []
        head = ltx.head_txid(files)
        newest = max((f.timestamp for f in files), default=None)
        lag = None if local is None or head is None else max(0, local - head)
        now = time.monotonic()
        if lag:
            self._behind_since = self._behind_since or now
        elif lag == 0:
            self._behind_since = None
        return ReplicationStatus(
            database=self.database,
            replica_url=self.replica.display,
            running=self._supervisor.running,
            pid=self._supervisor.pid,
            restarts=self._supervisor.restarts,
            local_txid=local,
            replicated_txid=head,
            replicated_at=newest,
            lag_txids=lag,
            lag_seconds=None
            if lag is None
            else (round(now - self._behind_since, 3) if self._behind_since else 0.0),
            last_error=self._supervisor.last_error(),
            last_barrier=self._last_barrier,
        )


def _view_txid(view: Database) -> int | None:
    with view.read_session() as session:
        value: Any = session.scalar("PRAGMA litestream_txid")
    try:
        return int(str(value), 16) if value else None
    except ValueError:
        return None


@contextmanager
def replicate(
    path: str | os.PathLike[str],
    *,
    to: str,
    sync_interval: float = DEFAULT_SYNC_INTERVAL,
    poll_interval: float = 0.1,
    retain: bool = True,
    env: Mapping[str, str | None] | None = None,
    start_timeout: float = 30.0,
) -> Iterator[Replicator]:
    """Replicate the ckptdb file ``path`` to ``to`` with Litestream while the block runs.

    ``to`` is a replica URL (``file:///dir``, ``s3://bucket/path?endpoint=...``) or a local
    directory. Litestream runs as a supervised child with a generated configuration in a
    private directory; credentials come from the environment only (``env`` adds or, with
    None, removes variables for the child). The block starts once the replica holds the
    database; leaving it stops Litestream after its last sync. A second replicator of the
    same file, in any process, is refused (:class:`~ckptdb.errors.ReplicatorRunningError`).

    ``sync_interval``: how often Litestream uploads (seconds; Litestream's default is 1);
    ``wait`` returns about one interval after the commit, so it sets the barrier's latency.
    ``poll_interval``: how often the barrier's read-back view polls the replica.
    ``retain``: each successful ``wait`` pins the checkpoint as ``replicated:<namespace>``
    (GC keeps it) and stores a ``replication.barrier`` receipt.
    """
    replicator = Replicator(
        path,
        to,
        sync_interval=sync_interval,
        poll_interval=poll_interval,
        retain=retain,
        env=env,
        start_timeout=start_timeout,
    )
    replicator.start()
    try:
        yield replicator
    finally:
        replicator.stop()
