"""The command line as a new user first meets it (issue 26): a mistyped database path is an
error, never a new empty file; a mistyped namespace or entry name gets the names that do
exist; `log` on a LangGraph thread shows its steps and checkpoint ids; durations take a bare
0; counts agree with their nouns."""

from __future__ import annotations

import json
import operator
import os
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from click.testing import CliRunner

import ckptdb
from ckptdb.cli import main
from ckptdb.retention import duration_seconds


def run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


@pytest.fixture
def state(tmp_path: Path) -> Path:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "notes.txt").write_text("hello\n")
    return tmp_path / "state"


#: Commands that write to DB, with the arguments after DB; True: the command takes --create.
WRITERS: list[tuple[list[str], list[str], bool]] = [
    (["commit"], ["brain-1", "STATE"], True),
    (["import"], ["SOURCE"], True),
    (["import-from", "json-dir", "JSONDIR"], [], True),
    (["pin"], ["brain-1", "release"], False),
    (["set-current"], ["brain-1", "brain-1"], False),
    (["fork"], ["brain-1", "brain-2"], False),
    (["checkout"], ["brain-1", "OUT"], False),
    (["gc"], ["--keep-last", "1"], False),
    (["prune"], ["--where", "turn=1"], False),
    (["drop-namespace"], ["brain-1"], False),
    (["verify"], [], False),
    (["retention", "set"], ["--keep-last", "2"], False),
    (["quota", "set"], ["brain-", "--max-checkpoints", "5"], False),
]


@pytest.mark.parametrize(("command", "rest", "takes_create"), WRITERS, ids=str)
def test_a_write_command_refuses_a_database_that_does_not_exist(
    tmp_path: Path, state: Path, command: list[str], rest: list[str], takes_create: bool
) -> None:
    source = tmp_path / "source.ckpt"
    with ckptdb.open(source) as db:
        db.commit("other", {"a": b"1"})
    (tmp_path / "jsondir").mkdir()
    places = {
        "STATE": str(state),
        "SOURCE": str(source),
        "JSONDIR": str(tmp_path / "jsondir"),
        "OUT": str(tmp_path / "out"),
    }
    typo = tmp_path / "agnet.ckpt"
    command = [places.get(a, a) for a in command]
    argv = [*command, str(typo), *[places.get(a, a) for a in rest]]
    refused = run(*argv, "--json", code=6)
    error = json.loads(refused.stdout)
    assert error["code"] == "bad_database_file" and error["path"] == str(typo)
    assert "does not exist" in error["message"]
    assert f"ckptdb init {typo}" in error["message"]
    assert ("--create" in error["message"]) is takes_create
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jsondir", "source.ckpt", "state"]


def test_init_and_create_make_the_file_and_say_so(tmp_path: Path, state: Path) -> None:
    db = tmp_path / "agent.ckpt"
    made = run("commit", str(db), "brain-1", str(state), "--create")
    assert made.stderr == f"created a new database {db}\n"
    again = run("commit", str(db), "brain-1", str(state), "--create")
    assert again.stderr == ""  # it exists now: nothing created, nothing said
    fresh = tmp_path / "fresh.ckpt"
    initialized = run("init", str(fresh))
    assert initialized.stderr == f"created a new database {fresh}\n"
    assert "is ready" in initialized.stdout
    assert run("init", str(fresh)).stderr == ""  # an existing file is left as it is
    show = run("show", str(tmp_path / "missing.ckpt"), "brain-1", code=6)
    assert "does not exist" in show.stderr and "--create" not in show.stderr


def test_demo_creates_its_own_file_and_says_so(tmp_path: Path) -> None:
    out = run("demo", str(tmp_path / "tour.ckpt")).stdout
    assert out.splitlines()[0].endswith("tour.ckpt (created for the tour)")
    again = run("demo", str(tmp_path / "tour.ckpt")).stdout
    assert again.splitlines()[0].endswith("tour.ckpt (an existing file)")


