"""``get_delta_channel_history``: the one-walk override returns exactly what LangGraph's
default implementation (one ``get_tuple`` per ancestor) returns, on forked threads, with
seeds near and far, several tasks per step, and collected ancestors."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

import ckptdb
from ckptdb.integrations.langgraph import AsyncCkptdbSaver, CkptdbSaver
from ckptdb.integrations.langgraph import delta as delta_module


def cfg(thread: str, checkpoint_id: str | None = None, ns: str = "") -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


CHANNELS = ["messages", "notes", "big", "never"]


def _build(saver: CkptdbSaver, thread: str, seed: int, steps: int = 40) -> list[Any]:
    """A thread with forks: each step's parent is usually the newest, sometimes an older
    checkpoint; channel values are stored only now and then (snapshots), and every step
    has writes of several tasks, with and without task paths."""
    rng = random.Random(seed)
    configs: list[Any] = []
    for i in range(steps):
        parent = cfg(thread) if not configs else rng.choice([configs[-1]] * 4 + configs)
        cp = empty_checkpoint()
        cp["id"] = f"1ef3{seed:02}{i:03}-0000-6000-8000-000000000000"
        values: dict[str, Any] = {}
        if rng.random() < 0.2:
            values["messages"] = {"snapshot": i}
        if rng.random() < 0.1:
            values["notes"] = [f"note {i}"] * 3
        if rng.random() < 0.15:
            values["big"] = "B" * 600 + str(i)  # a blob entry of its own
        cp["channel_values"] = values
        config = saver.put(parent, cp, {"step": i}, {})
        configs.append(config)
        for task in range(rng.randint(0, 3)):
            writes = [
                (rng.choice([*CHANNELS[:3], "other"]), {"i": i, "task": task, "k": k})
                for k in range(rng.randint(1, 3))
            ]
            path = rng.choice(["", f"~__pregel_pull, node{task}", "a"])
            saver.put_writes(config, writes, f"task-{rng.randint(0, 9)}", path)
    return configs


def _default(saver: CkptdbSaver, config: Any, channels: list[str]) -> Any:
    return BaseCheckpointSaver.get_delta_channel_history(saver, config=config, channels=channels)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_equal_to_the_default_on_forked_threads(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delta_module, "WALK_PAGE", 4)  # exercise the paging too
    with CkptdbSaver(tmp_path / "d.ckpt") as saver:
        configs = _build(saver, "t", seed)
        _build(saver, "other-thread", seed + 10, steps=5)  # must not leak in
        rng = random.Random(seed)
        writes = seeds = 0
        targets = [*configs, cfg("t"), cfg("t", "1ef3-missing"), cfg("nobody")]
        for config in targets:
            channels = rng.sample(CHANNELS, rng.randint(1, len(CHANNELS)))
            got = saver.get_delta_channel_history(config=config, channels=channels)
            assert got == _default(saver, config, channels), config
            writes += sum(len(h["writes"]) for h in got.values())
            seeds += sum("seed" in h for h in got.values())
        assert writes > 50 and seeds > 10  # the comparison saw real histories
        assert saver.get_delta_channel_history(config=configs[-1], channels=[]) == {}
        dup = ["messages", "messages"]
        assert saver.get_delta_channel_history(config=configs[-1], channels=dup) == (
            _default(saver, configs[-1], dup)
        )


def test_equal_to_the_default_when_ancestors_were_collected(tmp_path: Path) -> None:
    with CkptdbSaver(tmp_path / "c.ckpt") as saver:
        configs = _build(saver, "t", 7, steps=12)
        cold = CkptdbSaver(saver.db)  # an empty cache: everything read from the file
        saver.db.gc(ckptdb.RetentionPolicy(keep_last=3), namespaces=["langgraph/t"])
        for config in [*configs, cfg("t")]:
            want = _default(cold, config, CHANNELS)
            assert cold.get_delta_channel_history(config=config, channels=CHANNELS) == want
            assert saver.get_delta_channel_history(config=config, channels=CHANNELS) == want


def test_the_async_twin_and_a_subgraph_namespace(tmp_path: Path) -> None:
    async def main() -> None:
        saver = await AsyncCkptdbSaver.open(tmp_path / "a.ckpt")
        async with saver:
            config = cfg("t", ns="child:1")
            cp = empty_checkpoint()
            cp["id"] = "1ef40000-0000-6000-8000-000000000000"
            cp["channel_values"] = {"messages": "seed"}
            first = await saver.aput(config, cp, {}, {})
            await saver.aput_writes(first, [("messages", "d1"), ("notes", "n")], "task")
            cp2 = empty_checkpoint()
            cp2["id"] = "1ef40001-0000-6000-8000-000000000000"
            second = await saver.aput(first, cp2, {}, {})
            got = await saver.aget_delta_channel_history(config=second, channels=["messages"])
            assert got == {"messages": {"writes": [("task", "messages", "d1")], "seed": "seed"}}
            assert got == _default(saver, second, ["messages"])

    asyncio.run(main())
