"""Benchmark: what zeroing freed content (SQLite's ``secure_delete``) costs, and so why
ckptdb turns it on only in files with key scopes.

    python tools/bench_secure_delete.py            # 40 interleaved batches, 5 GC rounds
    python tools/bench_secure_delete.py --quick    # CI smoke run
    python tools/bench_secure_delete.py --json out.json

Three modes, each on its own fresh file without key scopes, measured in one process:

* ``off``   -- no check, ``secure_delete`` 0: ckptdb before the key-traces fix;
* ``check`` -- what a file without key scopes gets now: one read of ``key_scope`` at the
  start of every write transaction (``ops/handle.py``), nothing zeroed;
* ``on``    -- ``secure_delete`` ON: what a file with key scopes gets (and what every file
  would get if it were simply always on).

Measured: CPU per small commit (1 KiB entry and small metadata on a warm handle, the three
handles driven in interleaved batches so load from other processes hits all alike); a GC
deleting ~2,000 small checkpoints (CPU, bytes written); a GC deleting 14 entries of 4 MiB
(wall time, bytes written). Bytes written are the process's ``wchar`` (/proc/self/io): what
it handed to write(), WAL and checkpoint alike. The check's own cost is timed alone too.
On a shared machine compare the modes within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import ckptdb
from ckptdb.store import scopes

MODES = ("off", "check", "on")


def _wchar() -> int:
    with open("/proc/self/io") as io:
        for line in io:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


def _open(mode: str, directory: str) -> ckptdb.Database:
    db = ckptdb.open(tempfile.mkdtemp(dir=directory) + "/db.ckpt")
    conn = db._handle.store.conn  # the modes differ only in this connection's setting
    if mode != "check":
        conn.on_write_begin = None
    if mode == "on":
        scopes.zero_deleted_content(conn)
    return db


def small_commits(directory: str, batches: int) -> dict[str, float]:
    dbs = {m: _open(m, directory) for m in MODES}
    payload = os.urandom(1024)
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    try:
        for b in range(batches + 2):
            for mode in MODES if b % 2 else MODES[::-1]:
                db = dbs[mode]
                start = time.process_time()
                for i in range(100):
                    data = payload + str(b * 100 + i).encode()
                    db.commit(f"ns{i % 10}", {"v": data}, metadata={"i": i})
                if b >= 2:  # the first two batches warm up
                    cpu[mode].append((time.process_time() - start) / 100 * 1e6)
        conn = dbs["check"]._handle.store.conn
        with conn.write_transaction():
            start = time.process_time()
            for _ in range(10_000):
                scopes.any_scope(conn)
            check_us = (time.process_time() - start) / 10_000 * 1e6
    finally:
        for db in dbs.values():
            db.close()
    out = {f"{m}_us": statistics.median(v) for m, v in cpu.items()}
    out["check_alone_us"] = check_us
    return out


def gc_small(mode: str, directory: str, n: int) -> tuple[float, float]:
    with _open(mode, directory) as db:
        payload = os.urandom(1024)
        for i in range(n):
            db.commit(f"ns{i % 10}", {"v": payload + str(i).encode()}, metadata={"i": i})
        written, start = _wchar(), time.process_time()
        db.gc(ckptdb.RetentionPolicy(keep_last=1), grace=0)
        return (time.process_time() - start) * 1e3, (_wchar() - written) / 1e6


def gc_large(mode: str, directory: str, entries: int) -> tuple[float, float]:
    with _open(mode, directory) as db:
        for _ in range(entries):
            db.commit("big", {"v": os.urandom(4 << 20)})
        written, start = _wchar(), time.perf_counter()
        db.gc(ckptdb.RetentionPolicy(keep_last=1), grace=0)
        return (time.perf_counter() - start) * 1e3, (_wchar() - written) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--json", metavar="PATH", help="write the report as JSON")
    parser.add_argument("--dir", help="where to create the files (default: a temp dir)")
    args = parser.parse_args()
    batches, rounds, small_n, large_n = (4, 1, 300, 4) if args.quick else (40, 5, 2000, 16)
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        report["small_commit_cpu"] = small_commits(directory, batches)
        runs: dict[str, list[tuple[float, float, float, float]]] = {m: [] for m in MODES}
        for r in range(rounds):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                runs[mode].append(
                    gc_small(mode, directory, small_n) + gc_large(mode, directory, large_n)
                )
    report["gc"] = {
        "small_checkpoints_committed": small_n,
        "large_4MiB_entries_committed": large_n,
        **{
            mode: {
                "small_cpu_ms": statistics.median(r[0] for r in rs),
                "small_written_mb": statistics.median(r[1] for r in rs),
                "large_wall_ms": statistics.median(r[2] for r in rs),
                "large_written_mb": statistics.median(r[3] for r in rs),
            }
            for mode, rs in runs.items()
        },
    }
    text = json.dumps(report, indent=2)
    if args.json:
        Path(args.json).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
