"""Issue 12 section 2: ``import-from langgraph-sqlite`` of a hostile source.

The source is opened read-only with trusted_schema=OFF (through ckptdb's connection
module); ``checkpoints``/``writes`` must be real tables of plain columns (a VIEW with an
endless recursive CTE is refused at once); every read is bounded by a deadline; every
record that cannot be decoded (deep JSON or msgpack, text that is not UTF-8, wrong types)
is a typed, per-record skip while the good records are imported.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import ormsgpack
import pytest
from conftest import all_files_digest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

import ckptdb
from ckptdb import errors
from ckptdb.integrations.langgraph import NotLangGraphSqliteError
from ckptdb.integrations.langgraph.importer import import_langgraph_sqlite


def make_source(path: Path, threads: int = 2) -> None:
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        saver = SqliteSaver(conn)
        for t in range(threads):
            cp = empty_checkpoint()
            cp["channel_values"] = {"items": [f"t{t}"]}
            cp["channel_versions"] = {"items": 1}
            config = {"configurable": {"thread_id": f"good-{t}", "checkpoint_ns": ""}}
            saver.put(config, cp, {"step": 1}, {"items": 1})  # type: ignore[arg-type]
        conn.commit()


def hostile_sql(path: Path, *statements: str, params: tuple[object, ...] = ()) -> None:
    with closing(sqlite3.connect(path)) as conn:
        for sql in statements:
            conn.execute(sql, params) if params and "?" in sql else conn.execute(sql)
        conn.commit()


ENDLESS = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)"

SCHEMA_ATTACKS = {
    "checkpoints_endless_view": [
        "ALTER TABLE checkpoints RENAME TO real_checkpoints",
        f"CREATE VIEW checkpoints AS {ENDLESS} SELECT thread_id, checkpoint_ns, checkpoint_id,"
        " parent_checkpoint_id, type, checkpoint, metadata FROM real_checkpoints, r",
    ],
    "writes_endless_view": [
        "ALTER TABLE writes RENAME TO real_writes",
        f"CREATE VIEW writes AS {ENDLESS} SELECT w.* FROM real_writes w, r",
    ],
    "checkpoints_plain_view": [
        "ALTER TABLE checkpoints RENAME TO real_checkpoints",
        "CREATE VIEW checkpoints AS SELECT * FROM real_checkpoints",
    ],
    "generated_column": [
        "ALTER TABLE checkpoints RENAME TO old",
        "CREATE TABLE checkpoints (thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT,"
        " parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB,"
        " evil TEXT GENERATED ALWAYS AS (hex(zeroblob(100000000))) VIRTUAL)",
    ],
    "virtual_table": [
        "ALTER TABLE checkpoints RENAME TO old",
        "CREATE VIRTUAL TABLE checkpoints USING fts5(thread_id, checkpoint_ns, checkpoint_id,"
        " parent_checkpoint_id, type, checkpoint, metadata)",
    ],
}


@pytest.mark.parametrize("attack", sorted(SCHEMA_ATTACKS))
def test_a_source_that_is_not_plain_tables_is_refused_at_once(tmp_path: Path, attack: str) -> None:
    source = tmp_path / "src.sqlite"
    make_source(source)
    hostile_sql(source, *SCHEMA_ATTACKS[attack])
    source_before = all_files_digest(source)
    db_path = tmp_path / "d.ckpt"
    ckptdb.open(db_path).close()
    before = all_files_digest(db_path)
    start = time.monotonic()
    with ckptdb.open(db_path) as db, pytest.raises(NotLangGraphSqliteError):
        import_langgraph_sqlite(db, source)
    assert time.monotonic() - start < 10
    assert all_files_digest(db_path) == before
    assert all_files_digest(source) == source_before, "the source was modified"


def test_every_read_is_bounded_by_a_deadline(tmp_path: Path) -> None:
    source = tmp_path / "src.sqlite"
    make_source(source)
    hostile_sql(
        source,
        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 200000)"
        " INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint,"
        " metadata) SELECT 'bulk', '', printf('%08d', x), 'json', x'7b7d', '{}' FROM r",
    )
    with ckptdb.open(tmp_path / "d.ckpt") as db, pytest.raises(errors.SourceTimeoutError):
        import_langgraph_sqlite(db, source, read_timeout=0.001)


def deep_json(depth: int) -> bytes:
    return ("[" * depth + "]" * depth).encode()


def deep_msgpack(depth: int) -> bytes:
    return b"\x91" * depth + b"\xc0"  # fixarray(1) nested depth times, then nil


BAD_ROWS: dict[str, tuple[object, ...]] = {
    # (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, metadata)
    "deep_metadata": ("bad", "", "1", "json", b'{"channel_values": {}}', deep_json(100_000)),
    "deep_json_checkpoint": ("bad", "", "2", "json", b'{"a": ' + deep_json(100_000) + b"}", "{}"),
    "deep_msgpack_checkpoint": ("bad", "", "3", "msgpack", deep_msgpack(100_000), "{}"),
    "msgpack_huge_claim": ("bad", "", "4", "msgpack", b"\xdb\xff\xff\xff\xff", "{}"),
    "not_utf8_thread": (b"\xff\xfe", "", "5", "json", b'{"channel_values": {}}', "{}"),
    "not_utf8_metadata": ("bad", "", "6", "json", b'{"channel_values": {}}', b"\xff"),
    "metadata_not_object": ("bad", "", "7", "json", b'{"channel_values": {}}', "[1]"),
    "metadata_nan": ("bad", "", "8", "json", b'{"channel_values": {}}', '{"a": NaN}'),
    "checkpoint_not_blob": ("bad", "", "9", "json", 12345, "{}"),
    "checkpoint_null": ("bad", "", "10", "json", None, "{}"),
    "unknown_type": ("bad", "", "11", "yaml", b"a: 1", "{}"),
    "channel_values_not_map": ("bad", "", "12", "json", b'{"channel_values": [1]}', "{}"),
    "integer_ids": (7, 8, 9, "json", b'{"channel_values": {}}', "{}"),
    "newline_thread": ("a\nb", "", "13", "json", b'{"channel_values": {}}', "{}"),
    "pickle": ("bad", "", "14", "pickle", b"\x80", "{}"),
}


#: Rows whose values are odd but decodable: imported as text.
HARMLESS = {"integer_ids", "newline_thread"}


def insert_bad(path: Path, row: tuple[object, ...]) -> None:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint,"
            " metadata) VALUES (?, ?, ?, ?, ?, ?)",
            row,
        )
        conn.commit()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kinds=st.lists(st.sampled_from(sorted(BAD_ROWS)), min_size=1, max_size=5, unique=True))
def test_undecodable_records_are_typed_per_record_skips(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str]
) -> None:
    box = tmp_path_factory.mktemp("lg")
    source = box / "src.sqlite"
    make_source(source)
    for kind in kinds:
        insert_bad(source, BAD_ROWS[kind])
    with ckptdb.open(box / "d.ckpt") as db:
        report = import_langgraph_sqlite(db, source)
        created = {i.source_id for i in report.imported if i.created}
        assert sum("good-" in c for c in created) == 2, report  # the good threads
        skipped_ids = [s.source_id for s in report.skipped]
        for kind in kinds:
            cid = BAD_ROWS[kind][2]
            mark = f"checkpoint_id={str(cid)!r}"
            if kind in HARMLESS:
                # Odd but valid text: imported like any other (or skipped, never a crash).
                assert any(mark in c for c in created) or any(mark in s for s in skipped_ids)
            else:
                assert any(mark in s for s in skipped_ids), (kind, report.skipped)
        for s in report.skipped:
            assert s.code and s.detail
        assert db.verify().ok


def test_deep_json_in_a_pending_write_does_not_crash(tmp_path: Path) -> None:
    source = tmp_path / "src.sqlite"
    make_source(source, threads=1)
    with closing(sqlite3.connect(source)) as conn:
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            " type, value) SELECT thread_id, checkpoint_ns, checkpoint_id, 't', 'x', 'ch',"
            " 'json', ? FROM checkpoints LIMIT 1",
            (deep_json(100_000),),
        )
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            " type, value) SELECT thread_id, checkpoint_ns, checkpoint_id, x'ff', 1, 'ch',"
            " 'json', x'00' FROM checkpoints LIMIT 1"
        )
        conn.commit()
    with ckptdb.open(tmp_path / "d.ckpt") as db:
        report = import_langgraph_sqlite(db, source)
    codes = sorted(s.code for s in report.skipped)
    assert codes == ["bad_text", "bad_write"], report.skipped
    assert json.dumps(report.model_dump(mode="json"))  # the report itself is valid JSON
    assert ormsgpack  # msgpack is what real sources use (imported for the deep case)
