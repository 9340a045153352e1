"""The ``ckptdb_migration`` table and the migration runner: forward-only, checksummed, one
transaction per migration (a new file gets its whole schema in one).

Migrations are SQL files named ``NNNN_slug.sql`` grouped in *migration sets*. The core set
ships inside the wheel (``migrations/`` in the repository); an optional integration keeps its
own tables in its own named set in the same file, versioned independently of the core.

For every set the runner records version, name, checksum (sha256 of the file with line
endings normalized), time and the ckptdb version that applied it in ``ckptdb_migration``; the
core version is also kept in ``PRAGMA user_version`` so that a file written by a newer
ckptdb is refused *before* any table is read or written.

The PostgreSQL engine has a core set of its own (``migrations/postgresql/``: the same model
in that engine's types) and keeps its version in ``ckptdb_migration`` alone; the runner is
the same. Two machines migrating one database at once are serialized by the caller's
``conn.lock(SCHEMA_LOCK)`` inside the write transaction (SQLite's write lock already is).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from importlib.resources.abc import Traversable

from .. import __version__ as _version
from .. import errors
from ..connection import APPLICATION_ID, Connection, open_probe
from ..connection.engine import EngineConnection
from ..resources import data_dir
from .rows import typed

CORE = "core"
#: The lock a schema change takes (see the module docstring).
SCHEMA_LOCK = "ckptdb:schema"
#: Where the PostgreSQL engine's core set lives, inside the shipped migrations.
POSTGRESQL_DIR = "postgresql"
_FILE_NAME = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True)
class Migration:
    """One migration file of a set."""

    migration_set: str
    version: int
    name: str
    sql: str
    checksum: str


@dataclass(frozen=True)
class MigrationSet:
    """An ordered, gap-free list of migrations sharing a name."""

    name: str
    migrations: tuple[Migration, ...]

    @property
    def latest(self) -> int:
        """The version a database reaches after every migration of this set."""
        return self.migrations[-1].version if self.migrations else 0

    def get(self, version: int) -> Migration | None:
        """The migration with that version, if this set has it."""
        if 1 <= version <= len(self.migrations):
            return self.migrations[version - 1]
        return None


_APPLIED_TYPES = (str, int, str, str, int, str)


@dataclass(frozen=True)
class AppliedMigration:
    """A row of ``ckptdb_migration``."""

    migration_set: str
    version: int
    name: str
    checksum: str
    applied_at_ms: int
    ckptdb_version: str


def checksum_of(sql: str) -> str:
    """Checksum of a migration's text (line endings normalized so checkouts agree)."""
    return hashlib.sha256(sql.replace("\r\n", "\n").encode("utf-8")).hexdigest()


#: Sets read before, by (name, directory): each with the fingerprint of its files.
_set_cache: dict[tuple[str, str], tuple[tuple[tuple[str, int, int, int], ...], MigrationSet]] = {}


