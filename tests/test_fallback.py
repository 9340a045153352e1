"""Verified reads and explicit, receipted fallback when the newest checkpoint is damaged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import raw_sql, store_wrong_types

import ckptdb
from ckptdb import errors

CHUNK = 64 * 1024


def _corrupt_blob(db_path: str, digest: str) -> None:
    """Flip one byte of a blob's stored bytes (inline, or its first chunk)."""
    blob_id, chunk_count, inline = raw_sql(
        db_path, "SELECT blob_id, chunk_count, inline_data FROM blob WHERE digest = ?", (digest,)
    )[0]
    if chunk_count == 0:
        data = bytearray(inline)  # type: ignore[arg-type]
        data[len(data) // 2] ^= 0x01
        raw_sql(
            db_path, "UPDATE blob SET inline_data = ? WHERE blob_id = ?", (bytes(data), blob_id)
        )
        return
    chunk_id = raw_sql(
        db_path, "SELECT chunk_id FROM blob_chunk WHERE blob_id = ? AND seq = 0", (blob_id,)
    )[0][0]
    data = bytearray(
        raw_sql(db_path, "SELECT data FROM chunk_data WHERE chunk_id = ?", (chunk_id,))[0][0]
    )  # type: ignore[arg-type]
    data[7] ^= 0x80
    raw_sql(db_path, "UPDATE chunk_data SET data = ? WHERE chunk_id = ?", (bytes(data), chunk_id))


@pytest.fixture
def chunked(db_path: Path) -> ckptdb.Database:
    return ckptdb.open(db_path, chunk_size=CHUNK)


def test_corrupt_chunk_makes_load_raise_and_fallback_return_parent(
    chunked: ckptdb.Database,
) -> None:
    db = chunked
    parent = db.commit("brain", {"model.bin": os.urandom(3 * CHUNK + 5), "s": b"1"})
    head = db.commit("brain", {"model.bin": os.urandom(3 * CHUNK + 5), "s": b"2"})
    digest = db.get(head.checkpoint_id).entries["model.bin"].digest
    _corrupt_blob(db.path, digest)

    cp = db.current("brain")
    assert cp is not None
    with pytest.raises(errors.CorruptionError) as exc:
        cp.read("model.bin")
    assert exc.value.checkpoint_id == head.checkpoint_id and exc.value.entry == "model.bin"
    with cp.open("model.bin") as fh, pytest.raises(errors.CorruptionError):
        fh.read()

    with pytest.raises(errors.CorruptionError) as exc2:
        db.load("brain")
    assert exc2.value.code == "corrupt"

    loaded = db.load("brain", fallback=True)
    assert loaded.disposition == "degraded_fallback" and loaded.degraded
    assert loaded.checkpoint.id == parent.checkpoint_id
    receipt = loaded.receipt
    assert receipt is not None and receipt.receipt_id is not None
    assert receipt.requested_id == head.checkpoint_id
    assert receipt.selected_id == parent.checkpoint_id
    assert [r.checkpoint_id for r in receipt.rejected] == [head.checkpoint_id]
    assert receipt.rejected[0].entry == "model.bin"
    stored = db.receipts(kind="fallback")
    assert stored[0].receipt_id == receipt.receipt_id
    assert stored[0].body["selected_id"] == parent.checkpoint_id
    # Fallback never moves CURRENT by itself.
    assert db.pointer("brain").current_id == head.checkpoint_id  # type: ignore[union-attr]
    report = db.verify()
    assert not report.ok
    affected = {(p.checkpoint_id, p.entry) for p in report.problems if p.code == "entry_corrupt"}
    assert (head.checkpoint_id, "model.bin") in affected


def test_corrupt_current_and_parent_give_no_usable_checkpoint(db: ckptdb.Database) -> None:
    a = db.commit("brain", {"state": b"state-one"})
    b = db.commit("brain", {"state": b"state-two"})
    _corrupt_blob(db.path, db.get(a.checkpoint_id).entries["state"].digest)
    _corrupt_blob(db.path, db.get(b.checkpoint_id).entries["state"].digest)
    with pytest.raises(errors.NoUsableCheckpointError) as exc:
        db.load("brain", fallback=True)
    assert exc.value.code == "no_usable_checkpoint"
    assert "no usable checkpoint" in str(exc.value)
    receipt = db.receipts(kind="fallback")[0]
    assert receipt.body["disposition"] == "none_usable"
    assert len(receipt.body["rejected"]) == 2


def test_damaged_manifest_is_detected_and_skipped(db: ckptdb.Database) -> None:
    a = db.commit("brain", {"state": b"1"}, metadata={"turn": 1})
    b = db.commit("brain", {"state": b"2"}, metadata={"turn": 2})
    raw_sql(
        db.path, "UPDATE checkpoint SET metadata = '{\"turn\":99}' WHERE id = ?", (b.checkpoint_id,)
    )
    with pytest.raises(errors.CorruptionError, match="does not hash"):
        db.current("brain")
    loaded = db.load("brain", fallback=True)
    assert loaded.checkpoint.id == a.checkpoint_id
    assert loaded.receipt is not None
    assert loaded.receipt.rejected[0].code == "corrupt:manifest_mismatch"


def test_damaged_pointer_fails_closed(db: ckptdb.Database) -> None:
    db.commit("brain", {"state": b"1"})
    db.commit("brain", {"state": b"2"})
    raw_sql(db.path, "UPDATE pointer SET revision = revision + 5")
    for fallback in (False, True):
        with pytest.raises(errors.CorruptionError, match="refusing to guess"):
            db.load("brain", fallback=fallback)
    assert any(p.code == "pointer_mismatch" for p in db.verify().problems)


def test_validator_rejection_falls_back_but_never_passes_as_exact(db: ckptdb.Database) -> None:
    good = db.commit("brain", {"state": b"ok"}, metadata={"authorized": True})
    db.commit("brain", {"state": b"new"}, metadata={"authorized": False})

    def authority(cp: ckptdb.Checkpoint) -> bool:
        return bool(cp.metadata["authorized"])

    with pytest.raises(errors.ValidatorRejectedError):
        db.load("brain", validator=authority)
    loaded = db.load("brain", fallback=True, validator=authority)
    assert loaded.disposition == "degraded_fallback"
    assert loaded.checkpoint.id == good.checkpoint_id
    assert loaded.receipt is not None
    assert loaded.receipt.rejected[0].code == "rejected_by_validator"

    def raising(cp: ckptdb.Checkpoint) -> None:
        if cp.metadata["authorized"] is False:
            raise RuntimeError("epoch mismatch")

    loaded = db.load("brain", fallback=True, validator=raising)
    assert loaded.receipt is not None and "epoch mismatch" in loaded.receipt.rejected[0].detail


def test_exact_load_has_no_receipt(db: ckptdb.Database) -> None:
    ack = db.commit("brain", {"state": b"1"})
    loaded = db.load("brain", fallback=True)
    assert loaded.disposition == "exact" and loaded.receipt is None
    assert loaded.checkpoint.id == ack.checkpoint_id
    assert db.receipts(kind="fallback") == []


def test_swapped_chunk_order_is_caught_before_any_byte(chunked: ckptdb.Database) -> None:
    db = chunked
    data = os.urandom(CHUNK) + os.urandom(CHUNK)
    ack = db.commit("brain", {"big": data})
    first, second = (r[0] for r in raw_sql(db.path, "SELECT chunk_id FROM blob_chunk ORDER BY seq"))
    raw_sql(db.path, "UPDATE blob_chunk SET chunk_id = ? WHERE seq = 0", (second,))
    raw_sql(db.path, "UPDATE blob_chunk SET chunk_id = ? WHERE seq = 1", (first,))
    cp = db.get(ack.checkpoint_id)
    with pytest.raises(errors.CorruptionError, match="chunk list"):
        cp.open("big")
    with pytest.raises(errors.CorruptionError):
        cp.read("big")


def test_verify_reports_clean_database_and_stores_receipt(db: ckptdb.Database) -> None:
    db.commit("a", {"x": os.urandom(1000)})
    db.commit("b", {"y": b"2"})
    report = db.verify()
    assert report.ok and report.sqlite_integrity == "ok"
    assert report.checkpoints_checked == 2 and report.pointers_checked == 2
    assert report.receipt_id is not None
    quick = db.verify(quick=True)
    assert quick.ok and quick.bytes_checked == 0
    assert [r.kind for r in db.receipts()] == ["verify", "verify"]


def test_verify_detects_altered_history(db: ckptdb.Database) -> None:
    db.commit("a", {"x": b"1"})
    db.commit("a", {"x": b"2"})
    raw_sql(db.path, "UPDATE pointer_history SET current_id = ? WHERE revision = 2", ("f" * 64,))
    codes = {p.code for p in db.verify().problems}
    assert "history_mismatch" in codes


def test_recommitting_damaged_content_repairs_it(chunked: ckptdb.Database) -> None:
    db = chunked
    small, big = b"small state", os.urandom(2 * CHUNK + 3)
    first = db.commit("brain", {"s": small, "big": big})
    cp = db.get(first.checkpoint_id)
    _corrupt_blob(db.path, cp.entries["s"].digest)
    _corrupt_blob(db.path, cp.entries["big"].digest)
    assert not db.verify().ok
    # Dedup would otherwise make the new checkpoint reference the damaged bytes.
    second = db.commit("other", {"s": small, "big": big})
    assert second.bytes_stored == len(small) + CHUNK
    assert db.get(second.checkpoint_id).read("big") == big
    assert db.get(first.checkpoint_id).read("s") == small
    assert db.verify().ok
    repair = db.receipts(kind="repair")[0]
    assert set(repair.body["digests"]) == {cp.entries["s"].digest, _first_chunk_digest(db, big)}


def _first_chunk_digest(db: ckptdb.Database, data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data[:CHUNK]).hexdigest()


def test_a_failed_commit_leaves_no_repair_for_an_unrelated_commit(db: ckptdb.Database) -> None:
    """Regression: repairs used to be kept on the blob store between transactions, so a
    commit that failed after repairing left them to be recorded by the next, unrelated
    commit. A repair is now what a function returns, recorded in the same transaction."""
    state = b"the state the damaged copy should hold"
    first = db.commit("brain", {"a": state})
    digest = db.get(first.checkpoint_id).entries["a"].digest
    _corrupt_blob(db.path, digest)
    missing = ckptdb.BlobRef("e" * 64, 3)
    with pytest.raises(ckptdb.errors.BlobMissingError):
        db.commit("brain", {"a": state, "b": missing})
    assert db.receipts(kind="repair") == []
    with pytest.raises(ckptdb.CorruptionError):
        db.get(first.checkpoint_id).read("a")  # the failed commit's repair rolled back
    db.commit("elsewhere", {"x": b"unrelated"})
    assert db.receipts(kind="repair") == []
    db.commit("brain", {"a": state, "b": b"present"})  # a commit that repairs, and lands
    (repair,) = db.receipts(kind="repair")
    assert repair.body["digests"] == [digest] and repair.namespace == "brain"
    assert db.get(first.checkpoint_id).read("a") == state


def test_a_verified_manifest_is_remembered_but_damage_is_still_found(db: ckptdb.Database) -> None:
    """A handle remembers manifests that verified (immutable): a later lookup of the same
    row skips re-hashing -- what it hands out is still the verified manifest, bytes are
    still checked on every read, and verify and other handles still see the damage."""
    ack = db.commit("ns", {"a": b"alpha", "b": b"beta"})
    assert db.get(ack.checkpoint_id).read("a") == b"alpha"
    # damage after caching
    raw_sql(db.path, "UPDATE checkpoint SET entries = replace(entries, '[\"b\",', '[\"z\",')")
    cp = db.get(ack.checkpoint_id)  # the remembered manifest, not the damaged rows
    assert set(cp.entries) == {"a", "b"} and cp.read("a") == b"alpha"
    assert "manifest_mismatch" in {p.code for p in db.verify().problems}
    with ckptdb.open(db.path) as other, pytest.raises(ckptdb.CorruptionError):
        other.get(ack.checkpoint_id)


def test_fallback_past_a_damaged_manifest_whose_parent_moved_to_a_sibling(
    db: ckptdb.Database, db_path: Path
) -> None:
    """Found by the corruption campaign (seed 7, 1,500 cases, case 1454 at v5, 1394 and
    1398 at v6; a known limit until this test passed): c4 was committed on c3 (a branch
    off c1, beside c2); damage moves c4's stored parent to c2, which has c3's generation.
    c4 no longer hashes to its id. Fallback used to take the stored link (an intact
    checkpoint one generation older) and return c2, off CURRENT's lineage. c4's id
    recomputes with c3, the previous CURRENT, as its parent: that proof comes first."""
    c1 = db.commit("ns", {"s": b"1"}).checkpoint_id
    c2 = db.commit("ns", {"s": b"2"}).checkpoint_id
    c3 = db.commit("ns", {"s": b"3 on 1"}, base=c1).checkpoint_id
    c4 = db.commit("ns", {"s": b"4 on 3"}).checkpoint_id
    raw_sql(db_path, "UPDATE checkpoint SET parent_id = ? WHERE id = ?", (c2, c4))
    with ckptdb.open(db_path) as again:
        result = again.load("ns", fallback=True)
    assert result.checkpoint.id == c3, (result.checkpoint.id[:12], {c2[:12]: "c2"})


def _damage_manifest(path: Path, checkpoint_id: str) -> None:
    raw_sql(path, "UPDATE checkpoint SET metadata = '{\"x\":1}' WHERE id = ?", (checkpoint_id,))


def _make_row_unreadable(path: Path, checkpoint_id: str) -> None:
    # A flipped serial-type byte: the row's generation is no longer an integer.
    changed = store_wrong_types(
        path, "checkpoint", {"generation": "x"}, "WHERE id = ?", (checkpoint_id,)
    )
    assert changed == 1


def test_fallback_past_an_unreadable_row_follows_the_history_of_a_linear_lineage(
    db: ckptdb.Database, db_path: Path
) -> None:
    ids = [db.commit("ns", {"s": str(i).encode()}).checkpoint_id for i in range(4)]
    _damage_manifest(db_path, ids[3])
    _make_row_unreadable(db_path, ids[2])
    with ckptdb.open(db_path) as again:
        result = again.load("ns", fallback=True)
    # The pointer history's record (the previous CURRENT) has the generation predicted.
    assert result.checkpoint.id == ids[1]
    assert [r.checkpoint_id for r in result.receipt.rejected] == [ids[3], ids[2]]  # type: ignore[union-attr]


def test_fallback_does_not_follow_the_history_past_a_branch_onto_another_lineage(
    db: ckptdb.Database, db_path: Path
) -> None:
    """Found by the corruption campaign (seed 23, 3,000 cases, case 1234, a page flip):
    g5 was committed on g1 while g4 was CURRENT, so the pointer history names g4 as what
    CURRENT was before g5 -- but g4 is not g5's parent. With g6's manifest damaged and g5's
    row unreadable, fallback used to return g4, a checkpoint off CURRENT's lineage."""
    g1 = db.commit("ns", {"s": b"1"}).checkpoint_id
    g2 = db.commit("ns", {"s": b"2"}).checkpoint_id
    db.commit("ns", {"s": b"3"})
    db.set_current("ns", g2, reason="rollback")
    g4 = db.commit("ns", {"s": b"4 on 2"}).checkpoint_id
    g5 = db.commit("ns", {"s": b"5 on 1"}, base=g1).checkpoint_id
    g6 = db.commit("ns", {"s": b"6 on 5"}).checkpoint_id
    _damage_manifest(db_path, g6)
    _make_row_unreadable(db_path, g5)
    with ckptdb.open(db_path) as again:
        with pytest.raises(errors.CorruptionError) as caught:
            again.load("ns", fallback=True)
        assert caught.value.details["reason"] == "lineage_unknown"
        assert caught.value.details["checkpoint_id"] == g5
        assert g4[:12] not in str(caught.value)
        # The operator's way on: set CURRENT to the checkpoint to resume from.
        again.set_current("ns", g1)
        assert again.load("ns").checkpoint.id == g1


def _point_index_entry_elsewhere(path: Path, index: str, key: str, other_rowid: int) -> None:
    """Damage one entry of a unique text index (a closed file, WAL checkpointed): the rowid
    stored after ``key`` now names another row, as a flipped byte would."""
    (root,) = raw_sql(path, "SELECT rootpage FROM sqlite_schema WHERE name = ?", (index,))[0]
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    page = slice((int(root) - 1) * page_size, int(root) * page_size)  # type: ignore[call-overload]
    at = bytes(data[page]).index(key.encode()) + len(key.encode())
    start = (int(root) - 1) * page_size  # type: ignore[call-overload]
    assert data[start + at] < 0x80  # a one-byte integer (rowid < 128)
    data[start + at] = other_rowid
    path.write_bytes(bytes(data))


def _point_id_index_entry_elsewhere(path: Path, checkpoint_id: str, other_seq: int) -> None:
    """Damage one entry of the index on checkpoint ids: its seq names another row."""
    _point_index_entry_elsewhere(path, "sqlite_autoindex_checkpoint_1", checkpoint_id, other_seq)


def test_current_of_a_namespace_whose_name_index_entry_leads_to_another_namespace(
    db_path: Path,
) -> None:
    """Found by the corruption campaign (seed 29, 1,500 cases, a WAL frame of an index leaf
    rewritten with a valid checksum): the entry of one namespace's name in the index on
    names led to another namespace's row, and ``current`` returned that namespace's CURRENT
    -- intact, its digest right for its own name, but not a checkpoint of the namespace
    asked for. The pointer read checks the name it found; on a mismatch it searches the
    table, which has the right row."""
    with ckptdb.open(db_path) as db:
        alpha = db.commit("alpha", {"s": b"a"}).checkpoint_id
        gamma = db.commit("gamma", {"s": b"g"}).checkpoint_id
    ns_ids = dict(raw_sql(db_path, "SELECT name, namespace_id FROM namespace"))
    _point_index_entry_elsewhere(
        db_path,
        "sqlite_autoindex_namespace_1",
        "gamma",
        int(ns_ids["alpha"]),  # type: ignore[call-overload]
    )
    with ckptdb.open(db_path) as db:
        current = db.current("gamma")
        assert current is not None and current.id == gamma and current.read("s") == b"g"
        assert db.load("gamma").checkpoint.id == gamma
        assert db.pointer("gamma").current_id == gamma  # type: ignore[union-attr]
        assert db.current("alpha").id == alpha  # type: ignore[union-attr]
        assert not db.verify().ok  # the index damage is reported


def test_fallback_reads_a_checkpoint_whose_id_index_entry_leads_to_another_row(
    db_path: Path,
) -> None:
    """Found by the corruption campaign (seed 41, 1,500 cases, case 159): SQLite reads an
    indexed column from the index, so a damaged entry of the id index gave CURRENT's id
    with another row's columns -- a manifest that does not hash, whose stored parent link
    fallback then followed past three intact checkpoints. The row is read by its rowid now,
    and the table, searched, has CURRENT intact."""
    with ckptdb.open(db_path) as db:
        ids = [db.commit("ns", {"s": str(i).encode()}).checkpoint_id for i in range(4)]
    seqs = dict(raw_sql(db_path, "SELECT id, seq FROM checkpoint"))
    _point_id_index_entry_elsewhere(db_path, ids[3], int(seqs[ids[1]]))  # type: ignore[call-overload]
    with ckptdb.open(db_path) as db:
        result = db.load("ns", fallback=True)
        assert result.checkpoint.id == ids[3]
        assert result.checkpoint.read("s") == b"3"
        assert not db.verify().ok  # the index damage is reported


def test_fallback_does_not_follow_a_damaged_unproven_record_onto_another_branch(
    db: ckptdb.Database, db_path: Path
) -> None:
    """Found in review: x was committed on a1 while b was CURRENT, so b is x's fallback but
    not its parent. With x's row unreadable and b's manifest damaged, the walk rejected b
    and then trusted b's own parent link, returning b0 -- off x's lineage x, a1, r."""
    r = db.commit("ns", {"s": b"r"}).checkpoint_id
    a1 = db.commit("ns", {"s": b"a1"}).checkpoint_id
    b0 = db.commit("ns", {"s": b"b0"}, base=r).checkpoint_id
    b = db.commit("ns", {"s": b"b"}).checkpoint_id
    x = db.commit("ns", {"s": b"x"}, base=a1).checkpoint_id
    _make_row_unreadable(db_path, x)
    _damage_manifest(db_path, b)
    with ckptdb.open(db_path) as again:
        with pytest.raises(errors.CorruptionError) as caught:
            again.load("ns", fallback=True)
        assert caught.value.details["reason"] == "lineage_unknown"
        assert b0[:12] not in str(caught.value)
