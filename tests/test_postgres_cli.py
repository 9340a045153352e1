"""The ckptdb command with a PostgreSQL URL in place of DB: the same commands, the same
answers, the URL's password never printed -- through the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import child_env

from ckptdb.testing.postgres import PostgresServer

SCRIPT = str(Path(sys.executable).parent / "ckptdb")


def ckpt(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [SCRIPT, *args], capture_output=True, text=True, env=child_env(), timeout=120, check=False
    )
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def ckpt_json(*args: str) -> Any:
    return json.loads(ckpt(*args, "--json").stdout)


@pytest.fixture
def secret_url(pg_server: PostgresServer, pg_url: str) -> str:
    """``pg_url`` with a password in it (the test server trusts its socket: it is ignored
    there, and must never be printed)."""
    return pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret-pw@", 1)


def test_the_commands_take_a_url(secret_url: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "state.json").write_text('{"step": 1}')
    first = ckpt("init", secret_url)
    ack = ckpt_json("commit", secret_url, "job/1", str(src / "state.json"))
    (src / "state.json").write_text('{"step": 2}')
    second = ckpt_json("commit", secret_url, "job/1", str(src / "state.json"))
    assert second["parent_id"] == ack["checkpoint_id"]
    log = ckpt_json("log", secret_url, "job/1")
    assert [c["id"] for c in log] == [second["checkpoint_id"], ack["checkpoint_id"]]
    cat = ckpt("cat", secret_url, second["checkpoint_id"], "state.json")
    assert cat.stdout == '{"step": 2}'
    assert ckpt_json("verify", secret_url)["ok"] is True
    (src / "state.json").write_text('{"step": 3}')
    ckpt_json("commit", secret_url, "job/1", str(src / "state.json"))
    # CURRENT and its fallback stay; the first checkpoint goes
    report = ckpt_json("gc", secret_url, "--keep-last", "1", "--grace", "0s")
    assert report["checkpoints_deleted"] == 1
    assert [c["id"] for c in ckpt_json("log", secret_url, "job/1")][1] == second["checkpoint_id"]
    outputs = [first, cat, ckpt("stats", secret_url), ckpt("namespaces", secret_url)]
    assert all("s3cret-pw" not in p.stdout + p.stderr for p in outputs)


def test_a_backup_file_on_postgresql_exits_6_without_the_password(
    secret_url: str, tmp_path: Path
) -> None:
    """``migrate up --backup PATH`` asks for SQLite's backup file: refused (the migrations
    run in one transaction there), nothing written, the password never shown."""
    ckpt("init", secret_url)
    refused = ckpt("migrate", "up", secret_url, "--backup", str(tmp_path / "b.bak"), code=6)
    assert not list(tmp_path.iterdir())
    assert "engine_unsupported" in refused.stderr or "pg_dump" in refused.stderr
    assert "s3cret-pw" not in refused.stdout + refused.stderr
    assert "nothing to do" in ckpt("migrate", "up", secret_url).stdout


def test_a_database_without_the_schema_is_not_created_by_a_reading_command(
    secret_url: str,
) -> None:
    refused = ckpt("namespaces", secret_url, code=refused_code())
    assert "s3cret-pw" not in refused.stdout + refused.stderr
    assert "create" in refused.stderr
    ckpt("init", secret_url)
    assert ckpt_json("namespaces", secret_url) == []


def refused_code() -> int:
    from ckptdb import errors

    return errors.DatabaseFileError("x").exit_status
