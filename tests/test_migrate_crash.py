"""SIGKILL of ``ckptdb migrate DB up`` while schema 7's data step moves the entries of a file
in the format-2 layout into their checkpoint rows (tools/migrate_crash.py --quick: 5,000
checkpoints, three batches; see its docstring for every check after each kill): the file
verifies at every kill, reads every checkpoint's entries as before, and a second
``migrate up`` finishes the move."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import run_tool

KILLS = int(os.environ.get("CKPTDB_MIGRATE_CRASH_KILLS", "6"))


def test_sigkill_during_the_move_to_storage_format_3_leaves_a_whole_file(tmp_path: Path) -> None:
    result: dict = run_tool(  # type: ignore[type-arg]
        "migrate_crash", "--quick", "--kills", str(KILLS), "--seed", "5", tmp=tmp_path
    )
    assert result["violations"] == []
    landed = result["kills_landed"]
    assert sum(landed.values()) == KILLS
    # Kills came while batches were being moved: the checks ran on half-moved files.
    assert landed["mid_move"] > 0, landed
    assert result["entries"] > 2 * result["checkpoints"]
