"""Integration sessions are confined by SQLite's authorizer: an integration reads any
table and writes its own, and every write to a core table, DDL, ATTACH/DETACH, pragma
write or transaction-control statement is refused before it runs -- nothing written, the
transaction still open and usable.

First against the connection layer (``Connection.integration_session``), then end to end
through the public API (``Database.write_session`` and ``commit(on_publish=...)``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors
from ckptdb.connection import Connection, open_connection
from ckptdb.extension import Session

REPO = Path(__file__).resolve().parent.parent
#: The core schema's tables, read from the schema document itself.
CORE_TABLES = frozenset(
    re.findall(r"^CREATE TABLE (\w+)", (REPO / "schema" / "ckptdb.sql").read_text(), re.M)
)
LITESTREAM = ("_litestream_seq", "_litestream_lock")
#: SQLite's own tables the fixture file holds.
SQLITE_TABLES = ("sqlite_schema", "sqlite_sequence", "sqlite_stat1")
OWN = "ext_rows"


class _Undo(Exception):
    """Raised to roll a write transaction back."""


def _populate(path: Path) -> None:
    """A ckptdb file with rows in most core tables: two namespaces, a chunked blob, a
    pin, a receipt."""
    with ckptdb.open(path) as db:
        a = db.commit("ns", {"state": b"one", "big": os.urandom(300_000)})
        db.commit("ns", {"state": b"two"}, metadata={"step": 2})
        db.commit("other", {"x": b"x"})
        db.pin(a.checkpoint_id, "keep")


def _fingerprint(conn: Connection) -> str:
    """A digest of every protected table's rows and of the schema (not ``sqlite_sequence``,
    which SQLite moves on when an integration's own AUTOINCREMENT table grows)."""
    digest = hashlib.sha256()
    tables = sorted(CORE_TABLES) + list(LITESTREAM) + ["sqlite_stat1"]
    for table in [*tables, "sqlite_schema"]:
        rows = sorted(repr(row) for row in conn.execute(f"SELECT * FROM {table}"))
        digest.update(f"{table}:{len(rows)}:{rows}".encode())
    digest.update(repr(conn.pragma("user_version")).encode())
    return digest.hexdigest()


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[Connection]:
    """A connection to a populated ckptdb file that also holds an integration's table (and
    one with AUTOINCREMENT), Litestream's tables and ``sqlite_stat1``."""
    path = tmp_path / "c.ckpt"
    _populate(path)
    connection = open_connection(str(path))
    connection.execute_script(
        f"CREATE TABLE {OWN} (k INTEGER PRIMARY KEY, v TEXT);"
        "CREATE TABLE ext_auto (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT);"
        "INSERT INTO ext_auto (v) VALUES ('first');"
        "CREATE TABLE _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER);"
        "CREATE TABLE _litestream_lock (id INTEGER);"
        "ANALYZE;"
    )
    try:
        yield connection
    finally:
        connection.close()


