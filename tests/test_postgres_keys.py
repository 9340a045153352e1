"""Key rotation and crypto-shredding on PostgreSQL: the same steps as on SQLite, and what
the server's own copies mean for them (docs/security.md, "On PostgreSQL")."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from conftest import disk_bytes, raw_sql, spawn_script

import ckptdb
from ckptdb import errors

OLD = bytes(range(32))
NEW = bytes(range(100, 132))


def test_rotation_re_wraps_and_the_old_key_no_longer_opens(pg_url: str) -> None:
    with ckptdb.open(pg_url, keys={"tenant": OLD}) as db:
        db.set_encryption("t/", key_id="tenant")
        ack = db.commit("t/1", {"secret": b"PLAINTEXT-MARKER"})
        rotated = db.rotate_key("tenant", NEW)
        assert rotated.key_generation == 2
        assert db.get(ack.checkpoint_id).read("secret") == b"PLAINTEXT-MARKER"
        receipt = db.receipts()[0]
        assert receipt.kind == "rotate_key" and receipt.body["wal_truncated"] is False
    with ckptdb.open(pg_url, keys={"tenant": NEW}) as db:
        assert db.current("t/1").read("secret") == b"PLAINTEXT-MARKER"  # type: ignore[union-attr]
        db.commit("t/1", {"secret": b"more"})
    with ckptdb.open(pg_url, keys={"tenant": OLD}) as db, pytest.raises(errors.KeyMismatchError):
        db.current("t/1").read("secret")  # type: ignore[union-attr]
    assert b"PLAINTEXT-MARKER" not in disk_bytes(pg_url)


def test_shredding_deletes_the_scope_and_refuses_it_from_then_on(pg_url: str) -> None:
    with ckptdb.open(pg_url, keys={"tenant": OLD}) as db:
        db.set_encryption("t/", key_id="tenant")
        for i in range(3):
            db.commit(f"t/{i}", {"secret": b"MARKER" * 5000, "n": bytes([i])})
        db.commit("plain/1", {"x": b"kept"})
        db.pin(db.current("t/0").id, "evidence")  # type: ignore[union-attr]
        report = db.shred_key("tenant")
        assert report.namespaces == ["t/0", "t/1", "t/2"] and report.checkpoints_deleted == 3
        assert report.wal_truncated is False
        assert [n.name for n in db.namespaces()] == ["plain/1"]
        with pytest.raises(errors.KeyShreddedError):
            db.commit("t/9", {"x": b"y"})
        assert db.shred_key("tenant").checkpoints_deleted == 0  # idempotent
        assert db.verify().ok
        assert db.current("plain/1").read("x") == b"kept"  # type: ignore[union-attr]
    scope = raw_sql(pg_url, "SELECT scope_id, wrapped_key FROM key_scope")
    assert len(scope) == 1 and scope[0][1] is None  # the tombstone
    sid = scope[0][0]
    assert raw_sql(pg_url, "SELECT count(*) FROM blob WHERE scope_id = ?", (sid,)) == [(0,)]
    assert raw_sql(pg_url, "SELECT count(*) FROM chunk WHERE scope_id = ?", (sid,)) == [(0,)]


_WRITER = textwrap.dedent(
    """
    import sys, time
    import ckptdb
    from ckptdb import errors
    url, seconds = sys.argv[1], float(sys.argv[2])
    deadline = time.monotonic() + seconds
    stopped = "no"
    with ckptdb.open(url, keys={"tenant": bytes(range(32))}, busy_timeout=30) as db:
        n = 0
        while time.monotonic() < deadline:
            try:
                db.commit(f"t/{n % 3}", {"secret": b"MARKER" * 2000, "n": str(n).encode()})
            except errors.KeyShreddedError:
                stopped = "shredded"
                break
            except errors.ConflictError as exc:  # its namespace was being dropped
                assert exc.details["reason"] == "namespace_dropping", exc
                continue
            n += 1
    print(stopped, n)
    """
)


def test_a_writer_racing_the_shred_leaves_no_namespace_of_the_scope(
    pg_url: str, tmp_path: Path
) -> None:
    with ckptdb.open(pg_url, keys={"tenant": OLD}) as db:
        db.set_encryption("t/", key_id="tenant")
        db.commit("t/0", {"secret": b"first"})
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    writer = spawn_script(script, pg_url, "6")
    time.sleep(1.5)
    with ckptdb.open(pg_url, keys={"tenant": OLD}) as db:
        db.shred_key("tenant")
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err[-2000:]
    assert out.split()[0] == "shredded"  # its next commit was refused
    with ckptdb.open(pg_url) as db:
        # a commit in flight finished before its namespace was dropped, or was refused
        assert not [n.name for n in db.namespaces() if n.name.startswith("t/")]
        assert db.verify().ok
