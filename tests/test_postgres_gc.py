"""GC on PostgreSQL: the same collection as on SQLite, and never a byte a publish needs.

On SQLite a GC batch and a publish never run at once (one writer). On PostgreSQL they do:
a batch deletes a blob or chunk only under the row's lock, skipping those a publish holds,
and the foreign keys fail any delete that would leave a reference dangling
(store/gc_batch.py). The race test below runs writers whose commits share and re-reference
content against a GC that collects as hard as it can (grace 0), then reads back every byte
of every acknowledged checkpoint still stored.
"""

from __future__ import annotations

import hashlib
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import raw_sql, run_tool, spawn_script

import ckptdb


def _clock() -> Any:
    now = [1_700_000_000_000]

    def read() -> int:
        now[0] += 1000
        return now[0]

    return read


def _own(ns: str, n: int) -> bytes:
    return hashlib.sha256(f"{ns}{n}".encode()).digest() * 2000  # 64 KB: chunked


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _collect(target: str) -> dict[str, Any]:
    with ckptdb.open(target, clock=_clock()) as db:
        shared = bytes(range(256)) * 2000  # 512 KB, chunked, in every namespace
        for n in range(12):
            for ns in ("a", "b"):
                db.commit(ns, {"shared": shared, "own": _own(ns, n)})
        db.pin(db.lineage("a")[-1].id, "oldest-a")
        dry = db.gc(ckptdb.RetentionPolicy(keep_last=2), grace=0, dry_run=True)
        done = db.gc(ckptdb.RetentionPolicy(keep_last=2), grace=0, keep_history=3)
        fields = ("checkpoints_deleted", "blobs_deleted", "chunks_deleted", "bytes_freed")
        return {
            "dry": [getattr(dry, f) for f in fields],
            "done": [getattr(done, f) for f in fields],
            "deleted": done.deleted_ids,
            "history_trimmed": done.history_trimmed,
            "left": {ns: [c.id for c in db.lineage(ns)] for ns in ("a", "b")},
            "reads": [_sha(db.current(ns).read("own")) for ns in ("a", "b")],  # type: ignore[union-attr]
            "pinned": _sha(db.get(db.pins()[0].checkpoint_id).read("own")),
            "receipt": db.receipts()[0].kind if db.receipts() else None,
        }


def test_gc_collects_exactly_what_it_collects_on_sqlite(tmp_path: Path, pg_url: str) -> None:
    on_sqlite = _collect(str(tmp_path / "gc.ckpt"))
    on_postgresql = _collect(pg_url)
    assert on_postgresql == on_sqlite
    assert on_sqlite["dry"] == on_sqlite["done"]
    assert on_sqlite["done"][0] == 24 - 2 - 2 - 1  # all but 2 per namespace and the pin
    assert on_sqlite["done"][2] > 0  # chunks of the values only deleted checkpoints held
    assert on_sqlite["reads"] == [_sha(_own("a", 11)), _sha(_own("b", 11))]
    assert on_sqlite["pinned"] == _sha(_own("a", 0))
    assert on_sqlite["history_trimmed"] > 0 and on_sqlite["receipt"] == "gc"


def test_a_fleet_of_writers_and_collectors_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """tools/pg_fleet.py --quick: 4 writer processes re-storing a pool of values (a value
    leaves the stored checkpoints, a GC frees it, a commit brings it back) and sharing one
    namespace by compare-and-swap, against a GC process with ``keep_last=2`` and grace 0.
    Every acknowledged checkpoint is stored and reads back, or was deliberately collected;
    no namespace forks; verify finds nothing. (Without ``FOR KEY SHARE`` on what a publish
    references, a writer fails on the foreign key within seconds.)"""
    result: dict[str, Any] = run_tool("pg_fleet", "--quick", tmp=tmp_path, ok=False)
    assert result["violations"] == []
    assert result["acknowledged"] >= 100 and result["conflicts"] > 0
    assert result["runs"] >= 5 and result["checkpoints_deleted"] > 0
    assert result["stored_and_read"] + result["collected"] == result["acknowledged"]


