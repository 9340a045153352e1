"""Benchmark: the LangGraph saver on PostgreSQL against LangGraph's own PostgresSaver on the
same server, with ckptdb on SQLite beside them (docs/performance.md, "LangGraph on
PostgreSQL"). The targets of issue 27: the chat graph's database <= 0.05x PostgresSaver's and
CPU per turn <= 1.0x; put and cold get_tuple / list at 100,000 checkpoints no slower.

Three contenders, each in a database (or file) of its own, measured in turn with the order
alternating:

* ``postgres_saver`` -- ``langgraph.checkpoint.postgres.PostgresSaver`` on one connection
  (autocommit, as its docs set it up);
* ``ckptdb_pg`` -- ``CkptdbSaver("postgresql://...")``;
* ``ckptdb_sqlite`` -- ``CkptdbSaver(path)``: the engine choice, same workloads.

Workloads:

* ``chat`` -- the real chat graph (``add_messages``, a canned reply per turn), ``--turns``
  turns on one thread: CPU per turn and the database's size afterwards;
* ``scale`` -- ``--threads`` x ``--steps`` checkpoints (10 channels of 100 bytes, one changes
  per step), then, interleaved in blocks: a ``put`` on a thread's newest checkpoint, a
  ``cold get_tuple`` (a new saver -- a new connection -- per read), an ``uncached
  get_tuple`` (one long-lived saver, each read a thread it has not read yet) and ``list``
  (the newest 50 checkpoints of such a thread).

CPU is the client process's plus, on PostgreSQL, the server's processes' (read from their
counters over a block of operations and divided by the operations: the server's share of
the work is done in other processes). Wall-clock times are medians; a commit's wall time
includes this VM's fsync (0.05-4 ms, run to run), so the verdicts use CPU.

Sizes on PostgreSQL: the tables' total relation size (heap, TOAST, indexes) of the
database, as left by the workload and again after ``VACUUM FULL`` (what the data needs);
on SQLite the file and its WAL.

    python tools/bench_langgraph_pg.py --quick             # ~1 minute: 300 turns, 2,000 checkpoints
    python tools/bench_langgraph_pg.py --json out.json     # 300 turns, 100,000 checkpoints
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import dict_row

from ckptdb.integrations.langgraph import CkptdbSaver
from ckptdb.testing.postgres import PostgresServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engines import _server_cpu  # sibling tools: the same counters,
from bench_langgraph import (  # the same graph, texts and steps
    _chat_graph,
    _chat_texts,
    _stamped,
    _step_metadata,
    _thread_config,
    make_steps,
)

CONTENDERS = ("postgres_saver", "ckptdb_pg", "ckptdb_sqlite")
_SIZE_SQL = (
    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')"
)


class Place:
    """Where one contender keeps its data: a database on the server, or a file."""

    def __init__(self, who: str, server: PostgresServer, directory: Path, tag: str) -> None:
        self.who = who
        self.server = server if who != "ckptdb_sqlite" else None
        self.where = (
            str(directory / f"{tag}.ckpt")
            if self.server is None
            else server.create_database(f"{who}_{tag}")
        )
        if who == "postgres_saver":
            with self.saver() as saver:
                assert isinstance(saver, PostgresSaver)
                saver.setup()

    @contextmanager
    def saver(self) -> Iterator[BaseCheckpointSaver[Any]]:
        """A new saver (a new connection) on the place, closed after the block."""
        if self.who == "postgres_saver":
            conn = psycopg.connect(self.where, autocommit=True, row_factory=dict_row)
            try:
                yield PostgresSaver(conn)  # type: ignore[arg-type]
            finally:
                conn.close()
        else:
            ckpt = CkptdbSaver(self.where)
            try:
                yield ckpt
            finally:
                ckpt.close()

    def server_cpu(self) -> float:
        """CPU seconds the server's processes used so far (0 for a file)."""
        return _server_cpu(self.server)

    def size(self, *, compact: bool) -> int:
        """The data's bytes (see the module docstring); ``compact``: after VACUUM FULL."""
        if self.server is None:
            with CkptdbSaver(self.where) as ckpt:  # (a file keeps no dead rows to compact)
                stats = ckpt.db.stats()
                return int(stats.file_bytes + stats.wal_bytes)
        with psycopg.connect(self.where, autocommit=True) as conn:
            if compact:
                conn.execute("VACUUM FULL")
            row = conn.execute(_SIZE_SQL).fetchone()
            return int(row[0]) if row else 0


