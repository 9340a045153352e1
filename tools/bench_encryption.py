"""Benchmark: encryption at rest (schema v5) -- what sealing costs, as a ratio to the same
workload unencrypted.

    python tools/bench_encryption.py --json out.json  # full run (~6 min: 1 GiB entry x 5 per side)
    python tools/bench_encryption.py --quick          # seconds, for CI / a smoke check
    python tools/bench_encryption.py --only small     # or: large, raw

One ckptdb file per workload holds both sides: namespaces under ``plain/`` (no key scope:
sha256 addresses, zstd) and under ``enc/`` (``set_encryption("enc/", key_id="k")``: HMAC
addresses, zstd then AES-256-GCM, sha256 of the sealed bytes for keyless verify). Each
workload runs the same bytes on both sides, interleaved in one run with the order
alternating, and reports medians and ratios ``enc / plain`` of time (target <= 1.15):
``time_ratio`` (of the medians), ``paired_median_*`` (the median of the ratios of runs
made side by side: the steadiest figure on a shared machine), and ``cpu`` ratios (process
CPU time, all threads: the work added, whatever else the machine runs).

* ``small`` -- durable commits (synchronous=FULL, ckptdb's default):
  ``3x1KiB`` (three fresh 1 KiB entries, as tools/bench_commit.py), and a LangGraph-like
  JSON checkpoint of ~1 KB and of ~100 KB (10 channels of chat-like text, one of which
  changes per step, committed as one ``state.json`` entry: inline at 1 KB, CDC chunks with
  mostly dedup hits at 100 KB). Plain and enc alternate commit by commit (each value is
  committed once on each side, the pair back to back). Commits/s (median of rounds), p50/p99
  latency (pooled over rounds), CPU per commit.
* ``large`` -- one entry (1 GiB; 64 MiB with --quick) streamed from a file, committed, then
  read back through ``Checkpoint.iter_bytes`` (every chunk opened and verified, and the
  whole blob). Each run is its own process on a fresh file (plain and enc alternating), so
  its peak RSS growth (VmHWM after a reset) belongs to that workload alone. MB/s, ratio,
  peak RSS growth for write and read. The bytes read are compared with the source (untimed).
* ``raw`` -- the platform: cryptography's OpenSSL, the CPU's ``aes`` flag, and raw AESGCM
  encrypt/decrypt throughput for 8 KiB and 1 MiB messages (GB/s; AES-NI runs at several
  GB/s, a software AES at a few hundred MB/s), beside sha256 / HMAC-SHA256 for scale; and
  the codec chain per chunk (``EncodedChunk.of`` and a verified decode) plain vs sealed.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ckptdb
from ckptdb.store import codec, crypto, encoding

KEY = bytes(range(32))
KEY_ID = "k"
SIDES = ("plain", "enc")
ENTRY_NAMES = ("graph/snapshot.json", "ingest_roots.json", "notes.bin")
ENTRY_SIZE = 1024
CHANNELS = 10
STATES = {"state_1kb": 100, "state_100kb": 10_000}  # bytes of text per channel
WORDS = [
    *("state", "plan", "tool", "result", "agent", "thread", "value", "error", "ok", "run"),
    *("message", "user", "assistant", "call", "search", "answer", "context", "memory"),
    *("step", "graph", "node", "edge", "retry"),
]


def open_db(path: Path) -> ckptdb.Database:
    """A file with an encrypted key scope ``enc/`` beside plaintext namespaces."""
    db = ckptdb.open(path, keys={KEY_ID: KEY})
    db.set_encryption("enc/", key_id=KEY_ID)
    return db


def _order(round_no: int) -> tuple[str, ...]:
    """Alternate which side goes first, so neither always runs on a warmer machine."""
    return SIDES if round_no % 2 == 0 else SIDES[::-1]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- small commits ---------------------------------------------------------------------------


def fresh_entries(i: int) -> dict[str, bytes]:
    """Three 1 KiB entries, new content for every ``i`` (as tools/bench_commit.py)."""
    seed = i.to_bytes(8, "little")
    return {
        name: (hashlib.sha256(seed + name.encode()).digest() * (ENTRY_SIZE // 32 + 1))[:ENTRY_SIZE]
        for name in ENTRY_NAMES
    }


def _text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        word = rng.choice(WORDS)
        out.append(word)
        n += len(word) + 1
    return " ".join(out)[:size]


def langgraph_states(per_channel: int, seed: int = 7) -> Iterator[bytes]:
    """LangGraph-shaped checkpoints as JSON: ``CHANNELS`` channels of chat-like text,
    versions and versions_seen; every step changes one channel (round robin)."""
    rng = random.Random(seed)
    values = {f"channel_{i}": _text(rng, per_channel) for i in range(CHANNELS)}
    versions = dict.fromkeys(values, 1)
    step = 0
    while True:
        changed = f"channel_{step % CHANNELS}"
        values[changed] = _text(rng, per_channel)
        versions[changed] += 1
        state = {
            "v": 4,
            "id": f"1ef{step:029x}",
            "ts": f"2026-01-01T00:00:{step % 60:02}.{step:06}+00:00",
            "channel_values": values,
            "channel_versions": {k: f"{v:032}.{rng.random():016}" for k, v in versions.items()},
            "versions_seen": {"agent": {k: f"{v:032}" for k, v in versions.items()}},
            "updated_channels": [changed],
        }
        yield json.dumps(state, separators=(",", ":")).encode()
        step += 1


def _state_entries(per_channel: int) -> Callable[[int], dict[str, bytes]]:
    """Step ``i`` of a LangGraph-like thread as one ``state.json`` entry."""
    states = langgraph_states(per_channel)
    cache: list[bytes] = []

    def entries(i: int) -> dict[str, bytes]:
        while len(cache) <= i:
            cache.append(next(states))
        return {"state.json": cache[i]}

    return entries


def _small_workload(
    db: ckptdb.Database,
    name: str,
    entries_of: Callable[[int], dict[str, bytes]],
    rounds: int,
    per_round: int,
) -> dict[str, Any]:
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    cpu: dict[str, list[float]] = {side: [] for side in SIDES}
    latency: dict[str, list[float]] = {side: [] for side in SIDES}
    pair_ratios: list[float] = []  # enc / plain of the two commits of the same value
    step = 0
    for r in range(rounds + 1):  # round 0 warms up: the scope's keys, statements, the file
        spent = dict.fromkeys(SIDES, 0.0)
        spent_cpu = dict.fromkeys(SIDES, 0.0)
        batch = [entries_of(step + k) for k in range(per_round)]
        step += per_round
        # Plain and enc alternate commit by commit (the order flips every pair), so both
        # sides see the same machine: the noise of a shared VM hits them alike. Both commit
        # the same values, each side in its own namespace.
        for k, entries in enumerate(batch):
            pair: dict[str, float] = {}
            for side in _order(r + k):
                c0, t0 = time.process_time(), time.perf_counter()
                db.commit(f"{side}/{name}", entries)
                t, c = time.perf_counter() - t0, time.process_time() - c0
                spent[side] += t
                spent_cpu[side] += c
                pair[side] = t
                if r:
                    latency[side].append(t)
            if r:
                pair_ratios.append(pair["enc"] / pair["plain"])
        if r:
            for side in SIDES:
                rates[side].append(per_round / spent[side])
                cpu[side].append(spent_cpu[side] / per_round)
    med = {side: statistics.median(rates[side]) for side in SIDES}
    med_cpu = {side: statistics.median(cpu[side]) for side in SIDES}
    p50 = {side: _percentile(latency[side], 0.50) for side in SIDES}
    p99 = {side: _percentile(latency[side], 0.99) for side in SIDES}
    return {
        "entry_bytes": sum(len(v) for v in entries_of(0).values()),
        "commits_per_second": {side: round(med[side], 1) for side in SIDES},
        "p50_latency_us": {side: round(p50[side] * 1e6, 1) for side in SIDES},
        "p99_latency_us": {side: round(p99[side] * 1e6, 1) for side in SIDES},
        "cpu_us_per_commit": {side: round(med_cpu[side] * 1e6, 1) for side in SIDES},
        "time_ratio": round(med["plain"] / med["enc"], 3),
        "paired_median_ratio": round(statistics.median(pair_ratios), 3),
        "cpu_ratio": round(med_cpu["enc"] / med_cpu["plain"], 3),
        "p50_ratio": round(p50["enc"] / p50["plain"], 3),
        "p99_ratio": round(p99["enc"] / p99["plain"], 3),
        "per_round_time_ratios": [
            round(p / e, 3) for p, e in zip(rates["plain"], rates["enc"], strict=True)
        ],
    }


def small_commits(workdir: Path, rounds: int, per_round: int) -> dict[str, Any]:
    workloads: dict[str, Callable[[int], dict[str, bytes]]] = {"3x1KiB": fresh_entries}
    for name, per_channel in STATES.items():
        workloads[name] = _state_entries(per_channel)
    out: dict[str, Any] = {}
    for name, entries_of in workloads.items():
        with open_db(workdir / f"small-{name}.ckpt") as db:
            out[name] = _small_workload(db, name, entries_of, rounds, per_round)
    out["rounds"] = rounds
    out["commits_per_round"] = per_round
    return out


# -- one large entry, a process per run --------------------------------------------------------

LARGE_WORKER = r"""
import hashlib, json, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from stream_worker import peak_rss_bytes, reset_peak_rss, rss_bytes
from bench_encryption import open_db
db_path, src, side = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
ns = side + "/big"
with open_db(Path(db_path)) as db:
    db.commit(ns, {"warm": b"1"})  # unwraps the scope's data key: not part of the timing
    db.current(ns).read("warm")
    reset_peak_rss(); base = rss_bytes()
    c0, t0 = time.process_time(), time.perf_counter()
    ack = db.commit(ns, {"big.bin": src})
    write, write_cpu = time.perf_counter() - t0, time.process_time() - c0
    write_peak = peak_rss_bytes() - base
    cp = db.get(ack.checkpoint_id)
    reset_peak_rss(); base = rss_bytes()
    total = 0
    c0, t0 = time.process_time(), time.perf_counter()
    for piece in cp.iter_bytes("big.bin"):  # each chunk opened + verified, then the whole
        total += len(piece)
    read, read_cpu = time.perf_counter() - t0, time.process_time() - c0
    read_peak = peak_rss_bytes() - base
    h = hashlib.sha256()  # untimed: the bytes are the source's
    for piece in cp.iter_bytes("big.bin"):
        h.update(piece)
