"""Threads that expire (issue 26): a per-thread TTL for CkptdbSaver and AsyncCkptdbSaver.

Real files, real threads, ckptdb's injectable clock: every put and pending write (and, when
asked, every read) records when its thread was last active, at most once per refresh
interval; a sweep -- on demand, by the saver's background sweeper, or by ``ckptdb
langgraph expire`` -- deletes the threads idle longer than the TTL or prunes them to their
newest checkpoint, keeps what is pinned, treats a ``copy_thread`` fork as a thread of its
own and gives the space back.

``tests/fixtures/langgraph-v3.ckpt`` was written by the saver at langgraph schema version 3
(core version 6), before migration 0004 existed, by :func:`_fixture_script` below; it must
never change.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import store_wrong_types
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

import ckptdb
from ckptdb.cli import main
from ckptdb.integrations.langgraph import (
    AsyncCkptdbSaver,
    CkptdbSaver,
    ThreadTTL,
    TTLSweepReport,
)

FIXTURE = Path(__file__).parent / "fixtures" / "langgraph-v3.ckpt"
FIXTURE_SHA256 = "66d7cf5f68f042f5fdf83dd9690b607e2062c1eab6dc47c3a71d6ac41f9c71b8"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "langgraph.md"
MINUTE_MS = 60_000
#: A big channel value: stored as a blob of its own (over the saver's inline_max).
BIG = 2_000


def _fixture_script(out: Path) -> None:
    """How the fixture was made (kept for the record; not run by the tests)."""
    with ckptdb.open(out) as db:
        saver = CkptdbSaver(db)
        for t, thread in enumerate(("alpha", "beta")):
            config = cfg(thread)
            for i in range(3):
                cp = empty_checkpoint()
                cp["id"] = f"1ef0{t}00{i}-0000-6000-8000-000000000000"
                cp["channel_values"] = {"msg": f"{thread} {i}", "big": "x" * 400 + str(i)}
                cp["channel_versions"] = {"msg": str(i + 1), "big": str(i + 1)}
                config = saver.put(config, cp, {"step": i}, {"msg": str(i + 1)})
                saver.put_writes(config, [("msg", f"pending {i}")], f"task-{i}")
        sub = cfg("alpha", "child:1")
        cp = empty_checkpoint()
        cp["id"] = "1ef00100-0000-6000-8000-000000000000"
        cp["channel_values"] = {"a": 1}
        saver.put(sub, cp, {"step": 0}, {})
        saver.copy_thread("alpha", "alpha-fork")
        db.pin("langgraph/beta", "keep-beta")


class Clock:
    """ckptdb's injectable clock (epoch milliseconds), moved by the test."""

    def __init__(self, start_ms: int | None = None) -> None:
        self.ms = int(time.time() * 1000) if start_ms is None else start_ms

    def __call__(self) -> int:
        return self.ms

    def advance(self, **delta: float) -> None:
        self.ms += int(timedelta(**delta) / timedelta(milliseconds=1))


def cfg(thread: str, ns: str = "", checkpoint_id: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def checkpoint(step: int, tag: str) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=step))
    cp["channel_values"] = {"step": step, "big": f"{tag}:{step}:" + "v" * BIG}
    cp["channel_versions"] = {"step": step + 1, "big": step + 1}
    return cp


def grow(saver: CkptdbSaver, thread: str, steps: int, ns: str = "") -> Any:
    """``steps`` checkpoints on the thread, each with one pending write; the last config."""
    config = cfg(thread, ns)
    for step in range(steps):
        config = saver.put(config, checkpoint(step, thread + ns), {"step": step}, {})
        saver.put_writes(config, [("step", f"pending {step}")], f"task-{step}")
    return config


def touched(db: ckptdb.Database) -> dict[str, int]:
    with db.read_session() as s:
        return {
            str(t): int(at) for t, at in s.execute("SELECT thread_id, touched_at_ms FROM lg_thread")
        }


def lg_count(saver: CkptdbSaver, thread: str) -> int:
    return len(list(saver.list(cfg(thread))))