def test_a_mistyped_namespace_or_entry_gets_the_closest_names(tmp_path: Path) -> None:
    db = tmp_path / "agent.ckpt"
    with ckptdb.open(db) as handle:
        for ns in ("brain-1", "brain-2", "worker"):
            handle.commit(ns, {"graph/snapshot.json": b"{}", "notes.txt": b"n"})
    log = run("log", str(db), "brian-1", code=3)
    assert "did you mean 'brain-1' or 'brain-2'?" in log.stderr
    error = json.loads(run("show", str(db), "brain-l~0", "--json", code=3).stdout)
    assert error["code"] == "namespace_not_found"
    assert error["did_you_mean"][0] in ("brain-1", "brain-2")
    assert set(error["did_you_mean"]) == {"brain-1", "brain-2"}
    cat = run("cat", str(db), "brain-1", "graph/snapshot.jsn", code=3)
    assert cat.stderr.startswith("error: entry_not_found: ")
    assert "did you mean 'graph/snapshot.json'?" in cat.stderr
    diff = run("diff", str(db), "brain-1", "wroker", code=3)
    assert "did you mean 'worker'?" in diff.stderr
    nothing_close = run("current", str(db), "zzzzzz", code=3)
    assert "did you mean" not in nothing_close.stderr


class _Chat(TypedDict):
    messages: Annotated[list[str], operator.add]
    turn: int


def test_log_of_a_langgraph_thread_shows_its_steps_and_checkpoint_ids(tmp_path: Path) -> None:
    from langgraph.graph import END, START, StateGraph

    from ckptdb.integrations.langgraph import CkptdbSaver

    def respond(state: _Chat) -> dict[str, Any]:
        return {"messages": [f"reply {state['turn']}"], "turn": state["turn"] + 1}

    builder = StateGraph(_Chat)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    db = tmp_path / "agent.ckpt"
    config: Any = {"configurable": {"thread_id": "t-1"}, "run_id": os.urandom(16).hex()}
    with CkptdbSaver(str(db)) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": ["hi"], "turn": 0}, config)
        newest = saver.get_tuple({"configurable": {"thread_id": "t-1"}})
        assert newest is not None
        checkpoint_id = newest.config["configurable"]["checkpoint_id"]
    for argv in (["log", str(db), "langgraph/t-1"], ["log", str(db), "langgraph/t-1", "--graph"]):
        lines = run(*argv).stdout.splitlines()
        current = next(line for line in lines if line.startswith("*"))
        assert "langgraph.step=1" in current, current
        assert f'lg_checkpoint_id="{checkpoint_id}"' in current, current
        assert "parents" not in current  # an empty object is left out of the summary


def test_a_bare_zero_is_a_duration(tmp_path: Path, state: Path) -> None:
    assert duration_seconds("0") == duration_seconds("0s") == duration_seconds("00") == 0
    with pytest.raises(ckptdb.InvalidInputError, match="unit"):
        duration_seconds("7")  # 7 what? only zero is the same in every unit
    db = tmp_path / "agent.ckpt"
    run("commit", str(db), "brain-1", str(state), "--create")
    report = json.loads(run("gc", str(db), "--keep-last", "1", "--grace", "0", "--json").stdout)
    assert report["grace_seconds"] == 0


def test_counts_agree_with_their_nouns(tmp_path: Path, state: Path) -> None:
    db = tmp_path / "agent.ckpt"
    first = run("commit", str(db), "brain-1", str(state), "--create").stdout
    assert "  1 entry  " in first
    (state / "notes.txt").write_text("changed\n")
    run("commit", str(db), "brain-1", str(state))
    diff = run("diff", str(db), "brain-1~1", "brain-1").stdout
    assert "(1 generation back)" in diff and "1 entry differs, 0 unchanged" in diff
    log = run("log", str(db), "brain-1", "--graph").stdout
    assert " 1 entry " in log and "1 entries" not in log
    verify = run("verify", str(db)).stdout
    assert "2 checkpoints" in verify and "1 pointer" in verify and "1 pointers" not in verify