def _columns(conn: Connection, table: str) -> list[str]:
    return [str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")]


def _precache(conn: Connection, sql: str) -> None:
    """Run ``sql`` outside any session and roll it back: apsw keeps the statement,
    prepared without confinement, in its cache."""
    with contextlib.suppress(_Undo, errors.CkptdbError), conn.write_transaction():
        conn.execute(sql)
        raise _Undo


# -- the connection layer ----------------------------------------------------------------


def test_the_core_tables_are_the_schema_documents(conn: Connection) -> None:
    present = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_schema")}
    assert {"checkpoint", "pointer", "pointer_history", "blob", "chunk", "entry"} <= CORE_TABLES
    assert present >= CORE_TABLES


def test_a_session_reads_everything_and_writes_its_own_tables(conn: Connection) -> None:
    before = _fingerprint(conn)
    with conn.write_transaction(), conn.integration_session(CORE_TABLES) as s:
        s.execute(f"INSERT INTO {OWN} (k, v) VALUES (?, ?)", (1, "a"))
        s.executemany(f"INSERT INTO {OWN} (k, v) VALUES (?, ?)", [(2, "b"), (3, "c")])
        s.execute(f"UPDATE {OWN} SET v = upper(v) WHERE k > ?", (1,))
        assert s.changes() == 2
        s.execute(
            f"INSERT INTO {OWN} (k, v) VALUES (3, 'x') ON CONFLICT (k) DO UPDATE SET v = 'up'"
        )
        s.execute(f"INSERT OR REPLACE INTO {OWN} (k, v) VALUES (1, 'replaced')")
        assert s.execute(f"DELETE FROM {OWN} WHERE k = 2 RETURNING v") == [("B",)]
        s.execute("INSERT INTO ext_auto (v) VALUES ('second')")  # sqlite_sequence moves
        assert s.scalar("SELECT count(*) FROM checkpoint") == 3
        assert s.one(
            "SELECT count(*) FROM pointer p JOIN checkpoint c ON c.seq = p.current_seq"
        ) == (2,)
        assert s.scalar("PRAGMA user_version") == conn.pragma("user_version")
        assert s.execute("PRAGMA table_info(checkpoint)")
        assert s.scalar("SELECT count(*) FROM pragma_table_info('pointer')") > 0
        assert (
            s.scalar(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5)"
                " SELECT sum(i) FROM n"
            )
            == 15
        )
        assert s.scalar("SELECT count(*) FROM sqlite_schema") > 0
        assert s.scalar("SELECT 'a;b'") == "a;b"  # a ';' in the text: run without the cache
    assert conn.execute(f"SELECT k, v FROM {OWN} ORDER BY k") == [(1, "replaced"), (3, "up")]
    assert conn.scalar("SELECT max(id) FROM ext_auto") == 2
    assert _fingerprint(conn) == before
    assert conn.execute("SELECT seq FROM sqlite_sequence") == [(2,)]  # moved on by SQLite


@pytest.mark.parametrize("table", sorted(CORE_TABLES) + list(LITESTREAM))
def test_every_row_write_to_a_protected_table_is_refused_before_it_runs(
    conn: Connection, table: str
) -> None:
    column = _columns(conn, table)[0]
    statements = [
        f"INSERT INTO {table} DEFAULT VALUES",
        f"INSERT OR REPLACE INTO {table} SELECT * FROM {table}",
        f"UPDATE {table} SET {column} = {column}",
        f"DELETE FROM {table}",
        f"REPLACE INTO {table.upper()} SELECT * FROM {table}",  # any spelling of the name
        f"WITH doomed AS (SELECT 1) DELETE FROM main.{table} WHERE 1",
        f"INSERT INTO {OWN} (v) SELECT 'x'; DELETE FROM {table}",  # the second statement
    ]
    before = _fingerprint(conn)
    own_before = conn.execute(f"SELECT * FROM {OWN}")
    for sql in statements:
        _precache(conn, sql.split("; ")[-1])  # the same text, prepared unconfined
        with conn.write_transaction(), conn.integration_session(CORE_TABLES) as s:
            with pytest.raises(errors.IntegrationWriteRefusedError) as refused:
                s.execute(sql)
            assert conn.in_transaction  # refused while prepared: the transaction goes on
        assert refused.value.code == "integration_write_refused"
        assert refused.value.details["target"].lower() == table
        assert "own tables" in str(refused.value) and table in str(refused.value).lower()
        assert _fingerprint(conn) == before, sql
    # a multi-statement text runs up to the refused statement; nothing of this one ran
    assert len(conn.execute(f"SELECT * FROM {OWN}")) == len(own_before) + 1


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO sqlite_schema (type, name) VALUES ('table', 'x')",
        "UPDATE sqlite_schema SET sql = sql",
        "DELETE FROM sqlite_sequence",
        "UPDATE sqlite_sequence SET seq = 99",
        "DELETE FROM sqlite_stat1",
        "INSERT INTO sqlite_stat1 VALUES ('checkpoint', NULL, '1')",
    ],
)
def test_sqlite_tables_are_never_written(conn: Connection, sql: str) -> None:
    before = _fingerprint(conn)
    sequence = conn.execute("SELECT * FROM sqlite_sequence")
    with (
        conn.write_transaction(),
        conn.integration_session(CORE_TABLES) as s,
        pytest.raises(errors.CkptdbError),
    ):
        s.execute(sql)
    assert _fingerprint(conn) == before
    assert conn.execute("SELECT * FROM sqlite_sequence") == sequence