@contextmanager
def opened(
    path: Path | str, ttl: ThreadTTL | None, clock: Clock, **options: Any
) -> Iterator[tuple[ckptdb.Database, CkptdbSaver]]:
    db = ckptdb.open(path, clock=clock, **options)
    try:
        with CkptdbSaver(db, ttl=ttl) as saver:
            yield db, saver
    finally:
        db.close()


def on_demand(minutes: float, **options: Any) -> ThreadTTL:
    return ThreadTTL(minutes, sweep_interval=None, **options)


# -- the settings ----------------------------------------------------------------------------


def test_ttl_settings_take_minutes_or_timedeltas_and_refuse_nonsense() -> None:
    ttl = ThreadTTL(90)
    assert ttl.default_ttl == timedelta(minutes=90)
    assert ttl.strategy == "delete" and ttl.sweep_interval == timedelta(minutes=60)
    assert ttl.refresh_on_read is False and ttl.batch == 100
    assert ThreadTTL(timedelta(days=30), sweep_interval=5).sweep_interval == timedelta(minutes=5)
    assert ThreadTTL(0.5, sweep_interval=None).sweep_interval is None
    # The refresh interval: 1% of the TTL, never under a second.
    assert ThreadTTL(timedelta(days=1)).refresh_ms == 864_000
    assert ThreadTTL(timedelta(seconds=10)).refresh_ms == 1_000
    assert ThreadTTL(30) == ThreadTTL(timedelta(minutes=30))
    for bad in (
        {"default_ttl": 0},
        {"default_ttl": -1},
        {"default_ttl": float("nan")},
        {"default_ttl": "30d"},
        {"default_ttl": True},
        {"default_ttl": 1, "strategy": "drop"},
        {"default_ttl": 1, "sweep_interval": 0},
        {"default_ttl": 1, "batch": 0},
        {"default_ttl": 1, "refresh_on_read": "yes"},
        {"default_ttl": timedelta(days=365 * 200)},
    ):
        with pytest.raises(ckptdb.InvalidInputError):
            ThreadTTL(**bad)
    with pytest.raises(AttributeError):
        ttl.batch = 5  # type: ignore[misc]


def test_a_saver_refuses_a_ttl_of_the_wrong_type_and_a_sweep_without_one(tmp_path: Path) -> None:
    with pytest.raises(ckptdb.InvalidInputError):
        CkptdbSaver(tmp_path / "x.ckpt", ttl=timedelta(days=1))  # type: ignore[arg-type]
    with (
        CkptdbSaver(tmp_path / "y.ckpt") as saver,
        pytest.raises(ckptdb.InvalidInputError, match="no TTL"),
    ):
        saver.sweep_expired()
    with (
        CkptdbSaver(tmp_path / "z.ckpt", ttl=on_demand(1)) as saver,
        pytest.raises(ckptdb.InvalidInputError),
    ):
        saver.sweep_expired(limit=0)


# -- expiry, refresh, throttle ---------------------------------------------------------------


def test_threads_idle_longer_than_the_ttl_are_deleted_and_their_space_returned(
    location: str,
) -> None:
    clock = Clock()
    path = location
    with opened(path, on_demand(60), clock) as (db, saver):
        for thread in ("old-1", "old-2"):
            grow(saver, thread, 4)
        grow(saver, "old-1", 2, ns="child:1")  # every checkpoint namespace of a thread goes
        clock.advance(minutes=30)
        grow(saver, "young", 3)
        blobs_before = db.stats().blobs
        clock.advance(minutes=30, milliseconds=1)  # old-*: 60 min + 1 ms idle; young: 30 min
        report = saver.sweep_expired()
        assert isinstance(report, TTLSweepReport)
        assert report.threads_expired == ["old-1", "old-2"]  # oldest first
        assert report.threads_kept == [] and report.complete and not report.dry_run
        assert report.checkpoints_deleted == 10 and report.strategy == "delete"
        assert report.idle_before.timestamp() * 1000 == clock.ms - 60 * MINUTE_MS
        for thread in ("old-1", "old-2"):
            assert saver.get_tuple(cfg(thread)) is None and lg_count(saver, thread) == 0
        assert saver.get_tuple(cfg("old-1", "child:1")) is None
        assert lg_count(saver, "young") == 3
        assert set(touched(db)) == {"young"}
        assert {n.name for n in db.namespaces()} == {"langgraph/young"}
        assert db.stats().blobs < blobs_before  # the GC path of delete_thread ran
        assert db.verify().ok
        # Nothing is left to do: a second sweep finds nothing.
        again = saver.sweep_expired()
        assert again.threads_expired == [] and again.checkpoints_deleted == 0


