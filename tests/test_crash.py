"""Crash safety with real processes: SIGKILL a process that commits, pins and collects
garbage at random moments, at least 100 times (tools/crash_loop.py; see its docstring for
every invariant checked after each kill); then the same into an encrypted key scope whose
key the process rotates now and then (``--encrypted``)."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import run_tool

KILLS = int(os.environ.get("CKPTDB_CRASH_KILLS", "100"))
ENCRYPTED_KILLS = int(os.environ.get("CKPTDB_CRASH_KILLS_ENCRYPTED", "40"))


def test_sigkill_never_loses_an_acknowledged_checkpoint(tmp_path: Path) -> None:
    result: dict = run_tool(  # type: ignore[type-arg]
        "crash_loop", "--kills", str(KILLS), "--seed", "20261129", tmp=tmp_path
    )
    assert result["violations"] == []
    assert result["commits_acknowledged"] > KILLS  # kills landed while work was happening
    assert result["gc_runs_completed"] > 0 and result["pins_acknowledged"] > 0
    assert result["kills_landing_mid_commit"] > 0


def test_sigkill_of_an_encrypted_writer_rotating_its_key(tmp_path: Path) -> None:
    """No acknowledged commit lost, no plaintext on disk, exactly one key of the key file
    opens the scope after every kill, never older than the last acknowledged rotation."""
    result: dict = run_tool(  # type: ignore[type-arg]
        "crash_loop", "--encrypted", "--kills", str(ENCRYPTED_KILLS), "--seed", "7", tmp=tmp_path
    )
    assert result["violations"] == []
    assert result["encrypted"] is True
    assert result["commits_acknowledged"] > ENCRYPTED_KILLS
    assert result["rotations_acknowledged"] > 0
    # every acknowledged rotation moved the generation on (unacknowledged ones may too)
    assert result["key_generation"] >= result["rotations_acknowledged"] + 1
    assert result["gc_runs_completed"] > 0 and result["pins_acknowledged"] > 0
