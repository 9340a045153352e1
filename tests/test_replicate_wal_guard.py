"""Only Litestream restarts the WAL of a file it replicates.

Litestream keeps a long-running read transaction so that no other connection can
checkpoint and restart the WAL past frames it has not copied. These tests hold ckptdb to
its side of that rule with real Litestream processes on real files:

* the barrier's control-socket requests leave Litestream its read transaction;
* ckptdb runs no checkpoint while a replicator runs, and pauses a writer that outruns
  Litestream instead of growing the WAL without bound;
* a replicator that starts on a WAL another connection restarted meanwhile still yields
  a replica that restores whole;
* the LTX-header audit flags a WAL restarted behind Litestream's back, and nothing else.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import ckptdb
from ckptdb.connection import walhook
from ckptdb.replication import ltx
from ckptdb.replication.binaries import litestream_binary
from ckptdb.replication.config import ReplicaURL, render
from ckptdb.replication.control import ControlClient
from ckptdb.replication.lock import ReplicatorLock
from ckptdb.replication.replicator import Replicator

#: Another process (never this one: closing a second SQLite library's descriptor of the
#: file would drop this process's POSIX locks) runs a checkpoint that restarts the WAL.
_CHECKPOINT = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
print(*conn.execute("PRAGMA wal_checkpoint(%s)" % sys.argv[2]).fetchone())
"""


def _foreign_checkpoint(path: Path, mode: str) -> tuple[int, int, int]:
    out = subprocess.run(
        [sys.executable, "-c", _CHECKPOINT, str(path), mode],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    busy, log, done = (int(x) for x in out.stdout.split())
    return busy, log, done


def _seq_page(path: Path) -> int:
    with ckptdb.open(path, readonly=True) as db:
        rows = db.query("SELECT rootpage FROM sqlite_schema WHERE name = '_litestream_seq'").rows
    return int(rows[0][0])


def _noise(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)  # incompressible: every byte reaches the WAL


def test_the_barrier_leaves_litestream_its_read_transaction(tmp_path: Path) -> None:
    primary = tmp_path / "p.ckpt"
    url = "file://" + str(tmp_path / "replica")
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"0"})
        # Litestream reads the WAL only when asked (monitor interval 60 s), so its own
        # checkpoint runs inside the barrier's /sync request: the case that lost the lock.
        rep = Replicator(primary, url, sync_interval=0.1, monitor_interval=60).start()
        try:
            for turn in range(3):
                db.commit("ns", {"big": _noise(2 << 20, turn)})  # past 1,000 WAL pages
            ack = db.commit("ns", {"a": b"1"})
            rep.wait(ack.checkpoint_id, timeout=30)
            db.commit("ns", {"a": b"2"})
            busy, _, _ = _foreign_checkpoint(primary, "TRUNCATE")
            assert busy == 1, "nothing kept the WAL from being restarted under Litestream"
            ack = db.commit("ns", {"a": b"3"})
            rep.wait(ack.checkpoint_id, timeout=30)
        finally:
            rep.stop()
    dest = tmp_path / "restored.ckpt"
    ckptdb.restore(url, dest)
    with ckptdb.open(dest, readonly=True) as copy:
        assert copy.current("ns").read("a") == b"3"


def test_no_checkpoint_while_a_replicator_runs_and_writers_yield(tmp_path: Path) -> None:
    primary = tmp_path / "w.ckpt"
    wal = Path(str(primary) + "-wal")
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"0"})
        db.gc(grace=0)  # start from a checkpointed file
        size = primary.stat().st_size
        lock = ReplicatorLock(str(primary))
        lock.acquire()  # what a running replicator holds, in any process
        try:
            for turn in range(3):
                db.commit("ns", {"big": _noise(2 << 20, turn)})
            assert wal.stat().st_size > walhook.AUTOCHECKPOINT_PAGES * 4096
            assert primary.stat().st_size == size, "ckptdb checkpointed a replicated file"
            db.gc(grace=0)  # GC's checkpoints stand down too
            assert primary.stat().st_size == size
            for turn in range(3, 10):  # past YIELD_PAGES: each commit leaves a gap
                db.commit("ns", {"big": _noise(2 << 20, turn)})
            began = time.monotonic()
            db.commit("ns", {"a": b"1"})
            assert time.monotonic() - began >= walhook.YIELD_SECONDS
        finally:
            lock.release()
        db.commit("ns", {"a": b"2"})  # no replicator: the automatic checkpoint is back
        # ... on the handle's checkpointer thread (connection/checkpointer.py): soon after.
        deadline = time.monotonic() + 30
        while primary.stat().st_size <= size + (8 << 20) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert primary.stat().st_size > size + (8 << 20)
        assert db.verify().ok


