"""``ckptdb.restore``: Litestream restores, ckptdb verifies, then one atomic rename.

1. ``litestream restore`` writes the chosen position into a temporary file *next to* the
   destination (same directory, so the final rename is atomic and never crosses devices);
2. the temporary file is opened with ckptdb (application id, migration history, schema)
   and :meth:`Database.verify` checks every page, chunk, blob, manifest and pointer;
3. only then is it renamed over the destination (stale ``-wal``/``-shm`` beside the old
   destination are removed first: they belong to the old file) and the directory fsynced.

Anything that fails leaves the destination as it was and removes the temporary file.

Replacing a file in use would orphan its users: a process that has the old file open keeps
reading and committing into an inode no path names any more, and every commit it
acknowledges afterwards is lost. So an existing destination is first *claimed*
(:class:`_Claim`): refused if this process has it open, or if another process holds any
SQLite lock on it -- every connection to a WAL database holds a shared lock on the
"DMS" byte of its ``-shm`` for as long as it is open, and one in a transaction a lock on
the database file's lock bytes. The claim takes those bytes exclusively with
open-file-description locks and holds them across the replacement; a process that opened
the old file in that window finds its header overwritten (``SQLITE_NOTADB``), a loud
error instead of silently lost commits.

Recovery (``recover=True``): walk back from the newest position to the newest one that
Litestream restores and that passes ``verify`` (SQLite's integrity check included),
reporting each position skipped and why.

Point in time: ``at=`` restores the newest position at or before a time; ``checkpoint=``
restores the *earliest* replica position whose database holds that checkpoint -- the state
just after it was published. Positions are the transaction ids the replica lists; ckptdb
probes them (newest first until one holds the checkpoint, then a binary search below it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import struct
import time
from collections.abc import Mapping
from datetime import UTC, datetime

from .. import errors
from ..database import open as open_database
from . import ltx
from .binaries import run_litestream
from .config import ReplicaURL
from .lock import is_locked as replicator_running
from .models import LtxFile, RestoreReport, SkippedPosition
from .replicator import child_env

_HEX_ID = re.compile(r"[0-9a-f]{64}")


def restore(
    url: str,
    dest: str | os.PathLike[str],
    *,
    checkpoint: str | None = None,
    at: datetime | str | None = None,
    force: bool = False,
    recover: bool = False,
    env: Mapping[str, str | None] | None = None,
) -> RestoreReport:
    """Restore the replica at ``url`` into the ckptdb file ``dest``, verified.

    ``checkpoint``: a full checkpoint id: restore the earliest position holding it.
    ``at``: a time (aware datetime or RFC 3339 text): the newest position at or before it.
    Neither: the newest position. An existing ``dest`` is replaced only with ``force``, and
    never while a process has it open.
    ``recover``: if the newest position does not restore or verify, walk back to the newest
    one that does; the report lists every position skipped (``skipped``) and says
    ``recovered=True``. Only with neither ``checkpoint`` nor ``at``.
    Raises ReplicaNotFoundError (no replica, or no position matches), ReplicaDamagedError
    (the restored copy does not verify; with ``recover``: no position does),
    RestoreTargetExistsError or RestoreTargetInUseError; ``dest`` is then untouched."""
    began = time.monotonic()
    replica = ReplicaURL.from_path_or_url(url)
    if checkpoint is not None and at is not None:
        raise errors.InvalidInputError("give checkpoint= or at=, not both")
    if not isinstance(recover, bool) or not isinstance(force, bool):
        raise errors.InvalidInputError("force and recover must be True or False")
    if recover and (checkpoint is not None or at is not None):
        raise errors.InvalidInputError(
            "recover walks back from the newest position; give it without checkpoint= or at="
        )
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
    if exists:
        _Claim(target).release()  # refuse early, before the long restore
    environment = child_env(env)
    files = ltx.list_files(replica, env=environment)
    if not files:
        raise errors.ReplicaNotFoundError(
            f"no replica at {replica.display}: nothing was replicated there (or the URL, the "
            "endpoint or the credentials are wrong)"
        )
    temp = os.path.join(
        folder, f".{os.path.basename(target)}.restore-{os.getpid()}-{secrets.token_hex(4)}"
    )
    txid: int | None = None
    skipped: list[SkippedPosition] = []
    try:
        if checkpoint is not None:
            txid = _find_position(replica, files, checkpoint, temp, environment)
            namespaces, verified, checked = _verify(temp, replica)
        elif when is not None:
            _litestream_restore(replica, temp, environment, timestamp=when)
            namespaces, verified, checked = _verify(temp, replica)
        elif recover:
            txid, (namespaces, verified, checked) = _walk_back(
                replica, files, temp, environment, skipped
            )
        else:
            txid = ltx.head_txid(files)
            try:
                _litestream_restore(replica, temp, environment, txid=txid)
                namespaces, verified, checked = _verify(temp, replica)
            except errors.ReplicaDamagedError as exc:
                raise type(exc)(
                    f"{exc} To restore the newest position that does restore and verify, "
                    "run restore again with recover=True (CLI: --recover): it reports every "
                    "position it skips.",
                    **exc.details,
                ) from exc
        if exists:
            claim = _Claim(target)
            try:
                for suffix in ("-wal", "-shm", "-journal"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(target + suffix)
                os.replace(temp, target)
                _fsync_dir(folder)
                claim.poison()
            finally:
                claim.release()
        else:
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
        recovered=bool(skipped),
        skipped=skipped,
    )


def _walk_back(
    replica: ReplicaURL,
    files: list[LtxFile],
    temp: str,
    env: dict[str, str],
    skipped: list[SkippedPosition],
) -> tuple[int, tuple[int, int, int]]:
    """Restore (into ``temp``) the newest position that restores and verifies; every
    newer position is appended to ``skipped`` with the reason it was refused."""
    for txid in sorted({f.max_txid for f in files}, reverse=True):
        try:
            _litestream_restore(replica, temp, env, txid=txid)
            return txid, _verify(temp, replica)
        except errors.ReplicaDamagedError as exc:
            skipped.append(
                SkippedPosition(txid=txid, reason=str(exc.details.get("reason")), detail=str(exc))
            )
    raise errors.ReplicaDamagedError(
        f"no position of the replica {replica.display} restores and verifies ({len(skipped)} "
        "tried, newest first). The destination was not touched.",
        reason="no_usable_position",
        skipped=[p.txid for p in skipped],
    )


# The unix VFS's lock bytes (sqlite3.c, os_unix.c): a connection to a WAL database holds
# a shared lock on the -shm's DMS byte while it is open; a transaction holds locks in
# [PENDING, PENDING + 2 + 510) of the database file.
_SHM_DMS_BYTE = 128
_PENDING_BYTE = 0x40000000
_DB_LOCK_BYTES = 2 + 510
_REPLACED_HEADER = b"ckptdb: replaced"  # 16 bytes: no longer "SQLite format 3\0"


class _Claim:
    """Exclusive claim on an existing destination, or :class:`RestoreTargetInUseError`.

    POSIX record locks belong to a process, and closing *any* descriptor of a file drops
    all of the process's locks on it; so this process's own users are found first, by
    looking for descriptors of the file among its own (``/proc/self/fd``), before any
    descriptor is opened here. Other processes are found with open-file-description
    locks (``F_OFD_SETLK``), which conflict with the POSIX locks SQLite takes."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._fds: list[int] = []
        names = [target + suffix for suffix in ("", "-wal", "-shm")]
        inodes = {_inode(name) for name in names} - {None}
        if _open_here(inodes):
            raise errors.RestoreTargetInUseError(
                f"{target} is open in this process (a ckptdb handle or another SQLite "
                "connection); close it before restoring over it. Nothing was changed."
            )
        if replicator_running(target):
            raise self._in_use("a replicator runs for it")
        try:
            db = self._open(target)
            if not _lock(db, _PENDING_BYTE, _DB_LOCK_BYTES):
                raise self._in_use("another process is in a transaction on it")
            if os.path.exists(target + "-shm"):
                shm = self._open(target + "-shm")
                if not _lock(shm, _SHM_DMS_BYTE, 1):
                    raise self._in_use("another process has it open")
        except BaseException:
            self.release()
            raise

    def _in_use(self, why: str) -> errors.RestoreTargetInUseError:
        return errors.RestoreTargetInUseError(
            f"{self.target} is in use: {why}. Replacing it now would leave that process "
            "committing into a file nobody can see any more. Stop every process using it "
            "(or restore to another path), then restore again. Nothing was changed."
        )

    def _open(self, path: str) -> int:
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise errors.InvalidInputError(
                f"cannot open {path} to check that nothing uses it: {exc.strerror}"
            ) from exc
        self._fds.append(fd)
        return fd

    def poison(self) -> None:
        """Make the replaced file unusable for a process that opened it before the rename
        but had not read it yet: its header no longer names an SQLite database."""
        if self._fds:
            os.pwrite(self._fds[0], _REPLACED_HEADER, 0)

    def release(self) -> None:
        """Drop the locks (closing the descriptors); idempotent."""
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)


def _inode(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def _open_here(inodes: set[tuple[int, int] | None]) -> bool:
    """True if a descriptor of this process refers to one of ``inodes``."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return False  # no /proc (not Linux): other processes are still detected by locks
    for fd in fds:
        try:
            st = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor, for one)
        if (st.st_dev, st.st_ino) in inodes:
            return True
    return False


def _lock(fd: int, start: int, length: int) -> bool:
    """Take an exclusive open-file-description lock on a byte range; False if any other
    lock (POSIX or OFD, any process, this one included) overlaps it."""
    request = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, start, length, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, request)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise errors.StorageError(f"cannot lock the restore destination: {exc}") from exc
    return True


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
            f"({len(report.problems)} problem(s): {first}). The destination was not touched.",
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