class Cost:
    """Operations measured on one contender: wall times, client and server CPU."""

    def __init__(self) -> None:
        self.walls: list[float] = []
        self.client = 0.0
        self.server = 0.0

    def add(self, place: Place, run: Callable[[int], Any], indexes: range) -> None:
        server0, client0 = place.server_cpu(), time.process_time()
        for i in indexes:
            started = time.perf_counter()
            run(i)
            self.walls.append(time.perf_counter() - started)
        self.client += time.process_time() - client0
        self.server += place.server_cpu() - server0

    def summary(self) -> dict[str, float]:
        n = max(len(self.walls), 1)
        return {
            "ops": len(self.walls),
            "wall_us": round(statistics.median(self.walls) * 1e6, 1) if self.walls else 0.0,
            "client_cpu_us": round(self.client / n * 1e6, 1),
            "server_cpu_us": round(self.server / n * 1e6, 1),
            "cpu_us": round((self.client + self.server) / n * 1e6, 1),
        }


def _ratios(results: dict[str, dict[str, Any]], over: str) -> dict[str, float]:
    return {
        key: round(results["ckptdb_pg"][key] / results[over][key], 3)
        for key in ("wall_us", "cpu_us", "cpu_per_turn_us", "bytes", "bytes_compact")
        if key in results["ckptdb_pg"] and results[over].get(key)
    }


# --- the chat graph ---------------------------------------------------------------------


def bench_chat(server: PostgresServer, directory: Path, turns: int) -> dict[str, Any]:
    users, replies = _chat_texts(turns)
    out: dict[str, Any] = {}
    for k, who in enumerate(CONTENDERS if turns % 2 == 0 else CONTENDERS[::-1]):
        place = Place(who, server, directory, f"chat{k}")
        with place.saver() as saver:
            graph = _chat_graph(saver, False, replies)
            config: Any = {"configurable": {"thread_id": "chat"}}
            cost = Cost()
            gc.collect()

            def turn(i: int, graph: Any = graph, config: Any = config) -> None:
                graph.invoke({"messages": [HumanMessage(content=users[i])]}, config)

            cost.add(place, turn, range(turns))
            final = graph.get_state(config).values["messages"]
            if len(final) != 2 * turns:
                raise AssertionError(f"{who}: {len(final)} messages after {turns} turns")
        summary = cost.summary()
        out[who] = {
            "turns": turns,
            "cpu_per_turn_us": summary["cpu_us"],
            "client_cpu_per_turn_us": summary["client_cpu_us"],
            "server_cpu_per_turn_us": summary["server_cpu_us"],
            "wall_per_turn_us": summary["wall_us"],
            "bytes": place.size(compact=False),
            "bytes_compact": place.size(compact=True),
        }
    out["ckptdb_pg_over_postgres_saver"] = _ratios(out, "postgres_saver")
    out["ckptdb_pg_over_ckptdb_sqlite"] = _ratios(out, "ckptdb_sqlite")
    return out


# --- 100,000 checkpoints ------------------------------------------------------------------


def _fill(place: Place, threads: int, steps: list[Any]) -> list[str]:
    """Every thread's checkpoints; returns each thread's newest checkpoint id."""
    newest: list[str] = []
    with place.saver() as saver:
        for t in range(threads):
            config: Any = _thread_config(t)
            for step, (checkpoint, versions) in enumerate(steps):
                config = saver.put(
                    config, _stamped(checkpoint, step), _step_metadata(step), versions
                )
            newest.append(config["configurable"]["checkpoint_id"])
    return newest


