"""Benchmark: what confining integration sessions costs (ckptdb.connection.confinement).

    python tools/bench_confinement.py            # 10,000 statements, 25 interleaved rounds
    python tools/bench_confinement.py --quick    # smoke run
    python tools/bench_confinement.py --json out.json

Measured in one process, on one connection to a fresh ckptdb file, in interleaved rounds
(load from other processes hits every mode alike; the best round of each is reported),
CPU time per statement of a cached ``INSERT OR REPLACE`` of a 100-byte row inside one
write transaction:

* ``bare``        -- ``Connection.execute`` before any session (no authorizer installed);
* ``plain``       -- ``Connection.execute`` once the standing authorizer is installed;
* ``session``     -- ``IntegrationSession.execute``, one session for every statement;
* ``per_session`` -- a new ``with conn.integration_session(...)`` around each statement
  (the shape of an ``on_publish`` hook that writes one row per commit).

The standing authorizer's cost where it runs at all, on statements that are *not* cached
(each text new, so SQLite prepares it and asks the authorizer about every table and column
it touches): ``prepare_bare`` vs ``prepare_plain``. And on ckptdb's own statements: a small
``Database.commit`` (1 KiB entry) on a warm handle without (``commit_bare``) and with
(``commit_plain``) the authorizer installed on its connection.

``bare`` and ``plain`` run on two connections to the same file (only one of them ever ran
a session), so every mode is interleaved in every round.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable

import ckptdb
from ckptdb.connection import Connection, open_connection
from ckptdb.store import migrations, schema

SQL = "INSERT OR REPLACE INTO bench_rows (k, v) VALUES (?, ?)"
VALUE = b"x" * 100


def _core_tables() -> frozenset[str]:
    """The tables the core migrations create (what a session may not write)."""
    versions = {migrations.CORE: len(migrations.core_set().migrations)}
    return frozenset(name for kind, name in schema.expected(versions) if kind == "table")


def _cpu(run: Callable[[], None]) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def measure(statements: int, rounds: int) -> dict[str, float]:
    """Microseconds of CPU per statement (per commit for ``commit_*``), best round of each."""
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "bench.ckpt")
    ckptdb.open(path).close()
    core = _core_tables()
    # Two connections to the file: ``bare`` never runs a session, so it never gets the
    # standing authorizer; ``conn`` gets it from its first session, before any round.
    bare: Connection = open_connection(path, synchronous="off")
    conn: Connection = open_connection(path, synchronous="off")
    conn.execute("CREATE TABLE bench_rows (k INTEGER PRIMARY KEY, v BLOB)")
    with conn.integration_session(core):
        pass
    dbs = {
        name: ckptdb.open(os.path.join(folder, f"{name}.ckpt"), synchronous="off")
        for name in ("bare", "plain")
    }
    with dbs["plain"]._handle.store.conn.integration_session(core):  # the authorizer stays
        pass

    def plain(on: Connection) -> Callable[[], None]:
        def run() -> None:
            with on.write_transaction():
                for i in range(statements):
                    on.execute(SQL, (i, VALUE))

        return run

    def session() -> None:
        with conn.write_transaction(), conn.integration_session(core) as s:
            for i in range(statements):
                s.execute(SQL, (i, VALUE))

    def per_session() -> None:
        with conn.write_transaction():
            for i in range(statements):
                with conn.integration_session(core) as s:
                    s.execute(SQL, (i, VALUE))

    def prepares(on: Connection) -> Callable[[], None]:
        def run() -> None:
            tag = os.urandom(8).hex()  # new texts every round: nothing comes from the cache
            for i in range(statements // 5):
                on.execute(f"SELECT v FROM bench_rows WHERE k = ? AND '{tag}' <> '{i}'", (i,))

        return run

    def commits(db: ckptdb.Database) -> Callable[[], None]:
        def run() -> None:
            for i in range(statements // 20):
                db.commit("bench", {"state": os.urandom(8) + b"x" * 1016, "n": str(i).encode()})

        return run

    modes: dict[str, tuple[Callable[[], None], int]] = {
        "bare": (plain(bare), statements),
        "plain": (plain(conn), statements),
        "session": (session, statements),
        "per_session": (per_session, statements),
        "prepare_bare": (prepares(bare), statements // 5),
        "prepare_plain": (prepares(conn), statements // 5),
        "commit_bare": (commits(dbs["bare"]), statements // 20),
        "commit_plain": (commits(dbs["plain"]), statements // 20),
    }
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, (run, count) in modes.items():
            best[name] = min(best.get(name, float("inf")), _cpu(run) / count * 1e6)
    bare.close()
    conn.close()
    for db in dbs.values():
        db.close()
    return best


def main() -> None:
    """Run the benchmark and print (or write) its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    statements, rounds = (500, 2) if args.quick else (10_000, 25)
    best = measure(statements, rounds)
    for name, micros in best.items():
        print(f"{name:14} {micros:7.2f} us/statement")
    print(f"{'session / plain':31}{best['session'] / best['plain']:.3f}x")
    print(f"{'per_session / plain':31}{best['per_session'] / best['plain']:.3f}x")
    for what in ("", "prepare_", "commit_"):
        ratio = best[f"{what}plain"] / best[f"{what}bare"]
        print(f"{what}plain / {what}bare".ljust(31) + f"{ratio:.3f}x")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(best, out, indent=2)


if __name__ == "__main__":
    main()
