"""Shared fixtures: real database files in a temporary directory, helpers for processes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ckptdb
from ckptdb.ops.handle import Handle
from ckptdb.ops.open import open_handle
from ckptdb.replication import scratch
from ckptdb.testing.postgres import PostgresServer

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Path of a database file that does not exist yet."""
    return tmp_path / "test.ckpt"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL cluster for the whole run (started on first use, stopped
    by its own pid at the end); tests that stop or crash a server start their own."""
    with PostgresServer() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> str:
    """The URL of a new, empty database on the shared server."""
    return pg_server.create_database("t_" + uuid.uuid4().hex[:16])


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's new database lives: a file, or a database on the shared PostgreSQL
    server -- the same test runs on both engines."""
    if request.param == "sqlite":
        return str(tmp_path / "test.ckpt")
    return str(request.getfixturevalue("pg_url"))


def pg_checkpoint_id(n: int) -> str:
    """The id of the n-th checkpoint row :func:`pg_prepare` writes."""
    return hashlib.sha256(f"checkpoint {n}".encode()).hexdigest()


def pg_create_schema(conn: Any) -> bool:
    """Apply the PostgreSQL engine's core migrations under the schema lock, as a machine
    would; False when the schema was there already."""
    from ckptdb.store import migrations

    with conn.write_transaction():
        conn.lock(migrations.SCHEMA_LOCK)
        return migrations.create_schema(conn, migrations.postgresql_core_set(), 1_000)


def pg_prepare(url: str, checkpoints: int) -> None:
    """The PostgreSQL engine's schema in the database at ``url``, namespace 'ns' (id 1) and
    ``checkpoints`` plain checkpoint rows in it, ids :func:`pg_checkpoint_id`, generations
    1.. (until the checkpoint module is ported: rows that pointers and pins can name)."""
    from ckptdb.connection.postgres import PgConnection

    conn = PgConnection.open(url)
    try:
        pg_create_schema(conn)
        with conn.write_transaction():
            conn.execute("INSERT INTO namespace (name, created_at_ms) VALUES ('ns', 1)")
            conn.executemany(
                "INSERT INTO checkpoint (id, namespace_id, generation, created_at_ms, metadata,"
                " entry_count, total_size, entries) VALUES (?, 1, ?, 1, '{}', 0, 0, '[]')",
                [(pg_checkpoint_id(n), n + 1) for n in range(checkpoints)],
            )
    finally:
        conn.close()


@pytest.fixture
def db(db_path: Path) -> Iterator[ckptdb.Database]:
    """A fresh database, closed after the test."""
    handle = ckptdb.open(db_path)
    try:
        yield handle
    finally:
        handle.close()


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (to prove a file was not modified)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def disk_bytes(path: str | Path) -> bytes:
    """Every byte kept on disk for a database: the file and its WAL (to scan for what must
    never be there, such as the plaintext of an encrypted scope). For a PostgreSQL URL:
    every value of every row of the database's tables, as stored (its pages on the shared
    server hold other tests' databases too)."""
    if str(path).startswith("postgresql:"):
        out = bytearray()
        for row in raw_sql(path, _PG_EVERY_TABLE):
            for (value,) in raw_sql(path, f"SELECT t.*::text FROM {row[0]} t"):
                out += str(value).encode()
            for values in raw_sql(path, f"SELECT * FROM {row[0]}"):
                for v in values:
                    out += v if isinstance(v, bytes) else str(v).encode()
        return bytes(out)
    return b"".join(
        Path(str(path) + suffix).read_bytes()
        for suffix in ("", "-wal")
        if Path(str(path) + suffix).exists()
    )


_PG_EVERY_TABLE = "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"


def all_files_digest(path: Path) -> dict[str, str | None]:
    """Digests of the database file and its -wal/-shm (None when absent)."""
    out: dict[str, str | None] = {}
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(path) + suffix)
        out[suffix or "db"] = file_digest(p) if p.exists() else None
    return out


