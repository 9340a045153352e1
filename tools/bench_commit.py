"""Benchmark: publishing checkpoints with ckptdb vs. a filesystem store vs. the SQLite floor.

    python tools/bench_commit.py                 # full run (small commits + 1 GiB entry)
    python tools/bench_commit.py --quick         # seconds, for CI / a smoke check
    python tools/bench_commit.py --json out.json
    python tools/bench_commit.py --only threads  # group commit: 8 threads vs 1, one handle
    python tools/bench_commit.py --only threads --sync-ms 2  # ... with an emulated 2 ms fsync
    python tools/bench_commit.py --only quota    # what quotas cost a small commit

Small commits: 3 entries of 1 KiB with fresh content each time, durable (fsync) in all
three contenders, measured in interleaved rounds in one run and reported as ratios:

* ``fs-store``  -- the seed store's protocol: a staging directory, each file written and
  fsynced, the directory fsynced, renamed into ``checkpoints/<id>``, the parent fsynced,
  then ``CURRENT`` written to a temp file, fsynced, renamed, and its directory fsynced.
* ``floor``     -- a bare apsw ``BEGIN IMMEDIATE`` inserting the same three byte strings,
  WAL + synchronous=FULL, same page size as ckptdb: the cost of one durable SQLite commit.
* ``ckptdb``    -- ``Database.commit`` (hash, manifest, entries, pointer move, history).

Threads: 8 threads committing small commits (the same 3 x 1 KiB, a namespace each) through
ONE handle vs 1 thread on that handle, with group commit (the default) and without it
(``group_commit=False``: every commit its own transaction, the behaviour before group
commit), all four measured in interleaved rounds in one run. Also the single caller's
median latency with and without group commit (a lone caller must pay nothing for it), and
how many commits each write transaction of the 8-thread runs carried (the batch sizes).
``--sync-ms N`` opens both handles through ``ckptdb.connection.slow_sync``, a VFS whose
fsync is a sleep of N ms: this VM's own fsync swings between 0.05 and 4 ms from run to run,
too little and too unsteady to show what sharing one fsync is worth on a real disk.

Quota: the same small commits, one handle per configuration, interleaved: no quota row at
all; 100 quotas none of which covers the namespace; a refusing quota that covers it (with a
count and a byte limit, never reached: the namespace grows through the run); an evicting
quota of 100 checkpoints on it (once full, every commit evicts one, the steady state of
"keep the newest N"). Reported as commits/s, CPU time per commit (less exposed to the
shared disk's fsync noise), and the CPU time of the check alone when nothing is evicted.

Large entry: write and read of one streamed entry of random bytes (nothing to compress or
dedup) vs. writing the same bytes to a plain file with fsync and reading them back; peak RSS
growth of the ckptdb process.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import apsw

import ckptdb
from ckptdb.connection import DEFAULT_PAGE_SIZE
from ckptdb.connection.slow_sync import SlowSyncVFS
from ckptdb.ops import quota as quota_op
from ckptdb.ops.unit import writing

ENTRY_NAMES = ("graph/snapshot.json", "ingest_roots.json", "notes.bin")
ENTRY_SIZE = 1024


def fresh_entries(i: int) -> dict[str, bytes]:
    seed = i.to_bytes(8, "little")
    return {
        name: (hashlib.sha256(seed + name.encode()).digest() * (ENTRY_SIZE // 32 + 1))[:ENTRY_SIZE]
        for name in ENTRY_NAMES
    }


def _fsync_path(path: Path, directory: bool = False) -> None:
    flags = os.O_RDONLY | (os.O_DIRECTORY if directory else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FsStore:
    """The seed store's publish protocol, written plainly in Python."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "checkpoints").mkdir(parents=True)
        (root / "files").mkdir()
        self.current: str | None = None

    def commit(self, entries: dict[str, bytes]) -> None:
        digests = {name: hashlib.sha256(data).hexdigest() for name, data in entries.items()}
        manifest = json.dumps({"parent": self.current, "files": digests}, sort_keys=True).encode()
        cid = hashlib.sha256(manifest).hexdigest()
        staging = self.root / "checkpoints" / f".staging-{cid}"
        staging.mkdir()
        for name, data in entries.items():
            blob = staging / digests[name]
            fd = os.open(blob, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(staging / "manifest.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, manifest)
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_path(staging, directory=True)
        os.rename(staging, self.root / "checkpoints" / cid)
        _fsync_path(self.root / "checkpoints", directory=True)
        tmp = self.root / "CURRENT.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, json.dumps({"current": cid, "fallback": self.current}).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, self.root / "CURRENT")
        _fsync_path(self.root, directory=True)
        self.current = cid


class Floor:
    """One durable SQLite transaction inserting the same bytes: the yardstick."""

    def __init__(self, path: Path) -> None:
        self.conn = apsw.Connection(str(path))
        self.conn.pragma("page_size", DEFAULT_PAGE_SIZE)
        self.conn.pragma("journal_mode", "WAL")
        self.conn.pragma("synchronous", "FULL")
        self.conn.execute("CREATE TABLE blob (name TEXT, data BLOB)")

    def commit(self, entries: dict[str, bytes]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        for name, data in entries.items():
            self.conn.execute("INSERT INTO blob (name, data) VALUES (?, ?)", (name, data))
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def small_commits(rounds: int, per_round: int, workdir: Path) -> dict[str, object]:
    fs = FsStore(workdir / "fs-store")
    floor = Floor(workdir / "floor.db")
    db = ckptdb.open(workdir / "bench.ckpt")
    counter = [0]

    def run(commit: Callable[[dict[str, bytes]], object]) -> float:
        batch = [fresh_entries(counter[0] + k) for k in range(per_round)]
        counter[0] += per_round
        t0 = time.perf_counter()
        for entries in batch:
            commit(entries)
        return per_round / (time.perf_counter() - t0)

    contenders: dict[str, Callable[[dict[str, bytes]], object]] = {
        "fs-store": fs.commit,
        "floor": floor.commit,
        "ckptdb": lambda e: db.commit("bench", e),
    }
    for commit in contenders.values():  # warm up caches and files
        run(commit)
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, commit in contenders.items():
            rates[name].append(run(commit))
    floor.close()
    db.close()
    med = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "commits_per_second": {k: round(v, 1) for k, v in med.items()},
        "ckptdb_vs_fs_store": round(med["ckptdb"] / med["fs-store"], 2),
        "floor_vs_ckptdb": round(med["floor"] / med["ckptdb"], 2),
        "rounds": rounds,
        "commits_per_round": per_round,
    }


def threaded_commits(
    rounds: int, per_round: int, workdir: Path, threads: int = 8, sync_ms: float | None = None
) -> dict[str, object]:
    """Throughput of ``threads`` threads vs 1 thread on one handle, with and without group
    commit; a lone caller's latency with and without it; the group handle's batch sizes.
    ``sync_ms``: every fsync is a sleep of that long instead (the slow-sync VFS)."""
    slow = SlowSyncVFS("bench-slow-sync", sync_ms=sync_ms) if sync_ms is not None else None
    vfs = slow.name if slow is not None else None
    handles = {
        "group": ckptdb.open(workdir / "group.ckpt", vfs=vfs),
        "before": ckptdb.open(workdir / "before.ckpt", group_commit=False, vfs=vfs),
    }
    counter = [0]

    def batch(n: int) -> list[dict[str, bytes]]:
        out = [fresh_entries(10**9 + counter[0] + k) for k in range(n)]
        counter[0] += n
        return out

    def one_thread(db: ckptdb.Database) -> tuple[float, float, float]:
        """Commits/s, median latency, CPU seconds per commit."""
        work = batch(per_round)
        latencies = []
        c0 = time.process_time()
        t0 = time.perf_counter()
        for entries in work:
            t = time.perf_counter()
            db.commit("solo", entries)
            latencies.append(time.perf_counter() - t)
        rate = per_round / (time.perf_counter() - t0)
        return rate, statistics.median(latencies), (time.process_time() - c0) / per_round

    grouped = [0, 0]  # transactions and commits of the group handle's threaded runs
    # Members per write transaction in those runs (diagnostics below the public API).
    sizes: Counter[int] = Counter()

    def many_threads(db: ckptdb.Database) -> tuple[float, float]:
        """Commits/s, CPU seconds per commit (all threads)."""
        per_thread = per_round // threads
        work = [batch(per_thread) for _ in range(threads)]
        start = threading.Barrier(threads + 1)

        def worker(t: int) -> None:
            start.wait()
            for entries in work[t]:
                db.commit(f"t{t}", entries)

        pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        before = db.commit_batches
        sizes_before = db._group.batch_sizes.copy()
        start.wait()
        c0 = time.process_time()
        t0 = time.perf_counter()
        for thread in pool:
            thread.join()
        rate = per_thread * threads / (time.perf_counter() - t0)
        cpu = (time.process_time() - c0) / (per_thread * threads)
        after = db.commit_batches
        grouped[0] += after[0] - before[0]
        grouped[1] += after[1] - before[1]
        if db._group.enabled:
            sizes.update(db._group.batch_sizes - sizes_before)
        return rate, cpu

    for db in handles.values():  # warm up
        one_thread(db)
        many_threads(db)
    rates: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    latency: dict[str, list[float]] = {"group": [], "before": []}
    grouped[:] = [0, 0]
    sizes.clear()
    for _ in range(rounds):
        for name, db in handles.items():
            rate, median_latency, cpu_one = one_thread(db)
            rates.setdefault(f"{name}_1_thread", []).append(rate)
            cpu.setdefault(f"{name}_1_thread", []).append(cpu_one)
            latency[name].append(median_latency)
            rate, cpu_many = many_threads(db)
            rates.setdefault(f"{name}_{threads}_threads", []).append(rate)
            cpu.setdefault(f"{name}_{threads}_threads", []).append(cpu_many)
    for db in handles.values():
        db.close()
    if slow is not None:
        slow.unregister()
    med = {name: statistics.median(values) for name, values in rates.items()}
    lat = {name: statistics.median(values) for name, values in latency.items()}
    return {
        "sync_ms": sync_ms,
        "commits_per_second": {k: round(v, 1) for k, v in med.items()},
        # Process CPU (all threads) per commit: what the GIL serializes, so with a slow
        # fsync 8 threads reach at most (cpu 1 thread + fsync) / (cpu 8 threads + fsync / batch).
        "cpu_us_per_commit": {k: round(statistics.median(v) * 1e6, 1) for k, v in cpu.items()},
        f"group_{threads}_threads_vs_1_thread": round(
            med[f"group_{threads}_threads"] / med["group_1_thread"], 2
        ),
        f"before_{threads}_threads_vs_1_thread": round(
            med[f"before_{threads}_threads"] / med["before_1_thread"], 2
        ),
        f"group_vs_before_{threads}_threads": round(
            med[f"group_{threads}_threads"] / med[f"before_{threads}_threads"], 2
        ),
        "single_caller_latency_us": {k: round(v * 1e6, 1) for k, v in lat.items()},
        "single_caller_latency_group_vs_before": round(lat["group"] / lat["before"], 3),
        f"group_{threads}_threads_commits_per_transaction": round(grouped[1] / grouped[0], 2),
        f"group_{threads}_threads_batch_sizes": {str(k): sizes[k] for k in sorted(sizes)},
        "rounds": rounds,
        "commits_per_round": per_round,
    }


def _check_cpu_us(db: ckptdb.Database, calls: int = 5000) -> float:
    """CPU time of the quota check alone (``ops.quota.enforce``, as a commit to "bench"
    runs it, inside a write transaction), when it needs to evict nothing."""
    # Below the public API: the check is not one of its calls.
    with writing(db._handle) as tx:
        ns_id = tx.conn.scalar("SELECT namespace_id FROM namespace WHERE name = 'bench'")
        c0 = time.thread_time()
        for _ in range(calls):
            quota_op.enforce(tx, "bench", ns_id, "0" * 64)
        return round((time.thread_time() - c0) / calls * 1e6, 2)


def quota_commits(rounds: int, per_round: int, workdir: Path) -> dict[str, object]:
    """Small commits under each quota configuration (see the module docstring)."""
    setups: dict[str, Callable[[ckptdb.Database], object]] = {
        "none": lambda db: None,
        "unrelated_100": lambda db: [
            db.set_quota(f"tenant-{i:03d}/", max_checkpoints=10, applies_to=kind)
            for i in range(50)
            for kind in ("each", "total")
        ],
        "refuse_covering": lambda db: db.set_quota("", max_checkpoints=10**9, max_bytes=10**15),
        "evict_100": lambda db: db.set_quota("bench", max_checkpoints=100, on_exceed="evict"),
    }
    handles = {}
    for name, setup in setups.items():
        handles[name] = ckptdb.open(workdir / f"quota-{name}.ckpt")
        setup(handles[name])
    counter = [0]
    cpu: dict[str, list[float]] = {name: [] for name in handles}

    def run(name: str) -> float:
        db = handles[name]
        batch = [fresh_entries(2 * 10**9 + counter[0] + k) for k in range(per_round)]
        counter[0] += per_round
        c0 = time.thread_time()
        t0 = time.perf_counter()
        for entries in batch:
            db.commit("bench", entries)
        elapsed = time.perf_counter() - t0
        # CPU time of this thread: what the quota work adds, with less of the shared
        # disk's fsync noise than the wall clock (the commits are durable all the same).
        cpu[name].append((time.thread_time() - c0) / per_round)
        return per_round / elapsed

    for name in handles:  # warm up; fills the evicting namespace past its limit
        for _ in range(max(1, 120 // per_round + 1)):
            run(name)
    for values in cpu.values():
        values.clear()
    rates: dict[str, list[float]] = {name: [] for name in handles}
    for _ in range(rounds):
        for name in handles:
            rates[name].append(run(name))
    sizes = {name: db.stats().checkpoints for name, db in handles.items()}
    check = {name: _check_cpu_us(db) for name, db in handles.items()}
    evictions = len(handles["evict_100"].receipts(kind="quota_evict"))
    for db in handles.values():
        db.close()
    med = {name: statistics.median(values) for name, values in rates.items()}
    cpu_us = {name: statistics.median(values) * 1e6 for name, values in cpu.items()}
    return {
        "commits_per_second": {k: round(v, 1) for k, v in med.items()},
        "vs_none": {k: round(v / med["none"], 3) for k, v in med.items()},
        "extra_us_per_commit": {
            k: round(1e6 / v - 1e6 / med["none"], 1) for k, v in med.items() if k != "none"
        },
        "cpu_us_per_commit": {k: round(v, 1) for k, v in cpu_us.items()},
        "extra_cpu_us_per_commit": {
            k: round(v - cpu_us["none"], 1) for k, v in cpu_us.items() if k != "none"
        },
        "check_alone_cpu_us": check,
        "checkpoints_at_end": sizes,
        "evicting_commits": evictions,
        "rounds": rounds,
        "commits_per_round": per_round,
    }


LARGE_WORKER = r"""
import hashlib, json, os, sys, time
sys.path.insert(0, sys.argv[3])
from stream_worker import GeneratedStream, peak_rss_bytes, reset_peak_rss, rss_bytes
import ckptdb
size = int(sys.argv[2])
with ckptdb.open(sys.argv[1]) as db:
    db.commit("warm", {"x": b"1"})
    reset_peak_rss(); base = rss_bytes()
    src = os.path.join(os.path.dirname(sys.argv[1]), "src.bin")
    t0 = time.perf_counter()
    with open(src, "rb") as fh:
        ack = db.commit("big", {"big.bin": fh})
    write = time.perf_counter() - t0
    cp = db.get(ack.checkpoint_id)
    t0 = time.perf_counter()
    h = hashlib.sha256()
    with cp.open("big.bin") as fh:
        while piece := fh.read(1 << 20):
            h.update(piece)
    read = time.perf_counter() - t0
    print(json.dumps({"write": write, "read": read, "peak_growth": peak_rss_bytes() - base,
                      "digest": h.hexdigest()}))
"""


def large_entry(size: int, workdir: Path) -> dict[str, object]:
    src = workdir / "src.bin"
    # Seeded random bytes, none repeating: neither zstd nor chunk dedup can shrink them. (A
    # 1 MiB block repeated with a new 32-byte prefix, what this tool wrote before storage
    # format 2, dedups to ~1 MiB once chunks are content-defined: it measured 0.86x.)
    rng = random.Random(20261201)
    with open(src, "wb") as fh:
        written = 0
        while written < size:
            piece = rng.randbytes(min(1 << 20, size - written))
            fh.write(piece)
            written += len(piece)
    subprocess.run(["sync"], check=False)
    # Plain file: write with fsync, then read back (hashing, as ckptdb does).
    dst = workdir / "plain.bin"
    t0 = time.perf_counter()
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while piece := fin.read(4 << 20):
            hashlib.sha256(piece)  # ckptdb hashes what it writes; so does the baseline
            fout.write(piece)
        fout.flush()
        os.fsync(fout.fileno())
    plain_write = time.perf_counter() - t0
    t0 = time.perf_counter()
    h = hashlib.sha256()
    with open(dst, "rb") as fin:
        while piece := fin.read(1 << 20):
            h.update(piece)
    plain_read = time.perf_counter() - t0
    dst.unlink()
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            LARGE_WORKER,
            str(workdir / "large.ckpt"),
            str(size),
            str(Path(__file__).resolve().parent),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["digest"] == h.hexdigest(), "ckptdb returned different bytes"
    mb = size / 1e6
    return {
        "bytes": size,
        "plain_write_MBps": round(mb / plain_write, 1),
        "plain_read_MBps": round(mb / plain_read, 1),
        "ckptdb_write_MBps": round(mb / result["write"], 1),
        "ckptdb_read_MBps": round(mb / result["read"], 1),
        "write_ratio_vs_plain": round(plain_write / result["write"], 2),
        "read_ratio_vs_plain": round(plain_read / result["read"], 2),
        "peak_rss_growth_MiB": round(result["peak_growth"] / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temp dir)")
    parser.add_argument(
        "--only",
        choices=["small", "threads", "quota", "large"],
        help="run one part of the benchmark",
    )
    parser.add_argument(
        "--sync-ms",
        type=float,
        help="threads: every fsync is a sleep of this many ms (an emulated disk)",
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ckptdb-bench-", dir=args.dir))
    try:
        results: dict[str, object] = {"sqlite": apsw.sqlite_lib_version()}
        if args.only in (None, "small"):
            results["small_commit"] = small_commits(
                rounds=3 if args.quick else 7,
                per_round=50 if args.quick else 300,
                workdir=workdir,
            )
        if args.only in (None, "threads"):
            results["threads"] = threaded_commits(
                rounds=3 if args.quick else 7,
                per_round=80 if args.quick else 800,
                workdir=workdir,
                sync_ms=args.sync_ms,
            )
        if args.only in (None, "quota"):
            results["quota"] = quota_commits(
                rounds=5 if args.quick else 9,
                per_round=50 if args.quick else 300,
                workdir=workdir,
            )
        if args.only in (None, "large"):
            results["large_entry"] = large_entry(64 << 20 if args.quick else 1 << 30, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
