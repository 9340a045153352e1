"""Benchmark: ckptdb's LangGraph saver (CkptdbSaver) against LangGraph's SqliteSaver.

    python tools/bench_langgraph.py                  # full run: 1,000 steps, 3 rounds
    python tools/bench_langgraph.py --quick          # seconds, for CI / a smoke check
    python tools/bench_langgraph.py --json out.json  # also write the numbers as JSON
    python tools/bench_langgraph.py --only scale --keep --dir /tmp/scale  # 10k and 100k

One run measures both savers on the same workload, on files in the same directory, in
interleaved rounds (the order alternates), and reports ratios -- absolute times on shared
VMs drift, ratios measured side by side do not.

Workloads (one thread, one checkpoint namespace, a chain of ``--steps`` checkpoints):

* ``1kb``   -- a ~1 KB state: 10 channels of ~100 bytes, one of which changes per step;
* ``100kb`` -- a ~100 KB state: 10 channels of ~10 KB, one of which changes per step.

Both savers are durable on every put: SQLite WAL with ``synchronous=FULL`` (Python's
sqlite3 default, which SqliteSaver uses; ckptdb's default). Reported per workload:

* put throughput (puts/s, median of the rounds) and the ratio ckptdb / SqliteSaver;
* get_tuple latency (newest checkpoint, and one 100 steps back) and list latency
  (``limit=10``), median microseconds, measured in blocks that alternate between the two
  savers;
* file size after the run (database + WAL, after a WAL checkpoint) and the ratio;
* for ckptdb, the file size after ``prune(keep_latest)``, next to the bytes the kept
  checkpoint holds and the size of an empty saver file.

The ``threads`` workload is a server's: ``--threads`` (default 64) Python threads in one
process share one saver, each putting a chain of ``--thread-steps`` checkpoints of the
100 KB state on a LangGraph thread of its own. Reported: total puts/s of each saver, the
ratio, and the p50/p99 latency of a put (SqliteSaver serializes its puts behind one lock
and one connection; CkptdbSaver's ride ckptdb's group commit).

The ``copy`` workload builds one thread of ``--copy-steps`` checkpoints (default 10,000,
1 KB state) with CkptdbSaver and times ``copy_thread`` of it, with the blob bytes stored
before and after (a fork must copy none) and a check that the copy reads back. SqliteSaver
3.x has no ``copy_thread``, so this one is absolute.

The ``chat`` workload is a real compiled LangGraph ``StateGraph`` whose ``messages``
channel uses ``add_messages``: per turn one user message in and one assistant message out
(~1 KB of pseudo-English each), ``--turns`` turns (default 300; ``--quick`` 30), run
``--chat-rounds`` times per saver (default 3, the order alternating), reporting file bytes
and the median wall time side by side (the ratio is the median of the per-round ratios);
and, when
the installed langgraph has ``DeltaChannel``, the same graph with the channel declared as a
``DeltaChannel``. For ckptdb it also records every blob the saver sent to ckptdb and
reports what storage format 2 would keep of them: the raw bytes of the distinct blobs (what
whole-blob content addressing stores today), of the distinct CDC chunks
(``ckptdb.store.chunking``), and of those chunks after ``ckptdb.store.codec.encode`` (zstd).

The ``scale`` workload (never part of the default run: growing 100,000 checkpoints per
saver takes a while; ``--only scale``, or ``--scale`` to add it to the others) is a server's
that holds many LangGraph threads and reads cold ones. ``--scale-threads`` threads (default
1,000) are grown round-robin with the 1 KB state (one shared step list, each thread's
checkpoints with ids of their own), each put followed by one pending write, to each of
``--scale-sizes`` checkpoints per thread (default "10,100": 10,000 then 100,000 in all),
the same data for both savers. At each size, with the calls alternating between the savers
in blocks and every answer checked: ``get_tuple`` of a thread's newest checkpoint and of an
older one by id, ``list(limit=50)`` and ``list(before=<the 25th newest>, limit=50)`` -- all
cold (a freshly opened saver, each call on a thread it has not touched); a metadata filter
across all threads; opening a saver plus its first ``get_tuple``; then, on a scratch copy
of each file (the grown files stay as grown), a put of the next step on existing threads
(a fresh saver: CPU and wall) and ``delete_thread``. Also: file bytes, the mean CPU of a put
and a ``put_writes`` while growing, and each saver's growth from the first size to the
last. ``--quick``: 20 threads, sizes "3,10". ``--keep`` keeps the files and prints where.
"""

from __future__ import annotations

import argparse
import base64
import gc
import hashlib
import itertools
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict, TypeVar

import apsw
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from ckptdb.extension import Addressed
from ckptdb.integrations.langgraph import CkptdbSaver
from ckptdb.store import chunking, codec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_chunking import _vocabulary, chat_message  # a sibling tool

CHANNELS = 10
WORKLOADS = {"1kb": 100, "100kb": 10_000}  # bytes per channel value
_T = TypeVar("_T")


