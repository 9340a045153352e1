"""``ckptdb import-from langgraph-sqlite``: a real SqliteSaver database (built by LangGraph
graphs on langgraph-checkpoint-sqlite) moves into ckptdb with every checkpoint, namespace,
parent link and write; a second run imports nothing; bad sources change nothing."""

from __future__ import annotations

import json
import operator
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from click.testing import CliRunner
from conftest import all_files_digest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

import ckptdb
from ckptdb.cli import main as cli
from ckptdb.integrations.langgraph import CkptdbSaver, NotLangGraphSqliteError
from ckptdb.integrations.langgraph._core import HAS_TABLES_SQL
from ckptdb.integrations.langgraph.importer import import_langgraph_sqlite


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    answer: str


def _ask(state: State) -> dict[str, Any]:
    answer = interrupt("ok?")
    return {"answer": answer, "items": [f"answer:{answer}"]}


def build(saver: Any) -> Any:
    inner = StateGraph(State)
    inner.add_node("inner_step", lambda s: {"items": ["inner"]})
    inner.add_edge(START, "inner_step")
    inner.add_edge("inner_step", END)
    g = StateGraph(State)
    g.add_node("first", lambda s: {"items": ["first:" + "x" * 2000]})
    g.add_node("sub", inner.compile())
    g.add_node("ask", _ask)
    g.add_node("last", lambda s: {"items": ["last"]})
    g.add_edge(START, "first")
    g.add_edge("first", "sub")
    g.add_edge("sub", "ask")
    g.add_edge("ask", "last")
    g.add_edge("last", END)
    return g.compile(checkpointer=saver)


def conf(thread: str, ns: str | None = None) -> Any:
    c: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        c["checkpoint_ns"] = ns
    return {"configurable": c}


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Path]:
    """A SqliteSaver file: finished, interrupted and forked threads, with subgraphs."""
    path = tmp_path / "langgraph.sqlite"
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        graph = build(SqliteSaver(conn))
        graph.invoke({"items": ["a"]}, conf("done", None) | {"recursion_limit": 50})
        graph.invoke(Command(resume="yes"), conf("done"))
        graph.invoke({"items": ["b"]}, conf("waiting"))  # stops at the interrupt
        graph.invoke({"items": ["c"]}, conf("forked"))
        graph.invoke(Command(resume="no"), conf("forked"))
        old = next(s for s in graph.get_state_history(conf("forked")) if s.next == ("ask",))
        graph.update_state(old.config, {"answer": "edited"}, as_node="ask")
        graph.invoke({"items": ["d"]}, conf("other"))
        graph.invoke(Command(resume="sure"), conf("other"))
        conn.commit()
    yield path


def sqlite_tuples(path: Path) -> dict[tuple[str, str, str], Any]:
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        return {
            (
                t.config["configurable"]["thread_id"],
                t.config["configurable"]["checkpoint_ns"],
                t.config["configurable"]["checkpoint_id"],
            ): t
            for t in SqliteSaver(conn).list(None)
        }


def ckptdb_tuples(saver: CkptdbSaver) -> dict[tuple[str, str, str], Any]:
    return {
        (
            t.config["configurable"]["thread_id"],
            t.config["configurable"]["checkpoint_ns"],
            t.config["configurable"]["checkpoint_id"],
        ): t
        for t in saver.list(None)
    }


def test_import_keeps_every_checkpoint_parent_link_and_write(source: Path, location: str) -> None:
    expected = sqlite_tuples(source)
    assert len({k[0] for k in expected}) == 4
    assert any(k[1] for k in expected)  # subgraph namespaces are there
    source_digest = all_files_digest(source)
    db_path = location  # a file, or a PostgreSQL database
    with ckptdb.open(db_path) as db:
        report = import_langgraph_sqlite(db, source, namespace=None, dry_run=False, progress=None)
        assert report.skipped == []
        assert len(report.imported) == len(expected)
        assert all(i.created for i in report.imported)
        with CkptdbSaver(db) as saver:
            got = ckptdb_tuples(saver)
            assert got.keys() == expected.keys()
            for key, want in expected.items():
                have = got[key]
                assert have.checkpoint == want.checkpoint, key
                assert have.metadata == want.metadata, key
                assert have.pending_writes == want.pending_writes, key
                assert (have.parent_config or {}).get("configurable", {}).get("checkpoint_id") == (
                    want.parent_config or {}
                ).get("configurable", {}).get("checkpoint_id")
            # Same order as SqliteSaver lists them, per thread.
            for thread in ("done", "waiting", "forked", "other"):
                ids = [t.checkpoint["id"] for t in saver.list(conf(thread, ""))]
                with closing(sqlite3.connect(source)) as conn:
                    want_ids = [
                        t.checkpoint["id"] for t in SqliteSaver(conn).list(conf(thread, ""))
                    ]
                assert ids == want_ids
        stats_before = db.stats()
        pointers_before = {n.name: n.revision for n in db.namespaces()}

        again = import_langgraph_sqlite(db, source, namespace=None, dry_run=False, progress=None)
        assert len(again.imported) == len(expected)
        assert not any(i.created for i in again.imported)
        assert db.stats().checkpoints == stats_before.checkpoints
        assert db.stats().stored_bytes == stats_before.stored_bytes
        assert {n.name: n.revision for n in db.namespaces()} == pointers_before
        with db.read_session() as s:
            writes = s.scalar("SELECT count(*) FROM lg_write")
        assert writes == sum(len(t.pending_writes or []) for t in expected.values())
        assert db.verify().ok
    assert all_files_digest(source) == source_digest  # the source was only read

    # The interrupted thread resumes on ckptdb where SqliteSaver left it.
    with CkptdbSaver(db_path) as saver:
        graph = build(saver)
        assert graph.get_state(conf("waiting")).next == ("ask",)
        out = graph.invoke(Command(resume="later"), conf("waiting"))
        assert out["items"][-2:] == ["answer:later", "last"]


