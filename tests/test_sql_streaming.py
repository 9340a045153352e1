"""Issue 23, family 6a: ``ckptdb sql`` streams values, not only rows.

One 64 MB BLOB used to cost ~1 GB (its hex text copied eight to sixteen times: the cell,
the padded table line, the JSON object, the CSV row, click's encoding), and a 160 MB value
under a 1.6 GB address-space cap died with MemoryError. JSON and CSV now encode a large
value piece by piece; the table shows at most ``TABLE_CELL_CHARS`` of it and says how to
get the rest. Tests: the peak memory of real ``ckptdb sql`` processes printing a 32 MiB
BLOB, and property tests that the streamed JSON and CSV are exactly what a whole-value
encoder writes (JSON) or reads back exactly (CSV), with pieces down to one character.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb.cli import main

SCRIPT = str(Path(sys.executable).parent / "ckptdb")
VALUE = 32 * 1024 * 1024
#: Runs the command as a child and prints the child's peak RSS (KiB) on stderr.
PEAK = (
    "import resource, subprocess, sys\n"
    "with open(sys.argv[1], 'wb') as out:\n"
    "    code = subprocess.run(sys.argv[2:], stdout=out, check=False).returncode\n"
    "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
)


def _peak_kib(out: Path, *argv: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", PEAK, str(out), SCRIPT, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    code, peak = proc.stderr.split()[-2:]
    assert code == "0", proc.stderr
    return int(peak)


@pytest.fixture(scope="module")
def empty_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "s.ckpt"
    ckptdb.open(path).close()
    return path


@pytest.fixture(scope="module")
def baseline(empty_db: Path) -> int:
    """The peak of a `ckptdb sql` process printing one small value."""
    return _peak_kib(empty_db.parent / "small", "sql", str(empty_db), "SELECT x'00' AS b")


@pytest.mark.parametrize("fmt", ["table", "--json", "--csv"])
def test_printing_a_large_value_costs_about_the_value(
    empty_db: Path, baseline: int, tmp_path: Path, fmt: str
) -> None:
    extra = [] if fmt == "table" else [fmt]
    out = tmp_path / "out"
    peak = _peak_kib(out, "sql", str(empty_db), f"SELECT randomblob({VALUE}) AS b", *extra)
    # The BLOB is held twice (SQLite's value, Python's bytes); before: 8x (table, JSON) to
    # 16x (CSV) of it. Allow 4x.
    assert (peak - baseline) * 1024 < 4 * VALUE, (baseline, peak)
    text = out.read_text()
    if fmt == "--json":
        (row,) = json.loads(text)
        assert len(row["b"]["hex"]) == 2 * VALUE
    elif fmt == "--csv":
        header, value, end = text.split("\n")
        assert header == "b" and len(value) == 2 * VALUE + 3 and end == ""
    else:
        assert max(len(line) for line in text.splitlines()) <= 1000


def _capture(fn: Any, *args: Any) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        fn(*args)
    return buffer.getvalue()


CELLS = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),
    st.text(max_size=30),
    st.text(alphabet=',"\r\n\x1b\x9b\u2028 a', max_size=30),
    st.binary(max_size=20),
)


@st.composite
def results(draw: st.DrawFn) -> tuple[list[str], list[list[Any]]]:
    width = draw(st.integers(1, 4))
    columns = draw(st.lists(st.text(min_size=1, max_size=5), min_size=width, max_size=width))
    rows = draw(st.lists(st.lists(CELLS, min_size=width, max_size=width), min_size=1, max_size=4))
    return columns, rows


def _json_cell(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


@settings(max_examples=200, deadline=None)
@given(result=results(), piece=st.integers(1, 8))
def test_streamed_json_is_the_whole_document(
    result: tuple[list[str], list[list[Any]]], piece: int
) -> None:
    from ckptdb.cli import output, sql_output
    from ckptdb.ops.query import QueryStream, json_keys

    columns, rows = result
    out = sql_output._Output(as_json=True)
    text = _capture(sql_output._json_rows, out, QueryStream(columns, iter(rows)), piece)
    keys = json_keys(columns)
    expected = [{k: _json_cell(v) for k, v in zip(keys, row, strict=True)} for row in rows]
    assert text == output.json_text(expected, 2, allow_nan=False) + "\n"
    assert json.loads(text) == expected


@settings(max_examples=200, deadline=None)
@given(result=results(), piece=st.integers(1, 8))
def test_streamed_csv_reads_back_exactly(
    result: tuple[list[str], list[list[Any]]], piece: int
) -> None:
    from ckptdb.cli import sql_output
    from ckptdb.ops.query import QueryStream

    columns, rows = result
    out = sql_output._Output(as_json=False)
    text = _capture(sql_output._csv_rows, out, QueryStream(columns, iter(rows)), piece)
    whole = _capture(sql_output._csv_rows, out, QueryStream(columns, iter(rows)))
    assert text == whole  # pieces or not, the same bytes

    def shown(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, bytes):
            return "x'" + value.hex() + "'"
        return repr(value) if isinstance(value, float) else str(value)

    read = list(csv.reader(io.StringIO(text, newline="")))
    assert read == [columns] + [[shown(v) for v in row] for row in rows]


def test_table_cuts_a_long_value_and_says_how_to_get_it(empty_db: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["sql", str(empty_db), "SELECT randomblob(100000) AS b, 'short' AS s"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0
    assert max(len(line) for line in result.stdout.splitlines()) < 1100
    assert "…" in result.stdout and "short" in result.stdout
    assert "--json or --csv" in result.stderr and "ckptdb cat" in result.stderr


def test_memory_limit_is_not_hit_under_an_address_space_cap(empty_db: Path, tmp_path: Path) -> None:
    """The issue's case, scaled: a 96 MiB value under a 1.2 GiB address-space cap."""
    limit = 1200 * 1024 * 1024

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with open(tmp_path / "out", "wb") as out:
        proc = subprocess.run(
            [SCRIPT, "sql", str(empty_db), f"SELECT randomblob({96 << 20}) AS b", "--csv"],
            stdout=out,
            stderr=subprocess.PIPE,
            preexec_fn=cap,
            timeout=300,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "out").stat().st_size == 2 + 2 * (96 << 20) + 4
