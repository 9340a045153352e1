"""Schema migration tooling: status, plan, history, up with a verified backup, refusals."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, all_files_digest, child_env, file_digest, raw_sql

import ckptdb
from ckptdb import errors
from ckptdb.cli import main
from ckptdb.connection.faults import FaultPlan, FaultVFS
from ckptdb.store import migrations as migrate

V1 = REPO / "tests" / "fixtures" / "v1.ckpt"


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    path = tmp_path / "old.ckpt"
    shutil.copyfile(V1, path)
    return path


def cli(*args: str, code: int = 0) -> object:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.exit_code, result.output, result.stderr)
    return json.loads(result.stdout) if "--json" in args else result.stdout


def test_status_plan_history_then_up_with_verified_backup(v1: Path) -> None:
    status = cli("migrate", str(v1), "status", "--json")
    assert status["file_version"] == 1 and status["code_version"] == migrate.core_set().latest
    assert [m["version"] for m in status["pending"]] == list(
        range(2, migrate.core_set().latest + 1)
    )
    plan = cli("migrate", str(v1), "plan", "--json")
    assert "CREATE TABLE pin" in plan[0]["sql"]
    assert "CREATE TABLE pin" in cli("migrate", str(v1), "plan")
    history = cli("migrate", str(v1), "history", "--json")
    assert [(h["migration_set"], h["version"]) for h in history] == [("core", 1)]
    assert history[0]["ckptdb_version"] and history[0]["applied_at"]
    before = file_digest(v1)

    result = cli("migrate", str(v1), "up", "--json")
    backup = Path(result["backup_path"])
    assert result["from_version"] == 1 and result["backup_verified"]
    assert backup.name.startswith("old.ckpt.v1.") and os.stat(backup).st_mode & 0o777 == 0o600
    # The backup is the old version, intact: same bytes of data as before the upgrade.
    assert cli("migrate", str(backup), "status", "--json")["file_version"] == 1
    with ckptdb.open(backup, migrate="check", readonly=True) as old:
        assert old.migration_status().file_version == 1
    assert file_digest(v1) != before
    assert cli("migrate", str(v1), "status", "--json")["up_to_date"] is True
    assert [h["version"] for h in cli("migrate", str(v1), "history", "--json")] == list(
        range(1, migrate.core_set().latest + 1)
    )
    with ckptdb.open(v1) as db:
        assert db.verify().ok
        assert db.receipts(kind="migration")[0].body["from_version"] == 1
    assert "nothing to do" in cli("migrate", str(v1), "up")


def test_up_options_to_backup_path_and_no_backup(v1: Path, tmp_path: Path) -> None:
    assert cli("migrate", str(v1), "up", "--to", "1", "--json")["applied"] == []
    target = tmp_path / "mine.bak"
    res = cli("migrate", str(v1), "up", "--backup", str(target), "--json")
    assert res["backup_path"] == str(target) and target.exists()
    other = tmp_path / "other.ckpt"
    shutil.copyfile(V1, other)
    res = cli("migrate", str(other), "up", "--no-backup", "--json")
    assert res["backup_path"] is None and res["to_version"] == migrate.core_set().latest
    assert not list(tmp_path.glob("other.ckpt.v1.*"))
    assert cli("migrate", str(other), "up", "--backup", "x", "--no-backup", "--json", code=7)


def test_open_modes_never_check_auto(v1: Path) -> None:
    with pytest.raises(errors.MigrationPendingError) as exc:
        ckptdb.open(v1, migrate="never")
    assert "0002_pins_retention_gc" in str(exc.value)
    assert exc.value.details["pending"] == list(range(2, migrate.core_set().latest + 1))
    with ckptdb.open(v1, migrate="check") as db:
        assert not db.migration_status().up_to_date
        with pytest.raises(errors.MigrationPendingError):
            db.current("agent/brain-1")
    with ckptdb.open(v1) as db:  # auto
        assert db.migration_status().up_to_date
        assert db.current("agent/brain-1") is not None


def test_refusals_leave_the_file_unchanged(v1: Path) -> None:
    raw_sql(
        v1, "INSERT INTO ckptdb_migration VALUES ('core', 5, 'ghost', ?, 0, '9.9')", ("ab" * 32,)
    )
    before = all_files_digest(v1)
    with pytest.raises(errors.MigrationHistoryError):
        ckptdb.open(v1)
    err = cli("migrate", str(v1), "up", "--json", code=6)
    assert err["code"] == "migration_history_invalid"
    assert all_files_digest(v1) == before
    assert not list(v1.parent.glob("old.ckpt.v1.*"))


def test_failed_migration_stays_at_last_version_and_says_how_to_restore(
    v1: Path, tmp_path: Path
) -> None:
    vfs = FaultVFS("migrate-fault")
    try:
        with (
            ckptdb.open(v1, migrate="check", vfs=vfs.name) as db,
            vfs.armed(FaultPlan(op="write", nth=3, persistent=True)),
            pytest.raises(errors.MigrationFailedError) as exc,
        ):
            db.migrate(backup=tmp_path / "before.bak")
        message = str(exc.value)
        assert "version 1" in message and str(tmp_path / "before.bak") in message
        assert "copy" in message
    finally:
        vfs.unregister()
    with ckptdb.open(v1, migrate="check") as db:
        assert db.migration_status().file_version == 1
    # Restoring the backup as the message says gives a working file.
    for suffix in ("-wal", "-shm"):
        Path(str(v1) + suffix).unlink(missing_ok=True)
    shutil.copyfile(tmp_path / "before.bak", v1)
    with ckptdb.open(v1) as db:
        assert db.verify().ok


def test_runner_applies_each_migration_in_its_own_transaction(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "0001_a.sql").write_text("CREATE TABLE t_a (x INTEGER) STRICT;")
    (folder / "0002_b.sql").write_text(
        "CREATE TABLE t_b (x INTEGER) STRICT; INSERT INTO nope VALUES (1);"
    )
    (folder / "0003_c.sql").write_text("CREATE TABLE t_c (x INTEGER) STRICT;")
    with pytest.raises(errors.MigrationFailedError) as exc:
        db.apply_migration_set("partial", folder)
    assert "still at version 1" in str(exc.value)
    tables = {r[0] for r in raw_sql(db.path, "SELECT name FROM sqlite_schema WHERE type='table'")}
    assert "t_a" in tables and "t_b" not in tables and "t_c" not in tables
    (folder / "0005_gap.sql").write_text("SELECT 1;")
    with pytest.raises(errors.MigrationHistoryError):
        db.apply_migration_set("gappy", folder)


def test_migration_waits_for_the_write_lock_then_refuses(v1: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import apsw, sys, time\n"
            f"c = apsw.Connection({str(v1)!r})\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "print('LOCKED', flush=True)\n"
            "time.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "LOCKED"
        start = time.monotonic()
        err = cli("migrate", str(v1), "up", "--timeout", "0.5", "--json", code=8)
        assert err["code"] == "busy_timeout"
        assert 0.4 < time.monotonic() - start < 10
        assert not list(v1.parent.glob("old.ckpt.v1.*"))  # refused before any backup
    finally:
        holder.kill()
        holder.wait()
    with ckptdb.open(v1, migrate="check") as db:
        assert db.migration_status().file_version == 1
