"""Round trips, dedup, idempotence, compare-and-swap, lineage and namespaces."""

from __future__ import annotations

import io
import itertools
import json
import os
import sqlite3
from pathlib import Path

import pytest
from conftest import raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors


def test_round_trip_of_every_entry_kind(db: ckptdb.Database, tmp_path: Path) -> None:
    roots = tmp_path / "roots.json"
    roots.write_bytes(b'{"roots": ["/a"]}')
    ack = db.commit(
        "brain-1",
        {
            "graph/snapshot.json": b'{"nodes": 3}',
            "notes.txt": "héllo wörld",
            "ingest_roots.json": roots,
            "stream.bin": io.BytesIO(b"\x00\x01\x02" * 1000),
            "typed.json": ckptdb.Entry(b"{}", media_type="application/json", schema_pin="g/v3"),
            "empty": b"",
        },
        metadata={"turn_count": 12, "source_revision": "abc123"},
        expect_current=None,
    )
    assert ack.created and ack.generation == 1 and ack.parent_id is None
    assert ack.entry_count == 6 and ack.pointer_revision == 1
    cp = db.current("brain-1")
    assert cp is not None and cp.id == ack.checkpoint_id
    assert cp.read("graph/snapshot.json") == b'{"nodes": 3}'
    assert cp.read("notes.txt") == "héllo wörld".encode()
    assert cp.read("ingest_roots.json") == b'{"roots": ["/a"]}'
    assert cp.read("stream.bin") == b"\x00\x01\x02" * 1000
    assert cp.read("empty") == b""
    with cp.open("typed.json") as fh:
        assert fh.read() == b"{}"
    assert cp.entries["typed.json"].media_type == "application/json"
    assert cp.entries["typed.json"].schema_pin == "g/v3"
    assert cp.metadata == {"turn_count": 12, "source_revision": "abc123"}
    assert list(cp.entries) == sorted(cp.entries)
    assert cp.created_at.tzinfo is not None
    assert db.get(ack.checkpoint_id) == cp
    # Every model serializes to JSON.
    assert json.loads(ack.model_dump_json())["checkpoint_id"] == ack.checkpoint_id
    assert json.loads(cp.info.model_dump_json())["entries"][0]["name"] == "empty"


def test_missing_entry_and_checkpoint_are_typed(db: ckptdb.Database) -> None:
    ack = db.commit("ns", {"a": b"1"})
    cp = db.get(ack.checkpoint_id)
    with pytest.raises(errors.EntryNotFoundError) as exc:
        cp.read("b")
    assert exc.value.code == "entry_not_found"
    with pytest.raises(errors.CheckpointNotFoundError):
        db.get("0" * 64)
    with pytest.raises(errors.InvalidReferenceError):
        db.get("not-an-id")
    assert db.current("other") is None
    with pytest.raises(errors.NamespaceNotFoundError):
        db.load("other")


def test_checkpoint_id_is_content_derived_and_independent_of_time(tmp_path: Path) -> None:
    ids = []
    for name in ("a.ckpt", "b.ckpt"):
        with ckptdb.open(tmp_path / name) as db:
            ids.append(db.commit("ns", {"x": b"1", "y": b"2"}, metadata={"k": 1}).checkpoint_id)
    assert ids[0] == ids[1]
    with ckptdb.open(tmp_path / "c.ckpt") as db:
        other = db.commit("ns", {"x": b"1", "y": b"2"}, metadata={"k": 2}).checkpoint_id
        other_ns = db.commit("ns2", {"x": b"1", "y": b"2"}, metadata={"k": 1}).checkpoint_id
    assert other != ids[0] and other_ns != ids[0]


def test_dedup_across_checkpoints_and_namespaces(db: ckptdb.Database) -> None:
    payload = os.urandom(100_000)
    a = db.commit("ns-a", {"model.bin": payload, "x": b"1"})
    b = db.commit("ns-b", {"weights.bin": payload, "x": b"2"})
    c = db.commit("ns-a", {"model.bin": payload, "x": b"3"})
    assert a.bytes_stored == 100_001
    assert b.bytes_stored == 1 and b.bytes_deduplicated == 100_000
    assert c.bytes_stored == 1
    assert raw_sql(db.path, "SELECT count(*) FROM blob") == [(4,)]


