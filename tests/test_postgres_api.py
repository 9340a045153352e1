"""The public API on PostgreSQL: ``ckptdb.open("postgresql://...")`` against a real server.

The checkpoint id hashes content and lineage only, never the engine: the same acts on an
SQLite file and on a PostgreSQL database must give the same ids, the same lineage and the
same bytes. So most tests here run one script on both engines and compare what each says.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, spawn_script
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors
from ckptdb.testing.postgres import PostgresServer


def _clock() -> Any:
    """A clock that ticks one millisecond per read (the same on both engines)."""
    now = [1_700_000_000_000]

    def read() -> int:
        now[0] += 1
        return now[0]

    return read


def _script(db: ckptdb.Database) -> dict[str, Any]:
    """Acts every engine must answer alike: commits (metadata, media types, a label, a
    chunked value, a reference to a stored blob), a refused compare-and-swap, a retry that
    converges, a branch, a rollback, pins, a refusing quota. Returns what was observed."""
    seen: dict[str, Any] = {}
    big = random.Random(7).randbytes(64) * 40_000  # 2.5 MB: chunked, mostly deduplicated
    a = db.commit(
        "agent/1",
        {"state.json": ckptdb.Entry(b'{"n": 1}', media_type="application/json"), "big": big},
        metadata={"step": 1, "run": "r1"},
        label="first",
    )
    b = db.commit(
        "agent/1",
        {"state.json": b'{"n": 2}', "big": db.get(a.checkpoint_id).ref("big")},
        metadata={"step": 2},
        expect_current=a.checkpoint_id,
    )
    with pytest.raises(errors.ConflictError) as conflict:
        db.commit("agent/1", {"state.json": b"lost"}, expect_current=a.checkpoint_id)
    seen["conflict"] = (conflict.value.code, conflict.value.details.get("actual"))
    retry = db.commit(
        "agent/1",
        {"state.json": b'{"n": 2}', "big": big},
        metadata={"step": 2},
        expect_current=a.checkpoint_id,
    )
    seen["retry"] = (retry.checkpoint_id, retry.created)
    branch = db.commit("agent/1", {"state.json": b"branch"}, base=a.checkpoint_id)
    db.set_current("agent/1", b.checkpoint_id, reason="rollback")
    db.commit("agent/2", {"x": b"other namespace"})
    db.pin(a.checkpoint_id, "keep-first", note="release")
    db.set_quota("agent/", max_checkpoints=4, applies_to="each")
    with pytest.raises(errors.QuotaExceededError):
        for n in range(5):
            db.commit("agent/2", {"x": f"{n}".encode()})
    seen["ids"] = [a.checkpoint_id, b.checkpoint_id, branch.checkpoint_id]
    seen["acks"] = [(x.generation, x.parent_id, x.entry_count, x.logical_bytes) for x in (a, b)]
    current = db.current("agent/1")
    assert current is not None
    seen["current"] = (current.id, current.read("state.json"))
    seen["big"] = db.get(a.checkpoint_id).read("big") == big
    labelled = db.get_labelled("agent/1", "first")
    seen["label"] = labelled.id if labelled else None
    seen["lineage"] = [(c.id, c.generation, c.metadata) for c in db.lineage("agent/1")]
    seen["history"] = [(m.revision, m.current_id, m.reason) for m in db.history("agent/1")]
    seen["namespaces"] = [(n.name, n.current_id) for n in db.namespaces()]
    seen["pins"] = [(p.name, p.checkpoint_id) for p in db.pins()]
    seen["resolve"] = db.resolve(a.checkpoint_id[:12])
    seen["existing"] = sorted(db.existing([a.checkpoint_id, "0" * 64]))
    seen["diff"] = json.loads(db.diff(a.checkpoint_id, b.checkpoint_id).model_dump_json())
    seen["entries"] = [
        (e.name, e.digest, e.size, e.media_type) for e in db.get(a.checkpoint_id).entries.values()
    ]
    loaded = db.load("agent/1")
    seen["load"] = loaded.checkpoint.id
    seen["agent2"] = [c.generation for c in db.lineage("agent/2")]
    return seen


def _run_script(target: str) -> dict[str, Any]:
    with ckptdb.open(target, clock=_clock()) as db:
        return _script(db)


def test_the_same_acts_give_the_same_checkpoints_on_both_engines(
    tmp_path: Path, pg_url: str
) -> None:
    on_sqlite = _run_script(str(tmp_path / "same.ckpt"))
    on_postgresql = _run_script(pg_url)
    assert on_postgresql == on_sqlite
    # and what the script observed is what it should be, not merely equal
    assert on_sqlite["retry"] == (on_sqlite["ids"][1], False)
    assert on_sqlite["conflict"] == ("conflict", on_sqlite["ids"][1])
    assert on_sqlite["current"] == (on_sqlite["ids"][1], b'{"n": 2}')
    assert on_sqlite["big"] is True
    assert on_sqlite["agent2"] == [4, 3, 2, 1]
    assert on_sqlite["label"] == on_sqlite["ids"][0]


def test_a_second_handle_sees_what_the_first_committed(pg_url: str) -> None:
    with ckptdb.open(pg_url) as first, ckptdb.open(pg_url) as second:
        ack = first.commit("t", {"a": b"1"})
        seen = second.current("t")
        assert seen is not None and seen.id == ack.checkpoint_id
        # the second handle's commit builds on the first's, not on a cached pointer
        on_top = second.commit("t", {"a": b"2"})
        assert on_top.parent_id == ack.checkpoint_id
        again = first.commit("t", {"a": b"3"})
        assert again.parent_id == on_top.checkpoint_id and again.generation == 3


def test_reopening_finds_the_schema_and_settings(pg_url: str) -> None:
    with ckptdb.open(pg_url, chunk_size=64 * 1024) as db:
        db.commit("t", {"a": b"x"})
        assert db.chunk_size == 64 * 1024
        assert "[" not in db.path or "socket" in db.path
    with ckptdb.open(pg_url, migrate="never") as db:  # nothing pending: opens
        assert db.chunk_size == 64 * 1024
        assert db.current("t") is not None


def test_a_read_only_handle_reads_and_refuses_writes(pg_url: str) -> None:
    with ckptdb.open(pg_url) as db:
        ack = db.commit("t", {"a": b"x"})
    with ckptdb.open(pg_url, readonly=True) as db:
        cp = db.current("t")
        assert cp is not None and cp.read("a") == b"x"
        with pytest.raises(errors.ReadOnlyError):
            db.commit("t", {"a": b"y"})
    with ckptdb.open(pg_url) as db:
        current = db.current("t")
        assert current is not None and current.id == ack.checkpoint_id


def test_an_empty_database_is_not_created_when_create_is_false(pg_url: str) -> None:
    for options in ({"create": False}, {"readonly": True}):
        with pytest.raises(errors.DatabaseFileError) as exc:
            ckptdb.open(pg_url, **options)
        assert exc.value.code == "bad_database_file"
    with ckptdb.open(pg_url) as db:  # nothing was created meanwhile: this creates it
        assert db.namespaces() == []


@pytest.mark.parametrize(
    ("options", "word"),
    [
        ({"page_size": 8192}, "page_size"),
        ({"vfs": "unix"}, "vfs"),
        ({"synchronous": "normal"}, "synchronous"),
        ({"chunk_size": 3}, "chunk_size"),
        ({"migrate": "sometimes"}, "migrate"),
    ],
)
def test_sqlite_only_options_are_refused_for_a_url(
    pg_url: str, options: dict[str, Any], word: str
) -> None:
    with pytest.raises(errors.InvalidInputError) as exc:
        ckptdb.open(pg_url, **options)
    assert word in str(exc.value)


def test_an_unreachable_server_is_a_storage_error_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://app:s3cret@/ckpt?host={tmp_path}&port=1"  # no server on that socket
    with pytest.raises(errors.StorageError) as exc:
        ckptdb.open(url)
    assert exc.value.code == "io_error"
    assert "s3cret" not in str(exc.value) and "PostgreSQL" in str(exc.value)


def test_lock_waits_counts_the_waits_for_ckptdbs_locks(pg_url: str) -> None:
    """A commit that found its namespace held by another transaction for ~0.3 s: one wait,
    of about that long; commits that found it free: none."""
    import threading

    from ckptdb.connection.postgres import PgConnection

    with ckptdb.open(pg_url) as db:
        db.commit("t", {"a": b"1"})
        db.commit("u", {"a": b"1"})
        assert db.lock_waits == (0, 0.0)
        holder = PgConnection.open(pg_url)
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with holder.write_transaction():
                holder.lock("namespace:t")
                held.set()
                release.wait(10)

        thread = threading.Thread(target=hold)
        thread.start()
        try:
            assert held.wait(10)
            threading.Timer(0.3, release.set).start()
            started = time.monotonic()
            db.commit("t", {"a": b"2"})
            took = time.monotonic() - started
        finally:
            release.set()
            thread.join()
            holder.close()
        waits, seconds = db.lock_waits
        assert waits == 1 and 0.25 <= seconds <= took
        db.commit("u", {"a": b"2"})
        assert db.lock_waits == (1, seconds)


_RACER = textwrap.dedent(
    """
    import json, sys
    import ckptdb
    from ckptdb import errors
    url, name, rounds, cas = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "cas"
    acked, conflicts = [], 0
    with ckptdb.open(url) as db:
        for n in range(rounds):
            options = {}
            if cas:
                cp = db.current("shared")
                options["expect_current"] = None if cp is None else cp.id
            try:
                ack = db.commit("shared", {"by": f"{name}-{n}".encode()}, **options)
                acked.append(ack.checkpoint_id)
            except errors.ConflictError:
                conflicts += 1
    print(json.dumps({"acked": acked, "conflicts": conflicts}))
    """
)


def _race(url: str, tmp_path: Path, *, cas: bool, machines: int = 4, rounds: int = 25) -> Any:
    """``machines`` processes commit ``rounds`` times each to one namespace (``cas``: each
    expecting the CURRENT it read); returns (acknowledged ids, conflicts)."""
    with ckptdb.open(url):
        pass  # the schema, created once before the racers start
    script = tmp_path / "racer.py"
    script.write_text(_RACER)
    racers = [
        spawn_script(script, url, f"m{i}", str(rounds), "cas" if cas else "-")
        for i in range(machines)
    ]
    results = []
    for proc in racers:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out))
    return [cid for r in results for cid in r["acked"]], sum(r["conflicts"] for r in results)


def test_commits_without_an_expectation_from_many_machines_all_land_in_one_line(
    pg_url: str, tmp_path: Path
) -> None:
    """As on SQLite, writers of one namespace serialize: each commit builds on the one
    before, none is refused, none forks."""
    acked, conflicts = _race(pg_url, tmp_path, cas=False)
    assert conflicts == 0 and len(acked) == 100
    with ckptdb.open(pg_url) as db:
        chain = db.lineage("shared")
        assert sorted(c.id for c in chain) == sorted(acked)
        assert [c.generation for c in chain] == list(range(100, 0, -1))


def test_machines_racing_on_one_namespace_get_one_winner_per_move_never_a_fork(
    pg_url: str, tmp_path: Path
) -> None:
    acked, conflicts = _race(pg_url, tmp_path, cas=True)
    assert len(acked) + conflicts == 100 and conflicts > 0
    with ckptdb.open(pg_url) as db:
        chain = db.lineage("shared")
        # every acknowledged commit is on the one lineage, each exactly once: no fork
        assert sorted(c.id for c in chain) == sorted(acked)
        assert [c.generation for c in chain] == list(range(len(chain), 0, -1))
        assert [m.revision for m in db.history("shared")] == list(range(len(acked), 0, -1))


def _commit_same(url: str, queue: Any) -> None:
    with ckptdb.open(url) as db:
        queue.put(db.commit("same", {"a": b"identical"}, expect_current=None).checkpoint_id)


def test_two_first_commits_of_one_content_converge(pg_url: str) -> None:
    """Two processes make the same first commit at once: both acknowledge the one id (the
    second is idempotent, or a conflict it would be wrong to report as a second winner)."""
    with ckptdb.open(pg_url):
        pass
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_commit_same, args=(pg_url, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    ids = [queue.get(timeout=5) for _ in range(sum(p.exitcode == 0 for p in procs))]
    with ckptdb.open(pg_url) as db:
        current = db.current("same")
        assert current is not None
        assert set(ids) <= {current.id} and ids
        assert len(db.lineage("same")) == 1


_ENTRY = st.binary(min_size=0, max_size=3000)
_NAMES = st.sampled_from(["a", "b", "dir/c", "state.json"])


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    commits=st.lists(
        st.tuples(st.sampled_from(["t1", "t2"]), st.dictionaries(_NAMES, _ENTRY, max_size=3)),
        min_size=1,
        max_size=6,
    )
)
def test_any_commit_sequence_gives_the_same_ids_and_bytes_on_both_engines(
    pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory, commits: Any
) -> None:
    import uuid

    url = pg_server.create_database("h_" + uuid.uuid4().hex[:16])
    path = tmp_path_factory.mktemp("same") / "h.ckpt"
    observed = []
    for target in (str(path), url):
        with ckptdb.open(target, clock=_clock()) as db:
            acks = [db.commit(ns, entries) for ns, entries in commits]
            reads = {
                ack.checkpoint_id: {
                    name: db.get(ack.checkpoint_id).read(name)
                    for name in db.get(ack.checkpoint_id).entries
                }
                for ack in acks
            }
            observed.append(([(a.checkpoint_id, a.created, a.generation) for a in acks], reads))
    assert observed[0] == observed[1]
    for (_, entries), ack in zip(commits, observed[0][0], strict=True):
        assert observed[0][1][ack[0]] == entries


def test_every_method_docs_list_as_running_runs_alike_on_both_engines(
    tmp_path: Path, pg_url: str
) -> None:
    """The "runs" column of docs/postgresql.md, call by call, compared with SQLite."""
    key = bytes(range(32))

    def calls(db: ckptdb.Database, out: Path) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        scope = db.set_encryption("secret/", key_id="k1")
        seen["scope"] = (scope.prefix, scope.key_id)
        a = db.commit("t", {"a": b"one", "dir/b": b"two" * 1000})
        sealed = db.commit("secret/1", {"s": b"sealed state"})
        cp = db.get(a.checkpoint_id)
        seen["read_many"] = db.read_many([(cp, "a"), (cp, "dir/b")])
        seen["load_checkpoint"] = db.load_checkpoint(a.checkpoint_id).checkpoint.id
        seen["sealed"] = db.get(sealed.checkpoint_id).read("s")
        seen["address"] = db.content_address("secret/1", b"sealed state") != db.content_address(
            "t", b"sealed state"
        )
        seen["key_scopes"] = [(k.prefix, k.key_id) for k in db.key_scopes()]
        db.pin(a.checkpoint_id, "p")
        seen["unpin"] = db.unpin("p").name
        db.set_retention(ckptdb.RetentionPolicy(keep_last=3), namespace="t")
        seen["retention"] = sorted(db.retention())
        seen["clear_retention"] = db.clear_retention(namespace="t")
        db.set_quota("t", max_bytes=10**6)
        seen["quotas"] = [(q.prefix, q.max_bytes) for q in db.quotas()]
        seen["clear_quota"] = db.clear_quota("t")
        seen["pointer"] = db.pointer("t").revision  # type: ignore[union-attr]
        seen["log"] = db.log("t").model_dump_json()
        db.checkout(a.checkpoint_id, out)
        seen["checkout"] = sorted(
            (str(p.relative_to(out)), p.read_bytes()) for p in out.rglob("*") if p.is_file()
        )
        return seen

    results = []
    for target, out in ((str(tmp_path / "m.ckpt"), tmp_path / "o1"), (pg_url, tmp_path / "o2")):
        with ckptdb.open(target, clock=_clock(), keys={"k1": key}) as db:
            results.append(calls(db, out))
    assert results[0] == results[1]
    assert results[0]["sealed"] == b"sealed state" and results[0]["address"] is True
    assert results[0]["checkout"] == [("a", b"one"), ("dir/b", b"two" * 1000)]


def test_copy_checkpoints_gives_the_same_copies_on_both_engines(
    tmp_path: Path, pg_url: str
) -> None:
    results = []
    for target in (str(tmp_path / "c.ckpt"), pg_url):
        with ckptdb.open(target, clock=_clock()) as db:
            a = db.commit("src", {"a": b"1"})
            b = db.commit("src", {"a": b"2"})
            report = db.copy_checkpoints([a.checkpoint_id, b.checkpoint_id], "dst")
            results.append(
                (
                    report.model_dump_json(),
                    [(c.id, c.parent_id) for c in db.lineage("dst")],
                    db.current("dst").read("a"),  # type: ignore[union-attr]
                )
            )
    assert results[0] == results[1]
    assert results[0][2] == b"2" and len(results[0][1]) == 2


def _scope_and_first_commit(url: str, keys: dict[str, bytes], prefix: str) -> dict[str, Any]:
    """On two handles (two connections) at once: create the scope of ``prefix``, and make
    the first commit of a namespace under it. Returns what each got (a result or error)."""
    import threading

    outcome: dict[str, Any] = {}
    start = threading.Barrier(2)
    with ckptdb.open(url, keys=keys) as one, ckptdb.open(url, keys=keys) as two:

        def create_scope() -> None:
            start.wait()
            try:
                outcome["scope"] = one.set_encryption(prefix, key_id=f"k{prefix}")
            except errors.ScopeConflictError as exc:
                outcome["scope"] = exc

        def first_commit() -> None:
            start.wait()
            try:
                outcome["commit"] = two.commit(f"{prefix}x", {"a": b"secret"})
            except errors.ScopeChangedError as exc:
                outcome["commit"] = exc

        threads = [threading.Thread(target=f) for f in (create_scope, first_commit)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    return outcome


def test_a_key_scope_and_a_first_commit_under_its_prefix_never_interleave(pg_url: str) -> None:
    """Two machines: one creates the scope of ``s/`` while the other makes the first commit
    of ``s/x``. Either the scope came first and the namespace is sealed in it, or the
    namespace came first and the scope is refused -- never a plaintext namespace under a
    scope's prefix."""
    keys = {f"ks{n}/": bytes(32) for n in range(12)}
    for attempt in range(12):
        prefix = f"s{attempt}/"
        outcome = _scope_and_first_commit(pg_url, keys, prefix)
        with ckptdb.open(pg_url, keys=keys) as db:
            scopes = {s.prefix: s for s in db.key_scopes()}
            names = {n.name for n in db.namespaces()}
        if prefix in scopes:  # the scope won: a namespace under it is sealed in it
            assert not isinstance(outcome["scope"], Exception)
            assert (f"{prefix}x" in names) == (scopes[prefix].namespaces == 1)
        else:  # the namespace won, in plaintext: the scope was refused
            assert isinstance(outcome["scope"], errors.ScopeConflictError)
            assert f"{prefix}x" in names


