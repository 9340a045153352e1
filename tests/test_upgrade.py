"""Every fixture vintage (a database written by an older schema version, committed under
tests/fixtures/) upgrades to the current schema with every checkpoint and pointer intact."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

import ckptdb
from ckptdb.store.migrations import core_set

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("v*.ckpt"))


def test_there_is_a_fixture_for_every_older_version() -> None:
    versions = {int(p.stem[1:]) for p in FIXTURES}
    assert versions >= set(range(1, core_set().latest)), (
        "add a fixture of the version before each new migration (tools/make_fixture.py)"
    )


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_upgrades_and_keeps_every_checkpoint(fixture: Path, tmp_path: Path) -> None:
    expected = json.loads(fixture.with_suffix(".json").read_text())
    assert hashlib.sha256(fixture.read_bytes()).hexdigest() == expected["sha256"], (
        "a committed fixture must never change"
    )
    copy = tmp_path / fixture.name
    shutil.copyfile(fixture, copy)
    keys = {k: bytes.fromhex(v) for k, v in expected.get("keys", {}).items()}
    with ckptdb.open(copy, keys=keys or None) as db:
        report = db.verify()
        assert report.ok, report.problems
        assert db.stats().schema_version == core_set().latest
        assert {n.name for n in db.namespaces()} == set(expected["namespaces"])
        for name, want in expected["namespaces"].items():
            pointer = db.pointer(name)
            assert pointer is not None
            assert pointer.current_id == want["current"]
            assert pointer.fallback_id == want["fallback"]
            assert pointer.revision == want["revision"]
            assert pointer.digest == want["pointer_digest"]
            lineage = db.lineage(name)
            assert [c.id for c in lineage] == [c["id"] for c in want["lineage"]]
            for info, want_cp in zip(lineage, want["lineage"], strict=True):
                assert info.generation == want_cp["generation"]
                assert info.metadata == want_cp["metadata"]
                assert {e.name: {"digest": e.digest, "size": e.size} for e in info.entries} == (
                    want_cp["entries"]
                )
                cp = db.get(info.id)
                cp.verify()
            loaded = db.load(name)
            assert loaded.disposition == "exact"
        # The upgraded file keeps working: commit on top of an old lineage.
        ack = db.commit("agent/brain-1", {"after-upgrade": b"ok"})
        assert ack.parent_id == expected["namespaces"]["agent/brain-1"]["current"]