def test_a_replicator_starting_on_a_wal_restarted_behind_its_back(tmp_path: Path) -> None:
    primary = tmp_path / "s.ckpt"
    url = "file://" + str(tmp_path / "replica")
    acked: list[str] = []
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"0"})
        with ckptdb.replicate(primary, to=url, sync_interval=0.1) as rep:
            for turn in range(3):
                acked.append(db.commit("ns", {"a": _noise(5000, turn)}).checkpoint_id)
            rep.wait(acked[-1], timeout=30)
        # No replicator: commits, another connection checkpoints and restarts the WAL,
        # and the new generation is shorter than the old one (stale frames stay behind it).
        for turn in range(3, 8):
            acked.append(db.commit("ns", {"a": _noise(5000, turn)}).checkpoint_id)
        assert _foreign_checkpoint(primary, "RESTART")[0] == 0
        acked.append(db.commit("ns", {"a": b"x"}).checkpoint_id)
        with ckptdb.replicate(primary, to=url, sync_interval=0.1) as rep:
            acked.append(db.commit("ns", {"a": b"y"}).checkpoint_id)
            rep.wait(acked[-1], timeout=30)
    dest = tmp_path / "restored.ckpt"
    ckptdb.restore(url, dest)
    with ckptdb.open(dest, readonly=True) as copy:
        for checkpoint_id in acked:
            copy.get(checkpoint_id).read("a")
        assert copy.verify().ok


def _raw_litestream(primary: Path, url: str, folder: Path) -> subprocess.Popen[bytes]:
    """Litestream run directly (not through ckptdb.replicate): no replicator lock, no
    empty WAL at start -- the way another supervisor might run it."""
    config = folder / "litestream.json"
    config.write_text(
        render(
            str(primary),
            ReplicaURL.parse(url),
            socket_path=str(folder / "control.sock"),
            sync_interval=0.1,
            monitor_interval=0.1,
            busy_timeout=5.0,
        )
    )
    return subprocess.Popen(
        [litestream_binary(), "replicate", "-config", str(config), "-no-expand-env"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _settle(primary: Path, url: str, private: str) -> None:
    """Wait until the replica holds everything Litestream read from the WAL so far."""
    control = ControlClient(os.path.join(private, "control.sock"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.3)  # a monitor interval or three: Litestream reads the WAL
        try:
            local = control.txid(str(primary))
        except ckptdb.errors.ReplicationError:
            continue  # not listening yet
        head = ltx.head_txid(ltx.list_files(ReplicaURL.parse(url)))
        if local and head is not None and head >= local:
            return
    raise AssertionError("the replica did not catch up with Litestream")


def test_the_ltx_audit_flags_a_wal_restarted_behind_litestream(tmp_path: Path) -> None:
    primary = tmp_path / "a.ckpt"
    replica = tmp_path / "replica"
    url = "file://" + str(replica)
    with ckptdb.open(primary) as db, tempfile.TemporaryDirectory() as private:
        db.commit("ns", {"a": b"0"})
        proc = _raw_litestream(primary, url, Path(private))
        try:
            _settle(primary, url, private)
            for turn in range(3):
                db.commit("ns", {"a": _noise(5000, turn)})
            _settle(primary, url, private)
        finally:
            proc.send_signal(signal.SIGKILL)  # dies holding nothing: its read lock is gone
            proc.wait()
        assert ltx.audit(ltx.local_headers(str(replica)), seq_page=_seq_page(primary)) == []
        for turn in range(3, 8):
            db.commit("ns", {"a": _noise(5000, turn)})
        assert _foreign_checkpoint(primary, "RESTART")[0] == 0
        db.commit("ns", {"a": b"x"})
        proc = _raw_litestream(primary, url, Path(private))
        try:
            _settle(primary, url, private)
            db.commit("ns", {"a": b"y"})
            _settle(primary, url, private)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    found = ltx.audit(ltx.local_headers(str(replica)), seq_page=_seq_page(primary))
    assert found, "the audit missed a WAL generation restarted behind Litestream"
    assert {a.kind for a in found} <= {
        "foreign_wal_restart",
        "skipped_wal_generation",
        "resnapshot",
    }


def test_the_ltx_audit_passes_litestreams_own_wal_restarts(tmp_path: Path) -> None:
    primary = tmp_path / "n.ckpt"
    replica = tmp_path / "replica"
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"0"})
        with ckptdb.replicate(primary, to="file://" + str(replica), sync_interval=0.1) as rep:
            for turn in range(12):  # ~12 MB: Litestream checkpoints and restarts the WAL
                ack = db.commit("ns", {"big": _noise(1 << 20, turn)})
                if turn % 3 == 2:
                    rep.wait(ack.checkpoint_id, timeout=30)
    headers = ltx.local_headers(str(replica))
    assert len({h.wal_salt1 for h in headers}) >= 2, "Litestream never restarted the WAL"
    assert ltx.audit(headers, seq_page=_seq_page(primary)) == []


def test_ltx_headers_are_read_strictly(tmp_path: Path) -> None:
    bogus = tmp_path / "x.ltx"
    bogus.write_bytes(b"LTX0" + bytes(200))
    with pytest.raises(ckptdb.errors.ReplicationError):
        ltx.read_header(str(bogus))
    bogus.write_bytes(b"LTX1" + bytes(20))
    with pytest.raises(ckptdb.errors.ReplicationError):
        ltx.read_header(str(bogus))
    assert ltx.local_headers(str(tmp_path / "none")) == []
    assert os.path.exists(bogus)