_QUOTA_WRITER = textwrap.dedent(
    """
    import json, sys, time
    import ckptdb
    from ckptdb import errors
    url, name, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    acked = refused = 0
    with ckptdb.open(url) as db:
        time.sleep(max(0.0, start - time.time()))  # every machine starts at once
        for team in range(4):
            for n in range(15):
                try:
                    db.commit(f"team{team}/{name}", {"n": f"{name}-{n}".encode()})
                    acked += 1
                except errors.QuotaExceededError:
                    refused += 1
    print(json.dumps([acked, refused]))
    """
)


def test_a_quota_over_a_prefix_holds_against_writers_of_its_namespaces_at_once(
    pg_url: str, tmp_path: Path
) -> None:
    """Four machines commit to four namespaces under ``teamN/`` with a total quota of 20
    checkpoints: 20 land, the rest are refused -- never 21 (each commit counts the others'
    under the prefix's lock). Four prefixes, filled one after the other: four races."""
    with ckptdb.open(pg_url) as db:
        for team in range(4):
            db.set_quota(f"team{team}/", max_checkpoints=20, applies_to="total")
    script = tmp_path / "quota_writer.py"
    script.write_text(_QUOTA_WRITER)
    start = time.time() + 3
    procs = [spawn_script(script, pg_url, f"m{i}", str(start)) for i in range(4)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out))
    assert sum(a for a, _ in results) == 80 and sum(r for _, r in results) == 160
    with ckptdb.open(pg_url) as db:
        for team in range(4):
            names = [f"team{team}/m{i}" for i in range(4)]
            assert sum(len(db.lineage(n)) for n in names if db.current(n)) == 20


