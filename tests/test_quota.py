"""Quotas per namespace prefix (issue 14, section 3): validated, stored, and enforced inside
the commit transaction -- refused with ``quota_exceeded`` or evicting the oldest
unprotected checkpoints -- alone, under group commit (real threads) and across handles and
processes. Real database files throughout."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from click.testing import CliRunner
from conftest import child_env, file_digest
from hypothesis import HealthCheck, event, given, settings

import ckptdb
from ckptdb import errors
from ckptdb.cli import main

CKPTDB = str(Path(sys.executable).parent / "ckptdb")


@pytest.fixture
def db(location: str) -> Iterator[ckptdb.Database]:
    """A new database, on each engine in turn (the quota rules are one implementation)."""
    with ckptdb.open(location, chunk_size=64 * 1024) as handle:
        yield handle


@pytest.fixture
def file_db(tmp_path: Path) -> Iterator[ckptdb.Database]:
    """A new SQLite database, for what is about its file (bytes unchanged, a stored value
    of the wrong type, which PostgreSQL's typed columns cannot hold) or group commit (one
    SQLite handle's threads sharing a transaction)."""
    with ckptdb.open(tmp_path / "q.ckpt", chunk_size=64 * 1024) as handle:
        yield handle


def ids(db: ckptdb.Database, namespace: str | None = None) -> set[str]:
    """Every stored checkpoint id (of one namespace), through the checkpoints view."""
    rows = db.query("SELECT checkpoint_id, namespace FROM checkpoints").rows
    return {str(r[0]) for r in rows if namespace is None or r[1] == namespace}


def usage(db: ckptdb.Database, prefix: str = "", each: str | None = None) -> tuple[int, int]:
    """(checkpoints, logical bytes) of one namespace or of every namespace under a prefix,
    computed through the checkpoints view (independently of the code under test)."""
    rows = db.query("SELECT namespace, total_size FROM checkpoints").rows
    chosen = [int(r[1]) for r in rows if (r[0] == each if each else str(r[0]).startswith(prefix))]
    return len(chosen), sum(chosen)


def state(i: int, size: int = 8) -> dict[str, bytes]:
    return {"state.bin": (f"{i:08d}" * (size // 8 + 1)).encode()[:size]}


# -- the API: validation, storage ----------------------------------------------------------


BAD_QUOTAS: list[tuple[dict[str, Any], str]] = [
    ({"prefix": 7, "max_checkpoints": 3}, "prefix"),
    ({"prefix": None, "max_checkpoints": 3}, "prefix"),
    ({"prefix": "a\x00", "max_checkpoints": 3}, "prefix"),
    ({"prefix": "a\nb", "max_checkpoints": 3}, "prefix"),
    ({"prefix": " lead", "max_checkpoints": 3}, "prefix"),
    ({"prefix": "x" * 257, "max_checkpoints": 3}, "prefix"),
    ({"prefix": "e\u0301", "max_checkpoints": 3}, "prefix"),  # not NFC
    ({"prefix": "a/", "max_checkpoints": 0}, "max_checkpoints"),
    ({"prefix": "a/", "max_checkpoints": -2}, "max_checkpoints"),
    ({"prefix": "a/", "max_checkpoints": True}, "max_checkpoints"),
    ({"prefix": "a/", "max_checkpoints": 2.5}, "max_checkpoints"),
    ({"prefix": "a/", "max_checkpoints": "3"}, "max_checkpoints"),
    ({"prefix": "a/", "max_checkpoints": 2**63}, "max_checkpoints"),
    ({"prefix": "a/", "max_bytes": -1}, "max_bytes"),
    ({"prefix": "a/", "max_bytes": float("inf")}, "max_bytes"),
    ({"prefix": "a/"}, "max_checkpoints"),  # no limit at all
    ({"prefix": "a/", "max_checkpoints": 3, "applies_to": "both"}, "applies_to"),
    ({"prefix": "a/", "max_checkpoints": 3, "applies_to": None}, "applies_to"),
    ({"prefix": "a/", "max_checkpoints": 3, "on_exceed": "drop"}, "on_exceed"),
    ({"prefix": "a/", "max_checkpoints": 3, "on_exceed": 1}, "on_exceed"),
    # CURRENT and fallback are never evicted: one checkpoint per namespace cannot evict.
    ({"prefix": "a/", "max_checkpoints": 1, "on_exceed": "evict"}, "max_checkpoints"),
]


@pytest.mark.parametrize(("kwargs", "field"), BAD_QUOTAS, ids=[str(b[0])[:50] for b in BAD_QUOTAS])
def test_bad_quotas_are_refused_and_nothing_is_written(
    file_db: ckptdb.Database, kwargs: dict[str, Any], field: str
) -> None:
    db = file_db
    db.commit("a/x", state(1))
    db.close()
    before = file_digest(Path(db.path))
    with ckptdb.open(db.path) as again:
        args = dict(kwargs)
        with pytest.raises(errors.InvalidQuotaError) as exc:
            again.set_quota(args.pop("prefix"), **args)
        assert exc.value.code == "invalid_quota" and isinstance(exc.value, errors.InvalidInputError)
        assert exc.value.details["field"] == field
        assert not exc.value.retryable
        assert again.quotas() == []
    assert file_digest(Path(db.path)) == before


def test_clear_validates_too(db: ckptdb.Database) -> None:
    with pytest.raises(errors.InvalidQuotaError):
        db.clear_quota(3)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidQuotaError):
        db.clear_quota("a/", applies_to="every")  # type: ignore[arg-type]
    assert db.clear_quota("never-set/") is False


def test_set_replace_list_and_clear(db: ckptdb.Database) -> None:
    a = db.set_quota("a/", max_checkpoints=5)
    assert (a.prefix, a.applies_to, a.max_checkpoints, a.max_bytes, a.on_exceed) == (
        "a/",
        "each",
        5,
        None,
        "refuse",
    )
    db.set_quota("a/", max_bytes=1000, applies_to="total", on_exceed="evict")
    db.set_quota("", max_bytes=0)  # only empty checkpoints anywhere: a legal, strict limit
    replaced = db.set_quota("a/", max_checkpoints=7, max_bytes=10, on_exceed="evict")
    assert replaced.max_checkpoints == 7 and replaced.max_bytes == 10
    listed = [(q.prefix, q.applies_to, q.max_checkpoints, q.max_bytes) for q in db.quotas()]
    assert listed == [("", "each", None, 0), ("a/", "each", 7, 10), ("a/", "total", None, 1000)]
    assert db.clear_quota("a/") is True
    assert db.clear_quota("a/") is False
    assert [(q.prefix, q.applies_to) for q in db.quotas()] == [("", "each"), ("a/", "total")]
    assert db.clear_quota("a/", applies_to="total") and db.clear_quota("")
    assert db.quotas() == []
    # A read-only handle lists and refuses changes.
    db.set_quota("r/", max_checkpoints=2)
    with ckptdb.open(db.path, readonly=True) as ro:
        assert [q.prefix for q in ro.quotas()] == ["r/"]
        with pytest.raises(errors.ReadOnlyError):
            ro.set_quota("r/", max_checkpoints=3)


# -- refuse ---------------------------------------------------------------------------------


def test_refuse_each_writes_nothing_and_says_why(db: ckptdb.Database) -> None:
    db.set_quota("runs/", max_checkpoints=2)
    first = db.commit("runs/r1", state(1))
    second = db.commit("runs/r1", state(2))
    db.commit("runs/r2", state(3))  # another namespace under the prefix: its own count
    blobs = db.stats().blobs
    history = db.history("runs/r1")
    with pytest.raises(errors.QuotaExceededError) as exc:
        db.commit("runs/r1", state(4))
    err = exc.value
    assert err.code == "quota_exceeded" and not err.retryable
    assert err.details == {
        "namespace": "runs/r1",
        "prefix": "runs/",
        "applies_to": "each",
        "on_exceed": "refuse",
        "limit": "max_checkpoints",
        "maximum": 2,
        "usage": 3,
    }
    assert "'runs/'" in err.message and "3 checkpoint(s)" in err.message
    assert "over the 2 allowed" in err.message and "Nothing was written" in err.message
    # Nothing of it landed: no checkpoint, no pointer move, no blob.
    assert db.current("runs/r1").id == second.checkpoint_id  # type: ignore[union-attr]
    assert db.history("runs/r1") == history
    assert ids(db, "runs/r1") == {first.checkpoint_id, second.checkpoint_id}
    assert db.stats().blobs == blobs
    # An idempotent commit adds nothing, so it is not refused; a namespace outside the
    # prefix is not counted; once the quota is raised the commit goes through. (GC cannot
    # make room here: it never deletes CURRENT or its fallback.)
    assert db.commit("runs/r1", state(2)).created is False
    db.commit("other", state(5))
    db.set_quota("runs/", max_checkpoints=3)
    assert db.commit("runs/r1", state(4)).created
    assert db.verify().ok


def test_refuse_bytes_and_total(db: ckptdb.Database) -> None:
    db.set_quota("t/", max_bytes=250, applies_to="total")
    db.commit("t/a", state(1, 100))
    db.commit("t/b", state(2, 100))
    db.commit("tx", state(3, 100))  # 'tx' does not start with 't/'
    with pytest.raises(errors.QuotaExceededError) as exc:
        db.commit("t/c", state(4, 51))
    assert exc.value.details["limit"] == "max_bytes"
    assert exc.value.details["usage"] == 251 and exc.value.details["maximum"] == 250
    assert "the namespaces under 't/' together" in exc.value.message
    assert db.current("t/c") is None
    db.commit("t/c", state(4, 50))  # exactly at the limit
    assert usage(db, "t/") == (3, 250)
    # A single commit larger than the limit can never fit.
    db.set_quota("big/", max_bytes=10)
    with pytest.raises(errors.QuotaExceededError):
        db.commit("big/x", state(5, 11))


def test_a_lowered_quota_applies_from_the_next_commit(db: ckptdb.Database) -> None:
    for i in range(4):
        db.commit("n", state(i))
    db.set_quota("n", max_checkpoints=2)  # below what n holds: stored as it is
    assert usage(db, each="n") == (4, 32)
    with pytest.raises(errors.QuotaExceededError):
        db.commit("n", state(9))
    db.set_quota("n", max_checkpoints=2, on_exceed="evict")
    ack = db.commit("n", state(9))
    assert len(ack.evicted_ids) == 3 and usage(db, each="n")[0] == 2


def test_prefixes_match_by_code_point(db: ckptdb.Database) -> None:
    # Prefixes whose successor needs care: the last code point before the surrogates, and
    # the largest one.
    db.set_quota("a\ud7ff", max_checkpoints=1, applies_to="total")
    db.set_quota("b\U0010ffff", max_checkpoints=1, applies_to="total")
    db.commit("a\ud7ffx", state(1))
    db.commit("a\ue000", state(2))  # after the surrogate gap: not under the prefix
    with pytest.raises(errors.QuotaExceededError):
        db.commit("a\ud7ff", state(3))
    db.commit("b\U0010ffff\U0010ffff", state(4))
    db.commit("c", state(5))
    with pytest.raises(errors.QuotaExceededError):
        db.commit("b\U0010ffffz", state(6))


# -- evict ----------------------------------------------------------------------------------


def test_evict_keeps_the_newest_and_never_a_protected_one(db: ckptdb.Database) -> None:
    db.set_quota("e/", max_checkpoints=3, on_exceed="evict")
    acks = [db.commit("e/x", state(i), metadata={"i": i}) for i in range(3)]
    pinned = acks[0].checkpoint_id
    db.pin(pinned, "keep-first")
    ack = db.commit("e/x", state(3), metadata={"i": 3})
    # The oldest unpinned one went: acks[1]; the pin kept acks[0].
    assert ack.evicted_ids == [acks[1].checkpoint_id]
    assert ids(db, "e/x") == {pinned, acks[2].checkpoint_id, ack.checkpoint_id}
    receipt = db.receipts(kind="quota_evict")[0]
    assert receipt.namespace == "e/x" and receipt.checkpoint_id == ack.checkpoint_id
    body = receipt.body
    assert body["deleted_ids"] == [acks[1].checkpoint_id] and body["by_commit"] == ack.checkpoint_id
    assert body["quotas"] == [
        {
            "prefix": "e/",
            "applies_to": "each",
            "max_checkpoints": 3,
            "max_bytes": None,
            "before": {"checkpoints": 4, "logical_bytes": None},
            "after": {"checkpoints": 3, "logical_bytes": None},
            "evicted": 1,
        }
    ]
    assert body["blobs_deleted"] == 1 and body["checkpoints_deleted"] == 1
    # Now everything but CURRENT, its fallback and the pin is gone after the next commit;
    # with one more pin nothing is evictable: refused, and nothing was evicted.
    db.commit("e/x", state(4))
    db.pin("e/x@fallback", "keep-fallback")
    db.pin("e/x", "keep-current")
    before = ids(db, "e/x")
    receipts = len(db.receipts(kind="quota_evict"))
    with pytest.raises(errors.QuotaExceededError) as exc:
        db.commit("e/x", state(5))
    assert exc.value.details["on_exceed"] == "evict" and exc.value.details["reachable"] == 4
    assert "Nothing was written or evicted" in exc.value.message
    assert ids(db, "e/x") == before and len(db.receipts(kind="quota_evict")) == receipts
    assert db.verify().ok


def test_evict_respects_the_stored_retention_policy(db: ckptdb.Database) -> None:
    db.set_retention(ckptdb.RetentionPolicy(keep_matching={"release": True}), namespace="m")
    db.set_quota("m", max_checkpoints=3, on_exceed="evict")
    release = db.commit("m", state(0), metadata={"release": True})
    others = [db.commit("m", state(i), metadata={"release": False}) for i in range(1, 6)]
    assert release.checkpoint_id in ids(db, "m")
    assert ids(db, "m") == {release.checkpoint_id, *(a.checkpoint_id for a in others[-2:])}
    # Each eviction took the oldest unprotected checkpoint, in order.
    evicted = [e for a in others for e in a.evicted_ids]
    assert evicted == [a.checkpoint_id for a in others[:3]]


def test_evict_total(db: ckptdb.Database) -> None:
    db.set_quota("t/", max_bytes=300, applies_to="total", on_exceed="evict")
    a1 = db.commit("t/a", state(1, 100))
    a2 = db.commit("t/a", state(2, 100))
    a3 = db.commit("t/a", state(3, 100))
    # 400 bytes: a1 (no longer CURRENT or fallback) is the oldest unprotected: it goes.
    b1 = db.commit("t/b", state(4, 100))
    assert b1.evicted_ids == [a1.checkpoint_id]
    assert usage(db, "t/") == (3, 300)
    # The next one needs 100 more bytes, but every checkpoint left is protected.
    with pytest.raises(errors.QuotaExceededError) as exc:
        db.commit("t/c", state(5, 100))
    assert exc.value.details["reachable"] == 400 and exc.value.details["usage"] == 400
    assert ids(db) == {a2.checkpoint_id, a3.checkpoint_id, b1.checkpoint_id}


def test_evicted_blobs_and_chunks_are_reclaimed(db: ckptdb.Database) -> None:
    db.set_quota("big", max_checkpoints=2, on_exceed="evict")
    for i in range(3):
        db.commit("big", {"blob.bin": os.urandom(300_000), "small": str(i)})
    report = db.receipts(kind="quota_evict")[0].body
    # Its own blobs went with it; its chunks are younger than the grace period, so they
    # stay for the next GC (a publish in flight may be staging them), which takes them.
    assert report["blobs_deleted"] == 2 and report["chunks_deleted"] == 0
    time.sleep(0.01)  # grace=0 collects what was touched before now, in milliseconds
    assert db.gc(grace=0).chunks_deleted > 0
    assert db.verify().ok
    for ns_checkpoint in db.log("big", all=True).nodes:
        cp = db.get(ns_checkpoint.id)
        assert len(cp.read("blob.bin")) == 300_000


def test_several_quotas_on_one_namespace(db: ckptdb.Database) -> None:
    """Evicting quotas run first, then every refusing one is checked on what is left."""
    db.set_quota("p/", max_checkpoints=2, on_exceed="evict")
    db.set_quota("", max_checkpoints=4, applies_to="total")
    db.commit("p/a", state(1))
    db.commit("p/a", state(2))
    db.commit("p/a", state(3))  # evicts one: p/a holds 2 -> total 2
    db.commit("q", state(4))
    db.commit("q", state(5))  # total 4
    with pytest.raises(errors.QuotaExceededError) as exc:
        db.commit("q", state(6))  # q is under no evicting quota
    assert exc.value.details["prefix"] == "" and exc.value.details["applies_to"] == "total"
    # p/b is under both: p/b alone is within its each-quota (nothing to evict), and the
    # total refuses it.
    with pytest.raises(errors.QuotaExceededError):
        db.commit("p/b", state(7))
    assert usage(db) == (4, 32)


def test_moving_back_to_a_stored_checkpoint_is_not_counted(db: ckptdb.Database) -> None:
    first = db.commit("n", state(1))
    db.commit("n", state(2))
    db.set_quota("n", max_checkpoints=2)
    db.set_current("n", first.checkpoint_id)
    # The same content on the same parent has the same id: CURRENT moves to a stored
    # checkpoint, which adds nothing; a new one is refused.
    again = db.commit("n", state(2), base=first.checkpoint_id)
    assert again.created and usage(db, each="n")[0] == 2
    with pytest.raises(errors.QuotaExceededError):
        db.commit("n", state(3))


def test_the_on_publish_hook_runs_only_for_a_commit_that_stands(db: ckptdb.Database) -> None:
    seen: list[ckptdb.CommitAck] = []
    db.set_quota("h", max_checkpoints=2, on_exceed="evict")
    db.set_quota("r", max_checkpoints=1)
    for i in range(3):
        db.commit("h", state(i), on_publish=lambda session, ack: seen.append(ack))
    assert [len(a.evicted_ids) for a in seen] == [0, 0, 1]  # the hook sees the eviction
    db.commit("r", state(1))
    with pytest.raises(errors.QuotaExceededError):
        db.commit("r", state(2), on_publish=lambda session, ack: seen.append(ack))
    assert len(seen) == 3  # a refused commit never reached its hook


def test_a_damaged_quota_row_is_a_typed_error(file_db: ckptdb.Database) -> None:
    db = file_db
    from conftest import store_wrong_types

    db.set_quota("d/", max_checkpoints=3)
    db.close()
    assert store_wrong_types(db.path, "quota", {"max_checkpoints": "three"}) == 1
    with ckptdb.open(db.path) as again:
        # Which namespaces a damaged quota covers is not known: every commit fails closed,
        # saying how to repair it, until it is set again or cleared.
        for ns in ("d/x", "elsewhere"):
            with pytest.raises(errors.CorruptionError) as exc:
                again.commit(ns, state(1))
            assert exc.value.details["reason"] == "wrong_type"
        with pytest.raises(errors.CorruptionError):
            again.quotas()
        assert again.clear_quota("d/") and again.commit("d/x", state(1)).created


# -- group commit: real threads on one handle ----------------------------------------------


def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def run_batch(db: ckptdb.Database, calls: list[tuple[str, dict[str, bytes]]]) -> list[Any]:
    """Commit ``calls`` from one thread each so that they form one batch, in list order
    (the test holds the lead while they queue). Returns each ack or error."""
    group = db._group
    assert group is not None
    outcomes: list[Any] = [None] * len(calls)

    def worker(i: int) -> None:
        try:
            outcomes[i] = db.commit(*calls[i])
        except Exception as exc:  # recorded and checked by the test
            outcomes[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(calls))]
    with group.held():
        for i, thread in enumerate(threads):
            thread.start()
            _wait_for(lambda i=i: group.queued == i + 1, f"commit {i} to queue")  # type: ignore[misc]
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    return outcomes


def test_group_commit_fails_only_the_member_over_its_quota(file_db: ckptdb.Database) -> None:
    db = file_db
    db.set_quota("g/", max_checkpoints=2)
    db.set_quota("t/", max_checkpoints=3, applies_to="total")
    db.set_quota("e/", max_checkpoints=2, on_exceed="evict")
    db.commit("g/full", state(0))
    db.commit("g/full", state(1))
    for i in range(2):
        db.commit("e/x", state(10 + i))
    batches, commits = db.commit_batches
    calls = [
        ("g/a", state(2)),
        ("g/full", state(3)),  # the third checkpoint of g/full: refused
        ("t/1", state(4)),
        ("e/x", state(12)),  # evicts the oldest of e/x
        ("t/2", state(5)),
        ("t/3", state(6)),
        ("t/4", state(7)),  # the fourth under t/: refused, having seen t/1..t/3
        ("g/a", state(8)),  # g/a's second: fine
        ("e/x", state(13)),  # evicts again, what the member before it left
    ]
    out = run_batch(db, calls)
    assert db.commit_batches == (batches + 1, commits + 7)  # one transaction, one fsync
    failed = [i for i, o in enumerate(out) if isinstance(o, Exception)]
    assert failed == [1, 6]
    assert all(isinstance(out[i], errors.QuotaExceededError) for i in failed)
    assert out[1].details["namespace"] == "g/full" and out[1].details["usage"] == 3
    assert out[6].details["prefix"] == "t/" and out[6].details["usage"] == 4
    for i, o in enumerate(out):
        if i not in failed:
            assert isinstance(o, ckptdb.CommitAck) and o.created
            assert db.get(o.checkpoint_id).namespace == calls[i][0]
    assert usage(db, each="g/full")[0] == 2 and usage(db, "t/")[0] == 3
    assert usage(db, each="e/x")[0] == 2
    assert len(out[3].evicted_ids) == 1 and len(out[8].evicted_ids) == 1
    assert db.current("e/x").id == out[8].checkpoint_id  # type: ignore[union-attr]
    assert db.current("g/a").id == out[7].checkpoint_id  # type: ignore[union-attr]
    assert db.verify().ok


def test_free_running_threads_with_quotas(db: ckptdb.Database) -> None:
    """Threads committing at once through one handle (batches form as they will): the
    evicting namespaces never fail, the refusing one fails exactly past its limit."""
    db.set_quota("f/", max_checkpoints=3, on_exceed="evict")
    db.set_quota("r/", max_checkpoints=5)
    threads, per_thread = 6, 15
    results: list[list[Any]] = [[] for _ in range(threads + 1)]

    def evicting(t: int) -> None:
        for k in range(per_thread):
            results[t].append(db.commit(f"f/{t}", state(t * 1000 + k)))

    def refusing() -> None:
        for k in range(10):
            try:
                results[threads].append(db.commit("r/x", state(99_000 + k)))
            except errors.QuotaExceededError as exc:
                results[threads].append(exc)

    workers = [threading.Thread(target=evicting, args=(t,)) for t in range(threads)]
    workers.append(threading.Thread(target=refusing))
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert not w.is_alive()
    for t in range(threads):
        assert [a.generation for a in results[t]] == list(range(1, per_thread + 1))
        assert usage(db, each=f"f/{t}")[0] == 3
        assert sum(len(a.evicted_ids) for a in results[t]) == per_thread - 3
        assert db.current(f"f/{t}").id == results[t][-1].checkpoint_id  # type: ignore[union-attr]
    outcome = results[threads]
    assert [isinstance(o, ckptdb.CommitAck) for o in outcome] == [True] * 5 + [False] * 5
    assert db.verify().ok


# -- other handles and other processes -----------------------------------------------------


def test_a_quota_set_through_one_handle_binds_another(tmp_path: Path) -> None:
    path = tmp_path / "two.ckpt"
    with ckptdb.open(path) as a, ckptdb.open(path) as b:
        b.commit("x", state(1))  # b has read the (empty) quota table by now
        a.set_quota("x", max_checkpoints=1)
        with pytest.raises(errors.QuotaExceededError):
            b.commit("x", state(2))
        a.set_quota("x", max_checkpoints=2, on_exceed="evict")
        b.commit("x", state(2))
        assert len(b.commit("x", state(3)).evicted_ids) == 1
        assert a.clear_quota("x")
        b.commit("x", state(4))
        assert usage(a, each="x")[0] == 3
        # And the other way round: b's quota binds a, whose own cache was filled.
        a.commit("y", state(1))
        b.set_quota("y", max_bytes=8)
        with pytest.raises(errors.QuotaExceededError):
            a.commit("y", state(2, 9))


def test_a_quota_set_by_another_process_is_enforced(tmp_path: Path) -> None:
    path = tmp_path / "proc.ckpt"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CKPTDB, *args],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=60,
            check=False,
        )

    (tmp_path / "f.txt").write_text("from the child")
    with ckptdb.open(path) as db:
        db.commit("jobs/1", state(1))
        # Another process stores a quota while this handle is open (and has read quotas).
        done = cli("quota", "set", str(path), "jobs/", "--max-checkpoints", "1", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["max_checkpoints"] == 1
        with pytest.raises(errors.QuotaExceededError):
            db.commit("jobs/1", state(2))
        # This process stores one; the other process's commit is refused by it.
        db.set_quota("other/", max_checkpoints=1)
        db.commit("other/x", state(3))
        refused = cli("commit", str(path), "other/x", str(tmp_path / "f.txt"), "--json")
        assert refused.returncode == 16, refused.stderr
        assert json.loads(refused.stdout)["code"] == "quota_exceeded"
        assert usage(db, each="other/x")[0] == 1


# -- accounting: stats and the namespace_usage view ----------------------------------------


def test_stats_usage_matches_the_view_and_the_totals(tmp_path: Path) -> None:
    path = tmp_path / "usage.ckpt"
    shared = os.urandom(200_000)
    with ckptdb.open(path, chunk_size=64 * 1024) as db:
        for i in range(3):
            db.commit("a", {"shared.bin": shared, "own.txt": f"a{i}" * 1000})
        db.commit("b", {"copy.bin": shared})
        db.commit("c", {"json": b'{"k": 1}' * 500})
        stats = db.stats()
        by_ns = {u.namespace: u for u in stats.usage}
        assert [u.namespace for u in stats.usage] == ["a", "b", "c"]
        for ns, u in by_ns.items():
            nodes = db.log(ns, all=True).nodes
            assert u.checkpoints == len(nodes)
            assert u.logical_bytes == sum(n.total_size for n in nodes)
        assert sum(u.logical_bytes for u in stats.usage) == stats.logical_bytes
        assert sum(u.checkpoints for u in stats.usage) == stats.checkpoints
        # The shared blob counts in a and in b; without it the namespaces add up to the
        # file's stored bytes.
        assert sum(u.stored_bytes for u in stats.usage) > stats.stored_bytes
        assert by_ns["b"].stored_bytes <= len(shared)  # compressed chunks of random bytes
        assert by_ns["c"].stored_bytes < by_ns["c"].logical_bytes  # zstd shrank it
        shared_bytes = by_ns["b"].stored_bytes
        assert sum(u.stored_bytes for u in stats.usage) - shared_bytes == stats.stored_bytes
        expected = {u.namespace: u.model_dump() for u in stats.usage}
    # An operator's sqlite3 (the system's older SQLite) reads the same figures.
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT namespace, checkpoints, logical_bytes, stored_bytes FROM namespace_usage"
        ).fetchall()
    finally:
        conn.close()
    columns = ("namespace", "checkpoints", "logical_bytes", "stored_bytes")
    assert {r[0]: dict(zip(columns, r, strict=True)) for r in rows} == expected