def _text(rng: random.Random, size: int) -> str:
    return base64.b64encode(rng.randbytes(size * 3 // 4)).decode()[:size]


def make_steps(
    per_channel: int, steps: int, seed: int = 7
) -> list[tuple[Checkpoint, dict[str, str]]]:
    """The checkpoints of a thread: every step changes one channel (round robin)."""
    rng = random.Random(seed)
    values = {f"channel_{i}": _text(rng, per_channel) for i in range(CHANNELS)}
    versions = dict.fromkeys(values, "00000000000000000000000000000001.0")
    out: list[tuple[Checkpoint, dict[str, str]]] = []
    for step in range(steps):
        changed = f"channel_{step % CHANNELS}"
        values = {**values, changed: _text(rng, per_channel)}
        current = int(versions[changed].split(".")[0])
        versions = {**versions, changed: f"{current + 1:032}.{rng.random():016}"}
        checkpoint = Checkpoint(
            v=4,
            id=str(uuid6(clock_seq=step)),
            ts=datetime.now(UTC).isoformat(),
            channel_values=values,
            channel_versions=versions,
            versions_seen={"agent": dict(versions)},
            updated_channels=[changed],
        )
        out.append((checkpoint, {changed: versions[changed]}))
    return out


class Contender:
    """One saver on one fresh file."""

    def __init__(self, name: str, directory: Path, tag: str) -> None:
        self.name = name
        self.path = directory / f"{name}-{tag}.db"
        self.conn: sqlite3.Connection | None = None
        self.saver: BaseCheckpointSaver[Any]
        if name == "sqlite":
            self.conn = sqlite3.connect(self.path, check_same_thread=False)
            self.saver = SqliteSaver(self.conn)
            self.saver.setup()
        else:
            self.saver = CkptdbSaver(self.path)

    def file_bytes(self) -> int:
        """Database plus WAL after a WAL checkpoint (what the disk holds)."""
        if self.conn is not None:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            assert isinstance(self.saver, CkptdbSaver)
            self.saver.db.close()  # the last connection to close checkpoints the WAL
            self.saver = CkptdbSaver(self.path)
        return sum(
            os.path.getsize(str(self.path) + s)
            for s in ("", "-wal")
            if os.path.exists(str(self.path) + s)
        )

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        else:
            assert isinstance(self.saver, CkptdbSaver)
            self.saver.close()


def run_puts(
    contender: Contender, steps: list[tuple[Checkpoint, dict[str, str]]]
) -> tuple[float, float]:
    """Put every step as a chain; returns puts per second and the CPU time of a put in
    microseconds (this thread's, so the wait for fsync is left out: it tells the work a
    put does apart from the disk, whose speed on the shared VM moves 10x between runs)."""
    config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    saver = contender.saver
    gc.collect()
    cpu = time.thread_time()
    start = time.perf_counter()
    for step, (checkpoint, new_versions) in enumerate(steps):
        metadata: Any = {"source": "loop", "step": step, "parents": {}}
        config = saver.put(config, checkpoint, metadata, new_versions)
    wall = time.perf_counter() - start
    return len(steps) / wall, (time.thread_time() - cpu) / len(steps) * 1e6


def _median_us(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def read_latencies(
    contenders: dict[str, Contender],
    steps: list[tuple[Checkpoint, dict[str, str]]],
    repeat: int,
    blocks: int = 10,
) -> dict[str, dict[str, float]]:
    """Median latency of each read, per contender: ``repeat`` calls each, in ``blocks``
    blocks alternating between the contenders (so a change in the machine's load hits both
    alike)."""
    latest: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    back = steps[max(len(steps) - 101, 0)][0]["id"]
    older: Any = {
        "configurable": {"thread_id": "bench", "checkpoint_ns": "", "checkpoint_id": back}
    }
    reads: dict[str, Callable[[BaseCheckpointSaver[Any]], Any]] = {
        "get_tuple_latest_us": lambda s: s.get_tuple(latest),
        "get_tuple_older_us": lambda s: s.get_tuple(older),
        "list_limit10_us": lambda s: list(s.list(latest, limit=10)),
    }
    for c in contenders.values():
        assert c.saver.get_tuple(latest) is not None and c.saver.get_tuple(older) is not None
    times: dict[str, dict[str, list[float]]] = {who: {k: [] for k in reads} for who in contenders}
    per_block = max(1, repeat // blocks)
    names = list(contenders)
    for b in range(blocks):
        for who in names if b % 2 == 0 else names[::-1]:
            saver = contenders[who].saver
            for key, read in reads.items():
                for _ in range(per_block):
                    start = time.perf_counter()
                    read(saver)
                    times[who][key].append(time.perf_counter() - start)
    return {
        who: {k: statistics.median(v) * 1e6 for k, v in per.items()} for who, per in times.items()
    }


#: Where the bytes of a ckptdb file are, by table (dbstat): the tables (and indexes) that
#: hold checkpoints, blobs and the saver's rows; ckptdb's own records (pointer history,
#: receipts); and the rest (schema, settings, migrations, free pages).
_KEPT_TABLES = ("blob", "chunk", "chunk_data", "blob_chunk", "entry", "checkpoint", "lg_")
_RECORD_TABLES = ("pointer_history", "receipt")


def where_the_bytes_are(path: Path) -> dict[str, int]:
    """Page bytes per kind of table of a closed ckptdb file (read-only, via dbstat)."""
    conn = apsw.Connection(
        f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
        tables = {
            str(n): str(t or n)
            for n, t in conn.execute("SELECT name, tbl_name FROM sqlite_schema").fetchall()
        }
    finally:
        conn.close()
    out = {"kept_state": 0, "pointer_history_and_receipts": 0, "schema_and_other": 0}
    for name, size in rows:
        table = tables.get(str(name), str(name))
        if table.startswith(_KEPT_TABLES):
            out["kept_state"] += int(size)
        elif table in _RECORD_TABLES:
            out["pointer_history_and_receipts"] += int(size)
        else:
            out["schema_and_other"] += int(size)
    return out


def empty_saver_bytes(directory: Path) -> int:
    path = directory / "empty.db"
    CkptdbSaver(path).close()
    return sum(
        os.path.getsize(str(path) + s) for s in ("", "-wal") if os.path.exists(str(path) + s)
    )


def bench_workload(
    name: str, per_channel: int, n_steps: int, rounds: int, directory: Path, repeat: int
) -> dict[str, Any]:
    steps = make_steps(per_channel, n_steps)
    puts: dict[str, list[float]] = {"sqlite": [], "ckptdb": []}
    cpus: dict[str, list[float]] = {"sqlite": [], "ckptdb": []}
    last: dict[str, Contender] = {}
    for r in range(rounds):
        order = ["sqlite", "ckptdb"] if r % 2 == 0 else ["ckptdb", "sqlite"]
        for who in order:
            if who in last:
                last[who].close()
            contender = Contender(who, directory, f"{name}-{r}")
            rate, cpu = run_puts(contender, steps)
            puts[who].append(rate)
            cpus[who].append(cpu)
            last[who] = contender
    out: dict[str, Any] = {"state_bytes": per_channel * CHANNELS, "steps": n_steps}
    latencies = read_latencies(last, steps, repeat)
    for who, contender in last.items():
        out[who] = {
            "puts_per_s": statistics.median(puts[who]),
            "puts_per_s_rounds": puts[who],
            "put_cpu_us": statistics.median(cpus[who]),
            **latencies[who],
            "file_bytes": contender.file_bytes(),
        }
    ck = last["ckptdb"]
    assert isinstance(ck.saver, CkptdbSaver)
    ck.saver.prune(["bench"], strategy="keep_latest")
    kept = ck.saver.db.current("langgraph/bench")
    assert kept is not None
    out["ckptdb"]["kept_checkpoints"] = len(list(ck.saver.list(None)))
    out["ckptdb"]["kept_state_bytes"] = kept.total_size
    out["ckptdb"]["file_bytes_after_prune"] = ck.file_bytes()
    stats = ck.saver.db.stats()
    out["ckptdb"]["stored_blob_bytes_after_prune"] = stats.stored_bytes
    ck.saver.db.close()
    out["ckptdb"]["after_prune_by_table"] = where_the_bytes_are(ck.path)
    ck.saver = CkptdbSaver(ck.path)
    out["put_ratio"] = out["ckptdb"]["puts_per_s"] / out["sqlite"]["puts_per_s"]
    out["file_ratio"] = out["ckptdb"]["file_bytes"] / out["sqlite"]["file_bytes"]
    for contender in last.values():
        contender.close()
    return out


# --- many threads, one saver -------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_threads(
    contender: Contender, chains: list[list[tuple[Checkpoint, dict[str, str]]]]
) -> dict[str, Any]:
    """Every chain put by its own Python thread on its own LangGraph thread, all sharing the
    contender's saver; returns total puts/s and per-put latencies."""
    saver = contender.saver
    latencies: list[list[float]] = [[] for _ in chains]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(chains) + 1)

    def worker(i: int) -> None:
        config: Any = {"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}}
        mine = latencies[i]
        barrier.wait()
        try:
            for step, (checkpoint, new_versions) in enumerate(chains[i]):
                metadata: Any = {"source": "loop", "step": step, "parents": {}}
                t0 = time.perf_counter()
                config = saver.put(config, checkpoint, metadata, new_versions)
                mine.append(time.perf_counter() - t0)
        except BaseException as exc:  # reported below: a benchmark must not hide failures
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(len(chains))]
    for w in workers:
        w.start()
    gc.collect()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    every = [x for per in latencies for x in per]
    return {
        "puts_per_s": len(every) / wall,
        "p50_put_ms": _percentile(every, 0.50) * 1e3,
        "p99_put_ms": _percentile(every, 0.99) * 1e3,
        "max_put_ms": max(every) * 1e3,
    }


def bench_threads(
    n_threads: int, steps: int, rounds: int, directory: Path, per_channel: int = 10_000
) -> dict[str, Any]:
    chains = [make_steps(per_channel, steps, seed=100 + i) for i in range(n_threads)]
    runs: dict[str, list[dict[str, Any]]] = {"sqlite": [], "ckptdb": []}
    for r in range(rounds):
        order = ["sqlite", "ckptdb"] if r % 2 == 0 else ["ckptdb", "sqlite"]
        for who in order:
            contender = Contender(who, directory, f"threads-{r}")
            try:
                runs[who].append(run_threads(contender, chains))
            finally:
                contender.close()
    out: dict[str, Any] = {
        "threads": n_threads,
        "steps_per_thread": steps,
        "state_bytes": per_channel * CHANNELS,
    }
    for who, results in runs.items():
        out[who] = {
            key: statistics.median(r[key] for r in results)
            for key in ("puts_per_s", "p50_put_ms", "p99_put_ms", "max_put_ms")
        }
        out[who]["puts_per_s_rounds"] = [r["puts_per_s"] for r in results]
    out["put_ratio"] = out["ckptdb"]["puts_per_s"] / out["sqlite"]["puts_per_s"]
    return out


# --- forking a long thread ------------------------------------------------------------------


def bench_copy(n_steps: int, directory: Path, per_channel: int = 100) -> dict[str, Any]:
    """copy_thread of one thread of ``n_steps`` checkpoints (CkptdbSaver only)."""
    contender = Contender("ckptdb", directory, "copy")
    saver = contender.saver
    assert isinstance(saver, CkptdbSaver)
    try:
        run_puts(contender, make_steps(per_channel, n_steps))
        before = saver.db.stats()
        gc.collect()
        start = time.perf_counter()
        saver.copy_thread("bench", "fork")
        seconds = time.perf_counter() - start
        after = saver.db.stats()
        fork: Any = {"configurable": {"thread_id": "fork", "checkpoint_ns": ""}}
        source: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        copied = saver.get_tuple(fork)
        original = saver.get_tuple(source)
        assert copied is not None and original is not None
        assert copied.checkpoint == original.checkpoint
        assert len(list(saver.list(fork, limit=n_steps + 1))) == n_steps
        return {
            "checkpoints": n_steps,
            "copy_s": seconds,
            "blobs_before": before.blobs,
            "blobs_after": after.blobs,
            "stored_blob_bytes_before": before.stored_bytes,
            "stored_blob_bytes_after": after.stored_bytes,
            "blob_bytes_copied": after.stored_bytes - before.stored_bytes,
        }
    finally:
        contender.close()


# --- at scale: cold reads on a file of many threads ---------------------------------------

SCALE_TAG = "scale"
SCRATCH_TAG = "scale-scratch"
#: The pending write every step gets, on the checkpoint just put.
SCALE_WRITE = ("channel_0", "x")
#: The saver columns of the scale table, in print order: (key, label).
SCALE_ROWS = (
    ("get_tuple_newest_us", "get_tuple newest, cold"),
    ("get_tuple_older_us", "get_tuple by id, cold"),
    ("list_page_us", "list limit=50, cold"),
    ("list_before_us", "list before, limit=50, cold"),
    ("list_filter_us", "list filter step, limit=10"),
    ("open_first_read_us", "open + first get_tuple"),
    ("put_existing_cpu_us", "put on a thread, CPU"),
    ("put_existing_wall_us", "put on a thread, wall"),
    ("delete_thread_us", "delete_thread"),
    ("build_put_cpu_us", "growth put, CPU"),
    ("build_put_writes_cpu_us", "growth put_writes, CPU"),
)
#: The measures whose growth from the first size to the last is reported.
GROWTH_KEYS = (
    "get_tuple_newest_us",
    "get_tuple_older_us",
    "list_page_us",
    "list_before_us",
    "list_filter_us",
    "open_first_read_us",
)


@dataclass(frozen=True)
class ScaleRepeats:
    """Timed calls per saver of each scale measure (``cold``: of each cold read, each call
    on a thread of its own), and the blocks they alternate in."""

    cold: int
    filter: int
    open: int
    put: int
    delete: int
    blocks: int

    def fitted(self, threads: int) -> ScaleRepeats:
        """Within what ``threads`` threads allow: the four cold reads each need distinct
        threads, and the puts and deletes (on a scratch copy) too."""
        cold = max(1, min(self.cold, threads // 4))
        delete = max(1, min(self.delete, threads // 2))
        return replace(self, cold=cold, delete=delete, put=max(1, min(self.put, threads - delete)))


SCALE_FULL = ScaleRepeats(cold=200, filter=8, open=20, put=200, delete=20, blocks=10)
SCALE_QUICK = ScaleRepeats(cold=5, filter=3, open=5, put=10, delete=3, blocks=2)


def _thread_config(thread: int, checkpoint_id: str | None = None) -> Any:
    conf = {"thread_id": f"t{thread}", "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _stamped(checkpoint: Checkpoint, step: int) -> Checkpoint:
    """The shared step's checkpoint with an id and time of its own, so that no two threads
    hold an equal envelope (ckptdb would store such a pair once)."""
    fresh = checkpoint.copy()
    fresh["id"] = str(uuid6(clock_seq=step))
    fresh["ts"] = datetime.now(UTC).isoformat()
    return fresh


def _step_metadata(step: int) -> Any:
    return {"source": "loop", "step": step, "parents": {}}


def _expect(condition: bool, what: str) -> None:
    """Stop the benchmark on a wrong answer (never time one; unlike assert, -O keeps it)."""
    if not condition:
        raise AssertionError(f"scale workload: {what}")


def _clocked(fn: Callable[[], _T]) -> tuple[_T, float, float]:
    """``fn()``, its wall time and this thread's CPU time, in seconds."""
    cpu = time.thread_time()
    start = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - start
    return out, wall, time.thread_time() - cpu


def _alternating(
    names: list[str], n: int, blocks: int, call: Callable[[str, int], tuple[float, float]]
) -> dict[str, dict[str, float]]:
    """Median wall and CPU microseconds of ``call(who, j)`` for j in 0..n-1 per contender,
    the calls cut in ``blocks`` blocks alternating between the contenders (so a change in
    the machine's load hits both alike). ``call`` returns (wall, cpu) seconds."""
    walls: dict[str, list[float]] = {who: [] for who in names}
    cpus: dict[str, list[float]] = {who: [] for who in names}
    bounds = [round(b * n / blocks) for b in range(blocks + 1)]
    gc.collect()
    for b in range(blocks):
        for who in names if b % 2 == 0 else names[::-1]:
            for j in range(bounds[b], bounds[b + 1]):
                wall, cpu = call(who, j)
                walls[who].append(wall)
                cpus[who].append(cpu)
    return {
        who: {
            "wall_us": statistics.median(walls[who]) * 1e6,
            "cpu_us": statistics.median(cpus[who]) * 1e6,
        }
        for who in names
    }


def _files(path: Path) -> list[Path]:
    return [Path(str(path) + s) for s in ("", "-wal", "-shm")]


def _closed_file_bytes(path: Path) -> int:
    """Database plus WAL of a file no connection holds (closing checkpointed the WAL)."""
    return sum(p.stat().st_size for p in _files(path)[:2] if p.exists())


def _progress(message: str) -> None:
    print(f"scale: {message}", file=sys.stderr, flush=True)


class ScaleFile:
    """The two grown files (one per saver) and what the benchmark put in them: the shared
    step list and, per thread, the LangGraph ids of its checkpoints, oldest first."""

    def __init__(self, directory: Path, threads: int, steps: int) -> None:
        self.directory = directory
        self.names = ["sqlite", "ckptdb"]
        self.steps = make_steps(WORKLOADS["1kb"], steps)
        self.ids: list[list[str]] = [[] for _ in range(threads)]

    def path(self, who: str, tag: str = SCALE_TAG) -> Path:
        """Where ``Contender(who, directory, tag)`` keeps its file."""
        return self.directory / f"{who}-{tag}.db"

    def grow(self, size: int) -> dict[str, dict[str, float]]:
        """Every thread grown to ``size`` checkpoints, round-robin (step k of every thread,
        then step k+1), each put followed by one pending write on it; per saver, the mean
        CPU and wall microseconds of a put and of a put_writes over this growth."""
        start = len(self.ids[0])
        savers = {who: Contender(who, self.directory, SCALE_TAG) for who in self.names}
        spent = {who: [0.0, 0.0, 0.0, 0.0] for who in self.names}
        began = last_report = time.perf_counter()
        try:
            for step in range(start, size):
                template, new_versions = self.steps[step]
                batch = [_stamped(template, step) for _ in self.ids]
                for who in self.names if step % 2 == 0 else self.names[::-1]:
                    self._put_round(savers[who].saver, step, batch, new_versions, spent[who])
                for ids, checkpoint in zip(self.ids, batch, strict=True):
                    ids.append(checkpoint["id"])
                now = time.perf_counter()
                if now - last_report >= 10 or step == size - 1:
                    last_report = now
                    _progress(
                        f"{step + 1}/{size} checkpoints per thread, "
                        f"{(step + 1) * len(self.ids):,} per saver, {now - began:.0f} s"
                    )
        finally:
            for contender in savers.values():
                contender.close()
        puts = (size - start) * len(self.ids)
        return {
            who: {
                key: total / puts * 1e6
                for key, total in zip(
                    (
                        "build_put_cpu_us",
                        "build_put_wall_us",
                        "build_put_writes_cpu_us",
                        "build_put_writes_wall_us",
                    ),
                    spent[who],
                    strict=True,
                )
            }
            for who in self.names
        }

    def _put_round(
        self,
        saver: BaseCheckpointSaver[Any],
        step: int,
        batch: list[Checkpoint],
        new_versions: dict[str, str],
        spent: list[float],
    ) -> None:
        """Step ``step`` put on every thread, then its pending write; ``spent`` adds up
        (put CPU, put wall, put_writes CPU, put_writes wall) in seconds."""
        metadata = _step_metadata(step)
        task = f"task-{step}"
        for thread, (ids, checkpoint) in enumerate(zip(self.ids, batch, strict=True)):
            parent = _thread_config(thread, ids[-1] if ids else None)
            cpu0, wall0 = time.thread_time(), time.perf_counter()
            config = saver.put(parent, checkpoint, metadata, new_versions)
            cpu1, wall1 = time.thread_time(), time.perf_counter()
            saver.put_writes(config, [SCALE_WRITE], task_id=task)
            cpu2, wall2 = time.thread_time(), time.perf_counter()
            _expect(config["configurable"]["checkpoint_id"] == checkpoint["id"], "put's config")
            spent[0] += cpu1 - cpu0
            spent[1] += wall1 - wall0
            spent[2] += cpu2 - cpu1
            spent[3] += wall2 - wall1

    def measure(self, size: int, repeats: ScaleRepeats, rng: random.Random) -> dict[str, Any]:
        """Every scale measure at the current size (the files closed, every thread holding
        ``size`` checkpoints): cold reads and the metadata filter, open + first read, then
        puts and deletes on a scratch copy, so the grown files stay as grown."""
        _expect(all(len(ids) == size for ids in self.ids), "every thread grown")
        per: dict[str, dict[str, Any]] = {
            who: {"file_bytes": _closed_file_bytes(self.path(who))} for who in self.names
        }
        _progress(f"measuring at {size} checkpoints per thread")
        for measures in (
            self._cold_reads(size, repeats, rng),
            self._open_first_read(size, repeats, rng),
            self._writes(size, repeats, rng),
        ):
            for who in self.names:
                per[who].update(measures[who])
        return {
            "checkpoints_per_thread": size,
            "checkpoints": size * len(self.ids),
            "before_depth": _before_depth(size),
            # What a list call returns grows with the thread up to 50: read growth with it.
            "list_page_items": min(50, size),
            "list_before_items": min(50, size - _before_depth(size)),
            **per,
            "ratio": {
                key: per["ckptdb"][key] / per["sqlite"][key]
                for key in per["ckptdb"]
                if per["sqlite"].get(key)
            },
        }

    def _check_tuple(self, found: Any, thread: int, index: int) -> None:
        """``found`` is checkpoint ``index`` of ``thread``, with its one pending write."""
        ids = self.ids[thread]
        _expect(found is not None, f"t{thread} has a checkpoint {index}")
        _expect(found.config["configurable"]["checkpoint_id"] == ids[index], "checkpoint id")
        _expect(found.metadata["step"] == index % len(ids), "checkpoint metadata")
        writes = [tuple(w) for w in found.pending_writes or []]
        _expect(writes == [(f"task-{index % len(ids)}", *SCALE_WRITE)], "pending writes")

    def _check_page(self, page: list[Any], expected: list[str]) -> None:
        got = [t.config["configurable"]["checkpoint_id"] for t in page]
        _expect(got == expected, f"a page of {len(expected)}, newest first (got {len(got)})")

    def _cold_reads(
        self, size: int, repeats: ScaleRepeats, rng: random.Random
    ) -> dict[str, dict[str, float]]:
        """get_tuple (newest, by id) and list (a page, a page before) on fresh savers, each
        call on a thread that saver has not touched; then the metadata filter."""
        n = repeats.cold
        threads = rng.sample(range(len(self.ids)), 4 * n)
        older = [rng.randrange(size - 1) for _ in range(n)]
        depth = _before_depth(size)
        page = min(50, size)
        readers = {who: Contender(who, self.directory, SCALE_TAG) for who in self.names}

        def newest(who: str, j: int) -> tuple[float, float]:
            t = threads[j]
            found, wall, cpu = _clocked(lambda: readers[who].saver.get_tuple(_thread_config(t)))
            self._check_tuple(found, t, -1)
            return wall, cpu

        def by_id(who: str, j: int) -> tuple[float, float]:
            t = threads[n + j]
            config = _thread_config(t, self.ids[t][older[j]])
            found, wall, cpu = _clocked(lambda: readers[who].saver.get_tuple(config))
            self._check_tuple(found, t, older[j])
            return wall, cpu

        def list_page(who: str, j: int) -> tuple[float, float]:
            t = threads[2 * n + j]
            saver = readers[who].saver
            got, wall, cpu = _clocked(lambda: list(saver.list(_thread_config(t), limit=50)))
            self._check_page(got, self.ids[t][::-1][:page])
            return wall, cpu

        def list_before(who: str, j: int) -> tuple[float, float]:
            t = threads[3 * n + j]
            saver = readers[who].saver
            before = _thread_config(t, self.ids[t][-depth])
            got, wall, cpu = _clocked(
                lambda: list(saver.list(_thread_config(t), before=before, limit=50))
            )
            self._check_page(got, self.ids[t][: size - depth][::-1][:50])
            return wall, cpu

        steps = [rng.randrange(size) for _ in range(repeats.filter)]
        expected = min(10, len(self.ids))

        def by_metadata(who: str, j: int) -> tuple[float, float]:
            saver = readers[who].saver
            got, wall, cpu = _clocked(
                lambda: list(saver.list(None, filter={"step": steps[j]}, limit=10))
            )
            _expect(len(got) == expected, f"filter found {len(got)} of {expected}")
            _expect(all(t.metadata["step"] == steps[j] for t in got), "filter's step")
            return wall, cpu

        out: dict[str, dict[str, float]] = {who: {} for who in self.names}
        try:
            for key, call, count in (
                ("get_tuple_newest", newest, n),
                ("get_tuple_older", by_id, n),
                ("list_page", list_page, n),
                ("list_before", list_before, n),
                ("list_filter", by_metadata, repeats.filter),
            ):
                medians = _alternating(self.names, count, min(repeats.blocks, count), call)
                for who, m in medians.items():
                    out[who][f"{key}_us"] = m["wall_us"]
                    out[who][f"{key}_cpu_us"] = m["cpu_us"]
        finally:
            for contender in readers.values():
                contender.close()
        return out

    def _open_first_read(
        self, size: int, repeats: ScaleRepeats, rng: random.Random
    ) -> dict[str, dict[str, float]]:
        """A fresh saver on the file and get_tuple of one thread's newest, timed together
        (the close after is not)."""
        threads = [rng.randrange(len(self.ids)) for _ in range(repeats.open)]

        def open_read(who: str, j: int) -> tuple[float, float]:
            t = threads[j]

            def run() -> tuple[Contender, Any]:
                contender = Contender(who, self.directory, SCALE_TAG)
                return contender, contender.saver.get_tuple(_thread_config(t))

            (contender, found), wall, cpu = _clocked(run)
            contender.close()
            self._check_tuple(found, t, -1)
            return wall, cpu

        medians = _alternating(
            self.names, repeats.open, min(repeats.blocks, repeats.open), open_read
        )
        return {
            who: {"open_first_read_us": m["wall_us"], "open_first_read_cpu_us": m["cpu_us"]}
            for who, m in medians.items()
        }

    def _writes(
        self, size: int, repeats: ScaleRepeats, rng: random.Random
    ) -> dict[str, dict[str, float]]:
        """On a scratch copy of each file: the next step put on existing threads (a fresh
        saver, each put the first touch of its thread), then delete_thread of other threads
        (each holding ``size`` checkpoints)."""
        for who in self.names:
            for source, copy in zip(
                _files(self.path(who)), _files(self.path(who, SCRATCH_TAG)), strict=True
            ):
                if source.exists():
                    shutil.copy(source, copy)
        chosen = rng.sample(range(len(self.ids)), repeats.put + repeats.delete)
        put_threads, doomed = chosen[: repeats.put], chosen[repeats.put :]
        template, new_versions = self.steps[size]
        fresh = [_stamped(template, size) for _ in put_threads]
        savers = {who: Contender(who, self.directory, SCRATCH_TAG) for who in self.names}

        def put(who: str, j: int) -> tuple[float, float]:
            t = put_threads[j]
            parent = _thread_config(t, self.ids[t][-1])
            saver = savers[who].saver
            config, wall, cpu = _clocked(
                lambda: saver.put(parent, fresh[j], _step_metadata(size), new_versions)
            )
            _expect(config["configurable"]["checkpoint_id"] == fresh[j]["id"], "put's config")
            return wall, cpu

        def delete(who: str, j: int) -> tuple[float, float]:
            t = doomed[j]
            saver = savers[who].saver
            _, wall, cpu = _clocked(lambda: saver.delete_thread(f"t{t}"))
            return wall, cpu

        out: dict[str, dict[str, float]] = {who: {} for who in self.names}
        try:
            puts = _alternating(self.names, repeats.put, min(repeats.blocks, repeats.put), put)
            for contender in savers.values():
                for j, t in enumerate(put_threads):
                    found = contender.saver.get_tuple(_thread_config(t))
                    _expect(
                        found is not None and found.checkpoint["id"] == fresh[j]["id"],
                        "put read back",
                    )
            deletes = _alternating(
                self.names, repeats.delete, min(repeats.blocks, repeats.delete), delete
            )
            for who, contender in savers.items():
                for t in doomed:
                    _expect(contender.saver.get_tuple(_thread_config(t)) is None, f"t{t} deleted")
                out[who] = {
                    "put_existing_cpu_us": puts[who]["cpu_us"],
                    "put_existing_wall_us": puts[who]["wall_us"],
                    "delete_thread_us": deletes[who]["wall_us"],
                    "delete_thread_cpu_us": deletes[who]["cpu_us"],
                }
        finally:
            for contender in savers.values():
                contender.close()
            for who in self.names:
                for path in _files(self.path(who, SCRATCH_TAG)):
                    path.unlink(missing_ok=True)
        return out


def _before_depth(size: int) -> int:
    """Which newest checkpoint ``list(before=...)`` starts under: the 25th, or the middle
    of a shorter thread."""
    return min(25, max(1, size // 2))


def bench_scale(
    threads: int, sizes: list[int], directory: Path, repeats: ScaleRepeats, seed: int = 11
) -> dict[str, Any]:
    """Both savers' files grown to ``threads`` x ``sizes[i]`` checkpoints, measured at each
    size (see :meth:`ScaleFile.measure`); the ratios ckptdb / SqliteSaver, and the growth
    of each saver's measures from the first size to the last."""
    fitted = repeats.fitted(threads)
    grown = ScaleFile(directory, threads, sizes[-1] + 1)
    rng = random.Random(seed)
    points: list[dict[str, Any]] = []
    for size in sizes:
        started = time.perf_counter()
        build = grown.grow(size)
        build_s = time.perf_counter() - started
        point = grown.measure(size, fitted, rng)
        for who in grown.names:
            point[who].update(build[who])
        point["build_s"] = build_s
        point["ratio"].update(
            {key: build["ckptdb"][key] / build["sqlite"][key] for key in build["ckptdb"]}
        )
        points.append(point)
    out: dict[str, Any] = {
        "threads": threads,
        "sizes": sizes,
        "state_bytes": WORKLOADS["1kb"] * CHANNELS,
        "repeats": asdict(fitted),
        "files": {who: str(grown.path(who)) for who in grown.names},
        "points": points,
    }
    if len(points) > 1:
        first, last = points[0], points[-1]
        out["growth"] = {
            who: {key: last[who][key] / first[who][key] for key in GROWTH_KEYS}
            for who in grown.names
        }
    return out


# --- the chat workload: a real graph ---------------------------------------------------


class ChatState(TypedDict):
    """The chat graph's state: a message list reduced with ``add_messages``."""

    messages: Annotated[list[Any], add_messages]


def _batch_add(state: Any, writes: Any) -> Any:
    """``add_messages`` over a batch of writes (the reducer shape DeltaChannel needs)."""
    out = state if state is not None else []
    for write in writes:
        out = add_messages(out, write)
    return out


try:
    from langgraph.channels import DeltaChannel

    class DeltaChatState(TypedDict):
        """The same state with the message list as a DeltaChannel."""

        messages: Annotated[list[Any], DeltaChannel(_batch_add)]

except ImportError:  # an older langgraph: the DeltaChannel variant is skipped
    DeltaChatState = None  # type: ignore[assignment,misc]


def _chat_graph(saver: BaseCheckpointSaver[Any], delta: bool, replies: list[str]) -> Any:
    """A compiled one-node chat graph: the node answers with the next canned reply."""
    builder: Any = StateGraph(DeltaChatState if delta else ChatState)
    turn = iter(range(len(replies)))

    def assistant(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(content=replies[next(turn)])]}

    builder.add_node("assistant", assistant)
    builder.add_edge(START, "assistant")
    builder.add_edge("assistant", END)
    return builder.compile(checkpointer=saver)


def _chat_texts(turns: int, seed: int = 23) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    users = [str(chat_message(rng, vocab, 2 * i)["content"]) for i in range(turns)]
    replies = [str(chat_message(rng, vocab, 2 * i + 1)["content"]) for i in range(turns)]
    return users, replies


class _Recorder:
    """Wraps CkptdbSaver._encode to keep every blob the saver hands to ckptdb."""

    def __init__(self, saver: CkptdbSaver) -> None:
        self.blobs: list[bytes] = []
        inner = saver._encode

        def encode(*args: Any, **kwargs: Any) -> Any:
            result = inner(*args, **kwargs)
            self.blobs.extend(
                v.data if isinstance(v, Addressed) else v
                for v in result[0].values()
                if isinstance(v, bytes | Addressed)
            )
            return result

        saver._encode = encode  # type: ignore[method-assign]


def format2_estimate(blobs: list[bytes], params: chunking.ChunkParams) -> dict[str, int]:
    """Raw bytes of the distinct blobs vs distinct CDC chunks vs those chunks zstd'ed."""
    distinct: dict[bytes, bytes] = {}
    for blob in blobs:
        distinct.setdefault(hashlib.sha256(blob).digest(), blob)
    chunks: set[bytes] = set()
    unique_raw = unique_stored = n_chunks = 0
    for blob in distinct.values():
        for chunk in chunking.cut(blob, params):
            key = hashlib.sha256(chunk).digest()
            n_chunks += 1
            if key in chunks:
                continue
            chunks.add(key)
            unique_raw += len(chunk)
            unique_stored += len(codec.encode(chunk)[1])
    return {
        "blobs_sent": len(blobs),
        "bytes_sent": sum(len(b) for b in blobs),
        "distinct_blob_bytes": sum(len(b) for b in distinct.values()),
        "chunk_refs": n_chunks,
        "distinct_chunks": len(chunks),
        "distinct_chunk_bytes": unique_raw,
        "distinct_chunk_bytes_zstd": unique_stored,
    }


def bench_chat(turns: int, directory: Path, delta: bool, rounds: int = 1) -> dict[str, Any]:
    """The chat graph once per saver per round, the order alternating; wall time is the
    median of the rounds (``wall_ratio`` the median of the per-round ratios), file bytes
    those of the last round."""
    users, replies = _chat_texts(turns)
    out: dict[str, Any] = {"turns": turns, "delta_channel": delta, "rounds": rounds}
    walls: dict[str, list[float]] = {"sqlite": [], "ckptdb": []}
    recorder: _Recorder | None = None
    for r in range(rounds):
        first = ["sqlite", "ckptdb"] if not delta else ["ckptdb", "sqlite"]
        for who in first if r % 2 == 0 else first[::-1]:
            wall, sizes, rec = _chat_run(who, directory, delta, users, replies, str(r))
            walls[who].append(wall)
            out[who] = sizes  # the last round's
            recorder = rec or recorder
    for who, w in walls.items():
        out[who]["wall_s"] = statistics.median(w)
        out[who]["wall_s_rounds"] = w
    out["file_ratio"] = out["ckptdb"]["file_bytes"] / out["sqlite"]["file_bytes"]
    out["wall_ratio"] = statistics.median(
        c / s for s, c in zip(walls["sqlite"], walls["ckptdb"], strict=True)
    )
    assert recorder is not None
    est = format2_estimate(recorder.blobs, chunking.DEFAULT_PARAMS)
    est["params"] = chunking.DEFAULT_PARAMS.to_settings()  # type: ignore[assignment]
    est["ratio_to_sqlite_file"] = est["distinct_chunk_bytes_zstd"] / out["sqlite"]["file_bytes"]
    out["format2_estimate"] = est
    if not delta:
        out["format2_by_params"] = {
            name: format2_estimate(recorder.blobs, p)["distinct_chunk_bytes_zstd"]
            for name, p in _CHAT_PARAMS.items()
        }
    return out


def _chat_run(
    who: str, directory: Path, delta: bool, users: list[str], replies: list[str], tag: str
) -> tuple[float, dict[str, Any], _Recorder | None]:
    """One run of the chat graph on a fresh file: its wall time, the file and checkpoint
    counts, and (for ckptdb) every blob the saver sent."""
    contender = Contender(who, directory, f"chat-{'delta' if delta else 'full'}-{tag}")
    recorder = _Recorder(contender.saver) if isinstance(contender.saver, CkptdbSaver) else None
    graph = _chat_graph(contender.saver, delta, replies)
    config: Any = {"configurable": {"thread_id": "chat"}}
    gc.collect()
    start = time.perf_counter()
    for text in users:
        graph.invoke({"messages": [HumanMessage(content=text)]}, config)
    wall = time.perf_counter() - start
    final = graph.get_state(config).values["messages"]
    assert len(final) == 2 * len(users), len(final)
    sizes = {
        "file_bytes": contender.file_bytes(),
        "checkpoints": len(list(contender.saver.list(config))),
    }
    contender.close()
    return wall, sizes, recorder


_CHAT_PARAMS = {
    "4k": chunking.ChunkParams(1024, 4096, 32768, 1, 8192),
    "8k": chunking.ChunkParams(2048, 8192, 65536, 1, 16384),
    "16k": chunking.ChunkParams(4096, 16384, 131072, 1, 32768),
    "64k": chunking.ChunkParams(16384, 65536, 524288, 1, 131072),
}


def has_delta_channel() -> bool:
    """Whether the installed langgraph has DeltaChannel (langgraph >= 1.2)."""
    return DeltaChatState is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 steps, 1 round (seconds)")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default 1000)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3)")
    parser.add_argument("--dir", default=None, help="where to put the files (default: a temp dir)")
    parser.add_argument("--turns", type=int, default=None, help="chat turns (default 300)")
    parser.add_argument(
        "--chat-rounds", type=int, default=None, help="chat runs per saver (default 3; quick 1)"
    )
    parser.add_argument("--threads", type=int, default=64, help="threads of the threads workload")
    parser.add_argument(
        "--thread-steps", type=int, default=None, help="puts per thread (default 20; quick 5)"
    )
    parser.add_argument(
        "--copy-steps", type=int, default=None, help="checkpoints copied (default 10,000)"
    )
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated subset of: 1kb,100kb,threads,copy,chat,chat_delta,scale",
    )
    parser.add_argument(
        "--scale",
        action="store_true",
        help="also run the scale workload (never part of the default run: it is long)",
    )
    parser.add_argument(
        "--scale-threads", type=int, default=None, help="scale: threads (default 1000; quick 20)"
    )
    parser.add_argument(
        "--scale-sizes",
        type=_scale_sizes,
        default=None,
        help='scale: checkpoints per thread at each measuring point (default "10,100"; '
        'quick "3,10")',
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the directory of the files and print its path"
    )
    parser.add_argument("--json", dest="json_path", default=None, help="write results here")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None

    def wanted(name: str) -> bool:
        if name == "scale":
            return args.scale or (only is not None and name in only)
        return only is None or name in only

    n_steps = args.steps or (100 if args.quick else 1000)
    rounds = args.rounds or (1 if args.quick else 3)
    repeat = 20 if args.quick else 200
    turns = args.turns or (30 if args.quick else 300)
    thread_steps = args.thread_steps or (5 if args.quick else 20)
    copy_steps = args.copy_steps or (1000 if args.quick else 10_000)
    chat_rounds = args.chat_rounds or (1 if args.quick else 3)
    scale_threads = args.scale_threads or (20 if args.quick else 1000)
    scale_sizes = args.scale_sizes or ([3, 10] if args.quick else [10, 100])
    if scale_threads < 4:
        parser.error("--scale-threads must be at least 4 (each cold read needs threads)")
    directory = Path(tempfile.mkdtemp(prefix="bench-langgraph-", dir=args.dir))
    results: dict[str, Any] = {
        "command": " ".join(
            [Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]
        ),
        "steps": n_steps,
        "rounds": rounds,
        "sqlite_version_python": sqlite3.sqlite_version,
    }
    try:
        results["empty_ckptdb_saver_file_bytes"] = empty_saver_bytes(directory)
        for name, per_channel in WORKLOADS.items():
            if wanted(name):
                results[name] = bench_workload(
                    name, per_channel, n_steps, rounds, directory, repeat
                )
        if wanted("threads"):
            results["threads"] = bench_threads(args.threads, thread_steps, rounds, directory)
        if wanted("copy"):
            results["copy"] = bench_copy(copy_steps, directory)
        if wanted("chat"):
            results["chat"] = bench_chat(turns, directory, delta=False, rounds=chat_rounds)
        if has_delta_channel() and wanted("chat_delta"):
            results["chat_delta"] = bench_chat(turns, directory, delta=True, rounds=chat_rounds)
        if wanted("scale"):
            repeats = SCALE_QUICK if args.quick else SCALE_FULL
            results["scale"] = bench_scale(scale_threads, scale_sizes, directory, repeats)
    finally:
        if args.keep:
            results["kept_dir"] = str(directory)
        else:
            shutil.rmtree(directory, ignore_errors=True)
    print_report(results)
    if args.keep:
        print(f"\nkept: {directory}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _scale_sizes(text: str) -> list[int]:
    """``--scale-sizes``: increasing checkpoint counts per thread, each at least 2."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if sizes[0] < 2 or any(b <= a for a, b in itertools.pairwise(sizes)):
        raise argparse.ArgumentTypeError(f"sizes must increase from at least 2: {text!r}")
    return sizes


def print_report(results: dict[str, Any]) -> None:
    if any(name in results for name in WORKLOADS):
        print(
            f"LangGraph savers, {results['steps']} steps, {results['rounds']} interleaved round(s)"
        )
    print(f"empty CkptdbSaver file: {results['empty_ckptdb_saver_file_bytes']:,} bytes")
    for name in WORKLOADS:
        if name not in results:
            continue
        r = results[name]
        s, c = r["sqlite"], r["ckptdb"]
        print(f"\n== {name} state ({r['state_bytes']:,} bytes, 10 channels, 1 changes per step)")
        print(f"{'':28}{'SqliteSaver':>14}{'CkptdbSaver':>14}{'ratio':>9}")
        rows = [
            ("put throughput (puts/s)", s["puts_per_s"], c["puts_per_s"], r["put_ratio"]),
            ("put CPU time (us)", s["put_cpu_us"], c["put_cpu_us"], None),
            ("get_tuple latest (us)", s["get_tuple_latest_us"], c["get_tuple_latest_us"], None),
            ("get_tuple 100 back (us)", s["get_tuple_older_us"], c["get_tuple_older_us"], None),
            ("list limit=10 (us)", s["list_limit10_us"], c["list_limit10_us"], None),
            ("file bytes", s["file_bytes"], c["file_bytes"], r["file_ratio"]),
        ]
        for label, a, b, given in rows:
            ratio = given if given is not None else (b / a if a else float("nan"))
            print(f"{label:28}{a:>14,.0f}{b:>14,.0f}{ratio:>9.2f}")
        parts = c["after_prune_by_table"]
        print(
            f"CkptdbSaver after prune(keep_latest): {c['file_bytes_after_prune']:,} bytes, "
            f"{c['file_bytes'] / c['file_bytes_after_prune']:.0f}x smaller "
            f"({c['kept_checkpoints']} checkpoint kept, holding {c['kept_state_bytes']:,} bytes)"
        )
        print(
            f"  of which: kept state {parts['kept_state']:,} | ckptdb pointer history + "
            f"receipts {parts['pointer_history_and_receipts']:,} | schema and empty pages "
            f"{parts['schema_and_other']:,}"
        )
    if "threads" in results:
        t = results["threads"]
        s, c = t["sqlite"], t["ckptdb"]
        print(
            f"\n== {t['threads']} threads, one saver, {t['steps_per_thread']} puts each "
            f"({t['state_bytes']:,} bytes state)"
        )
        print(f"{'':28}{'SqliteSaver':>14}{'CkptdbSaver':>14}{'ratio':>9}")
        print(
            f"{'puts/s (all threads)':28}{s['puts_per_s']:>14,.0f}{c['puts_per_s']:>14,.0f}"
            f"{t['put_ratio']:>9.2f}"
        )
        for key, label in (
            ("p50_put_ms", "put p50 (ms)"),
            ("p99_put_ms", "put p99 (ms)"),
            ("max_put_ms", "put max (ms)"),
        ):
            print(f"{label:28}{s[key]:>14,.1f}{c[key]:>14,.1f}{c[key] / s[key]:>9.2f}")
    if "copy" in results:
        c = results["copy"]
        print(
            f"\n== copy_thread of {c['checkpoints']:,} checkpoints (CkptdbSaver): "
            f"{c['copy_s']:.3f} s; blob bytes stored {c['stored_blob_bytes_before']:,} -> "
            f"{c['stored_blob_bytes_after']:,} ({c['blob_bytes_copied']:,} copied)"
        )
    for key in ("chat", "chat_delta"):
        if key in results:
            print_chat(key, results[key])
    if "scale" in results:
        print_scale(results["scale"])


def print_scale(r: dict[str, Any]) -> None:
    """One row per measure; per size SqliteSaver, CkptdbSaver and the ratio; then the
    growth of each saver's figure from the first size to the last."""
    points = r["points"]
    growth = r.get("growth", {})
    print(
        f"\n== scale: {r['threads']:,} threads, {r['state_bytes']:,}-byte state, one pending "
        "write per step; cold = a fresh saver, a thread it has not touched"
    )
    head = "".join(
        f"{'--- ' + format(p['checkpoints_per_thread'], ',') + ' per thread ---':>29}"
        for p in points
    )
    if growth:
        first, last = points[0]["checkpoints_per_thread"], points[-1]["checkpoints_per_thread"]
        head += f"{'growth ' + str(last) + '/' + str(first):>18}"
    print(f"{'':30}{head}")
    cols = "".join(f"{'sqlite':>11}{'ckptdb':>11}{'ratio':>7}" for _ in points)
    if growth:
        cols += f"{'sqlite':>9}{'ckptdb':>9}"
    print(f"{'(median us unless noted)':30}{cols}")
    for key, label in SCALE_ROWS:
        cells = "".join(
            f"{p['sqlite'][key]:>11,.0f}{p['ckptdb'][key]:>11,.0f}{p['ratio'][key]:>7.2f}"
            for p in points
        )
        if key in GROWTH_KEYS and growth:
            cells += f"{growth['sqlite'][key]:>9.2f}{growth['ckptdb'][key]:>9.2f}"
        print(f"{label:30}{cells}")
    cells = "".join(
        f"{p['sqlite']['file_bytes'] / 1e6:>11,.1f}{p['ckptdb']['file_bytes'] / 1e6:>11,.1f}"
        f"{p['ratio']['file_bytes']:>7.2f}"
        for p in points
    )
    print(f"{'file MB (db + WAL)':30}{cells}")
    n = r["repeats"]
    print(
        f"(growth put CPU: mean over the growth to that size; calls per saver: cold reads "
        f"{n['cold']} each, filter {n['filter']}, open {n['open']}, puts {n['put']}, deletes "
        f"{n['delete']}; build took " + ", ".join(f"{p['build_s']:.0f} s" for p in points) + ")"
    )


def print_chat(key: str, r: dict[str, Any]) -> None:
    s, c, e = r["sqlite"], r["ckptdb"], r["format2_estimate"]
    kind = "DeltaChannel" if r["delta_channel"] else "add_messages"
    print(f"\n== chat: a compiled StateGraph, messages via {kind}, {r['turns']} turns")
    print(f"{'':28}{'SqliteSaver':>14}{'CkptdbSaver':>14}{'ratio':>9}")
    print(f"{'file bytes':28}{s['file_bytes']:>14,}{c['file_bytes']:>14,}{r['file_ratio']:>9.3f}")
    label = f"wall time (s, median of {r['rounds']})"
    print(f"{label:28}{s['wall_s']:>14.2f}{c['wall_s']:>14.2f}{r['wall_ratio']:>9.2f}")
    print(f"{'checkpoints':28}{s['checkpoints']:>14,}{c['checkpoints']:>14,}")
    p = e["params"]
    print(
        f"blobs CkptdbSaver sent: {e['blobs_sent']:,} ({e['bytes_sent']:,} bytes); distinct: "
        f"{e['distinct_blob_bytes']:,} bytes (whole-blob dedup, today)"
    )
    print(
        f"format 2 ({p['min_size']}/{p['avg_size']}/{p['max_size']}): distinct chunks "
        f"{e['distinct_chunks']:,} = {e['distinct_chunk_bytes']:,} bytes raw, "
        f"{e['distinct_chunk_bytes_zstd']:,} after zstd = {e['ratio_to_sqlite_file']:.4f}x "
        f"SqliteSaver's file"
    )
    if "format2_by_params" in r:
        cells = ", ".join(f"{k}: {v:,}" for k, v in r["format2_by_params"].items())
        print(f"zstd'ed distinct chunk bytes by avg chunk size: {cells}")


if __name__ == "__main__":
    raise SystemExit(main())
