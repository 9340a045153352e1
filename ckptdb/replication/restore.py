"""``ckptdb.restore``: Litestream restores, ckptdb verifies, then one atomic rename.

1. ``litestream restore`` writes the chosen position into a temporary file *next to* the
   destination (same directory, so the final rename is atomic and never crosses devices);
2. the temporary file is opened with ckptdb (application id, migration history, schema)
   and :meth:`Database.verify` checks every page, chunk, blob, manifest and pointer;
3. only then is it renamed over the destination (stale ``-wal``/``-shm`` beside the old
   destination are removed first: they belong to the old file) and the directory fsynced.

Anything that fails leaves the destination as it was and removes the temporary file.

Point in time: ``at=`` restores the newest position at or before a time; ``checkpoint=``
restores the *earliest* replica position whose database holds that checkpoint -- the state
just after it was published. Positions are the transaction ids the replica lists; ckptdb
probes them (newest first until one holds the checkpoint, then a binary search below it).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime

from .. import errors
from ..database import open as open_database
from . import ltx
from .binaries import run_litestream
from .config import ReplicaURL
from .models import LtxFile, RestoreReport
from .replicator import child_env

_HEX_ID = re.compile(r"[0-9a-f]{64}")


def restore(
    url: str,
    dest: str | os.PathLike[str],
    *,
    checkpoint: str | None = None,
    at: datetime | str | None = None,
    force: bool = False,
    env: Mapping[str, str | None] | None = None,
) -> RestoreReport:
    """Restore the replica at ``url`` into the ckptdb file ``dest``, verified.

    ``checkpoint``: a full checkpoint id: restore the earliest position holding it.
    ``at``: a time (aware datetime or RFC 3339 text): the newest position at or before it.
    Neither: the newest position. An existing ``dest`` is replaced only with ``force``.
    Raises ReplicaNotFoundError (no replica, or no position matches), ReplicaDamagedError
    (the restored copy does not verify) or RestoreTargetExistsError; ``dest`` is then
    untouched."""
    began = time.monotonic()
    replica = ReplicaURL.from_path_or_url(url)
    if checkpoint is not None and at is not None:
        raise errors.InvalidInputError("give checkpoint= or at=, not both")
    if checkpoint is not None and (
        not isinstance(checkpoint, str) or not _HEX_ID.fullmatch(checkpoint)
    ):
        raise errors.InvalidInputError("checkpoint must be a full 64-hex-digit checkpoint id")
    when = _parse_time(at) if at is not None else None
    target = os.path.abspath(os.fspath(dest))
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise errors.InvalidInputError(f"the destination directory {folder} does not exist")
    exists = os.path.lexists(target)
    if exists and not force:
        raise errors.RestoreTargetExistsError(
            f"{target} exists; restore does not overwrite it unless asked to (force)"
        )
    if exists and not os.path.isfile(target):
        raise errors.InvalidInputError(f"{target} exists and is not a regular file")
    environment = child_env(env)
    files = ltx.list_files(replica, env=environment)
    if not files:
        raise errors.ReplicaNotFoundError(
            f"no replica at {replica.display}: nothing was replicated there (or the URL, the "
            "endpoint or the credentials are wrong)"
        )
    temp = os.path.join(
        folder, f".{os.path.basename(target)}.restore-{os.getpid()}-{time.time_ns()}"
    )
    txid: int | None = None
    try:
        if checkpoint is not None:
            txid = _find_position(replica, files, checkpoint, temp, environment)
        elif when is not None:
            _litestream_restore(replica, temp, environment, timestamp=when)
        else:
            txid = ltx.head_txid(files)
            _litestream_restore(replica, temp, environment, txid=txid)
        namespaces, verified, checked = _verify(temp, replica)
        if exists:
            for suffix in ("-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target + suffix)
        os.replace(temp, target)
        _fsync_dir(folder)
    finally:
        _remove(temp)
    return RestoreReport(
        replica_url=replica.display,
        destination=target,
        txid=txid,
        at=when,
        checkpoint_id=checkpoint,
        namespaces=namespaces,
        checkpoints_verified=verified,
        bytes_checked=checked,
        seconds=round(time.monotonic() - began, 3),
        replaced=exists,
    )


def _parse_time(value: datetime | str) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise errors.InvalidInputError(
                f"at must be an RFC 3339 time such as 2026-01-02T03:04:05Z, not {value!r}"
            ) from exc
    if not isinstance(value, datetime):
        raise errors.InvalidInputError("at must be a datetime or an RFC 3339 string")
    if value.tzinfo is None:
        raise errors.InvalidInputError("at must carry a time zone (e.g. a trailing Z for UTC)")
    return value.astimezone(UTC)


def _litestream_restore(
    replica: ReplicaURL,
    out: str,
    env: dict[str, str],
    *,
    txid: int | None = None,
    timestamp: datetime | None = None,
) -> None:
    _remove(out)
    args = ["restore", "-o", out]
    if txid is not None:
        args += ["-txid", f"{txid:016x}"]
    if timestamp is not None:
        args += ["-timestamp", timestamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")]
    args.append(replica.url)
    result = run_litestream(args, env=env, timeout=3600)
    if result.returncode != 0 or not os.path.isfile(out):
        lines = (result.stderr or result.stdout).strip().splitlines()
        reason = lines[-1] if lines else f"exit status {result.returncode}"
        if timestamp is not None and ("no" in reason.lower() and "found" in reason.lower()):
            raise errors.ReplicaNotFoundError(
                f"the replica {replica.display} holds no position at or before "
                f"{timestamp.isoformat()}: {reason}"
            )
        raise errors.ReplicaDamagedError(
            f"litestream could not restore {replica.display}: {reason}. The replica may be "
            "missing files or damaged; the destination was not touched.",
            reason="restore_failed",
        )
    os.chmod(out, 0o600)


def _verify(path: str, replica: ReplicaURL) -> tuple[int, int, int]:
    """Open the restored copy with ckptdb and verify all of it (read-only: no byte of the
    copy changes before it is moved into place)."""
    try:
        with open_database(path, readonly=True, migrate="never") as db:
            report = db.verify()
            namespaces = len(db.namespaces())
    except errors.CkptdbError as exc:
        raise errors.ReplicaDamagedError(
            f"the copy restored from {replica.display} is not a usable ckptdb database: "
            f"{exc.code}: {exc}. The destination was not touched.",
            reason="restored_copy_refused",
        ) from exc
    if not report.ok:
        first = "; ".join(f"{p.code}: {p.detail}" for p in report.problems[:3])
        raise errors.ReplicaDamagedError(
            f"the copy restored from {replica.display} failed verification "
            f"({len(report.problems)} problems: {first}). The destination was not touched.",
            reason="verify_failed",
        )
    return namespaces, report.checkpoints_checked, report.bytes_checked


def _holds(path: str, checkpoint: str) -> bool:
    try:
        with open_database(path, readonly=True, migrate="never") as db:
            db.get(checkpoint)
            return True
    except errors.CheckpointNotFoundError:
        return False


def _find_position(
    replica: ReplicaURL, files: list[LtxFile], checkpoint: str, temp: str, env: dict[str, str]
) -> int:
    """Restore (into ``temp``) the earliest listed position whose database holds
    ``checkpoint``; returns its transaction id."""
    positions = sorted({f.max_txid for f in files})

    def probe(txid: int) -> bool:
        _litestream_restore(replica, temp, env, txid=txid)
        return _holds(temp, checkpoint)

    high = None
    for index in range(len(positions) - 1, -1, -1):  # newest first: GC may have removed it
        if probe(positions[index]):
            high = index
            break
    if high is None:
        raise errors.ReplicaNotFoundError(
            f"no position of the replica {replica.display} holds checkpoint "
            f"{checkpoint[:12]} (never replicated, or older than the replica's retention)"
        )
    low_i, high_i = 0, high  # positions[high] holds it: find the earliest that does
    while low_i < high_i:
        mid = (low_i + high_i) // 2
        if probe(positions[mid]):
            high_i = mid
        else:
            low_i = mid + 1
    if not probe(positions[low_i]):  # leave temp at the answer
        raise errors.ReplicaDamagedError(
            f"the replica {replica.display} changed while searching for {checkpoint[:12]}",
            reason="replica_changed",
        )
    found: int = positions[low_i]
    return found


def _remove(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path + suffix)


def _fsync_dir(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
