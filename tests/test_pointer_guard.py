"""Schema v6 dropped the pointer's foreign keys to checkpoint (two indexes every CURRENT
move rewrote). What they guaranteed still holds: the one function that deletes checkpoints
refuses a CURRENT or fallback, and verify reports a pointer naming a missing checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import raw_sql
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors
from ckptdb.ops import gc
from ckptdb.retention import RetentionPolicy
from ckptdb.store.gc_batch import GcBatch


def _seq(path: Path, checkpoint_id: str) -> int:
    rows = raw_sql(path, "SELECT seq FROM checkpoint WHERE id = ?", (checkpoint_id,))
    return int(rows[0][0])  # type: ignore[call-overload]


def _delete_checkpoint(path: Path, checkpoint_id: str) -> None:
    """Delete a checkpoint row outside ckptdb (a connection that enforces no foreign keys)."""
    raw_sql(path, "DELETE FROM blob_ref WHERE checkpoint_seq = ?", (_seq(path, checkpoint_id),))
    raw_sql(path, "DELETE FROM checkpoint WHERE id = ?", (checkpoint_id,))


def test_schema_v6_pointer_has_no_checkpoint_keys_nor_their_indexes(db_path: Path) -> None:
    ckptdb.open(db_path).close()
    keys = raw_sql(db_path, "SELECT \"table\" FROM pragma_foreign_key_list('pointer')")
    assert keys == [("namespace",)]
    indexes = raw_sql(db_path, "SELECT name FROM pragma_index_list('pointer')")
    assert indexes == []


@pytest.mark.parametrize("role", ["current", "fallback"])
def test_deleting_a_pointed_checkpoint_is_refused_and_deletes_nothing(
    db_path: Path, role: str
) -> None:
    with ckptdb.open(db_path) as db:
        first = db.commit("ns", {"a": b"1"})
        second = db.commit("ns", {"a": b"2"})
        spare = db.commit("other", {"a": b"3"})  # a deletable checkpoint listed alongside
        db.commit("other", {"a": b"4"})
        db.commit("other", {"a": b"5"})
        target = second.checkpoint_id if role == "current" else first.checkpoint_id
        conn = db._handle.store.conn
        before = raw_sql(db_path, "SELECT count(*) FROM checkpoint")
        listed = [_seq(db_path, spare.checkpoint_id), _seq(db_path, target)]
        with (
            conn.write_transaction(),
            GcBatch.open(conn, listed) as batch,
            pytest.raises(errors.ProtectedError) as caught,
        ):
            batch.delete_checkpoints()
        assert caught.value.code == "protected"
        assert caught.value.details["namespace"] == "ns"
        assert "Nothing was deleted" in str(caught.value)
        assert raw_sql(db_path, "SELECT count(*) FROM checkpoint") == before
        assert db.verify().ok


def test_gc_still_collects_what_no_pointer_names(db_path: Path) -> None:
    # A regression check beside the guard: GC's batches pass through it untouched.
    with ckptdb.open(db_path) as db:
        ids = [db.commit("ns", {"a": str(i).encode()}).checkpoint_id for i in range(6)]
        report = db.gc(RetentionPolicy(keep_last=1), grace=0)
        assert report.checkpoints_deleted == 4  # CURRENT and fallback stay
        pointer = db.pointer("ns")
        assert pointer is not None
        assert (pointer.current_id, pointer.fallback_id) == (ids[-1], ids[-2])
        assert db.verify().ok


@pytest.mark.parametrize("role", ["current", "fallback"])
def test_verify_reports_a_pointer_naming_a_missing_checkpoint(db_path: Path, role: str) -> None:
    with ckptdb.open(db_path) as db:
        first = db.commit("ns", {"a": b"1"})
        second = db.commit("ns", {"a": b"2"})
        db.commit("keep", {"a": b"3"})
    gone = second.checkpoint_id if role == "current" else first.checkpoint_id
    # Damage or an edit: ckptdb itself never deletes a pointed-to checkpoint.
    _delete_checkpoint(db_path, gone)
    with ckptdb.open(db_path) as db:
        report = db.verify()
    assert not report.ok
    found = [p for p in report.problems if p.code == "foreign_key"]
    assert len(found) == 1 and found[0].namespace == "ns"
    assert f"{role} pointer" in found[0].detail


def test_a_commit_on_a_dangling_current_is_a_typed_corruption_error(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        gone = db.commit("ns", {"a": b"1"}).checkpoint_id
    _delete_checkpoint(db_path, gone)
    before = raw_sql(db_path, "SELECT count(*) FROM checkpoint")
    with ckptdb.open(db_path) as db:
        with pytest.raises(errors.CorruptionError) as caught:
            db.commit("ns", {"a": b"2"})
        assert caught.value.details["reason"] == "pointer_dangling"
        assert "nothing was written" in str(caught.value)
        db.commit("elsewhere", {"a": b"3"})  # other namespaces still commit
    assert raw_sql(
        db_path,
        "SELECT count(*) FROM checkpoint WHERE namespace_id ="
        " (SELECT namespace_id FROM namespace WHERE name = 'ns')",
    ) == [(0,)]
    assert raw_sql(db_path, "SELECT count(*) FROM checkpoint") == [(before[0][0] + 1,)]


def test_a_dangling_current_reads_as_damage_and_set_current_repairs_it(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"a": b"1"})
        second = db.commit("ns", {"a": b"2"}).checkpoint_id
        gone = db.commit("ns", {"a": b"3"}).checkpoint_id
    _delete_checkpoint(db_path, gone)
    with ckptdb.open(db_path) as db:
        # Not "no checkpoint yet": a program resuming must not start from scratch.
        for read in (lambda: db.load("ns"), lambda: db.current("ns")):
            with pytest.raises(errors.CorruptionError) as caught:
                read()
            assert caught.value.details["reason"] == "current_missing"
        # Nothing says what the missing checkpoint's parent was (the previous CURRENT is
        # not, after a branch), so fallback does not guess; its receipt names what it saw.
        with pytest.raises(errors.CorruptionError) as caught:
            db.load("ns", fallback=True)
        assert caught.value.details["reason"] == "lineage_unknown"
        receipt = db.receipts(kind="fallback")[0]
        assert receipt.body["rejected"][0]["checkpoint_id"] == gone
        # The repair: set_current verifies the target and keeps no missing fallback.
        pointer = db.set_current("ns", second)
        assert (pointer.current_id, pointer.fallback_id) == (second, None)
        after = db.commit("ns", {"a": b"4"})
        assert after.parent_id == second
        assert db.verify().ok


def test_moving_away_from_a_dangling_current_never_makes_it_the_fallback(
    db_path: Path,
) -> None:
    with ckptdb.open(db_path) as db:
        first = db.commit("ns", {"a": b"1"}).checkpoint_id
        gone = db.commit("ns", {"a": b"2"}).checkpoint_id
    _delete_checkpoint(db_path, gone)
    with ckptdb.open(db_path) as db:
        # Even unverified, the old CURRENT is known to be missing: not a fallback.
        pointer = db.set_current("ns", first, verify=False)
        assert (pointer.current_id, pointer.fallback_id) == (first, None)
        assert db.receipts(kind="set_current")[0].body["damaged_code"] == "corrupt:pointer_dangling"
        assert db.verify().ok


def test_a_dangling_fallback_leaves_current_readable_and_a_commit_repairs_it(
    db_path: Path,
) -> None:
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"a": b"1"})
        gone = db.commit("ns", {"a": b"2"}).checkpoint_id
        current = db.commit("ns", {"a": b"3"}).checkpoint_id
    _delete_checkpoint(db_path, gone)
    with ckptdb.open(db_path) as db:
        assert db.load("ns").checkpoint.id == current  # the pointer's digest still holds
        assert not db.verify().ok
        db.commit("ns", {"a": b"4"})  # the old CURRENT becomes the fallback
        assert db.verify().ok


@pytest.mark.parametrize("role", ["current", "fallback"])
def test_export_refuses_a_dangling_pointer_rather_than_leave_a_namespace_out(
    db_path: Path, tmp_path: Path, role: str
) -> None:
    with ckptdb.open(db_path) as db:
        first = db.commit("ns", {"a": b"1"}).checkpoint_id
        second = db.commit("ns", {"a": b"2"}).checkpoint_id
        db.commit("other", {"a": b"3"})
    _delete_checkpoint(db_path, second if role == "current" else first)
    dest = tmp_path / "backup.ckpt"
    with ckptdb.open(db_path) as db:
        for namespaces in (None, ["ns"]):
            with pytest.raises(errors.CorruptionError) as caught:
                db.export(dest, namespaces=namespaces)
            assert caught.value.details["reason"] == "pointer_dangling"
            assert f"{role} pointer" in str(caught.value)
            assert not dest.exists()
        db.export(dest, namespaces=["other"])  # the intact namespaces still export by name
    with ckptdb.open(dest) as out:
        assert [n.name for n in out.namespaces()] == ["other"]


def test_import_refuses_a_source_with_a_dangling_current(db_path: Path, tmp_path: Path) -> None:
    source = tmp_path / "source.ckpt"
    with ckptdb.open(source) as src:
        src.commit("ns", {"a": b"1"})
        gone = src.commit("ns", {"a": b"2"}).checkpoint_id
    _delete_checkpoint(source, gone)
    with ckptdb.open(db_path) as db:
        # A file someone else wrote: refused as an unsound export, not left out.
        with pytest.raises(errors.InvalidExportError) as caught:
            db.import_file(source)
        assert "namespace 'ns': its current checkpoint" in str(caught.value)
        assert "Nothing was imported" in str(caught.value)
        assert db.namespaces() == []


def test_a_seq_freed_outside_ckptdb_and_reused_does_not_pass_for_current(db_path: Path) -> None:
    """Found in review: a checkpoint's seq is its rowid, so deleting the newest row frees
    its seq for the next commit of another namespace; the dangling pointer then joined
    that checkpoint, and the next commit of the damaged namespace took it as its parent."""
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"a": b"1"})
        gone = db.commit("ns", {"a": b"2"}).checkpoint_id
    seq = _seq(db_path, gone)
    _delete_checkpoint(db_path, gone)
    with ckptdb.open(db_path) as db:
        other = db.commit("elsewhere", {"a": b"3"}).checkpoint_id
        assert _seq(db_path, other) == seq  # the freed seq really was reused
        with pytest.raises(errors.CorruptionError) as caught:
            db.load("ns")
        assert caught.value.details["reason"] == "current_missing"
        with pytest.raises(errors.CorruptionError) as caught:
            db.commit("ns", {"a": b"4"})
        assert caught.value.details["reason"] == "pointer_dangling"
        found = [p for p in db.verify().problems if p.code == "foreign_key"]
        assert [p.namespace for p in found] == ["ns"]


def test_gc_keeps_every_checkpoint_of_a_namespace_whose_current_is_missing(
    db_path: Path,
) -> None:
    # Depth from CURRENT cannot be measured there, and those checkpoints are what
    # set_current repairs from: no policy applies until it is repaired.
    with ckptdb.open(db_path) as db:
        ids = [db.commit("ns", {"a": str(i).encode()}).checkpoint_id for i in range(6)]
        for i in range(4):
            db.commit("other", {"a": str(i).encode()})
    _delete_checkpoint(db_path, ids[-1])
    with ckptdb.open(db_path) as db:
        report = db.gc(RetentionPolicy(keep_last=2), grace=0)
        assert report.checkpoints_deleted == 2  # only in "other" (keep_last=2 of its 4)
        assert raw_sql(
            db_path,
            "SELECT count(*) FROM checkpoint WHERE namespace_id ="
            " (SELECT namespace_id FROM namespace WHERE name = 'ns')",
        ) == [(5,)]
        db.set_current("ns", ids[-2])
        assert db.gc(RetentionPolicy(keep_last=2), grace=0).checkpoints_deleted == 3


@given(
    commits=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=14),
    pinned=st.lists(st.integers(0, 13), max_size=3),
    crossed=st.booleans(),
    asked=st.lists(st.integers(0, 13), max_size=10),
)
@settings(max_examples=40, deadline=None)
def test_the_protection_of_a_few_checkpoints_equals_the_whole_files(
    tmp_path_factory: pytest.TempPathFactory,
    commits: list[str],
    pinned: list[int],
    crossed: bool,
    asked: list[int],
) -> None:
    """A deletion asks which of *its* checkpoints are protected (one statement) instead of
    reading every pointer of the file: the answer must be the whole-file answer, restricted
    -- including a damaged pointer that names another namespace's checkpoint."""
    path = tmp_path_factory.mktemp("protect") / "p.ckpt"
    with ckptdb.open(path) as db:
        acks = [db.commit(ns, {"v": str(i).encode()}) for i, ns in enumerate(commits)]
        for n, k in enumerate(sorted(set(pinned))):
            if k < len(acks):
                db.pin(acks[k].checkpoint_id, f"pin{n}")
    seqs = [_seq(path, a.checkpoint_id) for a in acks]
    if crossed and len(set(commits)) > 1:
        # The fallback of one namespace set to a checkpoint of another (damage).
        other = next(i for i, ns in enumerate(commits) if ns != commits[-1])
        raw_sql(
            path,
            "UPDATE pointer SET fallback_seq = ? WHERE namespace_id ="
            " (SELECT namespace_id FROM namespace WHERE name = ?)",
            (seqs[other], commits[-1]),
        )
    wanted = [seqs[k] for k in asked if k < len(seqs)] + [max(seqs) + 1]
    with ckptdb.open(path, readonly=True) as db:
        conn = db._handle.store.conn
        with conn.read_transaction():
            assert gc.protected_among(conn, wanted) == gc.protected_seqs(conn) & set(wanted)
