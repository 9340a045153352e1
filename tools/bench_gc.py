"""Benchmark: GC over many checkpoints, and how its cost scales.

    python tools/bench_gc.py            # 10,000 and 100,000 checkpoints (a few minutes)
    python tools/bench_gc.py --quick    # 2,000 and 10,000 (CI smoke run)
    python tools/bench_gc.py --json out.json
    python tools/bench_gc.py --against ../main --rounds 3    # side by side with another tree
    python tools/bench_gc.py --cache /tmp/gcfiles           # keep (and reuse) the built files
    python tools/bench_gc.py --quick --against ../main --rounds 7 --batch 2000

For each size N: N checkpoints over 100 namespaces whose entries share blobs (10 shared
8 KiB blobs plus a small unique state each). Then, timed: a dry run, and a GC keeping the
newest 5 per namespace. Reported: checkpoints deleted per second, bytes freed, file size
before/after, the CPU time the GC took, and the ratio of the per-deleted-checkpoint cost at
the large size to the small one (1.0 = linear in what is deleted; quadratic behaviour would
show as ~10).

Each file is built once and every measurement runs in a fresh process on a copy of it.
``--against DIR`` measures a second source tree (a checkout or ``git archive`` of another
commit: its ``ckptdb`` package is imported from DIR) on copies of files of the same content
built by that tree (so each version runs on its own schema), alternating the order of the
two versions from round to round, and reports each version's median and the median of the
paired ratios. On a shared machine compare the versions within one run: wall times move
with the load, CPU times much less. GC sizes its sweep batches by the time each one took,
so under load two versions may run different batches: ``--batch N`` fixes the size (every
version then runs the same statements) to compare their CPU times.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NAMESPACES = 100
HERE = Path(__file__).resolve().parents[1]


def build(path: Path, n: int) -> None:
    import ckptdb

    shared = [os.urandom(8192) for _ in range(10)]
    with ckptdb.open(path, synchronous="normal") as db:  # set-up only; not measured
        for i in range(n):
            db.commit(
                f"ns-{i % NAMESPACES:03d}",
                {"shared.bin": shared[i % 10], "state.json": f'{{"i": {i}}}'.encode() * 8},
                metadata={"i": i},
            )
        db._handle.store.conn.wal_checkpoint("TRUNCATE")


def file_bytes(path: Path) -> int:
    return sum(
        os.stat(str(path) + s).st_size for s in ("", "-wal") if os.path.exists(str(path) + s)
    )


def measure_file(path: Path, batch: int | None = None) -> dict[str, Any]:
    """Dry run, then GC, on ``path`` with whatever ckptdb this process imports (its sweep
    batches fixed at ``batch`` checkpoints when given)."""
    import ckptdb
    from ckptdb.ops import gc

    if batch is not None:
        gc.SWEEP_BATCH = gc.SWEEP_BATCH_MIN = gc.SWEEP_BATCH_MAX = batch

    policy = ckptdb.RetentionPolicy(keep_last=5)
    with ckptdb.open(path) as db:
        checkpoints = db.stats().checkpoints
        before = file_bytes(path)
        t0 = time.perf_counter()
        plan = db.gc(policy, grace=0, dry_run=True)
        dry_s = time.perf_counter() - t0
        # GC reports progress after each sweep transaction: the longest gap between two
        # reports bounds how long one batch held the write lock (it also includes the
        # automatic WAL checkpoint that may follow a COMMIT, so it is an upper bound).
        marks: list[float] = []
        c0, t0 = time.process_time(), time.perf_counter()
        report = db.gc(policy, grace=0, progress=lambda _d, _t: marks.append(time.perf_counter()))
        gc_s, gc_cpu = time.perf_counter() - t0, time.process_time() - c0
        gaps = [b - a for a, b in itertools.pairwise(marks)]
        assert report.deleted_ids == plan.deleted_ids
        assert db.verify(quick=True).ok
    deleted = max(report.checkpoints_deleted, 1)
    return {
        "checkpoints": checkpoints,
        "dry_run_seconds": round(dry_s, 3),
        "gc_seconds": round(gc_s, 3),
        "gc_cpu_seconds": round(gc_cpu, 3),
        "deleted": report.checkpoints_deleted,
        "deleted_per_second": round(report.checkpoints_deleted / gc_s, 1),
        "bytes_freed": report.bytes_freed,
        "file_bytes_before": before,
        "file_bytes_after": file_bytes(path),
        "us_per_deleted": round(gc_s / deleted * 1e6, 1),
        "cpu_us_per_deleted": round(gc_cpu / deleted * 1e6, 1),
        "sweep_batches": len(marks),
        "longest_batch_seconds": round(max(gaps), 3) if gaps else None,
        "ckptdb": str(Path(ckptdb.__file__).resolve().parents[1]),
    }


def measure_in_child(
    base: Path, tree: Path, workdir: Path, batch: int | None = None
) -> dict[str, Any]:
    """Copy ``base`` and measure GC on the copy in a fresh process importing ``tree``."""
    path = workdir / "run.ckpt"
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    shutil.copyfile(base, path)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--measure-file",
            str(path),
            *(() if batch is None else ("--batch", str(batch))),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"measuring {tree} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    if Path(result["ckptdb"]) != tree.resolve():
        raise SystemExit(f"the child imported ckptdb from {result['ckptdb']}, not {tree}")
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return result


def built(n: int, directory: Path, tree: Path, tag: str) -> tuple[Path, float | None]:
    """The base file of ``n`` checkpoints in ``directory``, written by ``tree``'s ckptdb in
    a child process (built unless already there): each version is measured on a file of
    its own schema, so a tree older than this one's schema can still be compared."""
    # The schema version (migrations shipped) is in the name, so a --cache reused with
    # another tree never hands it a file of another schema.
    schema = len(list((tree / "migrations").glob("*.sql")))
    path = directory / f"gc-base-{tag}-v{schema}-{n}.ckpt"
    if path.exists() and not Path(str(path) + "-wal").exists():
        return path, None
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--build-file", str(path),
         "--build-size", str(n)],
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"building with {tree} failed:\n{done.stderr[-3000:]}")
    return path, round(time.perf_counter() - t0, 1)


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median GC time (its own figures, not a mix), plus the medians."""
    ordered = sorted(runs, key=lambda r: r["gc_seconds"])
    out = dict(ordered[(len(ordered) - 1) // 2])
    out["gc_seconds_all"] = [r["gc_seconds"] for r in runs]
    out["gc_cpu_seconds_all"] = [r["gc_cpu_seconds"] for r in runs]
    out["gc_cpu_seconds_median"] = round(statistics.median(out["gc_cpu_seconds_all"]), 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 and 10,000 checkpoints")
    parser.add_argument("--sizes", help="comma-separated sizes, small then large")
    parser.add_argument("--against", type=Path, help="another source tree to measure beside")
    parser.add_argument("--rounds", type=int, default=1, help="measurements per version/size")
    parser.add_argument("--cache", type=Path, help="keep the built files here and reuse them")
    parser.add_argument("--batch", type=int, help="fixed sweep batch size (compare CPU)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--measure-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--build-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--build-size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_file is not None:
        build(args.build_file, args.build_size)
        return
    if args.measure_file is not None:
        print(json.dumps(measure_file(args.measure_file, args.batch)))
        return
    if args.sizes:
        small, large = (int(s) for s in args.sizes.split(","))
    else:
        small, large = (2_000, 10_000) if args.quick else (10_000, 100_000)
    trees = {"this": HERE}
    if args.against is not None:
        if not (args.against / "ckptdb" / "__init__.py").exists():
            raise SystemExit(f"{args.against} holds no ckptdb package")
        trees["against"] = args.against.resolve()
    sys.path.insert(0, str(HERE))
    workdir = Path(tempfile.mkdtemp(prefix="ckptdb-bench-gc-"))
    store = args.cache if args.cache is not None else workdir
    store.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[int, list[dict[str, Any]]]] = {v: {} for v in trees}
    build_seconds: dict[int, float | None] = {}
    try:
        for n in (small, large):
            bases: dict[str, Path] = {}
            for version, tree in trees.items():
                bases[version], seconds = built(n, store, tree, version)
                if version == "this":
                    build_seconds[n] = seconds
            for r in range(args.rounds):
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for version in order:
                    run = measure_in_child(bases[version], trees[version], workdir, args.batch)
                    results[version].setdefault(n, []).append(run)
                    print(
                        f"{n:>7} {version:8} gc {run['gc_seconds']:.3f} s"
                        f" (cpu {run['gc_cpu_seconds']:.3f} s), {run['sweep_batches']} batches",
                        file=sys.stderr,
                    )
            if args.cache is None:
                for base in bases.values():
                    base.unlink()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def summary(version: str) -> dict[str, Any]:
        runs = [_median_run(results[version][n]) for n in (small, large)]
        for run, n in zip(runs, (small, large), strict=True):
            run["build_seconds"] = build_seconds[n]
        return {
            "tree": str(trees[version]),
            "runs": runs,
            "scaling_ratio_per_deleted": round(
                float(runs[1]["us_per_deleted"]) / float(runs[0]["us_per_deleted"]), 2
            ),
            "scaling_ratio_cpu_per_deleted": round(
                float(runs[1]["cpu_us_per_deleted"]) / float(runs[0]["cpu_us_per_deleted"]), 2
            ),
        }

    mine = summary("this")
    result: dict[str, Any] = {
        **mine,
        "size_ratio": large / small,
        "rounds": args.rounds,
        "batch": args.batch,
    }
    if "against" in trees:
        other = summary("against")
        paired = {
            str(n): {
                "gc_seconds": round(
                    statistics.median(
                        a["gc_seconds"] / b["gc_seconds"]
                        for a, b in zip(results["this"][n], results["against"][n], strict=True)
                    ),
                    3,
                ),
                "gc_cpu_seconds": round(
                    statistics.median(
                        a["gc_cpu_seconds"] / b["gc_cpu_seconds"]
                        for a, b in zip(results["this"][n], results["against"][n], strict=True)
                    ),
                    3,
                ),
            }
            for n in (small, large)
        }
        result["against"] = other
        result["paired_ratio_this_over_against"] = paired
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
