"""A fleet on one PostgreSQL database: writer processes and GC processes as machines.

    python tools/pg_fleet.py                     # 8 writers, 2 GC processes, 60 s
    python tools/pg_fleet.py --quick             # 4 writers, 1 GC process, 6 s (CI)
    python tools/pg_fleet.py --json out.json

On a throwaway server (``ckptdb.testing.postgres``), all started together:

* writers, each committing to three namespaces of its own and -- every fourth commit, with
  ``expect_current`` -- to one namespace they all share. Their values come from small pools
  every writer draws from (64 KB chunked values, 1 KB inline ones), so a value leaves the
  stored checkpoints, a GC frees it, and a commit brings it back moments later: the race
  between a publish and a GC, over and over. Every other commit also re-references its
  namespace's previous value by ``BlobRef``. A writer retries what a racing GC makes
  retryable (``chunk_missing``, ``blob_missing``) and what the shared namespace's
  compare-and-swap refuses (``conflict``: it reads CURRENT again). Each acknowledgement is
  logged to the writer's own file as it arrives (namespace, id, sha256 of every entry).
* GC processes, collecting with ``keep_last=2`` and grace 0 as fast as they can.

Afterwards, for every acknowledged checkpoint: either it is stored and every entry reads
back (verified) with the logged digest, or it was deliberately collected -- not CURRENT,
not the fallback, more than ``keep_last`` behind its namespace's CURRENT when the run ended.
No namespace forked: each one's lineage holds its stored acknowledgements in ack order, the
shared namespace's generations are contiguous, and ``verify`` finds nothing. Exit status 1
on any violation.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ckptdb
from ckptdb import errors
from ckptdb.testing.postgres import PostgresServer

KEEP_LAST = 2
_CHUNKED = [hashlib.sha256(bytes([i])).digest() * 2000 for i in range(8)]  # 64 KB each
_INLINE = [hashlib.sha256(bytes([100 + i])).digest() * 32 for i in range(8)]  # 1 KB each
_RETRYABLE = (errors.ChunkMissingError, errors.BlobMissingError, errors.BusyTimeoutError)


def writer(url: str, name: str, seconds: float, log: Path) -> dict[str, Any]:
    """One writer machine (see the module docstring); returns its counts."""
    rng = random.Random(name)
    counts = {"acked": 0, "retried": 0, "conflicts": 0}
    deadline = time.monotonic() + seconds
    with ckptdb.open(url, busy_timeout=30) as db, log.open("w") as out:
        n = 0
        while time.monotonic() < deadline:
            shared = n % 4 == 3
            ns = "shared" if shared else f"{name}/{n % 3}"
            ack = None
            for _ in range(100):
                prev = db.current(ns)
                entries: dict[str, Any] = {
                    "own": rng.choice(_CHUNKED),
                    "small": rng.choice(_INLINE),
                    "n": f"{name}-{n}".encode(),
                }
                if prev is not None and n % 2:
                    entries["again"] = prev.ref("own")
                expect = {"expect_current": prev.id if prev else None} if shared else {}
                try:
                    ack = db.commit(ns, entries, **expect)
                    break
                except errors.ConflictError:
                    counts["conflicts"] += 1
                except _RETRYABLE:
                    counts["retried"] += 1
            if ack is None:
                raise SystemExit(f"{name}: 100 attempts of one commit failed")
            data = {k: v if isinstance(v, bytes) else prev.read("own") for k, v in entries.items()}  # type: ignore[union-attr]
            digests = {k: hashlib.sha256(v).hexdigest() for k, v in data.items()}
            out.write(json.dumps([ns, ack.checkpoint_id, ack.generation, digests]) + "\n")
            out.flush()
            counts["acked"] += 1
            n += 1
    return counts


def collector(url: str, seconds: float) -> dict[str, Any]:
    """One GC machine: collect with ``keep_last`` and grace 0 until the deadline."""
    counts = {"runs": 0, "checkpoints_deleted": 0, "blobs_deleted": 0, "chunks_deleted": 0}
    deadline = time.monotonic() + seconds
    with ckptdb.open(url, busy_timeout=30) as db:
        while time.monotonic() < deadline:
            report = db.gc(ckptdb.RetentionPolicy(keep_last=KEEP_LAST), grace=0)
            counts["runs"] += 1
            for key in ("checkpoints_deleted", "blobs_deleted", "chunks_deleted"):
                counts[key] += getattr(report, key)
    return counts


def check(url: str, logs: list[Path]) -> tuple[list[str], dict[str, Any]]:
    """The checks of the module docstring: (violations, figures)."""
    acks = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    violations: list[str] = []
    by_ns: dict[str, list[list[Any]]] = {}
    for ack in acks:
        by_ns.setdefault(ack[0], []).append(ack)
    stored = collected = 0
    with ckptdb.open(url) as db:
        present = db.existing([a[1] for a in acks])
        for ns, listed in by_ns.items():
            ptr = db.pointer(ns)
            if ptr is None:
                violations.append(f"{ns}: no CURRENT after {len(listed)} acknowledged commits")
                continue
            lineage = db.lineage(ns)
            on_line = [c.id for c in lineage]
            gens = [c.generation for c in lineage]
            if gens != list(range(gens[0], gens[0] - len(gens), -1)):
                violations.append(f"{ns}: lineage generations not contiguous: {gens[:8]}")
            order = [a[1] for a in sorted(listed, key=lambda a: a[2]) if a[1] in present]
            if [c for c in reversed(on_line) if c in set(order)] != order:
                violations.append(f"{ns}: stored acknowledgements are not one line in ack order")
            newest = max(a[2] for a in listed)
            for _, cid, generation, digests in listed:
                if cid not in present:
                    # Deliberately collected: neither CURRENT nor fallback, and more than
                    # keep_last generations behind CURRENT (a generation only grows).
                    if cid in (ptr.current_id, ptr.fallback_id) or generation > newest - KEEP_LAST:
                        violations.append(f"{ns}: acknowledged {cid[:12]} is gone, not collectable")
                    collected += 1
                    continue
                cp = db.get(cid)
                for name, digest in digests.items():
                    if hashlib.sha256(cp.read(name)).hexdigest() != digest:
                        violations.append(f"{ns}: {cid[:12]} entry {name} reads other bytes")
                stored += 1
        report = db.verify()
        violations += [f"verify: {p.code}: {p.detail}" for p in report.problems[:5]]
    figures = {"acknowledged": len(acks), "stored_and_read": stored, "collected": collected}
    return violations, figures


def _spawn(role: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--role", role, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(writers: int, collectors: int, seconds: float) -> dict[str, Any]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ckptdb-pg-fleet-") as tmp, PostgresServer() as server:
        url = server.create_database("fleet")
        with ckptdb.open(url):
            pass  # the schema, before the machines start
        logs = [Path(tmp) / f"w{i}.log" for i in range(writers)]
        procs = [_spawn("writer", url, f"w{i}", str(seconds), str(logs[i])) for i in range(writers)]
        procs += [_spawn("collector", url, str(seconds)) for _ in range(collectors)]
        results, violations = [], []
        for proc in procs:
            out, err = proc.communicate(timeout=seconds + 600)
            if proc.returncode != 0:
                violations.append(f"a process exited {proc.returncode}: {err[-1500:]}")
                continue
            results.append(json.loads(out))
        found, figures = check(url, logs)
        violations += found
    totals: dict[str, int] = {}
    for r in results:
        for key, value in r.items():
            totals[key] = totals.get(key, 0) + value
    return {
        "writers": writers,
        "collectors": collectors,
        "seconds_running": seconds,
        **figures,
        **totals,
        "seconds": round(time.monotonic() - started, 1),
        "violations": violations,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--role", choices=["writer", "collector"], help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="4 writers, 1 GC process, 6 s")
    parser.add_argument("--writers", type=int)
    parser.add_argument("--collectors", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--json", type=Path)
    args, rest = parser.parse_known_args()
    if args.role == "writer":
        url, name, seconds, log = rest
        print(json.dumps(writer(url, name, float(seconds), Path(log))))
        return 0
    if args.role == "collector":
        url, seconds = rest
        print(json.dumps(collector(url, float(seconds))))
        return 0
    result = run(
        args.writers or (4 if args.quick else 8),
        args.collectors or (1 if args.quick else 2),
        args.seconds or (6.0 if args.quick else 60.0),
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
