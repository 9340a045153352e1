"""Group commit: concurrent commits on one handle share one transaction and one fsync.

Real threads on real files. A batch is formed deterministically: the test thread holds the
lead (``GroupCommit.held``), so committing threads queue, in the order they were started
(each is started only once the previous one is queued); the end of the hold lets one of
them lead and publish the whole queue as one batch.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors
from ckptdb.connection.faults import FaultPlan, FaultVFS
from ckptdb.connection.slow_sync import SlowSyncVFS
from ckptdb.types import UNSET, BlobRef

Call = Callable[[ckptdb.Database], ckptdb.CommitAck]


@dataclass
class Outcome:
    ack: ckptdb.CommitAck | None = None
    error: BaseException | None = None


def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def run_batch(
    db: ckptdb.Database, calls: list[Call], *, before_release: Callable[[], None] | None = None
) -> list[Outcome]:
    """Run ``calls`` in threads so that they form one batch, in list order."""
    group = db._group  # the queue length is how the test knows who has queued
    assert group is not None
    outcomes = [Outcome() for _ in calls]

    def worker(i: int) -> None:
        try:
            outcomes[i].ack = calls[i](db)
        except BaseException as exc:  # recorded and checked by the test
            outcomes[i].error = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(calls))]
    with group.held():
        for i, thread in enumerate(threads):
            thread.start()
            _wait_for(lambda i=i: group.queued == i + 1, f"commit {i} to queue")  # type: ignore[misc]
        if before_release is not None:
            before_release()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    return outcomes


def commit_call(namespace: str, entries: dict[str, Any], **kwargs: Any) -> Call:
    return lambda db: db.commit(namespace, entries, **kwargs)


def payload(tag: str) -> dict[str, bytes]:
    return {"state.json": tag.encode(), "blob.bin": hashlib.sha256(tag.encode()).digest() * 40}


@pytest.fixture
def db(tmp_path: Path) -> Iterator[ckptdb.Database]:
    with ckptdb.open(tmp_path / "g.ckpt") as handle:
        yield handle


def test_distinct_namespaces_share_one_transaction(db: ckptdb.Database) -> None:
    batches, commits = db.commit_batches
    outcomes = run_batch(db, [commit_call(f"ns{i}", payload(str(i))) for i in range(6)])
    assert [o.error for o in outcomes] == [None] * 6
    assert db.commit_batches == (batches + 1, commits + 6)
    for i, o in enumerate(outcomes):
        assert o.ack is not None and o.ack.created and o.ack.generation == 1
        cp = db.current(f"ns{i}")
        assert cp is not None and cp.id == o.ack.checkpoint_id
        assert cp.read("state.json") == str(i).encode()
    assert db.verify().ok


def test_same_namespace_behaves_as_if_serialized(db: ckptdb.Database) -> None:
    base = db.commit("ns", payload("base"))
    calls = [
        commit_call("ns", payload("a"), expect_current=base.checkpoint_id),  # wins
        commit_call("ns", payload("b"), expect_current=base.checkpoint_id),  # stale: conflict
        commit_call("ns", payload("c")),  # on top of a
        commit_call("ns", payload("c")),  # identical to CURRENT: idempotent
        commit_call("ns", payload("d"), expect_current=None),  # not empty: conflict
        commit_call("ns", payload("e")),  # on top of c
    ]
    a, b, c, c2, d, e = run_batch(db, calls)
    assert a.ack is not None and a.ack.parent_id == base.checkpoint_id and a.ack.generation == 2
    assert isinstance(b.error, errors.ConflictError)
    # It saw the first member's pointer move.
    assert b.error.details["actual"] == a.ack.checkpoint_id
    assert c.ack is not None and c.ack.parent_id == a.ack.checkpoint_id and c.ack.created
    assert c2.ack is not None and not c2.ack.created
    assert c2.ack.checkpoint_id == c.ack.checkpoint_id
    assert (
        isinstance(d.error, errors.ConflictError)
        and d.error.details["actual"] == c.ack.checkpoint_id
    )
    assert e.ack is not None and e.ack.parent_id == c.ack.checkpoint_id
    history = db.history("ns")
    assert [h.current_id for h in reversed(history)][-4:] == [
        base.checkpoint_id,
        a.ack.checkpoint_id,
        c.ack.checkpoint_id,
        e.ack.checkpoint_id,
    ]
    assert [o.ack.pointer_revision for o in (a, c, e) if o.ack] == [2, 3, 4]
    assert db.verify().ok


def test_one_bad_commit_fails_alone(db: ckptdb.Database) -> None:
    other = db.commit("other", payload("other"))
    seen: list[ckptdb.CommitAck] = []

    def failing_hook(session: Any, ack: ckptdb.CommitAck) -> None:
        seen.append(ack)
        raise ValueError("the integration refused")

    calls = [
        commit_call("ns1", payload("good1")),
        commit_call("ns2", {"x": BlobRef("ab" * 32, 3)}),  # no such blob
        commit_call("ns3", payload("x"), base=other.checkpoint_id),  # another namespace
        commit_call("ns4", payload("y"), base="cd" * 32),  # no such checkpoint
        commit_call("ns5", payload("z"), on_publish=failing_hook),
        commit_call("ns6", payload("good2"), on_publish=lambda s, ack: seen.append(ack)),
    ]
    good1, blob, ref, missing, hook, good2 = run_batch(db, calls)
    assert isinstance(blob.error, errors.BlobMissingError)
    assert isinstance(ref.error, errors.InvalidReferenceError)
    assert isinstance(missing.error, errors.CheckpointNotFoundError)
    assert isinstance(hook.error, ValueError)
    assert good1.ack is not None and good2.ack is not None
    assert db.current("ns1").id == good1.ack.checkpoint_id
    assert db.current("ns6").id == good2.ack.checkpoint_id
    for ns in ("ns2", "ns3", "ns4", "ns5"):
        assert db.current(ns) is None and db.history(ns) == []
    # The refused hook ran inside its own savepoint: its checkpoint was rolled back.
    refused = seen[0]
    assert refused.namespace == "ns5"
    with pytest.raises(errors.CheckpointNotFoundError):
        db.get(refused.checkpoint_id)
    assert seen[1] == good2.ack
    assert db.verify().ok


def test_many_threads_one_handle(db: ckptdb.Database) -> None:
    """Free-running threads: distinct namespaces and a shared compare-and-swap namespace."""
    threads, per_thread = 8, 40
    acks: list[list[ckptdb.CommitAck]] = [[] for _ in range(threads)]
    conflicts = [0] * threads

    def solo(t: int) -> None:
        for k in range(per_thread):
            acks[t].append(db.commit(f"solo{t}", payload(f"{t}-{k}")))

    def cas(t: int) -> None:
        for k in range(per_thread):
            while True:
                ptr = db.pointer("shared")
                try:
                    ack = db.commit(
                        "shared",
                        payload(f"cas-{t}-{k}"),
                        expect_current=ptr.current_id if ptr else None,
                    )
                except errors.ConflictError:
                    conflicts[t] += 1
                    continue
                acks[t].append(ack)
                break

    workers = [threading.Thread(target=solo if t % 2 else cas, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for t in range(1, threads, 2):
        assert [a.generation for a in acks[t]] == list(range(1, per_thread + 1))
        assert db.current(f"solo{t}").id == acks[t][-1].checkpoint_id
    cas_acks = [a for t in range(0, threads, 2) for a in acks[t]]
    # Every acknowledged CAS commit is on the one linear lineage, in generation order.
    lineage = db.lineage("shared")
    assert len(lineage) == len(cas_acks) == per_thread * threads // 2
    assert {c.id for c in lineage} == {a.checkpoint_id for a in cas_acks}
    assert sorted(a.generation for a in cas_acks) == list(range(1, len(cas_acks) + 1))
    batches, commits = db.commit_batches
    assert commits >= threads * per_thread and batches < commits  # some commits were grouped
    assert db.verify().ok


def test_lone_caller_takes_the_plain_path(db: ckptdb.Database) -> None:
    before = db.commit_batches
    ack = db.commit("ns", payload("x"))
    assert db.commit_batches == (before[0] + 1, before[1] + 1)
    assert db.current("ns").id == ack.checkpoint_id


# -- forming full batches ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_sync() -> Iterator[SlowSyncVFS]:
    """Every fsync is a 2 ms sleep: a disk on which sharing one is worth something (this VM's
    own fsync is too fast and too unsteady to show it)."""
    slow = SlowSyncVFS("ckptdb-group-slow-sync", sync_ms=2)
    yield slow
    slow.unregister()


def _commit_in_threads(db: ckptdb.Database, threads: int, per_thread: int) -> None:
    acks: list[list[ckptdb.CommitAck]] = [[] for _ in range(threads)]

    def worker(t: int) -> None:
        for k in range(per_thread):
            acks[t].append(db.commit(f"ns{t}", payload(f"{t}-{k}")))

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=120)
        assert not thread.is_alive()
    for t in range(threads):
        first = acks[t][0].generation
        assert [a.generation for a in acks[t]] == list(range(first, first + per_thread))
        current = db.current(f"ns{t}")
        assert current is not None and current.id == acks[t][-1].checkpoint_id


def test_threads_in_a_loop_fill_their_batches(slow_sync: SlowSyncVFS, tmp_path: Path) -> None:
    """Eight threads committing in a loop: the members of a batch, acknowledged together,
    come back with their next commits while the next leader publishes or waits for them,
    instead of settling into two half-full batches that take turns on the fsync (a mean
    of ~4 members per transaction before; ~6 to 8 now)."""
    threads = 8
    with ckptdb.open(tmp_path / "g.ckpt", vfs=slow_sync.name) as db:
        group = db._group  # the batch sizes are diagnostics below the public API
        for t in range(threads):
            db.commit(f"ns{t}", payload(f"base{t}"))
        syncs, (batches, commits) = slow_sync.syncs, db.commit_batches
        _commit_in_threads(db, threads, per_thread=30)
        batches, commits = db.commit_batches[0] - batches, db.commit_batches[1] - commits
        assert commits == threads * 30
        assert commits / batches > 5, dict(group.batch_sizes)
        assert group.batch_sizes[threads] > 0
        # One fsync per transaction (the WAL's, at COMMIT), plus the WAL checkpoints' few.
        assert batches <= slow_sync.syncs - syncs <= batches + 10
        assert db.verify().ok


def test_a_lone_caller_never_waits(slow_sync: SlowSyncVFS, tmp_path: Path) -> None:
    """Not after batches taught the leader what a COMMIT costs, and not while another thread
    reads the handle: a thread that is not committing is never waited for."""
    with ckptdb.open(tmp_path / "g.ckpt", vfs=slow_sync.name) as db:
        group = db._group
        _commit_in_threads(db, 4, per_thread=10)  # warm: a COMMIT's duration is known
        assert group.commit_seconds > 0
        waits, sizes = group.gather_waits, group.batch_sizes.copy()
        stop = threading.Event()
        reads = [0]

        def reader() -> None:
            while not stop.is_set():
                db.current("ns0")
                reads[0] += 1

        reading = threading.Thread(target=reader)
        reading.start()
        try:
            for k in range(20):
                db.commit("lone", payload(f"lone{k}"))
        finally:
            stop.set()
            reading.join()
        assert reads[0] > 0
        assert group.gather_waits == waits
        assert group.batch_sizes - sizes == {1: 20}  # each commit ran alone, at once


def test_a_leader_waits_a_bounded_time_for_a_thread_preparing(
    slow_sync: SlowSyncVFS, tmp_path: Path
) -> None:
    """A thread stuck in its preparation (here: in its progress callback) is waited for only
    a bounded share of a COMMIT; the leader then commits without it."""
    with ckptdb.open(tmp_path / "g.ckpt", vfs=slow_sync.name) as db:
        group = db._group
        db.commit("slow", payload("base"))
        db.commit("quick", payload("base"))
        run_batch(db, [commit_call(f"warm{i}", payload("w")) for i in range(3)])
        assert group.commit_seconds > 0
        preparing, release = threading.Event(), threading.Event()

        def stuck(done: int, total: int) -> None:
            preparing.set()
            release.wait(timeout=60)

        slow: Outcome = Outcome()

        def slow_commit() -> None:
            slow.ack = db.commit("slow", payload("slow"), progress=stuck)

        waits = group.gather_waits
        thread = threading.Thread(target=slow_commit)
        try:
            with group.held():  # so it is not a lone commit (that prepares under the handle)
                thread.start()
                assert preparing.wait(timeout=10)
            started = time.monotonic()
            quick = db.commit("quick", payload("quick"))
            assert time.monotonic() - started < 10
            assert slow.ack is None and thread.is_alive()  # still preparing
            assert group.gather_waits > waits  # it was waited for, a while
        finally:
            release.set()
            thread.join(timeout=30)
        assert slow.ack is not None and slow.ack.generation == 2
        current = db.current("quick")
        assert current is not None and current.id == quick.checkpoint_id


def test_a_commit_queued_during_publication_joins_the_batch(db: ckptdb.Database) -> None:
    """A commit that queues while the leader publishes (here: during a member's on_publish
    hook) is published in the same transaction, after the members drained before it."""
    group = db._group
    db.commit("late", payload("base"))  # its key scope known: prepared outside the handle
    late = Outcome()

    def late_commit() -> None:
        late.ack = db.commit("late", payload("late"))

    joiner = threading.Thread(target=late_commit)

    def start_joiner(session: Any, ack: ckptdb.CommitAck) -> None:
        joiner.start()
        _wait_for(lambda: group.queued == 1, "the late commit to queue")

    batches, commits = db.commit_batches
    first, second = run_batch(
        db,
        [
            commit_call("a", payload("a"), on_publish=start_joiner),
            commit_call("b", payload("b")),
        ],
    )
    joiner.join(timeout=30)
    assert first.ack is not None and second.ack is not None and late.ack is not None
    assert db.commit_batches == (batches + 1, commits + 3)
    history = db.history("late")
    assert history[0].current_id == late.ack.checkpoint_id
    assert late.ack.pointer_revision == 2
    assert db.verify().ok


def test_commit_from_inside_the_handle_does_not_deadlock(db: ckptdb.Database) -> None:
    """An on_publish hook that commits again runs on the thread that holds the handle:
    it must fail (a transaction is open), not wait for itself forever."""

    def nested(session: Any, ack: ckptdb.CommitAck) -> None:
        db.commit("inner", {"x": b"1"})

    with pytest.raises(errors.CkptdbError):
        db.commit("outer", {"x": b"1"}, on_publish=nested)
    assert db.current("outer") is None and db.current("inner") is None


def test_staged_values_mix_with_grouped_ones(db: ckptdb.Database, tmp_path: Path) -> None:
    """A value that is staged (a path, a large value) is prepared under the handle; it
    still commits correctly among threads whose small commits are grouped."""
    big = os.urandom(db.chunk_size * 2 + 5)
    src = tmp_path / "src.bin"
    src.write_bytes(big)
    acks: dict[str, ckptdb.CommitAck] = {}

    def worker(t: int) -> None:
        for k in range(10):
            value: Any = src if (t, k % 3) == (0, 0) else big if k % 3 == 0 else payload(f"{k}")
            entries = {"big.bin": value} if not isinstance(value, dict) else value
            acks[f"{t}-{k}"] = db.commit(f"ns{t}", entries)

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for key, ack in acks.items():
        cp = db.get(ack.checkpoint_id)
        if int(key.split("-")[1]) % 3 == 0:
            assert cp.read("big.bin") == big
    assert db.verify().ok


def test_progress_is_reported_in_bytes_up_to_the_total(db: ckptdb.Database) -> None:
    seen: list[tuple[int, int]] = []
    entries = payload("p")
    db.commit("ns", entries, progress=lambda done, total: seen.append((done, total)))
    total = sum(len(v) for v in entries.values())
    assert seen and seen[-1] == (total, total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # never goes back


# -- faults at the shared COMMIT ------------------------------------------------------------


@pytest.fixture(scope="module")
def vfs() -> Iterator[FaultVFS]:
    fault = FaultVFS("ckptdb-group-fault")
    yield fault
    fault.unregister()


def _acked_in_power_image(vfs: FaultVFS, path: Path, outcomes: list[Outcome], tmp: Path) -> None:
    """Every acknowledged commit is in the file as of its last successful sync."""
    image = tmp / "power"
    vfs.power_image(path, image)
    with ckptdb.open(image / path.name) as copy:
        for o in outcomes:
            if o.ack is not None:
                cp = copy.get(o.ack.checkpoint_id)
                cp.verify()


def test_persistent_fsync_failure_acknowledges_nobody(vfs: FaultVFS, tmp_path: Path) -> None:
    path = tmp_path / "f.ckpt"
    with ckptdb.open(path, vfs=vfs.name) as db:
        base = {f"ns{i}": db.commit(f"ns{i}", payload(f"base{i}")) for i in range(4)}
        calls = [commit_call(f"ns{i}", payload(f"new{i}")) for i in range(4)]
        calls.append(commit_call("ns0", payload("again0")))  # a second move of ns0
        plan = FaultPlan(op="sync", nth=1, persistent=True)
        with vfs.armed(plan, watch=[path]):
            outcomes = run_batch(db, calls)
            assert plan.fired
            _acked_in_power_image(vfs, path, outcomes, tmp_path)
        assert all(o.ack is None for o in outcomes)
        unknown = [o.error for o in outcomes]
        assert all(isinstance(e, errors.CommitOutcomeUnknownError) for e in unknown)
        assert len({id(e) for e in unknown}) == len(unknown)  # each caller its own error
        assert [e.details["namespace"] for e in unknown] == ["ns0", "ns1", "ns2", "ns3", "ns0"]
        # Plain retries converge once the disk recovers.
        for call in calls:
            call(db)
        assert db.current("ns0").read("state.json") == b"again0"
    with ckptdb.open(path) as db:
        assert db.verify().ok
        assert db.current("ns0").read("state.json") == b"again0"
        for i in range(1, 4):
            # Landed or not, the retry converged on the one checkpoint on top of the base.
            lineage = [c.id for c in db.lineage(f"ns{i}")]
            assert len(lineage) == 2 and lineage[1] == base[f"ns{i}"].checkpoint_id
            assert db.current(f"ns{i}").read("state.json") == f"new{i}".encode()


@pytest.mark.parametrize("op", ["sync", "write"])
def test_every_fault_point_of_a_batch_is_old_or_new(vfs: FaultVFS, tmp_path: Path, op: str) -> None:
    """Fail each write/sync of a batch's transaction once: every member is acknowledged
    (and then durable) or fails; the file is consistent; retries converge."""
    calls = [commit_call(f"ns{i % 3}", payload(f"m{i}")) for i in range(5)]

    def fresh(path: Path) -> ckptdb.Database:
        db = ckptdb.open(path, vfs=vfs.name)
        for i in range(3):
            db.commit(f"ns{i}", payload(f"base{i}"))
        return db

    with fresh(tmp_path / "count.ckpt") as db:
        counter = vfs.count_calls()
        with vfs.armed(counter):
            run_batch(db, calls)
        total = counter.counts[op]
    assert total > 0
    for nth in range(1, total + 1):
        path = tmp_path / f"{op}{nth}" / "f.ckpt"
        path.parent.mkdir()
        plan = FaultPlan(op=op, nth=nth)  # type: ignore[arg-type]
        with fresh(path) as db:
            with vfs.armed(plan, watch=[path]):
                outcomes = run_batch(db, calls)
                _acked_in_power_image(vfs, path, outcomes, path.parent)
            assert plan.fired
            for o in outcomes:
                assert (o.ack is None) != (o.error is None)
                if o.error is not None:
                    assert isinstance(o.error, errors.CkptdbError), o.error
                    assert o.error.code in {"commit_outcome_unknown", "io_error", "disk_full"}
            if op == "write":
                assert all(o.ack is None for o in outcomes) or all(
                    o.ack is not None for o in outcomes
                )
            # Retrying each failed member, in order, converges on the serial result.
            for call, o in zip(calls, outcomes, strict=True):
                if o.ack is None:
                    call(db)
            states = {f"ns{i}": db.current(f"ns{i}").read("state.json") for i in range(3)}
        assert states == {"ns0": b"m3", "ns1": b"m4", "ns2": b"m2"}
        with ckptdb.open(path) as check:
            assert check.verify().ok


# -- randomized: batches against the same commits run one by one ----------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),  # namespace
        st.integers(0, 3),  # content
        st.sampled_from(["unset", "none", "known", "stale", "bad_base", "hook_fails"]),
        st.integers(0, 50),  # which known id
    ),
    min_size=1,
    max_size=6,
)


def _call(op: tuple[str, int, str, int], known: list[str]) -> Call:
    ns, content, how, pick = op
    entries = {"v": f"{ns}{content}".encode()}
    if how == "none":
        return commit_call(ns, entries, expect_current=None)
    if how in ("known", "stale") and known:
        return commit_call(ns, entries, expect_current=known[pick % len(known)])
    if how == "bad_base":
        return commit_call(ns, entries, base="ef" * 32)
    if how == "hook_fails":

        def hook(session: Any, ack: ckptdb.CommitAck) -> None:
            raise RuntimeError("refused")

        return commit_call(ns, entries, on_publish=hook)
    return commit_call(ns, entries, expect_current=UNSET)


def _result(fn: Callable[[], ckptdb.CommitAck]) -> tuple[Any, ...]:
    try:
        ack = fn()
    except (errors.CkptdbError, RuntimeError) as exc:
        return ("error", type(exc).__name__)
    return ("ack", ack.checkpoint_id, ack.parent_id, ack.generation, ack.created)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batches=st.lists(OPS, min_size=1, max_size=3))
def test_batches_match_serial_commits(
    tmp_path_factory: pytest.TempPathFactory, batches: Any
) -> None:
    root = tmp_path_factory.mktemp("model")
    with (
        ckptdb.open(root / "batched.ckpt") as batched,
        ckptdb.open(root / "serial.ckpt", group_commit=False) as serial,
    ):
        known: list[str] = []
        for ops in batches:
            calls = [_call(op, known) for op in ops]
            outcomes = run_batch(batched, calls)
            got = [
                ("error", type(o.error).__name__)
                if o.error is not None
                else _result(lambda o=o: o.ack)  # type: ignore[misc]
                for o in outcomes
            ]
            want = [_result(lambda c=c: c(serial)) for c in calls]
            assert got == want
            known.extend(r[1] for r in want if r[0] == "ack")
        for ns in ("a", "b", "c"):
            assert [h.current_id for h in batched.history(ns)] == [
                h.current_id for h in serial.history(ns)
            ]
        assert batched.verify().ok