def test_a_put_or_a_pending_write_restarts_the_ttl(location: str) -> None:
    clock = Clock()
    with opened(location, on_demand(10), clock) as (db, saver):
        put_one = grow(saver, "by-put", 1)
        written = grow(saver, "by-write", 1)
        grow(saver, "idle", 1)
        clock.advance(minutes=9)
        saver.put(put_one, checkpoint(1, "by-put"), {"step": 1}, {})
        saver.put_writes(written, [("step", "later")], "task-late")
        clock.advance(minutes=2)  # idle: 11 minutes; the other two: 2
        assert saver.sweep_expired().threads_expired == ["idle"]
        assert touched(db) == {
            "by-put": clock.ms - 2 * MINUTE_MS,
            "by-write": clock.ms - 2 * MINUTE_MS,
        }


def test_a_burst_of_puts_refreshes_a_thread_once_per_refresh_interval(tmp_path: Path) -> None:
    clock = Clock()
    ttl = on_demand(timedelta(hours=1).total_seconds() / 60)  # refresh interval: 36 s
    with opened(tmp_path / "t.ckpt", ttl, clock) as (db, saver):
        first = clock.ms
        config = cfg("busy")
        for step in range(50):  # 50 puts and writes within 25 s: one refresh
            config = saver.put(config, checkpoint(step, "busy"), {"step": step}, {})
            saver.put_writes(config, [("step", step)], f"task-{step}")
            clock.advance(milliseconds=500)
        assert touched(db) == {"busy": first}
        clock.advance(seconds=12)  # 37 s after the first refresh: the next put refreshes
        saver.put(config, checkpoint(50, "busy"), {"step": 50}, {})
        assert touched(db) == {"busy": clock.ms}
    # Another saver (another process) refreshes on its first put, whatever this one did.
    with opened(tmp_path / "t.ckpt", ttl, clock) as (db, saver):
        clock.advance(seconds=1)
        saver.put(config, checkpoint(51, "busy"), {"step": 51}, {})
        assert touched(db) == {"busy": clock.ms}


