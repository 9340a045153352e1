"""``ckptdb.open_replica``: a read-only ckptdb handle that reads a replica in place.

Reads go through litestream-vfs: pages are fetched from the replica storage on demand and
the view follows the replica as Litestream uploads (it polls every ``poll_interval``). The
handle is an ordinary read-only :class:`ckptdb.Database` underneath, so every byte handed
out is checked against its digest exactly as on the primary. ``position()`` shows the lag.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import errors
from ..connection import litestream_vfs as vfs
from ..database import Database
from ..database import open as open_database
from . import ltx
from .binaries import vfs_extension
from .config import ReplicaURL
from .models import ReplicaPosition
from .replicator import child_env


class Replica:
    """A read replica: the read methods of :class:`ckptdb.Database` plus ``position()``.

    ``db`` is the underlying read-only Database, for anything not forwarded here."""

    def __init__(self, db: Database, replica: ReplicaURL, env: dict[str, str]) -> None:
        self.db = db
        self.replica = replica
        self._env = env

    # forwarded reads (all verified by ckptdb's read path)
    def current(self, namespace: str) -> Any:
        """The CURRENT checkpoint of ``namespace`` as the replica holds it (or None)."""
        return self.db.current(namespace)

    def get(self, checkpoint_id: str) -> Any:
        """A checkpoint by id."""
        return self.db.get(checkpoint_id)

    def load(self, namespace: str, **kwargs: Any) -> Any:
        """``Database.load`` on the replica (fallback and validator included)."""
        return self.db.load(namespace, **kwargs)

    def namespaces(self) -> Any:
        """The namespaces the replica holds."""
        return self.db.namespaces()

    def lineage(self, namespace: str, *, limit: int | None = None) -> Any:
        """The lineage of ``namespace``."""
        return self.db.lineage(namespace, limit=limit)

    def history(self, namespace: str, *, limit: int | None = None) -> Any:
        """The pointer history of ``namespace``."""
        return self.db.history(namespace, limit=limit)

    def resolve(self, ref: str) -> str:
        """Resolve a checkpoint reference to a full id."""
        return self.db.resolve(ref)

    def verify(self, *, quick: bool = False) -> Any:
        """Verify the whole replica as the view sees it."""
        return self.db.verify(quick=quick)

    def position(self) -> ReplicaPosition:
        """Where the view stands against the replica's newest position."""
        with self.db.read_session() as session:
            txid_text = session.scalar("PRAGMA litestream_txid")
            lag = session.scalar("PRAGMA litestream_lag")
            view_time = session.scalar("PRAGMA litestream_time")
        txid = _hex(txid_text)
        try:
            head = ltx.head_txid(ltx.list_files(self.replica, env=self._env))
        except errors.ReplicationError:
            head = None
        return ReplicaPosition(
            replica_url=self.replica.display,
            txid=txid,
            head_txid=head,
            behind_txids=None if txid is None or head is None else max(0, head - txid),
            poll_age_seconds=float(lag) if lag is not None else None,
            view_time=str(view_time) if view_time is not None else None,
        )

    def close(self) -> None:
        """Close the view."""
        self.db.close()

    def __enter__(self) -> Replica:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _hex(value: Any) -> int | None:
    try:
        return int(str(value), 16) if value else None
    except ValueError:
        return None


def open_replica(
    url: str, *, poll_interval: float = 1.0, env: Mapping[str, str | None] | None = None
) -> Replica:
    """Open the replica at ``url`` read-only, reading through litestream-vfs.

    Raises ReplicaNotFoundError when nothing was replicated there (checked first: the VFS
    itself would wait forever for a replica to appear). S3 credentials must be in the
    environment before the first replica or barrier of the process opens (the extension
    reads the environment once)."""
    replica = ReplicaURL.from_path_or_url(url)
    if not isinstance(poll_interval, int | float) or poll_interval <= 0:
        raise errors.InvalidInputError("poll_interval must be a positive number of seconds")
    environment = child_env(env)
    if not ltx.list_files(replica, env=environment):
        raise errors.ReplicaNotFoundError(
            f"no replica at {replica.display}: nothing was replicated there (or the URL, the "
            "endpoint or the credentials are wrong)"
        )
    name = vfs.configure(replica.url, poll_interval=float(poll_interval), extension=vfs_extension())
    db = open_database(name, readonly=True, vfs=vfs.VFS_NAME, virtual=True)
    return Replica(db, replica, environment)
