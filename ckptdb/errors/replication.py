"""Errors of replication (Litestream: ``ckptdb.replicate``, restore, replica views)."""

from __future__ import annotations

from ._base import CkptdbError, CorruptionError, NotFoundError, SchemaError

# --- replication (Litestream; ckptdb.replicate) ------------------------------------------


class ReplicationError(CkptdbError):
    """Replication through Litestream failed or was refused."""

    code = "replication_error"
    exit_status = 10


class ReplicatorUnavailableError(ReplicationError):
    """Litestream (the binary or the litestream-vfs extension) is missing or will not run;
    install ``ckptdb[replicate]``."""

    code = "replicator_unavailable"


class ReplicatorRunningError(ReplicationError):
    """Another replicator already runs for this database file; only one may."""

    code = "replicator_running"


class ReplicationTimeoutError(ReplicationError):
    """The replica did not hold the checkpoint before the timeout; it is durable locally
    but not yet known to be off the machine. Waiting again is safe."""

    code = "replication_timeout"
    retryable = True


class RestoreTargetExistsError(ReplicationError):
    """The restore destination exists; pass ``force=True`` to replace it."""

    code = "restore_target_exists"


class RestoreTargetInUseError(ReplicationError):
    """The restore destination is open in a process (a reader, a writer or a replicator):
    replacing it would leave that process working on a file nobody can see any more, and
    everything it committed afterwards would be lost. Nothing was changed; stop what uses
    it, then restore again."""

    code = "restore_target_in_use"
    retryable = True


class ReplicaNotFoundError(NotFoundError):
    """The replica URL holds no replica (nothing was replicated there, or the URL is wrong),
    or it holds no position matching the requested checkpoint or time."""

    code = "replica_not_found"


class ReplicaDamagedError(CorruptionError):
    """The replica could not be restored or read back intact (missing or damaged files,
    failed verification). The destination was not touched."""

    code = "replica_damaged"


class UnsupportedFeatureError(SchemaError):
    """The file uses a storage feature this ckptdb does not have (written by a newer one)."""

    code = "unsupported_feature"