def test_same_50mb_committed_twice_grows_file_by_less_than_one_percent(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(50 * 1024 * 1024))

    def size() -> int:
        total = 0
        for suffix in ("", "-wal"):
            p = Path(db.path + suffix)
            total += p.stat().st_size if p.exists() else 0
        return total

    db.commit("run-1", {"big.bin": src}, metadata={"step": 1})
    raw_sql(db.path, "PRAGMA wal_checkpoint(TRUNCATE)")
    before = size()
    ack = db.commit("run-2", {"big.bin": src}, metadata={"step": 2})
    raw_sql(db.path, "PRAGMA wal_checkpoint(TRUNCATE)")
    after = size()
    assert ack.bytes_stored == 0 and ack.bytes_deduplicated == 50 * 1024 * 1024
    assert after - before < 0.01 * before, (before, after)
    assert db.current("run-2").read("big.bin") == src.read_bytes()  # type: ignore[union-attr]


def test_identical_commit_is_idempotent_and_writes_nothing(db: ckptdb.Database) -> None:
    first = db.commit("ns", {"a": b"1"}, metadata={"turn": 1})
    counts = (
        "SELECT (SELECT count(*) FROM checkpoint), (SELECT count(*) FROM pointer_history),"
        " (SELECT count(*) FROM blob)"
    )
    rows_before = raw_sql(db.path, counts)
    again = db.commit("ns", {"a": b"1"}, metadata={"turn": 1})
    assert again.checkpoint_id == first.checkpoint_id and not again.created
    assert again.pointer_revision == first.pointer_revision
    assert raw_sql(db.path, counts) == rows_before


def test_retry_with_expect_current_converges(db: ckptdb.Database) -> None:
    base = db.commit("ns", {"a": b"1"})
    first = db.commit("ns", {"a": b"2"}, expect_current=base.checkpoint_id)
    retry = db.commit("ns", {"a": b"2"}, expect_current=base.checkpoint_id)
    assert retry.checkpoint_id == first.checkpoint_id and not retry.created
    assert db.pointer("ns").revision == 2  # type: ignore[union-attr]


def test_conflict_names_both_ids_and_writes_nothing(db: ckptdb.Database) -> None:
    base = db.commit("ns", {"a": b"1"})
    db.commit("ns", {"a": b"2"})
    before = raw_sql(db.path, "SELECT count(*) FROM checkpoint")
    with pytest.raises(errors.ConflictError) as exc:
        db.commit("ns", {"a": b"3"}, expect_current=base.checkpoint_id)
    assert exc.value.code == "conflict"
    assert exc.value.expected == base.checkpoint_id
    assert exc.value.actual == db.pointer("ns").current_id  # type: ignore[union-attr]
    assert base.checkpoint_id[:12] in str(exc.value)
    with pytest.raises(errors.ConflictError) as exc2:
        db.commit("ns", {"a": b"3"}, expect_current=None)
    assert exc2.value.expected is None
    assert raw_sql(db.path, "SELECT count(*) FROM checkpoint") == before
    assert db.pointer("ns").revision == 2  # type: ignore[union-attr]


def test_generation_grows_by_one_and_lineage_is_newest_first(db: ckptdb.Database) -> None:
    acks = [db.commit("ns", {"step": str(i)}, metadata={"i": i}) for i in range(10)]
    assert [a.generation for a in acks] == list(range(1, 11))
    assert [a.pointer_revision for a in acks] == list(range(1, 11))
    lineage = db.lineage("ns")
    assert [c.id for c in lineage] == [a.checkpoint_id for a in reversed(acks)]
    assert [c.metadata["i"] for c in lineage] == list(range(9, -1, -1))
    for child, parent in itertools.pairwise(lineage):
        assert child.parent_id == parent.id
    assert [c.id for c in db.lineage("ns", limit=3)] == [a.checkpoint_id for a in acks[:-4:-1]]
    history = db.history("ns")
    assert [h.revision for h in history] == list(range(10, 0, -1))
    assert history[0].fallback_id == acks[-2].checkpoint_id
    assert db.pointer("ns").fallback_id == acks[-2].checkpoint_id  # type: ignore[union-attr]


def test_many_namespaces_are_independent(db: ckptdb.Database) -> None:
    for i in range(200):
        db.commit(f"thread-{i:03d}", {"state": f"s{i}"}, metadata={"i": i})
    db.commit("thread-007", {"state": "s7b"})
    names = db.namespaces()
    assert len(names) == 200
    assert [n.name for n in names] == sorted(n.name for n in names)
    by_name = {n.name: n for n in names}
    assert by_name["thread-007"].generation == 2
    assert by_name["thread-008"].generation == 1
    assert db.current("thread-150").read("state") == b"s150"  # type: ignore[union-attr]


