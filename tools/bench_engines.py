"""Benchmark: the same workloads on ckptdb-on-SQLite and ckptdb-on-PostgreSQL, so users can
choose an engine (docs/performance.md, "SQLite or PostgreSQL").

Three workloads, each through the public API, each engine in turn and interleaved:

* ``put``: a commit of a small state (a 1 KB entry that changes, a 20 KB one that does not)
  on top of CURRENT, into ``--namespaces`` namespaces in turn;
* ``cold get``: a new handle reads CURRENT of a random namespace and its changing entry
  (the manifest check and the entry's digest check included), at ``--checkpoints`` stored;
* ``lineage``: the newest 10 checkpoints of a random namespace.

(The server's CPU is read from its processes' counters, in ticks of 10 ms: a run of a few
operations may show 0 for it. The figures in docs/performance.md are of 400 operations.)

Figures per operation: wall-clock microseconds (median), and CPU microseconds -- the
client process's own, and for PostgreSQL also the server's (its processes' CPU over the
run, divided by the operations), because on PostgreSQL part of every operation's work is
done in another process. ``synchronous=full`` on SQLite against PostgreSQL's default
``synchronous_commit=on``: both make every commit durable, so the wall-clock put figures
include this machine's fsync (0.05-4 ms, run to run): compare CPU.

    python tools/bench_engines.py --quick        # 2,000 checkpoints (about a minute)
    python tools/bench_engines.py                # 100,000 checkpoints
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

import ckptdb
from ckptdb.testing.postgres import PostgresServer

_UNCHANGED = bytes(range(256)) * 80  # 20 KB: deduplicated after the first commit


def _state(n: int) -> dict[str, bytes]:
    return {"messages": f"{n:08d}".encode() * 128, "tools": _UNCHANGED}


def _fill(target: str, checkpoints: int, namespaces: int) -> None:
    with ckptdb.open(target) as db:
        for n in range(checkpoints):
            db.commit(f"thread/{n % namespaces}", _state(n))


def _server_cpu(server: PostgresServer | None) -> float:
    """CPU seconds the server's processes used so far (0 without a server)."""
    if server is None or server.pid is None:
        return 0.0
    parent = psutil.Process(server.pid)
    total = 0.0
    for proc in [parent, *parent.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def _measure(
    run: Callable[[int], None], ops: int, server: PostgresServer | None
) -> dict[str, float]:
    walls: list[float] = []
    cpu0, server0 = time.process_time(), _server_cpu(server)
    for i in range(ops):
        started = time.perf_counter()
        run(i)
        walls.append(time.perf_counter() - started)
    cpu1, server1 = time.process_time(), _server_cpu(server)
    client = (cpu1 - cpu0) / ops
    return {
        "wall_us": round(statistics.median(walls) * 1e6, 1),
        "client_cpu_us": round(client * 1e6, 1),
        "server_cpu_us": round((server1 - server0) / ops * 1e6, 1),
        "cpu_us": round((client + (server1 - server0) / ops) * 1e6, 1),
    }


def _workloads(
    target: str, namespaces: int, ops: int, server: PostgresServer | None, seed: int
) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    out: dict[str, dict[str, float]] = {}
    with ckptdb.open(target) as db:
        out["put"] = _measure(
            lambda i: db.commit(f"thread/{i % namespaces}", _state(10**7 + i)), ops, server
        )

    picks = [f"thread/{rng.randrange(namespaces)}" for _ in range(ops)]

    def cold_get(i: int) -> None:
        with ckptdb.open(target) as fresh:
            cp = fresh.current(picks[i])
            assert cp is not None
            cp.read("messages")

    out["cold_get"] = _measure(cold_get, max(ops // 4, 10), server)
    with ckptdb.open(target) as db:
        out["lineage"] = _measure(lambda i: db.lineage(picks[i], limit=10), ops, server)
    return out


def run(checkpoints: int, namespaces: int, ops: int, seed: int) -> dict[str, Any]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ckptdb-bench-engines-") as tmp:
        path = str(Path(tmp) / "bench.ckpt")
        with PostgresServer() as server:
            url = server.create_database("bench")
            _fill(path, checkpoints, namespaces)
            _fill(url, checkpoints, namespaces)
            built = time.monotonic() - started
            sqlite = _workloads(path, namespaces, ops, None, seed)
            postgresql = _workloads(url, namespaces, ops, server, seed)
            with ckptdb.open(url) as db:
                pg_bytes = db.stats().file_bytes
            with ckptdb.open(path) as db:
                stats = db.stats()
                sqlite_bytes = stats.file_bytes + stats.wal_bytes
    ratios = {
        name: {
            key: round(postgresql[name][key] / sqlite[name][key], 2)
            for key in ("wall_us", "cpu_us")
            if sqlite[name][key]
        }
        for name in sqlite
    }
    return {
        "checkpoints": checkpoints,
        "namespaces": namespaces,
        "ops": ops,
        "sqlite": sqlite,
        "postgresql": postgresql,
        "postgresql_over_sqlite": ratios,
        "postgresql_database_bytes": pg_bytes,
        "sqlite_file_bytes": sqlite_bytes,
        "seconds_build": round(built, 1),
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 checkpoints")
    parser.add_argument("--checkpoints", type=int)
    parser.add_argument("--namespaces", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=400)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    count = args.checkpoints or (2_000 if args.quick else 100_000)
    namespaces = min(args.namespaces, count)
    result = run(count, namespaces, args.ops if not args.quick else min(args.ops, 200), args.seed)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
