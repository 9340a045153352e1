"""Extension points for integrations: their own migration set, SQL sessions, rows written
atomically with a checkpoint, and branching from an older checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import raw_sql

import ckptdb
from ckptdb import errors


def _migrations(tmp_path: Path, *files: tuple[str, str]) -> Path:
    folder = tmp_path / "mig"
    folder.mkdir(exist_ok=True)
    for name, sql in files:
        (folder / name).write_text(sql)
    return folder


def test_integration_migration_set_is_versioned_and_checksummed(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    folder = _migrations(tmp_path, ("0001_writes.sql", "CREATE TABLE x_writes (k TEXT) STRICT;"))
    assert db.apply_migration_set("demo_ext", folder) == [1]
    assert db.apply_migration_set("demo_ext", folder) == []
    _migrations(tmp_path, ("0002_index.sql", "CREATE INDEX x_by_k ON x_writes (k);"))
    assert db.apply_migration_set("demo_ext", folder) == [2]
    rows = raw_sql(db.path, "SELECT migration_set, version FROM ckptdb_migration ORDER BY 1, 2")
    assert ("demo_ext", 2) in rows and ("core", 1) in rows
    (folder / "0001_writes.sql").write_text("CREATE TABLE x_writes (k TEXT, v TEXT) STRICT;")
    with pytest.raises(errors.MigrationChecksumError):
        db.apply_migration_set("demo_ext", folder)
    with pytest.raises(errors.InvalidInputError):
        db.apply_migration_set("core", folder)


def test_on_publish_rows_commit_atomically_with_the_checkpoint(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    db.apply_migration_set(
        "ext",
        _migrations(
            tmp_path,
            ("0001_t.sql", "CREATE TABLE ext_map (cid TEXT PRIMARY KEY, label TEXT) STRICT;"),
        ),
    )

    def record(session: ckptdb.Session, ack: ckptdb.CommitAck) -> None:
        session.execute("INSERT OR REPLACE INTO ext_map VALUES (?, 'ok')", (ack.checkpoint_id,))

    ack = db.commit("ns", {"a": b"1"}, on_publish=record)
    with db.read_session() as s:
        assert s.scalar("SELECT label FROM ext_map WHERE cid = ?", (ack.checkpoint_id,)) == "ok"

    def failing(session: ckptdb.Session, ack: ckptdb.CommitAck) -> None:
        session.execute("INSERT INTO ext_map VALUES (?, 'x')", (ack.checkpoint_id,))
        raise RuntimeError("integration failed")

    with pytest.raises(RuntimeError):
        db.commit("ns", {"a": b"2"}, on_publish=failing)
    assert db.current("ns").id == ack.checkpoint_id  # type: ignore[union-attr]
    with db.write_session() as s:
        s.execute("DELETE FROM ext_map")
        assert s.changes() == 1


def _ext_namespaces(db: ckptdb.Database, tmp_path: Path) -> None:
    db.apply_migration_set(
        "ext",
        _migrations(
            tmp_path, ("0001_t.sql", "CREATE TABLE ext_ns (name TEXT PRIMARY KEY) STRICT;")
        ),
    )
    with db.write_session() as s:
        s.execute("INSERT INTO ext_ns VALUES ('ns'), ('gone')")


def _ext_rows(db: ckptdb.Database) -> list[str]:
    with db.read_session() as s:
        return [str(r[0]) for r in s.execute("SELECT name FROM ext_ns ORDER BY name")]


def test_on_drop_rows_go_in_the_drops_transaction(db: ckptdb.Database, tmp_path: Path) -> None:
    _ext_namespaces(db, tmp_path)
    db.commit("ns", {"a": b"1"})
    db.commit("ns", {"a": b"2"})

    def forget(session: ckptdb.Session) -> None:
        session.execute("DELETE FROM ext_ns WHERE name = 'ns'")

    db.drop_namespace("ns", dry_run=True, on_drop=forget)
    assert _ext_rows(db) == ["gone", "ns"]  # a dry run calls no hook
    report = db.drop_namespace("ns", on_drop=forget)
    assert report.checkpoints_deleted == 2
    assert db.current("ns") is None and _ext_rows(db) == ["gone"]
    # A namespace already gone (an earlier drop interrupted before the integration's rows
    # went): the hook still runs, in a transaction of its own.
    db.drop_namespace("gone", on_drop=lambda s: s.execute("DELETE FROM ext_ns"))
    assert _ext_rows(db) == []


def test_a_failing_or_overreaching_on_drop_rolls_the_whole_drop_back(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    _ext_namespaces(db, tmp_path)
    ack = db.commit("ns", {"a": b"1"})

    def failing(session: ckptdb.Session) -> None:
        session.execute("DELETE FROM ext_ns")
        raise RuntimeError("integration failed")

    def overreaching(session: ckptdb.Session) -> None:
        session.execute("DELETE FROM pin")  # a core table: refused

    with pytest.raises(RuntimeError):
        db.drop_namespace("ns", on_drop=failing)
    with pytest.raises(errors.IntegrationWriteRefusedError):
        db.drop_namespace("ns", on_drop=overreaching)
    kept = db.current("ns")
    assert kept is not None and kept.id == ack.checkpoint_id and kept.read("a") == b"1"
    assert _ext_rows(db) == ["gone", "ns"]
    with pytest.raises(errors.InvalidInputError):
        db.drop_namespace("ns", on_drop="not callable")  # type: ignore[arg-type]


def test_commit_on_a_base_branches_from_an_older_checkpoint(db: ckptdb.Database) -> None:
    a = db.commit("ns", {"s": b"1"})
    b = db.commit("ns", {"s": b"2"})
    fork = db.commit("ns", {"s": b"1-alt"}, base=a.checkpoint_id)
    assert fork.parent_id == a.checkpoint_id and fork.generation == 2
    assert db.pointer("ns").current_id == fork.checkpoint_id  # type: ignore[union-attr]
    assert db.pointer("ns").fallback_id == b.checkpoint_id  # type: ignore[union-attr]
    retry = db.commit("ns", {"s": b"1-alt"}, base=a.checkpoint_id)
    assert retry.checkpoint_id == fork.checkpoint_id and not retry.created
    other = db.commit("other", {"s": b"x"})
    with pytest.raises(errors.InvalidReferenceError):
        db.commit("ns", {"s": b"3"}, base=other.checkpoint_id)
    with pytest.raises(errors.CheckpointNotFoundError):
        db.commit("ns", {"s": b"3"}, base="0" * 64)


def test_read_session_snapshot_holds_and_snapshot_false_reads_each_statement_fresh(
    db_path: Path,
) -> None:
    with ckptdb.open(db_path) as reader, ckptdb.open(db_path) as writer:
        writer.commit("ns", {"a": b"1"})
        count = "SELECT count(*) FROM checkpoints"
        with reader.read_session() as s:
            assert s.scalar(count) == 1
            writer.commit("ns", {"a": b"2"})  # another handle commits meanwhile
            assert s.scalar(count) == 1  # the snapshot holds
        with reader.read_session(snapshot=False) as s:
            assert s.scalar(count) == 2
            writer.commit("ns", {"a": b"3"})
            assert s.scalar(count) == 3  # each statement reads its own snapshot
