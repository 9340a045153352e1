"""Benchmark: the floor of a cold LangGraph ``get_tuple`` with today's layout.

Three ways to answer the same call -- the newest checkpoint of a thread nobody read yet --
on one ckptdb file (and SqliteSaver's, when given), each on a fresh connection, rounds
interleaved:

* ``saver``: ``CkptdbSaver.get_tuple`` as shipped;
* ``floor``: the same statements and the same checks (the manifest's id recomputed from the
  packed row, the envelope decoded and hashed against its digest, every pending write's
  digest) and the same LangGraph objects built, in one flat function over the store modules:
  no unit of work, session, cache or layer around them -- what the layout itself costs;
* ``sql``: the floor's statements alone (``BEGIN``, the newest id, the row with its writes,
  the manifest with its envelope, ``COMMIT``);
* ``sqlite``: ``SqliteSaver.get_tuple`` on its own file (``--sqlite``).

The files come from the scale workload (``bench_langgraph.py --only scale --keep --dir D``
keeps ``ckptdb-scale.db`` and ``sqlite-scale.db`` in a directory under D), whose threads
are named ``t0``, ``t1``, ...; or ``--quick`` builds a small ckptdb file of its own::

    python tools/bench_read_floor.py --ckptdb D/bench-langgraph-*/ckptdb-scale.db \\
        --sqlite D/bench-langgraph-*/sqlite-scale.db
    python tools/bench_read_floor.py --quick

Medians of wall-clock microseconds (a cold read waits for nothing but the page cache, so
wall and CPU agree within a few percent here); ratios to SqliteSaver when it ran.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import Checkpoint, CheckpointTuple, uuid6
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ckptdb import validation
from ckptdb.connection.driver import Connection
from ckptdb.connection.opening import open_connection
from ckptdb.integrations.langgraph import CkptdbSaver, _layout, sealing
from ckptdb.integrations.langgraph._cache import Loaded
from ckptdb.integrations.langgraph.content import _spliced
from ckptdb.store import checkpoints
from ckptdb.store.crypto import PLAINTEXT
from ckptdb.store.encoding import verified_inline

_NEWEST = (
    "SELECT checkpoint_id FROM lg_checkpoint WHERE thread_id = ? AND checkpoint_ns = ?"
    " ORDER BY checkpoint_id DESC LIMIT 1"
)
_ROW_AND_WRITES = (
    "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.ckpt_id,"
    " w.task_id, w.channel, w.type, w.value, w.task_path, w.idx, w.digest, w.write_id"
    " FROM (SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, ckpt_id"
    " FROM lg_checkpoint WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?) c"
    " LEFT JOIN lg_write w ON w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns"
    " AND w.checkpoint_id = c.checkpoint_id"
)
_MANIFEST_SQL_ONLY = (
    "SELECT c.seq, c.metadata, c.entries, b.inline_data, b.codec, b.digest, b.size"
    " FROM checkpoint c, json_each(c.entries) j"
    " JOIN blob b ON b.blob_id = json_extract(j.value, '$[1]') WHERE c.id = ?"
)


class Floor:
    """The flat cold read (see the module docstring) on a connection of its own."""

    def __init__(self, path: Path, checks: bool) -> None:
        self.conn: Connection = open_connection(str(path), readonly=True)
        self.raw = self.conn._raw
        self.checks = checks
        self.serde = JsonPlusSerializer()

    def get(self, thread_id: str) -> CheckpointTuple | None:
        raw = self.raw
        raw.execute("BEGIN")
        try:
            newest = raw.execute(_NEWEST, (thread_id, "")).fetchall()
            if not newest:
                return None
            cid = newest[0][0]
            found = raw.execute(_ROW_AND_WRITES, (thread_id, "", cid)).fetchall()
            ckpt = found[0][4]
            if not self.checks:
                raw.execute(_MANIFEST_SQL_ONLY, (ckpt,)).fetchall()
                return None
            by_id = checkpoints.manifests_by_ids(self.conn, [ckpt], (_layout.ENVELOPE_ENTRY,))
            row, entries, stored = by_id[ckpt]
            checkpoints.check_manifest(row, entries)
            validation.metadata_from_json(row.metadata_json, row.id)
            entry = next(e for e in entries if e.name == _layout.ENVELOPE_ENTRY)
            data, codec_id, _ = stored[_layout.ENVELOPE_ENTRY]
            envelope = verified_inline(data, entry.size, entry.digest, codec_id, PLAINTEXT)
        finally:
            raw.execute("COMMIT")
        if envelope is None:
            raise AssertionError("the envelope did not verify")
        env = _layout.decode_envelope(envelope, ckpt)
        loaded = Loaded(
            row.metadata_json, env.checkpoint, env.values, {}, len(envelope), env.version
        )
        spliced = _spliced(loaded, {})
        if spliced is None:
            raise AssertionError("a scale checkpoint always splices")
        checkpoint = self.serde.loads_typed(("msgpack", spliced))
        writes = []
        for f in found:
            if f[12] is None:
                continue
            if sealing.write_digest(f[0], f[1], f[2], f[5], f[10], f[6], f[7], f[8], f[9]) != f[11]:
                raise AssertionError("a pending write did not verify")
            writes.append((f[5], f[6], self.serde.loads_typed((f[7], f[8]))))
        metadata = json.loads(row.metadata_json)["langgraph"]
        config: Any = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": cid}
        }
        parent: Any = None
        if found[0][3]:
            parent = {"configurable": {**config["configurable"], "checkpoint_id": found[0][3]}}
        return CheckpointTuple(config, checkpoint, metadata, parent, writes)

    def close(self) -> None:
        self.conn.close()


def _sqlite_reader(path: Path) -> tuple[Callable[[str], Any], Callable[[], None]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    return (
        lambda t: saver.get_tuple({"configurable": {"thread_id": t, "checkpoint_ns": ""}}),
        conn.close,
    )


def _ckptdb_reader(path: Path) -> tuple[Callable[[str], Any], Callable[[], None]]:
    saver = CkptdbSaver(path)
    return (
        lambda t: saver.get_tuple({"configurable": {"thread_id": t, "checkpoint_ns": ""}}),
        saver.close,
    )


def _floor_reader(path: Path, checks: bool) -> tuple[Callable[[str], Any], Callable[[], None]]:
    floor = Floor(path, checks)
    return floor.get, floor.close


def _quick_file(directory: Path, threads: int, per_thread: int) -> Path:
    """A small ckptdb file shaped like the scale workload's: 1 KB states of 10 channels,
    one changed and one pending write per step."""
    path = directory / "floor.db"
    rng = random.Random(3)
    with CkptdbSaver(path) as saver:
        for t in range(threads):
            config: Any = {"configurable": {"thread_id": f"t{t}", "checkpoint_ns": ""}}
            values = {f"c{i}": rng.randbytes(50).hex() for i in range(10)}
            for step in range(per_thread):
                values = {**values, f"c{step % 10}": rng.randbytes(50).hex()}
                checkpoint = Checkpoint(
                    v=4,
                    id=str(uuid6(clock_seq=step)),
                    ts=datetime.now(UTC).isoformat(),
                    channel_values=values,
                    channel_versions={k: str(step) for k in values},
                    versions_seen={},
                    updated_channels=[f"c{step % 10}"],
                )
                metadata: Any = {"source": "loop", "step": step, "parents": {}}
                config = saver.put(config, checkpoint, metadata, {f"c{step % 10}": str(step)})
                saver.put_writes(config, [("c0", "x")], f"task-{step}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckptdb", type=Path, help="a ckptdb scale file (see above)")
    parser.add_argument("--sqlite", type=Path, help="SqliteSaver's scale file, to compare")
    parser.add_argument("--threads", type=int, default=1000, help="threads in the files")
    parser.add_argument("--reads", type=int, default=200, help="cold reads per way per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--quick", action="store_true", help="a small file of its own")
    parser.add_argument("--json", type=Path, help="also write the medians here")
    args = parser.parse_args(argv)
    if args.quick:
        args.threads, args.reads, args.rounds = 60, 20, 1
        args.ckptdb = _quick_file(Path(tempfile.mkdtemp(prefix="read-floor-")), 60, 5)
    if args.ckptdb is None:
        parser.error("give --ckptdb (or --quick)")
    if args.reads > args.threads:
        parser.error("--reads must not exceed --threads")
    ways: dict[str, Callable[[], tuple[Callable[[str], Any], Callable[[], None]]]] = {
        "saver": lambda: _ckptdb_reader(args.ckptdb),
        "floor": lambda: _floor_reader(args.ckptdb, checks=True),
        "sql": lambda: _floor_reader(args.ckptdb, checks=False),
    }
    if args.sqlite is not None:
        ways["sqlite"] = lambda: _sqlite_reader(args.sqlite)
    times: dict[str, list[float]] = {way: [] for way in ways}
    rng = random.Random(11)
    for r in range(args.rounds):
        order = list(ways) if r % 2 == 0 else list(ways)[::-1]
        for way in order:
            # Each way reads threads it has not read in this round, on a fresh connection.
            threads = rng.sample(range(args.threads), min(args.reads, args.threads))
            read, close = ways[way]()
            try:
                for t in threads:
                    start = time.perf_counter()
                    found = read(f"t{t}")
                    times[way].append(time.perf_counter() - start)
                    if way != "sql" and found is None:
                        raise AssertionError(f"{way}: thread t{t} has no checkpoint")
            finally:
                close()
    medians = {way: statistics.median(v) * 1e6 for way, v in times.items()}
    base = medians.get("sqlite")
    print(f"cold get_tuple, median us over {args.rounds} round(s) of {args.reads} reads:")
    for way, us in medians.items():
        ratio = f"  {us / base:5.2f}x SqliteSaver" if base else ""
        print(f"  {way:7s} {us:8.1f}{ratio}")
    if args.json is not None:
        report = {
            "reads": args.reads,
            "rounds": args.rounds,
            "median_us": medians,
            "ratio_to_sqlite": {w: us / base for w, us in medians.items()} if base else None,
        }
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
