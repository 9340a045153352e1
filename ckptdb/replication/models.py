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


class LtxHeader(_Model):
    """The header of one LTX file of a local replica (``ltx.read_header``): the position
    range, the database size after it (``commit``, in pages), the WAL segment it was cut
    from (offset, size and the WAL header's two salts) and how many pages it carries."""

    path: str
    flags: int
    page_size: int
    commit: int
    min_txid: int
    max_txid: int
    timestamp_ms: int
    wal_offset: int
    wal_size: int
    wal_salt1: int
    wal_salt2: int
    pages: int
    pgnos: frozenset[int] = Field(repr=False)

    @property
    def is_snapshot(self) -> bool:
        """True when the file carries every page of the database (SQLite's lock page,
        at 1 GiB, is never stored)."""
        lock_page = 0x40000000 // self.page_size + 1 if self.page_size else 0
        pages = self.commit - (1 if 0 < lock_page <= self.commit else 0)
        return self.pages >= pages > 0


class LtxAnomaly(_Model):
    """Something a replica's LTX headers show Litestream missed (``ltx.audit``):
    ``skipped_wal_generation`` or ``resnapshot`` at position ``txid``."""

    kind: str
    txid: int
    detail: str


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


class SkippedPosition(_Model):
    """A replica position ``restore(recover=True)`` passed over: its transaction id, the
    ``reason`` (``restore_failed``, ``verify_failed``, ``restored_copy_refused``) and the
    refusal's message."""

    txid: int
    reason: str
    detail: str


class RestoreReport(_Model):
    """What ``ckptdb.restore`` did: where from, which position, what was verified.

    ``recovered`` is True when ``recover=True`` had to pass over newer positions that did
    not restore or verify; ``skipped`` lists them, newest first. Positions are only ever
    skipped in recovery mode."""

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
    recovered: bool = False
    skipped: list[SkippedPosition] = Field(default_factory=list)


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
