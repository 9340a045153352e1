"""Benchmark: GC over many checkpoints, and how its cost scales.

    python tools/bench_gc.py            # 10,000 and 100,000 checkpoints (a few minutes)
    python tools/bench_gc.py --quick    # 2,000 and 10,000 (CI smoke run)
    python tools/bench_gc.py --json out.json

For each size N: N checkpoints over 100 namespaces whose entries share blobs (10 shared
8 KiB blobs plus a small unique state each). Then, timed: a dry run, and a GC keeping the
newest 5 per namespace. Reported: checkpoints deleted per second, bytes freed, file size
before/after, and the ratio of the per-deleted-checkpoint cost at the large size to the
small one (1.0 = linear in what is deleted; quadratic behaviour would show as ~10).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import ckptdb

NAMESPACES = 100


def build(path: Path, n: int) -> None:
    shared = [os.urandom(8192) for _ in range(10)]
    with ckptdb.open(path, synchronous="normal") as db:  # set-up only; not measured
        for i in range(n):
            db.commit(
                f"ns-{i % NAMESPACES:03d}",
                {"shared.bin": shared[i % 10], "state.json": f'{{"i": {i}}}'.encode() * 8},
                metadata={"i": i},
            )


def file_bytes(path: Path) -> int:
    return sum(
        os.stat(str(path) + s).st_size for s in ("", "-wal") if os.path.exists(str(path) + s)
    )


def measure(n: int, workdir: Path) -> dict[str, float | int]:
    path = workdir / f"gc-{n}.ckpt"
    t0 = time.perf_counter()
    build(path, n)
    build_s = time.perf_counter() - t0
    policy = ckptdb.RetentionPolicy(keep_last=5)
    with ckptdb.open(path) as db:
        db._handle.store.conn.wal_checkpoint("TRUNCATE")
        before = file_bytes(path)
        t0 = time.perf_counter()
        plan = db.gc(policy, grace=0, dry_run=True)
        dry_s = time.perf_counter() - t0
        # GC reports progress after each sweep transaction: the longest gap between two
        # reports bounds how long one batch held the write lock (it also includes the
        # automatic WAL checkpoint that may follow a COMMIT, so it is an upper bound).
        marks: list[float] = []
        t0 = time.perf_counter()
        report = db.gc(policy, grace=0, progress=lambda _d, _t: marks.append(time.perf_counter()))
        gc_s = time.perf_counter() - t0
        gaps = [b - a for a, b in itertools.pairwise(marks)]
        assert report.deleted_ids == plan.deleted_ids
        assert db.verify(quick=True).ok
    after = file_bytes(path)
    path.unlink()
    return {
        "checkpoints": n,
        "build_seconds": round(build_s, 1),
        "dry_run_seconds": round(dry_s, 3),
        "gc_seconds": round(gc_s, 3),
        "deleted": report.checkpoints_deleted,
        "deleted_per_second": round(report.checkpoints_deleted / gc_s, 1),
        "bytes_freed": report.bytes_freed,
        "file_bytes_before": before,
        "file_bytes_after": after,
        "us_per_deleted": round(gc_s / max(report.checkpoints_deleted, 1) * 1e6, 1),
        "sweep_batches": len(marks),
        "longest_batch_seconds": round(max(gaps), 3) if gaps else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    small, large = (2_000, 10_000) if args.quick else (10_000, 100_000)
    workdir = Path(tempfile.mkdtemp(prefix="ckptdb-bench-gc-"))
    try:
        runs = [measure(small, workdir), measure(large, workdir)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = {
        "runs": runs,
        "scaling_ratio_per_deleted": round(
            float(runs[1]["us_per_deleted"]) / float(runs[0]["us_per_deleted"]), 2
        ),
        "size_ratio": large / small,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