def test_a_pinned_checkpoint_is_kept_by_gc_and_refused_to_delete(pg_url: str) -> None:
    with ckptdb.open(pg_url) as db:
        first = db.commit("t", {"a": b"1"})
        for n in range(3):
            db.commit("t", {"a": str(n).encode()})
        db.pin(first.checkpoint_id, "keep")
        report = db.gc(ckptdb.RetentionPolicy(keep_last=1), grace=0)
        assert first.checkpoint_id not in report.deleted_ids
        assert db.get(first.checkpoint_id).read("a") == b"1"
        db.unpin("keep")
        report = db.gc(ckptdb.RetentionPolicy(keep_last=1), grace=0)
        assert report.deleted_ids == [first.checkpoint_id]
        assert db.existing([first.checkpoint_id]) == set()


def _prune_and_drop(target: str) -> list[Any]:
    with ckptdb.open(target, clock=_clock()) as db:
        for n in range(6):
            db.commit("t", {"a": f"v{n}".encode(), "own": _own("t", n)}, metadata={"run": n % 2})
            db.commit("u", {"a": f"u{n}".encode(), "own": _own("u", n)}, metadata={"run": 0})
        db.pin(db.lineage("u")[-1].id, "u-first")
        seen: list[Any] = []
        for call in (
            lambda: db.prune({"run": 0}, dry_run=True),
            lambda: db.prune({"run": 0}),
            lambda: db.drop_namespace("u", force=True),
        ):
            report = call()
            seen.append(report.model_dump(exclude={"at", "receipt_id"}))
        seen.append([(n.name, n.current_id) for n in db.namespaces()])
        seen.append([r.kind for r in db.receipts()])
        seen.append([c.generation for c in db.lineage("t")])
        seen.append(db.pins())
        return seen


def test_prune_and_drop_delete_alike_on_both_engines(tmp_path: Path, pg_url: str) -> None:
    on_sqlite = _prune_and_drop(str(tmp_path / "p.ckpt"))
    assert _prune_and_drop(pg_url) == on_sqlite
    dry, pruned, dropped = on_sqlite[:3]
    # run 0: t1, t3, t5 and u1..u6; kept: t5 (t's fallback), u5, u6 (u's), u1 (pinned)
    assert dry["checkpoints_deleted"] == pruned["checkpoints_deleted"] == 5
    assert len(pruned["skipped"]) == 4
    assert dropped["checkpoints_deleted"] == 3 and on_sqlite[3] == [("t", on_sqlite[3][0][1])]
    assert on_sqlite[4][:2] == ["drop_namespace", "prune"] and on_sqlite[6] == []


def _verified(target: str) -> dict[str, Any]:
    with ckptdb.open(target, clock=_clock(), keys={"k": bytes(32)}) as db:
        db.set_encryption("s/", key_id="k")
        for n in range(6):
            db.commit("t", {"a": f"v{n}".encode(), "own": _own("t", n)})
            db.commit("s/x", {"a": f"v{n}".encode(), "own": _own("s", n)})
        db.gc(ckptdb.RetentionPolicy(keep_last=3), grace=0, keep_history=2)
        full, quick = db.verify(), db.verify(quick=True)
        fields = ("ok", "checkpoints_checked", "blobs_checked", "chunks_checked")
        return {
            "full": [getattr(full, f) for f in (*fields, "bytes_checked", "pointers_checked")],
            "quick": [getattr(quick, f) for f in fields],
            "problems": [p.code for p in full.problems + quick.problems],
        }


