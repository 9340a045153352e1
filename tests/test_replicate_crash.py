"""Crash test: kill -9 the primary at random moments while it replicates. Every checkpoint
whose ``wait()`` returned must be present, and verify, in a restore of the replica.
(A longer run of the same drill: ``tools/replication_crash.py``.)"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import ckptdb

WORKER = Path(__file__).with_name("replicate_worker.py")


def test_acked_checkpoints_survive_kill_9(tmp_path: Path) -> None:
    primary = tmp_path / "run.ckpt"
    replica = "file://" + str(tmp_path / "replica")
    rng = random.Random(16)
    acked: list[str] = []
    for round_no in range(3):
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(primary), replica, "1000000", "0.1"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        started = threading.Event()
        lines: list[str] = []

        def read(stream=proc.stdout, sink=lines, ready=started) -> None:  # type: ignore[no-untyped-def]
            for line in stream:
                sink.append(line)
                if line.startswith("litestream"):
                    ready.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert started.wait(30), f"round {round_no}: the primary did not start"
        time.sleep(rng.uniform(0.2, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join(5)
        acked += [line.split()[1] for line in lines if line.startswith("acked ")]
        restored = tmp_path / f"restored-{round_no}.ckpt"
        ckptdb.restore(replica, restored)
        with ckptdb.open(restored, readonly=True) as copy:
            for checkpoint_id in acked:
                copy.get(checkpoint_id).read("state.json")
            assert copy.verify().ok
    assert len(acked) >= 3