STATEMENTS_REFUSED = [
    # DDL of any object, own tables included: an integration migrates through a set
    ("CREATE TABLE ext_more (k INTEGER)", "schema change"),
    ("CREATE TEMP TABLE scratch (k INTEGER)", "schema change"),
    (f"CREATE INDEX ext_by_v ON {OWN} (v)", "schema change"),
    ("CREATE VIEW ext_view AS SELECT 1", "schema change"),
    (f"CREATE TRIGGER ext_trg AFTER INSERT ON {OWN} BEGIN SELECT 1; END", "CREATE TRIGGER"),
    (f"DROP TABLE {OWN}", "schema change"),
    ("DROP TABLE checkpoint", "schema change"),
    ("DROP VIEW checkpoints", "schema change"),
    (f"ALTER TABLE {OWN} ADD COLUMN extra TEXT", "ALTER TABLE"),
    ("ALTER TABLE pin RENAME TO pin2", "ALTER TABLE"),
    ("CREATE VIRTUAL TABLE ext_v USING json_each('[1]')", "schema change"),
    ("ANALYZE", "ANALYZE"),
    ("REINDEX checkpoint", "REINDEX"),
    ("ATTACH ':memory:' AS other", "ATTACH"),
    ("DETACH main", "DETACH"),
    # pragmas that set a value or do maintenance
    ("PRAGMA user_version = 99", "PRAGMA"),
    ("PRAGMA application_id = 7", "PRAGMA"),
    ("PRAGMA journal_mode = DELETE", "PRAGMA"),
    ("PRAGMA foreign_keys = OFF", "PRAGMA"),
    ("PRAGMA synchronous = OFF", "PRAGMA"),
    ("PRAGMA writable_schema = ON", "PRAGMA"),
    ("PRAGMA wal_checkpoint(TRUNCATE)", "PRAGMA"),
    ("PRAGMA incremental_vacuum", "PRAGMA"),
    ("PRAGMA optimize", "PRAGMA"),
    # the transaction belongs to ckptdb
    ("BEGIN", "BEGIN"),
    ("BEGIN IMMEDIATE", "BEGIN"),
    ("COMMIT", "COMMIT"),
    ("END", "COMMIT"),
    ("ROLLBACK", "ROLLBACK"),
    ("SAVEPOINT mine", "SAVEPOINT"),
    ("RELEASE ckptdb_member", "RELEASE"),
    ("ROLLBACK TO ckptdb_member", "ROLLBACK TO"),
]


@pytest.mark.parametrize(("sql", "statement"), STATEMENTS_REFUSED)
def test_ddl_attach_pragma_writes_and_transaction_control_are_refused(
    conn: Connection, sql: str, statement: str
) -> None:
    before = _fingerprint(conn)
    with conn.write_transaction():
        with conn.integration_session(CORE_TABLES) as s:
            s.execute(f"INSERT INTO {OWN} (k, v) VALUES (1, 'kept')")
            with pytest.raises(errors.IntegrationWriteRefusedError) as refused:
                s.execute(sql)
            assert conn.in_transaction
            s.execute(f"INSERT INTO {OWN} (k, v) VALUES (2, 'kept too')")
        assert refused.value.details["statement"] == statement
        assert "nothing was written" in str(refused.value)
    assert _fingerprint(conn) == before
    assert conn.execute(f"SELECT k FROM {OWN} ORDER BY k") == [(1,), (2,)]
    assert conn.pragma("foreign_keys") == 1 and conn.pragma("journal_mode") == "wal"


def test_vacuum_is_refused_in_and_out_of_a_transaction(conn: Connection) -> None:
    before = _fingerprint(conn)
    with conn.integration_session(CORE_TABLES) as s:
        # Outside a transaction VACUUM attaches a scratch database: that is refused.
        with pytest.raises(errors.IntegrationWriteRefusedError):
            s.execute("VACUUM")
        with pytest.raises(errors.IntegrationWriteRefusedError):
            s.execute(f"VACUUM INTO '{conn.path}.copy'")
        # Inside one SQLite itself refuses it.
        with conn.write_transaction(), pytest.raises(errors.CkptdbError):
            s.execute("VACUUM")
    assert _fingerprint(conn) == before
    assert not os.path.exists(f"{conn.path}.copy")


