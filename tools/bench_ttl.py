"""Benchmark: a TTL sweep of expired LangGraph threads beside a running graph's puts.

    python tools/bench_ttl.py                      # 1,000 threads x 100 checkpoints (minutes)
    python tools/bench_ttl.py --quick              # seconds, for CI / a smoke check
    python tools/bench_ttl.py --file /tmp/ttl.db   # build the file once, reuse it next time
    python tools/bench_ttl.py --json out.json      # also write the numbers as JSON

The file: ``--threads`` LangGraph threads (default 1,000) of ``--steps`` checkpoints each
(default 100: 100,000 checkpoints), the 1 KB state of tools/bench_langgraph.py (10
channels of ~100 bytes, one changing per step: its ``make_steps``), every checkpoint with
an id of its own, written by CkptdbSaver with ckptdb's clock set two days back -- so with
a one-day TTL every one of those threads has expired. (The build runs with
``synchronous="normal"`` to save time; the measurements with the default ``"full"``.)

The run, twice, each time on a scratch copy of that file with one saver
(``ttl=ThreadTTL(1 day, "delete", sweep_interval=None)``) and one Python thread that puts
the next step on ``--live`` threads (default 10) round-robin, without pause, timing each
put:

1. without a sweep: the putter alone for ``--baseline-s`` seconds (default 10);
2. during a sweep that deletes every expired thread (``--batch`` at a time, default 100)
   through ``delete_thread``'s path, the putter stopping when it ends. ``on_demand``:
   ``sweep_expired()`` in the main thread; ``background``: the background sweeper of a
   second saver on the same handle (it sweeps as it starts, resting after each thread as
   long as the thread took), its end found by polling a dry run every 0.1 s.

Reported for each: p50 / p99 / max put latency (milliseconds) and puts/s of both phases and
their ratio, the sweep's duration and threads/s, and the file's bytes and blob count
before and after. Both phases run in the same process on the same file, a minute apart:
compare them with each other, not with another run's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import ChannelVersions, Checkpoint
from langgraph.checkpoint.base.id import uuid6

import ckptdb
from ckptdb.integrations.langgraph import CkptdbSaver, ThreadTTL

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_langgraph import WORKLOADS, make_steps  # a sibling tool

DAY_MS = 86_400_000
#: How the sweep runs in each measurement (see :func:`measure`).
MODES = ("on_demand", "background")
#: Seconds between two looks at whether the background sweep is done.
POLL_S = 0.1


def _config(thread: str, checkpoint_id: str | None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _fresh(template: Checkpoint, step: int) -> Checkpoint:
    """The step's checkpoint with an id of its own (no two threads share an envelope)."""
    out = template.copy()
    out["id"] = str(uuid6(clock_seq=step))
    return out


def _versions(changed: dict[str, str]) -> ChannelVersions:
    """make_steps' new versions as the saver's argument type."""
    return dict(changed)


def _progress(message: str) -> None:
    print(f"bench_ttl: {message}", file=sys.stderr, flush=True)


def build(path: Path, threads: int, steps: int) -> float:
    """Write the expired threads into ``path`` (see the module docstring); seconds taken."""
    started = time.perf_counter()
    two_days_ago = int(time.time() * 1000) - 2 * DAY_MS
    plan = make_steps(WORKLOADS["1kb"], steps)
    with ckptdb.open(path, synchronous="normal", clock=lambda: two_days_ago) as db:
        saver = CkptdbSaver(db)
        last = time.perf_counter()
        for n in range(threads):
            thread = f"expired-{n:05d}"
            parent: str | None = None
            for step, (template, versions) in enumerate(plan):
                checkpoint = _fresh(template, step)
                saver.put(_config(thread, parent), checkpoint, {"step": step}, _versions(versions))
                parent = checkpoint["id"]
            if time.perf_counter() - last > 10:
                last = time.perf_counter()
                _progress(f"built {n + 1:,}/{threads:,} threads, {last - started:.0f} s")
    return time.perf_counter() - started


