"""CkptdbSaver: LangGraph's official conformance suite, several processes on one file,
content-addressed channel values, pruning that returns space, and the edges of the API."""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import child_env, store_wrong_types
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import ckptdb
from ckptdb.integrations.langgraph import AsyncCkptdbSaver, CkptdbSaver, PickleRefusedError
from ckptdb.integrations.langgraph._layout import namespace_for


def cfg(thread: str, ns: str = "", checkpoint_id: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def make_checkpoint(values: dict[str, Any], versions: dict[str, Any] | None = None) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions or dict.fromkeys(values, 1))
    return cp


def file_bytes(path: Path) -> int:
    return sum(
        os.path.getsize(str(path) + s) for s in ("", "-wal") if os.path.exists(str(path) + s)
    )


# -- the official conformance suite ------------------------------------------------------


@pytest.mark.parametrize("cls", [CkptdbSaver, AsyncCkptdbSaver])
def test_conformance_suite_passes_every_base_and_extended_capability(
    cls: type[CkptdbSaver], location: str, request: pytest.FixtureRequest
) -> None:
    made = [0]

    def where(n: int) -> str:  # a new database for each saver the suite makes
        if location.startswith("postgresql:"):
            server = request.getfixturevalue("pg_server")
            return str(server.create_database(f"conformance_{uuid.uuid4().hex[:12]}_{n}"))
        return str(Path(location).parent / f"conformance-{n}.ckpt")

    @checkpointer_test(name=cls.__name__)
    async def factory() -> AsyncIterator[CkptdbSaver]:
        made[0] += 1
        saver = await asyncio.to_thread(cls, where(made[0]))
        try:
            yield saver
        finally:
            saver.close()

    report = asyncio.run(validate(factory))
    counts = {
        name: (r.tests_passed, r.tests_failed, r.failures) for name, r in report.results.items()
    }
    print(f"\nconformance {cls.__name__}: {report.conformance_level()} {counts}")
    for cap in BASE_CAPABILITIES | EXTENDED_CAPABILITIES:
        result = report.results[cap.value]
        assert result.detected, f"{cap.value} not detected"
        assert result.passed is True, f"{cap.value}: {result.failures}"
        assert result.tests_failed == 0
    passed = sum(r.tests_passed for r in report.results.values())
    assert passed == 81  # 17 put, 10 put_writes, 10 get_tuple, 16 list, 5 delete_thread,
    # 7 delete_for_runs, 8 copy_thread, 8 prune (langgraph-checkpoint-conformance 0.0.2)
    assert report.conformance_level() == "FULL"


def test_sync_methods_behave_like_the_async_ones(location: str) -> None:
    with CkptdbSaver(location) as saver:
        first = saver.put(cfg("t"), make_checkpoint({"a": "x" * 1000, "b": 1}), {"step": 0}, {})
        cp2 = make_checkpoint({"a": "x" * 1000, "b": 2})
        second = saver.put(first, cp2, {"step": 1, "source": "loop"}, {"b": 2})
        saver.put_writes(second, [("b", 3), ("__interrupt__", {"q": 1})], "task-1", "path")
        tup = saver.get_tuple(cfg("t"))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"a": "x" * 1000, "b": 2}
        assert tup.parent_config is not None
        assert (
            tup.parent_config["configurable"]["checkpoint_id"]
            == first["configurable"]["checkpoint_id"]
        )
        assert {w[1] for w in tup.pending_writes or []} == {"b", "__interrupt__"}
        assert [t.metadata["step"] for t in saver.list(cfg("t"))] == [1, 0]
        assert [t.metadata["step"] for t in saver.list(None, filter={"source": "loop"})] == [1]

        async def both() -> list[Any]:
            return [t async for t in saver.alist(cfg("t"))]

        assert [t.config for t in asyncio.run(both())] == [t.config for t in saver.list(cfg("t"))]
        saver.copy_thread("t", "u")
        assert [t.checkpoint["id"] for t in saver.list(cfg("u"))] == [
            t.checkpoint["id"] for t in saver.list(cfg("t"))
        ]
        saver.delete_thread("t")
        assert saver.get_tuple(cfg("t")) is None
        assert saver.get_tuple(cfg("u")) is not None
        v1 = saver.get_next_version(None, None)
        assert saver.get_next_version(v1, None) > v1


