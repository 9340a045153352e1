"""``migrate`` on PostgreSQL: status, plan, ``up`` (every pending migration in one
transaction under the schema's lock), a failure that leaves the database as it was, and the
``ckptdb migrate`` commands with a URL -- machines migrating at once apply each migration
once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import child_env

import ckptdb
from ckptdb import errors
from ckptdb.connection.postgres import PgConnection
from ckptdb.store import migrations, settings

SCRIPT = str(Path(sys.executable).parent / "ckptdb")
LATEST = migrations.postgresql_core_set().latest


def database_at(url: str, version: int) -> None:
    """ckptdb's schema in the empty database at ``url`` as a release that shipped
    migrations 1..``version`` left it, with one checkpoint stored."""
    core = migrations.postgresql_core_set()
    conn = PgConnection.open(url)
    try:
        with conn.write_transaction():
            conn.lock(migrations.SCHEMA_LOCK)
            migrations.apply_pending_together(conn, core, target=version, now_ms=1_000)
            settings.init_new_file(conn, 64 * 1024, fixed=False)
    finally:
        conn.close()


def schema_version(url: str) -> tuple[int, list[int]]:
    """The core version and the applied core migrations, read outside ckptdb's API."""
    conn = PgConnection.open(url)
    try:
        with conn.read_transaction():
            versions = [
                int(r[0])
                for r in conn.execute(
                    "SELECT version FROM ckptdb_migration WHERE migration_set = 'core'"
                    " ORDER BY version"
                )
            ]
            return migrations.user_version(conn), versions
    finally:
        conn.close()


def test_up_applies_the_pending_migrations_and_records_it(pg_url: str) -> None:
    assert LATEST >= 5
    database_at(pg_url, 3)
    with pytest.raises(errors.MigrationPendingError) as refused:
        ckptdb.open(pg_url, migrate="never")
    assert refused.value.details["pending"] == list(range(4, LATEST + 1))
    with ckptdb.open(pg_url, migrate="check") as db:
        status = db.migration_status()
        assert (status.file_version, status.code_version, status.up_to_date) == (3, LATEST, False)
        assert [m.version for m in db.migration_plan(to=4)] == [4]
        assert "ckptdb_session_guard" in (db.migration_plan(to=4)[0].sql or "")
        first = db.migrate(to=4)
        assert (first.from_version, first.to_version) == (3, 4)
        assert [m.version for m in first.applied] == [4]
        assert first.backup_path is None and not first.backup_verified
        # A backup file is SQLite's: refused, nothing written.
        with pytest.raises(errors.EngineUnsupportedError) as exc:
            db.migrate(backup="/tmp/never-written.bak")
        assert "pg_dump" in exc.value.message and not Path("/tmp/never-written.bak").exists()
        assert schema_version(pg_url) == (4, [1, 2, 3, 4])
        with pytest.raises(errors.InvalidInputError):
            db.migrate(to=3)  # only forward
        rest = db.migrate(backup=False)
        assert [m.version for m in rest.applied] == list(range(5, LATEST + 1))
        assert db.migration_status().up_to_date
        # Up to date: the handle works, and another run changes nothing.
        assert db.commit("after/migrate", {"a": b"1"}).created
        again = db.migrate()
        assert again.applied == [] and again.receipt_id is None
        bodies = [r.body for r in db.receipts(kind="migration")]
        assert [(b["from_version"], b["to_version"], b["backup"]) for b in bodies] == [
            (4, LATEST, None),
            (3, 4, None),
        ]
        assert db.verify().ok
    assert schema_version(pg_url) == (LATEST, list(range(1, LATEST + 1)))


def test_a_failing_migration_leaves_the_database_as_it_was(pg_url: str) -> None:
    database_at(pg_url, 3)
    # An object in the way of migration 4 (which creates this function): it fails.
    conn = PgConnection.open(pg_url)
    try:
        with conn.write_transaction():
            conn.execute(
                "CREATE FUNCTION ckptdb_session_guard() RETURNS trigger LANGUAGE plpgsql"
                " AS $f$ BEGIN RETURN NULL; END $f$"
            )
    finally:
        conn.close()
    with ckptdb.open(pg_url, migrate="check") as db:
        with pytest.raises(errors.MigrationFailedError) as exc:
            db.migrate()
        assert exc.value.details["version"] == 3 and "Nothing was changed" in exc.value.message
        assert schema_version(pg_url) == (3, [1, 2, 3])
    conn = PgConnection.open(pg_url)
    try:
        with conn.write_transaction():
            conn.execute("DROP FUNCTION ckptdb_session_guard()")
    finally:
        conn.close()
    with ckptdb.open(pg_url, migrate="check") as db:
        assert db.migrate().to_version == LATEST
        # The failed run recorded nothing.
        bodies = [r.body for r in db.receipts(kind="migration")]
        assert [(b["from_version"], b["to_version"]) for b in bodies] == [(3, LATEST)]


def test_machines_running_migrate_up_at_once_apply_each_migration_once(pg_url: str) -> None:
    """Three machines run ``ckptdb migrate up URL`` at once: the test holds the history
    table until all three wait on it, so they race from the same instant; the schema's
    lock lets one apply the pending migrations, the others find nothing to do."""
    database_at(pg_url, 3)
    secret = pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret-pw@", 1)
    holder, watcher = PgConnection.open(pg_url), PgConnection.open(pg_url)
    try:
        with holder.write_transaction():
            holder.execute("LOCK TABLE ckptdb_migration IN ACCESS EXCLUSIVE MODE")
            procs = [
                subprocess.Popen(
                    [SCRIPT, "migrate", "up", secret, "--json"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=child_env(),
                )
                for _ in range(3)
            ]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with watcher.read_transaction():
                    waiting = watcher.scalar(
                        "SELECT count(*) FROM pg_locks WHERE NOT granted"
                        " AND relation = 'ckptdb_migration'::regclass"
                    )
                if waiting == 3:
                    break
                time.sleep(0.02)
            assert waiting == 3
    finally:
        holder.close()
        watcher.close()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "s3cret-pw" not in out + err
        results.append(json.loads(out))
    applied = sorted(len(r["applied"]) for r in results)
    assert applied == [0, 0, LATEST - 3]
    assert all(r["to_version"] == LATEST for r in results)
    assert schema_version(pg_url) == (LATEST, list(range(1, LATEST + 1)))
    status = subprocess.run(
        [SCRIPT, "migrate", "status", secret, "--json"],
        capture_output=True,
        text=True,
        env=child_env(),
        check=True,
    )
    assert json.loads(status.stdout)["up_to_date"] is True