def test_a_saver_without_a_ttl_records_activity_for_a_ttl_applied_later(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "later.ckpt"
    with opened(path, None, clock) as (db, saver):
        grow(saver, "a", 2)
        clock.advance(hours=2)
        grow(saver, "b", 2)
        assert touched(db) == {"a": clock.ms - 2 * 3600_000, "b": clock.ms}
    clock.advance(minutes=1)
    with opened(path, on_demand(60), clock) as (db, saver):
        assert saver.sweep_expired().threads_expired == ["a"]


def test_reads_refresh_only_when_asked(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "reads.ckpt"
    with opened(path, on_demand(10), clock) as (db, saver):
        grow(saver, "read-me", 2)
        start = clock.ms
        clock.advance(minutes=5)
        assert saver.get_tuple(cfg("read-me")) is not None
        assert len(list(saver.list(cfg("read-me")))) == 2
        assert touched(db) == {"read-me": start}  # reads do not count by default
    with opened(path, on_demand(10, refresh_on_read=True), clock) as (db, saver):
        assert saver.get_tuple(cfg("read-me")) is not None
        assert touched(db) == {"read-me": clock.ms}
        clock.advance(minutes=5)
        assert len(list(saver.list(cfg("read-me"), limit=1))) == 1
        assert touched(db) == {"read-me": clock.ms}
        clock.advance(minutes=1)
        # A thread that does not exist gets no record by being read.
        assert saver.get_tuple(cfg("nobody")) is None and list(saver.list(cfg("nobody"))) == []
        assert list(saver.list(None)) != []  # no thread named: nothing to refresh
        assert set(touched(db)) == {"read-me"}
        clock.advance(minutes=9)  # 10 minutes after the last read, minus one
        assert saver.sweep_expired().threads_expired == []


def test_async_reads_refresh_too(tmp_path: Path) -> None:
    clock = Clock()

    async def scenario() -> None:
        db = ckptdb.open(tmp_path / "ar.ckpt", clock=clock)
        async with AsyncCkptdbSaver(db, ttl=on_demand(10, refresh_on_read=True)) as saver:
            await saver.aput(cfg("t"), checkpoint(0, "t"), {"step": 0}, {})
            clock.advance(minutes=3)
            assert [t async for t in saver.alist(cfg("t"))] != []
            assert touched(db) == {"t": clock.ms}
            clock.advance(minutes=3)
            assert await saver.aget_tuple(cfg("t")) is not None
            assert touched(db) == {"t": clock.ms}
        db.close()

    asyncio.run(scenario())


def test_a_read_only_saver_reads_without_refreshing_and_sweeps_only_dry(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "ro.ckpt"
    with opened(path, None, clock) as (_db, saver):
        grow(saver, "t", 2)
    before = clock.ms
    clock.advance(hours=1)
    ttl = ThreadTTL(30, sweep_interval=1, refresh_on_read=True)
    with opened(path, ttl, clock, readonly=True) as (db, saver):
        assert saver.get_tuple(cfg("t")) is not None
        assert len(list(saver.list(cfg("t")))) == 2
        assert touched(db) == {"t": before}
        assert not [t for t in threading.enumerate() if t.name.startswith("ckptdb-ttl")]
        dry = saver.sweep_expired(dry_run=True)
        assert dry.dry_run and dry.threads_expired == ["t"] and dry.checkpoints_deleted == 2
        with pytest.raises(ckptdb.errors.ReadOnlyError):
            saver.sweep_expired()
    with opened(path, None, clock) as (db, saver):
        assert lg_count(saver, "t") == 2


def test_a_read_whose_refresh_cannot_be_written_still_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    path = tmp_path / "busy.ckpt"
    with opened(path, None, clock) as (_db, saver):
        grow(saver, "t", 1)
    other = ckptdb.open(path)
    try:
        with opened(path, on_demand(30, refresh_on_read=True), clock, busy_timeout=0.05) as (
            db,
            saver,
        ):
            clock.advance(minutes=5)
            with other.write_session(), caplog.at_level(logging.WARNING):
                found = saver.get_tuple(cfg("t"))  # the write lock is held elsewhere
            assert found is not None and found.checkpoint["channel_values"]["step"] == 0
            assert "did not refresh its TTL" in caplog.text
            assert touched(db) == {"t": clock.ms - 5 * MINUTE_MS}
            assert saver.get_tuple(cfg("t")) is not None  # not remembered as done: retried
            assert touched(db) == {"t": clock.ms}
    finally:
        other.close()


# -- strategies, pins, forks -----------------------------------------------------------------


def test_keep_latest_prunes_once_and_again_only_after_new_activity(location: str) -> None:
    clock = Clock()
    with opened(location, on_demand(10, strategy="keep_latest"), clock) as (
        db,
        saver,
    ):
        last = grow(saver, "long", 6)
        grow(saver, "short", 1)
        clock.advance(minutes=11)
        report = saver.sweep_expired()
        assert report.strategy == "keep_latest"
        assert report.threads_expired == ["long", "short"] and report.checkpoints_deleted == 5
        latest = saver.get_tuple(cfg("long"))
        assert (
            latest is not None
            and latest.config["configurable"]["checkpoint_id"]
            == (last["configurable"]["checkpoint_id"])
        )
        assert [w[2] for w in latest.pending_writes or []] == ["pending 5"]  # its writes stay
        assert lg_count(saver, "long") == 1 and lg_count(saver, "short") == 1
        assert touched(db) == {}  # not refreshed by the sweep, and not swept again ...
        clock.advance(days=30)
        assert saver.sweep_expired().threads_expired == []
        # ... until the thread is used again.
        saver.put(last, checkpoint(6, "long"), {"step": 6}, {})
        clock.advance(minutes=11)
        again = saver.sweep_expired()
        assert again.threads_expired == ["long"] and again.checkpoints_deleted == 1
        assert lg_count(saver, "long") == 1
        assert db.verify().ok


def test_pinned_checkpoints_stay_and_their_thread_is_reported_kept(location: str) -> None:
    clock = Clock()
    with opened(location, on_demand(10), clock) as (db, saver):
        grow(saver, "pinned", 3)
        grow(saver, "plain", 3)
        db.pin("langgraph/pinned~1", "evidence")
        clock.advance(minutes=11)
        dry = saver.sweep_expired(dry_run=True)
        assert dry.threads_expired == ["plain"]
        assert [(k.thread_id, k.reason) for k in dry.threads_kept] == [("pinned", "pinned")]
        assert {n.name for n in db.namespaces()} == {"langgraph/pinned", "langgraph/plain"}
        report = saver.sweep_expired()
        assert report.threads_expired == ["plain"]
        assert [(k.thread_id, k.reason) for k in report.threads_kept] == [("pinned", "pinned")]
        assert "evidence" in report.threads_kept[0].detail
        # The pinned checkpoint keeps its namespace (delete_thread's rule); LangGraph no
        # longer lists the thread, and the sweep does not meet it again.
        assert {n.name for n in db.namespaces()} == {"langgraph/pinned"}
        assert db.get(db.pins()[0].checkpoint_id).metadata["lg_thread_id"] == "pinned"
        assert lg_count(saver, "pinned") == 0
        assert saver.sweep_expired().threads_kept == []
    with opened(location, on_demand(10, strategy="keep_latest"), clock) as (
        db,
        saver,
    ):
        grow(saver, "second", 3)
        db.pin("langgraph/second~2", "first")
        clock.advance(minutes=11)
        report = saver.sweep_expired()
        assert [(k.thread_id, k.reason) for k in report.threads_kept] == [("second", "pinned")]
        assert report.checkpoints_deleted == 2 and lg_count(saver, "second") == 1
        usage = {u.namespace: u.checkpoints for u in db.stats().usage}
        assert usage["langgraph/second"] == 2  # the newest and the pinned first
        first = next(p for p in db.pins() if p.name == "first")
        assert db.get(first.checkpoint_id).metadata["langgraph"]["step"] == 0


def test_a_fork_has_its_own_ttl_and_keeps_its_data_after_the_original_expires(
    location: str,
) -> None:
    clock = Clock()
    with opened(location, on_demand(10), clock) as (db, saver):
        grow(saver, "original", 4)
        expected = [
            (t.checkpoint["id"], t.checkpoint["channel_values"])
            for t in saver.list(cfg("original"))
        ]
        clock.advance(minutes=8)
        saver.copy_thread("original", "fork")
        assert touched(db)["fork"] == clock.ms
        clock.advance(minutes=3)  # original: 11 minutes idle; the fork: 3
        assert saver.sweep_expired().threads_expired == ["original"]
        forked = [
            (t.checkpoint["id"], t.checkpoint["channel_values"]) for t in saver.list(cfg("fork"))
        ]
        assert forked == expected  # every checkpoint, its values read from the shared blobs
        assert db.verify().ok
        clock.advance(minutes=8)
        assert saver.sweep_expired().threads_expired == ["fork"]
        assert db.stats().blobs == 0 and db.namespaces() == []


def test_batches_and_limit_sweep_oldest_first(location: str) -> None:
    clock = Clock()
    with opened(location, on_demand(10, batch=2), clock) as (db, saver):
        for n in range(5):
            grow(saver, f"t{n}", 1)
            clock.advance(seconds=2)
        clock.advance(minutes=10)
        first = saver.sweep_expired(limit=3)
        assert first.threads_expired == ["t0", "t1", "t2"] and not first.complete
        rest = saver.sweep_expired()
        assert rest.threads_expired == ["t3", "t4"] and rest.complete
        assert touched(db) == {}


def test_puts_interleave_with_a_sweep(location: str) -> None:
    clock = Clock()
    with opened(location, on_demand(10, batch=5), clock) as (_db, saver):
        for n in range(60):
            grow(saver, f"old-{n}", 3)
        clock.advance(minutes=11)
        done: list[float] = []
        window: list[float] = []

        def sweep() -> None:
            window.append(time.perf_counter())
            saver.sweep_expired()
            window.append(time.perf_counter())

        sweeper = threading.Thread(target=sweep)
        config = cfg("live")
        sweeper.start()
        step = 0
        while sweeper.is_alive():
            config = saver.put(config, checkpoint(step, "live"), {"step": step}, {})
            done.append(time.perf_counter())
            step += 1
        sweeper.join()
        during = [t for t in done if window[0] < t < window[1]]
        assert len(during) >= 5, (len(done), window)  # the sweep never shut the puts out
        assert lg_count(saver, "live") == step


# -- the background sweeper ------------------------------------------------------------------


def _sweepers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("ckptdb-ttl")]


def _wait_for(condition: Any, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_the_background_sweeper_sweeps_and_stops_on_close(location: str) -> None:
    clock = Clock()
    ttl = ThreadTTL(10, sweep_interval=timedelta(milliseconds=50))
    db = ckptdb.open(location, clock=clock)
    try:
        saver = CkptdbSaver(db, ttl=ttl)
        assert len(_sweepers()) == 1
        grow(saver, "soon-gone", 2)
        grow(saver, "stays", 1)
        time.sleep(0.2)
        assert lg_count(saver, "soon-gone") == 2  # not expired yet: swept, nothing to do
        clock.advance(minutes=9)
        grow(saver, "stays", 1)
        clock.advance(minutes=2)
        assert _wait_for(lambda: lg_count(saver, "soon-gone") == 0)
        assert lg_count(saver, "stays") == 2
        saver.close()
        assert _sweepers() == []  # joined
        assert db.stats().checkpoints == 2  # the handle the saver was given stays open
    finally:
        db.close()


def test_the_background_sweeper_survives_an_error_and_logs_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fail = threading.Event()
    clock = Clock()

    def flaky() -> int:
        if fail.is_set():
            fail.clear()
            raise OSError("the clock failed once")
        return clock()

    db = ckptdb.open(tmp_path / "err.ckpt", clock=flaky)
    try:
        with CkptdbSaver(db, ttl=ThreadTTL(10, sweep_interval=timedelta(milliseconds=50))) as saver:
            grow(saver, "t", 1)
            with caplog.at_level(logging.ERROR):
                fail.set()
                assert _wait_for(lambda: not fail.is_set())  # the sweep hit the error ...
                clock.advance(minutes=11)
                assert _wait_for(lambda: lg_count(saver, "t") == 0)  # ... and went on
            assert "TTL sweep of" in caplog.text and "the clock failed once" in caplog.text
        assert _sweepers() == []
    finally:
        db.close()


def test_the_async_saver_runs_the_same_sweeper(tmp_path: Path) -> None:
    clock = Clock()
    db = ckptdb.open(tmp_path / "async.ckpt", clock=clock)

    async def scenario() -> None:
        saver = await AsyncCkptdbSaver.open(
            db, ttl=ThreadTTL(10, sweep_interval=timedelta(milliseconds=50))
        )
        async with saver:
            await saver.aput(cfg("gone"), checkpoint(0, "gone"), {"step": 0}, {})
            config = await saver.aput(cfg("kept"), checkpoint(0, "kept"), {"step": 0}, {})
            assert len(_sweepers()) == 1
            clock.advance(minutes=9)
            await saver.aput_writes(config, [("step", 1)], "task")
            clock.advance(minutes=2)
            dry = await saver.asweep_expired(dry_run=True)
            assert dry.threads_expired in (["gone"], [])  # the sweeper may have been first
            for _ in range(1000):
                if await saver.aget_tuple(cfg("gone")) is None:
                    break
                await asyncio.sleep(0.02)
            assert await saver.aget_tuple(cfg("gone")) is None
            assert await saver.aget_tuple(cfg("kept")) is not None
        assert _sweepers() == []

    try:
        asyncio.run(scenario())
    finally:
        db.close()


@pytest.mark.parametrize(
    ("column", "value"),
    [("thread_id", 7), ("thread_id", b"t"), ("touched_at_ms", "soon"), ("touched_at_ms", 1.5)],
)
def test_a_damaged_activity_row_is_a_typed_error(
    tmp_path: Path, column: str, value: object
) -> None:
    clock = Clock()
    path = tmp_path / "dmg.ckpt"
    with opened(path, None, clock) as (_db, saver):
        grow(saver, "t", 2)
    assert store_wrong_types(path, "lg_thread", {column: value}) == 1
    clock.advance(days=2)
    ttl = on_demand(60, refresh_on_read=True)
    with opened(path, ttl, clock) as (_db, saver):
        calls = {
            "sweep_expired": saver.sweep_expired,
            "dry run": lambda: saver.sweep_expired(dry_run=True),
            "get_tuple": lambda: saver.get_tuple(cfg("t")),
            "put": lambda: saver.put(cfg("t"), checkpoint(9, "t"), {"step": 9}, {}),
            "delete_thread": lambda: saver.delete_thread("t"),
        }
        for name, call in calls.items():
            try:
                call()
            except ckptdb.CkptdbError:
                pass
            except Exception as exc:  # the finding this test exists for
                pytest.fail(f"{name}: {type(exc).__name__}: {exc}")


# -- the migration and the docs --------------------------------------------------------------


def _fixture_copy(tmp_path: Path) -> Path:
    assert hashlib.sha256(FIXTURE.read_bytes()).hexdigest() == FIXTURE_SHA256
    path = tmp_path / "v3.ckpt"
    shutil.copyfile(FIXTURE, path)
    return path


def test_a_file_written_before_the_ttl_migrates_with_every_thread_stamped_now(
    tmp_path: Path,
) -> None:
    path = _fixture_copy(tmp_path)
    clock = Clock()
    began = int(time.time() * 1000)
    with opened(path, on_demand(10), clock) as (db, saver):
        ended = int(time.time() * 1000)
        stamped = touched(db)
        assert set(stamped) == {"alpha", "beta", "alpha-fork"}
        assert all(began - 5 <= at <= ended + 5 for at in stamped.values())  # migration time
        assert db.migration_status().sets["langgraph"] == 4
        assert lg_count(saver, "alpha") == 3 and lg_count(saver, "beta") == 3
        assert saver.get_tuple(cfg("alpha", "child:1")) is not None
        assert db.verify().ok and db.schema_problems == []
        clock.advance(minutes=9)
        saver.put_writes(
            cfg("alpha", checkpoint_id="1ef00002-0000-6000-8000-000000000000"),
            [("msg", "again")],
            "task-new",
        )
        clock.advance(minutes=2)
        report = saver.sweep_expired()
        assert report.threads_expired == ["alpha-fork"]
        assert [(k.thread_id, k.reason) for k in report.threads_kept] == [("beta", "pinned")]
        assert lg_count(saver, "alpha") == 3
    # The file opens in Python's own sqlite3 (the system's older SQLite) and the table reads.
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        assert conn.execute("SELECT thread_id FROM lg_thread").fetchall() == [("alpha",)]


def test_the_migration_runs_on_the_oldest_sqlite_operators_use(tmp_path: Path) -> None:
    """Migration 0004 as the system's sqlite3 (3.37-3.40 on current distributions) runs it."""
    path = _fixture_copy(tmp_path)
    sql = (
        files("ckptdb.integrations.langgraph") / "migrations" / "0004_thread_ttl.sql"
    ).read_text()
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(sql)
        rows = conn.execute("SELECT thread_id FROM lg_thread ORDER BY thread_id").fetchall()
        assert rows == [("alpha",), ("alpha-fork",), ("beta",)]
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT thread_id FROM lg_thread WHERE touched_at_ms < 5"
            " ORDER BY touched_at_ms, thread_id"
        ).fetchall()
        assert "lg_thread_by_touched" in str(plan)


def test_docs_name_every_table_of_the_langgraph_set(tmp_path: Path) -> None:
    CkptdbSaver(tmp_path / "d.ckpt").close()
    with closing(sqlite3.connect(f"file:{tmp_path / 'd.ckpt'}?mode=ro", uri=True)) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'lg\\_%'"
                " ESCAPE '\\'"
            )
        ]
    text = DOCS.read_text()
    assert "lg_thread" in tables
    assert [t for t in tables if f"`{t}`" not in text] == []
    assert "## Threads that expire" in text


