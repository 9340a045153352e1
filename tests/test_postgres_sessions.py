"""Integration sessions on PostgreSQL: an integration's migration set applied once by
racing machines, its statements confined to its own tables by the core tables' guard
triggers and the session's keyword check -- every write to a core table refused, nothing
written -- through the public API (``write_session``, ``read_session``, ``on_publish``,
``on_drop``, verify hooks)."""

from __future__ import annotations

import hashlib
import multiprocessing
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors
from ckptdb.connection.postgres import PgConnection
from ckptdb.extension import Session

#: ckptdb's tables on this engine (the guard's), read from the server's catalog.
_CORE_SQL = (
    "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"
    " AND tablename NOT LIKE 'ext\\_%' ORDER BY tablename"
)


def _own_migrations(tmp_path: Path, *, with_postgresql: bool = True) -> Path:
    folder = tmp_path / "ext_migrations"
    folder.mkdir(exist_ok=True)
    (folder / "0001_ext.sql").write_text(
        "CREATE TABLE ext_map (cid TEXT PRIMARY KEY, label TEXT) STRICT;"
    )
    if with_postgresql:
        (folder / "postgresql").mkdir(exist_ok=True)
        (folder / "postgresql" / "0001_ext.sql").write_text(
            "CREATE TABLE ext_map (cid TEXT PRIMARY KEY, label TEXT);"
            # a function of the integration's that writes a core table when called
            "CREATE FUNCTION ext_wipe_pins() RETURNS bigint LANGUAGE sql AS"
            " 'WITH gone AS (DELETE FROM pin RETURNING 1) SELECT count(*) FROM gone';"
        )
    return folder


def _core_state(url: str) -> str:
    """A digest of every row of every ckptdb table, read in one snapshot."""
    conn = PgConnection.open(url)
    try:
        digest = hashlib.sha256()
        with conn.read_transaction():
            for (table,) in conn.execute(_CORE_SQL):
                rows = sorted(repr(r) for r in conn.execute(f"SELECT * FROM {table}"))
                digest.update(f"{table}:{rows}".encode())
        return digest.hexdigest()
    finally:
        conn.close()


@pytest.fixture
def ext_db(pg_url: str, tmp_path: Path) -> Any:
    with ckptdb.open(pg_url) as db:
        first = db.commit("ns", {"state": b"one", "big": bytes(range(256)) * 1200})
        db.commit("ns", {"state": b"two"}, metadata={"step": 2})
        db.pin(first.checkpoint_id, "keep")
        assert db.apply_migration_set("ext", _own_migrations(tmp_path)) == [1]
        yield db


#: Statements the server's guard refuses (a write to a core table, however spelled).
GUARDED = [
    "DELETE FROM checkpoint",
    "UPDATE pointer SET revision = revision + 1",
    "DELETE FROM blob",
    "DELETE FROM chunk_data",
    "INSERT INTO pointer_history SELECT * FROM pointer_history",
    "DELETE FROM blob_ref",
    "UPDATE namespace SET name = name || 'x'",
    "DELETE FROM receipt",
    "DELETE FROM pin",
    "DELETE FROM ckptdb_migration WHERE migration_set = 'ext'",
    "UPDATE setting SET value = value",
    "WITH gone AS (DELETE FROM checkpoint RETURNING 1) SELECT count(*) FROM gone",
    "/* a comment */ -- and another\n DELETE FROM pin",
    "SELECT ext_wipe_pins()",  # the write is the function's: the client's statement decides
    "SELECT set_config('ckptdb.session', '', true), ext_wipe_pins()",
]
#: Statements the session refuses before sending them.
UNSENT = [
    "CREATE TABLE ext_extra (k TEXT)",
    "DROP TABLE ext_map",
    "ALTER TABLE ext_map ADD COLUMN extra TEXT",
    "TRUNCATE checkpoint",
    "SET search_path = pg_catalog",
    "RESET ALL",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT hook",
    "LOCK TABLE pointer",
    "COPY checkpoint FROM STDIN",
    "VACUUM",
    "",
]