_EVICTING_WRITER = textwrap.dedent(
    """
    import json, sys, time
    import ckptdb
    from ckptdb import errors
    url, name, start, commits = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    acked, busy, deadlocks, last = 0, 0, 0, None
    with ckptdb.open(url) as db:
        time.sleep(max(0.0, start - time.time()))  # every machine starts at once
        for n in range(commits):
            while True:
                try:
                    last = db.commit(f"fleet/{name}", {"n": f"{name}-{n}".encode()}).checkpoint_id
                    acked += 1
                    break
                except errors.BusyTimeoutError as exc:  # retryable: the commit wrote nothing
                    busy += 1
                    deadlocks += "deadlock" in exc.message
    print(json.dumps({"acked": acked, "busy": busy, "deadlocks": deadlocks, "last": last}))
    """
)

_GC_LOOP = textwrap.dedent(
    """
    import sys, time
    import ckptdb
    url, until = sys.argv[1], float(sys.argv[2])
    with ckptdb.open(url) as db:
        while time.time() < until:
            db.gc(grace=0)
    """
)


def test_an_evicting_quota_over_a_prefix_with_its_writers_and_a_gc_at_once(
    pg_url: str, tmp_path: Path
) -> None:
    """Four machines commit to four namespaces under ``fleet/``, whose total may hold 10
    checkpoints and evicts the oldest, while a fifth runs GC in a loop. An eviction takes
    the other namespaces' locks without waiting (their holder may wait for its prefix
    lock): no deadlock, every commit lands (after retries of the few that found the
    namespaces they needed busy), and no eviction left more than 10 behind."""
    with ckptdb.open(pg_url) as db:
        db.set_quota("fleet/", max_checkpoints=10, applies_to="total", on_exceed="evict")
    writer, gc_loop = tmp_path / "evicting_writer.py", tmp_path / "gc_loop.py"
    writer.write_text(_EVICTING_WRITER)
    gc_loop.write_text(_GC_LOOP)
    start = time.time() + 3
    procs = [spawn_script(writer, pg_url, f"m{i}", str(start), "40") for i in range(4)]
    collector = spawn_script(gc_loop, pg_url, str(start + 60))
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out))
    collector.kill()
    collector.communicate()
    assert [r["acked"] for r in results] == [40] * 4
    assert sum(r["deadlocks"] for r in results) == 0, results
    print("busy retries:", [r["busy"] for r in results])
    with ckptdb.open(pg_url) as db:
        stored = db.query("SELECT namespace FROM checkpoints").rows
        assert len(stored) <= 10
        for i, result in enumerate(results):
            assert db.current(f"fleet/m{i}").id == result["last"]
        receipts = db.receipts(kind="quota_evict", limit=1000)
        assert all(q["after"]["checkpoints"] <= 10 for r in receipts for q in r.body["quotas"])
        # GC keeps every checkpoint without a retention policy: only evictions deleted.
        assert sum(r.body["checkpoints_deleted"] for r in receipts) == 160 - len(stored)
        assert db.verify().ok


