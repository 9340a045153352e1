"""The unit of work: one clock, cached pointers that stay true, a compare-and-swap that
refuses a stale one, pre-addressed values, and transactions opened only by ``ops/``."""

from __future__ import annotations

import ast
import hashlib
import multiprocessing
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors, models
from ckptdb.extension import Addressed
from ckptdb.ops.unit import writing
from ckptdb.store import CORE_TABLES, pointers
from ckptdb.store.migrations import core_set

PACKAGE = Path(ckptdb.__file__).resolve().parent
DAY_MS = 86_400_000


class _Clock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _lineage_ids(db: ckptdb.Database, namespace: str) -> list[str]:
    return [info.id for info in db.lineage(namespace)]


# -- the one clock ---------------------------------------------------------------------------


def test_every_act_is_stamped_with_the_injected_clock(db_path: Path) -> None:
    clock = _Clock(1_700_000_000_000)
    with ckptdb.open(db_path, clock=clock) as db:
        ack = db.commit("ns", {"a": b"x"})
        assert ack.created_at == datetime.fromtimestamp(1_700_000_000, UTC)
        clock.now_ms += 5_000
        db.pin("ns", "keep")
        db.set_retention(ckptdb.RetentionPolicy(keep_last=1), namespace="ns")
        assert db.pins()[0].created_at == datetime.fromtimestamp(1_700_000_005, UTC)
        assert db.history("ns")[0].at == datetime.fromtimestamp(1_700_000_000, UTC)
        assert db.clock is clock


def test_gc_grace_is_measured_with_the_injected_clock(db_path: Path) -> None:
    clock = _Clock(1_700_000_000_000)
    with ckptdb.open(db_path, clock=clock, chunk_size=64 * 1024) as db:
        db.commit("ns", {"big": b"\x01" * 200_000})
        db.commit("ns", {"big": b"\x02" * 200_000})
        db.commit("ns", {"big": b"\x03" * 200_000})
        policy = ckptdb.RetentionPolicy(keep_last=1)
        held = db.gc(policy, grace="1h")
        assert held.checkpoints_deleted >= 1
        assert held.chunks_deleted == 0  # young by the injected clock: held back
        clock.now_ms += 2 * 3_600_000
        freed = db.gc(policy, grace="1h")
        assert freed.chunks_deleted > 0  # two hours later by the same clock


def test_a_clock_that_is_not_callable_is_refused(db_path: Path) -> None:
    with pytest.raises(errors.InvalidInputError, match="clock"):
        ckptdb.open(db_path, clock=1234)  # type: ignore[arg-type]
    assert not db_path.exists()


# -- the acknowledgement ---------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    parent=st.none() | st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    numbers=st.lists(st.integers(min_value=0, max_value=2**53), min_size=5, max_size=5),
    created=st.booleans(),
    ms=st.integers(min_value=0, max_value=4_000_000_000_000),
    evicted=st.lists(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64), max_size=3),
)
def test_the_fast_ack_is_the_model(
    parent: str | None, numbers: list[int], created: bool, ms: int, evicted: list[str]
) -> None:
    generation, revision, count, logical, stored = numbers
    at = models.from_ms(ms)
    fast = models.CommitAck.of(
        "a" * 64, "ns", parent, generation, revision, created, count, logical, stored, ms, evicted
    )
    validated = models.CommitAck(
        checkpoint_id="a" * 64,
        namespace="ns",
        parent_id=parent,
        generation=generation,
        pointer_revision=revision,
        created=created,
        entry_count=count,
        logical_bytes=logical,
        bytes_stored=stored,
        bytes_deduplicated=max(logical - stored, 0),
        created_at=at,
        evicted_ids=evicted,
    )
    assert fast == validated
    assert fast.model_dump_json() == validated.model_dump_json()
    assert fast.model_fields_set == validated.model_fields_set
    with pytest.raises(Exception, match="frozen"):
        fast.namespace = "other"  # type: ignore[misc]


# -- cached pointers -------------------------------------------------------------------------


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["commit", "rollback", "copy", "drop"]), st.integers(0, 1)),
        min_size=1,
        max_size=14,
    )
)
def test_two_handles_interleaving_keep_one_unbroken_chain(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]
) -> None:
    """Whatever two handles do to a namespace in turn -- commit, move CURRENT back, copy
    into it, drop it -- every commit's parent is the CURRENT it found, never a pointer a
    handle remembered from before another's move."""
    path = tmp_path_factory.mktemp("heads") / "two.ckpt"
    with ckptdb.open(path) as a, ckptdb.open(path) as b:
        handles = (a, b)
        counter = 0
        for op, who in steps:
            db = handles[who]
            ptr = db.pointer("ns")
            if op == "commit":
                counter += 1
                ack = db.commit("ns", {"v": b"%d" % counter})
                assert ack.parent_id == (ptr.current_id if ptr else None)
                assert _lineage_ids(db, "ns")[:2] == [ack.checkpoint_id] + (
                    [ptr.current_id] if ptr else []
                )
            elif op == "rollback" and ptr is not None and ptr.fallback_id is not None:
                db.set_current("ns", ptr.fallback_id)
            elif op == "copy" and ptr is not None:
                db.copy_checkpoints([ptr.current_id], "ns2")
            elif op == "drop" and ptr is not None:
                db.drop_namespace("ns", force=True)
        for db in handles:
            assert db.verify(quick=True).ok


def _commit_loop(path: str, start: int, count: int) -> None:
    with ckptdb.open(path) as db:
        for i in range(start, start + count):
            db.commit("shared", {"v": b"%d" % i})