def _fingerprint(directory: Traversable) -> tuple[tuple[str, int, int, int], ...] | None:
    """(name, size, mtime, inode) of every file of ``directory`` on a file system; None when
    it is not one (a zip import): then the set is read every time."""
    out = []
    for item in directory.iterdir():
        if not isinstance(item, os.PathLike):
            return None
        st = os.stat(item)
        out.append((item.name, st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(sorted(out))


#: Where this ckptdb is installed: the sets it ships there never change while it runs.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def load_set(name: str, directory: Traversable) -> MigrationSet:
    """Read every ``NNNN_slug.sql`` of ``directory`` as the migration set ``name``.

    Every open of a file checks its migrations (and an integration applies its set), so a
    set read before is reused: one this ckptdb ships, always (looking costs 50 us an open);
    any other while none of its files changed (same names, sizes, times)."""
    key = (name, str(directory))
    cached = _set_cache.get(key)
    if cached is not None and str(directory).startswith(_PACKAGE_DIR):
        return cached[1]
    fingerprint = _fingerprint(directory)
    if fingerprint is not None and cached is not None and cached[0] == fingerprint:
        return cached[1]
    mset = _read_set(name, directory)
    if fingerprint is not None:
        _set_cache[key] = (fingerprint, mset)
    return mset


def _read_set(name: str, directory: Traversable) -> MigrationSet:
    found: list[Migration] = []
    for item in directory.iterdir():
        match = _FILE_NAME.fullmatch(item.name)
        if not match:
            continue
        sql = item.read_text(encoding="utf-8")
        found.append(Migration(name, int(match.group(1)), match.group(2), sql, checksum_of(sql)))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise errors.MigrationHistoryError(
                f"migration set {name!r} ships version {migration.version} where {expected} "
                "was expected; the installed package is incomplete"
            )
    return MigrationSet(name, tuple(found))


_core_cache: MigrationSet | None = None


def core_set() -> MigrationSet:
    """The core migrations shipped with this ckptdb (the SQLite engine's)."""
    global _core_cache  # noqa: PLW0603 - immutable, loaded once per process
    if _core_cache is None:
        _core_cache = load_set(CORE, data_dir("migrations"))
    return _core_cache


def postgresql_core_set() -> MigrationSet:
    """The PostgreSQL engine's core migrations shipped with this ckptdb."""
    return load_set(CORE, data_dir("migrations") / POSTGRESQL_DIR)


def core_set_of(conn: EngineConnection) -> MigrationSet:
    """The core migrations of ``conn``'s engine."""
    return core_set() if isinstance(conn, Connection) else postgresql_core_set()


def _has_history(conn: EngineConnection) -> bool:
    """True once the ``ckptdb_migration`` table exists."""
    if isinstance(conn, Connection):
        found = conn.scalar(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'ckptdb_migration'"
        )
    else:
        found = conn.scalar("SELECT to_regclass('ckptdb_migration') IS NOT NULL")
    return bool(found)


def user_version(conn: EngineConnection) -> int:
    """The core schema version: on SQLite the one recorded in the file header (readable
    before any table is); on PostgreSQL the newest core version in ``ckptdb_migration``."""
    if isinstance(conn, Connection):
        return int(conn.pragma("user_version"))
    if not _has_history(conn):
        return 0
    return int(
        conn.scalar(
            "SELECT coalesce(max(version), 0) FROM ckptdb_migration WHERE migration_set = ?",
            (CORE,),
        )
    )


def applied(conn: EngineConnection, migration_set: str) -> list[AppliedMigration]:
    """Applied migrations of one set, oldest first (empty before the core's first)."""
    if not _has_history(conn):
        return []
    rows = conn.execute(
        "SELECT migration_set, version, name, checksum, applied_at_ms, ckptdb_version"
        " FROM ckptdb_migration WHERE migration_set = ? ORDER BY version",
        (migration_set,),
    )
    return [typed(AppliedMigration, row, _APPLIED_TYPES, "migration record") for row in rows]


def applied_by_set(conn: EngineConnection) -> dict[str, list[AppliedMigration]]:
    """Every set's applied migrations, oldest first, in one read (empty before the core's
    first): what an open checks the core against and keeps for the integrations' sets."""
    if not _has_history(conn):
        return {}
    out: dict[str, list[AppliedMigration]] = {}
    for row in conn.execute(
        "SELECT migration_set, version, name, checksum, applied_at_ms, ckptdb_version"
        " FROM ckptdb_migration ORDER BY migration_set, version"
    ):
        record = typed(AppliedMigration, row, _APPLIED_TYPES, "migration record")
        out.setdefault(record.migration_set, []).append(record)
    return out


def refuse_too_new(conn: EngineConnection, mset: MigrationSet) -> None:
    """Raise SchemaTooNewError when the file is newer than this code (reads only the header
    for the core set, so a future schema is never touched)."""
    if mset.name == CORE:
        version = user_version(conn)
    else:
        rows = applied(conn, mset.name)
        version = rows[-1].version if rows else 0
    refuse_version(conn, mset, version)


def refuse_version(conn: EngineConnection, mset: MigrationSet, version: int) -> None:
    """Raise SchemaTooNewError when ``version`` (the file's, of ``mset``) is newer than
    this code knows."""
    if version > mset.latest:
        writer = _writer_of(conn, mset.name, version)
        needed = (
            f"{writer} (the release that wrote it) or newer"
            if writer
            else f"a release that supports {mset.name} schema version {version} or newer"
        )
        raise errors.SchemaTooNewError(
            f"{conn.path} has {mset.name} schema version {version}, but this ckptdb "
            f"({_version}) knows versions up to {mset.latest}. Upgrade ckptdb to {needed}; "
            "the file was not modified.",
            required_version=writer,
        )


def _writer_of(conn: EngineConnection, migration_set: str, version: int) -> str | None:
    """The ckptdb release that applied ``version`` of a set, as the file records it; None
    when a newer schema keeps that record differently (the error then names no release)."""
    try:
        found = conn.scalar(
            "SELECT ckptdb_version FROM ckptdb_migration WHERE migration_set = ? AND version = ?",
            (migration_set, version),
        )
    except errors.SqlError:
        return None  # a future layout of the history table: only the hint is lost
    return found if isinstance(found, str) and found else None


def check_history(
    conn: EngineConnection, mset: MigrationSet, *, rows: list[AppliedMigration] | None = None
) -> list[Migration]:
    """Validate what was applied against what ships; return the pending migrations.
    ``rows``: the set's applied migrations read already (:func:`applied_by_set`; not for
    SQLite's core set, whose version the file header holds).

    Refuses (without writing) a file newer than the code, an applied migration whose
    checksum differs from the shipped file, and a history with gaps or unknown entries.
    """
    # SQLite: the core's version from the header, before any table is read. PostgreSQL
    # keeps it in the history alone, which is read once for both checks.
    header = mset.name == CORE and isinstance(conn, Connection)
    if header:
        refuse_too_new(conn, mset)
    if rows is None:
        rows = applied(conn, mset.name)
    if not header:
        refuse_version(conn, mset, rows[-1].version if rows else 0)
    for expected, row in enumerate(rows, start=1):
        shipped = mset.get(row.version)
        if row.version != expected or shipped is None:
            raise errors.MigrationHistoryError(
                f"{conn.path}: the {mset.name} migration history is broken at version "
                f"{row.version} (expected {expected}); the file was changed outside ckptdb. "
                "Restore it from a backup."
            )
        if shipped.checksum != row.checksum:
            raise errors.MigrationChecksumError(
                f"{conn.path}: {mset.name} migration {row.version} ({row.name}) was applied "
                f"with checksum {row.checksum[:12]}, but this ckptdb ships {shipped.checksum[:12]}"
                ". The migration file was edited after release; reinstall an unmodified "
                "ckptdb. The database was not modified."
            )
    current = rows[-1].version if rows else 0
    if header and user_version(conn) != current:
        raise errors.MigrationHistoryError(
            f"{conn.path}: PRAGMA user_version is {user_version(conn)} but the migration "
            f"history ends at version {current}; the file was changed outside ckptdb"
        )
    return list(mset.migrations[current:])


def check_target(mset: MigrationSet, target: int | None) -> int:
    """The version ``target`` names (default: the latest), or InvalidInputError."""
    goal = mset.latest if target is None else target
    if goal > mset.latest or goal < 0:
        raise errors.InvalidInputError(
            f"cannot migrate {mset.name} to version {goal}: this ckptdb ships 1..{mset.latest}"
        )
    return goal


def apply_next(
    conn: EngineConnection, mset: MigrationSet, migration: Migration, now_ms: int
) -> bool:
    """Apply ``migration`` inside the caller's write transaction, unless another process
    applied it while the caller waited for the write lock. True when it was applied here."""
    pending = check_history(conn, mset)
    if not pending or pending[0].version != migration.version:
        return False
    apply_one(conn, mset, migration, rolled_back_to=migration.version - 1, now_ms=now_ms)
    return True


def create_schema(conn: EngineConnection, mset: MigrationSet, now_ms: int) -> bool:
    """Bring a new, empty file to the latest version of ``mset`` inside the caller's write
    transaction (which records the file's settings too, so no process ever sees tables
    without them). False, with nothing written, when another process created the schema
    while the caller waited for the write lock (its settings are the file's)."""
    pending = check_history(conn, mset)
    if not pending or pending[0].version != 1:
        return False
    for migration in pending:
        apply_one(conn, mset, migration, rolled_back_to=0, now_ms=now_ms)
    return True


def apply_pending_together(
    conn: EngineConnection, mset: MigrationSet, *, target: int, now_ms: int
) -> list[Migration]:
    """Apply every pending migration of ``mset`` up to ``target`` inside the caller's one
    write transaction, which holds :data:`SCHEMA_LOCK` (PostgreSQL's DDL is transactional:
    a failure rolls all of them back, leaving the version the transaction began at)."""
    pending = [m for m in check_history(conn, mset) if m.version <= target]
    start = pending[0].version - 1 if pending else 0
    for migration in pending:
        apply_one(conn, mset, migration, rolled_back_to=start, now_ms=now_ms)
    return pending


def apply_one(
    conn: EngineConnection,
    mset: MigrationSet,
    migration: Migration,
    *,
    rolled_back_to: int,
    now_ms: int,
) -> None:
    """Run one migration and record it, inside the caller's write transaction (whose
    rollback leaves the set at version ``rolled_back_to``)."""
    try:
        conn.execute_script(migration.sql)
    except errors.CkptdbError as exc:
        raise errors.MigrationFailedError(
            f"{mset.name} migration {migration.version} ({migration.name}) failed: "
            f"{exc}. The database is still at version {rolled_back_to}."
        ) from exc
    conn.execute(
        "INSERT INTO ckptdb_migration (migration_set, version, name, checksum,"
        " applied_at_ms, ckptdb_version) VALUES (?, ?, ?, ?, ?, ?)",
        (
            mset.name,
            migration.version,
            migration.name,
            migration.checksum,
            now_ms,
            _version,
        ),
    )
    if mset.name == CORE and isinstance(conn, Connection):
        conn.pragma("user_version", migration.version)
        if migration.version == 1:
            conn.pragma("application_id", APPLICATION_ID)


def verify_backup(source: Connection, backup_path: str) -> None:
    """Check a fresh backup: SQLite integrity, same application id and schema version, and
    the same number of rows in every table as the source (read in one snapshot)."""
    probe = open_probe(backup_path)
    try:
        integrity = [str(r[0]) for r in probe.execute("PRAGMA integrity_check")]
        if integrity != ["ok"]:
            raise errors.CorruptionError(
                f"the backup {backup_path} failed integrity_check: {integrity[:3]}",
                reason="backup_invalid",
            )
        tables = [
            str(r[0])
            for r in source.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        for pragma in ("application_id", "user_version"):
            if probe.pragma(pragma) != source.pragma(pragma):
                raise errors.CorruptionError(
                    f"the backup {backup_path} has a different {pragma}", reason="backup_invalid"
                )
        for table in tables:
            want = source.scalar(f'SELECT count(*) FROM "{table}"')
            got = probe.scalar(f'SELECT count(*) FROM "{table}"')
            if want != got:
                raise errors.CorruptionError(
                    f"the backup {backup_path} has {got} rows in {table}, the database {want}",
                    reason="backup_invalid",
                )
    finally:
        probe.close()


def applied_sets(conn: EngineConnection) -> dict[str, int]:
    """Every migration set recorded in the file with its newest version."""
    if not user_version(conn):
        return {}
    return {
        str(name): int(v)
        for name, v in conn.execute(
            "SELECT migration_set, max(version) FROM ckptdb_migration"
            " GROUP BY migration_set ORDER BY migration_set"
        )
    }


def all_applied(conn: EngineConnection) -> list[AppliedMigration]:
    """Every applied migration of every set, in the order they were applied."""
    if not user_version(conn):
        return []
    rows = conn.execute(
        "SELECT migration_set, version, name, checksum, applied_at_ms, ckptdb_version"
        " FROM ckptdb_migration ORDER BY applied_at_ms, migration_set, version"
    )
    return [typed(AppliedMigration, row, _APPLIED_TYPES, "migration record") for row in rows]
