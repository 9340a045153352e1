"""Issue 12 section 5: ``ckptdb sql`` / ``Database.query``.

One statement only (typed refusal otherwise), columns kept in order even when names repeat,
valid JSON always, a timeout and Ctrl-C that interrupt cleanly, rows streamed (bounded
memory), named parameters. Many variants of each class, through the API and the CLI.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import file_digest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors
from ckptdb.cli import main
from ckptdb.ops.query import json_keys

SCRIPT = str(Path(sys.executable).parent / "ckptdb")
RUNAWAY = [
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT max(x) FROM r",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x FROM r) SELECT x FROM r ORDER BY x",
    "WITH RECURSIVE a(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM a WHERE x < 100000)"
    " SELECT count(*) FROM a, a AS b, a AS c",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)"
    " SELECT count(*) FROM r WHERE x IN (SELECT name FROM namespace)",
]


def settings_for(n: int) -> Any:
    return settings(
        max_examples=int(os.environ.get("CKPTDB_FUZZ_EXAMPLES", str(n))),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@pytest.fixture(scope="module")
def qdb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ckptdb.Database, Path]]:
    path = tmp_path_factory.mktemp("query") / "q.ckpt"
    db = ckptdb.open(path)
    db.commit("brain", {"a.txt": b"alpha", "b.bin": bytes(range(256))})
    db.commit("brain", {"a.txt": b"alpha 2"})
    db.commit("other", {"x": b"x"})
    try:
        yield db, path
    finally:
        db.close()


def cli(*args: str, code: int | None = 0) -> Any:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    if code is not None:
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


def strict_json(text: str) -> Any:
    """Parse as strict JSON: NaN/Infinity are refused (they are not JSON)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


# -- one statement --------------------------------------------------------------------------

READS = [
    "SELECT 1",
    "SELECT 'a;b' AS s",
    "SELECT name FROM namespace",
    "PRAGMA user_version",
    "WITH t(x) AS (SELECT 2) SELECT x FROM t",
    "SELECT count(*) FROM checkpoints",
    "VALUES (1), (2)",
    "SELECT ';' || '--' AS s",
]
WRITES = [
    "DELETE FROM checkpoint",
    "INSERT INTO setting VALUES ('k', 'v')",
    "UPDATE namespace SET name = 'x'",
    "DROP TABLE receipt",
    "CREATE TABLE t (x)",
    "PRAGMA user_version = 9",
    "ATTACH DATABASE ':memory:' AS other",
    "VACUUM",
    "BEGIN IMMEDIATE",
]
SEPARATORS = [";", "; ", ";\n", "; -- note\n", " ; /* c */ ", ";;", ";\n;\n"]
TRAILERS = ["", ";", " ", "\n-- trailing comment", "; /* done */", ";;  ", "\n"]


@settings_for(150)
@given(
    statements=st.lists(st.sampled_from(READS + WRITES), min_size=1, max_size=4),
    separators=st.lists(st.sampled_from(SEPARATORS), min_size=3, max_size=3),
    leading=st.sampled_from(["", "  ", "-- lead\n", "/* x */ ", "\n;"]),
    trailer=st.sampled_from(TRAILERS),
)
def test_only_one_statement_ever_runs(
    qdb: tuple[ckptdb.Database, Path],
    statements: list[str],
    separators: list[str],
    leading: str,
    trailer: str,
) -> None:
    db, path = qdb
    text = leading + statements[0]
    for sep, stmt in zip(separators, statements[1:], strict=False):
        text += sep + stmt
    text += trailer
    before = file_digest(path)
    # The text is prepared statement by statement: a write is refused (while prepared,
    # or when it would start), a second statement refuses the whole text; either way
    # nothing runs.
    if len(statements) == 1 and statements[0] in READS:
        result = db.query(text)
        assert result.columns and result.rows is not None
    else:
        with pytest.raises(errors.CkptdbError) as caught:
            db.query(text)
        allowed = {"read_only"} if len(statements) == 1 else {"read_only", "multiple_statements"}
        if statements[0] in READS and len(statements) > 1 and statements[1] in READS:
            allowed = {"multiple_statements"}
        assert caught.value.code in allowed, (text, caught.value.to_dict())
    assert file_digest(path) == before


@pytest.mark.parametrize("text", ["", "   ", "-- only a comment", "/* x */", ";", ";;\n;"])
def test_no_statement_is_a_typed_refusal(qdb: tuple[ckptdb.Database, Path], text: str) -> None:
    db, _ = qdb
    with pytest.raises(errors.InvalidQueryError):
        db.query(text)


