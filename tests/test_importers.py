"""Importers from other stores: correct, idempotent, verifying, refusing hostile input."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import all_files_digest

import ckptdb
from ckptdb import canonical, errors
from ckptdb.cli import main
from ckptdb.importers import run_import


@pytest.fixture
def db(location: str) -> Iterator[ckptdb.Database]:
    """A new database on each engine in turn: the importers write through the public API."""
    with ckptdb.open(location) as handle:
        yield handle


def cli_json(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return json.loads(result.stdout)


# -- fs-store -----------------------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_fs_store(root: Path, states: list[dict[str, bytes]], brain: str = "brain-1") -> list[str]:
    """Write checkpoints the way the seed store lays them out; returns ids oldest first."""
    (root / "checkpoints").mkdir(parents=True)
    ids: list[str] = []
    previous = None
    for generation, files in enumerate(states, start=1):
        inventory = [
            {
                "schema": "file-v1",
                "logical_name": name.replace("/", "_"),
                "relative_path": name,
                "schema_id": "state",
                "schema_version": "1",
                "content_digest": _sha(data),
                "byte_len": len(data),
                "blob_path": f"files/{_sha(data)}",
            }
            for name, data in sorted(files.items())
        ]
        body = {
            "schema": "manifest-v1",
            "brain_id": brain,
            "epoch": 1,
            "generation": generation,
            "revision": generation,
            "schema_versions": {"state": "1"},
            "file_inventory": inventory,
            "created_at_unix_ms": 1_700_000_000_000 + generation,
            "previous_checkpoint_id": previous,
        }
        checkpoint_id = _sha(canonical.dumps(body).encode())
        directory = root / "checkpoints" / checkpoint_id
        (directory / "files").mkdir(parents=True)
        for data in files.values():
            (directory / "files" / _sha(data)).write_bytes(data)
        (directory / "manifest.json").write_text(
            json.dumps({**body, "checkpoint_id": checkpoint_id})
        )
        ids.append(checkpoint_id)
        previous = checkpoint_id
    (root / "CURRENT").write_text(
        json.dumps(
            {
                "schema": "current-v1",
                "pointer_revision": len(ids),
                "current_checkpoint_id": ids[-1],
                "fallback_checkpoint_id": ids[-2] if len(ids) > 1 else None,
            }
        )
    )
    return ids


STATES = [
    {"graph/snapshot.json": b'{"turn": 1}', "ingest_roots.json": b"[]"},
    {
        "graph/snapshot.json": b'{"turn": 2}',
        "ingest_roots.json": b"[]",
        "side.bin": os.urandom(5000),
    },
    {"graph/snapshot.json": b'{"turn": 3}', "ingest_roots.json": b'["/data"]'},
]


def test_fs_store_imports_the_lineage_of_current_idempotently(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    ids = make_fs_store(root, STATES)
    (root / "checkpoints" / ".staging-abc").mkdir()
    orphan = make_fs_store(tmp_path / "other", [{"x": b"orphan"}])[0]
    os.rename(tmp_path / "other" / "checkpoints" / orphan, root / "checkpoints" / orphan)

    report = run_import(db, "fs-store", str(root))
    assert [i.source_id for i in report.imported] == ids and all(i.created for i in report.imported)
    assert {s.code for s in report.skipped} == {"staging", "orphan"}
    assert report.namespaces == ["brain-1"] and report.receipt_id is not None
    lineage = db.lineage("brain-1")
    assert [c.metadata["source_id"] for c in lineage] == list(reversed(ids))
    head = db.current("brain-1")
    assert head is not None and head.read("ingest_roots.json") == b'["/data"]'
    assert head.entries["graph/snapshot.json"].schema_pin == "state/1"
    assert head.metadata["generation"] == 3 and head.metadata["brain_id"] == "brain-1"
    assert db.get(lineage[1].id).read("side.bin") == STATES[1]["side.bin"]

    again = run_import(db, "fs-store", str(root))
    assert not any(i.created for i in again.imported) and len(again.imported) == 3
    assert len(db.lineage("brain-1")) == 3


def test_fs_store_skips_damaged_and_hostile_checkpoints(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    ids = make_fs_store(root, STATES)
    middle = root / "checkpoints" / ids[1]
    blob = middle / "files" / _sha(STATES[1]["side.bin"])
    blob.write_bytes(b"bit rot")  # wrong digest
    report = run_import(db, "fs-store", str(root))
    assert [i.source_id for i in report.imported] == [ids[0], ids[2]]
    assert [(s.source_id, s.code) for s in report.skipped] == [(ids[1], "corrupt")]

    # A symlinked blob is refused, not followed.
    root2 = tmp_path / "store2"
    ids2 = make_fs_store(root2, STATES[:2], brain="b2")
    target = root2 / "checkpoints" / ids2[1] / "files" / _sha(STATES[1]["side.bin"])
    secret = tmp_path / "secret"
    secret.write_bytes(STATES[1]["side.bin"])
    target.unlink()
    target.symlink_to(secret)
    r2 = run_import(db, "fs-store", str(root2))
    assert [(s.source_id, s.code) for s in r2.skipped] == [(ids2[1], "invalid_source")]
    assert "symlink" in r2.skipped[0].detail

    # A '..' relative path is refused.
    root3 = tmp_path / "store3"
    ids3 = make_fs_store(root3, [{"../escape": b"evil"}], brain="b3")
    r3 = run_import(db, "fs-store", str(root3))
    assert r3.imported == [] and r3.skipped[0].source_id == ids3[0]

    # A truncated manifest ends the walk: older ancestors become unreachable.
    root4 = tmp_path / "store4"
    ids4 = make_fs_store(root4, STATES, brain="b4")
    manifest = root4 / "checkpoints" / ids4[1] / "manifest.json"
    manifest.write_bytes(manifest.read_bytes()[:40])
    r4 = run_import(db, "fs-store", str(root4))
    assert [i.source_id for i in r4.imported] == [ids4[2]]
    assert (ids4[1], "unreadable") in [(s.source_id, s.code) for s in r4.skipped]
    assert db.verify().ok


def test_fs_store_refuses_an_unreadable_current(db: ckptdb.Database, tmp_path: Path) -> None:
    root = tmp_path / "store"
    make_fs_store(root, STATES)
    (root / "CURRENT").write_text("{not json")
    before = all_files_digest(Path(db.path))
    with pytest.raises(errors.SourceError, match="refusing to guess"):
        run_import(db, "fs-store", str(root))
    assert all_files_digest(Path(db.path)) == before
    link = tmp_path / "link"
    link.symlink_to(root)
    with pytest.raises(errors.SourceError):
        run_import(db, "fs-store", str(link))


# -- json-dir -----------------------------------------------------------------------------


def make_doc(
    directory: Path, checkpoint_id: str, run: str, created: str, **extra: Any
) -> dict[str, Any]:
    doc = {
        "schemaVersion": "agent-context-checkpoint.v1",
        "checkpointId": checkpoint_id,
        "runId": run,
        "createdAt": created,
        "summary": f"state of {checkpoint_id}",
        **extra,
    }
    doc["checkpointDigest"] = _sha(canonical.dumps(doc).encode())
    (directory / f"{checkpoint_id}.json").write_text(json.dumps(doc, indent=2))
    return doc


def test_json_dir_one_namespace_per_run_in_created_order(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    src = tmp_path / "ctx"
    src.mkdir()
    make_doc(src, "c-3", "run-a", "2026-01-01T10:00:03Z")
    make_doc(src, "a-1", "run-a", "2026-01-01T10:00:01Z")
    make_doc(src, "b-2", "run-a", "2026-01-01T10:00:02Z")
    make_doc(src, "z-1", "run-b", "2026-01-02T00:00:00Z")
    bad = make_doc(src, "bad", "run-a", "2026-01-01T10:00:04Z")
    (src / "bad.json").write_text(json.dumps({**bad, "summary": "tampered"}))
    (src / "trunc.json").write_text('{"checkpointId": "trunc", "runId"')
    make_doc(src, "wrong-name", "run-a", "2026-01-01T10:00:05Z")
    os.rename(src / "wrong-name.json", src / "renamed.json")
    outside = tmp_path / "outside.json"
    make_doc(tmp_path, "outside", "run-a", "2026-01-01T10:00:06Z")
    (src / "outside.json").symlink_to(outside)
    (src / ".a-1.json.123.tmp").write_text("partial")

    report = run_import(db, "json-dir", str(src))
    assert report.namespaces == ["run-a", "run-b"]
    assert [c.metadata["source_id"] for c in reversed(db.lineage("run-a"))] == ["a-1", "b-2", "c-3"]
    assert db.current("run-b").read("checkpoint.json") == (src / "z-1.json").read_bytes()  # type: ignore[union-attr]
    codes = {s.source_id: s.code for s in report.skipped}
    assert codes == {
        "bad.json": "corrupt",
        "trunc.json": "invalid_source",
        "renamed.json": "invalid_source",
        "outside.json": "invalid_source",
        ".a-1.json.123.tmp": "temporary",
    }
    again = run_import(db, "json-dir", str(src))
    assert not any(i.created for i in again.imported)
    prefixed = run_import(db, "json-dir", str(src), namespace="imported")
    assert prefixed.namespaces == ["imported/run-a", "imported/run-b"]


# -- state-dir ----------------------------------------------------------------------------


def make_state(directory: Path, turn: int, schema_version: int = 2) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "recognizers.jsonl").write_text(f'{{"r": {turn}}}\n')
    (directory / "discovery_candidates.jsonl").write_text("")
    (directory / "session_state.json").write_text(json.dumps({"turn": turn}))
    time.sleep(0.01)
    (directory / "manifest.json").write_text(
        json.dumps(
            {"schema_version": schema_version, "turn_count": turn, "written_at_revision": "abc123"}
        )
    )


def test_state_dir_is_one_all_or_nothing_checkpoint(db: ckptdb.Database, tmp_path: Path) -> None:
    state = tmp_path / "engine_state"
    make_state(state, 12)
    (state / ".session_state.json.77.tmp").write_text("{")
    report = run_import(db, "state-dir", str(state))
    ns = "state:" + str(state.resolve())  # the resolved path: no two directories share it
    assert report.namespaces == [ns] and report.imported[0].created
    assert [s.code for s in report.skipped] == ["temporary"]
    cp = db.current(ns)
    assert cp is not None and set(cp.entries) == {
        "recognizers.jsonl",
        "discovery_candidates.jsonl",
        "session_state.json",
        "manifest.json",
    }
    assert cp.metadata["schema_version"] == 2 and cp.metadata["written_at_revision"] == "abc123"
    assert not run_import(db, "state-dir", str(state)).imported[0].created
    make_state(state, 13)
    assert run_import(db, "state-dir", str(state)).imported[0].created
    assert [c.metadata["turn_count"] for c in db.lineage(ns)] == [13, 12]


@pytest.mark.parametrize("hostile", ["too_new", "unfinished", "symlink", "truncated"])
def test_state_dir_refusals_import_nothing(
    db: ckptdb.Database, tmp_path: Path, hostile: str
) -> None:
    state = tmp_path / "engine_state"
    make_state(state, 5, schema_version=3 if hostile == "too_new" else 2)
    if hostile == "unfinished":
        time.sleep(0.01)
        (state / "recognizers.jsonl").write_text("half-written")
    elif hostile == "symlink":
        (state / "extra.json").symlink_to(tmp_path / "elsewhere.json")
    elif hostile == "truncated":
        (state / "manifest.json").write_text('{"schema_version": 2, "turn_co')
    expected = errors.SourceTooNewError if hostile == "too_new" else errors.SourceError
    with pytest.raises(expected):
        run_import(db, "state-dir", str(state))
    assert db.namespaces() == []


def test_import_from_command(tmp_path: Path, location: str) -> None:
    """The command on each engine: DB a file, or a PostgreSQL URL."""
    db = location
    make_fs_store(tmp_path / "store", STATES)
    cli_json("init", str(db))
    dry = cli_json("import-from", "fs-store", str(tmp_path / "store"), str(db), "--dry-run")
    assert (
        dry["dry_run"] and len(dry["imported"]) == 3 and dry["imported"][0]["checkpoint_id"] is None
    )
    with ckptdb.open(db) as handle:
        assert handle.namespaces() == []
    done = cli_json(
        "import-from", "fs-store", str(tmp_path / "store"), str(db), "--namespace", "moved"
    )
    assert done["namespaces"] == ["moved"] and all(i["created"] for i in done["imported"])
    make_state(tmp_path / "st", 1)
    assert cli_json("import-from", "state-dir", str(tmp_path / "st"), str(db))["imported"]
    (tmp_path / "docs").mkdir()
    make_doc(tmp_path / "docs", "x", "r", "2026-01-01T00:00:00Z")
    assert cli_json("import-from", "json-dir", str(tmp_path / "docs"), str(db))["namespaces"] == [
        "r"
    ]
    (tmp_path / "store" / "CURRENT").write_text("garbage")
    err = cli_json("import-from", "fs-store", str(tmp_path / "store"), str(db), code=7)
    assert err["code"] == "invalid_source"