# -- several processes, each with its own saver, on one file ---------------------------------

WORKERS = 3
PUTS = 40


def _worker(path: str, worker: int, puts: int) -> None:
    """Puts, writes, reads and (worker 0) prunes, racing the other workers."""
    with CkptdbSaver(path) as saver:
        own = f"w{worker}"
        config = cfg(own)
        shared = cfg("shared")
        for i in range(puts):
            cp = make_checkpoint(
                {"turn": i, "notes": f"{worker}-{i}-" + "n" * 600, "fixed": "f" * 800}
            )
            config = saver.put(config, cp, {"step": i, "run_id": f"run-{worker}"}, {"turn": i})
            saver.put_writes(config, [("turn", i), ("notes", "w")], f"task-{i}")
            # Everyone also appends to one shared thread (a fork when another worker won).
            latest = saver.get_tuple(shared)
            parent = latest.config if latest is not None else cfg("shared")
            saver.put(parent, make_checkpoint({"by": worker, "i": i}), {"step": i}, {})
            assert saver.get_tuple(config) is not None
            if i % 10 == 9:
                assert len(list(saver.list(cfg(own), limit=5))) == 5
                if worker == 0:
                    saver.prune([own], strategy="keep_latest")
        print(f"worker {worker} done")


def test_processes_with_their_own_savers_never_see_database_is_locked(location: str) -> None:
    path = location  # created by whichever worker gets there first
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "worker", str(path), str(k), str(PUTS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for k in range(WORKERS)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "locked" not in err.lower() and "busy" not in err.lower(), err
        assert "done" in out
    with CkptdbSaver(path) as saver:
        for k in range(WORKERS):
            runs = list(saver.list(cfg(f"w{k}")))
            assert len(runs) == (1 if k == 0 else PUTS) or (k == 0 and len(runs) <= 10)
            assert runs[0].checkpoint["channel_values"]["turn"] == PUTS - 1
            assert runs[0].pending_writes
        assert len(list(saver.list(cfg("shared")))) == WORKERS * PUTS
        assert saver.db.verify().ok


def _writer(path: str, puts: int) -> None:
    with CkptdbSaver(path) as saver:
        config = cfg("race")
        for i in range(puts):
            values = {"turn": i, "big": f"{i}-" + "b" * 3000}
            config = saver.put(config, make_checkpoint(values), {"step": i}, {"turn": i})
            saver.put_writes(config, [("turn", i)], f"task-{i}")
        print("writer done")


def _pruner(path: str, done: str) -> None:
    with CkptdbSaver(path) as saver:
        rounds = 0
        while not os.path.exists(done) and rounds < 2000:
            saver.prune(["race"], strategy="keep_latest")
            rounds += 1
        print(f"pruner done after {rounds} prunes")


def test_prune_racing_a_writer_in_another_process_loses_nothing_it_keeps(
    location: str, tmp_path: Path
) -> None:
    path, done = location, tmp_path / "writer.done"
    CkptdbSaver(path).close()
    pruner = subprocess.Popen(
        [sys.executable, __file__, "pruner", str(path), str(done)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    writer = subprocess.run(
        [sys.executable, __file__, "writer", str(path), "60"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=600,
        check=False,
    )
    done.touch()
    out, err = pruner.communicate(timeout=600)
    assert "pruner done" in out
    assert writer.returncode == 0, writer.stderr
    assert pruner.returncode == 0, err
    assert "locked" not in (err + writer.stderr).lower()
    with CkptdbSaver(path) as saver:
        with saver.db.read_session() as s:
            rows = s.scalar("SELECT count(*) FROM lg_checkpoint WHERE thread_id = 'race'")
        listed = list(saver.list(cfg("race")))
        assert len(listed) == rows  # every row LangGraph keeps still has its checkpoint
        assert listed[0].checkpoint["channel_values"]["turn"] == 59
        assert listed[0].pending_writes == [("task-59", "turn", 59)]
        saver.prune(["race"], strategy="keep_latest")
        assert len(list(saver.list(cfg("race")))) == 1
        assert saver.db.verify().ok


# -- content addressing: an unchanged channel is never stored again --------------------------


def test_unchanged_channels_are_not_stored_again(tmp_path: Path) -> None:
    size = 4000
    rng = random.Random(11)  # incompressible values: compression must not hide the growth
    with CkptdbSaver(tmp_path / "dedup.ckpt") as saver:
        values: dict[str, object] = {f"ch{i}": rng.randbytes(size) for i in range(10)}
        config = saver.put(
            cfg("t"), make_checkpoint(values), {"step": -1}, dict.fromkeys(values, 1)
        )
        stored = [saver.db.stats().stored_bytes]
        for step in range(20):
            changed = f"ch{step % 10}"
            values = {**values, changed: rng.randbytes(size)}
            config = saver.put(config, make_checkpoint(values), {"step": step}, {changed: 2})
            stored.append(saver.db.stats().stored_bytes)
        growth = [b - a for a, b in itertools.pairwise(stored)]
        # One ~4 KB channel value plus a small envelope per step -- not the 40 KB state.
        assert all(size < g < size + 1500 for g in growth), growth
        logical = sum(t.checkpoint["channel_values"] is not None for t in saver.list(cfg("t")))
        assert logical == 21
        total_state = 21 * 10 * size
        assert saver.db.stats().stored_bytes < total_state / 4
        # Reads give every value back.
        tup = saver.get_tuple(cfg("t"))
        assert tup is not None and tup.checkpoint["channel_values"] == values
        # copy_thread re-uses every blob by reference: no byte is read or stored again.
        before = saver.db.stats().stored_bytes
        from ckptdb.ops.checkpoint import Checkpoint as StoredCheckpoint

        def no_read(self: Any, name: str) -> bytes:
            raise AssertionError(f"copy_thread read the bytes of {name}")

        real_read = StoredCheckpoint.read
        StoredCheckpoint.read = no_read  # type: ignore[method-assign]
        try:
            saver.copy_thread("t", "copy")
        finally:
            StoredCheckpoint.read = real_read  # type: ignore[method-assign]
        assert saver.db.stats().stored_bytes == before
        copied = saver.get_tuple(cfg("copy"))
        assert copied is not None and copied.checkpoint["channel_values"] == values


# -- pruning keeps what resuming needs and gives the space back -----------------------------


def test_prune_keep_latest_keeps_resume_state_and_shrinks_the_file(tmp_path: Path) -> None:
    path = tmp_path / "prune.ckpt"
    with CkptdbSaver(path) as saver:
        for thread in ("a", "b"):
            config = cfg(thread)
            for step in range(60):
                # Incompressible: the point is what prune frees, not what zstd saves.
                values = {"big": random.Random(f"{thread}{step}").randbytes(20_000), "small": step}
                config = saver.put(config, make_checkpoint(values), {"step": step}, {"big": 1})
                saver.put_writes(config, [("small", step)], f"task{step}")
            saver.put_writes(config, [("__interrupt__", {"ask": thread})], "human")
            # A subgraph namespace of the same thread.
            sub = saver.put(cfg(thread, "sub:1"), make_checkpoint({"s": 1}), {"step": 0}, {})
            saver.put(sub, make_checkpoint({"s": 2}), {"step": 1}, {})
        saver.db.close()
        big = file_bytes(path)
        saver.db = ckptdb.open(path)
        latest_a = saver.get_tuple(cfg("a"))
        assert latest_a is not None

        saver.prune(["a"], strategy="keep_latest")

        kept = list(saver.list({"configurable": {"thread_id": "a"}}))
        by_ns = sorted(t.config["configurable"]["checkpoint_ns"] for t in kept)
        assert by_ns == ["", "sub:1"]
        again = saver.get_tuple(cfg("a"))
        assert again is not None
        assert again.checkpoint == latest_a.checkpoint
        assert again.metadata == latest_a.metadata
        assert again.pending_writes == latest_a.pending_writes
        assert any(w[1] == "__interrupt__" for w in again.pending_writes or [])
        assert len(list(saver.list({"configurable": {"thread_id": "b"}}))) == 62  # untouched
        assert saver.db.verify().ok
        # The ckptdb namespace of "a" holds one checkpoint now (CURRENT, its own fallback).
        assert len(saver.db.lineage(namespace_for("a", ""))) == 1

        saver.prune(["b"], strategy="keep_latest")
        saver.db.close()
        small = file_bytes(path)
        saver.db = ckptdb.open(path)
        assert small < big / 5, (big, small)
        # Resuming still works from a fresh saver in another process.
        proc = subprocess.run(
            [sys.executable, __file__, "read", str(path), "b"],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1] == "59 1"

        saver.prune(["a", "b"], strategy="delete")
        assert list(saver.list(None)) == []
        assert not [n for n in saver.db.namespaces() if n.name.startswith("langgraph")]
        with saver.db.read_session() as s:
            assert s.scalar("SELECT count(*) FROM lg_write") == 0
            assert s.scalar("SELECT count(*) FROM lg_namespace") == 0


def test_delete_for_runs_deletes_their_checkpoints_in_ckptdb_too(location: str) -> None:
    with CkptdbSaver(location) as saver:
        config = cfg("t")
        for run in ("r1", "r2", "r3"):
            for step in range(3):
                values = {"v": f"{run}-{step}" + "z" * 5000}
                config = saver.put(config, make_checkpoint(values), {"run_id": run}, {"v": 1})
        before = saver.db.stats()
        saver.delete_for_runs(["r2", "r3"])  # r3 holds the newest: CURRENT must move back
        runs = [t.metadata["run_id"] for t in saver.list(cfg("t"))]
        assert runs == ["r1", "r1", "r1"]
        after = saver.db.stats()
        assert after.checkpoints == 3 and after.stored_bytes < before.stored_bytes / 2
        latest = saver.get_tuple(cfg("t"))
        assert latest is not None and latest.checkpoint["channel_values"]["v"].startswith("r1-2")
        # Putting on after the delete continues from the remaining newest checkpoint.
        saver.put(latest.config, make_checkpoint({"v": "next"}), {"run_id": "r4"}, {"v": 2})
        assert saver.db.verify().ok
        saver.delete_for_runs(["r1", "r4"])
        assert list(saver.list(cfg("t"))) == []
        assert saver.db.stats().checkpoints == 0


# -- names, serializers and other edges --------------------------------------------------


@pytest.mark.parametrize(
    "thread",
    ["plain", "with/slash", "a%2Fb", " spaced ", "ünïcode", "e\u0301", "", "t" * 400, "x|y:z"],
)
def test_any_thread_id_and_namespace_round_trip(location: str, thread: str) -> None:
    with CkptdbSaver(location) as saver:
        for ns in ("", "child:1|grand:2", "/"):
            saver.put(cfg(thread, ns), make_checkpoint({"k": thread + ns}), {}, {})
        for ns in ("", "child:1|grand:2", "/"):
            tup = saver.get_tuple(cfg(thread, ns))
            assert tup is not None
            assert tup.checkpoint["channel_values"] == {"k": thread + ns}
            assert tup.config["configurable"]["thread_id"] == thread
        assert len(list(saver.list({"configurable": {"thread_id": thread}}))) == 3
    names = {namespace_for(t, n) for t in ("a/b", "a") for n in ("", "b")}
    assert len(names) == 4  # injective even when the parts contain the separator
    assert all(len(namespace_for(t, "")) <= 256 for t in ("t" * 400, "é" * 300))


def test_pickle_is_refused_everywhere(tmp_path: Path) -> None:
    with pytest.raises(PickleRefusedError):
        CkptdbSaver(tmp_path / "p.ckpt", serde=JsonPlusSerializer(pickle_fallback=True))

    class Custom:
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return "pickle", b""

        def loads_typed(self, data: tuple[str, bytes]) -> Any:
            return None

    with pytest.raises(ckptdb.InvalidInputError):
        CkptdbSaver(tmp_path / "p.ckpt", serde=Custom())  # type: ignore[arg-type]
    with (
        CkptdbSaver(tmp_path / "p.ckpt") as saver,
        pytest.raises(ckptdb.CkptdbError),
        saver.db.write_session() as s,
    ):
        s.execute(
            "INSERT INTO lg_write (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,"
            " channel, type, value) VALUES ('t', '', 'c', 'x', 0, 'ch', 'pickle', x'80')"
        )


def test_an_open_database_is_shared_not_closed_and_checked_on_read_only(tmp_path: Path) -> None:
    path = tmp_path / "shared-handle.ckpt"
    db = ckptdb.open(path)
    with CkptdbSaver(db) as saver:
        saver.put(cfg("t"), make_checkpoint({"a": 1}), {}, {})
    assert db.namespaces()  # still open: the saver did not own it
    db.close()
    with CkptdbSaver(ckptdb.open(path, readonly=True)) as ro:
        assert ro.get_tuple(cfg("t")) is not None
        with pytest.raises(ckptdb.errors.ReadOnlyError):
            ro.put(cfg("t"), make_checkpoint({"a": 2}), {}, {})
    fresh = ckptdb.open(tmp_path / "no-tables.ckpt")
    fresh.close()
    with pytest.raises(ckptdb.errors.MigrationPendingError):
        CkptdbSaver(ckptdb.open(tmp_path / "no-tables.ckpt", readonly=True))
    with pytest.raises(ckptdb.InvalidInputError):
        CkptdbSaver(42)  # type: ignore[arg-type]


def test_the_checkpoints_are_ordinary_ckptdb_checkpoints(location: str) -> None:
    with CkptdbSaver(location) as saver:
        first = saver.put(cfg("t"), make_checkpoint({"big": "b" * 1000}), {"step": 1}, {})
        saver.put(first, make_checkpoint({"big": "c" * 1000}), {"step": 2, "run_id": "r"}, {})
        head = saver.db.current(namespace_for("t", ""))
        assert head is not None
        assert sorted(head.entries) == ["channels/big", "checkpoint"]
        assert head.metadata["lg_thread_id"] == "t" and head.metadata["lg_run_id"] == "r"
        assert head.metadata["langgraph"]["step"] == 2
        lineage = saver.db.lineage(namespace_for("t", ""))
        assert [c.metadata["lg_checkpoint_id"] for c in lineage] == [
            t.checkpoint["id"] for t in saver.list(cfg("t"))
        ]
        assert saver.db.verify().ok


def test_a_checkpoint_collected_outside_the_saver_reads_as_gone(location: str) -> None:
    with CkptdbSaver(location) as saver:
        config = cfg("t")
        for i in range(3):
            config = saver.put(config, make_checkpoint({"i": i}), {"step": i}, {})
        saver.db.gc(ckptdb.RetentionPolicy(keep_last=1), namespaces=[namespace_for("t", "")])
        # ckptdb kept CURRENT and its fallback; the oldest is gone from LangGraph's view too.
        assert [t.metadata["step"] for t in saver.list(cfg("t"))] == [2, 1]
        assert saver.get_tuple(cfg("t")) is not None
        saver.put(config, make_checkpoint({"i": 3}), {"step": 3}, {})
        assert saver.get_tuple(cfg("t")) is not None


def _read(path: str, thread: str) -> None:
    with CkptdbSaver(path) as saver:
        tup = saver.get_tuple(cfg(thread))
        assert tup is not None
        interrupts = [w for w in tup.pending_writes or [] if w[1] == "__interrupt__"]
        print(tup.checkpoint["channel_values"]["small"], len(interrupts))


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        _worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "read":
        _read(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "writer":
        _writer(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "pruner":
        _pruner(sys.argv[2], sys.argv[3])


def test_unchanged_channels_are_referenced_and_a_collected_blob_is_sent_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "reuse.ckpt"
    big = "v" * 5000
    with CkptdbSaver(path) as saver:
        config = saver.put(cfg("t"), make_checkpoint({"big": big, "n": 1}), {}, {"big": 1})
        before = saver.db.stats().stored_bytes
        config = saver.put(config, make_checkpoint({"big": big, "n": 2}), {}, {})
        assert saver.db.stats().stored_bytes - before < 1000  # the 5 KB value was referenced
        # Another handle drops the thread's namespace: the blob the saver would reference
        # is collected; the next put must notice and send the bytes again.
        with ckptdb.open(path) as other:
            other.drop_namespace(namespace_for("t", ""), force=True)
        again = saver.put(cfg("t"), make_checkpoint({"big": big, "n": 3}), {}, {})
        got = saver.get_tuple(again)
        assert got is not None and got.checkpoint["channel_values"]["big"] == big
        assert saver.db.verify().ok


def test_a_value_changed_in_place_is_stored_whether_or_not_its_bytes_are_cached(
    tmp_path: Path,
) -> None:
    """The unchanged-channel shortcut compares the new bytes with the cached ones (no
    hashing) or, when they are not cached, hashes them: a value of the same size that
    changed without a version bump is stored, never referenced."""
    with CkptdbSaver(tmp_path / "same.ckpt") as saver:
        a, b = "a" * 3000, "b" * 3000
        config = saver.put(cfg("t"), make_checkpoint({"big": a}), {}, {"big": 1})
        config = saver.put(config, make_checkpoint({"big": b}), {}, {})  # no version bump
        got = saver.get_tuple(config)
        assert got is not None and got.checkpoint["channel_values"]["big"] == b
        saver._cache.clear()  # the next comparison must hash
        config = saver.put(config, make_checkpoint({"big": a}), {}, {})
        saver._cache.clear()
        got = saver.get_tuple(config)
        assert got is not None and got.checkpoint["channel_values"]["big"] == a
        before = saver.db.stats().stored_bytes
        config = saver.put(config, make_checkpoint({"big": a, "n": 1}), {}, {})  # unchanged
        assert saver.db.stats().stored_bytes - before < 1000
        assert saver.db.verify().ok


# -- damaged rows of the saver's own tables ----------------------------------------------


def _saver_columns() -> list[tuple[str, str, str]]:
    """(table, column, declared type) of the saver's tables, rowid aliases excepted."""
    import apsw

    from ckptdb.integrations.langgraph import saver as saver_module

    conn = apsw.Connection(":memory:")
    migrations = Path(saver_module.__file__).parent / "migrations"
    for sql in sorted(migrations.glob("*.sql")):
        conn.execute(sql.read_text())
    columns = []
    for (table,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'"):
        info = list(conn.execute(f"PRAGMA table_info({table})"))
        keys = [r for r in info if r[5]]
        for r in info:
            if not (keys == [r] and r[2] == "INTEGER"):
                columns.append((str(table), str(r[1]), str(r[2]).lower()))
    return columns


SAVER_COLUMNS = _saver_columns()


@pytest.mark.parametrize(
    ("table", "column", "declared"), SAVER_COLUMNS, ids=[f"{t}.{c}" for t, c, _ in SAVER_COLUMNS]
)
def test_a_damaged_saver_row_is_a_typed_error(
    tmp_path: Path, table: str, column: str, declared: str
) -> None:
    """A value of the wrong type in any column of the saver's tables (a flipped serial-type
    byte) makes every saver call return or raise a CkptdbError, never crash."""
    pristine = tmp_path / "pristine.ckpt"
    with CkptdbSaver(pristine) as saver:
        config = cfg("t1")
        for i in range(3):
            cp = make_checkpoint({"a": i, "b": "x"}, {"a": i + 1, "b": 1})
            config = saver.put(
                config, cp, {"source": "loop", "step": i, "run_id": "r1"}, {"a": i + 1}
            )
            saver.put_writes(config, [("a", i), ("__interrupt__", "q")], task_id=f"task{i}")
        if table == "lg_meta":  # empty once writes are sealed: give the sweep a row
            with saver.db.write_session() as s:
                s.execute("INSERT INTO lg_meta (key, value) VALUES ('unsealed_writes', 'pending')")
    damaged = 0
    for kind, value in {"integer": 12345, "real": 1.5, "text": "x", "blob": b"\x07"}.items():
        if kind == declared:
            continue
        path = tmp_path / f"{kind}.ckpt"
        shutil.copy(pristine, path)
        if not store_wrong_types(path, table, {column: value}):
            continue
        damaged += 1
        untyped = []
        with CkptdbSaver(path) as saver:
            calls: dict[str, Callable[[], object]] = {
                "get_tuple": lambda: saver.get_tuple(cfg("t1")),
                "list": lambda: list(saver.list(cfg("t1"))),
                "list(filter)": lambda: list(saver.list(None, filter={"source": "loop"})),
                "copy_thread": lambda: saver.copy_thread("t1", "t2"),
                "prune": lambda: saver.prune(["t1"], strategy="keep_latest"),
                "delete_for_runs": lambda: saver.delete_for_runs(["r1"]),
                "delete_thread": lambda: saver.delete_thread("t1"),
            }
            for name, call in calls.items():
                try:
                    call()
                except ckptdb.CkptdbError:
                    pass
                except Exception as exc:  # the finding this test exists for
                    untyped.append(f"{name}: {type(exc).__name__}: {exc}")
        assert not untyped, f"{table}.{column} = {value!r}: {untyped}"
    assert damaged, "the sweep must damage something"