def test_cli_refuses_several_statements_and_json_is_one_document(
    qdb: tuple[ckptdb.Database, Path],
) -> None:
    _, path = qdb
    result = cli("sql", str(path), "SELECT 1 AS a; SELECT 2 AS b", "--json", code=7)
    assert strict_json(result.stdout)["code"] == "multiple_statements"
    assert cli("sql", str(path), "SELECT 1; DELETE FROM checkpoint", code=9)


# -- columns, JSON --------------------------------------------------------------------------

column_names = st.lists(st.sampled_from(["x", "y", "x:2", "count(*)", "é", "a b", ""]), min_size=1)


@settings_for(100)
@given(names=column_names.filter(lambda n: len(n) <= 8))
def test_repeated_column_names_are_kept_in_order(
    qdb: tuple[ckptdb.Database, Path], names: list[str]
) -> None:
    db, path = qdb
    select = ", ".join(f'{i} AS "{n}"' for i, n in enumerate(names))
    result = db.query(f"SELECT {select}")
    assert result.columns == names
    assert result.rows == [list(range(len(names)))]
    keys = json_keys(names)
    assert len(set(keys)) == len(names)
    out = strict_json(cli("sql", str(path), f"SELECT {select}", "--json").stdout)
    assert list(out[0]) == keys and list(out[0].values()) == list(range(len(names)))
    csv_header = cli("sql", str(path), f"SELECT {select}", "--csv").stdout.splitlines()[0]
    assert csv_header.count(",") == len(names) - 1


NON_FINITE = ["1e999", "-1e999", "9e308 * 10", "-(1e308 * 1e308)", "1e999 - 1e999"]


@settings_for(80)
@given(
    cells=st.lists(
        st.one_of(
            st.sampled_from(NON_FINITE),
            st.floats(allow_nan=False, allow_infinity=False).map(repr),
            st.integers(-(2**63), 2**63 - 1).map(str),
            st.text(max_size=5).map(lambda s: "'" + s.replace("'", "''") + "'"),
            st.binary(max_size=4).map(lambda b: f"x'{b.hex()}'"),
            st.just("NULL"),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_json_output_is_always_valid_json(
    qdb: tuple[ckptdb.Database, Path], cells: list[str]
) -> None:
    _, path = qdb
    query = "SELECT " + ", ".join(f"{c} AS c{i}" for i, c in enumerate(cells))
    if any("\x00" in c for c in cells):
        return
    result = cli("sql", str(path), query, "--json", code=None)
    assert result.exit_code in (0, 7), result.stderr
    parsed = strict_json(result.stdout)
    if result.exit_code == 0:
        row = parsed[0]
        for i, cell in enumerate(cells):
            value = row[f"c{i}"]
            if cell in NON_FINITE:
                assert value in ("Infinity", "-Infinity", "NaN", None)
            assert not (isinstance(value, float) and not math.isfinite(value))


def test_non_finite_floats_are_documented_strings(qdb: tuple[ckptdb.Database, Path]) -> None:
    _, path = qdb
    out = strict_json(
        cli("sql", str(path), "SELECT 1e999 AS p, -1e999 AS n, 1.5 AS f", "--json").stdout
    )
    assert out == [{"p": "Infinity", "n": "-Infinity", "f": 1.5}]


# -- parameters -----------------------------------------------------------------------------


@settings_for(100)
@given(
    values=st.dictionaries(
        st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
        st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=20),
        min_size=1,
        max_size=4,
    )
)
def test_named_parameters_are_bound_never_spliced(
    qdb: tuple[ckptdb.Database, Path], values: dict[str, str]
) -> None:
    db, path = qdb
    select = ", ".join(f':{n} AS "{n}"' for n in values)  # quoted: a name may be a keyword
    assert db.query(f"SELECT {select}", values).rows == [list(values.values())]
    args = [a for n, v in values.items() for a in ("--param", f"{n}={v}")]
    out = strict_json(cli("sql", str(path), f"SELECT {select}", *args, "--json").stdout)
    assert out == [values]


@pytest.mark.parametrize(
    ("query", "params", "code"),
    [
        ("SELECT :a", {}, "invalid_query_parameter"),
        ("SELECT :a", {"b": 1}, "invalid_query_parameter"),
        ("SELECT :a", {"a": 1, "b": 2}, "invalid_query_parameter"),
        ("SELECT ?", {"a": 1}, "invalid_query_parameter"),
        ("SELECT ?, ?", (1,), "invalid_query_parameter"),
        ("SELECT :a", {"a": object()}, "invalid_query_parameter"),
        ("SELECT :a", {"a": 2**64}, "invalid_query_parameter"),
        ("SELECT 1", {"a": 1}, "invalid_query_parameter"),
        ("SELECT 1", "abc", "invalid_query_parameter"),
    ],
)
def test_parameter_mismatches_are_typed(
    qdb: tuple[ckptdb.Database, Path], query: str, params: Any, code: str
) -> None:
    db, _ = qdb
    with pytest.raises(errors.CkptdbError) as caught:
        db.query(query, params)
    assert caught.value.code == code


def test_cli_param_errors(qdb: tuple[ckptdb.Database, Path]) -> None:
    _, path = qdb
    assert cli("sql", str(path), "SELECT :a", code=7).stderr.startswith(
        "error: invalid_query_parameter: "
    )
    cli("sql", str(path), "SELECT :a", "--param", "novalue", code=2)
    cli("sql", str(path), "SELECT :a", "--param", "a=1", "--param", "a=2", code=2)
    out = cli("sql", str(path), "SELECT :a AS a", "--param", ":a=x=y", "--json").stdout
    assert strict_json(out) == [{"a": "x=y"}]


# -- time limits and Ctrl-C ------------------------------------------------------------------


@pytest.mark.parametrize("query", RUNAWAY)
def test_a_runaway_query_is_interrupted_by_its_timeout(
    qdb: tuple[ckptdb.Database, Path], query: str
) -> None:
    db, path = qdb
    start = time.monotonic()
    with pytest.raises(errors.QueryTimeoutError):
        db.query(query, timeout=0.2)
    assert time.monotonic() - start < 3
    # The handle is fine afterwards, and nothing was left running or changed.
    assert db.query("SELECT count(*) FROM namespace").rows == [[2]]
    result = cli("sql", str(path), query, "--timeout", "0.2", "--json", code=12)
    assert strict_json(result.stdout)["code"] == "query_timeout"


def test_timeout_counts_sqlite_time_not_the_callers(qdb: tuple[ckptdb.Database, Path]) -> None:
    db, _ = qdb
    with db.query_stream("SELECT 1 UNION ALL SELECT 2", timeout=0.2) as result:
        rows = []
        for row in result.rows:
            time.sleep(0.3)  # slow consumer: not the query's fault
            rows.append(row)
    assert rows == [(1,), (2,)]


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "1", True])
def test_bad_timeouts_are_typed(qdb: tuple[ckptdb.Database, Path], timeout: Any) -> None:
    db, _ = qdb
    with pytest.raises(errors.InvalidInputError):
        db.query("SELECT 1", timeout=timeout)


