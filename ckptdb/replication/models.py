"""The models replication returns: replicator status, barrier receipts, restore reports,
replica positions. All are pydantic models (``model_dump(mode="json")`` for programs)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LtxFile(_Model):
    """One file of a replica as Litestream lists it: a range of Litestream transaction ids
    at one compaction level (0 = every sync; 9 = snapshots)."""

    level: int
    min_txid: int
    max_txid: int
    size: int
    timestamp: datetime


class ReplicationStatus(_Model):
    """What ``Replicator.status()`` reports.

    ``local_txid`` is the newest Litestream transaction id built from the local WAL;
    ``replicated_txid`` the newest one the replica storage itself lists. ``lag_txids`` is
    their difference and ``lag_seconds`` how long the replica has been behind (0 when it is
    caught up). ``last_error`` is the newest error line Litestream logged, if any."""

    database: str
    replica_url: str
    running: bool
    pid: int | None
    restarts: int
    local_txid: int | None
    replicated_txid: int | None
    replicated_at: datetime | None = Field(
        description="timestamp of the newest file on the replica"
    )
    lag_txids: int | None
    lag_seconds: float | None
    last_error: str | None
    last_barrier: BarrierReceipt | None


class BarrierReceipt(_Model):
    """Proof that the replica holds a checkpoint: returned by ``Replicator.wait``.

    ``txid`` is the Litestream transaction id the forced sync reached (it contains the
    commit); ``replica_txid`` the position of the read-back view that found the
    checkpoint in the replica itself."""

    checkpoint_id: str
    namespace: str
    txid: int | None
    replica_txid: int | None
    waited_seconds: float
    confirmed_at: datetime
    pinned_as: str | None


class RestoreReport(_Model):
    """What ``ckptdb.restore`` did: where from, which position, what was verified."""

    replica_url: str
    destination: str
    txid: int | None
    at: datetime | None
    checkpoint_id: str | None
    namespaces: int
    checkpoints_verified: int
    bytes_checked: int
    seconds: float
    replaced: bool


class ReplicaPosition(_Model):
    """Where a read replica's view stands: ``txid`` it reads at, ``head_txid`` the newest
    the replica storage lists, and ``poll_age_seconds``: time since the view last polled the
    replica successfully (-1 before the first poll)."""

    replica_url: str
    txid: int | None
    head_txid: int | None
    behind_txids: int | None
    poll_age_seconds: float | None
    view_time: str | None


ReplicationStatus.model_rebuild()