def test_dry_run_and_thread_filter(source: Path, location: str) -> None:
    with ckptdb.open(location) as db:
        dry = import_langgraph_sqlite(db, source, namespace=None, dry_run=True, progress=None)
        assert dry.dry_run and dry.imported and all(i.created for i in dry.imported)
        assert db.namespaces() == []
        with db.read_session() as s:
            assert not s.scalar(HAS_TABLES_SQL[s.dialect])
        seen: list[tuple[int, int]] = []
        one = import_langgraph_sqlite(
            db,
            source,
            namespace="waiting",
            dry_run=False,
            progress=lambda d, t: seen.append((d, t)),
        )
        assert {i.source_id.split("'")[1] for i in one.imported} == {"waiting"}
        assert seen[-1][0] == seen[-1][1] == len(one.imported)
        assert all(n.startswith("langgraph/waiting") for n in one.namespaces)


def test_file_shrinks_because_unchanged_values_are_stored_once(tmp_path: Path) -> None:
    path = tmp_path / "big.sqlite"
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        saver = SqliteSaver(conn)
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        from langgraph.checkpoint.base import empty_checkpoint

        values = {f"c{i}": f"{i}" * 5000 for i in range(8)}
        for step in range(40):
            values = {**values, f"c{step % 8}": f"{step}-" + "y" * 5000}
            cp = empty_checkpoint()
            cp["channel_values"] = dict(values)
            cp["channel_versions"] = dict.fromkeys(values, step + 1)
            config = saver.put(config, cp, {"step": step}, {})
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with ckptdb.open(tmp_path / "small.ckpt") as db:
        import_langgraph_sqlite(db, path, namespace=None, dry_run=False, progress=None)
        assert db.stats().stored_bytes < os.path.getsize(path) / 4


def test_cli_import_from_langgraph_sqlite(source: Path, location: str) -> None:
    db_path = location
    runner = CliRunner()
    first = runner.invoke(
        cli, ["import-from", "langgraph-sqlite", str(source), str(db_path), "--create", "--json"]
    )
    assert first.exit_code == 0, first.output
    body = json.loads(first.stdout)
    assert body["kind"] == "langgraph-sqlite" and body["imported"]
    assert all(i["created"] for i in body["imported"])
    second = runner.invoke(cli, ["import-from", "langgraph-sqlite", str(source), str(db_path)])
    assert second.exit_code == 0, second.output
    assert "imported 0 checkpoints" in second.output


def _bad_sources(tmp_path: Path, source: Path) -> dict[str, Path]:
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all\n" * 100)
    other = tmp_path / "other.sqlite"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE things (x)")
        conn.commit()
    corrupt = tmp_path / "corrupt.sqlite"
    data = bytearray(source.read_bytes())
    page = 4096
    for offset in range(2 * page, min(len(data), 6 * page), 7):
        data[offset] ^= 0x5A
    corrupt.write_bytes(bytes(data))
    link = tmp_path / "link.sqlite"
    link.symlink_to(source)
    return {"text": text, "other": other, "corrupt": corrupt, "symlink": link}


def test_bad_sources_raise_typed_errors_and_change_nothing(source: Path, tmp_path: Path) -> None:
    with closing(sqlite3.connect(source)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db_path = tmp_path / "target.ckpt"
    with CkptdbSaver(db_path):  # a target that already holds LangGraph tables
        pass
    for name, bad in _bad_sources(tmp_path, source).items():
        before = all_files_digest(db_path)
        with ckptdb.open(db_path) as db, pytest.raises(ckptdb.CkptdbError) as caught:
            import_langgraph_sqlite(db, bad, namespace=None, dry_run=False, progress=None)
        assert all_files_digest(db_path) == before, name
        expected = {
            "text": NotLangGraphSqliteError,
            "other": NotLangGraphSqliteError,
            "corrupt": ckptdb.CkptdbError,
            "symlink": ckptdb.errors.UnsafePathError,
        }[name]
        assert isinstance(caught.value, expected), (name, caught.value)
    with ckptdb.open(db_path) as db, pytest.raises(ckptdb.InvalidInputError):
        import_langgraph_sqlite(db, db_path, namespace=None, dry_run=False, progress=None)
    result = CliRunner().invoke(
        cli,
        ["import-from", "langgraph-sqlite", str(tmp_path / "notes.txt"), str(db_path), "--json"],
    )
    assert result.exit_code != 0
    assert json.loads(result.output)["code"] == "not_langgraph_sqlite"


def test_pickled_rows_are_skipped_not_loaded(source: Path, tmp_path: Path) -> None:
    with closing(sqlite3.connect(source)) as conn:
        conn.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint,"
            " metadata) VALUES ('evil', '', '1', 'pickle', x'80', '{}')"
        )
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            " type, value) SELECT thread_id, checkpoint_ns, checkpoint_id, 'evil', 99, 'ch',"
            " 'pickle', x'80' FROM checkpoints WHERE thread_id = 'done' LIMIT 1"
        )
        conn.commit()
    with ckptdb.open(tmp_path / "p.ckpt") as db:
        report = import_langgraph_sqlite(db, source, namespace=None, dry_run=False, progress=None)
    codes = sorted(s.code for s in report.skipped)
    assert codes == ["pickle_refused", "pickle_refused"]
