"""WAL checkpoints run on a thread and connection of the handle's own (connection/
checkpointer.py): a large write's copy into the database file overlaps its staging, the
handle's close stays the last one (it checkpoints and removes the WAL), a file opened
through a custom VFS checkpoints inline, and a process killed while the copier runs loses
nothing it acknowledged."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import child_env

import ckptdb
from ckptdb.connection import walhook
from ckptdb.connection.faults import FaultVFS
from ckptdb.replication.lock import ReplicatorLock


def _copiers(path: Path) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"ckptdb-checkpointer:{path}"]


def _noise(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)  # incompressible: every byte reaches the WAL


def _wait_for(condition: object, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_a_large_write_is_copied_by_the_handles_checkpointer(tmp_path: Path) -> None:
    path = tmp_path / "big.ckpt"
    data = _noise(24 << 20, 1)  # 6,000 pages: past the 1,000-page checkpoint threshold
    with ckptdb.open(path) as db:
        db.commit("ns", {"a": b"0"})
        assert _copiers(path) == []  # nothing to copy yet: no thread
        db.commit("ns", {"big": data})
        assert len(_copiers(path)) == 1
        # The copy lands in the database file while the handle stays open.
        assert _wait_for(lambda: path.stat().st_size > 16 << 20)
        assert db.current("ns").read("big") == data  # type: ignore[union-attr]
    assert _copiers(path) == []  # stopped by the close, before the handle's connection
    assert not Path(str(path) + "-wal").exists()  # that close was the last: WAL removed
    with ckptdb.open(path, readonly=True) as db:
        assert db.verify().ok
        assert db.current("ns").read("big") == data  # type: ignore[union-attr]


def test_small_commits_checkpoint_inline_and_the_wal_keeps_restarting(tmp_path: Path) -> None:
    # Handed to the copier, small commits left the WAL no moment with every frame copied
    # and no commit in progress: it stopped restarting and grew to 64 MiB.
    path = tmp_path / "small.ckpt"
    wal = Path(str(path) + "-wal")
    rng = random.Random(4)
    largest = 0
    with ckptdb.open(path) as db:
        for i in range(1500):  # ~15 WAL pages each: the 1,000-page threshold, many times
            db.commit(f"ns{i % 20}", {"a": rng.randbytes(1000), "b": rng.randbytes(1000)})
            largest = max(largest, wal.stat().st_size)
        assert _copiers(path) == []
    assert largest < (walhook.AUTOCHECKPOINT_PAGES + 100) * 4096


def test_commits_keep_going_while_the_copier_runs(tmp_path: Path) -> None:
    path = tmp_path / "many.ckpt"
    written = {f"k{i}": _noise(3 << 20, i) for i in range(12)}  # 9,000+ pages in all
    with ckptdb.open(path) as db:
        for name, value in written.items():
            db.commit(name, {"v": value})
        for name, value in written.items():
            assert db.current(name).read("v") == value  # type: ignore[union-attr]
        assert db.verify().ok
    assert not Path(str(path) + "-wal").exists()


def test_a_file_opened_through_a_custom_vfs_checkpoints_inline(tmp_path: Path) -> None:
    fault = FaultVFS(f"ckptdb-test-checkpointer-{os.getpid()}")
    try:
        path = tmp_path / "vfs.ckpt"
        with ckptdb.open(path, vfs=fault.name) as db:
            db.commit("ns", {"big": _noise(8 << 20, 2)})
            assert _copiers(path) == []
            # Inline: the commit that crossed the threshold copied its pages itself.
            assert path.stat().st_size > 4 << 20
    finally:
        fault.unregister()


def test_the_copier_stands_down_while_a_replicator_runs(tmp_path: Path) -> None:
    path = tmp_path / "rep.ckpt"
    with ckptdb.open(path) as db:
        db.commit("ns", {"a": b"0"})
        db.gc(grace=0)
        size = path.stat().st_size
        lock = ReplicatorLock(str(path))
        lock.acquire()
        try:
            db.commit("ns", {"big": _noise(8 << 20, 3)})
            assert Path(str(path) + "-wal").stat().st_size > walhook.AUTOCHECKPOINT_PAGES * 4096
            time.sleep(0.2)  # a copier that ignored the lock would have copied by now
            assert path.stat().st_size == size
        finally:
            lock.release()


WRITER = """
import hashlib, random, sys, ckptdb
path, log = sys.argv[1], sys.argv[2]
with ckptdb.open(path) as db, open(log, "a") as out:
    for i in range(10_000):
        data = random.Random(i).randbytes(1 << 20)
        ack = db.commit(f"ns{i % 4}", {"v": data})
        out.write(f"{i % 4} {ack.checkpoint_id} {hashlib.sha256(data).hexdigest()}\\n")
        out.flush()
"""


@pytest.mark.parametrize("seconds", [0.7, 1.3, 2.1])
def test_a_kill_while_the_copier_runs_loses_no_acknowledged_commit(
    tmp_path: Path, seconds: float
) -> None:
    path = tmp_path / "kill.ckpt"
    log = tmp_path / "acks.txt"
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(log)], env=child_env())
    try:
        assert _wait_for(lambda: log.exists() and log.stat().st_size > 0)
        time.sleep(seconds)  # 1 MiB commits: the copier is busy every few commits
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    acks = [line.split() for line in log.read_text().splitlines() if line.count(" ") == 2]
    assert len(acks) > 4
    with ckptdb.open(path) as db:
        assert db.verify().ok
        for _ns, checkpoint_id, digest in acks:
            data = db.get(checkpoint_id).read("v")
            assert hashlib.sha256(data).hexdigest() == digest
