"""The LangGraph saver's one cache: one bound over everything it holds, least recently used
first out, nothing too large kept, and a saver that works the same through evictions."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint

import ckptdb
from ckptdb.integrations.langgraph import CkptdbSaver
from ckptdb.integrations.langgraph._cache import (
    ENTRY_COST,
    UNKNOWN,
    Loaded,
    SaverCache,
    ThreadState,
)
from ckptdb.types import BlobRef

DIGEST = "ab" * 32


def _loaded(size: int = 10, blobs: dict[str, tuple[str, str]] | None = None) -> Loaded:
    return Loaded("{}", ("msgpack", b"\x80"), {}, blobs or {}, size)


def test_every_kind_shares_one_bound_and_the_least_recently_used_goes_first() -> None:
    # 256 + 266 + 1156 + 256 + 1156 = 3090 bytes, then 266 + 2 * 1156 more: 5668 > 5000
    cache = SaverCache(max_bytes=5000)
    cache.put_thread("t", "", ThreadState("langgraph/t", True, ("1", DIGEST), {}))
    cache.put_content("c1", _loaded(), {"d1": b"x" * 900})
    cache.put_sealer("langgraph/t", None)
    cache.put_spliced("c1", b"s" * 900)
    assert cache.thread("t", "") is not None  # touched: now the most recently used
    cache.put_content("c2", _loaded(), {"d2": b"y" * 900, "d3": b"z" * 900})
    # Over the bound: the oldest entries went (the first envelope, then its blob), the
    # thread state that was just used stayed.
    assert cache.content("c1") is None
    assert cache.blob("d1") is None
    assert cache.thread("t", "") is not None
    assert cache.content("c2") is not None
    assert cache.blob("d3") == b"z" * 900
    assert cache.sealer("langgraph/t") is None  # newer than what went: kept


def test_a_value_over_a_quarter_of_the_bound_is_not_kept() -> None:
    cache = SaverCache(max_bytes=40_000)
    blobs = {"x": ("msgpack", "big"), "y": ("msgpack", "small")}
    cache.put_content("c", _loaded(10, blobs), {"big": b"b" * 20_000, "small": b"s" * 100})
    assert cache.blob("big") is None
    assert cache.blob("small") == b"s" * 100
    assert cache.content("c") is None  # needs every blob it names: a miss, never a partial


def test_sealers_may_be_none_and_forgetting_a_thread_keeps_the_rest() -> None:
    cache = SaverCache()
    assert cache.sealer("ns") is UNKNOWN
    cache.put_sealer("ns", None)
    assert cache.sealer("ns") is None
    ref = BlobRef(DIGEST, 3)
    cache.remember_put(
        "t",
        "",
        ThreadState("ns", True, ("1", DIGEST), {"c": ref}),
        "cp",
        _loaded(),
        {DIGEST: b"abc"},
    )
    cache.forget_thread("t", "")
    assert cache.thread("t", "") is None
    assert cache.blob(DIGEST) == b"abc"
    assert cache.sealer("ns") is None
    cache.clear()
    assert cache.blob(DIGEST) is None and cache.sealer("ns") is UNKNOWN


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 3000)), max_size=60))
def test_the_total_never_passes_the_bound(puts: list[tuple[str, int]]) -> None:
    bound = 6 * ENTRY_COST + 6000
    cache = SaverCache(max_bytes=bound)
    for name, size in puts:
        cache.put_content(name, _loaded(size), {name * 32: b"v" * size})
        cache.put_sealed(name * 16, (name, b"w" * size))
        held = cache._bytes  # the accounting itself is what is checked
        assert 0 <= held <= bound
        assert held == sum(cost for cost, _ in cache._items.values())


def test_a_saver_with_a_tiny_cache_reads_and_writes_the_same(tmp_path: Path) -> None:
    """Every hint and every cached byte may be evicted at any time: the saver then reads
    (and verifies) from the file, and stores exactly what it is given."""
    with CkptdbSaver(ckptdb.open(tmp_path / "tiny.ckpt"), inline_max=8) as saver:
        saver._cache.max_bytes = 3 * ENTRY_COST + 500
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for i in range(12):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"big": "v" * 300, "n": i, "more": f"{i}" * 40}
            config = saver.put(config, checkpoint, {"step": i}, {})  # type: ignore[arg-type]
            saver.put_writes(config, [("n", i)], f"task{i}")
            got = saver.get_tuple(config)
            assert got is not None
            assert got.checkpoint["channel_values"] == checkpoint["channel_values"]
            assert [w[2] for w in got.pending_writes or []] == [i]
        assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 12
        assert saver.db.verify().ok
