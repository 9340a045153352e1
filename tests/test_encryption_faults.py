"""Encryption at rest under faults: minimal reproductions of what the fault sweep
(tools/fault_sweep.py: commit-sealed, rotate-key, shred-key) found, on real files through
the fault-injecting VFS. The power-loss image is each file as of its last successful sync."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import disk_bytes, raw_sql

import ckptdb
from ckptdb import errors
from ckptdb.connection.faults import FaultVFS

KEY = bytes(range(32))


@pytest.fixture
def vfs() -> Iterator[FaultVFS]:
    fault = FaultVFS(f"ckptdb-test-encryption-faults-{os.getpid()}")
    yield fault
    fault.unregister()


def _wrapped(path: Path) -> bytes:
    ((wrapped,),) = raw_sql(path, "SELECT wrapped_key FROM key_scope WHERE key_id = 'a'")
    assert isinstance(wrapped, bytes)
    return wrapped


def test_an_acknowledged_shred_leaves_no_wrapped_key_after_power_loss(
    vfs: FaultVFS, tmp_path: Path
) -> None:
    """shred_key truncates the WAL last, and a truncation is not durable until the file is
    synced: a power loss right after the acknowledgement brought back the WAL as of its
    last sync -- with the frame holding the scope's wrapped key (here: a scope with no
    namespace, so nothing restarted the WAL during the shred)."""
    path = tmp_path / "db.ckpt"
    with ckptdb.open(path, vfs=vfs.name, keys={"a": KEY}) as db:
        db.commit("plain/x", {"v": b"plaintext"})
        db.set_encryption("tenant-a/", key_id="a")
        wrapped = _wrapped(path)
        assert wrapped in Path(f"{path}-wal").read_bytes()
        with vfs.armed(vfs.count_calls(), watch=[path]):
            report = db.shred_key("a")
        assert report.wal_truncated
        assert wrapped not in disk_bytes(path)
        vfs.power_image(path, tmp_path / "power")
    power = tmp_path / "power" / path.name
    assert wrapped not in disk_bytes(power)
    with ckptdb.open(power, keys={"a": KEY}) as db:  # and the power-loss image is shredded
        assert [s.shredded for s in db.key_scopes()] == [True]
        assert db.current("plain/x").read("v") == b"plaintext"  # type: ignore[union-attr]
        with pytest.raises(errors.KeyShreddedError):
            db.commit("tenant-a/t", {"v": b"x"})
        assert db.verify().ok


# -- found by the corruption campaign (tools/corruption_campaign.py, sealed targets) ------


def _sealed_file(path: Path) -> None:
    with ckptdb.open(path, keys={"a": KEY}) as db:
        db.set_encryption("tenant-a/", key_id="a")
        db.commit("tenant-a/t", {"state": b"sealed state", "big": os.urandom(70_000)})
        db.commit("plain/p", {"v": b"plaintext"})


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE key_scope SET wrapped_key = substr(wrapped_key, 1, 59)",
        "UPDATE key_scope SET wrapped_key = zeroblob(60)",
        "UPDATE key_scope SET key_generation = 7",
        "UPDATE key_scope SET prefix = 'tenant-A/'",
    ],
)
def test_verify_with_the_key_reports_a_damaged_key_scope_row(tmp_path: Path, damage: str) -> None:
    """A damaged key_scope row makes every read of the scope fail (typed: key_mismatch or
    corrupt, never bytes), and verify -- given the scope's key -- must say so: it used to
    fall back to checking sealed digests only and report ok."""
    path = tmp_path / "db.ckpt"
    _sealed_file(path)
    raw_sql(path, damage)
    with ckptdb.open(path, keys={"a": KEY}) as db:
        with pytest.raises((errors.KeyMismatchError, errors.CorruptionError)):
            db.get(db.resolve("tenant-a/t@current")).read("state")
        report = db.verify()
        assert not report.ok
        assert {p.code for p in report.problems} & {"key_mismatch", "scope_mismatch"}
        assert db.current("plain/p").read("v") == b"plaintext"  # type: ignore[union-attr]


def test_verify_reports_a_namespace_moved_out_of_its_key_scope(tmp_path: Path) -> None:
    path = tmp_path / "db.ckpt"
    _sealed_file(path)
    raw_sql(path, "UPDATE namespace SET scope_id = NULL WHERE name = 'tenant-a/t'")
    with ckptdb.open(path, keys={"a": KEY}) as db:
        problems = db.verify().problems
    assert [(p.code, p.namespace) for p in problems] == [("scope_mismatch", "tenant-a/t")]


def test_verify_without_the_key_or_with_it_on_an_intact_file(tmp_path: Path) -> None:
    path = tmp_path / "db.ckpt"
    _sealed_file(path)
    with ckptdb.open(path) as db:
        report = db.verify()
        assert report.ok and report.sealed_only == ["a"]
    with ckptdb.open(path, keys={"a": KEY}) as db:
        report = db.verify()
        assert report.ok and report.sealed_only == []
    with ckptdb.open(path, keys={"a": bytes(32)}) as db:  # a wrong key is a finding too
        report = db.verify()
        assert [p.code for p in report.problems] == ["key_mismatch"]
        assert report.sealed_only == ["a"]  # its sealed bytes were still checked
