"""Operator queries on PostgreSQL (``Database.query``, ``query_stream``, ``ckptdb sql``):
the same views give the same rows as on SQLite, one read-only statement or a typed refusal
with nothing run, parameters bound, a time limit, rows streamed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import child_env

import ckptdb
from ckptdb import errors

SCRIPT = str(Path(sys.executable).parent / "ckptdb")


def _fill(db: ckptdb.Database) -> None:
    """The same acts on either engine (a fixed clock: the same ids and times)."""
    first = db.commit("job/a", {"x": b"1"}, metadata={"step": 1, "tag": "start"})
    db.commit("job/a", {"x": b"2", "y": b"big" * 1000}, metadata={"step": 2})
    db.commit("job/b", {"x": b"1"})
    db.set_current("job/a", first.checkpoint_id)
    db.pin(first.checkpoint_id, "keep")


def _clock() -> Any:
    now = [1_760_000_000_000]

    def read() -> int:
        now[0] += 1000
        return now[0]

    return read


#: Queries over the public views, with their parameters; each gives the same rows on both
#: engines (integers for the booleans, ISO text for the times, as SQLite gives them).
PORTABLE = [
    ("SELECT checkpoint_id, namespace, parent_id, generation, created_at, entry_count,"
     " total_size, metadata, is_current, is_fallback FROM checkpoints"
     " ORDER BY namespace, generation", None),
    ("SELECT namespace, depth, checkpoint_id, generation FROM lineage WHERE namespace = :ns"
     " ORDER BY depth", {"ns": "job/a"}),
    ("SELECT namespace, revision, current_id, fallback_id, reason, at FROM pointer_log"
     " ORDER BY namespace, revision", None),
    ("SELECT name, checkpoint_id, namespace, generation FROM pins", None),
    ("SELECT count(*) AS n, sum(total_size) AS bytes, max(generation) AS g FROM checkpoints"
     " WHERE namespace = ?", ["job/a"]),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "params"), PORTABLE)
def test_the_views_answer_as_on_sqlite(pg_url: str, tmp_path: Path, sql: str, params: Any) -> None:
    answers = []
    for where in (str(tmp_path / "q.ckpt"), pg_url):
        with ckptdb.open(where, clock=_clock()) as db:
            _fill(db)
            answers.append(db.query(sql, params))
    sqlite, postgresql = answers
    assert postgresql.columns == sqlite.columns
    assert postgresql.rows == sqlite.rows and postgresql.rows


@pytest.fixture
def pgdb(pg_url: str) -> Any:
    with ckptdb.open(pg_url, clock=_clock()) as db:
        _fill(db)
        yield db


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT 1; SELECT 2", errors.MultipleStatementsError),
        ("SELECT 1; DELETE FROM pin", errors.MultipleStatementsError),
        ("DELETE FROM pin", errors.ReadOnlyError),
        ("UPDATE pointer SET revision = 0", errors.ReadOnlyError),
        ("WITH gone AS (DELETE FROM pin RETURNING 1) SELECT * FROM gone", errors.ReadOnlyError),
        ("SELECT nextval('pg_catalog.nothing')", errors.InvalidQueryError),
        ("SELEC 1", errors.InvalidQueryError),
        ("SELECT * FROM no_such_table", errors.InvalidQueryError),
        ("   -- only a comment", errors.InvalidQueryError),
        ("", errors.InvalidQueryError),
        ("SET statement_timeout = 0", errors.ReadOnlyError),
    ],
)
def test_what_is_not_one_read_only_statement_is_refused_and_nothing_runs(
    pgdb: ckptdb.Database, sql: str, error: type[Exception]
) -> None:
    before = (pgdb.pins(), [m.revision for m in pgdb.history("job/a")])
    with pytest.raises(error):
        pgdb.query(sql)
    assert (pgdb.pins(), [m.revision for m in pgdb.history("job/a")]) == before
    assert pgdb.query("SELECT count(*) FROM pins").rows == [[1]]  # the handle still works


def test_parameters_are_bound_and_checked(pgdb: ckptdb.Database) -> None:
    found = pgdb.query(
        "SELECT generation FROM checkpoints WHERE namespace = :ns AND generation >= :g",
        {":ns": "job/a", "g": 2},
    )
    assert found.rows == [[2]]
    assert pgdb.query("SELECT ?1 || ?1 || ?2", ["a", "b"]).rows == [["aab"]]
    assert pgdb.query("SELECT count(*) FROM checkpoints WHERE is_current = ?", [True]).rows == [[2]]
    injected = "job/a' OR '1'='1"
    assert pgdb.query("SELECT count(*) FROM checkpoints WHERE namespace = ?", [injected]).rows == [
        [0]
    ]
    for sql, params in [
        ("SELECT :a", {}),
        ("SELECT :a", {"a": 1, "b": 2}),
        ("SELECT ?", [1, 2]),
        ("SELECT :a", [1]),
        ("SELECT ?", [object()]),
    ]:
        with pytest.raises(errors.QueryParameterError):
            pgdb.query(sql, params)


def test_a_runaway_query_is_interrupted_by_its_timeout(pgdb: ckptdb.Database) -> None:
    with pytest.raises(errors.QueryTimeoutError) as exc:
        pgdb.query("SELECT pg_sleep(5)", timeout=0.3)
    assert exc.value.code == "query_timeout"
    assert pgdb.query("SELECT 1", timeout=0.3).rows == [[1]]


def test_rows_are_streamed(pgdb: ckptdb.Database) -> None:
    with pgdb.query_stream("SELECT g, g * 2 AS twice FROM generate_series(1, 5000) g") as qs:
        assert qs.columns == ["g", "twice"]
        total = sum(row[1] for row in qs.rows)
    assert total == 5000 * 5001


def test_values_come_back_as_on_sqlite(pgdb: ckptdb.Database) -> None:
    row = pgdb.query(
        "SELECT true, 2.5::numeric, 10::numeric, '\\x00ff'::bytea, '{\"a\": [1]}'::jsonb,"
        " DATE '2026-12-06', 'Infinity'::float8"
    ).rows[0]
    assert row == [1, 2.5, 10, b"\x00\xff", '{"a":[1]}', "2026-12-06", float("inf")]


def test_the_cli_runs_sql_on_a_url(pgdb: ckptdb.Database, pg_url: str) -> None:
    secret = pg_url.replace("postgresql://postgres@", "postgresql://postgres:pw-s3cret@", 1)
    done = subprocess.run(
        [SCRIPT, "sql", secret, "SELECT name, namespace FROM pins", "--json"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"name": "keep", "namespace": "job/a"}]
    refused = subprocess.run(
        [SCRIPT, "sql", secret, "DELETE FROM pin"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0 and "read-only" in refused.stderr
    assert "pw-s3cret" not in done.stdout + done.stderr + refused.stdout + refused.stderr