def test_verify_checks_the_same_on_both_engines_and_finds_damage_on_postgresql(
    tmp_path: Path, pg_url: str
) -> None:
    from ckptdb.connection.postgres import PgConnection

    on_sqlite = _verified(str(tmp_path / "v.ckpt"))
    assert _verified(pg_url) == on_sqlite
    assert on_sqlite["full"][0] is True and on_sqlite["problems"] == []
    # Damage written behind ckptdb's back (an operator's UPDATE, a bad restore) is found.
    conn = PgConnection.open(pg_url)
    try:
        with conn.write_transaction():
            conn.execute(
                "UPDATE chunk_data SET data = 'x'::bytea"
                " WHERE chunk_id = (SELECT min(chunk_id) FROM chunk_data)"
            )
            conn.execute(
                "UPDATE checkpoint SET metadata = '{\"x\":1}'"
                " WHERE seq = (SELECT max(seq) FROM checkpoint)"
            )
            conn.execute("DELETE FROM blob_ref WHERE blob_id = (SELECT min(blob_id) FROM blob_ref)")
    finally:
        conn.close()
    with ckptdb.open(pg_url, keys={"k": bytes(32)}) as db:
        report = db.verify()
        assert not report.ok
        assert {"chunk_corrupt", "manifest_mismatch", "blob_ref_missing"} <= {
            p.code for p in report.problems
        }
        assert report.sqlite_integrity.startswith("not applicable")


_DROP_RACER = textwrap.dedent(
    """
    import sys, time
    import ckptdb
    from ckptdb import errors
    where, seconds = sys.argv[1], float(sys.argv[2])
    acked = dropping = 0
    deadline = time.monotonic() + seconds
    with ckptdb.open(where, busy_timeout=30) as db:
        while time.monotonic() < deadline:
            try:
                db.commit("victim", {"n": str(acked).encode(), "big": bytes(50_000)})
                acked += 1
            except errors.ConflictError as exc:
                assert exc.details["reason"] == "namespace_dropping", exc
                dropping += 1
    print(acked, dropping)
    """
)


def test_a_commit_racing_a_drop_is_a_typed_conflict_or_lands(location: str, tmp_path: Path) -> None:
    """A drop deletes the pointer first and the namespace last, in several transactions; a
    commit that comes in between is refused as a retryable conflict (never a constraint
    error), and after the drop the namespace starts anew, whole."""
    with ckptdb.open(location) as db:
        for i in range(30):  # enough checkpoints for the drop to take several batches
            db.commit("victim", {"n": str(i).encode(), "big": bytes([i]) * 50_000})
    script = tmp_path / "racer.py"
    script.write_text(_DROP_RACER)
    racer = spawn_script(script, location, "4")
    time.sleep(1.0)
    with ckptdb.open(location, busy_timeout=30) as db:
        for _ in range(3):
            db.drop_namespace("victim", force=True)
            time.sleep(0.3)
    out, err = racer.communicate(timeout=120)
    assert racer.returncode == 0, err[-3000:]
    acked = int(out.split()[0])
    assert acked > 0
    with ckptdb.open(location) as db:
        report = db.verify()
        assert report.ok, report.problems
        current = db.current("victim")
        if current is not None:  # the racer's commits after the last drop: one line
            assert [c.generation for c in db.lineage("victim")][-1] == 1


def test_a_namespace_left_half_dropped_refuses_commits_until_the_drop_is_finished(
    location: str,
) -> None:
    """An interrupted drop leaves the history without a pointer: a commit there would
    restart the history at revision 1 over the old one, so it is a typed, retryable
    conflict; running the drop again finishes it, and the namespace starts anew."""
    with ckptdb.open(location) as db:
        db.commit("half", {"x": b"1"})
        db.commit("half", {"x": b"2"})
    raw_sql(location, "DELETE FROM pointer")  # what the drop's first step leaves
    with ckptdb.open(location) as db:
        with pytest.raises(ckptdb.errors.ConflictError) as exc:
            db.commit("half", {"x": b"3"})
        assert exc.value.details["reason"] == "namespace_dropping"
        assert db.drop_namespace("half", force=True).checkpoints_deleted == 2
        ack = db.commit("half", {"x": b"3"})
        assert ack.generation == 1 and [m.revision for m in db.history("half")] == [1]
        assert db.verify().ok
