"""The ckptdb command: every command through click's runner, and end to end through the
installed console script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import all_files_digest, file_digest, raw_sql

import ckptdb
from ckptdb.cli import main

# The console script of the environment running the tests (not whatever is on PATH).
SCRIPT = str(Path(sys.executable).parent / "ckptdb")


def run(*args: str, code: int = 0, input: bytes | None = None) -> Any:
    runner = CliRunner()
    result = runner.invoke(main, list(args), input=input, catch_exceptions=False)
    assert result.exit_code == code, (result.exit_code, result.output, result.stderr)
    return result


def run_json(*args: str, code: int = 0) -> Any:
    return json.loads(run(*args, "--json", code=code).stdout)


@pytest.fixture
def populated(tmp_path: Path) -> Path:
    db = tmp_path / "cli.ckpt"
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"alpha\n")
    (src / "sub" / "b.bin").write_bytes(bytes(range(256)))
    run("commit", str(db), "brain", str(src), "--meta", "turn=1", "--meta", "who=cli", "--create")
    (src / "a.txt").write_bytes(b"alpha v2\n")
    run("commit", str(db), "brain", str(src), "--meta", "turn=2")
    return db


def test_init_creates_and_refuses_foreign_files(tmp_path: Path) -> None:
    out = run_json("init", str(tmp_path / "new.ckpt"))
    assert out["schema_version"] >= 1 and out["checkpoints"] == 0
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database")
    before = all_files_digest(foreign)
    result = run("init", str(foreign), code=6)
    assert result.stderr.startswith("error: not_a_database: ")
    assert all_files_digest(foreign) == before
    err = run_json("init", str(foreign), code=6)
    assert err["code"] == "not_a_database" and err["message"]


def test_commit_files_directories_and_metadata(tmp_path: Path) -> None:
    db = tmp_path / "c.ckpt"
    (tmp_path / "d" / "deep").mkdir(parents=True)
    (tmp_path / "d" / "deep" / "x.json").write_text("{}")
    (tmp_path / "single.txt").write_text("one")
    meta = tmp_path / "meta.json"
    meta.write_text('{"run_id": "r-7", "loss": 0.25}')
    ack = run_json(
        "commit",
        str(db),
        "ns",
        str(tmp_path / "d"),
        str(tmp_path / "single.txt"),
        "--meta-json",
        str(meta),
        "--meta",
        "step=10",
        "--meta",
        "label=hello world",
        "--expect-current",
        "none",
        "--create",
    )
    assert set(ack) >= {"checkpoint_id", "generation", "bytes_stored", "bytes_deduplicated"}
    with ckptdb.open(db) as handle:
        cp = handle.get(ack["checkpoint_id"])
        assert set(cp.entries) == {"deep/x.json", "single.txt"}
        assert cp.metadata == {"run_id": "r-7", "loss": 0.25, "step": 10, "label": "hello world"}
    again = run_json(
        "commit",
        str(db),
        "ns",
        str(tmp_path / "single.txt"),
        "--expect-current",
        ack["checkpoint_id"][:10],
    )
    assert again["parent_id"] == ack["checkpoint_id"]
    # The same commit again is an idempotent retry; different content is a conflict.
    retry = run_json(
        "commit",
        str(db),
        "ns",
        str(tmp_path / "single.txt"),
        "--expect-current",
        ack["checkpoint_id"],
    )
    assert retry["checkpoint_id"] == again["checkpoint_id"] and not retry["created"]
    conflict = run_json(
        "commit",
        str(db),
        "ns",
        str(tmp_path / "d"),
        "--expect-current",
        ack["checkpoint_id"],
        code=4,
    )
    assert conflict["code"] == "conflict" and conflict["expected"] == ack["checkpoint_id"]


def test_commit_of_the_directory_holding_the_database_skips_its_files(tmp_path: Path) -> None:
    """`ckptdb commit DB ns .` where DB lives: the walk leaves out the database and its
    -wal/-shm (reading the log a commit appends to would never end); naming the database
    itself is refused."""
    db = tmp_path / "c.ckpt"
    (tmp_path / "notes.txt").write_text("notes")
    with ckptdb.open(db) as handle:
        handle.commit("ns", {"first": os.urandom(300_000)})
        assert Path(f"{db}-wal").exists()
        ack = run_json("commit", str(db), "ns", str(tmp_path))
        assert ack["entry_count"] == 1
        assert sorted(handle.current("ns").entries) == ["notes.txt"]  # type: ignore[union-attr]
    result = run("commit", str(db), "ns", str(db), code=7)
    assert "invalid_entry" in result.stderr and "cannot hold itself" in result.stderr


def test_commit_refuses_symlinks_and_bad_input(tmp_path: Path) -> None:
    db = tmp_path / "c.ckpt"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "ok.txt").write_text("ok")
    (tmp_path / "secret").write_text("secret")
    (tmp_path / "d" / "link").symlink_to(tmp_path / "secret")
    run("init", str(db))
    result = run("commit", str(db), "ns", str(tmp_path / "d"), code=7)
    assert "error: invalid_entry:" in result.stderr and "symlink" in result.stderr
    assert run("commit", str(db), "ns", str(tmp_path / "d" / "link"), code=7)
    assert (
        "invalid_metadata"
        in run(
            "commit", str(db), "ns", str(tmp_path / "secret"), "--meta", "novalue", code=7
        ).stderr
    )
    assert (
        "invalid_namespace" in run("commit", str(db), "", str(tmp_path / "secret"), code=7).stderr
    )
    assert run("commit", str(db), "ns", code=2)  # usage: PATH is required
    with ckptdb.open(db) as handle:
        assert handle.namespaces() == []


def test_current_namespaces_log_show(populated: Path) -> None:
    cur = run_json("current", str(populated), "brain")
    assert cur["checkpoint"]["generation"] == 2 and cur["pointer"]["revision"] == 2
    names = run_json("namespaces", str(populated))
    assert [n["name"] for n in names] == ["brain"]
    log = run_json("log", str(populated), "brain")
    assert [e["generation"] for e in log] == [2, 1]
    assert set(log[0]) >= {
        "id",
        "short_id",
        "generation",
        "created_at",
        "entry_count",
        "total_size",
        "metadata",
        "markers",
    }
    assert log[0]["markers"] == ["current"] and log[1]["markers"] == ["fallback"]
    assert log[0]["created_at"].endswith("Z") and len(log[0]["short_id"]) == 12
    assert len(run_json("log", str(populated), "brain", "--limit", "1")) == 1
    human = run("log", str(populated), "brain").stdout
    assert "turn=2" in human and log[0]["short_id"] in human
    show = run_json("show", str(populated), "brain~1")
    assert show["id"] == log[1]["id"] and show["metadata"]["turn"] == 1
    assert {e["name"] for e in show["entries"]} == {"a.txt", "sub/b.bin"}
    assert run_json("show", str(populated), log[0]["id"][:8])["id"] == log[0]["id"]
    assert run("show", str(populated), "brain@fallback").stdout.count(log[1]["id"]) == 1
    assert run_json("show", str(populated), "nope@current", code=3)["code"] == "namespace_not_found"
    assert run_json("show", str(populated), "zz", code=3)["code"] == "namespace_not_found"
    assert run_json("show", str(populated), "zz@", code=3)["code"] == "namespace_not_found"
    assert run_json("show", str(populated), " zz", code=7)["code"] == "invalid_reference"
    assert run_json("current", str(populated), "ghost", code=3)["code"] == "namespace_not_found"


def test_cat_is_binary_safe(populated: Path) -> None:
    assert run("cat", str(populated), "brain@current", "sub/b.bin").stdout_bytes == bytes(
        range(256)
    )
    assert run("cat", str(populated), "brain~1", "a.txt").stdout_bytes == b"alpha\n"
    assert "entry_not_found" in run("cat", str(populated), "brain@current", "zz", code=3).stderr


def test_checkout_writes_private_files_and_refuses_unsafe_targets(
    populated: Path, tmp_path: Path
) -> None:
    target = tmp_path / "out"
    result = run_json("checkout", str(populated), "brain@current", str(target))
    assert result["files"] == 2
    assert (target / "a.txt").read_bytes() == b"alpha v2\n"
    assert (target / "sub" / "b.bin").read_bytes() == bytes(range(256))
    assert os.stat(target / "a.txt").st_mode & 0o777 == 0o600
    assert os.stat(target / "sub").st_mode & 0o777 == 0o700
    assert os.stat(target).st_mode & 0o777 == 0o700
    # Not empty: refused without --force, replaced atomically with it.
    assert run_json("checkout", str(populated), "brain~1", str(target), code=7)["code"] == (
        "unsafe_path"
    )
    (target / "stale.txt").write_text("old")
    run("checkout", str(populated), "brain~1", str(target), "--force")
    assert (target / "a.txt").read_bytes() == b"alpha\n" and not (target / "stale.txt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    # A symlink planted in the parent chain is refused; nothing is written through it.
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "planted").symlink_to(real)
    err = run_json(
        "checkout", str(populated), "brain@current", str(tmp_path / "planted" / "x"), code=7
    )
    assert err["code"] == "unsafe_path" and "symlink" in err["message"]
    assert list(real.iterdir()) == []
    # DIR itself a symlink: refused.
    (tmp_path / "dirlink").symlink_to(real)
    assert (
        run_json(
            "checkout",
            str(populated),
            "brain@current",
            str(tmp_path / "dirlink"),
            "--force",
            code=7,
        )["code"]
        == "unsafe_path"
    )


def _craft_checkpoint_with_name(path: Path, namespace: str, name: str) -> None:
    """Publish a checkpoint whose manifest (consistently hashed) has an unsafe entry name, as
    a hostile file would: through the publish internals, skipping name validation."""
    from conftest import engine, prepared_blob, publish_crafted

    with engine(path) as eng:
        publish_crafted(eng, namespace, [(name, prepared_blob(eng, b"evil bytes"), None, None)])


@pytest.mark.parametrize("evil", ["../escape.txt", "/abs/path", "a/../../b", "ok/./x", "x\x00y"])
def test_checkout_refuses_traversal_names_in_a_crafted_database(
    populated: Path, tmp_path: Path, evil: str
) -> None:
    _craft_checkpoint_with_name(populated, "brain", evil.replace("\\x00", "\x00"))
    assert run_json("verify", str(populated))["ok"]  # consistently hashed: only names are evil
    target = tmp_path / "victim" / "out"
    target.parent.mkdir()
    err = run_json("checkout", str(populated), "brain@current", str(target), code=7)
    assert err["code"] == "invalid_entry_name"
    assert not target.exists() and list(target.parent.iterdir()) == []
    assert not (tmp_path / "escape.txt").exists() and not Path("/abs/path").exists()


def test_checkout_refuses_tampered_manifest(populated: Path, tmp_path: Path) -> None:
    raw_sql(
        populated,
        "UPDATE checkpoint SET entries = replace(entries, '[\"a.txt\",', '[\"../escape.txt\",')",
    )
    err = run_json("checkout", str(populated), "brain@current", str(tmp_path / "out"), code=5)
    assert err["code"] == "corrupt" and err["reason"] == "manifest_mismatch"
    assert not (tmp_path / "out").exists() and not (tmp_path / "escape.txt").exists()


def test_checkout_fallback_uses_verified_ancestor(populated: Path, tmp_path: Path) -> None:
    with ckptdb.open(populated) as db:
        digest = db.current("brain").entries["a.txt"].digest  # type: ignore[union-attr]
    raw_sql(populated, "UPDATE blob SET inline_data = x'00' WHERE digest = ?", (digest,))
    err = run_json("checkout", str(populated), "brain@current", str(tmp_path / "o1"), code=5)
    assert err["code"] == "corrupt"
    assert not (tmp_path / "o1").exists()
    out = run_json(
        "checkout", str(populated), "brain@current", str(tmp_path / "o2"), "--fallback", code=13
    )
    assert (tmp_path / "o2" / "a.txt").read_bytes() == b"alpha\n"
    assert out["checkpoint_id"] == run_json("show", str(populated), "brain~1")["id"]
    assert out["disposition"] == "degraded_fallback" and out["receipt_id"] >= 1
    assert out["requested_id"] == run_json("show", str(populated), "brain")["id"]
    said = run("checkout", str(populated), "brain", str(tmp_path / "o3"), "--fallback", code=13)
    assert "fell back" in said.stderr and "receipt #" in said.stderr


def test_verify_exit_status_and_report(populated: Path) -> None:
    report = run_json("verify", str(populated))
    assert report["ok"] and set(report) >= {"problems", "sqlite_integrity", "bytes_checked"}
    assert run_json("verify", str(populated), "--quick")["quick"] is True
    with ckptdb.open(populated) as db:
        digest = db.current("brain").entries["sub/b.bin"].digest  # type: ignore[union-attr]
    raw_sql(populated, "UPDATE blob SET inline_data = zeroblob(256) WHERE digest = ?", (digest,))
    bad = run_json("verify", str(populated), code=5)
    assert not bad["ok"]
    entries = {(p["entry"], p["code"]) for p in bad["problems"] if p["entry"]}
    assert ("sub/b.bin", "entry_corrupt") in entries
    assert "FAILED" in run("verify", str(populated), code=5).stdout


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO setting VALUES ('x', 'y')",
        "UPDATE checkpoint SET generation = 9",
        "DELETE FROM checkpoint",
        "DROP TABLE receipt",
        "CREATE TABLE t (x)",
        "ATTACH DATABASE ':memory:' AS other",
        "PRAGMA user_version = 7",
        "PRAGMA journal_mode = DELETE",
        "VACUUM",
        "VACUUM INTO '/tmp/ckptdb-vacuum-into.db'",
        "SELECT 1; DELETE FROM checkpoint",
        "BEGIN IMMEDIATE",
    ],
)
def test_sql_refuses_every_writing_statement(populated: Path, statement: str) -> None:
    before = file_digest(populated)
    err = run_json("sql", str(populated), statement, code=9)
    assert err["code"] == "read_only"
    assert file_digest(populated) == before
    # A read-only connection may leave SQLite's empty -wal/-shm companions, never frames.
    wal = Path(str(populated) + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    assert not Path("/tmp/ckptdb-vacuum-into.db").exists()


def test_sql_reads_with_table_json_and_csv(populated: Path) -> None:
    rows = run_json(
        "sql", str(populated), "SELECT namespace, depth, generation FROM lineage ORDER BY depth"
    )
    assert rows == [
        {"namespace": "brain", "depth": 0, "generation": 2},
        {"namespace": "brain", "depth": 1, "generation": 1},
    ]
    csv_out = run(
        "sql", str(populated), "SELECT name, size FROM entries ORDER BY name, size", "--csv"
    ).stdout.splitlines()
    assert csv_out[0] == "name,size" and len(csv_out) == 5
    assert "namespace" in run("sql", str(populated), "SELECT * FROM heads").stdout
    blob = run_json("sql", str(populated), "SELECT x'00ff' AS b")
    assert blob == [{"b": {"hex": "00ff"}}]
    assert run_json("sql", str(populated), "PRAGMA table_info(checkpoint)")
    assert run_json("sql", str(populated), "SELEC nonsense", code=7)["code"] == "invalid_query"


def test_stats_reports_dedup(populated: Path) -> None:
    st = run_json("stats", str(populated))
    assert st["checkpoints"] == 2 and st["namespaces"] == 1
    assert st["logical_bytes"] > st["stored_bytes"] and st["dedup_ratio"] > 1
    assert set(st) >= {"file_bytes", "wal_bytes", "free_pages", "blobs", "chunks"}
    assert "dedup ratio" in run("stats", str(populated)).stdout


def test_export_import_round_trip_preserves_ids(populated: Path, tmp_path: Path) -> None:
    dest = tmp_path / "exported.ckpt"
    receipt = run_json("export", str(populated), str(dest))
    assert receipt["checkpoints_copied"] == 2 and receipt["kind"] == "export"
    assert run_json("export", str(populated), str(dest), code=7)["code"] == "invalid_input"
    assert run_json("verify", str(dest))["ok"]
    original = run_json("log", str(populated), "brain")
    exported = run_json("log", str(dest), "brain")
    assert [e["id"] for e in exported] == [e["id"] for e in original]
    assert run_json("history", str(dest), "brain") == run_json("history", str(populated), "brain")

    fresh = tmp_path / "fresh.ckpt"
    first = run_json("import", str(fresh), str(dest), "--create")
    assert first["checkpoints_copied"] == 2 and first["pointers_moved"] == ["brain"]
    second = run_json("import", str(fresh), str(dest))
    assert second["checkpoints_copied"] == 0 and second["checkpoints_present"] == 2
    assert second["pointers_moved"] == []
    assert [e["id"] for e in run_json("log", str(fresh), "brain")] == [e["id"] for e in original]
    assert run_json("verify", str(fresh))["ok"]

    # A sideways pointer is reported, not overwritten, unless --overwrite.
    (tmp_path / "other.txt").write_text("diverged")
    run("commit", str(fresh), "brain", str(tmp_path / "other.txt"))
    (tmp_path / "more.txt").write_text("more")
    run("commit", str(populated), "brain", str(tmp_path / "more.txt"))
    dest2 = tmp_path / "exported2.ckpt"
    run("export", str(populated), str(dest2), "--since", "brain@current")
    conflict = run_json("import", str(fresh), str(dest2), code=4)
    assert conflict["conflicts"][0]["namespace"] == "brain"
    head_before = run_json("current", str(fresh), "brain")["checkpoint"]["id"]
    assert head_before != conflict["conflicts"][0]["incoming"]
    forced = run_json("import", str(fresh), str(dest2), "--overwrite")
    assert forced["pointers_moved"] == ["brain"]
    assert (
        run_json("current", str(fresh), "brain")["checkpoint"]["id"]
        == (conflict["conflicts"][0]["incoming"])
    )


def test_export_since_keeps_only_newer_lineage_plus_fallback(
    populated: Path, tmp_path: Path
) -> None:
    (tmp_path / "c.txt").write_text("third")
    run("commit", str(populated), "brain", str(tmp_path / "c.txt"))
    dest = tmp_path / "since.ckpt"
    receipt = run_json("export", str(populated), str(dest), "--since", "brain@current")
    # CURRENT plus its fallback (always kept so the pointer verifies).
    assert receipt["checkpoints_copied"] == 2
    assert run_json("verify", str(dest))["ok"]


def test_history_set_current_and_receipts(populated: Path) -> None:
    log = run_json("log", str(populated), "brain")
    moved = run_json("set-current", str(populated), "brain", "brain~1", "--reason", "rollback")
    assert moved["current_id"] == log[1]["id"] and moved["fallback_id"] == log[0]["id"]
    hist = run_json("history", str(populated), "brain")
    assert hist[0]["reason"] == "rollback" and len(hist) == 3
    run("verify", str(populated))
    kinds = [r["kind"] for r in run_json("receipts", str(populated))]
    assert "verify" in kinds


def test_fork_copies_the_lineage_without_blob_bytes(populated: Path) -> None:
    before = run_json("stats", str(populated))
    report = run_json("fork", str(populated), "brain", "brain-try-b")
    assert len(report["copies"]) == 2 and report["created"] == 2
    after = run_json("stats", str(populated))
    assert (after["blobs"], after["stored_bytes"]) == (before["blobs"], before["stored_bytes"])
    log = run_json("log", str(populated), "brain-try-b")
    assert [c["metadata"]["turn"] for c in log] == [2, 1]
    assert log[0]["id"] == report["current_id"]
    assert run("cat", str(populated), "brain-try-b@current", "a.txt").stdout == "alpha v2\n"
    assert run_json("fork", str(populated), "brain", "brain-try-b")["created"] == 0
    newest = run_json("fork", str(populated), "brain", "newest-only", "--limit", "1")
    assert len(newest["copies"]) == 1
    assert run_json("log", str(populated), "newest-only")[0]["parent_id"] is None
    missing = run("fork", str(populated), "no-such", "x", code=3)
    assert "namespace_not_found" in missing.stderr


def test_demo_runs_and_never_damages_the_users_database(tmp_path: Path) -> None:
    db = tmp_path / "mine.ckpt"
    (tmp_path / "state.json").write_text('{"mine": true}')
    run("commit", str(db), "my/app", str(tmp_path / "state.json"), "--create")
    out = run("demo", str(db)).stdout
    assert "degraded_fallback" in out and "verify() on your database: ok=True" in out
    with ckptdb.open(db) as handle:
        assert handle.verify().ok
        assert handle.current("my/app").read("state.json") == b'{"mine": true}'  # type: ignore[union-attr]
        assert {n.name for n in handle.namespaces()} == {"my/app", "demo/agent"}


def test_help_documents_exit_statuses() -> None:
    out = run("--help").stdout
    assert "Exit status" in out and "retryable" in out
    assert run("--version").stdout.strip().endswith(ckptdb.__version__)


# -- end to end through the installed console script --------------------------------------


def script(
    *args: str, code: int = 0, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run([SCRIPT, *args], capture_output=True, cwd=cwd, timeout=120, check=False)
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    return result


def test_console_script_end_to_end(tmp_path: Path) -> None:
    db = tmp_path / "e2e.ckpt"
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "w.bin").write_bytes(os.urandom(5000))
    script("init", str(db))
    ack = json.loads(script("commit", str(db), "job", str(tmp_path / "state"), "--json").stdout)
    assert (
        json.loads(script("current", str(db), "job", "--json").stdout)["checkpoint"]["id"]
        == (ack["checkpoint_id"])
    )
    assert json.loads(script("namespaces", str(db), "--json").stdout)[0]["name"] == "job"
    assert b"job" in script("log", str(db), "job").stdout
    assert json.loads(script("show", str(db), "job@current", "--json").stdout)["generation"] == 1
    assert (
        script("cat", str(db), "job@current", "w.bin").stdout
        == (tmp_path / "state" / "w.bin").read_bytes()
    )
    script("checkout", str(db), "job@current", str(tmp_path / "co"))
    assert (tmp_path / "co" / "w.bin").read_bytes() == (tmp_path / "state" / "w.bin").read_bytes()
    assert b"OK" in script("verify", str(db)).stdout
    assert b"lineage" not in script("sql", str(db), "SELECT count(*) AS n FROM lineage").stderr
    assert script("sql", str(db), "DELETE FROM checkpoint", code=9).stderr.startswith(
        b"error: read_only: "
    )
    assert b"dedup ratio" in script("stats", str(db)).stdout
    script("export", str(db), str(tmp_path / "x.ckpt"))
    script("import", str(tmp_path / "y.ckpt"), str(tmp_path / "x.ckpt"), "--create")
    assert b"commit" in script("history", str(db), "job").stdout
    assert b"verify" in script("receipts", str(db)).stdout
    script("set-current", str(db), "job", "job@current")
    assert b"degraded_fallback" in script("demo", str(tmp_path / "demo.ckpt")).stdout
    assert script("nonsense", code=2).stderr
    assert script("show", str(db), "job~5", code=3).stderr.startswith(
        b"error: checkpoint_not_found"
    )


def test_gc_pins_retention_prune_and_drop_commands(tmp_path: Path) -> None:
    db = tmp_path / "gc.ckpt"
    for i in range(8):
        (tmp_path / "s.bin").write_bytes(os.urandom(2000) + bytes([i]))
        run(
            "commit",
            str(db),
            "run",
            str(tmp_path / "s.bin"),
            "--meta",
            f"loss={i % 4}",
            "--meta",
            f"run_id=r{i % 2}",
            "--create",
        )
    log = run_json("log", str(db), "run")
    pinned = run_json("pin", str(db), "run~6", "baseline", "--note", "first good")
    assert pinned["checkpoint_id"] == log[6]["id"]
    assert run_json("pin", str(db), "run~5", "baseline", code=4)["code"] == "conflict"
    assert [p["name"] for p in run_json("pins", str(db))] == ["baseline"]
    assert "pinned" in run_json("log", str(db), "run")[6]["markers"]
    assert "P" in run("log", str(db), "run").stdout

    plan = run_json("gc", str(db), "--keep-last", "3", "--grace", "0s", "--dry-run")
    assert plan["dry_run"] and plan["checkpoints_deleted"] == 4
    assert "would delete 4" in run("gc", str(db), "--keep-last", "3", "--dry-run").stdout
    assert len(run_json("log", str(db), "run")) == 8  # dry run changed nothing
    done = run_json("gc", str(db), "--keep-last", "3", "--grace", "0s", "--keep-best", "loss:1:min")
    # keep-best keeps one more than the dry run planned; nothing outside the plan goes.
    assert set(done["deleted_ids"]) < set(plan["deleted_ids"])
    assert done["receipt_id"] is not None and done["checkpoints_deleted"] >= 2
    assert run_json("gc", str(db), "--keep-best", "loss", code=7)["code"] == "invalid_input"
    assert run_json("gc", str(db), "--keep-within", "soon", code=7)["code"] == "invalid_input"

    run("retention", "set", str(db), "--keep-last", "2")
    run("retention", "set", str(db), "--keep-daily", "7", "--namespace", "run")
    shown = run_json("retention", "show", str(db))
    assert shown == {"*": {"keep_last": 2}, "run": {"keep_daily": 7}}
    assert run_json("retention", "set", str(db), code=7)["code"] == "invalid_input"
    assert run_json("retention", "clear", str(db), "--namespace", "run")["removed"] is True

    pruned = run_json("prune", str(db), "--where", "run_id=r0", "--dry-run")
    assert pruned["dry_run"] and pruned["kind"] == "prune"
    run("unpin", str(db), "baseline")
    assert run_json("unpin", str(db), "baseline", code=3)["code"] == "not_found"
    run("pin", str(db), "run@current", "head")
    assert run_json("drop-namespace", str(db), "run", code=4)["code"] == "protected"
    dropped = run_json("drop-namespace", str(db), "run", "--force")
    assert dropped["checkpoints_deleted"] >= 3
    assert run_json("namespaces", str(db)) == []
    assert run_json("verify", str(db))["ok"]


def test_progress_stays_quiet_when_not_on_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    for i in range(5):
        (tmp_path / "d" / f"f{i}").write_bytes(os.urandom(1000))
    run("init", str(tmp_path / "q.ckpt"))
    result = run("commit", str(tmp_path / "q.ckpt"), "ns", str(tmp_path / "d"))
    assert result.stderr == "" and "committed" in result.stdout
    assert run("verify", str(tmp_path / "q.ckpt")).stderr == ""
