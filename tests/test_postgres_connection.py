"""The PostgreSQL engine's connection (``ckptdb.connection.postgres``) and the throwaway
server the tests run it against (``ckptdb.testing.postgres``), on a real server: statements
with the store's SQLite parameter marks, errors with ckptdb's codes, the two kinds of
transaction, advisory locks, and what a lost connection or a crashed server does to a
COMMIT in flight."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import psutil
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptdb import errors
from ckptdb.connection.postgres import PgConnection, lock_key
from ckptdb.connection.postgres.placeholders import translate
from ckptdb.testing.postgres import PostgresServer


@pytest.fixture
def conn(pg_url: str) -> Iterator[PgConnection]:
    c = PgConnection.open(pg_url)
    c.execute("CREATE TABLE item (k TEXT PRIMARY KEY, v BIGINT NOT NULL CHECK (v >= 0))")
    try:
        yield c
    finally:
        c.close()


def _kill_backend(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


# -- the server ------------------------------------------------------------------------


def test_server_starts_stops_by_its_own_pid_and_recovers_after_a_crash() -> None:
    server = PostgresServer()  # its own short directory: a socket path has a length limit
    directory = server.directory
    try:
        server.start()
        pid = server.pid
        assert pid is not None and psutil.pid_exists(pid)
        assert next(server.socket_dir.glob(".s.PGSQL.*")).is_socket()
        url = server.create_database("app")
        c = psycopg.connect(url, autocommit=True)
        c.execute("CREATE TABLE t (x INT)")
        c.execute("INSERT INTO t VALUES (1)")
        c.execute("BEGIN")
        c.execute("INSERT INTO t VALUES (2)")  # never committed
        server.crash()  # SIGQUIT: pg_ctl stop -m immediate
        assert not server.running and not psutil.pid_exists(pid)
        c.close()
        server.start()  # crash recovery from the WAL
        with psycopg.connect(url) as c:
            assert c.execute("SELECT x FROM t").fetchall() == [(1,)]
        second = server.pid
        server.stop()
        assert second is not None and not psutil.pid_exists(second)
        assert server.pid is None
    finally:
        server.close()
    assert not directory.exists()


# -- statements --------------------------------------------------------------------------


def test_marks_in_literals_identifiers_comments_and_casts_are_left_alone() -> None:
    bound = translate(
        "SELECT '?', 'it''s :x', \"a?b\", ?2 -- ? :c %\n/* ?3 */ , 5 % 2, '50%', ?1::text, :y"
    )
    assert bound.sql == (
        "SELECT '?', 'it''s :x', \"a?b\", %s -- ? :c %%\n/* ?3 */ , 5 %% 2, '50%%', %s::text, %s"
    )
    assert bound.marks == (1, 0, "y")


def test_statements_run_with_the_stores_marks(conn: PgConnection) -> None:
    conn.executemany("INSERT INTO item (k, v) VALUES (?, ?)", [("a", 1), ("b", 2), ("c", 3)])
    assert conn.changes() == 3
    assert conn.execute("SELECT k FROM item WHERE v > ?1 AND v < ?1 + 3 ORDER BY k", (1,)) == [
        ("b",),
        ("c",),
    ]
    assert conn.scalar("SELECT v FROM item WHERE k = :k", {"k": "c"}) == 3
    assert conn.one("SELECT v FROM item WHERE k = ?", ("zz",)) is None
    conn.execute("UPDATE item SET v = v + 10 WHERE v >= ?", (2,))
    assert conn.changes() == 2
    conn.execute_script("CREATE TABLE a (x INT); CREATE TABLE b (y INT); INSERT INTO a VALUES (1)")
    assert conn.scalar("SELECT count(*) FROM a") == 1
    with conn.read_transaction():
        assert [r[0] for r in conn.iterate("SELECT k FROM item ORDER BY k", batch=2)] == [
            "a",
            "b",
            "c",
        ]


def test_wrong_parameters_are_refused_before_anything_runs(conn: PgConnection) -> None:
    for sql, params in [
        ("SELECT ?, ?", (1,)),
        ("SELECT ?", (1, 2)),
        ("SELECT :a", (1,)),
        ("SELECT ?", {"a": 1}),
        ("SELECT :a, :b", {"a": 1}),
    ]:
        with pytest.raises(errors.InvalidInputError, match="parameters do not match"):
            conn.execute(sql, params)


values = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text().filter(lambda t: "\x00" not in t),
    st.binary(),
    st.floats(allow_nan=False),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.lists(values, min_size=1, max_size=6), numbered=st.booleans())
def test_every_value_comes_back_where_its_mark_stands(
    conn: PgConnection, data: list[object], numbered: bool
) -> None:
    # Each value typed by its own cast so the server knows what it is given.
    def cast(v: object) -> str:
        if v is None:
            return "::text"
        if isinstance(v, bool | int):
            return "::bigint"
        if isinstance(v, float):
            return "::float8"
        return "::bytea" if isinstance(v, bytes) else "::text"

    if numbered:  # ?N marks, asked in reverse: the binder reorders them
        order = list(reversed(range(len(data))))
        sql = "SELECT " + ", ".join(f"?{i + 1}{cast(data[i])}" for i in order)
        expected = [data[i] for i in order]
    else:
        sql = "SELECT " + ", ".join(f"?{cast(v)}" for v in data)
        expected = list(data)
    row = conn.one(sql, data)
    assert row is not None
    for got, want in zip(row, expected, strict=True):
        if isinstance(want, float):
            assert isinstance(got, float) and (got == want or math.isclose(got, want))
        else:
            assert got == want


# -- errors ----------------------------------------------------------------------------------


def test_errors_carry_ckptdb_codes(conn: PgConnection, pg_url: str) -> None:
    conn.execute("INSERT INTO item VALUES ('a', 1)")
    cases: list[tuple[str, tuple[object, ...], str]] = [
        ("INSERT INTO item VALUES ('a', 2)", (), "constraint_violation"),
        ("INSERT INTO item VALUES ('b', -1)", (), "constraint_violation"),
        ("INSERT INTO item VALUES (?, 1)", ("n\x00ul",), "invalid_input"),
        ("SELEKT 1", (), "sql_error"),
        ("SELECT * FROM no_such_table", (), "sql_error"),
    ]
    for sql, params, code in cases:
        with pytest.raises(errors.CkptdbError) as caught:
            conn.execute(sql, params)
        assert caught.value.code == code, sql
    assert conn.execute("SELECT k, v FROM item") == [("a", 1)]  # nothing written
    reader = PgConnection.open(pg_url, readonly=True)
    try:
        assert reader.scalar("SELECT v FROM item") == 1
        with pytest.raises(errors.ReadOnlyError):
            reader.execute("INSERT INTO item VALUES ('c', 3)")
    finally:
        reader.close()
    with pytest.raises(errors.StorageError, match="lost or refused"):
        PgConnection.open(pg_url.replace("?host=", "?host=/nonexistent"), connect_timeout=2)


def test_a_lock_held_longer_than_the_lock_timeout_is_busy_timeout(
    conn: PgConnection, pg_url: str
) -> None:
    conn.execute("INSERT INTO item VALUES ('a', 1)")
    other = PgConnection.open(pg_url, lock_timeout=0.2)
    try:
        with conn.write_transaction():
            conn.execute("UPDATE item SET v = 2 WHERE k = 'a'")  # holds the row lock
            conn.lock("namespace-x")
            with pytest.raises(errors.BusyTimeoutError) as caught, other.write_transaction():
                other.execute("UPDATE item SET v = 3 WHERE k = 'a'")
            assert caught.value.retryable
            with pytest.raises(errors.BusyTimeoutError), other.write_transaction():
                other.lock("namespace-x")
            with other.write_transaction():
                other.lock("namespace-y")  # another name: not held
        with other.write_transaction():  # released at COMMIT
            other.lock("namespace-x")
            other.execute("UPDATE item SET v = 3 WHERE k = 'a'")
        assert conn.scalar("SELECT v FROM item") == 3
    finally:
        other.close()
    assert lock_key("namespace-x") != lock_key("namespace-y")


# -- transactions ------------------------------------------------------------------------------


def test_a_write_transaction_commits_or_rolls_back_whole(conn: PgConnection) -> None:
    with conn.write_transaction():
        conn.execute("INSERT INTO item VALUES ('a', 1)")
        conn.execute("INSERT INTO item VALUES ('b', 2)")
    with pytest.raises(errors.ConstraintViolationError), conn.write_transaction():
        conn.execute("INSERT INTO item VALUES ('c', 3)")
        conn.execute("INSERT INTO item VALUES ('a', 9)")
    with pytest.raises(KeyError), conn.write_transaction():
        conn.execute("DELETE FROM item")
        raise KeyError("the caller's own error propagates")
    assert not conn.in_transaction
    assert conn.execute("SELECT k, v FROM item ORDER BY k") == [("a", 1), ("b", 2)]


def test_a_read_transaction_keeps_one_snapshot(conn: PgConnection, pg_url: str) -> None:
    conn.execute("INSERT INTO item VALUES ('a', 1)")
    writer = PgConnection.open(pg_url)
    try:
        with conn.read_transaction():
            assert conn.scalar("SELECT v FROM item") == 1
            with writer.write_transaction():
                writer.execute("UPDATE item SET v = 2")
            assert conn.scalar("SELECT v FROM item") == 1  # the snapshot of BEGIN
            with pytest.raises(errors.ReadOnlyError):
                conn.execute("UPDATE item SET v = 5")
        assert conn.scalar("SELECT v FROM item") == 2
    finally:
        writer.close()


def test_a_connection_lost_at_commit_is_an_unknown_outcome(conn: PgConnection, pg_url: str) -> None:
    with pytest.raises(errors.CommitOutcomeUnknownError) as caught, conn.write_transaction():
        conn.execute("INSERT INTO item VALUES ('a', 1)")
        _kill_backend(pg_url, conn.backend_pid)
    assert caught.value.code == "commit_outcome_unknown"
    assert conn.closed and not conn.in_transaction
    check = PgConnection.open(pg_url)
    try:  # here the server ended the session before COMMIT: rolled back
        assert check.scalar("SELECT count(*) FROM item") == 0
    finally:
        check.close()


def test_a_server_crash_during_a_transaction_loses_nothing_acknowledged() -> None:
    with PostgresServer() as server:
        url = server.create_database("crash")
        conn = PgConnection.open(url)
        conn.execute("CREATE TABLE item (k TEXT PRIMARY KEY)")
        with conn.write_transaction():
            conn.execute("INSERT INTO item VALUES ('acknowledged')")
        with pytest.raises(errors.CommitOutcomeUnknownError), conn.write_transaction():
            conn.execute("INSERT INTO item VALUES ('in flight')")
            server.crash()
        conn.close()
        server.start()
        again = PgConnection.open(url)
        try:
            assert again.execute("SELECT k FROM item") == [("acknowledged",)]
        finally:
            again.close()


def test_one_connection_serves_threads_one_at_a_time(conn: PgConnection) -> None:
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                conn.execute("INSERT INTO item VALUES (?, ?)", (f"{n}-{i}", i))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert conn.scalar("SELECT count(*) FROM item") == 80


def test_streams_nest_inside_one_transaction(conn: PgConnection) -> None:
    conn.executemany("INSERT INTO item VALUES (?, ?)", [(f"k{i}", i) for i in range(5)])
    with conn.read_transaction():
        pairs = [
            (outer[0], inner[0])
            for outer in conn.iterate("SELECT k FROM item WHERE v < 2 ORDER BY k")
            for inner in conn.iterate("SELECT k FROM item WHERE v >= 3 ORDER BY k", batch=1)
        ]
    assert pairs == [("k0", "k3"), ("k0", "k4"), ("k1", "k3"), ("k1", "k4")]
