"""A file is trusted only after its schema is proven to be ckptdb's (every table, index,
view and trigger, by normalized SQL): anything added, removed or changed outside ckptdb is
refused before any write, with the file left byte-for-byte unchanged, and reported by
verify; a read-only open still allows inspection."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import all_files_digest, raw_sql
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors
from ckptdb.integrations.langgraph import CkptdbSaver

TABLES = [
    "checkpoint", "entry", "blob", "chunk", "chunk_data", "blob_chunk", "pointer",
    "pointer_history", "receipt", "pin", "retention", "setting", "namespace",
]  # fmt: skip
EVENTS = ["INSERT", "UPDATE", "DELETE"]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("schema") / "pristine.ckpt"
    with ckptdb.open(path) as db:
        db.commit("brain", {"a": b"1", "big": b"x" * 70_000}, metadata={"turn": 1})
        db.commit("brain", {"a": b"2"})
        db.pin("brain@current", "release")
    raw_sql(path, "PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def _copy(pristine: Path, tmp: Path, name: str) -> Path:
    path = tmp / f"{name}.ckpt"
    shutil.copy(pristine, path)
    return path


def _refused_unchanged(path: Path) -> list[str]:
    before = all_files_digest(path)
    with pytest.raises(errors.SchemaMismatchError) as exc:
        ckptdb.open(path)
    assert all_files_digest(path) == before  # not a byte written
    assert exc.value.code == "schema_mismatch"
    objects = exc.value.details["objects"]
    assert isinstance(objects, list) and objects
    with ckptdb.open(path, readonly=True) as db:  # inspection still works
        assert db.schema_problems == objects
        report = db.verify()
        assert not report.ok and "schema_mismatch" in {p.code for p in report.problems}
        assert db.query("SELECT count(*) FROM sqlite_schema").rows[0][0] > 0
    return objects


@given(table=st.sampled_from(TABLES), event=st.sampled_from(EVENTS), when=st.booleans())
@settings(max_examples=25, deadline=None)
def test_any_trigger_on_any_table_is_refused(
    pristine: Path, tmp_path_factory: pytest.TempPathFactory, table: str, event: str, when: bool
) -> None:
    path = _copy(pristine, tmp_path_factory.mktemp("trigger"), "t")
    timing = "BEFORE" if when else "AFTER"
    raw_sql(
        path,
        f"CREATE TRIGGER evil {timing} {event} ON {table} BEGIN SELECT RAISE(IGNORE); END",
    )
    assert _refused_unchanged(path) == ["unexpected trigger 'evil'"]


CHANGES = {
    "replaced view": (
        "DROP VIEW lineage; CREATE VIEW lineage AS SELECT 1 AS namespace",
        "view 'lineage' differs",
    ),
    "missing index": ("DROP INDEX pin_by_checkpoint", "missing index 'pin_by_checkpoint'"),
    "extra index": ("CREATE INDEX spy ON checkpoint (metadata)", "unexpected index 'spy'"),
    "extra column": ("ALTER TABLE receipt ADD COLUMN note TEXT", "table 'receipt' differs"),
    "extra table": ("CREATE TABLE stash (x BLOB)", "unexpected table 'stash'"),
    "extra view": ("CREATE VIEW peek AS SELECT * FROM chunk_data", "unexpected view 'peek'"),
    "rebuilt table": (
        "PRAGMA foreign_keys = OFF; CREATE TABLE r2 (scope TEXT PRIMARY KEY, policy TEXT,"
        " updated_at_ms INTEGER); INSERT INTO r2 SELECT * FROM retention;"
        " DROP TABLE retention; ALTER TABLE r2 RENAME TO retention",
        "table 'retention' differs",
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_changed_objects_are_refused_and_named(pristine: Path, tmp_path: Path, change: str) -> None:
    sql, expected = CHANGES[change]
    path = _copy(pristine, tmp_path, "c")
    raw_sql(path, sql)
    problems = _refused_unchanged(path)
    assert any(expected in p for p in problems), problems


def test_litestream_tables_are_known_companions(pristine: Path, tmp_path: Path) -> None:
    path = _copy(pristine, tmp_path, "ls")
    raw_sql(path, "CREATE TABLE _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER)")
    raw_sql(path, "CREATE TABLE _litestream_lock (id INTEGER)")
    with ckptdb.open(path) as db:
        assert db.schema_problems == [] and db.verify().ok
        db.commit("brain", {"a": b"3"})


def test_a_recorded_integration_set_is_part_of_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "lg.ckpt"
    CkptdbSaver(path).close()
    with ckptdb.open(path) as db:
        assert db.verify().ok
    raw_sql(path, "DROP INDEX IF EXISTS lg_checkpoint_by_run")
    raw_sql(path, "CREATE TRIGGER t AFTER INSERT ON lg_checkpoint BEGIN SELECT 1; END")
    assert "unexpected trigger 't'" in _refused_unchanged(path)


def test_an_unknown_migration_set_is_refused(pristine: Path, tmp_path: Path) -> None:
    path = _copy(pristine, tmp_path, "u")
    raw_sql(
        path,
        "INSERT INTO ckptdb_migration VALUES ('mystery', 1, 'x', ?, 0, '0')",
        ("0" * 64,),
    )
    assert any("'mystery'" in p for p in _refused_unchanged(path))


def test_a_valid_file_has_no_findings(pristine: Path, tmp_path: Path) -> None:
    path = _copy(pristine, tmp_path, "ok")
    with ckptdb.open(path) as db:
        assert db.schema_problems == []
        assert db.verify().ok