def _shape(path: Path) -> tuple[int, int]:
    """(threads, checkpoints) the saver holds in ``path``."""
    with ckptdb.open(path, readonly=True) as db, db.read_session() as s:
        row = s.one("SELECT count(DISTINCT thread_id), count(*) FROM lg_checkpoint")
    assert row is not None
    return int(row[0]), int(row[1])


class Putter:
    """A Python thread putting the next step on ``live`` threads round-robin, timing each."""

    def __init__(self, saver: CkptdbSaver, live: int, steps: int) -> None:
        self.saver = saver
        self.plan = make_steps(WORKLOADS["1kb"], steps, seed=99)
        self.threads = [f"live-{n}" for n in range(live)]
        self.parents: dict[str, str | None] = dict.fromkeys(self.threads)
        self.step = 0
        self.latencies: list[float] = []
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-putter")

    def _put_one(self) -> float:
        thread = self.threads[self.step % len(self.threads)]
        template, versions = self.plan[self.step % len(self.plan)]
        checkpoint = _fresh(template, self.step)
        began = time.perf_counter()
        self.saver.put(
            _config(thread, self.parents[thread]),
            checkpoint,
            {"step": self.step},
            _versions(versions),
        )
        took = time.perf_counter() - began
        self.parents[thread] = checkpoint["id"]
        self.step += 1
        return took

    def _run(self) -> None:
        while not self.stop.is_set():
            self.latencies.append(self._put_one())

    def warm(self, puts: int) -> None:
        """Give every live thread some history first (untimed)."""
        for _ in range(puts):
            self._put_one()

    def start(self) -> None:
        """Begin putting; :meth:`finish` ends it and returns the latencies (seconds)."""
        self.latencies = []
        self.stop.clear()
        self._thread = threading.Thread(target=self._run, name="bench-putter")
        self._thread.start()

    def finish(self) -> list[float]:
        """Stop putting and return this phase's latencies (seconds)."""
        self.stop.set()
        self._thread.join()
        return self.latencies


