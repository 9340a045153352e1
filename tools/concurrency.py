"""Many processes on one file: compare-and-swap writers, independent writers, readers, GC.

    python tools/concurrency.py --commits 500     # the full run: 4 x 500 CAS commits, ...
    python tools/concurrency.py --quick           # 4 x 100 (what CI runs)
    python tools/concurrency.py --json out.json

Processes, all started together on one database file:

* 4 writers committing to ONE namespace with ``expect_current`` compare-and-swap, retrying
  on ConflictError (re-read CURRENT, commit again) -- every 7th commit carries a chunked
  blob, so staged chunks race the GC;
* 4 writers committing to a namespace each, without compare-and-swap;
* 2 readers loading CURRENT of every namespace and reading its bytes, timing every read;
* 1 GC process sweeping (no retention policy: only unreferenced chunks past grace 0).

Afterwards: the shared lineage is linear (generations 1..4N, every stored checkpoint of the
namespace on it, exactly the acknowledged ones), every ack is present, no process saw
BusyError or "database is locked", the readers never waited for a lock (busy handler
never called), and the file verifies. Exit status 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ckptdb
from ckptdb import errors

CHUNK = 64 * 1024
CAS_WRITERS = 4
SOLO_WRITERS = 4
READERS = 2


def _entries(writer: int, i: int) -> dict[str, bytes]:
    out = {"state.json": json.dumps({"writer": writer, "i": i}).encode()}
    if i % 7 == 0:
        out["blob.bin"] = os.urandom(CHUNK + 100)
    return out


def role_cas(db_path: str, writer: int, commits: int) -> dict[str, Any]:
    acks: list[str] = []
    conflicts = chunk_retries = 0
    with ckptdb.open(db_path, chunk_size=CHUNK) as db:
        for i in range(commits):
            while True:
                pointer = db.pointer("shared")
                expect = pointer.current_id if pointer else None
                try:
                    ack = db.commit(
                        "shared",
                        _entries(writer, i),
                        metadata={"writer": writer, "i": i},
                        expect_current=expect,
                    )
                    acks.append(ack.checkpoint_id)
                    break
                except errors.ConflictError:
                    conflicts += 1
                except errors.ChunkMissingError:
                    chunk_retries += 1
        waits = db.lock_waits
    return {
        "acks": acks,
        "conflicts": conflicts,
        "chunk_retries": chunk_retries,
        "lock_waits": waits[0],
    }


def role_solo(db_path: str, writer: int, commits: int) -> dict[str, Any]:
    acks: list[str] = []
    chunk_retries = 0
    with ckptdb.open(db_path, chunk_size=CHUNK) as db:
        for i in range(commits):
            while True:
                try:
                    acks.append(
                        db.commit(
                            f"solo-{writer}", _entries(writer, i), metadata={"i": i}
                        ).checkpoint_id
                    )
                    break
                except errors.ChunkMissingError:
                    chunk_retries += 1
        waits = db.lock_waits
    return {"acks": acks, "chunk_retries": chunk_retries, "lock_waits": waits[0]}


def role_reader(db_path: str, stop_file: str) -> dict[str, Any]:
    latencies: list[float] = []
    with ckptdb.open(db_path, readonly=True) as db:
        while not os.path.exists(stop_file):
            for info in db.namespaces():
                t0 = time.perf_counter()
                cp = db.current(info.name)
                if cp is not None:
                    for name in cp.entries:
                        cp.read(name)
                latencies.append(time.perf_counter() - t0)
        waits = db.lock_waits
    latencies.sort()
    return {
        "reads": len(latencies),
        "lock_waits": waits[0],
        "lock_wait_seconds": waits[1],
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 3) if latencies else None,
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3) if latencies else None,
        "max_ms": round(latencies[-1] * 1000, 3) if latencies else None,
    }


def role_gc(db_path: str, stop_file: str) -> dict[str, Any]:
    runs = chunks = 0
    with ckptdb.open(db_path, chunk_size=CHUNK) as db:
        while not os.path.exists(stop_file):
            chunks += db.gc(grace=0).chunks_deleted
            runs += 1
            time.sleep(0.02)
    return {"runs": runs, "chunks_deleted": chunks}


def run(commits: int, workdir: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Start every process, wait, check; returns figures and violations."""
    db_path = workdir / "concurrent.ckpt"
    ckptdb.open(db_path, chunk_size=CHUNK).close()
    stop = workdir / "stop"
    me = [sys.executable, str(Path(__file__).resolve())]
    procs: dict[str, subprocess.Popen[str]] = {}
    started = time.monotonic()
    for w in range(CAS_WRITERS):
        procs[f"cas-{w}"] = subprocess.Popen(
            [*me, "--role", "cas", "--db", str(db_path), "--id", str(w), "--commits", str(commits)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    for w in range(SOLO_WRITERS):
        procs[f"solo-{w}"] = subprocess.Popen(
            [
                *me,
                "--role",
                "solo",
                "--db",
                str(db_path),
                "--id",
                str(w),
                "--commits",
                str(commits),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    for r in range(READERS):
        procs[f"reader-{r}"] = subprocess.Popen(
            [*me, "--role", "reader", "--db", str(db_path), "--stop", str(stop)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    procs["gc"] = subprocess.Popen(
        [*me, "--role", "gc", "--db", str(db_path), "--stop", str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    results: dict[str, Any] = {}
    violations: list[str] = []
    for name, proc in procs.items():
        if name.startswith(("cas", "solo")):
            out, err = proc.communicate(timeout=3600)
            results[name] = json.loads(out) if proc.returncode == 0 else {"error": err}
            if proc.returncode != 0:
                violations.append(f"{name} failed: {err.strip().splitlines()[-1:]}")
    stop.touch()
    for name, proc in procs.items():
        if not name.startswith(("cas", "solo")):
            out, err = proc.communicate(timeout=600)
            results[name] = json.loads(out) if proc.returncode == 0 else {"error": err}
            if proc.returncode != 0:
                violations.append(f"{name} failed: {err.strip().splitlines()[-1:]}")
    elapsed = time.monotonic() - started
    for name, res in results.items():
        text = json.dumps(res)
        if "locked" in text or "BusyError" in text or "busy_timeout" in text:
            violations.append(f"{name} saw a lock error: {text[:200]}")
    with ckptdb.open(db_path) as db:
        report = db.verify()
        if not report.ok:
            violations.append(f"verify failed: {report.problems[:3]}")
        lineage = db.lineage("shared")
        stored = {
            str(r[0])
            for r in db.query(
                "SELECT checkpoint_id FROM checkpoints WHERE namespace = 'shared'"
            ).rows
        }
        acked = [a for w in range(CAS_WRITERS) for a in results.get(f"cas-{w}", {}).get("acks", [])]
        if [c.generation for c in reversed(lineage)] != list(range(1, len(lineage) + 1)):
            violations.append("the shared lineage is not linear")
        if len(lineage) != CAS_WRITERS * commits or set(acked) != {c.id for c in lineage}:
            violations.append(
                f"shared lineage has {len(lineage)} checkpoints, {len(set(acked))} acknowledged"
            )
        if stored != {c.id for c in lineage}:
            violations.append("a stored checkpoint of the shared namespace is off the lineage")
        for w in range(SOLO_WRITERS):
            ids = {c.id for c in db.lineage(f"solo-{w}")}
            if set(results.get(f"solo-{w}", {}).get("acks", [])) != ids or len(ids) != commits:
                violations.append(f"solo-{w}: acks and lineage differ")
    for r in range(READERS):
        if results.get(f"reader-{r}", {}).get("lock_waits", 1) != 0:
            violations.append(f"reader-{r} waited for a lock")
    total_commits = (CAS_WRITERS + SOLO_WRITERS) * commits
    return {
        "commits_per_writer": commits,
        "writers": CAS_WRITERS + SOLO_WRITERS,
        "total_commits": total_commits,
        "seconds": round(elapsed, 1),
        "commits_per_second": round(total_commits / elapsed, 1),
        "cas_conflicts_retried": sum(
            results.get(f"cas-{w}", {}).get("conflicts", 0) for w in range(CAS_WRITERS)
        ),
        "chunk_missing_retried": sum(res.get("chunk_retries", 0) for res in results.values()),
        "writer_lock_waits": sum(
            results.get(k, {}).get("lock_waits", 0)
            for k in results
            if k.startswith(("cas", "solo"))
        ),
        "reader_reads": sum(results.get(f"reader-{r}", {}).get("reads", 0) for r in range(READERS)),
        "reader_lock_waits": sum(
            results.get(f"reader-{r}", {}).get("lock_waits", 0) for r in range(READERS)
        ),
        "reader_p99_ms": max(
            [(results.get(f"reader-{r}", {}).get("p99_ms") or 0) for r in range(READERS)] or [0]
        ),
        "gc_runs": results.get("gc", {}).get("runs", 0),
        "gc_chunks_deleted": results.get("gc", {}).get("chunks_deleted", 0),
        "violations": violations,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--role", choices=["cas", "solo", "reader", "gc"])
    parser.add_argument("--db")
    parser.add_argument("--id", type=int, default=0)
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--stop")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.role:
        roles = {
            "cas": lambda: role_cas(args.db, args.id, args.commits),
            "solo": lambda: role_solo(args.db, args.id, args.commits),
            "reader": lambda: role_reader(args.db, args.stop),
            "gc": lambda: role_gc(args.db, args.stop),
        }
        print(json.dumps(roles[args.role]()))
        return 0
    commits = 100 if args.quick else args.commits
    with tempfile.TemporaryDirectory(prefix="ckptdb-concurrency-") as tmp:
        result = run(commits, Path(tmp))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
