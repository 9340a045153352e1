"""Errors that say what happened (issue 12, section 4): a full disk is disk_full, not an
unknown outcome; verify still reports on a full disk; a missing directory is not
retryable; caller text with bytes that are not UTF-8 never crashes fallback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import ckptdb
from ckptdb import errors
from ckptdb.cli import main
from ckptdb.connection.faults import FaultPlan, FaultVFS


@pytest.fixture(scope="module")
def vfs() -> Iterator[FaultVFS]:
    fault = FaultVFS("ckptdb-full-disk")
    yield fault
    fault.unregister()


@pytest.mark.parametrize("payload", [b"x" * 100, b"y" * 200_000])
def test_a_full_disk_is_reported_as_disk_full_and_nothing_lands(
    vfs: FaultVFS, tmp_path: Path, payload: bytes
) -> None:
    path = tmp_path / "full.ckpt"
    with ckptdb.open(path, vfs=vfs.name) as db:
        base = db.commit("ns", {"a": b"base"})
        with (
            vfs.armed(FaultPlan(op="write", nth=1, error="full", persistent=True)),
            pytest.raises(errors.DiskFullError) as exc,
        ):
            db.commit("ns", {"a": payload})
        assert exc.value.code == "disk_full" and not exc.value.retryable
        assert db.current("ns").id == base.checkpoint_id  # type: ignore[union-attr]
        # Space is back: the same commit now lands.
        assert db.commit("ns", {"a": payload}).parent_id == base.checkpoint_id


def test_verify_on_a_full_disk_still_returns_its_report(vfs: FaultVFS, tmp_path: Path) -> None:
    path = tmp_path / "v.ckpt"
    with ckptdb.open(path, vfs=vfs.name) as db:
        db.commit("ns", {"a": b"1"})
        with vfs.armed(FaultPlan(op="write", nth=1, error="full", persistent=True)):
            report = db.verify()
        assert report.ok and report.receipt_id is None
        assert report.receipt_error is not None and report.receipt_error.startswith("disk_full")


def test_a_missing_parent_directory_is_a_typed_refusal(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "dir" / "x.ckpt"
    with pytest.raises(errors.DatabaseFileError) as exc:
        ckptdb.open(target)
    assert not exc.value.retryable and "does not exist" in str(exc.value)
    result = CliRunner().invoke(main, ["init", str(target), "--json"])
    assert result.exit_code == 6, result.output
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("text", ["bad \udcff byte", "\ud800", "ok" * 5000])
def test_a_validator_message_with_any_text_never_crashes_fallback(
    db: ckptdb.Database, text: str
) -> None:
    db.commit("ns", {"a": b"1"})
    db.commit("ns", {"a": b"2"})
    calls = []

    def validator(cp: ckptdb.Checkpoint) -> bool:
        calls.append(cp.id)
        if len(calls) == 1:
            raise ValueError(text)
        return True

    result = db.load("ns", fallback=True, validator=validator)
    assert result.disposition == "degraded_fallback"
    assert result.receipt is not None and result.receipt.receipt_id is not None
    stored = db.receipts(kind="fallback")[0]
    json.dumps(stored.model_dump(mode="json"))  # storable and printable as JSON
    assert len(stored.body["rejected"][0]["detail"]) <= 2100