def test_both_engines_and_the_guard_know_one_session_mark() -> None:
    from ckptdb.connection.confinement import SESSION_MARK as SQLITE_MARK
    from ckptdb.connection.postgres.session import SESSION_MARK
    from ckptdb.store.migrations import postgresql_core_set

    assert SESSION_MARK == SQLITE_MARK
    guard = postgresql_core_set().get(5)
    assert guard is not None and f"'{SESSION_MARK.strip()}'" in guard.sql


def test_a_session_reads_core_tables_and_writes_its_own(ext_db: ckptdb.Database) -> None:
    with ext_db.write_session() as s:
        assert s.dialect == "postgresql"
        s.execute("INSERT INTO ext_map VALUES (?, ?)", ("c1", "a"))
        s.executemany("INSERT INTO ext_map VALUES (?, ?)", [("c2", "b"), ("c3", "c")])
        s.execute("UPDATE ext_map SET label = 'z' WHERE cid > ?", ("c1",))
        assert s.changes() == 2
        assert s.scalar("SELECT count(*) FROM checkpoints WHERE namespace = 'ns'") == 2
    with ext_db.read_session(snapshot=False) as s:
        assert s.execute("SELECT cid, label FROM ext_map ORDER BY cid") == [
            ("c1", "a"),
            ("c2", "z"),
            ("c3", "z"),
        ]
        assert s.one("SELECT label FROM ext_map WHERE cid = 'none'") is None


@pytest.mark.parametrize("sql", UNSENT)
def test_what_is_not_a_query_or_a_row_write_is_not_sent(
    ext_db: ckptdb.Database, pg_url: str, sql: str
) -> None:
    before = _core_state(pg_url)
    with ext_db.write_session() as s:
        s.execute("INSERT INTO ext_map VALUES ('c1', 'kept')")
        with pytest.raises(errors.IntegrationWriteRefusedError) as exc:
            s.execute(sql)
        assert exc.value.code == "integration_write_refused"
        s.execute("INSERT INTO ext_map VALUES ('c2', 'kept')")  # the transaction goes on
    assert _core_state(pg_url) == before
    with ext_db.read_session() as s:
        assert s.execute("SELECT cid FROM ext_map ORDER BY cid") == [("c1",), ("c2",)]


@pytest.mark.parametrize("sql", GUARDED)
def test_the_guard_refuses_every_core_write_and_the_transaction_rolls_back(
    ext_db: ckptdb.Database, pg_url: str, sql: str
) -> None:
    before = _core_state(pg_url)
    with pytest.raises(errors.IntegrationWriteRefusedError) as exc, ext_db.write_session() as s:
        s.execute("INSERT INTO ext_map VALUES ('c1', 'lost')")
        s.execute(sql)
    assert exc.value.code == "integration_write_refused"
    assert "ckptdb's" in str(exc.value) and "rolls back" in str(exc.value)
    assert _core_state(pg_url) == before
    with ext_db.read_session() as s:
        assert s.scalar("SELECT count(*) FROM ext_map") == 0
    assert ext_db.verify().ok


@pytest.mark.parametrize("sql", GUARDED)
def test_the_guard_holds_for_a_transactions_first_statement(
    ext_db: ckptdb.Database, pg_url: str, sql: str
) -> None:
    """The first statement of a transaction travels with its BEGIN in one round trip:
    batched into one simple-protocol message, which the guard would read as one text --
    never a session's statement -- or pipelined, each statement keeping its own text."""
    before = _core_state(pg_url)
    with pytest.raises(errors.IntegrationWriteRefusedError), ext_db.write_session() as s:
        s.execute(sql)
    assert _core_state(pg_url) == before


