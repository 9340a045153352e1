"""schema/README.md documents every table and view, and every example query in it runs
-- through Python's own sqlite3 (the system's older SQLite), as operators will run them."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest
from conftest import REPO, raw_sql

import ckptdb

README = (REPO / "schema" / "README.md").read_text()
QUERIES = re.findall(r"```sql\n(.*?)```", README, flags=re.S)


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("docs") / "docs.ckpt"
    with ckptdb.open(path, chunk_size=64 * 1024) as db:
        shared = os.urandom(200_000)
        for turn in range(1, 5):
            db.commit(
                "brain",
                {"shared.bin": shared, "state.json": f'{{"t": {turn}}}'},
                metadata={"turn_count": turn},
            )
        db.commit("other", {"copy.bin": shared})
        db.pin("brain~2", "release")
        digest = db.current("brain").entries["shared.bin"].digest  # type: ignore[union-attr]
        db.gc(ckptdb.RetentionPolicy(keep_last=3), grace=0)
        state = db.current("brain").entries["state.json"].digest  # type: ignore[union-attr]
    raw_sql(path, "UPDATE blob SET inline_data = x'00' WHERE digest = ?", (state,))
    with ckptdb.open(path) as db:
        db.load("brain", fallback=True)
    return path, digest


def test_every_table_and_view_is_documented(populated: tuple[Path, str]) -> None:
    path, _ = populated
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
            " AND name NOT LIKE 'sqlite_%'"
        )
    ]
    conn.close()
    missing = [n for n in names if f"`{n}`" not in README]
    assert not missing, f"document these in schema/README.md: {missing}"


@pytest.mark.parametrize("query", QUERIES, ids=[f"q{i}" for i in range(len(QUERIES))])
def test_example_query_runs(populated: tuple[Path, str], query: str) -> None:
    path, digest = populated
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        params = {"namespace": "brain", "digest": digest}
        used = {k: v for k, v in params.items() if f":{k}" in query}
        rows = conn.execute(query, used).fetchall()
    finally:
        conn.close()
    assert rows, "an example query should show something on a populated database"


def test_there_are_example_queries() -> None:
    assert len(QUERIES) >= 8


@pytest.mark.parametrize("query", QUERIES, ids=[f"q{i}" for i in range(len(QUERIES))])
def test_example_query_runs_as_written_with_ckptdb_sql(
    populated: tuple[Path, str], query: str
) -> None:
    """Issue 12: the examples run through `ckptdb sql` exactly as written, their `:name`
    parameters given with --param, and print valid JSON."""
    from click.testing import CliRunner

    from ckptdb.cli import main

    path, digest = populated
    params = {"namespace": "brain", "digest": digest}
    args = [a for k, v in params.items() if f":{k}" in query for a in ("--param", f"{k}={v}")]
    result = CliRunner().invoke(main, ["sql", str(path), query, *args, "--json"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert json.loads(result.stdout), "an example query should show something"
    # Without its parameters, a query that has some is refused (typed), never run with NULL.
    if args:
        bare = CliRunner().invoke(main, ["sql", str(path), query])
        assert bare.exit_code == 7 and "invalid_query_parameter" in bare.stderr