def child_env() -> dict[str, str]:
    """Environment for child Python processes (the installed ckptdb, these tests' helpers)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests"), env.get("PYTHONPATH", "")])
    return env


def spawn_script(script: Path, *args: str, new_session: bool = False) -> subprocess.Popen[str]:
    """Start ``python SCRIPT ARGS`` as its own process, as a machine would (text pipes;
    ``new_session``: its own process group, so a test can SIGKILL it and its children)."""
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=REPO,
        start_new_session=new_session,
    )


def run_tool(
    name: str, *args: str, tmp: Path, timeout: float = 1200, ok: bool = True
) -> dict[str, object]:
    """Run ``tools/NAME.py ARGS --json FILE`` as its own process (a tool is a program; tests
    never import one) and return the JSON it wrote. ``ok``: its exit status must be 0."""
    out = tmp / f"{name}.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / f"{name}.py"), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        check=False,
    )
    if ok:
        assert proc.returncode == 0, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    assert out.exists(), (proc.returncode, proc.stderr[-3000:])
    result = json.loads(out.read_text())
    assert isinstance(result, dict)
    return result


def raw_sql(
    path: str | Path, sql: str, params: tuple[object, ...] = ()
) -> list[tuple[object, ...]]:
    """Run one statement on the file outside ckptdb's API (to inspect or tamper with it);
    ``path`` may be a PostgreSQL URL too (run through a connection of its own).

    Deliberately through apsw -- the same SQLite library ckptdb uses -- and never through
    Python's sqlite3 while a ckptdb handle is open in this process: two different SQLite
    libraries in one process do not share their POSIX lock bookkeeping, so closing one
    silently drops the other's locks (the classic way to corrupt a WAL database).
    """
    if str(path).startswith("postgresql:"):
        from ckptdb.connection.postgres import PgConnection

        pg = PgConnection.open(str(path))
        try:
            return [tuple(r) for r in pg.execute(sql, params)]
        finally:
            pg.close()
    import apsw

    conn = apsw.Connection(str(path))
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def store_wrong_types(
    path: str | Path,
    table: str,
    values: dict[str, object],
    where: str = "",
    params: tuple[object, ...] = (),
) -> int:
    """Store values of the wrong type in every row of ``table`` (or those ``where`` with
    ``params`` selects), as a flipped serial-type byte of a record would, and return how
    many rows changed. STRICT and column affinity
    act only when a row is written, so the table is declared without them for this one
    UPDATE and its schema is put back afterwards."""
    (original,) = raw_sql(path, "SELECT sql FROM sqlite_schema WHERE name = ?", (table,))[0]
    assert isinstance(original, str)
    loose = re.sub(r"\b(TEXT|BLOB|REAL)\b", "ANY", original)
    loose = re.sub(r"\bINTEGER\b(?! PRIMARY KEY)", "ANY", loose)  # keep rowid aliases
    loose = loose.replace(") STRICT, WITHOUT ROWID", ") WITHOUT ROWID").replace(") STRICT", ")")
    rewrite = "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = ? WHERE name = ?"
    raw_sql(path, rewrite, (loose, table))
    assignments = ", ".join(f"{column} = ?" for column in values)
    changed = raw_sql(
        path,
        "PRAGMA foreign_keys = OFF; PRAGMA ignore_check_constraints = ON;"
        f" UPDATE OR IGNORE {table} SET {assignments} {where}; SELECT changes()",
        (*values.values(), *params),
    )
    raw_sql(path, rewrite, (original, table))
    return int(changed[0][0])  # type: ignore[call-overload]


def engine(path: str | Path) -> Handle:
    """A store-level handle on an existing file, below the public API: for tests that must
    drive an operation's internals (a publish with a crafted plan, a staged blob)."""
    return open_handle(
        os.path.abspath(path),
        readonly=False,
        create=False,
        migrate_mode="auto",
        synchronous="full",
        busy_timeout=5.0,
        chunk_size=None,
        page_size=None,
        vfs=None,
    )


def publish_crafted(
    handle: Handle,
    namespace: str,
    entries: list[tuple[str, Any, str | None, str | None]],
    metadata_json: str = "{}",
    *,
    reason: str = "crafted",
    code_revision: str | None = None,
    base: str | None = None,
) -> ckptdb.CommitAck:
    """Publish, below the public API, a plan no validation saw -- entries given as (name,
    prepared blob, media type, schema pin), in the order given, and metadata as raw text --
    as a hostile writer would: the ids and pointer digests come out right."""
    from ckptdb.canonical import EntryRecord
    from ckptdb.ops.commit import CommitPlan, publish
    from ckptdb.ops.unit import writing

    plan = CommitPlan(
        namespace,
        [name for name, *_ in entries],
        {},
        metadata_json=metadata_json,
        expect_current=ckptdb.UNSET,
        reason=reason,
        base=base,
        on_publish=None,
        progress=None,
        code_revision=code_revision,
    )
    plan.values = None  # prepared here, by hand
    plan.records = [EntryRecord(n, b.digest, b.size, m, s) for n, b, m, s in entries]
    plan.blobs = [b for _, b, _, _ in entries]
    plan.total_size = sum(b.size for b in plan.blobs)
    with writing(handle) as tx:
        return publish(tx, plan)


def prepared_blob(handle: Handle, data: bytes, now_ms: int = 0) -> Any:
    """``data`` hashed (and, when large, staged) as a commit prepares it."""
    from ckptdb.ops.prepare import prepare_value

    return prepare_value(handle.store.blobs, data, [0], now_ms)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove the scratch directories of the replicators the tests killed with SIGKILL (a
    live replicator's, whose owner lock is held, is never touched)."""
    scratch.sweep()
