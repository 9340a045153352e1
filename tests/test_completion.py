"""Shell completion beyond the subcommand (issue 26, item 8): DB completes as a file,
NAMESPACE and CHECKPOINT from the database named on the line, ENTRY from the checkpoint --
through click's completion protocol (``_CKPTDB_COMPLETE``), run against the installed
console script as a shell would, on real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.shell_completion import ShellComplete
from conftest import child_env, file_digest

import ckptdb
from ckptdb.cli import main
from ckptdb.cli.completion import ARGUMENT_TYPES

SCRIPT = str(Path(sys.executable).parent / "ckptdb")


def protocol(words: str, cwd: Path, shell: str) -> str:
    """What the console script answers ``shell``'s completion script for the last word of
    ``words`` (which ends with a space to complete a new word)."""
    parts = words.split(" ")
    env = {
        **child_env(),
        "_CKPTDB_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": words,
        # bash and zsh give the index of the word being completed, fish the word itself.
        "COMP_CWORD": parts[-1] if shell == "fish" else str(len(parts) - 1),
    }
    proc = subprocess.run(
        [SCRIPT], env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return proc.stdout


def complete(words: str, cwd: Path) -> list[tuple[str, str]]:
    """(type, value) of each completion offered for the last word of ``words``, from
    click's completion machinery in this process (run in ``cwd``, as a shell would)."""
    *args, incomplete = words.split(" ")[1:]
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        items = ShellComplete(main, {}, "ckptdb", "_CKPTDB_COMPLETE").get_completions(
            args, incomplete
        )
    finally:
        os.chdir(previous)
    return [(item.type, item.value) for item in items]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A directory with a database of two namespaces (closed: no -wal or -shm left)."""
    with ckptdb.open(tmp_path / "agent.ckpt") as db:
        db.commit("brain", {"state.json": b"{}", "graph/a.bin": b"a", "graph/b.bin": b"b"})
        db.commit("brain", {"state.json": b"{}", "graph/a.bin": b"a2", "notes.txt": b"n"})
        db.commit("bookkeeping", {"ledger.csv": b"x"})
        db.commit("other", {"x": b"x"})
    return tmp_path


def test_the_console_script_answers_the_shell_protocol(home: Path) -> None:
    """End to end: what bash's script asks the installed command, and its answer."""
    answer = protocol("ckptdb cat agent.ckpt brain n", home, "bash")
    assert answer.splitlines() == ["plain,notes.txt"]
    assert protocol("ckptdb cat ag", home, "bash").splitlines() == ["file,ag"]
    assert protocol("ckptdb log missing.ckpt ", home, "bash").strip() == ""


def test_db_completes_as_a_file_path(home: Path) -> None:
    assert complete("ckptdb namespaces ag", home) == [("file", "ag")]
    assert complete("ckptdb migrate status ag", home) == [("file", "ag")]
    assert complete("ckptdb retention show ", home) == [("file", "")]


def test_namespaces_complete_from_the_database_on_the_line(home: Path) -> None:
    assert complete("ckptdb log agent.ckpt b", home) == [
        ("plain", "bookkeeping"),
        ("plain", "brain"),
    ]
    assert complete("ckptdb history agent.ckpt ", home) == [
        ("plain", "bookkeeping"),
        ("plain", "brain"),
        ("plain", "other"),
    ]
    # After options, and with the database given by an absolute path.
    assert complete(f"ckptdb commit --reason r {home / 'agent.ckpt'} o", home) == [
        ("plain", "other")
    ]


def test_checkpoints_complete_to_namespaces_and_their_pointers(home: Path) -> None:
    assert complete("ckptdb show agent.ckpt br", home) == [("plain", "brain")]
    assert complete("ckptdb checkout agent.ckpt brain@", home) == [
        ("plain", "brain@current"),
        ("plain", "brain@fallback"),
    ]


def test_entries_complete_from_the_checkpoint_on_the_line(home: Path) -> None:
    assert complete("ckptdb cat agent.ckpt brain ", home) == [
        ("plain", "graph/a.bin"),
        ("plain", "notes.txt"),
        ("plain", "state.json"),
    ]
    assert complete("ckptdb cat agent.ckpt brain~1 graph/", home) == [
        ("plain", "graph/a.bin"),
        ("plain", "graph/b.bin"),
    ]
    assert complete("ckptdb cat agent.ckpt nosuch ", home) == []


def test_a_bad_path_completes_to_nothing_and_nothing_is_created(home: Path) -> None:
    (home / "notes.txt").write_text("not a database")
    before = sorted(os.listdir(home))
    digests = {name: file_digest(home / name) for name in before}
    for words in (
        "ckptdb log missing.ckpt ",
        "ckptdb log nodir/missing.ckpt ",
        "ckptdb log notes.txt ",
        "ckptdb log . ",
        "ckptdb cat notes.txt brain ",
    ):
        assert complete(words, home) == [], words
    assert sorted(os.listdir(home)) == before
    assert {name: file_digest(home / name) for name in before} == digests
    # The real one is read, and not changed: a read-only handle leaves only the empty
    # -wal and the -shm index SQLite creates beside a WAL database it reads (as every
    # read-only command does).
    assert complete("ckptdb log agent.ckpt ", home)
    assert file_digest(home / "agent.ckpt") == digests["agent.ckpt"]
    assert set(os.listdir(home)) - set(before) <= {"agent.ckpt-wal", "agent.ckpt-shm"}
    assert not (home / "agent.ckpt-wal").exists() or (home / "agent.ckpt-wal").stat().st_size == 0


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_get_the_same_candidates(home: Path, shell: str) -> None:
    answer = protocol("ckptdb cat agent.ckpt brain n", home, shell)
    assert "notes.txt" in answer and "state.json" not in answer
    assert "file" in protocol("ckptdb cat ag", home, shell)


def test_every_db_namespace_checkpoint_and_entry_argument_completes(home: Path) -> None:
    """Given once, by the root group: no command declares an argument of these names
    without its completing type."""

    def walk(group: click.Group) -> list[click.Command]:
        out: list[click.Command] = []
        for cmd in group.commands.values():
            out += walk(cmd) if isinstance(cmd, click.Group) else [cmd]
        return out

    seen = set()
    for cmd in walk(main):
        for param in cmd.params:
            if isinstance(param, click.Argument) and param.name in ARGUMENT_TYPES:
                assert param.type is ARGUMENT_TYPES[param.name], (cmd.name, param.name)
                seen.add(param.name)
    assert seen == set(ARGUMENT_TYPES)
    script = subprocess.run(
        [SCRIPT, "completion", "bash"], capture_output=True, text=True, check=True
    ).stdout
    assert "_CKPTDB_COMPLETE=bash_complete" in script
