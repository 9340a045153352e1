"""``restore --force`` over a database that is in use is refused, never orphans its users.

Real processes on real files: a writer that keeps committing, an idle reader, a handle in
the restoring process itself, and a process that opened the file but had not read it yet
when the restore replaced it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ckptdb
from ckptdb import errors

CLI = [sys.executable, "-m", "ckptdb.cli"]

#: Commits until its stdin closes, printing each acknowledged id; then closes cleanly.
_WRITER = """
import sys, threading, ckptdb
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
with ckptdb.open(sys.argv[1]) as db:
    n = 0
    while not stop.is_set():
        n += 1
        ack = db.commit("live", {"state.json": b"%d" % n})
        print("acked", ack.checkpoint_id, flush=True)
"""

#: Holds a read-only handle open (idle) until its stdin closes.
_READER = """
import sys, ckptdb
with ckptdb.open(sys.argv[1], readonly=True) as db:
    db.current("live")
    print("ready", flush=True)
    sys.stdin.read()
"""

#: Opens the file with SQLite but reads nothing until told to (so it holds no lock).
_LATE = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
print("opened", flush=True)
sys.stdin.readline()
try:
    conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
    print("read the old file")
except apsw.NotADBError:
    print("refused: not a database")
"""


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("replica-src")
    primary = root / "src.ckpt"
    url = "file://" + str(root / "replica")
    with ckptdb.open(primary) as db:
        db.commit("restored", {"state.json": b"from the replica"})
        with ckptdb.replicate(primary, to=url, sync_interval=0.1) as rep:
            ack = db.commit("restored", {"state.json": b"replicated"})
            rep.wait(ack.checkpoint_id, timeout=30)
    yield url


def _start(script: str, path: Path, ready: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith(ready), line
    return proc


def test_restore_force_refuses_a_database_another_process_commits_to(
    tmp_path: Path, replica: str
) -> None:
    dest = tmp_path / "live.ckpt"
    writer = _start(_WRITER, dest, "acked")
    try:
        time.sleep(0.3)  # many commits in flight
        out = subprocess.run(
            [*CLI, "restore", replica, str(dest), "--force", "--json"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert out.returncode == 10, out.stdout + out.stderr
        assert json.loads(out.stdout)["code"] == "restore_target_in_use"
        with pytest.raises(errors.RestoreTargetInUseError) as caught:
            ckptdb.restore(replica, dest, force=True)
        assert caught.value.retryable and "in use" in str(caught.value)
        time.sleep(0.3)  # the writer goes on committing after the refusals
    finally:
        assert writer.stdin is not None and writer.stdout is not None
        writer.stdin.close()
        rest = writer.stdout.read()
        writer.wait(timeout=30)
    assert writer.returncode == 0
    acked = [line.split()[1] for line in rest.splitlines() if line.startswith("acked ")]
    assert len(acked) > 10
    with ckptdb.open(dest, readonly=True) as db:
        for checkpoint_id in acked:  # every acknowledged commit is still there
            db.get(checkpoint_id).read("state.json")
        assert db.current("live").id == acked[-1]
        assert db.current("restored") is None  # and the file was not replaced
    # once nothing uses it, the same restore goes through
    report = ckptdb.restore(replica, dest, force=True)
    assert report.replaced
    with ckptdb.open(dest, readonly=True) as db:
        assert db.current("restored").read("state.json") == b"replicated"


def test_restore_force_refuses_an_idle_reader_in_another_process(
    tmp_path: Path, replica: str
) -> None:
    dest = tmp_path / "read.ckpt"
    with ckptdb.open(dest) as db:
        db.commit("live", {"state.json": b"1"})
    reader = _start(_READER, dest, "ready")
    try:
        with pytest.raises(errors.RestoreTargetInUseError):
            ckptdb.restore(replica, dest, force=True)
    finally:
        assert reader.stdin is not None
        reader.stdin.close()
        reader.wait(timeout=30)
    with ckptdb.open(dest, readonly=True) as db:
        assert db.current("live").read("state.json") == b"1"


def test_restore_force_refuses_a_handle_of_this_process(tmp_path: Path, replica: str) -> None:
    dest = tmp_path / "mine.ckpt"
    with ckptdb.open(dest) as db:
        db.commit("live", {"state.json": b"1"})
        with pytest.raises(errors.RestoreTargetInUseError) as caught:
            ckptdb.restore(replica, dest, force=True)
        assert "this process" in str(caught.value)
        # the refusal left the handle's locks alone: it still commits and reads
        ack = db.commit("live", {"state.json": b"2"})
        assert db.current("live").id == ack.checkpoint_id
    assert ckptdb.restore(replica, dest, force=True).replaced


def test_a_process_that_opened_the_old_file_unread_gets_an_error_not_the_old_file(
    tmp_path: Path, replica: str
) -> None:
    dest = tmp_path / "late.ckpt"
    with ckptdb.open(dest) as db:
        db.commit("live", {"state.json": b"old"})
    late = _start(_LATE, dest, "opened")  # holds a descriptor of the old file, no lock
    try:
        assert ckptdb.restore(replica, dest, force=True).replaced
        assert late.stdin is not None and late.stdout is not None
        late.stdin.write("go\n")
        late.stdin.flush()
        said = late.stdout.readline().strip()
    finally:
        late.kill()
        late.wait()
    assert said == "refused: not a database"
    with ckptdb.open(dest, readonly=True) as db:
        assert db.current("restored").read("state.json") == b"replicated"
