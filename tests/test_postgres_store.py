"""The small table families of the store on PostgreSQL (``store/settings.py``,
``receipts.py``, ``pins.py``, ``scopes.py``, ``quotas.py`` through the PostgreSQL
connection), on a real server: what they read and write as on SQLite, and a pin name still
written once when two writers pin it at the same moment."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import pg_checkpoint_id as _id
from conftest import pg_prepare

from ckptdb import errors
from ckptdb.connection.postgres import PgConnection
from ckptdb.retention import RetentionPolicy
from ckptdb.store import pins, quotas, receipts, scopes, settings
from ckptdb.store.checkpoints import checkpoint_by_id


@pytest.fixture
def conn(pg_url: str) -> Iterator[PgConnection]:
    pg_prepare(pg_url, 3)
    c = PgConnection.open(pg_url)
    try:
        yield c
    finally:
        c.close()


def _row(conn: PgConnection, n: int) -> Any:
    row = checkpoint_by_id(conn, _id(n))  # a portable SELECT already
    assert row is not None
    return row


def test_settings_as_on_sqlite(conn: PgConnection) -> None:
    with conn.write_transaction():
        settings.init_new_file(conn, 65536, fixed=True)
        settings.init_new_file(conn, 131072, fixed=True)  # the size is written once
    assert settings.has_chunk_size(conn)
    assert settings.chunk_size(conn) == 65536
    assert settings.chunker(conn, 65536).settings()["size"] == 131072  # replaced
    policy = RetentionPolicy(keep_last=3)
    with conn.write_transaction():
        settings.set_policy(conn, "*", policy, 5)
        settings.set_policy(conn, "*", RetentionPolicy(keep_last=4), 6)  # replaced
    assert settings.stored_policies(conn) == {"*": RetentionPolicy(keep_last=4)}
    with conn.write_transaction():
        assert settings.clear_policy(conn, "*") is True
        assert settings.clear_policy(conn, "*") is False


def test_receipts_as_on_sqlite(conn: PgConnection) -> None:
    with conn.write_transaction():
        first = receipts.store_receipt(
            conn, "verify", {"ok": True}, namespace=None, checkpoint_id=None, at_ms=10
        )
        second = receipts.store_receipt(
            conn, "gc", {"deleted": 2}, namespace="ns", checkpoint_id=_id(0), at_ms=11
        )
    assert second > first
    listed = receipts.list_receipts(conn)
    assert [(r.receipt_id, r.kind) for r in listed] == [(second, "gc"), (first, "verify")]
    assert [r.kind for r in receipts.list_receipts(conn, kind="verify")] == ["verify"]
    assert len(receipts.list_receipts(conn, limit=1)) == 1
    r = listed[0]
    assert receipts.digest_matches(
        "gc", "ns", _id(0), 11, conn.scalar("SELECT body FROM receipt WHERE kind = 'gc'"), r.digest
    )
    with conn.read_transaction():
        assert list(receipts.gc_bodies(conn)) == ['{"deleted":2}']
        assert len(list(receipts.iter_raw(conn))) == 2


def test_pins_as_on_sqlite(conn: PgConnection) -> None:
    with conn.write_transaction():
        made = pins.pin(conn, "keep", _row(conn, 0), note="n", replace=False, now_ms=1)
        assert pins.pin(conn, "keep", _row(conn, 0), note=None, replace=False, now_ms=2) == made
        with pytest.raises(errors.ConflictError):
            pins.pin(conn, "keep", _row(conn, 1), note=None, replace=False, now_ms=3)
        pins.pin(conn, "other", _row(conn, 2), note=None, replace=False, now_ms=4)
    assert [p.name for p in pins.list_pins(conn)] == ["keep", "other"]
    assert [p.name for p in pins.list_pins(conn, "ns")] == ["keep", "other"]
    assert pins.list_pins(conn, "elsewhere") == []
    seqs = {_row(conn, 0).seq, _row(conn, 2).seq}
    assert pins.protected_seqs(conn) == seqs == pins.pinned_in_namespace(conn, 1)
    assert pins.pinned_among(conn, [_row(conn, 0).seq, _row(conn, 1).seq]) == {_row(conn, 0).seq}
    with conn.write_transaction():
        moved = pins.pin(conn, "keep", _row(conn, 1), note=None, replace=True, now_ms=5)
        assert moved.checkpoint_id == _id(1)
        assert pins.unpin(conn, "other").checkpoint_id == _id(2)
        pins.delete_in_namespace(conn, 1)
    assert pins.list_pins(conn) == []


@pytest.mark.parametrize("same", [True, False], ids=["same checkpoint", "another checkpoint"])
def test_a_pin_name_pinned_by_two_writers_at_once_is_written_once(
    conn: PgConnection, pg_url: str, same: bool
) -> None:
    # The first writer's pin is written but not committed when the second pins the same
    # name: the second waits on it, then decides against it -- the same pin again is a
    # no-op, another checkpoint a ConflictError -- never a constraint error or a second pin.
    other = PgConnection.open(pg_url)
    outcome: list[object] = []
    try:
        with conn.write_transaction():
            pins.pin(conn, "p", _row(conn, 0), note=None, replace=False, now_ms=1)

            def second() -> None:
                try:
                    with other.write_transaction():
                        target = _row(other, 0 if same else 1)
                        outcome.append(
                            pins.pin(other, "p", target, note=None, replace=False, now_ms=2)
                        )
                except errors.CkptdbError as exc:
                    outcome.append(exc)

            waiting = threading.Thread(target=second)
            waiting.start()
            waiting.join(0.5)
            assert waiting.is_alive()  # held by the first writer's uncommitted pin
        waiting.join(30)
    finally:
        other.close()
    assert len(outcome) == 1
    if same:
        assert isinstance(outcome[0], pins.models.Pin) and outcome[0].checkpoint_id == _id(0)
    else:
        assert isinstance(outcome[0], errors.ConflictError)
    assert [(p.name, p.checkpoint_id) for p in pins.list_pins(conn)] == [("p", _id(0))]


def test_key_scopes_as_on_sqlite(conn: PgConnection) -> None:
    with conn.write_transaction():
        assert not scopes.any_scope(conn)
        first = scopes.insert(
            conn, key_id="k1", prefix="secret/", wrap=lambda sid: b"w%d" % sid, now_ms=1
        )
        second = scopes.insert(
            conn, key_id="k2", prefix="other/", wrap=lambda sid: b"w%d" % sid, now_ms=2
        )
    assert (first, second) == (1, 2)
    rows = scopes.all_rows(conn)
    assert [(r.scope_id, r.prefix, r.wrapped_key) for r in rows] == [
        (1, "secret/", b"w1"),
        (2, "other/", b"w2"),
    ]
    assert scopes.covering_scope_id(conn, "secret/a") == 1
    assert scopes.covering_scope_id(conn, "plain") is None
    with conn.write_transaction():
        scopes.rewrap(conn, rows[0], b"rotated", 3)
        with pytest.raises(errors.ScopeChangedError):
            scopes.rewrap(conn, rows[0], b"stale", 4)  # decided on generation 1: refused
        scopes.tombstone(conn, 2, 5)
    after = scopes.all_rows(conn)
    assert (after[0].wrapped_key, after[0].key_generation) == (b"rotated", 2)
    assert after[1].shredded and after[1].shredded_at_ms == 5
    with pytest.raises(errors.KeyShreddedError):
        scopes.covering_scope_id(conn, "other/x")


def test_quotas_and_usage_as_on_sqlite(conn: PgConnection) -> None:
    cache = quotas.QuotaCache()
    with conn.write_transaction():
        quotas.upsert(conn, cache, quotas.QuotaRow("n", "each", 10, None, "refuse", 1))
        quotas.upsert(conn, cache, quotas.QuotaRow("", "total", None, 99, "evict", 1))
        quotas.upsert(conn, cache, quotas.QuotaRow("n", "each", 5, None, "refuse", 2))
        conn.execute("UPDATE checkpoint SET total_size = 7")
        conn.execute("INSERT INTO namespace (name, created_at_ms) VALUES ('B', 1), ('a', 1)")
    assert quotas.get(conn, "n", "each") == quotas.QuotaRow("n", "each", 5, None, "refuse", 2)
    assert [q.prefix for q in quotas.matching(conn, cache, "ns")] == ["n", ""]
    assert quotas.namespace_usage(conn, 1, with_bytes=True) == (3, 21)
    assert quotas.namespace_usage(conn, 1, with_bytes=False) == (3, None)
    assert quotas.prefix_usage(conn, "n", with_bytes=True) == (3, 21)
    assert quotas.prefix_usage(conn, "", with_bytes=True) == (3, 21)
    assert set(quotas.namespaces_under(conn, "")) == {"B", "a", "ns"}
    assert quotas.namespaces_under(conn, "B") == {"B": 2}
    with conn.read_transaction():
        oldest = list(quotas.oldest_first(conn, prefix="n"))
    assert [(ns_id, size) for _, ns_id, size in oldest] == [(1, 7), (1, 7), (1, 7)]
    usage = {u.namespace: u for u in quotas.usage_by_namespace(conn)}
    assert (usage["ns"].checkpoints, usage["ns"].logical_bytes) == (3, 21)
    with conn.write_transaction():
        assert quotas.delete(conn, cache, "n", "each") is True
    assert [q.prefix for q in quotas.matching(conn, cache, "ns")] == [""]
