"""The reads of ``store/checkpoints.py`` on PostgreSQL (the writes and the packed entries are
the next step of the port, docs/postgresql.md): lookups by id, label, prefix and
namespace, the one lineage walk, and the scans that do not trust an index -- the same
answers as on SQLite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import pg_checkpoint_id as _id
from conftest import pg_prepare

from ckptdb import errors
from ckptdb.connection.postgres import PgConnection
from ckptdb.store import checkpoints, pointers

COUNT = 6


@pytest.fixture
def conn(pg_url: str) -> Iterator[PgConnection]:
    pg_prepare(pg_url, COUNT)
    c = PgConnection.open(pg_url)
    try:
        with c.write_transaction():
            # A lineage: checkpoint n's parent is n - 1; the last two carry labels; CURRENT
            # names the newest.
            c.executemany(
                "UPDATE checkpoint SET parent_id = ? WHERE id = ?",
                [(_id(n - 1), _id(n)) for n in range(1, COUNT)],
            )
            c.execute("UPDATE checkpoint SET label = 'step-' || generation WHERE generation > ?",
                      (COUNT - 2,))  # fmt: skip
            newest = checkpoints.checkpoint_by_id(c, _id(COUNT - 1))
            assert newest is not None
            pointers.move(
                c, namespace="ns", namespace_id=1, previous=None, new_seq=newest.seq,
                new_id=newest.id, reason="commit", now_ms=1,
            )  # fmt: skip
        yield c
    finally:
        c.close()


def test_lookups_as_on_sqlite(conn: PgConnection) -> None:
    for scan in (False, True):
        row = checkpoints.checkpoint_by_id(conn, _id(2), scan=scan)
        assert row is not None and (row.id, row.generation, row.namespace) == (_id(2), 3, "ns")
        assert row.parent_id == _id(1)
        labelled = checkpoints.checkpoint_by_label(conn, "ns", f"step-{COUNT}", scan=scan)
        assert labelled is not None and labelled.id == _id(COUNT - 1)
        assert checkpoints.checkpoint_by_label(conn, "ns", "step-1", scan=scan) is None
    assert checkpoints.checkpoint_by_id(conn, "0" * 64) is None
    with pytest.raises(errors.CheckpointNotFoundError):
        checkpoints.require_checkpoint(conn, "0" * 64)
    assert checkpoints.existing_ids(conn, [_id(0), "0" * 64, _id(5)]) == {_id(0), _id(5)}
    assert set(checkpoints.checkpoints_by_ids(conn, [_id(1), _id(4)])) == {_id(1), _id(4)}
    prefix = _id(3)[:6]
    assert checkpoints.checkpoint_ids_by_prefix(conn, prefix) == [_id(3)]
    assert checkpoints.namespace_id(conn, "ns") == 1
    assert checkpoints.namespace_name(conn, 1) == "ns"
    assert checkpoints.namespaces_by_name(conn) == {"ns": 1}
    assert checkpoints.checkpoint_counts(conn) == {1: COUNT}
    assert sorted(i for _, i in checkpoints.seqs_of_namespace(conn, 1)) == sorted(
        _id(n) for n in range(COUNT)
    )
    assert checkpoints.count_under_prefix(conn, "n") == 1
    assert checkpoints.namespaces_under_prefix(conn, "ns") == [("ns", None)]
    assert checkpoints.namespaces_of_scope(conn, 1) == []
    newest = checkpoints.checkpoint_by_id(conn, _id(COUNT - 1))
    assert newest is not None and checkpoints.label_of(conn, newest.seq) == f"step-{COUNT}"


def test_the_lineage_walk_as_on_sqlite(conn: PgConnection) -> None:
    walked = checkpoints.lineage(conn, _id(COUNT - 1))
    assert [r.id for r in walked] == [_id(n) for n in reversed(range(COUNT))]
    assert [r.id for r in checkpoints.lineage(conn, _id(3), limit=2)] == [_id(3), _id(2)]
    depths = checkpoints.depths_from_current(conn, [1])
    by_id = {r.seq: r.id for r in walked}
    assert {by_id[seq]: depth for seq, depth in depths.items()} == {
        _id(n): COUNT - 1 - n for n in range(COUNT)
    }
    assert len(checkpoints.depths_from_current(conn, [1], limit=3)) == 3
