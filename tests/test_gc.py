"""Retention, pins and garbage collection: frees space, never deletes what is needed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import engine, prepared_blob, publish_crafted, raw_sql

import ckptdb
from ckptdb import RetentionPolicy, errors

CHUNK = 64 * 1024
HOUR = 3_600_000
DAY = 24 * HOUR


@pytest.fixture
def db(db_path: Path) -> ckptdb.Database:
    handle = ckptdb.open(db_path, chunk_size=CHUNK)
    yield handle  # type: ignore[misc]
    handle.close()


def _commit_many(db: ckptdb.Database, ns: str, n: int, **meta: object) -> list[str]:
    return [
        db.commit(
            ns, {"state": f"{ns}-{i}", "big": os.urandom(CHUNK + 10)}, metadata={"i": i, **meta}
        ).checkpoint_id
        for i in range(n)
    ]


def _ids(db: ckptdb.Database) -> set[str]:
    return {str(r[0]) for r in raw_sql(db.path, "SELECT id FROM checkpoint")}


def _set_created(db: ckptdb.Database, checkpoint_id: str, ms: int) -> None:
    # created_at is stored beside the id, not hashed into it: moving it keeps ids valid.
    raw_sql(db.path, "UPDATE checkpoint SET created_at_ms = ? WHERE id = ?", (ms, checkpoint_id))


def test_keep_last_deletes_older_and_returns_space(db: ckptdb.Database) -> None:
    ids = _commit_many(db, "run", 20)
    before = db.stats()
    report = db.gc(RetentionPolicy(keep_last=3), grace=0)
    assert report.checkpoints_deleted == 17 and set(report.deleted_ids) == set(ids[:17])
    assert _ids(db) == set(ids[17:])
    assert report.bytes_freed >= 17 * (CHUNK + 10)
    assert report.file_bytes_after < report.file_bytes_before / 3
    after = db.stats()
    on_disk = (before.file_bytes + before.wal_bytes, after.file_bytes + after.wal_bytes)
    assert on_disk[1] < on_disk[0] / 3 and after.free_pages == 0 and after.wal_bytes == 0
    assert db.verify().ok
    receipt = db.receipts(kind="gc")[0]
    assert receipt.receipt_id == report.receipt_id
    assert sorted(receipt.body["deleted_ids"]) == sorted(ids[:17])
    assert receipt.body["policy"]["keep_last"] == 3


def test_current_fallback_and_pins_survive_any_policy(db: ckptdb.Database) -> None:
    ids = _commit_many(db, "run", 6)
    db.set_current("run", ids[2], reason="rollback")  # fallback becomes ids[5]
    db.pin(ids[0], "release-1", note="shipped")
    report = db.gc(RetentionPolicy(), grace=0)  # empty policy: only protected remain
    assert _ids(db) == {ids[2], ids[5], ids[0]}
    assert report.checkpoints_kept == 3
    for cid in (ids[0], ids[2], ids[5]):
        db.get(cid).verify()
    assert db.load("run").checkpoint.id == ids[2]


def test_dry_run_is_the_exact_plan_and_changes_nothing(db: ckptdb.Database) -> None:
    _commit_many(db, "a", 8)
    _commit_many(db, "b", 5)
    policy = RetentionPolicy(keep_last=2)
    files_before = {
        p.name: p.read_bytes()
        for p in Path(db.path).parent.glob("test.ckpt*")
        if not p.name.endswith("-shm")
    }
    plan = db.gc(policy, grace=0, dry_run=True)
    assert plan.dry_run and plan.receipt_id is None
    files_after = {
        p.name: p.read_bytes()
        for p in Path(db.path).parent.glob("test.ckpt*")
        if not p.name.endswith("-shm")
    }
    assert files_before == files_after
    done = db.gc(policy, grace=0)
    assert done.deleted_ids == plan.deleted_ids
    assert (done.blobs_deleted, done.chunks_deleted, done.bytes_freed) == (
        plan.blobs_deleted,
        plan.chunks_deleted,
        plan.bytes_freed,
    )


def test_shared_blobs_are_kept_while_any_checkpoint_uses_them(db: ckptdb.Database) -> None:
    shared = os.urandom(3 * CHUNK)
    first = db.commit("a", {"w": shared, "s": b"1"}).checkpoint_id
    for i in range(4):
        db.commit("a", {"w": os.urandom(100), "s": str(i).encode()})
    db.commit("b", {"copy": shared})  # another namespace still uses the same bytes
    db.gc(RetentionPolicy(keep_last=1), grace=0)
    assert first not in _ids(db)
    assert db.current("b").read("copy") == shared  # type: ignore[union-attr]
    assert db.verify().ok


def test_time_bucket_rules(db: ckptdb.Database) -> None:
    now = db.commit("t", {"s": b"now"}).checkpoint_id  # gen 1, moved 400 days back below
    ids = _commit_many(db, "t", 10)
    base = int(time.time() * 1000)
    # ids[i] created i hours ago (ids[-1] is the newest), two per day bucket for older ones.
    for i, cid in enumerate(reversed(ids)):
        _set_created(db, cid, base - i * HOUR * 13)
    _set_created(db, now, base - 400 * DAY)
    hourly = db.gc(RetentionPolicy(keep_hourly=3), grace=0, dry_run=True)
    assert set(ids) - set(hourly.deleted_ids) == set(ids[-3:])
    daily = db.gc(RetentionPolicy(keep_daily=2), grace=0, dry_run=True)
    kept_daily = set(ids) - set(daily.deleted_ids)
    assert ids[-1] in kept_daily and kept_daily <= set(ids[-5:]) and len(kept_daily) >= 2
    within = db.gc(RetentionPolicy.build(keep_within="27h"), grace=0, dry_run=True)
    assert set(ids) - set(within.deleted_ids) == set(ids[-3:])
    # Weekly buckets count only weeks that have a checkpoint (restic's rule): the
    # 400-day-old one is kept by 52 weekly buckets, not by a single one.
    assert now not in db.gc(RetentionPolicy(keep_weekly=52), grace=0, dry_run=True).deleted_ids
    assert now in db.gc(RetentionPolicy(keep_weekly=1), grace=0, dry_run=True).deleted_ids
    every = db.gc(RetentionPolicy(keep_every=5), grace=0, dry_run=True)
    generations = {c.id: c.generation for c in db.lineage("t")}
    kept_every = {cid for cid in generations if cid not in every.deleted_ids}
    assert {generations[c] for c in kept_every} == {5, 10, 11}


def test_keep_best_and_matching_by_metadata(db: ckptdb.Database) -> None:
    losses = [0.9, 0.2, 0.5, 0.1, 0.7, 0.3]
    ids = [
        db.commit(
            "train", {"w": os.urandom(50)}, metadata={"loss": loss, "tag": "x" if i == 2 else "y"}
        ).checkpoint_id
        for i, loss in enumerate(losses)
    ]
    policy = RetentionPolicy.build(
        keep_best=[{"key": "loss", "n": 2, "mode": "min"}], keep_matching={"tag": "x"}
    )
    db.gc(policy, grace=0)
    # best two losses (0.1, 0.2), the tagged one, CURRENT and its fallback
    assert _ids(db) == {ids[3], ids[1], ids[2], ids[5], ids[4]}
    db.gc(RetentionPolicy.build(keep_best=[{"key": "loss", "n": 1, "mode": "max"}]), grace=0)
    # The worst remaining loss (0.7) is also the fallback; CURRENT is kept anyway.
    assert _ids(db) == {ids[4], ids[5]}


def test_pins_are_write_once_listed_and_shown_in_log(db: ckptdb.Database) -> None:
    ids = _commit_many(db, "run", 3)
    pin = db.pin(ids[0], "best", note="eval 0.91")
    assert pin.checkpoint_id == ids[0] and pin.namespace == "run"
    assert db.pin(ids[0], "best").name == "best"  # same target: idempotent
    with pytest.raises(errors.ConflictError) as exc:
        db.pin(ids[1], "best")
    assert exc.value.expected == ids[0]
    assert db.pin(ids[1], "best", replace=True).checkpoint_id == ids[1]
    assert [p.name for p in db.pins()] == ["best"]
    assert db.pins("other") == []
    with pytest.raises(errors.InvalidInputError):
        db.pin(ids[1], " bad name")
    assert db.unpin("best").checkpoint_id == ids[1]
    with pytest.raises(errors.NotFoundError):
        db.unpin("best")


def test_grace_period_protects_recently_staged_chunks(db: ckptdb.Database) -> None:
    with engine(db.path) as eng:
        blob = prepared_blob(eng, os.urandom(3 * CHUNK), int(time.time() * 1000))
    staged = len(blob.chunk_ids)
    db.gc(RetentionPolicy(), grace="1h")
    assert raw_sql(db.path, "SELECT count(*) FROM chunk")[0][0] == staged
    # Past the grace period the unreferenced chunks go -- and the publish that staged them
    # fails cleanly with a retryable error instead of publishing missing bytes.
    report = db.gc(RetentionPolicy(), grace=0)
    assert report.chunks_deleted == staged
    with engine(db.path) as eng, pytest.raises(errors.ChunkMissingError) as exc:
        publish_crafted(eng, "ns", [("w", blob, None, None)], reason="c")
    assert exc.value.retryable
    assert db.current("ns") is None
    assert db.commit("ns", {"w": b"retry works"}).created


def test_stored_policies_apply_per_namespace(db: ckptdb.Database) -> None:
    a = _commit_many(db, "a", 6)
    b = _commit_many(db, "b", 6)
    c = _commit_many(db, "c", 6)
    db.set_retention(RetentionPolicy(keep_last=4))
    db.set_retention(RetentionPolicy(keep_last=2), namespace="b")
    assert set(db.retention()) == {"*", "b"}
    db.gc(grace=0)
    remaining = _ids(db)
    assert remaining & set(a) == set(a[2:]) and remaining & set(b) == set(b[4:])
    assert remaining & set(c) == set(c[2:])
    assert db.clear_retention() and not db.clear_retention()
    db.gc(grace=0)  # 'a' and 'c' have no policy now: nothing more is deleted there
    assert _ids(db) & set(a) == set(a[2:])


def test_no_policy_keeps_everything_but_sweeps_old_staged_chunks(db: ckptdb.Database) -> None:
    ids = _commit_many(db, "run", 4)
    report = db.gc(grace=0)
    assert report.checkpoints_deleted == 0 and _ids(db) == set(ids)


def test_drop_namespace_and_prune(db: ckptdb.Database) -> None:
    keep = _commit_many(db, "keep", 3)
    gone = _commit_many(db, "gone", 4)
    db.pin(gone[0], "p")
    with pytest.raises(errors.ProtectedError):
        db.drop_namespace("gone")
    plan = db.drop_namespace("gone", force=True, dry_run=True)
    assert plan.checkpoints_deleted == 4 and _ids(db) >= set(gone)
    report = db.drop_namespace("gone", force=True)
    assert set(report.deleted_ids) == set(gone)
    assert _ids(db) == set(keep) and db.pins() == [] and db.current("gone") is None
    assert [n.name for n in db.namespaces()] == ["keep"]
    assert db.receipts(kind="drop_namespace")[0].body["checkpoints_deleted"] == 4
    again = db.drop_namespace("gone")  # re-runnable: nothing left to drop is success
    assert again.namespaces == [] and again.checkpoints_deleted == 0
    assert db.verify().ok

    runs = [
        db.commit("train", {"w": os.urandom(64)}, metadata={"run_id": f"r{i % 2}"}).checkpoint_id
        for i in range(6)
    ]
    pruned = db.prune({"run_id": "r0"})
    # r0 = runs 0, 2, 4; run 4 is the fallback (CURRENT is run 5): kept and reported.
    assert set(pruned.deleted_ids) == {runs[0], runs[2]}
    assert [s.checkpoint_id for s in pruned.skipped] == [runs[4]]
    with pytest.raises(errors.InvalidInputError):
        db.prune({})


def test_bad_gc_arguments_are_refused(db: ckptdb.Database) -> None:
    with pytest.raises(errors.InvalidInputError):
        db.gc(grace="soon")
    with pytest.raises(errors.InvalidInputError):
        db.gc(grace=-1)
    with pytest.raises(errors.InvalidInputError):
        RetentionPolicy.build(keep_last=0)
    with pytest.raises(errors.InvalidInputError):
        RetentionPolicy.build(keep_sometimes=3)
    with pytest.raises(errors.NamespaceNotFoundError):
        db.gc(RetentionPolicy(keep_last=1), namespaces=["nope"])


def test_a_reused_chunk_rowid_never_names_the_wrong_bytes(db: ckptdb.Database) -> None:
    """Regression: GC deletes a staged chunk, SQLite hands its rowid to the next chunk
    inserted, and the first publish must not link the other chunk's bytes (found by the
    multi-process concurrency run)."""
    now = int(time.time() * 1000)
    with engine(db.path) as eng:
        first = prepared_blob(eng, os.urandom(2 * CHUNK), now)
        db.gc(grace=0)  # the staged, unreferenced chunks go
        second = prepared_blob(eng, os.urandom(2 * CHUNK), now)
        assert set(second.chunk_ids) == set(first.chunk_ids)  # rowids were reused
        with pytest.raises(errors.ChunkMissingError):
            publish_crafted(eng, "ns", [("w", first, None, None)], reason="c")
    assert db.current("ns") is None and db.verify().ok


def test_keep_history_trims_pointer_history_and_it_still_verifies(db: ckptdb.Database) -> None:
    ids = _commit_many(db, "run", 12)
    assert len(db.history("run")) == 12
    report = db.gc(RetentionPolicy(keep_last=3), grace=0, keep_history=4)
    assert report.history_trimmed == 8
    assert [h.revision for h in db.history("run")] == [12, 11, 10, 9]
    assert db.verify().ok and db.current("run").id == ids[-1]  # type: ignore[union-attr]
    assert db.gc(keep_history=10).history_trimmed == 0  # nothing older to trim
    with pytest.raises(errors.InvalidInputError):
        db.gc(keep_history=0)


@pytest.mark.parametrize(
    "policy",
    [
        RetentionPolicy(keep_last=2),
        RetentionPolicy(keep_every=3),
        RetentionPolicy(keep_last=1, keep_daily=2),
        RetentionPolicy(),
        None,  # the stored policies: per namespace, and '*'
    ],
)
def test_lineage_only_mark_equals_the_general_mark(
    db: ckptdb.Database, policy: RetentionPolicy | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GC's mark evaluates policies that read only the lineage on the lineage alone (not a
    Candidate per stored checkpoint): it must doom exactly what the general path dooms --
    with checkpoints off the lineage (after a rollback), pins, ``keep`` and a fallback."""
    from ckptdb.ops import gc as gc_op

    for ns in ("a", "b", "c"):
        ids = [db.commit(ns, {"s": f"{ns}{i}".encode()}).checkpoint_id for i in range(8)]
        db.set_current(ns, ids[5])  # ids[6:] are off the lineage now
        db.commit(ns, {"s": f"{ns}-after".encode()})
    db.pin(db.lineage("b")[4].id, "keep-b")
    db.set_retention(RetentionPolicy(keep_last=3), namespace="a")
    db.set_retention(RetentionPolicy(keep_every=2))
    keep = {db.lineage("c")[6].id}

    def marked() -> gc_op.Mark:
        with db._handle.use() as store, store.conn.read_transaction():
            now = db.clock()
            return gc_op.mark(store.conn, policy=policy, namespaces=None, now_ms=now, keep=keep)

    fast = marked()
    monkeypatch.setattr(gc_op, "_reads_only_lineage", lambda _policy: False)
    general = marked()
    assert fast == general and fast.doomed