@pytest.mark.parametrize("sql", GUARDED[:4] + UNSENT[:4])
def test_on_publish_refuses_and_the_commit_does_not_land(
    ext_db: ckptdb.Database, pg_url: str, sql: str
) -> None:
    before = _core_state(pg_url)
    current = ext_db.current("ns")

    def hook(session: Session, ack: ckptdb.CommitAck) -> None:
        session.execute("INSERT INTO ext_map VALUES (?, 'hook')", (ack.checkpoint_id,))
        session.execute(sql)

    with pytest.raises(errors.IntegrationWriteRefusedError):
        ext_db.commit("ns", {"state": b"three"}, on_publish=hook)
    assert ext_db.current("ns") == current
    assert _core_state(pg_url) == before
    with ext_db.read_session() as s:
        assert s.scalar("SELECT count(*) FROM ext_map") == 0


def test_ckptdb_writes_as_before_after_a_hook_in_the_same_transaction(
    ext_db: ckptdb.Database,
    pg_url: str,
) -> None:
    """The guard is up only while the session's block runs: the commit's own statements
    after its hook, a drop's after on_drop, and the next transaction all write."""
    seen: list[str] = []

    def hook(session: Session, ack: ckptdb.CommitAck) -> None:
        session.execute("INSERT INTO ext_map VALUES (?, 'landed')", (ack.checkpoint_id,))
        seen.append(ack.checkpoint_id)

    acks = [ext_db.commit("hooked", {"n": bytes([i])}, on_publish=hook) for i in range(3)]
    assert seen == [a.checkpoint_id for a in acks]
    assert ext_db.current("hooked").id == acks[-1].checkpoint_id  # type: ignore[union-attr]
    report = ext_db.drop_namespace(
        "hooked", on_drop=lambda s: s.execute("DELETE FROM ext_map WHERE label = 'landed'")
    )
    assert report.checkpoints_deleted == 3 and ext_db.current("hooked") is None
    with ext_db.read_session() as s:
        assert s.scalar("SELECT count(*) FROM ext_map") == 0
    assert ext_db.commit("after", {"x": b"x"}).checkpoint_id
    assert ext_db.verify().ok


def test_a_read_session_is_one_read_only_snapshot(ext_db: ckptdb.Database, pg_url: str) -> None:
    before = _core_state(pg_url)
    for snapshot in (True, False):
        with pytest.raises(errors.ReadOnlyError), ext_db.read_session(snapshot=snapshot) as s:
            s.execute("INSERT INTO ext_map VALUES ('r', 'read')")
    with pytest.raises(errors.ReadOnlyError), ext_db.read_session() as s:
        s.execute("DELETE FROM pin")
    assert _core_state(pg_url) == before
    with ext_db.read_session() as s:
        assert s.scalar("SELECT count(*) FROM ext_map") == 0


def test_a_session_ends_with_its_block(ext_db: ckptdb.Database) -> None:
    with ext_db.write_session() as s:
        kept = s
    with pytest.raises(errors.ClosedError):
        kept.execute("SELECT 1")


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_session_writes_any_core_table(ext_db: ckptdb.Database, pg_url: str, data: Any) -> None:
    conn = PgConnection.open(pg_url)
    try:
        tables = [t for (t,) in conn.execute(_CORE_SQL)]
    finally:
        conn.close()
    table = data.draw(st.sampled_from(tables))
    column = _first_column(pg_url, table)
    sql = data.draw(
        st.sampled_from(
            [
                f"DELETE FROM {table}",
                f"UPDATE {table} SET {column} = {column}",
                f"INSERT INTO {table} OVERRIDING SYSTEM VALUE SELECT * FROM {table} LIMIT 0",
                f"WITH w AS (DELETE FROM {table} RETURNING 1) SELECT 1",
            ]
        )
    )
    through = data.draw(st.sampled_from(["write_session", "on_publish"]))
    before = _core_state(pg_url)
    with pytest.raises(errors.IntegrationWriteRefusedError):
        if through == "write_session":
            with ext_db.write_session() as s:
                s.execute(sql)
        else:
            ext_db.commit("hyp", {"x": b"x"}, on_publish=lambda s, _ack: s.execute(sql))
    assert _core_state(pg_url) == before


