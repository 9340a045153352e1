"""Every I/O fault point (sampled in CI; all of them with tools/fault_sweep.py) of creating
a file, a small commit, a chunked commit, a group of commits, a commit a quota evicts for, a fork
(copy_checkpoints), a GC sweep, an
export and a migration: no ack for a failure; the live, reopened, process-crash and
power-loss views all show the old or the new state, complete; acknowledged commits survive
power loss. Then the same for the write paths of encryption at rest: commits into a key
scope (no plaintext on disk at any point), rotate_key (exactly one key opens the scope) and
shred_key (intact or shredded; a completed shred leaves no wrapped key and no sealed byte on
disk, after power loss too). And the migration of the v6 fixture to storage format 3, its
data step two checkpoints per transaction: whole at every point, finished by a rerun."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tool

ENCRYPTION_OPS = {
    "commit-sealed",
    "commit-sealed-cdc",
    "rotate-key",
    "shred-key",
    "shred-key-unused",
}


def test_quick_fault_sweep_finds_no_violation(tmp_path: Path) -> None:
    ops = (
        "create,commit-small,commit-cdc,commit-chunked,commit-group,commit-evict,copy-checkpoints,gc,"
        "export,migrate"
    )
    result: dict = run_tool("fault_sweep", "--quick", "--only", ops, tmp=tmp_path)  # type: ignore[type-arg]
    assert result["violations"] == []
    assert set(result["per_operation"]) == set(ops.split(","))
    for name, figures in result["per_operation"].items():
        assert figures["points"] > 20, name
        assert figures["failed"] > 0, name
    assert result["images_checked"] > 500


def test_quick_fault_sweep_of_encryption_at_rest_finds_no_violation(tmp_path: Path) -> None:
    result: dict = run_tool(  # type: ignore[type-arg]
        "fault_sweep", "--quick", "--only", ",".join(sorted(ENCRYPTION_OPS)), tmp=tmp_path
    )
    assert result["violations"] == []
    assert set(result["per_operation"]) == ENCRYPTION_OPS
    for name, figures in result["per_operation"].items():
        assert figures["points"] > 20, name
        assert figures["failed"] > 0, name
        assert figures["calls"]["sync"] > 0, name
    # Both outcomes were seen: faults before the decisive COMMIT and after it.
    assert result["observations_old"] > 100 and result["observations_new"] > 100
    assert result["images_checked"] > 500


def test_quick_fault_sweep_of_the_move_to_storage_format_3_finds_no_violation(
    tmp_path: Path,
) -> None:
    """``migrate-v6``: migration 0007 on the v6 fixture, then its data step moving the
    entries of its 15 checkpoints in transactions of two. Every image is at schema 6, or 7
    with whole batches moved, verifies, reads every recorded checkpoint back with its
    recorded digests and pointers, and a rerun of ``migrate up`` finishes it."""
    result: dict = run_tool("fault_sweep", "--quick", "--only", "migrate-v6", tmp=tmp_path)  # type: ignore[type-arg]
    assert result["violations"] == []
    figures = result["per_operation"]["migrate-v6"]
    # A sync per transaction at least: the DDL's and each of the eight batches'.
    assert figures["calls"]["sync"] >= 9, figures
    assert figures["points"] > 20 and figures["failed"] > 0, figures
    assert result["observations_old"] > 0 and result["observations_new"] > 0
    # Faults between batches left files part-moved (schema 7, 1 to 14 of 15 left to move),
    # and those were found whole too.
    part_moved = {
        int(state.split()[2])
        for state in figures["states_seen"]
        if state.startswith("schema 7,") and 0 < int(state.split()[2]) < 15
    }
    assert len(part_moved) >= 3, figures["states_seen"]
