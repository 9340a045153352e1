"""GC's batch (store/gc_batch.py), the one owner of GC's temporary tables: its lists last
one step, its tables one GC; an estimate counts what the deletion then frees; and it works
under a statement its caller is still running (a quota's eviction inside a commit)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import raw_sql

import ckptdb
from ckptdb import RetentionPolicy
from ckptdb.connection import Connection
from ckptdb.store.gc_batch import GcBatch

CHUNK = 64 * 1024


@pytest.fixture
def db(db_path: Path) -> Iterator[ckptdb.Database]:
    handle = ckptdb.open(db_path, chunk_size=CHUNK)
    try:
        yield handle
    finally:
        handle.close()


def _conn(db: ckptdb.Database) -> Connection:
    return db._handle.store.conn


def _temp_tables(db: ckptdb.Database) -> dict[str, int]:
    """Rows held by each temporary table of the handle's connection."""
    conn = _conn(db)
    names = [str(r[0]) for r in conn.execute("SELECT name FROM sqlite_temp_schema")]
    return {name: int(conn.scalar(f'SELECT count(*) FROM temp."{name}"')) for name in names}


def _seqs(db: ckptdb.Database, namespace: str) -> list[int]:
    rows = raw_sql(
        db.path,
        "SELECT c.seq FROM checkpoint c JOIN namespace n USING (namespace_id)"
        " WHERE n.name = ? ORDER BY c.seq",
        (namespace,),
    )
    return [int(r[0]) for r in rows]  # type: ignore[call-overload]


def _commit_chain(db: ckptdb.Database, namespace: str, n: int) -> list[str]:
    shared = os.urandom(2 * CHUNK)  # one chunked blob every checkpoint shares
    return [
        db.commit(
            namespace, {"shared": shared, "own": os.urandom(2 * CHUNK), "s": f"{i}".encode()}
        ).checkpoint_id
        for i in range(n)
    ]


@pytest.mark.parametrize("dry_run", [True, False])
def test_gc_drop_and_prune_leave_no_temporary_table(db: ckptdb.Database, dry_run: bool) -> None:
    _commit_chain(db, "ns", 6)
    _commit_chain(db, "gone", 3)
    report = db.gc(RetentionPolicy(keep_last=1), grace=0, dry_run=dry_run)
    assert report.checkpoints_deleted == 4 + 1  # CURRENT and fallback of each stay
    assert _temp_tables(db) == {}
    dropped = db.drop_namespace("gone", force=True, dry_run=dry_run)
    assert dropped.checkpoints_deleted == (3 if dry_run else 2)
    assert _temp_tables(db) == {}
    db.commit("ns", {"s": b"tagged"}, metadata={"tag": "x"})
    assert db.prune({"tag": "x"}, dry_run=dry_run).skipped  # the CURRENT is kept
    assert _temp_tables(db) == {}
    assert db.verify().ok


def test_an_eviction_inside_a_commit_leaves_no_listed_row(db: ckptdb.Database) -> None:
    db.set_quota("q", max_checkpoints=3, on_exceed="evict")
    acks = [db.commit("q", {"s": f"{i}".encode(), "big": os.urandom(CHUNK + 1)}) for i in range(6)]
    assert sum(len(a.evicted_ids) for a in acks) == 3
    assert len(_seqs(db, "q")) == 3
    tables = _temp_tables(db)
    assert tables and not any(tables.values())  # the commit may still be reading: emptied
    db.gc(RetentionPolicy(keep_last=3), grace=0)
    assert _temp_tables(db) == {}  # ... and dropped when a GC ends
    assert db.verify().ok


def test_a_batch_frees_exactly_what_it_estimated(db: ckptdb.Database) -> None:
    _commit_chain(db, "ns", 5)
    doomed = _seqs(db, "ns")[:3]  # neither CURRENT nor fallback
    # One chunk of a doomed blob was touched recently (a publish in flight re-used it): the
    # estimate does not count it and the deletion keeps it.
    young = raw_sql(
        db.path,
        "SELECT bc.chunk_id FROM checkpoint k JOIN entries e ON e.checkpoint_id = k.id"
        " JOIN blob b ON b.digest = e.digest JOIN blob_chunk bc ON bc.blob_id = b.blob_id"
        " WHERE k.seq = ? AND e.name = 'own' ORDER BY bc.seq LIMIT 1",
        (doomed[0],),
    )[0][0]
    cutoff = 10**15
    raw_sql(db.path, "UPDATE chunk SET last_touched_ms = ? WHERE chunk_id = ?", (cutoff, young))
    conn = _conn(db)
    with conn.write_transaction():
        with GcBatch.open(conn, doomed) as batch:
            ids = batch.checkpoint_ids()
            batch.list_blobs()
            batch.unlist_blobs_in_use(ignore_listed=True)
            estimated = (batch.blob_totals(), batch.chunks_freed(cutoff))
        with GcBatch.open(conn, doomed) as batch:
            batch.list_blobs()
            deleted = batch.delete_checkpoints()
            batch.unlist_blobs_in_use()
            batch.list_chunks()
            freed = (batch.delete_blobs(), batch.delete_chunks(cutoff))
    assert deleted == ids and len(ids) == 3
    # 3 own blobs of 2 chunks each (less the young chunk) and 3 inline ones of 1 byte;
    # the shared blob stays.
    assert freed == estimated == ((6, 3), (5, 5 * CHUNK))
    young_left = raw_sql(db.path, "SELECT count(*) FROM chunk WHERE chunk_id = ?", (young,))
    assert young_left == [(1,)]
    assert len(_seqs(db, "ns")) == 2
    assert db.verify().ok


def test_a_batch_runs_while_its_caller_is_reading(db: ckptdb.Database) -> None:
    ids = _commit_chain(db, "ns", 4)
    conn = _conn(db)
    with conn.write_transaction():
        reading = conn.iterate("SELECT name FROM namespace")
        assert next(reading) == ("ns",)  # a statement of the caller's, still running
        with GcBatch.open(conn, _seqs(db, "ns")[:1]) as batch:
            batch.list_blobs()
            assert batch.delete_checkpoints() == [ids[0]]
            batch.unlist_blobs_in_use()
            batch.list_chunks()
            assert batch.delete_blobs() == (2, 1)
            assert batch.delete_chunks(10**15) == (2, 2 * CHUNK)
        assert list(reading) == []  # the caller's statement ran to its end
    assert ids[0] not in {c.id for c in db.lineage("ns")}
    assert db.verify().ok
