"""Every I/O fault point (sampled in CI; all of them with tools/fault_sweep.py) of a small
commit, a chunked commit, a group of commits, a commit a quota evicts for, a GC sweep, an
export and a migration: no ack for a failure; the live, reopened, process-crash and
power-loss views all show the old or the new state, complete; acknowledged commits survive
power loss."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tool


def test_quick_fault_sweep_finds_no_violation(tmp_path: Path) -> None:
    result: dict = run_tool("fault_sweep", "--quick", tmp=tmp_path)  # type: ignore[type-arg]
    assert result["violations"] == []
    assert set(result["per_operation"]) == {
        "commit-small",
        "commit-cdc",
        "commit-chunked",
        "commit-group",
        "commit-evict",
        "gc",
        "export",
        "migrate",
    }
    for name, figures in result["per_operation"].items():
        assert figures["points"] > 20, name
        assert figures["failed"] > 0, name
    assert result["images_checked"] > 500
