"""CURRENT on PostgreSQL (``store/pointers.py`` through the PostgreSQL connection), on a
real server: the same reads and moves as on SQLite, and a compare-and-swap that holds when
processes (as machines) move one namespace's pointer at once -- one winner per revision, a
``ConflictError`` for every other, one linear digest chain, never a fork."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from conftest import pg_checkpoint_id as _id
from conftest import pg_prepare

from ckptdb import canonical, errors
from ckptdb.connection.postgres import PgConnection
from ckptdb.store import pointers

CHECKPOINTS = 40


def _seq(conn: PgConnection, n: int) -> int:
    return int(conn.scalar("SELECT seq FROM checkpoint WHERE id = ?", (_id(n),)))


def _move(conn: PgConnection, n: int, previous: pointers.PointerRow | None) -> pointers.PointerRow:
    return pointers.move(
        conn,
        namespace="ns",
        namespace_id=1,
        previous=previous,
        new_seq=_seq(conn, n),
        new_id=_id(n),
        reason="commit",
        now_ms=1_000 + n,
    )


@pytest.fixture
def conn(pg_url: str) -> Iterator[PgConnection]:
    pg_prepare(pg_url, CHECKPOINTS)
    c = PgConnection.open(pg_url)
    try:
        yield c
    finally:
        c.close()


def test_moves_and_reads_as_on_sqlite(conn: PgConnection) -> None:
    assert pointers.pointer(conn, "ns") is None
    with conn.write_transaction():
        first = _move(conn, 0, None)
    with conn.write_transaction():
        second = _move(conn, 1, pointers.pointer(conn, "ns"))
    now = pointers.pointer(conn, "ns")
    assert now is not None and now.current_stored
    pointers.check_pointer(now)
    assert (now.current_id, now.fallback_id, now.revision) == (_id(1), _id(0), 2)
    assert now.digest == second.digest and now.previous_digest == first.digest
    assert now.summary is not None and now.summary.metadata_json == "{}"
    assert now.current_generation == 2
    # A move decided on the old pointer writes nothing.
    with pytest.raises(errors.ConflictError) as caught, conn.write_transaction():
        _move(conn, 2, first)
    assert caught.value.code == "conflict"
    history = pointers.history(conn, "ns")
    assert [(h.revision, h.current_id) for h in history] == [(2, _id(1)), (1, _id(0))]
    assert pointers.history(conn, "ns", limit=1)[0].revision == 2
    assert history[0].previous_digest == history[1].digest
    assert [p.namespace for p in pointers.all_pointers(conn)] == ["ns"]
    seqs = {_seq(conn, 0), _seq(conn, 1)}
    assert pointers.protected_seqs(conn) == seqs == pointers.protected_seqs(conn, 1)
    assert pointers.protected_among(conn, [_seq(conn, 1), _seq(conn, 5)]) == {_seq(conn, 1)}
    assert pointers.dangling(conn) == []
    with conn.write_transaction():
        assert pointers.trim_history(conn, 1, 1) == (1, 2)
    assert pointers.count(conn) == 1


_RACER = """
import hashlib, random, sys, time
from ckptdb import errors
from ckptdb.connection.postgres import PgConnection
from ckptdb.store import pointers
url, start, rounds, who, total = sys.argv[1], float(sys.argv[2]), *map(int, sys.argv[3:6])
conn = PgConnection.open(url)
rng = random.Random(who)
while time.time() < start:
    time.sleep(0.001)
for _ in range(rounds):
    new_id = hashlib.sha256(f"checkpoint {rng.randrange(total)}".encode()).hexdigest()
    try:
        with conn.write_transaction():
            previous = pointers.pointer(conn, "ns")
            seq = conn.scalar("SELECT seq FROM checkpoint WHERE id = ?", (new_id,))
            time.sleep(rng.random() * 0.004)  # widen the window between read and move
            moved = pointers.move(conn, namespace="ns", namespace_id=1, previous=previous,
                                  new_seq=seq, new_id=new_id, reason="commit", now_ms=1)
        print("moved", previous.revision if previous else 0, moved.revision, flush=True)
    except errors.ConflictError:
        print("conflict", previous.revision if previous else 0, flush=True)
"""


def _race(url: str, processes: int, rounds: int) -> list[list[str]]:
    start = time.time() + 3.0  # every process imported and connected by then
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, url, str(start), str(rounds), str(w), str(CHECKPOINTS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(processes)
    ]
    lines: list[list[str]] = []
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        lines += [line.split() for line in out.splitlines()]
    return lines


def _assert_one_chain(url: str, moves: int) -> None:
    check = PgConnection.open(url)
    try:
        ptr = pointers.pointer(check, "ns")
        assert ptr is not None
        pointers.check_pointer(ptr)
        history = list(reversed(pointers.history(check, "ns")))
        assert [h.revision for h in history] == list(range(1, moves + 1))
        previous = None
        for h in history:  # every move chains to the one before: no fork, no gap
            assert h.previous_digest == previous
            assert h.digest == canonical.pointer_digest(
                "ns", h.revision, h.current_id, h.fallback_id, h.previous_digest
            )
            previous = h.digest
        assert (ptr.revision, ptr.digest) == (history[-1].revision, history[-1].digest)
    finally:
        check.close()


def test_racing_machines_get_one_winner_per_revision(pg_url: str) -> None:
    pg_prepare(pg_url, CHECKPOINTS)
    lines = _race(pg_url, processes=6, rounds=25)
    winners = [line for line in lines if line[0] == "moved"]
    conflicts = [line for line in lines if line[0] == "conflict"]
    assert len(winners) + len(conflicts) == 6 * 25
    assert conflicts, "no two moves overlapped: the race did not happen"
    # Each revision was won once, from the one before it.
    assert sorted(int(w[2]) for w in winners) == list(range(1, len(winners) + 1))
    assert all(int(w[2]) == int(w[1]) + 1 for w in winners)
    _assert_one_chain(pg_url, len(winners))


def test_racing_first_commits_of_a_namespace_get_one_winner(pg_url: str) -> None:
    pg_prepare(pg_url, CHECKPOINTS)
    lines = _race(pg_url, processes=5, rounds=1)
    # Those that read no pointer raced for the first move: one made it. (A process the
    # machine started late may find the pointer made and move it on: that is no race.)
    first = [line[0] for line in lines if line[1] == "0"]
    assert first.count("moved") == 1 and len(first) >= 2, lines
    _assert_one_chain(pg_url, sum(line[0] == "moved" for line in lines))
