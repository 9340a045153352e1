"""Schema migration as an operation: status, plan, history, and ``up`` with a verified
online backup taken first and a receipt recorded after."""

from __future__ import annotations

import os
import re
import time
from importlib.resources.abc import Traversable
from pathlib import Path

from .. import errors, files, models
from ..connection import Connection
from ..connection.engine import EngineConnection
from ..store import entry_move, migrations, settings
from . import receipts as receipt_op
from .unit import Clock, Unit, holds

#: The schema version whose data step moves format-2 entries into checkpoint rows.
PACKED_ENTRIES_VERSION = 7
#: Checkpoints whose entries one transaction of that move takes: a bounded transaction on a
#: file of any size (a few MB of WAL), each complete on its own.
MOVE_BATCH = 2000


def info(m: migrations.Migration, *, with_sql: bool) -> models.MigrationInfo:
    """The public model of a shipped migration."""
    return models.MigrationInfo(
        migration_set=m.migration_set,
        version=m.version,
        name=m.name,
        checksum=m.checksum,
        sql=m.sql if with_sql else None,
    )


@holds(schema_work=True)
def status(tx: Unit, path: str) -> models.MigrationStatus:
    """The file's schema version, this code's, and the pending migrations."""
    conn = tx.conn
    with conn.read_transaction():
        core = migrations.core_set_of(conn)
        pending = migrations.check_history(conn, core)
        version = migrations.user_version(conn)
        sets = migrations.applied_sets(conn)
        # (Schema 7's move of format-2 entries is SQLite's: PostgreSQL never had them.)
        to_move = (
            entry_move.count_unpacked(conn)
            if isinstance(conn, Connection) and version >= PACKED_ENTRIES_VERSION
            else 0
        )
    return models.MigrationStatus(
        path=path,
        file_version=version,
        code_version=core.latest,
        up_to_date=not pending and not to_move,
        pending=[info(m, with_sql=False) for m in pending],
        sets=sets,
        checkpoints_to_move=to_move,
    )


@holds(schema_work=True)
def plan(tx: Unit, to: int | None) -> list[models.MigrationInfo]:
    """The pending migrations (up to version ``to``) with the SQL each would run."""
    with tx.conn.read_transaction():
        pending = migrations.check_history(tx.conn, migrations.core_set_of(tx.conn))
    return [info(m, with_sql=True) for m in pending if to is None or m.version <= to]


@holds(schema_work=True)
def history(tx: Unit) -> list[models.MigrationInfo]:
    """Every applied migration of every set, oldest first."""
    with tx.conn.read_transaction():
        rows = migrations.all_applied(tx.conn)
    return [
        models.MigrationInfo(
            migration_set=r.migration_set,
            version=r.version,
            name=r.name,
            checksum=r.checksum,
            applied_at=models.from_ms(r.applied_at_ms),
            ckptdb_version=r.ckptdb_version,
        )
        for r in rows
    ]


def _stamp(now_ms: int) -> str:
    """A local timestamp for a file name."""
    return time.strftime("%Y%m%dT%H%M%S", time.localtime(now_ms / 1000))


@holds(write=True, schema_work=True)
def up(
    tx: Unit, *, to: int | None, backup: str | os.PathLike[str] | bool
) -> models.MigrationResult:
    """See :meth:`ckptdb.Database.migrate`."""
    if not isinstance(tx.conn, Connection):
        return _up_together(tx, to=to, backup=backup)
    conn = tx.conn
    path = tx.handle.path
    core = migrations.core_set()
    start, goal, todo = _todo(conn, core, to)
    if todo:
        # Wait for (or refuse because of) another writer before writing a backup.
        with tx.write_batch():
            pass  # taking the write lock and releasing it is the whole point
    backup_path: str | None = None
    if todo and backup is not False:
        backup_path = (
            os.path.abspath(os.fspath(backup))
            if not isinstance(backup, bool)
            else f"{path}.v{start}.{_stamp(tx.now_ms)}.bak"
        )
        if os.path.lexists(backup_path):
            raise errors.InvalidInputError(f"the backup path {backup_path} exists")
        files.create_private_file(backup_path)
        with tx.read_batch():
            conn.backup_to(backup_path)
            migrations.verify_backup(conn, backup_path)
    applied: list[migrations.Migration] = []
    moved = 0
    try:
        applied = apply_pending(conn, core, tx.handle.clock, target=goal)
        moved = move_entries(conn)
    except errors.CkptdbError as exc:
        done = migrations.user_version(conn)
        restore = (
            f" To go back to version {start}, stop every process using the file, "
            f"delete {path}-wal and {path}-shm if present, and copy "
            f"{backup_path} over {path}."
            if backup_path
            else ""
        )
        raise errors.MigrationFailedError(
            f"{exc} The database is at version {done}, complete and consistent; run "
            f"`ckptdb migrate {path} up` again to finish.{restore}",
            backup=backup_path,
            version=done,
        ) from exc
    return _finished(tx, core, start, applied, moved, backup_path)


def _todo(
    conn: EngineConnection, core: migrations.MigrationSet, to: int | None
) -> tuple[int, int, list[migrations.Migration]]:
    """The database's version, the version to reach, and the migrations between."""
    pending = migrations.check_history(conn, core)
    start = migrations.user_version(conn)
    goal = migrations.check_target(core, to)
    if goal < start:
        raise errors.InvalidInputError(
            f"cannot migrate down from version {start} to {goal}: migrations only go "
            "forward (restore a backup instead)"
        )
    return start, goal, [m for m in pending if m.version <= goal]


