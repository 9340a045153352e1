"""Benchmark: content-defined chunking parameters and zstd levels for storage format 2.

    python tools/bench_chunking.py                  # full: 1 GiB file, 40 list versions
    python tools/bench_chunking.py --quick          # seconds: 64 MiB file, 10 versions
    python tools/bench_chunking.py --json out.json  # also write the numbers as JSON

For each candidate (min, avg, max) set, cut with ``ckptdb.chunking`` and count the bytes a
content-addressed chunk store would have to add (chunks whose sha256 it has not seen):

* ``list_end`` / ``list_middle``: a ~300 KB JSON list of chat messages (~1 KB each)
  gaining one message per version at the end / in the middle: new bytes per version, raw
  and after ``ckptdb.codec.encode`` (zstd per chunk). Target <= 16 KB.
* ``big``: a large random file (1 GiB; ``--quick`` 64 MiB) with 1 MiB rewritten in the
  middle (not aligned to anything): new bytes (target <= 2 MiB), chunks per GiB (one row
  or more each in the store) and the cutting throughput (in memory and through a stream).

Then zstd level against ratio and MB/s, per chunk, on the JSON list and on random bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from ckptdb.store import chunking, codec
from ckptdb.store.chunking import ChunkParams

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

CANDIDATES: dict[str, ChunkParams] = {
    "4k": ChunkParams(1 * KIB, 4 * KIB, 32 * KIB, 1, 8 * KIB),
    "8k": ChunkParams(2 * KIB, 8 * KIB, 64 * KIB, 1, 16 * KIB),
    "8k-nc2": ChunkParams(2 * KIB, 8 * KIB, 64 * KIB, 2, 16 * KIB),
    "16k": ChunkParams(4 * KIB, 16 * KIB, 128 * KIB, 1, 32 * KIB),
    "32k": ChunkParams(8 * KIB, 32 * KIB, 256 * KIB, 1, 64 * KIB),
    "64k": ChunkParams(16 * KIB, 64 * KIB, 512 * KIB, 1, 128 * KIB),
}
LEVELS = (-5, -1, 1, 3, 6, 9)


def _vocabulary(rng: random.Random, n: int = 4000) -> list[str]:
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    return [
        "".join(rng.choices(letters, weights=range(26, 0, -1), k=rng.randint(2, 10)))
        for _ in range(n)
    ]


def chat_message(rng: random.Random, vocab: list[str], i: int, size: int = 1000) -> dict[str, Any]:
    """One chat message of ~``size`` bytes of pseudo-English (Zipf-like word choice), so
    zstd sees text that compresses like prose, not like random base64."""
    words: list[str] = []
    length = 0
    weights = [1.0 / (r + 1) for r in range(len(vocab))]
    while length < size - 120:
        batch = rng.choices(vocab, weights=weights, k=32)
        words.extend(batch)
        length += sum(len(w) + 1 for w in batch)
    content = " ".join(words)[: size - 120]
    return {
        "id": f"msg-{hashlib.sha256(str(i).encode()).hexdigest()[:32]}",
        "role": "user" if i % 2 == 0 else "assistant",
        "content": content,
        "metadata": {"turn": i // 2, "tokens": len(words)},
    }


def new_bytes(
    versions: list[bytes], params: ChunkParams, level: int = codec.DEFAULT_ZSTD_LEVEL
) -> dict[str, float]:
    """Mean new raw / stored bytes per version after the first (chunks not seen before)."""
    seen: set[bytes] = set()
    raw_new: list[int] = []
    stored_new: list[int] = []
    for blob in versions:
        raw = stored = 0
        for chunk in chunking.cut(blob, params):
            key = hashlib.sha256(chunk).digest()
            if key in seen:
                continue
            seen.add(key)
            raw += len(chunk)
            stored += len(codec.encode(chunk, level=level)[1])
        raw_new.append(raw)
        stored_new.append(stored)
    later_raw, later_stored = raw_new[1:], stored_new[1:]
    return {
        "first_version_raw": raw_new[0],
        "first_version_stored": stored_new[0],
        "new_raw_per_version": sum(later_raw) / len(later_raw),
        "new_stored_per_version": sum(later_stored) / len(later_stored),
        "max_new_stored": max(later_stored),
    }


def growing_lists(n_versions: int, seed: int = 11) -> dict[str, list[bytes]]:
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    base = [chat_message(rng, vocab, i) for i in range(300)]
    out: dict[str, list[bytes]] = {"list_end": [], "list_middle": []}
    end, middle = list(base), list(base)
    for v in range(n_versions):
        out["list_end"].append(json.dumps(end).encode())
        out["list_middle"].append(json.dumps(middle).encode())
        msg = chat_message(rng, vocab, 300 + v)
        end.append(msg)
        middle.insert(len(middle) // 2, msg)
    return out


class PseudoRandomFile(io.RawIOBase):
    """A deterministic random 'file' of ``size`` bytes, generated per MiB (never held whole);
    ``patch_at`` replaces 1 MiB from that offset with other random bytes."""

    def __init__(self, size: int, patch_at: int | None = None) -> None:
        self.size = size
        self.pos = 0
        self.patch_at = patch_at
        self._patch = random.Random(10**9 + 7).randbytes(MIB) if patch_at is not None else b""
        self._block_no = -1
        self._block = b""

    def readable(self) -> bool:
        return True

    def _block_bytes(self, n: int) -> bytes:
        data = bytearray(random.Random(n).randbytes(MIB))
        if self.patch_at is not None:
            lo, hi = n * MIB, (n + 1) * MIB
            p_lo, p_hi = self.patch_at, self.patch_at + MIB
            a, b = max(lo, p_lo), min(hi, p_hi)
            if a < b:
                data[a - lo : b - lo] = self._patch[a - p_lo : b - p_lo]
        return bytes(data)

    def readinto(self, buf: Any) -> int:
        view = memoryview(buf).cast("B")
        done = 0
        while done < len(view) and self.pos < self.size:
            n = self.pos // MIB
            if n != self._block_no:
                self._block_no, self._block = n, self._block_bytes(n)
            off = self.pos - n * MIB
            take = min(len(view) - done, MIB - off, self.size - self.pos)
            view[done : done + take] = self._block[off : off + take]
            done += take
            self.pos += take
        return done


def big_file(size: int, params: ChunkParams) -> dict[str, float]:
    patch_at = size // 2 + 777
    seen: set[bytes] = set()
    count = 0
    for chunk in chunking.cut_stream(PseudoRandomFile(size), params):
        seen.add(hashlib.sha256(chunk).digest())
        count += 1
    new = 0
    for chunk in chunking.cut_stream(PseudoRandomFile(size, patch_at), params):
        if hashlib.sha256(chunk).digest() not in seen:
            new += len(chunk)
    return {
        "chunks": count,
        "chunks_per_gib": count * GIB / size,
        "mean_chunk": size / count,
        "new_bytes_after_1mib_rewrite": new,
    }


def cut_throughput(params: ChunkParams, data: bytes) -> dict[str, float]:
    start = time.perf_counter()
    for _ in chunking.cut(data, params):
        pass
    mem = len(data) / (time.perf_counter() - start) / 1e9
    start = time.perf_counter()
    for _ in chunking.cut_stream(io.BytesIO(data), params):
        pass
    stream = len(data) / (time.perf_counter() - start) / 1e9
    return {"cut_gb_s": mem, "cut_stream_gb_s": stream}


def zstd_levels(chunks: list[bytes]) -> dict[str, dict[str, float]]:
    total = sum(len(c) for c in chunks)
    out: dict[str, dict[str, float]] = {}
    for level in LEVELS:
        start = time.perf_counter()
        encoded = [codec.encode(c, level=level) for c in chunks]
        enc_s = time.perf_counter() - start
        stored = sum(len(s) for _, s in encoded)
        start = time.perf_counter()
        for (cid, s), c in zip(encoded, chunks, strict=True):
            codec.decode(cid, s, len(c))
        dec_s = time.perf_counter() - start
        out[str(level)] = {
            "ratio": total / stored,
            "encode_mb_s": total / enc_s / 1e6,
            "decode_mb_s": total / dec_s / 1e6,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB file, 10 versions")
    parser.add_argument("--big-size-mib", type=int, default=None, help="size of the big file")
    parser.add_argument("--json", dest="json_path", default=None, help="write results here")
    args = parser.parse_args(argv)
    big = (args.big_size_mib or (64 if args.quick else 1024)) * MIB
    n_versions = 10 if args.quick else 40
    results: dict[str, Any] = {
        "command": " ".join(
            [Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]
        ),
        "big_file_bytes": big,
        "list_versions": n_versions,
        "zstd_level": codec.DEFAULT_ZSTD_LEVEL,
        "params": {},
    }
    lists = growing_lists(n_versions)
    results["list_bytes_first"] = len(lists["list_end"][0])
    sample = random.Random(5).randbytes(128 * MIB if not args.quick else 32 * MIB)
    for name, params in CANDIDATES.items():
        row: dict[str, Any] = {"params": params.to_settings()}
        for kind, versions in lists.items():
            row[kind] = new_bytes(versions, params)
        row["big"] = big_file(big, params)
        row["throughput"] = cut_throughput(params, sample)
        results["params"][name] = row
        print(f"  measured {name}", file=sys.stderr, flush=True)
    default = chunking.DEFAULT_PARAMS
    text_chunks = [bytes(c) for c in chunking.cut(lists["list_end"][-1], default)]
    rand_chunks = [bytes(c) for c in chunking.cut(random.Random(3).randbytes(8 * MIB), default)]
    results["zstd_json_chunks"] = zstd_levels(text_chunks)
    results["zstd_random_chunks"] = zstd_levels(rand_chunks)
    print_report(results)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def print_report(results: dict[str, Any]) -> None:
    print(
        f"CDC candidates: ~{results['list_bytes_first'] / 1000:.0f} KB JSON list + 1 KB per "
        f"version ({results['list_versions']} versions); {results['big_file_bytes'] / MIB:.0f}"
        f" MiB random file with 1 MiB rewritten; zstd level {results['zstd_level']}"
    )
    head = (
        f"{'params':8}{'min/avg/max KiB':>17}{'end raw':>9}{'end zst':>9}{'mid raw':>9}"
        f"{'mid zst':>9}{'big new MiB':>12}{'chunks/GiB':>11}{'mean B':>8}{'GB/s':>6}"
        f"{'strm':>6}"
    )
    print(head)
    for name, r in results["params"].items():
        p = r["params"]
        sizes = f"{p['min_size'] // KIB}/{p['avg_size'] // KIB}/{p['max_size'] // KIB}"
        if p["normalization"] != 1:
            sizes += f" nc{p['normalization']}"
        print(
            f"{name:8}{sizes:>17}"
            f"{r['list_end']['new_raw_per_version']:>9,.0f}"
            f"{r['list_end']['new_stored_per_version']:>9,.0f}"
            f"{r['list_middle']['new_raw_per_version']:>9,.0f}"
            f"{r['list_middle']['new_stored_per_version']:>9,.0f}"
            f"{r['big']['new_bytes_after_1mib_rewrite'] / MIB:>12.2f}"
            f"{r['big']['chunks_per_gib']:>11,.0f}"
            f"{r['big']['mean_chunk']:>8,.0f}"
            f"{r['throughput']['cut_gb_s']:>6.2f}"
            f"{r['throughput']['cut_stream_gb_s']:>6.2f}"
        )
    print("(end/mid: mean new bytes stored per version, raw and after zstd; target <= 16 KB;")
    print(" big new: new bytes after rewriting 1 MiB mid-file, target <= 2 MiB)")
    for kind in ("zstd_json_chunks", "zstd_random_chunks"):
        print(f"\n{kind} (default params' chunks): level, ratio, encode MB/s, decode MB/s")
        for level, z in results[kind].items():
            print(
                f"  {level:>3} {z['ratio']:>7.2f} {z['encode_mb_s']:>9,.0f} "
                f"{z['decode_mb_s']:>9,.0f}"
            )


if __name__ == "__main__":
    raise SystemExit(main())