def test_a_set_without_postgresql_migrations_is_refused_and_writes_nothing(
    pg_url: str, tmp_path: Path
) -> None:
    with ckptdb.open(pg_url) as db:
        before = db.migration_history()
        with pytest.raises(errors.EngineUnsupportedError) as exc:
            db.apply_migration_set("other", _own_migrations(tmp_path, with_postgresql=False))
        assert "postgresql/" in str(exc.value)
        assert db.migration_history() == before


def _apply(url: str, folder: str, out: Any) -> None:
    with ckptdb.open(url) as db:
        out.put(db.apply_migration_set("ext", folder))


def test_machines_applying_one_set_at_once_apply_it_once(pg_url: str, tmp_path: Path) -> None:
    folder = _own_migrations(tmp_path)
    (folder / "0002_more.sql").write_text("ALTER TABLE ext_map ADD COLUMN extra TEXT;")
    (folder / "postgresql" / "0002_more.sql").write_text(
        "ALTER TABLE ext_map ADD COLUMN extra TEXT;"
    )
    ckptdb.open(pg_url).close()  # the core schema first: this race is the set's
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_apply, args=(pg_url, str(folder), out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    applied = sorted(v for _ in procs for v in out.get(timeout=5))
    assert applied == [1, 2]  # each migration by exactly one machine
    with ckptdb.open(pg_url) as db:
        history = [(m.migration_set, m.version) for m in db.migration_history()]
        assert history.count(("ext", 1)) == 1 and history.count(("ext", 2)) == 1


# -- helpers -------------------------------------------------------------------------------


def _first_column(url: str, table: str) -> str:
    conn = PgConnection.open(url)
    try:
        return str(
            conn.scalar(
                "SELECT column_name FROM information_schema.columns WHERE table_schema ="
                " current_schema() AND table_name = ? AND is_identity = 'NO'"
                " ORDER BY ordinal_position LIMIT 1",
                (table,),
            )
        )
    finally:
        conn.close()


def test_a_set_is_checked_against_the_history_the_open_read_and_read_again_when_pending(
    pg_url: str, tmp_path: Path
) -> None:
    """An open keeps every set's history (one read); a set complete there is not read
    again, and one it shows pending -- applied meanwhile by another machine, or newer in
    this code -- goes through the apply, which reads the history under the schema lock."""
    folder = _own_migrations(tmp_path)
    with ckptdb.open(pg_url) as first:
        with ckptdb.open(pg_url) as other:  # another machine applies the set meanwhile
            assert other.apply_migration_set("ext", folder) == [1]
        assert first.apply_migration_set("ext", folder) == []  # pending at open: re-read
        (folder / "postgresql" / "0002_more.sql").write_text("ALTER TABLE ext_map ADD n INT;")
        (folder / "0002_more.sql").write_text("ALTER TABLE ext_map ADD n INT;")
        assert first.apply_migration_set("ext", folder) == [2]
    with ckptdb.open(pg_url) as again:
        assert again.apply_migration_set("ext", folder) == []  # complete at open
        edited = tmp_path / "edited"
        shutil.copytree(folder, edited)
        (edited / "postgresql" / "0002_more.sql").write_text("ALTER TABLE ext_map ADD m INT;")
        with pytest.raises(errors.MigrationChecksumError):
            again.apply_migration_set("ext", edited)
        with again.read_session() as s:
            assert s.scalar("SELECT count(*) FROM ext_map WHERE n IS NULL") == 0
    (folder / "postgresql" / "0003_last.sql").write_text("ALTER TABLE ext_map ADD o INT;")
    (folder / "0003_last.sql").write_text("ALTER TABLE ext_map ADD o INT;")
    with ckptdb.open(pg_url) as newer_code:  # the open's history shows version 3 pending
        assert newer_code.apply_migration_set("ext", folder) == [3]