def _up_together(
    tx: Unit, *, to: int | None, backup: str | os.PathLike[str] | bool
) -> models.MigrationResult:
    """``up`` on a server engine: every pending migration in one transaction under the
    schema's lock, so a failure leaves the database at the version it began at, untouched,
    and machines migrating at once apply each migration once. No backup is written: a copy
    of a server's database is the server's business (``pg_dump``), and the transaction
    leaves nothing to restore."""
    if not isinstance(backup, bool):
        raise errors.EngineUnsupportedError(
            f"a backup file is SQLite's; on {tx.conn.dialect} the pending migrations run in "
            "one transaction, so a failure leaves the database at the version it began at. "
            "Nothing was written. Take a copy with the server's own tools (pg_dump) if you "
            "want one, and migrate without backup="
        )
    conn = tx.conn
    core = migrations.core_set_of(conn)
    with conn.read_transaction():
        start, goal, todo = _todo(conn, core, to)
    applied: list[migrations.Migration] = []
    if todo:
        try:
            with conn.write_transaction():
                conn.lock(migrations.SCHEMA_LOCK)
                applied = migrations.apply_pending_together(
                    conn, core, target=goal, now_ms=tx.handle.clock()
                )
        except errors.CkptdbError as exc:
            raise errors.MigrationFailedError(
                f"{exc} Nothing was changed: the migrations ran in one transaction, rolled "
                f"back. Fix the cause, then run `ckptdb migrate DB up` again.",
                backup=None,
                version=start,
            ) from exc
    return _finished(tx, core, start, applied, 0, None)


def _finished(
    tx: Unit,
    core: migrations.MigrationSet,
    start: int,
    applied: list[migrations.Migration],
    moved: int,
    backup_path: str | None,
) -> models.MigrationResult:
    """Record what a migration run did (a receipt when it changed anything), refresh the
    handle's view of the schema, and describe it."""
    conn = tx.conn
    tx.handle.pending = migrations.check_history(conn, core)
    end = migrations.user_version(conn)
    receipt_id = None
    if applied or moved:
        receipt_id = receipt_op.record(
            tx,
            "migration",
            {
                "from_version": start,
                "to_version": end,
                "backup": backup_path,
                "applied": [f"{m.version:04d}_{m.name}" for m in applied],
                "checkpoints_moved": moved,
            },
        )
    if not tx.handle.pending:
        with conn.read_transaction():
            tx.handle.set_layout(*settings.layout(conn, tx.handle.path))
    return models.MigrationResult(
        path=tx.handle.path,
        from_version=start,
        to_version=end,
        applied=[info(m, with_sql=False) for m in applied],
        backup_path=backup_path,
        backup_verified=backup_path is not None,
        receipt_id=receipt_id,
        checkpoints_moved=moved,
    )


def move_entries(conn: Connection) -> int:
    """Schema 7's data step: move the entries of checkpoints stored before it from
    ``entry`` into their rows, :data:`MOVE_BATCH` checkpoints per transaction, so the WAL
    and the write lock stay bounded on a file of any size and an interruption (a kill, a
    full disk) loses at most the batch in flight; the next run resumes (the rows still to
    move are those whose ``entries`` is NULL). Returns how many moved."""
    if migrations.user_version(conn) < PACKED_ENTRIES_VERSION:
        return 0
    moved = 0
    after = 0
    while True:
        with conn.write_transaction():
            seqs = entry_move.unpacked_after(conn, after, MOVE_BATCH)
            if seqs:
                entry_move.pack_entries(conn, seqs)
        if not seqs:
            return moved
        moved += len(seqs)
        after = seqs[-1]


@holds(write=True)
def apply_set(tx: Unit, name: str, directory: Traversable | str) -> list[int]:
    """See :meth:`ckptdb.Database.apply_migration_set`."""
    if (
        not isinstance(name, str)
        or not re.fullmatch(r"[a-z][a-z0-9_]{0,62}", name)
        or (name == migrations.CORE)
    ):
        raise errors.InvalidInputError(
            f"migration set name must match [a-z][a-z0-9_]* and not be 'core', got {name!r}"
        )
    folder = Path(directory) if isinstance(directory, str) else directory
    conn = tx.conn
    if conn.dialect != "sqlite":
        # An integration ships each engine's set apart, as the core does: the same model
        # in the engine's own SQL, under ``<directory>/<dialect>/``.
        folder = folder / conn.dialect
        if not folder.is_dir():
            raise errors.EngineUnsupportedError(
                f"migration set {name!r} ships no {conn.dialect} migrations (no "
                f"{conn.dialect}/ folder beside its SQLite ones); nothing was written. Use "
                "an SQLite database for this integration."
            )
    mset = migrations.load_set(name, folder)
    known = tx.handle.history_at_open
    if (
        known is not None
        and name in known
        and not migrations.check_history(conn, mset, rows=known[name])
    ):
        return []
    tx.handle.history_at_open = None  # the history changes, or was not complete
    return [m.version for m in apply_pending(conn, mset, tx.handle.clock)]


def apply_pending(
    conn: EngineConnection,
    mset: migrations.MigrationSet,
    clock: Clock,
    *,
    target: int | None = None,
) -> list[migrations.Migration]:
    """Apply the pending migrations of ``mset`` up to ``target`` (default: all), in order,
    each in its own write transaction (under the schema's lock, so machines applying one
    set at once apply each migration once). A failure rolls back that migration only: the
    database stays at the last completed version. (Takes the connection: opening a file
    runs it before any handle exists.)"""
    goal = migrations.check_target(mset, target)
    done: list[migrations.Migration] = []
    for migration in migrations.check_history(conn, mset):
        if migration.version > goal:
            break
        with conn.write_transaction():
            conn.lock(migrations.SCHEMA_LOCK)
            applied = migrations.apply_next(conn, mset, migration, clock())
        if applied:
            done.append(migration)
    return done
