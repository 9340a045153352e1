"""Commit one large streamed entry and read it back, reporting peak memory growth.

Run as its own process so the peak RSS it reports belongs to this workload alone:

    python tools/stream_worker.py DB SIZE_BYTES

Prints one JSON object: sizes, digests, seconds, baseline RSS and peak RSS (bytes).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time

import ckptdb

PIECE = 1024 * 1024


class GeneratedStream:
    """A deterministic pseudo-random byte stream of a given size (never all in memory)."""

    def __init__(self, size: int, seed: int = 7) -> None:
        self.remaining = size
        self.rng = random.Random(seed)
        self.hash = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        n = self.remaining if n < 0 else min(n, self.remaining)
        data = self.rng.randbytes(n)
        self.remaining -= n
        self.hash.update(data)
        return data


def _status(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def rss_bytes() -> int:
    """Current resident set size."""
    return _status("VmRSS")


def reset_peak_rss() -> None:
    """Start peak tracking from now (getrusage's ru_maxrss would include memory of the
    parent this process was forked from, so it cannot be used)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def peak_rss_bytes() -> int:
    """Peak resident set size since the last reset_peak_rss()."""
    return _status("VmHWM")


def main() -> None:
    path, size = sys.argv[1], int(sys.argv[2])
    with ckptdb.open(path) as db:
        db.commit("warmup", {"x": b"1"})
        db.current("warmup").read("x")  # type: ignore[union-attr]
        reset_peak_rss()
        baseline = rss_bytes()
        stream = GeneratedStream(size)
        t0 = time.perf_counter()
        ack = db.commit("big", {"huge.bin": stream})
        t_write = time.perf_counter() - t0
        cp = db.get(ack.checkpoint_id)
        t0 = time.perf_counter()
        back = hashlib.sha256()
        total = 0
        with cp.open("huge.bin") as fh:
            while piece := fh.read(PIECE):
                back.update(piece)
                total += len(piece)
        t_read = time.perf_counter() - t0
        peak = peak_rss_bytes()
    print(
        json.dumps(
            {
                "size": size,
                "read_size": total,
                "written_digest": stream.hash.hexdigest(),
                "entry_digest": cp.entries["huge.bin"].digest,
                "read_digest": back.hexdigest(),
                "write_seconds": t_write,
                "read_seconds": t_read,
                "baseline_rss": baseline,
                "peak_rss": peak,
            }
        )
    )


if __name__ == "__main__":
    main()
