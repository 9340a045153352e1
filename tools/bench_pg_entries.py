"""Benchmark: how the PostgreSQL engine should read packed checkpoint entries.

On SQLite a statement turns a damaged ``checkpoint.entries`` (text that is not JSON) into
an entry of nulls that the store reports as corruption (``json_valid``); PostgreSQL 15 has no
test that does not raise, so the checkpoint module's port must choose (docs/postgresql.md,
"Open questions"). Three ways, on one throwaway server, for the two reads that matter --
a page of manifests with their blob rows (50 checkpoints by id) and every entry of the
database (what GC and verify scan):

* ``unsafe``: ``jsonb_array_elements(entries::jsonb)`` joined to ``blob`` in one statement --
  the speed of a statement that would raise ``sql_error`` on damage (the floor);
* ``safe_fn``: the same through a PL/pgSQL function that returns ``'[null]'`` for text that
  is not JSON (an exception block: a subtransaction per call);
* ``python``: the rows' ``entries`` text parsed in Python, then the blob rows by id list
  (``= ANY``): two statements, damage seen in Python.

    python tools/bench_pg_entries.py                 # 100,000 checkpoints of 10 entries
    python tools/bench_pg_entries.py --quick         # 2,000 checkpoints (seconds)

Medians of wall-clock milliseconds per read, rounds interleaved.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from ckptdb.connection.postgres import PgConnection
from ckptdb.testing.postgres import PostgresServer

_SCHEMA = """
CREATE TABLE blob (blob_id BIGINT PRIMARY KEY, digest TEXT NOT NULL, size BIGINT NOT NULL,
                   chunk_count BIGINT NOT NULL, scope_id BIGINT);
CREATE TABLE checkpoint (seq BIGINT PRIMARY KEY, id TEXT NOT NULL UNIQUE, entries TEXT NOT NULL);
CREATE FUNCTION safe_entries(t TEXT) RETURNS JSONB LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN t::jsonb;
EXCEPTION WHEN others THEN
    RETURN '[null]'::jsonb;
END
$$;
"""

_UNSAFE = (
    "SELECT c.seq, j.value ->> 0, b.blob_id, b.digest, b.size, b.chunk_count, b.scope_id"
    " FROM checkpoint c CROSS JOIN LATERAL jsonb_array_elements({source}) AS j (value)"
    " LEFT JOIN blob b ON b.blob_id = (j.value ->> 1)::BIGINT"
)


def _build(conn: PgConnection, checkpoints: int, per: int) -> list[str]:
    rng = random.Random(5)
    blobs = checkpoints * 2
    with conn.write_transaction():
        conn.execute_script(_SCHEMA)
        conn.executemany(
            "INSERT INTO blob VALUES (?, ?, ?, 0, NULL)",
            [(b, f"{b:064x}", 100) for b in range(blobs)],
        )
        rows = []
        for seq in range(checkpoints):
            entries = [[f"c{i}", rng.randrange(blobs)] for i in range(per)]
            rows.append((seq, f"{seq:064x}", json.dumps(entries, separators=(",", ":"))))
        conn.executemany("INSERT INTO checkpoint VALUES (?, ?, ?)", rows)
    conn.execute("ANALYZE")
    return [r[1] for r in rows]


def _page(conn: PgConnection, way: str, ids: list[str]) -> int:
    if way == "python":
        rows = conn.execute("SELECT seq, entries FROM checkpoint WHERE id = ANY(?)", (ids,))
        wanted: set[int] = set()
        for _, text in rows:
            wanted.update(int(e[1]) for e in json.loads(text))
        blobs = conn.execute(
            "SELECT blob_id, digest, size, chunk_count, scope_id FROM blob WHERE blob_id = ANY(?)",
            (sorted(wanted),),
        )
        return len(blobs)
    source = "c.entries::jsonb" if way == "unsafe" else "safe_entries(c.entries)"
    return len(conn.execute(_UNSAFE.format(source=source) + " WHERE c.id = ANY(?)", (ids,)))


def _scan(conn: PgConnection, way: str) -> int:
    if way == "python":  # the same rows as the join: each entry with its blob row
        joined = 0
        with conn.read_transaction():
            blobs = {
                r[0]: r
                for r in conn.iterate(
                    "SELECT blob_id, digest, size, chunk_count, scope_id FROM blob"
                )
            }
            for seq, text in conn.iterate("SELECT seq, entries FROM checkpoint"):
                joined += sum((seq, e[0], blobs.get(e[1])) is not None for e in json.loads(text))
        return joined
    source = "c.entries::jsonb" if way == "unsafe" else "safe_entries(c.entries)"
    return len(conn.execute(_UNSAFE.format(source=source)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoints", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=10, help="entries per checkpoint")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pages", type=int, default=100, help="pages of 50 per round")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.checkpoints, args.rounds, args.pages = 2_000, 1, 10
    ways = ("unsafe", "safe_fn", "python")
    page_ms: dict[str, list[float]] = {w: [] for w in ways}
    scan_ms: dict[str, list[float]] = {w: [] for w in ways}
    with PostgresServer() as server:
        conn = PgConnection.open(server.create_database("entries"))
        try:
            ids = _build(conn, args.checkpoints, args.entries)
            rng = random.Random(9)
            for r in range(args.rounds):
                for way in ways if r % 2 == 0 else ways[::-1]:
                    for _ in range(args.pages):
                        page = rng.sample(ids, 50)
                        start = time.perf_counter()
                        _page(conn, way, page)
                        page_ms[way].append((time.perf_counter() - start) * 1000)
                    start = time.perf_counter()
                    _scan(conn, way)
                    scan_ms[way].append((time.perf_counter() - start) * 1000)
        finally:
            conn.close()
    report: dict[str, Any] = {
        "checkpoints": args.checkpoints,
        "entries_per_checkpoint": args.entries,
        "page_of_50_ms": {w: statistics.median(v) for w, v in page_ms.items()},
        "scan_all_ms": {w: statistics.median(v) for w, v in scan_ms.items()},
    }
    print(f"{args.checkpoints:,} checkpoints x {args.entries} entries (median ms)")
    print(f"{'way':10s} {'page of 50':>12s} {'every entry':>12s}")
    for way in ways:
        page, scan = report["page_of_50_ms"][way], report["scan_all_ms"][way]
        print(f"{way:10s} {page:12.2f} {scan:12.1f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