def test_set_current_rolls_back_explicitly_and_is_recorded(db: ckptdb.Database) -> None:
    a = db.commit("ns", {"x": b"1"})
    b = db.commit("ns", {"x": b"2"})
    ptr = db.set_current("ns", a.checkpoint_id, reason="rollback: bad deploy")
    assert ptr.current_id == a.checkpoint_id and ptr.fallback_id == b.checkpoint_id
    assert db.history("ns")[0].reason == "rollback: bad deploy"
    c = db.commit("ns", {"x": b"3"})
    assert c.parent_id == a.checkpoint_id and c.generation == 2
    # Re-publishing the abandoned content on the same parent reuses the stored checkpoint.
    db.set_current("ns", a.checkpoint_id)
    again = db.commit("ns", {"x": b"2"})
    assert again.checkpoint_id == b.checkpoint_id and again.created
    with pytest.raises(errors.InvalidReferenceError):
        other = db.commit("other", {"x": b"1"})
        db.set_current("ns", other.checkpoint_id)


def test_resolve_references(db: ckptdb.Database) -> None:
    acks = [db.commit("brain", {"x": str(i)}) for i in range(4)]
    head = acks[-1].checkpoint_id
    assert db.resolve(head) == head
    assert db.resolve(head[:10]) == head
    assert db.resolve(head[:10].upper()) == head
    assert db.resolve("brain@current") == head
    assert db.resolve("brain@fallback") == acks[-2].checkpoint_id
    assert db.resolve("brain~0") == head
    assert db.resolve("brain~3") == acks[0].checkpoint_id
    with pytest.raises(errors.CheckpointNotFoundError):
        db.resolve("brain~4")
    assert db.resolve("brain") == head  # a bare namespace is its CURRENT
    with pytest.raises(errors.NamespaceNotFoundError):
        db.resolve("abc")  # a bare name is a namespace (issue 17); this one has none
    with pytest.raises(errors.InvalidReferenceError):
        db.resolve(" abc")
    with pytest.raises(errors.NamespaceNotFoundError):
        db.resolve("nobody@current")


def test_closed_handle_raises_typed_error(db_path: Path) -> None:
    db = ckptdb.open(db_path)
    db.commit("ns", {"a": b"1"})
    cp = db.current("ns")
    db.close()
    db.close()
    with pytest.raises(errors.ClosedError):
        db.current("ns")
    with pytest.raises(errors.ClosedError):
        cp.read("a")  # type: ignore[union-attr]


def test_readonly_handle_reads_and_refuses_writes(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"a": b"1"})
    with ckptdb.open(db_path, readonly=True) as ro:
        assert ro.current("ns").read("a") == b"1"  # type: ignore[union-attr]
        with pytest.raises(errors.ReadOnlyError):
            ro.commit("ns", {"a": b"2"})
        assert ro.verify().ok


def test_files_are_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = tmp_path / "open.ckpt"
        with ckptdb.open(path) as db:
            db.commit("ns", {"a": b"1"})
            for suffix in ("", "-wal", "-shm"):
                mode = os.stat(str(path) + suffix).st_mode & 0o777
                assert mode == 0o600, (suffix, oct(mode))
    finally:
        os.umask(old)


def test_file_is_readable_by_system_sqlite_and_every_view_queries(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"a": b"1", "b/c": b"2"}, metadata={"turn": 1})
        db.commit("ns", {"a": b"1", "b/c": b"3"}, metadata={"turn": 2})
    # Python's own sqlite3 (the system's older SQLite) opens the file once ckptdb closed it.
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    views = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")]
    assert set(views) >= {
        "lineage",
        "checkpoints",
        "heads",
        "entries",
        "blob_usage",
        "pointer_log",
        "receipts",
    }
    for view in views:
        conn.execute(f"SELECT * FROM {view}").fetchall()
    lineage = conn.execute(
        "SELECT depth, generation, json_extract(metadata, '$.turn') FROM lineage"
        " WHERE namespace = 'ns' ORDER BY depth"
    ).fetchall()
    assert lineage == [(0, 2, 2), (1, 1, 1)]
    created = conn.execute("SELECT created_at FROM checkpoints LIMIT 1").fetchone()[0]
    assert created.endswith("Z") and "T" in created
    conn.close()


_JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)


@given(
    metadata=st.dictionaries(
        st.text(max_size=8).filter(lambda k: not k.startswith("ckptdb:")),
        st.recursive(
            _JSON_LEAVES,
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=6), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=4,
    )
)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_metadata_json_is_the_canonical_text_of_the_metadata(
    db: ckptdb.Database, metadata: dict[str, object]
) -> None:
    ack = db.commit("meta", {"v": b"1"}, metadata=metadata)
    cp = db.get(ack.checkpoint_id)
    assert json.loads(cp.metadata_json) == cp.metadata
    assert cp.metadata_json == json.dumps(
        cp.metadata, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    (stored,) = db.query(
        "SELECT metadata FROM checkpoints WHERE checkpoint_id = ?", [ack.checkpoint_id]
    ).rows[0]
    assert cp.metadata_json == stored
