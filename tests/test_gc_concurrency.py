"""GC and publishing in separate processes on one file: a publish racing a sweep either
keeps its bytes or fails cleanly and retries; no caller sees "database is locked"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO, child_env

import ckptdb

ROUNDS = 120


def test_publisher_and_gc_processes_race_safely(tmp_path: Path) -> None:
    db_path = tmp_path / "race.ckpt"
    ckptdb.open(db_path, chunk_size=64 * 1024).close()
    worker = str(REPO / "tools" / "gc_race.py")
    publisher = subprocess.Popen(
        [sys.executable, worker, "publish", str(db_path), str(ROUNDS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    collector = subprocess.Popen(
        [sys.executable, worker, "gc", str(db_path), str(ROUNDS // 2)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    pub_out, pub_err = publisher.communicate(timeout=600)
    gc_out, gc_err = collector.communicate(timeout=600)
    assert publisher.returncode == 0, pub_err
    assert collector.returncode == 0, gc_err
    for err in (pub_err, gc_err):
        assert "locked" not in err and "BusyError" not in err
    acks = [line.split() for line in pub_out.splitlines() if line.startswith("ACK")]
    assert len(acks) == ROUNDS
    deleted = int(gc_out.split()[-1])
    assert deleted > 0  # GC really ran concurrently with the publisher
    with ckptdb.open(db_path) as db:
        report = db.verify()
        assert report.ok, report.problems
        current = db.current("race")
        assert current is not None and current.id == acks[-1][2]
        current.verify()
        # Every acknowledged checkpoint still stored is complete.
        for _, _, cid in acks:
            try:
                cp = db.get(cid)
            except ckptdb.CheckpointNotFoundError:
                continue  # deleted by the keep_last=2 policy, as asked
            cp.verify()
