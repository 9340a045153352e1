"""``restore(recover=True)`` / ``restore --recover``: when the newest position of a replica
does not restore or verify, walk back to the newest one that does -- loudly, with every
skipped position reported. Real Litestream, real replica files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ckptdb
from ckptdb import errors
from ckptdb.replication import ltx
from ckptdb.replication.config import ReplicaURL

#: A process that is not ckptdb damages the newest stored blob in place (a hostile write that
#: SQLite accepts): Litestream ships it like any other transaction.
_DAMAGE = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("UPDATE blob SET inline_data = zeroblob(length(inline_data)) "
             "WHERE blob_id = (SELECT max(blob_id) FROM blob)")
"""


def test_recover_walks_back_past_positions_that_fail_verify(tmp_path: Path) -> None:
    primary = tmp_path / "p.ckpt"
    url = "file://" + str(tmp_path / "replica")
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"0"})
        with ckptdb.replicate(primary, to=url, sync_interval=0.1) as rep:
            good = db.commit("ns", {"a": b"good" * 1000})
            rep.wait(good.checkpoint_id, timeout=30)
            good_txid = ltx.head_txid(ltx.list_files(ReplicaURL.parse(url)))
            doomed = db.commit("ns", {"a": b"doomed" * 1000})
            subprocess.run([sys.executable, "-c", _DAMAGE, str(primary)], check=True)
            after = db.commit("ns", {"b": b"after"})
            rep.wait(after.checkpoint_id, timeout=30)
    assert good_txid is not None
    dest = tmp_path / "r.ckpt"
    with pytest.raises(errors.ReplicaDamagedError) as caught:
        ckptdb.restore(url, dest)
    assert "recover" in str(caught.value) and not dest.exists()

    report = ckptdb.restore(url, dest, recover=True)
    assert report.recovered and report.txid is not None and report.txid >= good_txid
    assert report.skipped and {p.reason for p in report.skipped} == {"verify_failed"}
    assert [p.txid for p in report.skipped] == sorted(
        (p.txid for p in report.skipped), reverse=True
    )
    assert all(p.txid > report.txid for p in report.skipped)
    with ckptdb.open(dest, readonly=True) as copy:
        assert copy.verify().ok
        assert copy.get(good.checkpoint_id).read("a") == b"good" * 1000
        assert copy.current("ns").id != after.checkpoint_id
    del doomed

    # the CLI: exit 13 (succeeded degraded), each skipped position on stderr, --json exact
    out = subprocess.run(
        [sys.executable, "-m", "ckptdb.cli", "restore", url, str(dest), "--force", "--recover",
         "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 13, out.stderr
    assert "warning: recovery skipped" in out.stderr
    for position in report.skipped:
        assert f"txid {position.txid}: verify_failed" in out.stderr
    assert json.loads(out.stdout)["skipped"][0]["txid"] == report.skipped[0].txid
    plain = subprocess.run(
        [sys.executable, "-m", "ckptdb.cli", "restore", url, str(tmp_path / "x.ckpt")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert plain.returncode == 5 and "--recover" in plain.stdout + plain.stderr


def test_recover_on_a_healthy_replica_skips_nothing_and_bad_arguments_are_typed(
    tmp_path: Path,
) -> None:
    primary = tmp_path / "h.ckpt"
    url = "file://" + str(tmp_path / "replica")
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"0"})
        with ckptdb.replicate(primary, to=url, sync_interval=0.1) as rep:
            ack = db.commit("ns", {"a": b"1"})
            rep.wait(ack.checkpoint_id, timeout=30)
    report = ckptdb.restore(url, tmp_path / "r.ckpt", recover=True)
    assert not report.recovered and report.skipped == []
    assert report.txid == ltx.head_txid(ltx.list_files(ReplicaURL.parse(url)))
    with pytest.raises(errors.InvalidInputError):
        ckptdb.restore(url, tmp_path / "x.ckpt", recover=True, checkpoint=ack.checkpoint_id)
    with pytest.raises(errors.InvalidInputError):
        ckptdb.restore(url, tmp_path / "x.ckpt", recover="yes")  # type: ignore[arg-type]
    assert not (tmp_path / "x.ckpt").exists()


def test_recover_with_no_usable_position_is_typed(tmp_path: Path) -> None:
    primary = tmp_path / "d.ckpt"
    replica = tmp_path / "replica"
    with ckptdb.open(primary) as db:
        db.commit("ns", {"a": b"0"})
        with ckptdb.replicate(primary, to="file://" + str(replica), sync_interval=0.1) as rep:
            ack = db.commit("ns", {"a": b"1"})
            rep.wait(ack.checkpoint_id, timeout=30)
    for ltx_file in replica.rglob("*.ltx"):  # every file damaged: nothing restores
        data = bytearray(ltx_file.read_bytes())
        for i in range(200, len(data), 997):
            data[i] ^= 0xFF
        ltx_file.write_bytes(bytes(data))
    with pytest.raises(errors.ReplicaDamagedError) as caught:
        ckptdb.restore("file://" + str(replica), tmp_path / "r.ckpt", recover=True)
    assert caught.value.details["reason"] == "no_usable_position"
    assert not (tmp_path / "r.ckpt").exists()