def test_streamed_json_stays_valid_when_the_timeout_hits_midway(
    qdb: tuple[ckptdb.Database, Path],
) -> None:
    _, path = qdb
    query = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r"
    result = cli("sql", str(path), query, "--timeout", "0.1", "--json", code=12)
    rows = strict_json(result.stdout)
    assert rows and rows[0] == {"x": 1}
    assert "query_timeout" in result.stderr and "incomplete" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("fmt", [[], ["--json"], ["--csv"]])
def test_ctrl_c_interrupts_a_runaway_query_cleanly(
    qdb: tuple[ckptdb.Database, Path], fmt: list[str]
) -> None:
    _, path = qdb
    before = file_digest(path)
    # A suite started in the background (`cmd &`) runs with SIGINT ignored, which a child
    # inherits and keeps; one this process handles starts with the default, as under a
    # terminal.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [SCRIPT, "sql", str(path), RUNAWAY[0], "--timeout", "0", *fmt],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    # Long enough for the interpreter to import ckptdb and start the query even on a
    # loaded 2-core machine (~1 s of imports there); the query itself never ends.
    time.sleep(3.0)
    assert proc.poll() is None, proc.communicate()
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert time.monotonic() - start < 5
    assert proc.returncode == 130, (out, err)
    if fmt == ["--json"]:
        assert strict_json(out)["code"] == "query_interrupted"
    else:
        assert err.startswith("error: query_interrupted: "), err
    assert "Traceback" not in err
    assert file_digest(path) == before


# -- streaming ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("fmt", [["--json"], ["--csv"], []])
def test_rows_are_streamed_with_bounded_memory(tmp_path: Path, fmt: list[str]) -> None:
    """250,000 rows of ~200 bytes (~50 MB if collected, several times that as Python
    objects): the CLI's peak RSS stays far below it, and output starts at once."""
    path = tmp_path / "s.ckpt"
    ckptdb.open(path).close()
    query = (
        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 250000)"
        " SELECT x, printf('%0200d', x) AS pad FROM r"
    )
    probe = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, SCRIPT, "sql", str(path), query, *fmt],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    code, max_rss_kib = map(int, done.stdout.split())
    assert code == 0, done.stderr
    assert max_rss_kib < 80 * 1024, f"peak RSS {max_rss_kib} KiB: rows were buffered"