# -- the command line ------------------------------------------------------------------------


def test_cli_expire_with_json_and_dry_run(tmp_path: Path) -> None:
    path = tmp_path / "cli.ckpt"
    two_days_ago = Clock(int(time.time() * 1000) - 2 * 86_400_000)
    with opened(path, None, two_days_ago) as (_db, saver):
        grow(saver, "stale", 3)
        grow(saver, "kept-by-pin", 2)
        _db.pin("langgraph/kept-by-pin", "keep")
    with opened(path, None, Clock()) as (_db, saver):
        grow(saver, "fresh", 1)
    runner = CliRunner()
    dry = runner.invoke(
        main, ["langgraph", "expire", str(path), "--ttl", "1d", "--dry-run", "--json"]
    )
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert plan["dry_run"] and plan["threads_expired"] == ["stale"]
    assert plan["checkpoints_deleted"] == 5
    assert plan["threads_kept"][0]["thread_id"] == "kept-by-pin"
    done = runner.invoke(main, ["langgraph", "expire", str(path), "--ttl", "1d", "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["threads_expired"] == ["stale"] and report["complete"] is True
    assert report["strategy"] == "delete"
    text = runner.invoke(main, ["langgraph", "expire", str(path), "--ttl", "1d"])
    assert text.exit_code == 0 and text.stdout.startswith("expired 0 threads")
    with CkptdbSaver(path) as saver:
        assert lg_count(saver, "stale") == 0 and lg_count(saver, "fresh") == 1
    bad = runner.invoke(main, ["langgraph", "expire", str(path), "--ttl", "soon", "--json"])
    assert bad.exit_code == 7 and json.loads(bad.stdout)["code"] == "invalid_input"
    plain = tmp_path / "plain.ckpt"
    with ckptdb.open(plain) as db:
        db.commit("ns", {"a": b"1"})
    refused = runner.invoke(main, ["langgraph", "expire", str(plain), "--ttl", "1d"])
    assert refused.exit_code == 3 and "no LangGraph threads" in refused.stderr
    with ckptdb.open(plain) as db:
        assert "langgraph" not in db.migration_status().sets  # left as it was


def test_cli_expire_never_prints_raw_control_characters(tmp_path: Path) -> None:
    path = tmp_path / "hostile.ckpt"
    evil = "t\x1b]52;c;SGVsbG8=\x07\x1b[2J\x9b31m\r\u202e"
    old = Clock(int(time.time() * 1000) - 2 * 86_400_000)
    with opened(path, None, old) as (db, saver):
        grow(saver, evil, 2)
        grow(saver, evil + "-pinned", 2)
        (pinned,) = [n.name for n in db.namespaces() if n.name.endswith("-pinned")]
        db.pin(pinned, "evidence")
    runner = CliRunner()
    text = runner.invoke(main, ["langgraph", "expire", str(path), "--ttl", "1d"], color=True)
    assert text.exit_code == 0, text.output
    assert "\x1b" not in text.stdout and "\x07" not in text.stdout and "\\x1b" in text.stdout
    assert "kept" in text.stdout