def _summary(latencies: list[float], seconds: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "puts": len(ordered),
        "puts_per_s": len(ordered) / seconds,
        "p50_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3,
        "max_ms": ordered[-1] * 1e3,
    }


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _flush(path: Path) -> None:
    """Write the copy's pages to disk now: else the first fsync of the measured puts
    flushes the whole copied file (a half-second stall in the baseline)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swept(saver: CkptdbSaver) -> bool:
    """Whether no expired thread is left (the one being deleted may read as not expired)."""
    report = saver.sweep_expired(dry_run=True, limit=1)
    return report.complete and not report.threads_expired


def measure(path: Path, live: int, baseline_s: float, batch: int, mode: str) -> dict[str, Any]:
    """The two phases of the module docstring on ``path`` (changed: a scratch copy), the
    sweep run ``mode``: "on_demand" (``sweep_expired()``) or "background" (the sweeper of a
    second saver on the same handle, which sweeps as it starts; its end is polled)."""
    ttl = ThreadTTL(timedelta(days=1), strategy="delete", sweep_interval=None, batch=batch)
    threads, checkpoints = _shape(path)
    with ckptdb.open(path) as db:
        saver = CkptdbSaver(db, ttl=ttl)
        putter = Putter(saver, live, 50)
        putter.warm(live * 5)
        before = {"file_bytes": _file_bytes(path), "blobs": db.stats().blobs}
        _progress(f"{mode}: without a sweep, putting on {live} threads for {baseline_s:g} s")
        began = time.perf_counter()
        putter.start()
        time.sleep(baseline_s)
        quiet = putter.finish()
        quiet_s = time.perf_counter() - began
        _progress(f"{mode}: during the sweep of {threads:,} threads")
        putter.start()
        began = time.perf_counter()
        if mode == "on_demand":
            report = saver.sweep_expired()
            expired, deleted = len(report.threads_expired), report.checkpoints_deleted
        else:
            background = ThreadTTL(timedelta(days=1), sweep_interval=timedelta(days=1), batch=batch)
            with CkptdbSaver(db, ttl=background):
                while not _swept(saver):
                    time.sleep(POLL_S)
            expired, deleted = threads, checkpoints  # checked below: nothing expired is left
        sweep_s = time.perf_counter() - began
        busy = putter.finish()
        after = {"file_bytes": _file_bytes(path), "blobs": db.stats().blobs}
        namespaces_left = len(db.namespaces())
        saver.close()
    if expired != threads or deleted != checkpoints or namespaces_left != live:
        raise SystemExit(f"{mode}: the sweep expired {expired} threads, {deleted} checkpoints")
    without = _summary(quiet, quiet_s)
    during = _summary(busy, sweep_s)
    return {
        "without_sweep": without,
        "during_sweep": during,
        "ratio": {key: during[key] / without[key] for key in ("p50_ms", "p99_ms", "puts_per_s")},
        "sweep_s": sweep_s,
        "threads_per_s": threads / sweep_s,
        "checkpoints_deleted": deleted,
        "namespaces_left": namespaces_left,
        "before": before,
        "after": after,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 threads x 10, 1 s baseline")
    parser.add_argument("--threads", type=int, help="expired threads (default 1000)")
    parser.add_argument("--steps", type=int, help="checkpoints per thread (default 100)")
    parser.add_argument("--live", type=int, default=10, help="threads the putter writes on")
    parser.add_argument("--baseline-s", type=float, help="seconds without a sweep (default 10)")
    parser.add_argument("--batch", type=int, default=100, help="ThreadTTL batch")
    parser.add_argument("--file", type=Path, help="build the file here, or reuse it if there")
    parser.add_argument("--json", dest="json_path", help="also write the results as JSON")
    args = parser.parse_args(argv)
    threads = args.threads or (20 if args.quick else 1000)
    steps = args.steps or (10 if args.quick else 100)
    baseline_s = args.baseline_s or (1.0 if args.quick else 10.0)
    directory = Path(tempfile.mkdtemp(prefix="bench-ttl-"))
    try:
        built = args.file or directory / "built.db"
        build_s = None
        if built.exists() and _shape(built) == (threads, threads * steps):
            _progress(f"reusing {built}")
        else:
            if built.exists():
                raise SystemExit(f"{built} holds another shape than {threads} x {steps}")
            _progress(f"building {threads:,} threads x {steps} checkpoints into {built}")
            build_s = build(built, threads, steps)
        results: dict[str, Any] = {
            "threads": threads,
            "steps": steps,
            "checkpoints": threads * steps,
            "live_threads": args.live,
            "batch": args.batch,
            "build_s": build_s,
        }
        for mode in MODES:
            scratch = directory / f"{mode}.db"
            shutil.copyfile(built, scratch)
            _flush(scratch)
            results[mode] = measure(scratch, args.live, baseline_s, args.batch, mode)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{scratch}{suffix}").unlink(missing_ok=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print_report(results)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def print_report(r: dict[str, Any]) -> None:
    """The results for people."""
    print(
        f"{r['threads']:,} expired threads ({r['checkpoints']:,} checkpoints) swept beside"
        f" puts on {r['live_threads']} live threads, batch {r['batch']}"
    )
    print(f"{'':28}{'puts':>7}{'puts/s':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for mode in MODES:
        m = r[mode]
        for label, key in (("without a sweep", "without_sweep"), ("during it", "during_sweep")):
            row = m[key]
            print(
                f"{mode + ': ' + label:28}{row['puts']:>7}{row['puts_per_s']:>8.0f}"
                f"{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}{row['max_ms']:>9.2f}"
            )
        ratio = m["ratio"]
        print(
            f"  during / without: p50 {ratio['p50_ms']:.2f}x, p99 {ratio['p99_ms']:.2f}x,"
            f" puts/s {ratio['puts_per_s']:.2f}x; sweep {m['sweep_s']:.1f} s,"
            f" {m['threads_per_s']:.0f} threads/s; file {m['before']['file_bytes']:,} ->"
            f" {m['after']['file_bytes']:,} bytes, blobs {m['before']['blobs']:,} ->"
            f" {m['after']['blobs']:,}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
