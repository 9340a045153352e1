"""A commit that fills the disk takes back the chunks it staged itself, and every disk_full
error says what recovers (issue 26, item 3). The fault-injecting VFS fails writes with
SQLITE_FULL, once (the cleanup then has room) or from some write on (it has none)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import raw_sql
from test_group_commit import run_batch

import ckptdb
from ckptdb import RetentionPolicy, errors
from ckptdb.connection.faults import FaultPlan, FaultVFS

CHUNK = 64 * 1024
#: Staged in several short transactions of its own (ops/prepare: 1 MiB each) before the
#: commit transaction.
BIG = 3 * 1024 * 1024


@pytest.fixture(scope="module")
def vfs() -> Iterator[FaultVFS]:
    fault = FaultVFS("ckptdb-disk-full-cleanup")
    yield fault
    fault.unregister()


def _chunks(path: Path) -> set[int]:
    return {int(r[0]) for r in raw_sql(path, "SELECT chunk_id FROM chunk")}  # type: ignore[call-overload]


def _orphans(path: Path) -> int:
    return int(
        raw_sql(
            path,
            "SELECT count(*) FROM chunk WHERE chunk_id NOT IN (SELECT chunk_id FROM blob_chunk)",
        )[0][0]  # type: ignore[call-overload]
    )


def _writes_of_a_big_commit(vfs: FaultVFS, tmp_path: Path, value: bytes) -> int:
    path = tmp_path / "count" / "c.ckpt"
    path.parent.mkdir()
    with ckptdb.open(path, vfs=vfs.name, chunk_size=CHUNK) as db:
        db.commit("ns", {"a": b"base"})
        with vfs.armed(vfs.count_calls()) as counter:
            db.commit("ns", {"big": value})
    return counter.counts["write"]


def test_a_commit_that_fills_the_disk_leaves_none_of_its_chunks(
    vfs: FaultVFS, tmp_path: Path
) -> None:
    """Fail one write at points spread over a large commit (its staging transactions and
    its commit transaction): whatever the point, the chunks it staged are gone again, the
    error says so, and a retry lands."""
    value = os.urandom(BIG)
    total = _writes_of_a_big_commit(vfs, tmp_path, value)
    points = sorted({max(1, total * k // 12) for k in range(1, 13)})
    cleaned = 0
    for nth in points:
        path = tmp_path / f"w{nth}" / "f.ckpt"
        path.parent.mkdir()
        with ckptdb.open(path, vfs=vfs.name, chunk_size=CHUNK) as db:
            base = db.commit("ns", {"a": b"base"})
            before = _chunks(path)
            plan = FaultPlan(op="write", nth=nth, error="full")
            with vfs.armed(plan), pytest.raises(errors.DiskFullError) as failed:
                db.commit("ns", {"big": value})
            assert plan.fired
            assert _chunks(path) == before, f"write #{nth}: staged chunks outlived the commit"
            message = str(failed.value)
            if "were deleted again" in message:
                cleaned += 1
                assert failed.value.details["staged_chunks_deleted"] > 0
            assert db.current("ns").id == base.checkpoint_id  # type: ignore[union-attr]
            assert db.commit("ns", {"big": value}).parent_id == base.checkpoint_id
            assert db.verify().ok
    assert cleaned >= len(points) // 2  # most points come after some staging committed


def test_when_the_cleanup_fails_too_the_error_names_the_command_that_recovers(
    vfs: FaultVFS, tmp_path: Path
) -> None:
    value = os.urandom(BIG)
    total = _writes_of_a_big_commit(vfs, tmp_path, value)
    path = tmp_path / "p.ckpt"
    with ckptdb.open(path, vfs=vfs.name, chunk_size=CHUNK) as db:
        db.commit("ns", {"a": b"base"})
        plan = FaultPlan(op="write", nth=total * 2 // 3, error="full", persistent=True)
        with vfs.armed(plan), pytest.raises(errors.DiskFullError) as failed:
            db.commit("ns", {"big": value})
        message = str(failed.value)
        assert "could not be deleted (disk_full)" in message
        assert f"`ckptdb gc {db.path} --grace 0s`" in message and "no other commit" in message
        left = failed.value.details["staged_chunks"]
        assert left > 0 and _orphans(path) == left
        # Once there is room: the grace period holds them (and says so) ...
        held = db.gc(RetentionPolicy(keep_last=1)).grace_held
        assert held.chunks == left
        # ... and the command the error named deletes them.
        assert db.gc(RetentionPolicy(keep_last=1), grace="0s").chunks_deleted == left
        assert _orphans(path) == 0 and db.verify().ok


def test_a_small_commit_on_a_full_disk_names_gc(vfs: FaultVFS, tmp_path: Path) -> None:
    path = tmp_path / "s.ckpt"
    with ckptdb.open(path, vfs=vfs.name) as db:
        db.commit("ns", {"a": b"base"})
        plan = FaultPlan(op="write", nth=1, error="full", persistent=True)
        with vfs.armed(plan), pytest.raises(errors.DiskFullError) as failed:
            db.commit("ns", {"a": b"new"})
        message = str(failed.value)
        assert message.count("Free space") == 1 and f"`ckptdb gc {db.path}`" in message
        assert "--grace 0s" in message


def test_a_group_commit_that_fills_the_disk_takes_back_every_members_chunks(
    vfs: FaultVFS, tmp_path: Path
) -> None:
    path = tmp_path / "g.ckpt"
    values = [os.urandom(BIG // 3) for _ in range(3)]
    with ckptdb.open(path, vfs=vfs.name, chunk_size=CHUNK) as db:
        db.commit("ns0", {"a": b"base"})
        before = _chunks(path)
        calls = [lambda d, i=i: d.commit(f"ns{i}", {"big": values[i]}) for i in range(3)]
        with contextlib.ExitStack() as fault:
            # Armed once every member has staged and queued: the batch's COMMIT fails.
            plan = FaultPlan(op="write", nth=1, error="full")
            outcomes = run_batch(
                db, calls, before_release=lambda: fault.enter_context(vfs.armed(plan))
            )
        assert plan.fired
        for outcome in outcomes:
            assert isinstance(outcome.error, errors.DiskFullError), outcome
            assert "were deleted again" in str(outcome.error)
        assert _chunks(path) == before
        for call in calls:
            call(db)
        assert db.verify().ok


def test_gc_on_a_full_disk_says_why_it_needs_room_and_what_to_do(
    vfs: FaultVFS, tmp_path: Path
) -> None:
    path = tmp_path / "gc.ckpt"
    with ckptdb.open(path, vfs=vfs.name, chunk_size=CHUNK) as db:
        for _ in range(3):
            db.commit("ns", {"big": os.urandom(4 * CHUNK)})
        plan = FaultPlan(op="write", nth=1, error="full", persistent=True)
        with vfs.armed(plan), pytest.raises(errors.DiskFullError) as failed:
            db.gc(RetentionPolicy(keep_last=1))
        message = str(failed.value)
        assert "GC found the disk full" in message and f"{db.path}-wal" in message
        assert f"`ckptdb gc {db.path} --grace 0s`" in message and "no commit runs" in message
        with vfs.armed(plan), pytest.raises(errors.DiskFullError) as again:
            db.gc(RetentionPolicy(keep_last=1), grace=0)
        assert "--grace 0s" not in str(again.value)  # it was given: no advice to give it
        assert db.gc(RetentionPolicy(keep_last=1), grace=0).checkpoints_deleted == 1
        assert db.verify().ok
