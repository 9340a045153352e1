"""Crash safety with real processes: SIGKILL a process that commits, pins and collects
garbage at random moments, at least 100 times (tools/crash_loop.py; see its docstring for
every invariant checked after each kill)."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import run_tool

KILLS = int(os.environ.get("CKPTDB_CRASH_KILLS", "100"))


def test_sigkill_never_loses_an_acknowledged_checkpoint(tmp_path: Path) -> None:
    result: dict = run_tool(  # type: ignore[type-arg]
        "crash_loop", "--kills", str(KILLS), "--seed", "20261129", tmp=tmp_path
    )
    assert result["violations"] == []
    assert result["commits_acknowledged"] > KILLS  # kills landed while work was happening
    assert result["gc_runs_completed"] > 0 and result["pins_acknowledged"] > 0
    assert result["kills_landing_mid_commit"] > 0
