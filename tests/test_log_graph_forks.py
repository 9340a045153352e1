"""Issue 23, family 6b: ``ckptdb log --graph --all`` stays linear in the number of forks.

LangGraph retries from one state make many sibling checkpoints of one parent; each held a
lane of the drawing until their common parent, so 6,000 forks printed 72 MB (every line as
wide as the number of forks). Lanes past ``graph.MAX_LANES`` now share one column with a
count. Tests: a real file with thousands of forks (its output grows linearly and every line
is short), and a property test of the pure layout against the drawing it replaces: the
same as before wherever that fit in the lanes, and bounded with the right counts where it
did not.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb.cli import main

#: A line of `log --graph` for people: the drawing (at most 2 * 16 lanes and a count) and
#: the node's id, generation, time, counts, markers and a metadata summary of <= 40 chars.
MAX_LINE = 200


def _forks(path: Path, n: int) -> float:
    """A namespace whose CURRENT lineage is short and whose root has ``n`` retries (forks
    of one base, as LangGraph makes them); returns the seconds it took to build."""
    started = time.monotonic()
    with ckptdb.open(path, synchronous="off") as db:
        base = db.commit("run", {"s": b"0"}).checkpoint_id
        for i in range(n):
            db.commit("run", {"s": b"1"}, metadata={"retry": i}, base=base)
    return time.monotonic() - started


def _log(path: Path, *extra: str) -> str:
    result = CliRunner().invoke(
        main, ["log", str(path), "run", "--graph", "--all", *extra], catch_exceptions=False
    )
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_log_graph_of_thousands_of_forks_is_linear(tmp_path: Path) -> None:
    sizes = {}
    for n in (1000, 2000):
        path = tmp_path / f"forks{n}.ckpt"
        built = _forks(path, n)
        assert built < 60, built  # ~1 s per 2,000 forks here
        out = _log(path)
        lines = out.splitlines()
        assert len(lines) == n + 3  # header, n + 1 checkpoints, one connector
        assert max(len(line) for line in lines) <= MAX_LINE
        sizes[n] = len(out)
        nodes = json.loads(_log(path, "--json"))
        assert max(len(line) for node in nodes for line in node["graph"]) <= 2 * 16 + 8
        assert sorted(node["column"] for node in nodes)[-1] == n - 1  # true lanes kept
    # Twice the forks, about twice the output (it was four times: quadratic).
    assert sizes[2000] / sizes[1000] < 2.2, sizes


def reference_layout(nodes: list[tuple[str, str | None]]) -> list[tuple[int, list[str]]]:
    """The drawing before issue 23 (every lane drawn), kept here as the oracle."""
    present = {n for n, _ in nodes}
    lanes: list[str | None] = []
    out: list[tuple[int, list[str]]] = []
    for node, parent in nodes:
        waiting = [i for i, want in enumerate(lanes) if want == node]
        lines: list[str] = []
        if waiting:
            col = waiting[0]
            joining = waiting[1:]
            if joining:
                row = [" "] * (2 * len(lanes))
                for i, want in enumerate(lanes):
                    if want is not None and i not in joining:
                        row[2 * i] = "|"
                for j in joining:
                    row[2 * j - 1] = "/"
                    lanes[j] = None
                lines.append("".join(row).rstrip())
        else:
            free = [i for i, want in enumerate(lanes) if want is None]
            col = free[0] if free else len(lanes)
            if col == len(lanes):
                lanes.append(None)
        row = [" "] * (2 * len(lanes))
        for i, want in enumerate(lanes):
            if i == col:
                row[2 * i] = "*"
            elif want is not None:
                row[2 * i] = "|"
        lines.append("".join(row).rstrip())
        lanes[col] = parent if parent in present else None
        while lanes and lanes[-1] is None:
            lanes.pop()
        out.append((col, lines))
    return out


@st.composite
def forests(draw: st.DrawFn) -> list[tuple[str, str | None]]:
    """Nodes newest first, each with a parent among the older ones, none, or one that is
    not listed (GC removed it); fork-heavy: parents are drawn from a few."""
    n = draw(st.integers(1, 60))
    hubs = draw(st.integers(1, 6))
    nodes: list[tuple[str, str | None]] = []
    for i in range(n):
        older = list(range(i + 1, n))
        choice = draw(st.integers(0, 9))
        if not older or choice == 0:
            parent = None if choice % 2 == 0 else f"gone{i}"
        elif choice < 6:
            parent = f"n{older[min(draw(st.integers(0, hubs)), len(older) - 1)]}"
        else:
            parent = f"n{draw(st.sampled_from(older))}"
        nodes.append((f"n{i}", parent))
    return nodes


@settings(max_examples=300, deadline=None)
@given(nodes=forests())
def test_layout_without_collapsing_is_the_drawing_it_replaces(
    nodes: list[tuple[str, str | None]],
) -> None:
    from ckptdb.ops.graph import layout

    assert layout(nodes, max_lanes=10**6) == reference_layout(nodes)


def _symbols(line: str, start: int) -> list[str]:
    return [c for c in line[start::2] if c != " "]


@settings(max_examples=300, deadline=None)
@given(nodes=forests(), max_lanes=st.integers(1, 6))
def test_collapsed_lanes_keep_the_counts_and_bound_each_line(
    nodes: list[tuple[str, str | None]], max_lanes: int
) -> None:
    from ckptdb.ops.graph import layout

    cut = 2 * max_lanes
    for (col, lines), (ref_col, ref_lines) in zip(
        layout(nodes, max_lanes=max_lanes), reference_layout(nodes), strict=True
    ):
        assert col == ref_col  # the true lane is reported
        assert len(lines) == len(ref_lines)
        for line, ref in zip(lines, ref_lines, strict=True):
            assert len(line) <= cut + 2 + len(str(len(nodes)))
            # The drawn lanes are drawn as before (the spacer before the collapsed column
            # may hold a '/': collapsed lanes merging to the left).
            assert line[: cut - 1] == ref[: cut - 1]
        line, ref = lines[-1], ref_lines[-1]
        beyond = _symbols(ref, cut)  # the lanes the collapsed column stands for
        tail = line[cut:]
        if not beyond:
            assert tail == ""
        else:
            symbol = "*" if "*" in beyond else "|"
            assert tail == symbol + (f"+{len(beyond) - 1}" if len(beyond) > 1 else "")
            assert line.count("*") == 1
