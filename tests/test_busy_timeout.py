"""A commit waiting behind another process's write lock (issue 26, item 4): the error says
how long it waited and which process holds the lock (Linux tells through /proc/locks), and
the CLI's --busy-timeout / CKPTDB_BUSY_TIMEOUT set the wait. The other process is real: a
child holding ``BEGIN IMMEDIATE`` on the file."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import child_env

import ckptdb
from ckptdb import errors
from ckptdb.cli import main

#: The child: take the write lock, say so, hold it until its stdin closes.
HOLDER = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A database whose write lock another process holds: (path, that process's pid)."""
    path = tmp_path / "b.ckpt"
    with ckptdb.open(path) as db:
        db.commit("ns", {"a": b"1"})
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_env(),
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        yield path, child.pid
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def test_the_error_says_how_long_it_waited_and_for_whom(held: tuple[Path, int]) -> None:
    path, pid = held
    with ckptdb.open(path, busy_timeout=0.3) as db:
        started = time.monotonic()
        with pytest.raises(errors.BusyTimeoutError) as caught:
            db.commit("ns", {"a": b"2"})
        assert time.monotonic() - started < 5
    exc = caught.value
    assert exc.retryable and exc.code == "busy_timeout"
    assert f"waited 0.3 s for the write lock of {path}" in str(exc)
    if sys.platform == "linux":
        assert f"which process {pid} (" in str(exc) and exc.details["holder"].startswith(
            f"process {pid} "
        )
    assert exc.details["waited_seconds"] >= 0.3
    assert "busy_timeout=" in str(exc)  # a Python caller is told the argument


def test_another_connection_of_this_process_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "same.ckpt"
    with ckptdb.open(path) as first, ckptdb.open(path, busy_timeout=0.1) as second:
        first.commit("ns", {"a": b"1"})
        with first.write_session(), pytest.raises(errors.BusyTimeoutError) as caught:
            second.commit("ns", {"a": b"2"})
    holder = "another connection of this process" if sys.platform == "linux" else "another"
    assert f"which {holder}" in str(caught.value)


def _cli(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, float]:
    started = time.monotonic()
    result = CliRunner().invoke(main, args, env=env)
    return result.exit_code, result.stdout + result.stderr, time.monotonic() - started


def test_busy_timeout_on_the_command_line_or_in_the_environment(
    held: tuple[Path, int], tmp_path: Path
) -> None:
    path, _ = held
    src = tmp_path / "state.json"
    src.write_bytes(b"{}")
    commit = ["commit", str(path), "ns", str(src)]
    # After the subcommand, before it, from the environment: each waits what it says.
    for args, env in (
        ([*commit, "--busy-timeout", "0.2"], None),
        (["--busy-timeout", "0.2", *commit], None),
        (commit, {"CKPTDB_BUSY_TIMEOUT": "0.2"}),
        # The command line wins over the environment.
        ([*commit, "--busy-timeout", "0.2"], {"CKPTDB_BUSY_TIMEOUT": "600"}),
    ):
        code, output, took = _cli(args, env)
        assert code == errors.BusyTimeoutError.exit_status, output
        assert took < 10, args
        assert "waited 0.2 s for the write lock" in output
        assert "--busy-timeout SECONDS (or $CKPTDB_BUSY_TIMEOUT)" in output
        assert "busy_timeout=" not in output  # no Python advice on the command line
    code, output, _ = _cli([*commit, "--busy-timeout", "0.2", "--json"])
    err = json.loads(output)
    assert err["code"] == "busy_timeout" and "--busy-timeout SECONDS" in err["message"]
    assert err["waited_seconds"] >= 0.2


def test_the_cli_waits_for_the_lock_within_its_busy_timeout(tmp_path: Path) -> None:
    """The other side: a lock released within --busy-timeout is waited for, not refused."""
    path = tmp_path / "w.ckpt"
    with ckptdb.open(path) as db:
        db.commit("ns", {"a": b"1"})
    src = tmp_path / "state.json"
    src.write_bytes(b'{"v": 2}')
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_env(),
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    script = str(Path(sys.executable).parent / "ckptdb")
    waiting = subprocess.Popen(
        [script, "commit", str(path), "ns", str(src), "--busy-timeout", "60"],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    assert waiting.poll() is None  # still waiting for the lock
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=30)
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, (out, err)
    with ckptdb.open(path) as db:
        assert db.current("ns").read("state.json") == b'{"v": 2}'  # type: ignore[union-attr]