print(json.dumps({"write": write, "read": read, "write_cpu": write_cpu, "read_cpu": read_cpu,
                  "write_peak": write_peak,
                  "read_peak": read_peak, "read_bytes": total, "digest": h.hexdigest(),
                  "stored": ack.bytes_stored}))
"""


def _make_source(path: Path, size: int, content: str) -> str:
    """``size`` bytes: incompressible (``random``) or chat-like text (``text``); sha256."""
    rng = random.Random(11)
    digest = hashlib.sha256()
    text_block = _text(rng, 1 << 20).encode() if content == "text" else b""
    with path.open("wb") as fh:
        written = 0
        i = 0
        while written < size:
            if content == "random":
                piece = rng.randbytes(min(1 << 20, size - written))
            else:  # a varying head keeps the CDC chunks distinct
                piece = (i.to_bytes(8, "little") * 64 + text_block)[: min(1 << 20, size - written)]
            fh.write(piece)
            digest.update(piece)
            written += len(piece)
            i += 1
    return digest.hexdigest()


def large_entry(workdir: Path, size: int, reps: int, content: str) -> dict[str, Any]:
    src = workdir / "src.bin"
    expected = _make_source(src, size, content)
    tools = str(Path(__file__).resolve().parent)
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for r in range(reps):
        for side in _order(r):
            db_path = workdir / "large.ckpt"
            os.sync()  # the previous run's dirty pages must not be flushed during this one
            done = subprocess.run(
                [sys.executable, "-c", LARGE_WORKER, str(db_path), str(src), side, tools],
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(done.stdout)
            assert result["digest"] == expected, f"{side}: ckptdb returned other bytes"
            assert result["read_bytes"] == size
            runs[side].append(result)
            for suffix in ("", "-wal", "-shm"):
                Path(str(db_path) + suffix).unlink(missing_ok=True)
    src.unlink()
    mb = size / 1e6

    def med(side: str, key: str) -> float:
        return float(statistics.median(run[key] for run in runs[side]))

    out: dict[str, Any] = {"bytes": size, "content": content, "runs_per_side": reps}
    for side in SIDES:
        out[side] = {
            "write_MBps": round(mb / med(side, "write"), 1),
            "read_verify_MBps": round(mb / med(side, "read"), 1),
            "write_cpu_s": round(med(side, "write_cpu"), 3),
            "read_cpu_s": round(med(side, "read_cpu"), 3),
            "write_peak_rss_growth_MiB": round(max(r["write_peak"] for r in runs[side]) / 2**20, 1),
            "read_peak_rss_growth_MiB": round(max(r["read_peak"] for r in runs[side]) / 2**20, 1),
            "bytes_stored": runs[side][0]["stored"],
        }
    for key in ("write", "read", "write_cpu", "read_cpu"):
        out[f"{key}_time_ratio"] = round(med("enc", key) / med("plain", key), 3)
    for key in ("write", "read", "write_cpu", "read_cpu"):
        out[f"paired_median_{key}_ratio"] = round(
            statistics.median(
                e[key] / p[key] for p, e in zip(runs["plain"], runs["enc"], strict=True)
            ),
            3,
        )
    out["seconds"] = {
        side: {key: [round(run[key], 3) for run in runs[side]] for key in ("write", "read")}
        for side in SIDES
    }
    out["per_run_write_time_ratios"] = [
        round(e["write"] / p["write"], 3) for p, e in zip(runs["plain"], runs["enc"], strict=True)
    ]
    out["per_run_read_time_ratios"] = [
        round(e["read"] / p["read"], 3) for p, e in zip(runs["plain"], runs["enc"], strict=True)
    ]
    return out


# -- the platform and the primitives ---------------------------------------------------------


def _best_rate(fn: Callable[[], object], nbytes: int, budget_s: float) -> float:
    """GB/s of the fastest of several timed batches of ``fn`` (each over ``nbytes``)."""
    fn()
    reps = 1
    while True:  # size a batch to ~budget/5
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        if time.perf_counter() - t > budget_s / 5 / 4 or reps > 1 << 20:
            break
        reps *= 2
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, time.perf_counter() - t)
    return nbytes * reps / best / 1e9


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _primitive_rates(aead: Any, mac_key: bytes, msg: bytes, budget_s: float) -> dict[str, float]:
    nonce, aad = os.urandom(12), os.urandom(56)
    sealed = aead.encrypt(nonce, msg, aad)
    size = len(msg)
    return {
        "aesgcm_encrypt_GBps": _best_rate(lambda: aead.encrypt(nonce, msg, aad), size, budget_s),
        "aesgcm_decrypt_GBps": _best_rate(lambda: aead.decrypt(nonce, sealed, aad), size, budget_s),
        "sha256_GBps": _best_rate(lambda: hashlib.sha256(msg).digest(), size, budget_s),
        "hmac_sha256_GBps": _best_rate(lambda: hmac.digest(mac_key, msg, "sha256"), size, budget_s),
    }


def raw_primitives(budget_s: float) -> dict[str, Any]:
    from cryptography import __version__ as cryptography_version
    from cryptography.hazmat.backends.openssl import backend
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    flags = _cpu_flags()
    aead = AESGCM(os.urandom(32))
    mac_key = os.urandom(32)
    rates = {
        label: _primitive_rates(aead, mac_key, os.urandom(size), budget_s)
        for label, size in (("8KiB", 8 << 10), ("1MiB", 1 << 20))
    }
    return {
        "cryptography": cryptography_version,
        "openssl": backend.openssl_version_text(),
        "cpu_flags": {flag: flag in flags for flag in ("aes", "pclmulqdq", "vaes", "sha_ni")},
        "throughput": {k: {n: round(v, 2) for n, v in r.items()} for k, r in rates.items()},
    }


def _interleaved_best(fns: dict[str, Callable[[], object]], budget_s: float) -> dict[str, float]:
    """Seconds per call of each function: the fastest of several batches, the batches of
    the functions interleaved."""
    for fn in fns.values():
        fn()
    reps = 1
    first = next(iter(fns.values()))
    while reps < 1 << 20:
        t = time.perf_counter()
        for _ in range(reps):
            first()
        if time.perf_counter() - t > budget_s / 40:
            break
        reps *= 2
    best = dict.fromkeys(fns, float("inf"))
    for i in range(7):
        for name in list(fns)[:: 1 if i % 2 == 0 else -1]:
            fn = fns[name]
            t = time.perf_counter()
            for _ in range(reps):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t) / reps)
    return best


def _chain_row(raw: bytes, compress: bool, budget_s: float) -> dict[str, Any]:
    scopes = {"plain": crypto.PLAINTEXT, "enc": crypto.Scope.unlocked(1, KEY_ID, os.urandom(32))}
    chunks = {
        side: encoding.EncodedChunk.of(raw, compress=compress, scope=scope)
        for side, scope in scopes.items()
    }

    def encoder(scope: crypto.Scope) -> Callable[[], object]:
        return lambda: encoding.EncodedChunk.of(raw, compress=compress, scope=scope)

    def decoder(scope: crypto.Scope, chunk: encoding.EncodedChunk) -> Callable[[], object]:
        def decode() -> bytes:
            data = encoding.decoded(chunk.codec, chunk.stored, chunk.size, scope, chunk.digest)
            assert data is not None and scope.address(data) == chunk.digest
            return data

        return decode

    fns: dict[str, Callable[[], object]] = {}
    for side, scope in scopes.items():
        fns[f"{side}_encode"] = encoder(scope)
        fns[f"{side}_decode"] = decoder(scope, chunks[side])
    best = _interleaved_best(fns, budget_s)
    row: dict[str, Any] = {
        side: {
            "encode_us": round(best[f"{side}_encode"] * 1e6, 2),
            "decode_verify_us": round(best[f"{side}_decode"] * 1e6, 2),
            "codec": codec.codec_name(chunks[side].codec),
        }
        for side in scopes
    }
    row["encode_ratio"] = round(best["enc_encode"] / best["plain_encode"], 3)
    row["decode_verify_ratio"] = round(best["enc_decode"] / best["plain_decode"], 3)
    return row


def codec_chain(budget_s: float) -> dict[str, Any]:
    """Per-chunk cost of the store's own encode (address + zstd + seal + sealed digest)
    and verified decode (open + decompress + address check), plain vs sealed, in us: an
    8 KiB chunk of text (zstd) and a 256 KiB chunk of random bytes (stored raw: staging
    stops trying to compress a stream zstd cannot shrink)."""
    rng = random.Random(3)
    return {
        "8KiB_text": _chain_row(_text(rng, 8 << 10).encode(), True, budget_s),
        "256KiB_random": _chain_row(rng.randbytes(256 << 10), False, budget_s),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temp dir)")
    parser.add_argument("--only", choices=["small", "large", "raw"], help="run one part")
    parser.add_argument("--rounds", type=int, help="small-commit rounds (default 7; quick 3)")
    parser.add_argument("--large-mib", type=int, help="large entry size (default 1024; quick 64)")
    parser.add_argument("--large-reps", type=int, help="large runs per side (default 5; quick 1)")
    parser.add_argument(
        "--large-content",
        choices=["random", "text"],
        default="random",
        help="the large entry's bytes: incompressible (default) or chat-like text",
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ckptdb-encbench-", dir=args.dir))
    budget = 0.2 if args.quick else 1.0
    results: dict[str, Any] = {}
    try:
        if args.only in (None, "raw"):
            results["platform"] = raw_primitives(budget)
            results["codec_chain"] = codec_chain(budget)
        if args.only in (None, "small"):
            results["small_commit"] = small_commits(
                workdir,
                rounds=args.rounds or (3 if args.quick else 7),
                per_round=30 if args.quick else 200,
            )
        if args.only in (None, "large"):
            results["large_entry"] = large_entry(
                workdir,
                (args.large_mib or (64 if args.quick else 1024)) << 20,
                reps=args.large_reps or (1 if args.quick else 5),
                content=args.large_content,
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
