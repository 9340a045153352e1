"""Replication through Litestream (``pip install 'ckptdb[replicate]'``).

* :func:`replicate` -- supervise Litestream for one database; ``wait`` is the end-to-end
  barrier ("the replica holds this checkpoint"), ``status`` the position and lag;
* :func:`restore` -- restore a replica (newest, by checkpoint id or by time), verified
  before it is moved into place;
* :func:`open_replica` -- a read-only handle reading the replica in place.

docs/replication.md explains the guarantees and the limits.
"""

from __future__ import annotations

from .models import (
    BarrierReceipt,
    LtxAnomaly,
    LtxFile,
    LtxHeader,
    ReplicaPosition,
    ReplicationStatus,
    RestoreReport,
    SkippedPosition,
)
from .replica import Replica, open_replica
from .replicator import Replicator, replicate
from .restore import restore

__all__ = [
    "BarrierReceipt",
    "LtxAnomaly",
    "LtxFile",
    "LtxHeader",
    "Replica",
    "ReplicaPosition",
    "ReplicationStatus",
    "Replicator",
    "RestoreReport",
    "SkippedPosition",
    "open_replica",
    "replicate",
    "restore",
]
