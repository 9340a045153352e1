"""Crash safety with real processes: SIGKILL a committing process at random moments.

After every kill: the file passes integrity_check and a full verify, CURRENT is the last
acknowledged checkpoint or the one after it (never older, never a mix), and every byte of
it verifies. No acknowledged checkpoint is ever lost.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO, child_env

import ckptdb

KILLS = int(os.environ.get("CKPTDB_CRASH_KILLS", "50"))


def test_sigkill_during_commits_never_loses_an_ack(tmp_path: Path) -> None:
    from crash_worker import CHUNK_SIZE, NAMESPACE, entries_for

    db_path = tmp_path / "crash.ckpt"
    rng = random.Random(20261129)
    acked: dict[int, str] = {}
    next_i = 1
    killed_mid_run = 0
    for _round in range(KILLS):
        proc = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "tools" / "crash_worker.py"),
                str(db_path),
                "--start",
                str(next_i),
            ],
            stdout=subprocess.PIPE,
            env=child_env(),
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        # The newest state known to be durable: the last ack of this run, or else what was
        # CURRENT when it started.
        last_ack = next_i - 1
        for line in rest.splitlines():
            _, i, cid = line.split()
            acked[int(i)] = cid
            last_ack = int(i)
        with ckptdb.open(db_path, chunk_size=CHUNK_SIZE) as db:
            report = db.verify()
            assert report.ok, report.problems
            cp = db.current(NAMESPACE)
            if cp is None:
                assert last_ack == 0
                next_i = 1
                continue
            i = cp.metadata["i"]
            assert i in (last_ack, last_ack + 1), (i, last_ack)
            if i == last_ack and i in acked:
                assert cp.id == acked[i]
            else:
                killed_mid_run += 1
            for name, data in entries_for(i).items():
                assert cp.read(name) == data
            # Every acknowledged checkpoint is still stored and intact.
            for ack_i in list(acked)[-5:]:
                assert db.get(acked[ack_i]).metadata["i"] == ack_i
            next_i = i + 1
    assert len(acked) > KILLS  # the kills landed while commits were happening
