"""Replication figures: lag commit -> replica, barrier latency, restore time, loss on death.

    python tools/bench_replication.py [--quick] [--json]

* lag: commits spaced 50 ms apart, nobody waiting; a read replica (litestream-vfs, 20 ms
  poll) reports when each checkpoint appears. p50/p99 at Litestream's default 1 s sync
  interval and at 100 ms. (The poll adds up to 20 ms.)
* wait: latency of ``Replicator.wait`` (forced sync + read-back) right after a commit.
* restore: ``ckptdb.restore`` (Litestream restore + ckptdb verify of every byte) of a
  database of SIZE MiB of incompressible entries; seconds per GiB extrapolated linearly.
* loss: a primary committing without waiting is killed with SIGKILL; how many of its
  commits, and how many seconds of them, a restore lacks.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import ckptdb

WORKER = Path(__file__).resolve().parent.parent / "tests" / "replicate_worker.py"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def lag(root: Path, sync_interval: float, n: int) -> dict[str, float]:
    path = root / f"lag-{sync_interval}.ckpt"
    url = "file://" + str(root / f"lag-{sync_interval}-replica")
    seen: dict[str, float] = {}
    with ckptdb.open(path) as db:
        db.commit("ns", {"a": b"0"})
        with ckptdb.replicate(path, to=url, sync_interval=sync_interval) as rep:
            rep.wait(db.current("ns").id, timeout=30)  # type: ignore[union-attr]
            ro = ckptdb.open_replica(url, poll_interval=0.02)
            pending: dict[str, float] = {}
            lock = threading.Lock()
            stop = threading.Event()

            def watch() -> None:
                while not stop.is_set() or pending:
                    with lock:
                        ids = list(pending)
                    for cid in ids:
                        try:
                            ro.get(cid)
                        except ckptdb.errors.CheckpointNotFoundError:
                            continue
                        with lock:
                            seen[cid] = time.monotonic() - pending.pop(cid)
                    time.sleep(0.005)

            watcher = threading.Thread(target=watch)
            watcher.start()
            for i in range(n):
                ack = db.commit("ns", {"a": str(i).encode()})
                with lock:
                    pending[ack.checkpoint_id] = time.monotonic()
                time.sleep(0.05)
            stop.set()
            watcher.join(timeout=30)
            ro.close()
    values = list(seen.values())
    return {"p50_ms": pct(values, 0.5) * 1000, "p99_ms": pct(values, 0.99) * 1000, "n": len(values)}


def barrier(root: Path, n: int) -> dict[str, float]:
    path = root / "wait.ckpt"
    values = []
    with ckptdb.open(path) as db:
        db.commit("ns", {"a": b"0"})
        with ckptdb.replicate(path, to="file://" + str(root / "wait-replica")) as rep:
            for i in range(n):
                ack = db.commit("ns", {"a": str(i).encode()})
                values.append(rep.wait(ack.checkpoint_id, timeout=30).waited_seconds)
    return {"p50_ms": pct(values, 0.5) * 1000, "p99_ms": pct(values, 0.99) * 1000, "n": n}


def restore_time(root: Path, size_mib: int) -> dict[str, float]:
    path = root / "big.ckpt"
    url = "file://" + str(root / "big-replica")
    with ckptdb.open(path) as db:
        for i in range(size_mib // 16):
            db.commit("ns", {f"part-{i}.bin": os.urandom(16 * 1024 * 1024)})
        with ckptdb.replicate(path, to=url) as rep:
            rep.wait(db.current("ns").id, timeout=600)  # type: ignore[union-attr]
    began = time.monotonic()
    report = ckptdb.restore(url, root / "big-restored.ckpt")
    seconds = time.monotonic() - began
    gib = report.bytes_checked / 2**30
    return {"mib": size_mib, "seconds": seconds, "seconds_per_gib": seconds / gib}


def loss(root: Path, sync_interval: float, rounds: int) -> dict[str, float]:
    lost_counts, lost_spans, damaged = [], [], 0
    for r in range(rounds):
        path = root / f"loss-{sync_interval}-{r}.ckpt"
        url = "file://" + str(root / f"loss-{sync_interval}-{r}-replica")
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(path), url, "0", str(sync_interval)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        times: list[tuple[str, float]] = []
        deadline = None
        for line in proc.stdout:
            if line.startswith("unwaited"):
                times.append((line.split()[1], time.monotonic()))
                deadline = deadline or time.monotonic() + 2.0 + r * 0.37
                if time.monotonic() > deadline:
                    proc.send_signal(signal.SIGKILL)
                    break
        proc.wait()
        killed = time.monotonic()
        dest = root / f"loss-{sync_interval}-{r}-restored.ckpt"
        try:
            ckptdb.restore(url, dest)
        except ckptdb.errors.ReplicaDamagedError:
            damaged += 1  # restore refused the newest position: it did not verify
            continue
        with ckptdb.open(dest, readonly=True) as copy:
            missing = []
            for cid, at in times:
                try:
                    copy.get(cid)
                except ckptdb.errors.CheckpointNotFoundError:
                    missing.append(at)
        lost_counts.append(len(missing))
        lost_spans.append(killed - min(missing) if missing else 0.0)
    return {
        "lost_commits_mean": statistics.mean(lost_counts) if lost_counts else -1.0,
        "lost_seconds_max": max(lost_spans) if lost_spans else -1.0,
        "newest_position_refused": damaged,
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, few samples")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    n = 20 if args.quick else 100
    size = 64 if args.quick else 512
    rounds = 2 if args.quick else 5
    with tempfile.TemporaryDirectory(prefix="bench-replication-") as tmp:
        root = Path(tmp)
        out = {
            "lag_default_1s": lag(root, 1.0, n),
            "lag_100ms": lag(root, 0.1, n),
            "wait": barrier(root, n),
            "restore": restore_time(root, size),
            "loss_default_1s": loss(root, 1.0, rounds),
            "loss_100ms": loss(root, 0.1, rounds),
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name, values in out.items():
        print(name, " ".join(f"{k}={v:.3g}" for k, v in values.items()))


if __name__ == "__main__":
    main()
