"""I/O faults at every write and sync of a commit: old-or-new, never an ack for a failure.

A fault-injecting VFS (tools/faultvfs.py) fails the Nth xWrite or xSync with SQLITE_IOERR
or SQLITE_FULL while a commit runs, for every N up to the commit's last call, once or
persistently. After each fault the database must show the previous checkpoint (complete
and verified) unless an acknowledgement was returned -- and an ack is only returned after
a commit that really succeeded.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import ckptdb
from ckptdb import errors
from ckptdb.connection.faults import FaultPlan, FaultVFS

CHUNK = 64 * 1024


@pytest.fixture(scope="module")
def vfs() -> Iterator[FaultVFS]:
    fault = FaultVFS("ckptdb-test-fault")
    yield fault
    fault.unregister()


def _calls(vfs: FaultVFS, path: Path, entries: dict[str, bytes]) -> dict[str, int]:
    """How many writes/syncs a commit makes (measured on a scratch copy)."""
    with ckptdb.open(path, vfs=vfs.name, chunk_size=CHUNK) as db:
        db.commit("ns", {"a": b"base"})
        with vfs.armed(vfs.count_calls()) as plan:
            db.commit("ns", entries)
        return dict(plan.counts)


def _check_after_fault(path: Path) -> str:
    """Reopen without the fault VFS; return the CURRENT id after verifying everything."""
    with ckptdb.open(path) as db:
        report = db.verify()
        assert report.ok, report.problems
        cp = db.current("ns")
        assert cp is not None
        cp.verify()
        return cp.id


ENTRY_SETS = {
    "small": {"state.json": b'{"turn": 2}', "graph.bin": os.urandom(3000)},
    "chunked": {"model.bin": os.urandom(3 * CHUNK + 17), "state.json": b"{}"},
}


@pytest.mark.parametrize(
    ("kind", "op", "error", "persistent"),
    [
        (kind, op, error, persistent)
        for kind, op, (error, persistent) in itertools.product(
            ENTRY_SETS,
            ("write", "sync"),
            (("ioerr", False), ("full", False), ("ioerr", True)),
        )
    ],
)
def test_every_fault_point_of_a_commit_is_old_or_new(
    vfs: FaultVFS, tmp_path: Path, kind: str, op: str, error: str, persistent: bool
) -> None:
    entries = ENTRY_SETS[kind]
    total = _calls(vfs, tmp_path / "count.ckpt", entries)[op]
    assert total > 0
    outcomes: dict[str, int] = {"old": 0, "new": 0, "unknown_landed": 0}
    for nth in range(1, total + 1):
        path = tmp_path / f"{op}-{nth}.ckpt"
        with ckptdb.open(path, vfs=vfs.name, chunk_size=CHUNK) as db:
            base = db.commit("ns", {"a": b"base"})
            plan = FaultPlan(op=op, nth=nth, error=error, persistent=persistent)  # type: ignore[arg-type]
            ack = None
            failure: errors.CkptdbError | None = None
            with vfs.armed(plan):
                try:
                    ack = db.commit("ns", entries)
                except errors.CkptdbError as exc:
                    failure = exc
            assert plan.fired, f"fault {op}#{nth} never fired"
        current = _check_after_fault(path)
        # A plain retry converges on the same checkpoint whatever happened.
        with ckptdb.open(path, chunk_size=CHUNK) as db:
            retry = db.commit("ns", entries)
            assert db.current("ns").id == retry.checkpoint_id  # type: ignore[union-attr]
        if ack is not None:
            # Acknowledged: it is there, and the retry recognizes it.
            assert current == ack.checkpoint_id == retry.checkpoint_id and not retry.created
            outcomes["new"] += 1
        else:
            assert failure is not None
            if failure.code == "commit_outcome_unknown":
                # COMMIT itself failed: old or new, complete either way.
                assert current in {base.checkpoint_id, retry.checkpoint_id}
            else:
                # Failed before COMMIT: nothing may have landed.
                assert failure.code in {"io_error", "disk_full"}, failure
                assert current == base.checkpoint_id
            outcomes["old" if current == base.checkpoint_id else "unknown_landed"] += 1
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(path) + suffix)
            if p.exists():
                p.unlink()
    assert sum(outcomes.values()) == total
    if op == "write":
        # A failed write never lets the commit land.
        assert outcomes["old"] == total


def test_persistent_failure_at_commit_never_acknowledges(vfs: FaultVFS, tmp_path: Path) -> None:
    """Fail every sync from the commit's first one on: COMMIT cannot succeed, so no ack,
    not even after the reopen-and-confirm attempt."""
    path = tmp_path / "t.ckpt"
    with ckptdb.open(path, vfs=vfs.name) as db:
        base = db.commit("ns", {"a": b"1"})
        with (
            vfs.armed(FaultPlan(op="sync", nth=1, persistent=True)),
            pytest.raises(errors.CommitOutcomeUnknownError) as exc,
        ):
            db.commit("ns", {"a": b"2"})
        assert exc.value.retryable
        # The handle recovers once the disk does.
        ack = db.commit("ns", {"a": b"2"})
        assert ack.parent_id == base.checkpoint_id
        assert db.current("ns").read("a") == b"2"  # type: ignore[union-attr]


def _gc_fixture(path: Path, vfs: FaultVFS) -> list[str]:
    with ckptdb.open(path, vfs=vfs.name, chunk_size=CHUNK) as db:
        ids = [
            db.commit("ns", {"w": os.urandom(2 * CHUNK + i), "s": str(i)}).checkpoint_id
            for i in range(8)
        ]
        db.pin(ids[1], "keep")
    return ids


def test_io_error_in_the_middle_of_a_gc_sweep_leaves_a_consistent_database(
    vfs: FaultVFS, tmp_path: Path
) -> None:
    policy = ckptdb.RetentionPolicy(keep_last=2)
    probe = tmp_path / "probe.ckpt"
    _gc_fixture(probe, vfs)
    with ckptdb.open(probe, vfs=vfs.name) as db, vfs.armed(vfs.count_calls()) as counted:
        db.gc(policy, grace=0)
    total = counted.counts["write"]
    assert total > 5
    for nth in range(1, total + 1, max(1, total // 12)):
        path = tmp_path / f"gc-{nth}.ckpt"
        ids = _gc_fixture(path, vfs)
        with ckptdb.open(path, vfs=vfs.name) as db:
            plan = FaultPlan(op="write", nth=nth, error="ioerr")
            with vfs.armed(plan), pytest.raises(errors.CkptdbError):
                db.gc(policy, grace=0)
            assert plan.fired
        with ckptdb.open(path) as db:
            assert db.verify().ok
            for cid in (ids[-1], ids[-2], ids[1]):  # CURRENT, fallback, pinned
                db.get(cid).verify()
            db.gc(policy, grace=0)  # re-runnable: finishes the job
            assert db.verify().ok
            remaining = {c.id for c in db.lineage("ns")} | {p.checkpoint_id for p in db.pins()}
            assert remaining == {ids[-1], ids[-2], ids[1]}