def test_a_refusal_rolls_back_with_the_transaction_when_the_caller_lets_it_go(
    conn: Connection,
) -> None:
    with (
        pytest.raises(errors.IntegrationWriteRefusedError),
        conn.write_transaction(),
        conn.integration_session(CORE_TABLES) as s,
    ):
        s.execute(f"INSERT INTO {OWN} (k, v) VALUES (1, 'lost')")
        s.execute("DELETE FROM pointer")
    assert not conn.in_transaction
    assert conn.execute(f"SELECT * FROM {OWN}") == []
    assert conn.scalar("SELECT count(*) FROM pointer") == 2


def test_statements_outside_a_session_are_not_confined(conn: Connection) -> None:
    """The flag is up only while a session's own statement runs: ckptdb's statements on
    the same connection -- before, between and after -- are not refused."""
    with conn.write_transaction():
        with conn.integration_session(CORE_TABLES) as s:
            with pytest.raises(errors.IntegrationWriteRefusedError):
                s.execute("DELETE FROM receipt WHERE 1")
            conn.execute("DELETE FROM receipt WHERE 1")  # the same text, by ckptdb
            with pytest.raises(errors.IntegrationWriteRefusedError):
                s.execute("DELETE FROM receipt WHERE 1")
        conn.execute("CREATE TABLE made_by_ckptdb (k INTEGER)")
    assert conn.scalar("SELECT count(*) FROM receipt") == 0
    assert conn.scalar("SELECT count(*) FROM made_by_ckptdb") == 0


def test_a_session_ends_with_its_block(conn: Connection) -> None:
    with conn.integration_session(CORE_TABLES) as s:
        assert s.scalar(f"SELECT count(*) FROM {OWN}") == 0
    kept: Session = s
    with pytest.raises(errors.ClosedError):
        kept.execute(f"INSERT INTO {OWN} (v) VALUES ('late')")
    with pytest.raises(errors.ClosedError):
        kept.executemany(f"INSERT INTO {OWN} (v) VALUES (?)", [("late",)])
    with pytest.raises(errors.ClosedError):
        kept.one("SELECT 1")
    assert conn.execute(f"SELECT * FROM {OWN}") == []


def test_executemany_one_and_scalar_are_confined_too(conn: Connection) -> None:
    before = _fingerprint(conn)
    with conn.write_transaction(), conn.integration_session(CORE_TABLES) as s:
        with pytest.raises(errors.IntegrationWriteRefusedError):
            s.executemany("DELETE FROM namespace WHERE name = ?", [("ns",), ("other",)])
        with pytest.raises(errors.IntegrationWriteRefusedError):
            s.one("DELETE FROM blob RETURNING id")
        with pytest.raises(errors.IntegrationWriteRefusedError):
            s.scalar("UPDATE pin SET note = 'x' RETURNING name")
        s.executemany(f"INSERT INTO {OWN} (v) VALUES (?)", [])
    assert _fingerprint(conn) == before


def test_another_protected_set_checks_cached_statements_again(conn: Connection) -> None:
    """Installing a confinement for another set of tables expires every prepared
    statement, so a session statement cached under the old set is checked again."""
    insert = f"INSERT INTO {OWN} (v) VALUES ('x')"
    with conn.integration_session(CORE_TABLES) as s:
        s.execute(insert)
    with (
        conn.integration_session(CORE_TABLES | {OWN}) as s,
        pytest.raises(errors.IntegrationWriteRefusedError),
    ):
        s.execute(insert)
    with conn.integration_session(frozenset(CORE_TABLES)) as s:  # equal set, new object
        s.execute(insert)
    assert conn.scalar(f"SELECT count(*) FROM {OWN}") == 2


def test_the_read_only_sandbox_and_confinement_share_the_authorizer(conn: Connection) -> None:
    """Operator SQL runs under its own (read-only) authorizer; afterwards the sessions'
    confinement is in force again, and ckptdb's own statements still run."""
    with conn.integration_session(CORE_TABLES) as s:
        s.execute(f"INSERT INTO {OWN} (v) VALUES ('a')")
    with pytest.raises(errors.ReadOnlyError):
        conn.prepare_readonly(f"INSERT INTO {OWN} (v) VALUES ('b')")
    assert conn.prepare_readonly("SELECT count(*) FROM checkpoint").is_statement
    with conn.stream_readonly(f"SELECT v FROM {OWN}", (), lambda: None) as (names, rows):
        assert names == ["v"] and list(rows) == [("a",)]
    with conn.integration_session(CORE_TABLES) as s:
        with pytest.raises(errors.IntegrationWriteRefusedError):
            s.execute("DELETE FROM checkpoint")
        s.execute(f"INSERT INTO {OWN} (v) VALUES ('c')")
    conn.execute(f"INSERT INTO {OWN} (v) VALUES ('by ckptdb')")
    assert conn.scalar(f"SELECT count(*) FROM {OWN}") == 3


