"""Benchmark: which page size should a new ckptdb file get?

    python tools/bench_pagesize.py              # 3 interleaved rounds (about a minute)
    python tools/bench_pagesize.py --quick      # 1 small round (seconds)
    python tools/bench_pagesize.py --json out.json

Three workloads, each on a file per page size (4, 8 and 16 KiB), interleaved in rounds so
that the machine's drift hits every size alike, all durable (synchronous=FULL):

* ``small``     -- commits of 3 entries of 1 KiB with fresh content (commits/s);
* ``langgraph`` -- commits shaped like the LangGraph saver's: 10 channels of 10 KB, one of
  which changes per commit (commits/s);
* ``large``     -- one commit of a 64 MiB entry (MB/s).

Reported: the median of each workload per page size, and each size's ratio to 4 KiB.
``ckptdb.connection.DEFAULT_PAGE_SIZE`` was chosen with this tool (docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import ckptdb

PAGE_SIZES = (4096, 8192, 16384)


def run(
    rounds: int, small: int, langgraph: int, large_mib: int, workdir: Path
) -> dict[str, object]:
    dbs = {ps: ckptdb.open(workdir / f"p{ps}.ckpt", page_size=ps) for ps in PAGE_SIZES}
    rng = random.Random(1)
    channels = {f"c{i}": rng.randbytes(10_000) for i in range(10)}
    rates: dict[int, dict[str, list[float]]] = {
        ps: {"small": [], "langgraph": [], "large": []} for ps in PAGE_SIZES
    }
    try:
        for _ in range(rounds):
            for ps, db in dbs.items():
                t0 = time.perf_counter()
                for _ in range(small):
                    db.commit("small", {k: os.urandom(1024) for k in ("a", "b", "c")})
                rates[ps]["small"].append(small / (time.perf_counter() - t0))
                t0 = time.perf_counter()
                for i in range(langgraph):
                    channels[f"c{i % 10}"] = rng.randbytes(10_000)
                    db.commit("langgraph", dict(channels))
                rates[ps]["langgraph"].append(langgraph / (time.perf_counter() - t0))
                data = os.urandom(large_mib << 20)
                t0 = time.perf_counter()
                db.commit("large", {"x": data})
                rates[ps]["large"].append(large_mib * 1.048576 / (time.perf_counter() - t0))
    finally:
        for db in dbs.values():
            db.close()
    medians = {
        ps: {k: round(statistics.median(v), 1) for k, v in per.items()} for ps, per in rates.items()
    }
    base = medians[4096]
    return {
        "units": {"small": "commits/s", "langgraph": "commits/s", "large": "MB/s"},
        "median": {str(ps): m for ps, m in medians.items()},
        "ratio_to_4096": {
            str(ps): {k: round(v / base[k], 2) for k, v in m.items()} for ps, m in medians.items()
        },
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small round")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ckptdb-pagesize-"))
    try:
        if args.quick:
            result = run(rounds=1, small=30, langgraph=20, large_mib=8, workdir=workdir)
        else:
            result = run(rounds=3, small=150, langgraph=100, large_mib=64, workdir=workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
