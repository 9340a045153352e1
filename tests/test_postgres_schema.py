"""The PostgreSQL engine's schema (``migrations/postgresql/``) on a real server: the same
model as the SQLite engine's newest schema, applied by the same checksummed runner, and
applied once when several machines migrate one database at the same moment."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from conftest import pg_create_schema

import ckptdb
from ckptdb import errors
from ckptdb.connection.postgres import PgConnection
from ckptdb.store import migrations
from ckptdb.testing.postgres import PostgresServer

#: Tables of the SQLite schema a PostgreSQL database does not need (migrations/postgresql/
#: 0001 says why): format 2's rows not yet moved, and what an identity column gives.
SQLITE_ONLY = {"entry", "seq_high_water"}
#: How the SQLite engine's declared types map onto the PostgreSQL engine's.
TYPES = {"INTEGER": "bigint", "TEXT": "text", "BLOB": "bytea"}


@pytest.fixture
def conn(pg_url: str) -> Iterator[PgConnection]:
    c = PgConnection.open(pg_url)
    try:
        yield c
    finally:
        c.close()


def test_a_new_database_gets_the_whole_schema_once(conn: PgConnection) -> None:
    mset = migrations.postgresql_core_set()
    assert mset.latest >= 1
    assert migrations.user_version(conn) == 0
    assert migrations.check_history(conn, mset) == list(mset.migrations)
    assert pg_create_schema(conn) is True
    assert migrations.user_version(conn) == mset.latest
    assert migrations.check_history(conn, mset) == []
    assert pg_create_schema(conn) is False  # already there: nothing written
    rows = migrations.applied(conn, migrations.CORE)
    assert [(r.version, r.checksum, r.ckptdb_version) for r in rows] == [
        (m.version, m.checksum, ckptdb.__version__) for m in mset.migrations
    ]
    assert migrations.applied_sets(conn) == {"core": mset.latest}


def test_an_edited_history_or_a_newer_database_is_refused(conn: PgConnection) -> None:
    pg_create_schema(conn)
    mset = migrations.postgresql_core_set()
    conn.execute("UPDATE ckptdb_migration SET checksum = repeat('0', 64) WHERE version = 1")
    with pytest.raises(errors.MigrationChecksumError) as caught:
        migrations.check_history(conn, mset)
    assert "postgresql://" in str(caught.value) and "@" in str(caught.value)
    conn.execute(
        "UPDATE ckptdb_migration SET checksum = ? WHERE version = 1", (mset.migrations[0].checksum,)
    )
    conn.execute(
        "INSERT INTO ckptdb_migration VALUES ('core', ?, 'future', repeat('1', 64), 0, '9.9.9')",
        (mset.latest + 1,),
    )
    with pytest.raises(errors.SchemaTooNewError, match=r"9\.9\.9"):
        migrations.check_history(conn, mset)


def _sqlite_model(tmp_path: Path) -> dict[str, dict[str, str]]:
    """Every table's columns with declared types, and every view's columns, of a new
    SQLite ckptdb file."""
    path = tmp_path / "model.ckpt"
    ckptdb.open(path).close()
    raw = apsw.Connection(str(path))
    try:
        names = raw.execute(
            "SELECT name, type FROM sqlite_schema WHERE type IN ('table', 'view')"
            " AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        model = {}
        for name, kind in names:
            columns = raw.execute(f'PRAGMA table_info("{name}")').fetchall()
            model[name] = {c[1]: (c[2] if kind == "table" else "view") for c in columns}
        return model
    finally:
        raw.close()


def test_the_schema_is_the_sqlite_engines_model(conn: PgConnection, tmp_path: Path) -> None:
    # Drift check: a SQLite migration that adds a table, a column or a view column fails
    # here until migrations/postgresql/ says the same.
    pg_create_schema(conn)
    sqlite = _sqlite_model(tmp_path)
    postgres: dict[str, dict[str, str]] = {}
    for table, kind in conn.execute(
        "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'public'"
    ):
        columns = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name = ?",
            (table,),
        )
        postgres[table] = {c: (t if kind == "BASE TABLE" else "view") for c, t in columns}
    assert set(postgres) == set(sqlite) - SQLITE_ONLY
    for name, columns in postgres.items():
        want = {c: TYPES.get(t, t) for c, t in sqlite[name].items()}
        assert columns == want, name


_RACER = """
import sys, time
from ckptdb.connection.postgres import PgConnection
from ckptdb.store import migrations
conn = PgConnection.open(sys.argv[1])
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
with conn.write_transaction():
    conn.lock(migrations.SCHEMA_LOCK)
    applied = migrations.create_schema(conn, migrations.postgresql_core_set(), 1)
print("applied" if applied else "found")
"""


def test_machines_migrating_at_once_apply_the_schema_once(pg_url: str) -> None:
    # Four processes (as four machines) start the same migration at the same instant: the
    # schema lock lets one apply it; the others wait, then find it applied.
    start = time.time() + 1.5
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, pg_url, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outcomes = []
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
        outcomes.append(out.strip())
    assert sorted(outcomes) == ["applied", "found", "found", "found"]
    check = PgConnection.open(pg_url)
    try:
        assert migrations.check_history(check, migrations.postgresql_core_set()) == []
    finally:
        check.close()


def test_names_order_by_code_point_whatever_the_databases_collation(
    pg_server: PostgresServer,
) -> None:
    # A database made with a language's collation ('en-US': a < B < b): the store still
    # sees SQLite's order, code point by code point.
    name = "icu_" + uuid.uuid4().hex[:12]
    admin = PgConnection.open(pg_server.url())
    try:
        admin.execute(
            f"CREATE DATABASE {name} LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'"
            " TEMPLATE template0"
        )
    finally:
        admin.close()
    conn = PgConnection.open(pg_server.url(name))
    try:
        assert pg_create_schema(conn)
        assert conn.execute("SELECT x FROM (VALUES ('a'), ('B')) v (x) ORDER BY x") == [
            ("a",),
            ("B",),
        ]  # the database's own order
        not_c = conn.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c"
            " JOIN information_schema.tables t USING (table_schema, table_name)"
            " WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'"
            " AND c.data_type = 'text' AND c.collation_name IS DISTINCT FROM 'C'"
        )
        assert not_c == []
        names = ["a", "B", "b", "A", "_z", "é", "Z"]
        conn.executemany(
            "INSERT INTO namespace (name, created_at_ms) VALUES (?, 1)", [(n,) for n in names]
        )
        assert [r[0] for r in conn.execute("SELECT name FROM namespace ORDER BY name")] == sorted(
            names
        )
        assert conn.execute(
            "SELECT name FROM namespace WHERE name >= 'B' AND name < 'C' ORDER BY name"
        ) == [("B",)]
        usage = conn.execute("SELECT checkpoints, logical_bytes, stored_bytes FROM namespace_usage")
        assert {type(v) for row in usage for v in row} == {int}
    finally:
        conn.close()