WRITE_KINDS = ("insert", "replace", "update", "delete", "upsert")
OTHER_KINDS = ("select", "create_index", "drop", "alter", "trigger", "pragma_set", "begin")


def _statement(kind: str, table: str, column: str) -> str:
    return {
        "insert": f"INSERT INTO {table} DEFAULT VALUES",
        "replace": f"INSERT OR REPLACE INTO {table} SELECT * FROM {table}",
        "update": f"UPDATE {table} SET {column} = {column}",
        "delete": f"DELETE FROM {table}",
        "upsert": f"INSERT INTO {table} SELECT * FROM {table} WHERE true ON CONFLICT DO NOTHING",
        "select": f"SELECT count(*) FROM {table}",
        "create_index": f"CREATE INDEX IF NOT EXISTS hyp_idx ON {table} ({column})",
        "drop": f"DROP TABLE {table}",
        "alter": f"ALTER TABLE {table} ADD COLUMN hyp_col TEXT",
        "trigger": f"CREATE TRIGGER hyp_trg BEFORE DELETE ON {table} BEGIN SELECT 1; END",
        "pragma_set": f"PRAGMA user_version = {len(table)}",
        "begin": "BEGIN",
    }[kind]


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    table=st.sampled_from([*sorted(CORE_TABLES), *LITESTREAM, OWN, "ext_auto"]),
    kind=st.sampled_from(WRITE_KINDS + OTHER_KINDS),
    upper=st.booleans(),
    precached=st.booleans(),
    api=st.sampled_from(["execute", "one", "executemany"]),
)
def test_refused_exactly_when_it_would_write_a_protected_table_or_change_anything_else(
    conn: Connection, table: str, kind: str, upper: bool, precached: bool, api: str
) -> None:
    protected = table not in (OWN, "ext_auto")
    sql = _statement(kind, table.upper() if upper else table, _columns(conn, table)[0])
    before = _fingerprint(conn)
    if precached:
        _precache(conn, sql)
    allowed = kind == "select" or (kind in WRITE_KINDS and not protected)
    with conn.write_transaction(), conn.integration_session(CORE_TABLES) as s:

        def run() -> None:
            if api == "execute":
                s.execute(sql)
            elif api == "one":
                s.one(sql)
            else:
                s.executemany(sql, [(), ()])

        if allowed:
            run()
        else:
            with pytest.raises(errors.IntegrationWriteRefusedError):
                run()
    assert _fingerprint(conn) == before


# -- end to end: the public API ----------------------------------------------------------
#
# Database.write_session and the on_publish hook of Database.commit hand the integration a
# session from Connection.integration_session.


def _own_migrations(tmp_path: Path) -> Path:
    folder = tmp_path / "ext_migrations"
    folder.mkdir(exist_ok=True)
    (folder / "0001_rows.sql").write_text(
        "CREATE TABLE ext_map (cid TEXT PRIMARY KEY, label TEXT) STRICT;"
    )
    return folder


@pytest.fixture
def ext_db(tmp_path: Path) -> Iterator[ckptdb.Database]:
    """A populated database with an integration's migration set applied."""
    path = tmp_path / "e.ckpt"
    _populate(path)
    with ckptdb.open(path) as db:
        db.apply_migration_set("ext", _own_migrations(tmp_path))
        yield db


def _verified(db: ckptdb.Database) -> bool:
    """``verify`` finds nothing wrong but the migration set it does not ship (``ext``)."""
    return all(p.code == "schema_mismatch" for p in db.verify().problems)


def _core_state(db: ckptdb.Database) -> str:
    digest = hashlib.sha256()
    for table in sorted(CORE_TABLES):
        rows = sorted(repr(r) for r in raw_sql(db.path, f"SELECT * FROM {table}"))
        digest.update(f"{table}:{rows}".encode())
    digest.update(repr(raw_sql(db.path, "SELECT type, name, sql FROM sqlite_schema")).encode())
    digest.update(repr(raw_sql(db.path, "PRAGMA user_version")).encode())
    return digest.hexdigest()