def test_an_eviction_passes_over_a_namespace_another_writer_holds(pg_url: str) -> None:
    """Another transaction holds ``q/b``'s lock (as a commit to it waiting for the quota's
    prefix lock would): an eviction that can make room elsewhere does; one that needs
    ``q/b``'s checkpoints is a retryable BusyTimeoutError naming it, with nothing written
    or evicted -- and once the holder is gone, the same commit lands."""
    from ckptdb.connection.postgres import PgConnection

    def state(n: int) -> dict[str, bytes]:
        return {"n": str(n).encode()}

    with ckptdb.open(pg_url) as db:
        db.set_quota("q/", max_checkpoints=6, applies_to="total", on_exceed="evict")
        # q/b: two old checkpoints any eviction may take, then its fallback and CURRENT.
        b_old = [db.commit("q/b", state(n)).checkpoint_id for n in range(4)]
        a_old = [db.commit("q/a", state(n)).checkpoint_id for n in range(2)]
        holder = PgConnection.open(pg_url)
        try:
            with holder.write_transaction():
                holder.lock("namespace:q/b")
                # The oldest evictable is q/b's first, but q/b is busy: the checkpoint this
                # commit made evictable in q/a (its old fallback) goes instead.
                assert db.commit("q/a", state(2)).evicted_ids == [a_old[0]]
                # A new namespace: nothing is evictable outside q/b.
                before = db.query("SELECT checkpoint_id FROM checkpoints").rows
                with pytest.raises(errors.BusyTimeoutError) as exc:
                    db.commit("q/c", state(0))
                assert exc.value.retryable and "'q/b'" in exc.value.message
                assert db.query("SELECT checkpoint_id FROM checkpoints").rows == before
                assert db.current("q/c") is None
        finally:
            holder.close()
        assert db.commit("q/c", state(0)).evicted_ids == [b_old[0]]
        assert len(db.query("SELECT 1 FROM checkpoints").rows) == 6
        assert db.verify().ok


def test_stats_and_migration_status_describe_a_postgresql_database(pg_url: str) -> None:
    with ckptdb.open(pg_url) as db:
        db.commit("t", {"a": b"x" * 100_000, "b": b"small"})
        db.commit("u", {"a": b"x" * 100_000})
        stats = db.stats()
        assert (stats.namespaces, stats.checkpoints, stats.blobs) == (2, 2, 2)
        assert stats.logical_bytes == 200_005 and 0 < stats.stored_bytes < 1000
        assert stats.file_bytes > 0 and stats.page_size == 8192 and stats.wal_bytes == 0
        assert [u.namespace for u in stats.usage] == ["t", "u"]
        status = db.migration_status()
        newest = len(list((REPO / "migrations" / "postgresql").glob("*.sql")))
        assert (status.file_version, status.code_version, status.up_to_date) == (
            newest,
            newest,
            True,
        )
        assert db.migration_plan() == []
        assert [m.version for m in db.migration_history()] == list(range(1, newest + 1))
