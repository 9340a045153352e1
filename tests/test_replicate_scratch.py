"""A replicator's scratch directory (Litestream's configuration, control socket and log)
never outlives it for long: one killed with SIGKILL leaves its directory, and the next
replicator -- or :func:`ckptdb.replication.scratch.sweep` -- removes it, while the
directory of a live replicator, one being set up, or one of an older release is never
touched. Every test works in a temporary root of its own and leaves it empty."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ckptdb
from ckptdb.replication import scratch

_PRIMARY = """
import sys, time
import ckptdb
path, url = sys.argv[1], sys.argv[2]
with ckptdb.open(path) as db, ckptdb.replicate(path, to=url) as rep:
    db.commit("brain-1", {"state.json": b"{}"})
    print(rep.pid, flush=True)
    time.sleep(600)
"""


@pytest.fixture
def root(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A short temporary root (a Unix socket path must stay under 108 bytes) that this
    process and its children use as their temporary directory (pytest's own stays where
    it is)."""
    tmp_path_factory.getbasetemp()
    path = Path(tempfile.mkdtemp(prefix="ckptdb-t-"))
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    monkeypatch.setenv("TMPDIR", str(path))
    try:
        yield path
    finally:
        leftovers = sorted(p.name for p in path.iterdir())
        shutil.rmtree(path)
        assert leftovers == [], f"the test left {leftovers}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[-1][:1] != "Z"


def _scratch_dirs(root: Path) -> list[Path]:
    return sorted(root.glob(scratch.PREFIX + "*"))


def test_a_killed_replicator_leaves_its_directory_and_the_next_one_removes_it(
    root: Path, tmp_path: Path
) -> None:
    primary = tmp_path / "agent.ckpt"
    url = "file://" + str(tmp_path / "replica")
    proc = subprocess.Popen(
        [sys.executable, "-c", _PRIMARY, str(primary), url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        litestream_pid = int(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 10
    while _alive(litestream_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(litestream_pid)
    [left] = _scratch_dirs(root)
    assert (left / scratch.OWNER_LOCK).is_file() and (left / "litestream.json").is_file()

    with ckptdb.open(primary) as db, ckptdb.replicate(primary, to=url) as rep:
        ack = db.commit("brain-1", {"state.json": b"{}", "turn": b"2"})
        rep.wait(ack.checkpoint_id, timeout=30)
        [running] = _scratch_dirs(root)
        assert running != left, "the dead replicator's directory was not removed"
        assert scratch.sweep() == [], "a live replicator's directory was swept"
    assert _scratch_dirs(root) == []


def test_sweep_removes_only_directories_whose_owner_is_gone(root: Path) -> None:
    live = scratch.ScratchDirectory()
    (Path(live.path) / "control.sock").write_bytes(b"")
    older_release = root / (scratch.PREFIX + "before070")  # no owner lock: never judged
    older_release.mkdir(mode=0o700)
    (older_release / "litestream.json").write_text("{}")
    being_set_up = root / (scratch.PREFIX + "settingup")  # its lock not yet named
    being_set_up.mkdir(mode=0o700)
    (being_set_up / (scratch.OWNER_LOCK + ".new")).write_bytes(b"")
    dead = root / (scratch.PREFIX + "deadowner")  # a lock nobody holds
    dead.mkdir(mode=0o700)
    (dead / scratch.OWNER_LOCK).write_bytes(b"")
    (dead / "litestream.log").write_text("killed")
    not_a_directory = root / (scratch.PREFIX + "file")
    not_a_directory.write_text("x")

    assert scratch.sweep() == [str(dead)]
    assert not dead.exists()
    assert {p.name for p in root.iterdir()} == {
        Path(live.path).name,
        older_release.name,
        being_set_up.name,
        not_a_directory.name,
    }
    live.remove()
    live.remove()  # idempotent
    assert not Path(live.path).exists()
    for path in (older_release, being_set_up):
        shutil.rmtree(path)
    not_a_directory.unlink()