PUBLIC_REFUSED = [
    "DELETE FROM checkpoint",
    "UPDATE pointer SET revision = revision + 1",
    "DELETE FROM blob",
    "DELETE FROM chunk",
    "DELETE FROM chunk_data",
    "INSERT INTO pointer_history SELECT * FROM pointer_history",
    "DELETE FROM blob_ref",
    "UPDATE namespace SET name = name || 'x'",
    "DELETE FROM receipt",
    "DELETE FROM pin",
    "DELETE FROM ckptdb_migration WHERE migration_set = 'ext'",
    "UPDATE setting SET value = value",
    "CREATE TABLE ext_extra (k TEXT)",
    "DROP TABLE ext_map",
    "ALTER TABLE ext_map ADD COLUMN extra TEXT",
    "ATTACH ':memory:' AS side",
    "PRAGMA user_version = 1",
    "PRAGMA foreign_keys = OFF",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT hook",
]


@pytest.mark.parametrize("sql", PUBLIC_REFUSED)
def test_write_session_refuses_and_writes_nothing(ext_db: ckptdb.Database, sql: str) -> None:
    before = _core_state(ext_db)
    with ext_db.write_session() as s:
        s.execute("INSERT INTO ext_map VALUES ('c1', 'kept')")
        with pytest.raises(errors.IntegrationWriteRefusedError):
            s.execute(sql)
        s.execute("INSERT INTO ext_map VALUES ('c2', 'kept')")  # the transaction goes on
    assert _core_state(ext_db) == before
    with ext_db.read_session() as s:
        assert s.execute("SELECT cid FROM ext_map ORDER BY cid") == [("c1",), ("c2",)]
    assert _verified(ext_db)


@pytest.mark.parametrize("sql", PUBLIC_REFUSED)
def test_on_publish_refuses_and_the_commit_does_not_land(ext_db: ckptdb.Database, sql: str) -> None:
    before = _core_state(ext_db)
    current = ext_db.current("ns")

    def hook(session: Session, ack: ckptdb.CommitAck) -> None:
        session.execute("INSERT INTO ext_map VALUES (?, 'hook')", (ack.checkpoint_id,))
        session.execute(sql)

    with pytest.raises(errors.IntegrationWriteRefusedError):
        ext_db.commit("ns", {"state": b"three"}, on_publish=hook)
    assert ext_db.current("ns") == current
    assert _core_state(ext_db) == before
    with ext_db.read_session() as s:
        assert s.scalar("SELECT count(*) FROM ext_map") == 0


def test_on_publish_writes_its_own_rows_after_a_refusal_it_caught(
    ext_db: ckptdb.Database,
) -> None:
    def hook(session: Session, ack: ckptdb.CommitAck) -> None:
        with pytest.raises(errors.IntegrationWriteRefusedError):
            session.execute("UPDATE pointer SET revision = 0")
        session.execute("INSERT INTO ext_map VALUES (?, 'landed')", (ack.checkpoint_id,))

    ack = ext_db.commit("ns", {"state": b"three"}, on_publish=hook)
    assert ext_db.current("ns").id == ack.checkpoint_id  # type: ignore[union-attr]
    with ext_db.read_session() as s:
        assert s.scalar("SELECT label FROM ext_map WHERE cid = ?", (ack.checkpoint_id,)) == (
            "landed"
        )
    assert _verified(ext_db)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    table=st.sampled_from(sorted(CORE_TABLES)),
    kind=st.sampled_from(("insert", "replace", "update", "delete", "drop", "alter")),
    through=st.sampled_from(["write_session", "on_publish"]),
)
def test_no_public_session_writes_a_core_table(
    ext_db: ckptdb.Database, table: str, kind: str, through: str
) -> None:
    column = str(raw_sql(ext_db.path, f"PRAGMA table_info({table})")[0][1])
    sql = _statement(kind, table, column)
    before = _core_state(ext_db)
    with pytest.raises(errors.IntegrationWriteRefusedError):
        if through == "write_session":
            with ext_db.write_session() as s:
                s.execute(sql)
        else:
            ext_db.commit("hyp", {"x": b"x"}, on_publish=lambda s, _ack: s.execute(sql))
    assert _core_state(ext_db) == before
