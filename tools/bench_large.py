"""Benchmark: one large entry written and read back, against a plain file (issue 25).

    python tools/bench_large.py --json out.json        # 1 GiB, 3 rounds (~2 min)
    python tools/bench_large.py --size 256M --rounds 5
    python tools/bench_large.py --quick                # 32 MiB, 1 round (seconds)
    python tools/bench_large.py --compare /tmp/old     # the same rounds with the ckptdb of
                                                       # another checkout, interleaved

The entry is seeded random bytes (nothing for zstd or chunk dedup to shrink), read from a
source file in the page cache. Each round runs, interleaved, on the same bytes:

- plain write: the source copied to a new file in 4 MiB pieces, then fsync;
- plain read + sha256: that file read back in 1 MiB pieces, each hashed (the plain way to
  know the bytes are the ones written);
- in a fresh process per ckptdb tree: ``db.commit`` of the entry streamed from the source
  (into a new database file, handle open and close included), then, on a new handle (its
  opening not timed), ``Checkpoint.open`` read in 1 MiB pieces (ckptdb verifies every
  byte it hands out: "read + verify"), then the same read with the caller hashing the
  pieces too ("read + verify + caller sha256", what ``tools/bench_commit.py --only
  large`` measures), checked against the source's digest.

Ratios are throughput ratios (plain time / ckptdb time; 1.0 = as fast as the plain file),
the median over rounds; CPU seconds (all threads of the process) are reported beside the
wall times because the machine is shared. Timings are this tool's business: no test
asserts one.
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
import time
from pathlib import Path
from typing import Any

#: The ckptdb side, run in its own process (so peak RSS and CPU time are its own, and
#: ``--compare`` can put another checkout first on its path).
WORKER = r"""
import hashlib, json, os, sys, time
db_path, src, piece = sys.argv[1], sys.argv[2], 1 << 20
import ckptdb

def rss(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)

def timed(fn):
    c0, t0 = time.process_time(), time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0, time.process_time() - c0

def write():
    with ckptdb.open(db_path) as db, open(src, "rb") as fh:
        return db.commit("big", {"big.bin": fh}).checkpoint_id

def read(cp, hashing):
    h = hashlib.sha256() if hashing else None
    total = 0
    with cp.open("big.bin") as fh:
        while data := fh.read(piece):
            total += len(data)
            if h is not None:
                h.update(data)
    return total, None if h is None else h.hexdigest()

with ckptdb.open(db_path) as db:
    db.commit("warm", {"x": b"1"})
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
base = rss("VmRSS")
checkpoint_id, write_s, write_cpu = timed(write)
with ckptdb.open(db_path) as db:  # a new handle, as a reader process would have
    cp = db.get(checkpoint_id)
    (read_n, _), read_s, read_cpu = timed(lambda: read(cp, False))
    (hashed_n, digest), hashed_s, hashed_cpu = timed(lambda: read(cp, True))
print(json.dumps({
    "write_s": write_s, "write_cpu_s": write_cpu,
    "read_s": read_s, "read_cpu_s": read_cpu,
    "read_hashed_s": hashed_s, "read_hashed_cpu_s": hashed_cpu,
    "read_bytes": read_n, "hashed_bytes": hashed_n, "digest": digest,
    "peak_rss_growth": rss("VmHWM") - base,
    "file_bytes": os.path.getsize(db_path),
    "package": os.path.dirname(ckptdb.__file__),
}))
"""


def parse_size(text: str) -> int:
    """Bytes from ``123``, ``64K``, ``256M`` or ``1G`` (powers of 1024)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def make_source(path: Path, size: int) -> str:
    """Write ``size`` seeded random bytes to ``path``; returns their sha256."""
    rng = random.Random(20260425)
    h = hashlib.sha256()
    with open(path, "wb") as fh:
        left = size
        while left:
            piece = rng.randbytes(min(4 << 20, left))
            h.update(piece)
            fh.write(piece)
            left -= len(piece)
    return h.hexdigest()


def timed_cpu(fn: Any) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of ``fn()``."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def plain_round(src: Path, dst: Path) -> dict[str, float]:
    """The plain-file side of one round: write + fsync, then read + sha256."""

    def write() -> None:
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            while piece := fin.read(4 << 20):
                fout.write(piece)
            fout.flush()
            os.fsync(fout.fileno())

    def read() -> None:
        h = hashlib.sha256()
        with open(dst, "rb") as fin:
            while piece := fin.read(1 << 20):
                h.update(piece)

    write_s, write_cpu = timed_cpu(write)
    read_s, read_cpu = timed_cpu(read)
    dst.unlink()
    return {"write_s": write_s, "write_cpu_s": write_cpu, "read_s": read_s, "read_cpu_s": read_cpu}


