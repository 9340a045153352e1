"""A file written by the saver at ``langgraph`` schema version 4 on core schema version 7
(storage format 3, ckptdb 0.8.2) stays readable, whole, by every later version.

``tests/fixtures/langgraph-v4.ckpt`` was made by :func:`_fixture_script` below before any
migration after those versions existed; it must never change (its digest is pinned). It
holds what a later migration of the saver's tables has to carry over: threads with several
checkpoints and a parent chain, a channel stored as a blob of its own, pending writes (a
special channel among them), run ids, a subgraph namespace, a ``copy_thread`` fork, a pin,
and a thread sealed in a key scope. Every test works on a copy.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import INTERRUPT, empty_checkpoint

import ckptdb
from ckptdb import errors
from ckptdb.integrations.langgraph import CkptdbSaver

FIXTURE = Path(__file__).parent / "fixtures" / "langgraph-v4.ckpt"
FIXTURE_SHA256 = "0e2d2d0ae354a2622353c3a4a4e5901523a9298d0c23179a4fe51b0482ac6704"
#: The key of the sealed thread's scope (a test key, nothing else uses it).
KEYS = {"lg": bytes(range(100, 132))}
#: The thread sealed in the scope of key "lg".
SECRET = "secret"
#: A channel value over the saver's inline_max: stored as a blob of its own.
BIG = 3_000


def cfg(thread: str, ns: str = "", checkpoint_id: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _encryption(config: Any) -> str | None:
    return "lg" if config["configurable"]["thread_id"] == SECRET else None


def _id(thread: int, step: int) -> str:
    return f"1ef0{thread}00{step}-0000-6000-8000-000000000000"


#: (thread, number of checkpoints, run id) of the root-namespace threads, in write order.
THREADS = (("alpha", 3, "run-a"), ("beta", 2, "run-b"), (SECRET, 2, "run-s"))


def _values(thread: str, step: int) -> dict[str, Any]:
    return {"msg": f"{thread} {step}", "big": thread[0] * BIG + str(step), "n": step}


def _fixture_script(out: Path) -> None:
    """How the fixture was made (kept for the record; not run by the tests)."""
    with ckptdb.open(out, keys=KEYS) as db:
        saver = CkptdbSaver(db, encryption=_encryption)
        for t, (thread, steps, run) in enumerate(THREADS):
            config = cfg(thread)
            for step in range(steps):
                cp = empty_checkpoint()
                cp["id"] = _id(t, step)
                cp["ts"] = f"2026-12-06T00:00:0{step}+00:00"
                cp["channel_values"] = _values(thread, step)
                cp["channel_versions"] = {"msg": str(step + 1), "big": str(step + 1), "n": "1"}
                metadata: Any = {"step": step, "source": "loop", "run_id": run}
                config = saver.put(config, cp, metadata, {"msg": str(step + 1)})
                saver.put_writes(config, [("msg", f"pending {thread} {step}")], f"task-{step}")
            saver.put_writes(config, [(INTERRUPT, {"ask": thread})], "task-interrupt")
        sub = empty_checkpoint()
        sub["id"] = "1ef00900-0000-6000-8000-000000000000"
        sub["ts"] = "2026-12-06T00:00:09+00:00"
        sub["channel_values"] = {"child": "inside"}
        saver.put(cfg("alpha", "child:1"), sub, {"step": 0, "source": "loop"}, {})
        saver.copy_thread("alpha", "alpha-fork")
        db.pin("langgraph/beta", "keep-beta")


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    path = tmp_path / "v4.ckpt"
    shutil.copy(FIXTURE, path)
    return path


def test_the_fixture_never_changes() -> None:
    assert hashlib.sha256(FIXTURE.read_bytes()).hexdigest() == FIXTURE_SHA256


def _expect_thread(
    saver: CkptdbSaver, thread: str, t: int, steps: int, run: str, origin: str | None = None
) -> None:
    """``thread`` holds what the script wrote to ``origin`` (itself, or what it was
    copied from), newest first, with its parents, run ids and pending writes."""
    origin = origin or thread
    history = list(saver.list(cfg(thread)))
    assert [h.config["configurable"]["checkpoint_id"] for h in history] == [
        _id(t, s) for s in reversed(range(steps))
    ]
    for h in history:
        step = h.metadata["step"]
        assert h.checkpoint["channel_values"] == _values(origin, step)
        assert h.metadata["run_id"] == run
        parent = None if step == 0 else _id(t, step - 1)
        assert (h.parent_config or {}).get("configurable", {}).get("checkpoint_id") == parent
        writes = [(task, channel, value) for task, channel, value in h.pending_writes or []]
        expected = [(f"task-{step}", "msg", f"pending {origin} {step}")]
        if step == steps - 1:
            expected.append(("task-interrupt", INTERRUPT, {"ask": origin}))
        assert sorted(writes, key=str) == sorted(expected, key=str)
    newest = saver.get_tuple(cfg(thread))
    assert newest is not None and newest.config["configurable"]["checkpoint_id"] == _id(
        t, steps - 1
    )


def test_every_thread_reads_back_whole(copy: Path) -> None:
    with ckptdb.open(copy, keys=KEYS) as db:
        saver = CkptdbSaver(db, encryption=_encryption)
        for t, (thread, steps, run) in enumerate(THREADS):
            _expect_thread(saver, thread, t, steps, run)
        _expect_thread(saver, "alpha-fork", 0, 3, "run-a", origin="alpha")  # same ids
        sub = saver.get_tuple(cfg("alpha", "child:1"))
        assert sub is not None and sub.checkpoint["channel_values"] == {"child": "inside"}
        assert db.verify().ok
        assert "keep-beta" in {p.name for p in db.pins("langgraph/beta")}


def test_the_sealed_thread_needs_its_key(copy: Path) -> None:
    with ckptdb.open(copy) as db:
        saver = CkptdbSaver(db)
        with pytest.raises(errors.KeyUnavailableError):
            saver.get_tuple(cfg(SECRET))
        assert saver.get_tuple(cfg("beta")) is not None  # the others read without it


def test_runs_forks_and_deletes_still_work(copy: Path) -> None:
    with ckptdb.open(copy, keys=KEYS) as db:
        saver = CkptdbSaver(db, encryption=_encryption)
        saver.delete_for_runs(["run-a"])
        # alpha's checkpoints carried run-a; the fork is a thread of its own (same run ids).
        assert list(saver.list(cfg("alpha"))) == []
        assert saver.get_tuple(cfg("beta")) is not None
        saver.delete_thread("beta")
        assert saver.get_tuple(cfg("beta")) is None
        saver.copy_thread(SECRET, "secret-copy")
        copied = saver.get_tuple(cfg("secret-copy"))
        assert copied is not None and copied.checkpoint["channel_values"] == _values(SECRET, 1)
        assert db.verify().ok