# -- the command line ----------------------------------------------------------------------


def test_cli_quota_set_list_clear_and_refusal(tmp_path: Path) -> None:
    path = str(tmp_path / "cli.ckpt")
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(main, list(args))

    assert run("init", path).exit_code == 0
    out = run("quota", "set", path, "runs/", "--max-checkpoints", "2", "--on-exceed", "evict")
    assert out.exit_code == 0 and "quota 'runs/' (each)" in out.stdout
    out = run("quota", "set", path, "", "--max-bytes", "100", "--applies-to", "total", "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["applies_to"] == "total"
    listed = json.loads(run("quota", "list", path, "--json").stdout)
    assert [(q["prefix"], q["applies_to"]) for q in listed] == [("", "total"), ("runs/", "each")]
    assert "'runs/'" in run("quota", "list", path).stdout
    (tmp_path / "s.txt").write_text("x")
    for _ in range(2):
        assert run("commit", path, "runs/r", str(tmp_path / "s.txt")).exit_code == 0
        (tmp_path / "s.txt").write_text((tmp_path / "s.txt").read_text() + "x")
    third = run("commit", path, "runs/r", str(tmp_path / "s.txt"), "--json")
    assert third.exit_code == 0 and len(json.loads(third.stdout)["evicted_ids"]) == 1
    (tmp_path / "big.txt").write_text("y" * 200)
    refused = run("commit", path, "big", str(tmp_path / "big.txt"))
    assert refused.exit_code == 16 and "quota_exceeded" in refused.stderr
    bad = run("quota", "set", path, "x", "--json")
    assert bad.exit_code == 7 and json.loads(bad.stdout)["code"] == "invalid_quota"
    cleared = json.loads(run("quota", "clear", path, "", "--applies-to", "total", "--json").stdout)
    assert cleared == {"prefix": "", "applies_to": "total", "removed": True}
    assert run("commit", path, "big", str(tmp_path / "big.txt")).exit_code == 0
    stats = run("stats", path)
    assert stats.exit_code == 0 and "runs/r" in stats.stdout
    assert {u["namespace"] for u in json.loads(run("stats", path, "--json").stdout)["usage"]} == {
        "runs/r",
        "big",
    }


# -- properties -----------------------------------------------------------------------------

NAMESPACES = ["a/1", "a/2", "ab", "b/1"]
PREFIXES = ["", "a/", "a/1", "a", "b/"]

commit_step = st.tuples(
    st.just("commit"),
    st.sampled_from(NAMESPACES),
    st.integers(1, 60),  # bytes
    st.booleans(),  # marked for the retention policy
)
quota_step = st.tuples(
    st.just("quota"),
    st.sampled_from(PREFIXES),
    st.sampled_from(["each", "total"]),
    st.sampled_from(["refuse", "evict", "evict"]),
    st.none() | st.integers(2, 8),
    st.none() | st.integers(0, 600),
)
#: An evicting quota on the count alone: the case that evicts most often.
evicting_step = st.tuples(
    st.just("quota"),
    st.sampled_from(PREFIXES),
    st.sampled_from(["each", "total"]),
    st.just("evict"),
    st.integers(2, 6),
    st.none(),
)
others = st.one_of(
    quota_step,
    st.tuples(st.just("clear"), st.sampled_from(PREFIXES), st.sampled_from(["each", "total"])),
    st.tuples(st.just("pin"), st.sampled_from(NAMESPACES), st.integers(0, 5)),
    st.tuples(st.just("unpin"), st.integers(0, 5)),
    st.tuples(st.just("retention"), st.booleans()),
)
#: Mostly commits (one_of would weigh each alternative alike).
step = st.integers(0, 9).flatmap(lambda k: commit_step if k < 7 else others)


def _snapshot(db: ckptdb.Database) -> dict[str, Any]:
    rows = db.query(
        "SELECT checkpoint_id, namespace, total_size, metadata, is_current, is_fallback"
        " FROM checkpoints"
    ).rows
    return {
        "ids": {str(r[0]) for r in rows},
        "ns": {str(r[0]): str(r[1]) for r in rows},
        "marked": {str(r[0]) for r in rows if json.loads(str(r[3])).get("keep") is True},
        "current": {str(r[1]): str(r[0]) for r in rows if r[4]},
        "fallback": {str(r[1]): str(r[0]) for r in rows if r[5]},
        "pins": {p.checkpoint_id for p in db.pins()},
        "blobs": db.stats().blobs,
        "receipts": len(db.receipts()),
    }


@given(
    quotas_first=st.lists(evicting_step | quota_step, min_size=1, max_size=3),
    steps=st.lists(step, min_size=10, max_size=40),
)
@settings(
    max_examples=int(os.environ.get("CKPTDB_QUOTA_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
def test_random_commits_and_quotas_keep_their_promises(
    quotas_first: list[tuple[Any, ...]], steps: list[tuple[Any, ...]]
) -> None:
    """Whatever the sequence: an acknowledged commit leaves every quota over its namespace
    holding; a refused one changes nothing; eviction never takes a protected checkpoint
    (CURRENT, fallback, pin, retention) nor one outside an evicting quota; CURRENT always
    loads and the file verifies."""
    tmp = tempfile.mkdtemp(prefix="ckptdb-quota-")
    counter = 0
    try:
        with ckptdb.open(os.path.join(tmp, "p.ckpt")) as db:
            for op in quotas_first + steps:
                kind = op[0]
                if kind == "quota":
                    _, prefix, applies, on_exceed, most, size = op
                    if most is None and size is None:
                        most = 3
                    db.set_quota(
                        prefix,
                        max_checkpoints=most,
                        max_bytes=size,
                        applies_to=applies,
                        on_exceed=on_exceed,
                    )
                elif kind == "clear":
                    db.clear_quota(op[1], applies_to=op[2])
                elif kind == "pin":
                    nodes = db.log(op[1], all=True).nodes if db.pointer(op[1]) else []
                    if nodes:
                        db.pin(nodes[op[2] % len(nodes)].id, f"p{op[2]}", replace=True)
                elif kind == "unpin":
                    if any(p.name == f"p{op[1]}" for p in db.pins()):
                        db.unpin(f"p{op[1]}")
                elif kind == "retention":
                    if op[1]:
                        db.set_retention(ckptdb.RetentionPolicy(keep_matching={"keep": True}))
                    else:
                        db.clear_retention()
                else:
                    _, ns, size, marked = op
                    counter += 1
                    before = _snapshot(db)
                    quotas = db.quotas()
                    retained = before["marked"] if db.retention() else set()
                    try:
                        ack = db.commit(
                            ns,
                            {"v": (f"{counter}:" * size).encode()[:size]},
                            metadata={"keep": marked, "n": counter},
                        )
                    except errors.QuotaExceededError as exc:
                        assert _snapshot(db) == before, "a refused commit changed something"
                        event(f"refused ({exc.details['on_exceed']})")
                        assert ns.startswith(exc.details["prefix"])
                        continue
                    after = _snapshot(db)
                    evicted = before["ids"] - after["ids"]
                    assert set(ack.evicted_ids) == evicted
                    event("evicted" if evicted else "committed")
                    assert after["ids"] - before["ids"] == {ack.checkpoint_id}
                    protected = (
                        before["pins"]
                        | retained
                        | {c for n, c in before["current"].items()}
                        | {f for n, f in before["fallback"].items() if n != ns}
                    )
                    assert not evicted & protected, "eviction took a protected checkpoint"
                    evicting = [q for q in quotas if q.on_exceed == "evict"]
                    for cid in evicted:
                        owner = before["ns"][cid]
                        assert any(
                            owner.startswith(q.prefix)
                            and ns.startswith(q.prefix)
                            and (q.applies_to == "total" or owner == ns)
                            for q in evicting
                        ), f"{cid[:8]} of {owner} was outside every evicting quota of {ns}"
                    for q in quotas:
                        if not ns.startswith(q.prefix):
                            continue
                        count, total = (
                            usage(db, each=ns) if q.applies_to == "each" else usage(db, q.prefix)
                        )
                        assert q.max_checkpoints is None or count <= q.max_checkpoints, q
                        assert q.max_bytes is None or total <= q.max_bytes, q
                    assert db.load(ns).checkpoint.id == ack.checkpoint_id
            for ns in NAMESPACES:
                if db.pointer(ns) is not None:
                    db.load(ns)
            assert db.verify().ok
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