def ckptdb_round(src: Path, workdir: Path, tree: Path | None) -> dict[str, Any]:
    """The ckptdb side of one round, in a fresh process (``tree``: import ckptdb from it)."""
    db_path = workdir / "large.ckpt"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(db_path), str(src)],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,  # not the caller's: a checkout there would shadow ``tree``
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"ckptdb worker failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    for suffix in ("", "-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
    return result


def summarize(
    size: int, plain: list[dict[str, float]], side: list[dict[str, Any]]
) -> dict[str, Any]:
    """Medians over rounds: throughputs, ratios against the plain file, CPU seconds."""
    mb = size / 1e6

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(float(r[key]) for r in rows)

    def ratios(plain_key: str, key: str) -> list[float]:
        return [round(p[plain_key] / s[key], 3) for p, s in zip(plain, side, strict=True)]

    write_ratios = ratios("write_s", "write_s")
    read_ratios = ratios("read_s", "read_s")
    hashed_ratios = ratios("read_s", "read_hashed_s")
    return {
        "write_MBps": round(mb / med(side, "write_s"), 1),
        "read_verify_MBps": round(mb / med(side, "read_s"), 1),
        "read_verify_caller_sha256_MBps": round(mb / med(side, "read_hashed_s"), 1),
        "write_ratio": statistics.median(write_ratios),
        "read_verify_ratio": statistics.median(read_ratios),
        "read_verify_caller_sha256_ratio": statistics.median(hashed_ratios),
        "write_ratios": write_ratios,
        "read_verify_ratios": read_ratios,
        "read_verify_caller_sha256_ratios": hashed_ratios,
        "write_cpu_s": round(med(side, "write_cpu_s"), 3),
        "read_verify_cpu_s": round(med(side, "read_cpu_s"), 3),
        "read_verify_caller_sha256_cpu_s": round(med(side, "read_hashed_cpu_s"), 3),
        "peak_rss_growth_MiB": round(max(r["peak_rss_growth"] for r in side) / 2**20, 1),
        "file_bytes": side[-1]["file_bytes"],
        "package": side[-1]["package"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=parse_size, help="entry size, e.g. 256M (default 1G)")
    parser.add_argument("--rounds", type=int, help="rounds, each side once per round (3)")
    parser.add_argument("--quick", action="store_true", help="32 MiB, 1 round (seconds)")
    parser.add_argument(
        "--compare", type=Path, help="also run the ckptdb of this checkout, interleaved"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temp dir)")
    args = parser.parse_args()
    size = args.size if args.size is not None else (32 << 20 if args.quick else 1 << 30)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    trees: dict[str, Path | None] = {"ckptdb": None}
    if args.compare is not None:
        trees["compare"] = args.compare.resolve()
    workdir = Path(tempfile.mkdtemp(prefix="ckptdb-large-", dir=args.dir))
    try:
        src = workdir / "src.bin"
        digest = make_source(src, size)
        plain: list[dict[str, float]] = []
        sides: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for index in range(rounds):
            # Alternate the order, so no side always runs right after the file was written.
            order = list(trees.items())
            if index % 2:
                order.reverse()
            plain.append(plain_round(src, workdir / "plain.bin"))
            for name, tree in order:
                result = ckptdb_round(src, workdir, tree)
                if result["digest"] != digest or result["read_bytes"] != size:
                    raise SystemExit(f"{name}: the bytes read back are not the bytes written")
                sides[name].append(result)
        mb = size / 1e6
        report: dict[str, Any] = {
            "bytes": size,
            "rounds": rounds,
            "plain_write_MBps": round(mb / statistics.median(p["write_s"] for p in plain), 1),
            "plain_read_sha256_MBps": round(mb / statistics.median(p["read_s"] for p in plain), 1),
            "plain_write_cpu_s": round(statistics.median(p["write_cpu_s"] for p in plain), 3),
            "plain_read_sha256_cpu_s": round(statistics.median(p["read_cpu_s"] for p in plain), 3),
        }
        for name in trees:
            report[name] = summarize(size, plain, sides[name])
        if args.compare is not None:
            report["compare_tree"] = str(args.compare)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
