"""Many processes on one file (tools/concurrency.py): 4 compare-and-swap writers on one
namespace, 4 writers on their own, 2 readers and a GC process. Lineages stay linear, every
ack is present, nobody sees "database is locked", readers never wait for a lock."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import run_tool

COMMITS = int(os.environ.get("CKPTDB_CONCURRENCY_COMMITS", "100"))


def test_writers_readers_and_gc_share_one_file(tmp_path: Path) -> None:
    result: dict = run_tool("concurrency", "--commits", str(COMMITS), tmp=tmp_path)  # type: ignore[type-arg]
    assert result["violations"] == []
    assert result["total_commits"] == 8 * COMMITS
    assert result["cas_conflicts_retried"] > 0  # the compare-and-swap really raced
    assert result["reader_reads"] > 0 and result["reader_lock_waits"] == 0
    assert result["gc_runs"] > 0
