"""Benchmark: what storage format 2 stores and how fast, through ckptdb's public API.

    python tools/bench_format2.py --json out.json   # 300 KB list, 1 GiB file (~2 min)
    python tools/bench_format2.py --quick           # smaller sizes (seconds)

1. A ~300 KB JSON list of chat messages gaining one ~1 KB message per version, at the
   end and in the middle: new bytes stored per version (``CommitAck.bytes_stored``, after
   compression), mean and max.
2. A file (1 GiB; 64 MiB with --quick) committed, 1 MiB rewritten in the middle, committed
   again: new bytes stored. Write and read+verify throughput against a plain file written
   with fsync and read back with sha256, interleaved in the same run; peak RSS growth.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ckptdb

WORDS = ["state", "plan", "tool", "result", "agent", "thread", "value", "error", "ok", "run"]


def _message(rng: random.Random) -> dict[str, str]:
    return {
        "role": rng.choice(["user", "assistant"]),
        "content": " ".join(rng.choices(WORDS, k=170)),
    }


def growing_list(workdir: Path, versions: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for where in ("end", "middle"):
        rng = random.Random(1)
        messages = [_message(rng) for _ in range(300)]
        stored: list[int] = []
        path = workdir / f"list-{where}.ckpt"
        with ckptdb.open(path) as db:
            for _ in range(versions):
                extra = _message(rng)
                if where == "end":
                    messages.append(extra)
                else:
                    messages.insert(len(messages) // 2, extra)
                data = json.dumps(messages).encode()
                stored.append(db.commit("chat", {"messages.json": data}).bytes_stored)
        later = stored[1:]
        out[where] = {
            "blob_bytes": len(data),
            "first_version_stored": stored[0],
            "mean_new_bytes_per_version": round(sum(later) / len(later)),
            "max_new_bytes_per_version": max(later),
        }
    return out


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def large_file(workdir: Path, size: int) -> dict[str, Any]:
    src = workdir / "big.bin"
    with src.open("wb") as fh:
        for _ in range(size >> 20):
            fh.write(os.urandom(1 << 20))
    plain = workdir / "plain.bin"
    # Plain file: write with fsync, then read back with sha256 (the yardstick).
    t = time.perf_counter()
    with src.open("rb") as fin, plain.open("wb") as fout:
        while piece := fin.read(1 << 20):
            fout.write(piece)
        fout.flush()
        os.fsync(fout.fileno())
    plain_write = time.perf_counter() - t
    t = time.perf_counter()
    digest = hashlib.sha256()
    with plain.open("rb") as fh:
        while piece := fh.read(1 << 20):
            digest.update(piece)
    plain_read = time.perf_counter() - t
    plain.unlink()
    before = _rss()
    with ckptdb.open(workdir / "big.ckpt") as db:
        t = time.perf_counter()
        db.commit("big", {"f": src})
        write = time.perf_counter() - t
        t = time.perf_counter()
        check = hashlib.sha256()
        for piece in db.current("big").iter_bytes("f"):  # type: ignore[union-attr]
            check.update(piece)
        read = time.perf_counter() - t
        assert check.hexdigest() == digest.hexdigest()
        with src.open("r+b") as fh:
            fh.seek(size // 2)
            fh.write(os.urandom(1 << 20))
        rewrite = db.commit("big", {"f": src}).bytes_stored
    mib = size / 2**20
    return {
        "size_bytes": size,
        "rewrite_1mib_new_bytes": rewrite,
        "write_mb_s": round(mib / write, 1),
        "plain_write_fsync_mb_s": round(mib / plain_write, 1),
        "write_ratio": round(plain_write / write, 3),
        "read_verify_mb_s": round(mib / read, 1),
        "plain_read_sha256_mb_s": round(mib / plain_read, 1),
        "read_ratio": round(plain_read / read, 3),
        "peak_rss_growth_mib": round(max(_rss() - before, 0) / 2**20, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckptdb-format2-") as tmp:
        work = Path(tmp)
        result = {
            "growing_list": growing_list(work, 8 if args.quick else 40),
            "large_file": large_file(work, (64 if args.quick else 1024) << 20),
        }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