def bench_scale(
    server: PostgresServer,
    directory: Path,
    threads: int,
    steps_per_thread: int,
    ops: int,
    blocks: int,
) -> dict[str, Any]:
    steps = make_steps(100, steps_per_thread + ops + 1)
    built, places, newest = {}, {}, {}
    for who in CONTENDERS:
        started = time.monotonic()
        places[who] = Place(who, server, directory, "scale")
        newest[who] = _fill(places[who], threads, steps[:steps_per_thread])
        built[who] = round(time.monotonic() - started, 1)
    rng = random.Random(27)
    picks = rng.sample(range(threads), min(threads, ops * 3))
    # Three sets of threads (when there are enough): cold reads and puts, uncached reads,
    # lists -- so the long-lived saver meets each thread first in the operation measured.
    reads = picks[:ops]
    fresh = picks[ops : 2 * ops] or reads
    lists = picks[2 * ops : 3 * ops] or reads
    costs: dict[str, dict[str, Cost]] = {
        name: {who: Cost() for who in CONTENDERS}
        for name in ("put", "cold_get_tuple", "uncached_get_tuple", "list")
    }
    bounds = [round(b * ops / blocks) for b in range(blocks + 1)]
    heads = {who: dict(enumerate(newest[who])) for who in CONTENDERS}
    with _open_all(places) as savers:
        for b in range(blocks):
            block = range(bounds[b], bounds[b + 1])
            for who in CONTENDERS if b % 2 == 0 else CONTENDERS[::-1]:
                place, saver = places[who], savers[who]

                def put(i: int, who: str = who, saver: Any = saver) -> None:
                    t = reads[i % len(reads)]
                    checkpoint, versions = steps[steps_per_thread + i]
                    config = _thread_config(t, heads[who][t])
                    stored = saver.put(
                        config,
                        _stamped(checkpoint, i),
                        _step_metadata(steps_per_thread + i),
                        versions,
                    )
                    heads[who][t] = stored["configurable"]["checkpoint_id"]

                def cold(i: int, place: Place = place) -> None:
                    with place.saver() as fresh:
                        found = fresh.get_tuple(_thread_config(reads[i]))
                        if found is None:
                            raise AssertionError("cold get_tuple found nothing")

                def uncached(i: int, saver: Any = saver) -> None:
                    found = saver.get_tuple(_thread_config(fresh[i % len(fresh)]))
                    if found is None:
                        raise AssertionError("get_tuple found nothing")

                def listed(i: int, saver: Any = saver) -> None:
                    got = list(saver.list(_thread_config(lists[i % len(lists)]), limit=50))
                    if len(got) < min(50, steps_per_thread):
                        raise AssertionError("list found nothing")

                costs["cold_get_tuple"][who].add(place, cold, block)
                costs["uncached_get_tuple"][who].add(place, uncached, block)
                costs["list"][who].add(place, listed, block)
                costs["put"][who].add(place, put, block)
    out: dict[str, Any] = {
        "threads": threads,
        "checkpoints": threads * steps_per_thread,
        "ops": ops,
        "seconds_build": built,
    }
    for name, per in costs.items():
        results = {who: c.summary() for who, c in per.items()}
        results["ckptdb_pg_over_postgres_saver"] = _ratios(results, "postgres_saver")  # type: ignore[assignment]
        results["ckptdb_pg_over_ckptdb_sqlite"] = _ratios(results, "ckptdb_sqlite")  # type: ignore[assignment]
        out[name] = results
    out["bytes"] = {who: places[who].size(compact=False) for who in CONTENDERS}
    return out


@contextmanager
def _open_all(places: dict[str, Place]) -> Iterator[dict[str, Any]]:
    opened: dict[str, Any] = {}
    managers = []
    try:
        for who, place in places.items():
            manager = place.saver()
            opened[who] = manager.__enter__()
            managers.append(manager)
        yield opened
    finally:
        for manager in reversed(managers):
            manager.__exit__(None, None, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 checkpoints, fewer reads")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--steps", type=int, default=100, help="checkpoints per thread")
    parser.add_argument("--ops", type=int)
    parser.add_argument("--only", choices=("chat", "scale"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    threads = args.threads or (20 if args.quick else 1000)
    steps = args.steps
    ops = args.ops or (20 if args.quick else 200)
    started = time.monotonic()
    result: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="ckptdb-bench-lgpg-") as tmp,
        PostgresServer() as server,
    ):
        if args.only in (None, "chat"):
            result["chat"] = bench_chat(server, Path(tmp), args.turns)
        if args.only in (None, "scale"):
            result["scale"] = bench_scale(
                server, Path(tmp), threads, steps, ops, blocks=4 if args.quick else 10
            )
    result["seconds"] = round(time.monotonic() - started, 1)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
