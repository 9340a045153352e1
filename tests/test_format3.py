"""Storage format 3 (schema 7): entries packed into the checkpoint row with ``blob_ref``
beside them, the move of format-2 rows (bounded, resumable, readable at every step), and
checkpoint seqs that are never given twice."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from conftest import raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb.connection.opening import open_connection
from ckptdb.ops import migrate as migrate_op
from ckptdb.store import entry_move, migrations

FIXTURE = Path(__file__).parent / "fixtures" / "v6.ckpt"


def _refs_from_rows(path: str | Path) -> list[tuple[object, ...]]:
    """(checkpoint_seq, blob_id) of every packed entry, as the rows say."""
    return raw_sql(
        path,
        "SELECT DISTINCT c.seq, json_extract(j.value, '$[1]') FROM checkpoint c,"
        " json_each(c.entries) j ORDER BY 1, 2",
    )


def _refs(path: str | Path) -> list[tuple[object, ...]]:
    return raw_sql(path, "SELECT checkpoint_seq, blob_id FROM blob_ref ORDER BY 1, 2")


def test_a_commit_packs_its_entries_into_its_row(tmp_path: Path) -> None:
    path = tmp_path / "a.ckpt"
    with ckptdb.open(path, create=True, chunk_size=64 * 1024) as db:
        ack = db.commit(
            "ns",
            {
                "b.bin": bytes(200_000),
                "a.json": ckptdb.Entry("{}", media_type="application/json", schema_pin="s/1"),
                "same": "x",
                "also-same": "x",  # two entries, one blob: one blob_ref row
            },
        )
        cp = db.get(ack.checkpoint_id)
        assert cp.read("a.json") == b"{}"
        assert cp.read("b.bin") == bytes(200_000)
    ((packed,),) = raw_sql(path, "SELECT entries FROM checkpoint")
    names = [e[0] for e in json.loads(str(packed))]
    assert names == ["a.json", "also-same", "b.bin", "same"]
    assert json.loads(str(packed))[0][2:] == ["application/json", "s/1"]
    assert len(json.loads(str(packed))[1]) == 2  # no trailing nulls
    assert raw_sql(path, "SELECT count(*) FROM entry") == [(0,)]
    assert _refs(path) == _refs_from_rows(path)
    assert len(_refs(path)) == 3
    assert raw_sql(path, "SELECT value FROM setting WHERE key = 'storage_format'") == [("3",)]
    # The public view reads the packed entries.
    assert [r[0] for r in raw_sql(path, "SELECT name FROM entries ORDER BY name")] == names


def _half_moved_v7(tmp_path: Path) -> tuple[Path, int]:
    """A copy of the v6 fixture at schema 7 with only the first half of its rows moved
    (as an interrupted move leaves it); returns it and the number left to move."""
    path = tmp_path / "v6.ckpt"
    shutil.copyfile(FIXTURE, path)
    conn = open_connection(str(path))
    try:
        migrate_op.apply_pending(conn, migrations.core_set(), lambda: int(time.time() * 1000))
        seqs = entry_move.unpacked_after(conn, 0, 10_000)
        with conn.write_transaction():
            entry_move.pack_entries(conn, seqs[: len(seqs) // 2])
    finally:
        conn.close()
    return path, len(seqs) - len(seqs) // 2


def _contents(db: ckptdb.Database) -> dict[str, dict[str, bytes]]:
    out: dict[str, dict[str, bytes]] = {}
    for ns in db.namespaces():
        for info in db.lineage(ns.name):
            cp = db.get(info.id)
            out[info.id] = {e.name: cp.read(e.name) for e in info.entries}
    return out


def test_a_half_moved_file_reads_every_checkpoint_then_the_move_finishes(
    tmp_path: Path,
) -> None:
    path, left = _half_moved_v7(tmp_path)
    assert left > 0
    keys = {"fixture": bytes(range(200, 232))}
    # migrate="check" writes nothing: the rows are read from both layouts.
    with ckptdb.open(path, migrate="check", keys=keys) as db:
        status = db.migration_status()
        assert status.checkpoints_to_move == left and not status.up_to_date
        before = _contents(db)
        # get_many reads rows of both layouts in one go, as the LangGraph saver does.
        many = db.get_many(before)
        assert {cid: {n: cp.read(n) for n in cp.entries} for cid, cp in many.items()} == before
        report = db.verify()
        assert report.ok, report.problems
    with ckptdb.open(path, migrate="never", keys=keys) as db:
        result = db.migrate(backup=False)
        assert result.checkpoints_moved == left and not result.applied
        assert db.migration_status().up_to_date
        assert _contents(db) == before
        assert db.verify().ok
        receipt = db.receipts(kind="migration")[0]
        assert receipt.body["checkpoints_moved"] == left
    assert raw_sql(path, "SELECT count(*) FROM entry") == [(0,)]
    assert raw_sql(path, "SELECT count(*) FROM checkpoint WHERE entries IS NULL") == [(0,)]
    assert _refs(path) == _refs_from_rows(path)


def test_opening_with_auto_migrate_finishes_an_interrupted_move(tmp_path: Path) -> None:
    path, _ = _half_moved_v7(tmp_path)
    with ckptdb.open(path, keys={"fixture": bytes(range(200, 232))}) as db:
        assert db.migration_status().up_to_date
        assert db.verify().ok
    assert raw_sql(path, "SELECT count(*) FROM entry") == [(0,)]


def test_the_move_runs_in_bounded_transactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, left = _half_moved_v7(tmp_path)
    monkeypatch.setattr(migrate_op, "MOVE_BATCH", 2)
    batches: list[int] = []
    pack = entry_move.pack_entries

    def counted(conn: object, seqs: list[int]) -> None:
        batches.append(len(seqs))
        pack(conn, seqs)  # type: ignore[arg-type]

    monkeypatch.setattr(entry_move, "pack_entries", counted)
    conn = open_connection(str(path))
    try:
        assert migrate_op.move_entries(conn) == left
    finally:
        conn.close()
    # One transaction per call (move_entries opens one around each), none above the bound.
    assert sum(batches) == left and max(batches) <= 2


def test_verify_finds_a_missing_and_a_stray_blob_ref(tmp_path: Path) -> None:
    path = tmp_path / "a.ckpt"
    with ckptdb.open(path, create=True) as db:
        db.commit("ns", {"a": "1", "b": "2"})
        db.commit("ns", {"a": "1", "b": "3"})
    (seq, blob_id), *_ = _refs(path)
    raw_sql(path, "DELETE FROM blob_ref WHERE checkpoint_seq = ? AND blob_id = ?", (seq, blob_id))
    other = raw_sql(path, "SELECT max(seq) FROM checkpoint")[0][0]
    stray = raw_sql(
        path,
        "SELECT blob_id FROM blob WHERE blob_id NOT IN"
        " (SELECT blob_id FROM blob_ref WHERE checkpoint_seq = ?) LIMIT 1",
        (other,),
    )[0][0]
    raw_sql(path, "INSERT INTO blob_ref VALUES (?, ?)", (stray, other))
    with ckptdb.open(path) as db:
        codes = sorted(p.code for p in db.verify().problems)
    assert codes == ["blob_ref_missing", "blob_ref_stray"]


def test_a_damaged_packed_array_is_corruption_not_an_sql_error(tmp_path: Path) -> None:
    path = tmp_path / "a.ckpt"
    with ckptdb.open(path, create=True) as db:
        ack = db.commit("ns", {"a": "1"})
    raw_sql(path, "UPDATE checkpoint SET entries = '[[\"a\",' WHERE id = ?", (ack.checkpoint_id,))
    with ckptdb.open(path) as db:
        with pytest.raises(ckptdb.errors.CorruptionError):
            db.get(ack.checkpoint_id).read("a")
        assert "manifest_mismatch" in {p.code for p in db.verify().problems}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("commit"), st.sampled_from(["a", "b", "c"]), st.integers(0, 3)),
            st.tuples(st.just("gc"), st.integers(1, 3), st.just(0)),
            st.tuples(st.just("drop"), st.sampled_from(["a", "b", "c"]), st.just(0)),
        ),
        min_size=1,
        max_size=14,
    )
)
def test_seqs_are_never_given_twice_and_blob_refs_match(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, object, int]]
) -> None:
    path = tmp_path_factory.mktemp("f3") / "a.ckpt"
    given_seqs: set[int] = set()
    with ckptdb.open(path, create=True) as db:
        for op, arg, n in ops:
            if op == "commit":
                db.commit(str(arg), {"v": f"{arg}{n}", "shared": "s", f"k{n}": str(n)})
                seqs = {int(r[0]) for r in raw_sql(path, "SELECT seq FROM checkpoint")}  # type: ignore[call-overload]
                new = seqs - given_seqs
                assert all(s > max(given_seqs, default=0) for s in new)
                given_seqs |= new
            elif op == "gc":
                db.gc(ckptdb.RetentionPolicy(keep_last=int(arg)), grace=0)  # type: ignore[call-overload]
            elif any(ns.name == arg for ns in db.namespaces()):
                db.drop_namespace(str(arg))
            assert _refs(path) == _refs_from_rows(path)
        report = db.verify()
        assert report.ok, report.problems
    # Nothing unreachable: every blob is still named by a packed entry.
    assert raw_sql(
        path,
        "SELECT count(*) FROM blob b WHERE NOT EXISTS"
        " (SELECT 1 FROM blob_ref r WHERE r.blob_id = b.blob_id)",
    ) == [(0,)]


def test_a_label_names_one_checkpoint_of_its_namespace(tmp_path: Path) -> None:
    path = tmp_path / "a.ckpt"
    with ckptdb.open(path, create=True) as db:
        first = db.commit("ns", {"a": "1"}, label="step-1")
        second = db.commit("ns", {"a": "2"}, label="step-2")
        db.commit("other", {"a": "1"}, label="step-1")  # labels are per namespace
        found = db.get_labelled("ns", "step-1")
        assert found is not None and found.id == first.checkpoint_id
        assert found.label == "step-1" and found.info.label == "step-1"
        assert db.get_labelled("ns", "step-3") is None
        assert db.get_labelled("missing", "step-1") is None
        before = raw_sql(path, "SELECT count(*), max(seq) FROM checkpoint")
        with pytest.raises(ckptdb.errors.LabelTakenError) as taken:
            db.commit("ns", {"a": "3"}, label="step-1")
        assert taken.value.code == "label_taken"
        assert taken.value.actual == first.checkpoint_id
        assert raw_sql(path, "SELECT count(*), max(seq) FROM checkpoint") == before
        assert db.current("ns").id == second.checkpoint_id  # type: ignore[union-attr]
        # A retry of a labelled commit that landed converges on it.
        again = db.commit("ns", {"a": "2"}, label="step-2")
        assert again.checkpoint_id == second.checkpoint_id and not again.created
        for bad in ["", "x" * 257, "a\nb", "\ud800"]:
            with pytest.raises(ckptdb.errors.InvalidInputError):
                db.commit("ns", {"a": "4"}, label=bad)
    assert raw_sql(path, "SELECT label FROM checkpoints WHERE namespace = 'ns' ORDER BY 1") == [
        ("step-1",),
        ("step-2",),
    ]


def test_a_copy_keeps_labels_and_an_export_carries_them(tmp_path: Path) -> None:
    path = tmp_path / "a.ckpt"
    with ckptdb.open(path, create=True) as db:
        one = db.commit("ns", {"a": "1"}, label="one")
        two = db.commit("ns", {"a": "2"}, label="two")
        db.copy_checkpoints([one.checkpoint_id, two.checkpoint_id], "copy")
        copied = db.get_labelled("copy", "two")
        assert copied is not None and copied.read("a") == b"2"
        out = tmp_path / "out.ckpt"
        db.export(out)
    with ckptdb.open(out) as db:
        exported = db.get_labelled("ns", "one")
        assert exported is not None and exported.read("a") == b"1"


def test_show_prints_the_label(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ckptdb.cli import main

    path = tmp_path / "a.ckpt"
    with ckptdb.open(path, create=True) as db:
        db.commit("ns", {"a": "1"}, label="run-7/step-3")
    out = CliRunner().invoke(main, ["show", str(path), "ns"])
    assert out.exit_code == 0, out.output
    assert "label       run-7/step-3" in out.output
    shown = CliRunner().invoke(main, ["show", str(path), "ns", "--json"])
    assert json.loads(shown.output)["label"] == "run-7/step-3"