def test_processes_committing_in_turn_fork_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "procs.ckpt")
    with ckptdb.open(path) as db:
        db.commit("shared", {"v": b"start"})
        ctx = multiprocessing.get_context("spawn")
        workers = [ctx.Process(target=_commit_loop, args=(path, n * 1000, 40)) for n in (1, 2)]
        for w in workers:
            w.start()
        for i in range(40):  # this handle's cache goes stale under it all the time
            db.commit("shared", {"v": b"main-%d" % i})
        for w in workers:
            w.join(60)
            assert w.exitcode == 0
        history = db.history("shared")
        assert len(history) == 121
        lineage = _lineage_ids(db, "shared")
        assert len(lineage) == 121  # one chain: every move's parent was the CURRENT before it
        assert [h.current_id for h in history] == lineage
        assert db.verify(quick=True).ok


def test_a_move_decided_against_a_stale_pointer_writes_nothing(db: ckptdb.Database) -> None:
    db.commit("ns", {"a": b"1"})
    stale = db._handle.store.conn  # noqa: F841  (the handle's own connection)
    with writing(db._handle) as tx:
        before = pointers.pointer(tx.conn, "ns")
    assert before is not None
    db.commit("ns", {"a": b"2"})
    revision = db.pointer("ns").revision  # type: ignore[union-attr]
    with pytest.raises(errors.ConflictError, match="moved"), writing(db._handle) as tx:
        pointers.move(
            tx.conn,
            namespace="ns",
            namespace_id=before.namespace_id,
            previous=before,
            new_seq=before.current_seq,
            new_id=before.current_id,
            reason="stale",
            now_ms=tx.now_ms,
        )
    assert db.pointer("ns").revision == revision  # type: ignore[union-attr]
    assert len(db.history("ns")) == 2


# -- pre-addressed values --------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=3000))
def test_an_addressed_value_is_stored_as_its_bytes(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("addr") / "a.ckpt"
    with ckptdb.open(path) as db:
        digest = hashlib.sha256(data).hexdigest()
        one = db.commit("a", {"v": Addressed(data, digest)})
        two = db.commit("b", {"v": data})
        assert db.get(one.checkpoint_id).read("v") == data
        assert db.get(one.checkpoint_id).info.entries == db.get(two.checkpoint_id).info.entries
        assert two.bytes_stored == 0  # the same blob


def test_an_address_for_another_scope_is_computed_again(db_path: Path) -> None:
    key = bytes(range(32))
    with ckptdb.open(db_path, keys={"k": key}) as db:
        db.set_encryption("secret/", key_id="k")
        data = b"hello " * 50
        plain = hashlib.sha256(data).hexdigest()
        ack = db.commit("secret/x", {"v": Addressed(data, plain)})  # addressed for plaintext
        entry = db.get(ack.checkpoint_id).info.entries[0]
        assert entry.digest == db.content_address("secret/x", data) != plain
        assert db.get(ack.checkpoint_id).read("v") == data
        sealer = db.record_sealer("secret/x")
        assert sealer is not None and sealer.scope_id is not None
        keyed = db.content_address("secret/x", data)
        again = db.commit("secret/y", {"v": Addressed(data, keyed, sealer.scope_id)})
        assert db.get(again.checkpoint_id).read("v") == data


@pytest.mark.parametrize(
    ("data", "digest"), [("text", "a" * 64), (b"x", "A" * 64), (b"x", "abc"), (b"x", 7)]
)
def test_a_malformed_addressed_value_is_refused(data: object, digest: object) -> None:
    with pytest.raises(errors.InvalidEntryError):
        Addressed(data, digest)  # type: ignore[arg-type]


# -- where transactions open -----------------------------------------------------------------


def _transaction_opens(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        opens = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"write_transaction", "read_transaction", "savepoint"}
        ) or (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.lstrip().upper().startswith(("BEGIN", "SAVEPOINT"))
        )
        if opens:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_only_ops_opens_transactions() -> None:
    """The front object and the store never begin a transaction: ``ops/`` does (through
    ``ops/unit``), and the connection module implements them."""
    places = [PACKAGE / "database.py", *sorted((PACKAGE / "store").glob("*.py"))]
    assert [hit for path in places for hit in _transaction_opens(path)] == []


def test_core_tables_are_the_core_schema() -> None:
    created = {
        word.split("(")[0].strip().strip('"')
        for migration in core_set().migrations
        for word in migration.sql.split("CREATE TABLE ")[1:]
    }
    dropped = {
        word.split(";")[0].split()[0].strip('"')
        for migration in core_set().migrations
        for word in migration.sql.split("DROP TABLE ")[1:]
    }
    live = {name.split()[-1] for name in created - dropped if not name.endswith("_new")}
    assert live == CORE_TABLES


def test_cached_pointers_are_bounded(db: ckptdb.Database, monkeypatch: pytest.MonkeyPatch) -> None:
    from ckptdb.ops import handle as handle_module

    monkeypatch.setattr(handle_module, "HEADS_CACHE", 3)
    first = {n: db.commit(f"ns{n}", {"v": b"1"}).checkpoint_id for n in range(8)}
    assert list(db._handle.heads) == ["ns5", "ns6", "ns7"]  # the newest three
    for n in range(8):  # evicted or not, the next commit starts from the true CURRENT
        assert db.commit(f"ns{n}", {"v": b"2"}).parent_id == first[n]
    assert len(db._handle.heads) == 3
