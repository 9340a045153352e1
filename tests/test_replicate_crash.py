"""Crash test: kill -9 the primary and its Litestream at random moments while it replicates
and waits on every fifth commit (32 KiB a commit: the WAL fills and is checkpointed and
restarted several times a round). After every kill:

* the newest position of the replica restores (no ``replica_damaged``);
* every checkpoint whose ``wait()`` returned, in any round, is in it and verifies;
* the replica's LTX headers written while the round's Litestream ran show no WAL restarted
  behind Litestream's back (``ltx.audit``) -- a verdict on the files, not on where the kill
  landed, so the class of defect cannot come back silently.

A longer run of the same drill: ``tools/replication_crash.py`` (docs/replication.md)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import ckptdb
from ckptdb.replication import ltx

WORKER = Path(__file__).with_name("replicate_worker.py")


def _seq_page(path: Path) -> int:
    with ckptdb.open(path, readonly=True) as db:
        rows = db.query("SELECT rootpage FROM sqlite_schema WHERE name = '_litestream_seq'").rows
    return int(rows[0][0])


def test_acked_checkpoints_survive_kill_9(tmp_path: Path) -> None:
    primary = tmp_path / "run.ckpt"
    replica_dir = tmp_path / "replica"
    replica = "file://" + str(replica_dir)
    rng = random.Random(16)
    acked: list[str] = []
    for round_no in range(3):
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(primary), replica, "1000000", "0.1", "5", "32768"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        first_ack = threading.Event()
        lines: list[str] = []

        def read(stream=proc.stdout, sink=lines, ready=first_ack) -> None:  # type: ignore[no-untyped-def]
            for line in stream:
                sink.append(line)
                if line.startswith("acked "):
                    ready.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert first_ack.wait(60), f"round {round_no}: the primary never got an ack"
        time.sleep(rng.uniform(1.0, 2.5))  # several WAL checkpoints' worth of commits
        _, litestream_pid, start_txid = next(x for x in lines if x.startswith("litestream")).split()
        for pid in (proc.pid, int(litestream_pid)):
            with contextlib.suppress(ProcessLookupError):  # may have gone with its parent
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        reader.join(5)
        acked += [line.split()[1] for line in lines if line.startswith("acked ")]

        anomalies = [
            a
            for a in ltx.audit(ltx.local_headers(str(replica_dir)), seq_page=_seq_page(primary))
            if a.txid > int(start_txid)
        ]
        assert anomalies == [], f"round {round_no}: WAL restarted behind Litestream"
        restored = tmp_path / f"restored-{round_no}.ckpt"
        report = ckptdb.restore(replica, restored)  # the newest position, not a recovery
        assert not report.recovered
        with ckptdb.open(restored, readonly=True) as copy:
            for checkpoint_id in acked:
                copy.get(checkpoint_id).read("state.json")
            assert copy.verify().ok
    assert len(acked) >= 3
