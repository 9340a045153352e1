"""The corruption campaign (tools/corruption_campaign.py) in quick mode, and a minimal,
deterministic reproduction of every bug it found.

The quick campaign runs once per module (a few hundred cases in worker subprocesses, so a
crash or hang is observed rather than fatal). ``CKPTDB_CAMPAIGN_SEED`` and
``CKPTDB_CAMPAIGN_CASES`` change the seed and the number of cases.

Every bug the campaign found is fixed; its reproduction stays as a regression test.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

import apsw
import pytest
from click.testing import CliRunner
from conftest import raw_sql, run_tool, store_wrong_types

import ckptdb
from ckptdb import errors
from ckptdb.cli import main
from ckptdb.testing.wal import wal_resum

SEED = int(os.environ.get("CKPTDB_CAMPAIGN_SEED", "20250611"))
CASES = int(os.environ.get("CKPTDB_CAMPAIGN_CASES", "300"))  # the tool's --quick size
CHUNK = 64 * 1024


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    summary = run_tool(
        "corruption_campaign",
        "--cases",
        str(CASES),
        "--seed",
        str(SEED),
        "--timeout",
        "30",
        tmp=tmp_path_factory.mktemp("campaign"),
        ok=False,  # exit 1 means a bar broke; the tests below say which
    )
    print(f"corruption campaign seed {SEED}: {summary['counts']}")
    return summary


def _failures(summary: dict[str, Any], label: str) -> list[str]:
    return [
        f"case {f['index']} {f['variant']} {f['kind']}: "
        + "; ".join(f["wrong"] + f["wrong_checkpoint"] + f["untyped"])[:300]
        for f in summary["failures"]
        if label in f["labels"]
    ][:10]


# -- the quick campaign --------------------------------------------------------------------


def test_quick_campaign_exercises_every_region_and_detects(quick: dict[str, Any]) -> None:
    """The campaign cannot pass vacuously: it injected what it was asked to, in every
    family of damage, read a lot of bytes, and most cases had an observable effect that
    ckptdb caught (refused at open or reported by verify)."""
    assert not quick["harness_errors"], quick["harness_errors"][0]
    counts = quick["counts"]
    assert counts["injected"] >= 0.9 * CASES, quick["not_applied"]
    kinds = set(quick["by_kind"])
    for family in ("page_flip", "page_zero", "page_misdirected", "db_header_flip", "truncate"):
        assert family in kinds, kinds
    assert sum(k.startswith("row_") for k in kinds) >= 20, kinds
    assert sum(k.startswith("wal_") for k in kinds) >= 4, kinds
    targets = set(quick["by_target"])
    for region in ("chunk_data:overflow", "checkpoint:leaf", "index:leaf", "wal_header"):
        assert region in targets, targets
    assert quick["reads"]["ok"] > 5000
    assert (counts["detected"] + counts["refused"]) >= 0.4 * counts["injected"], counts
    assert counts["benign"] > 0 and counts["rolled_back"] > 0, counts


def test_quick_campaign_damages_the_encrypted_scope(quick: dict[str, Any]) -> None:
    """Sealed chunks, sealed inline blobs and the key_scope row are among the targets; the
    encrypted namespaces were read with their key (most reads succeed), damage to them was
    refused with CorruptionError or KeyMismatchError only and caught by verify, and
    fallback still found intact encrypted checkpoints."""
    targets = set(quick["by_target"])
    for target in ("sealed_chunk", "sealed_inline", "key_scope"):
        assert target in targets, targets
    sealed = quick["sealed_targets"]
    assert sealed["outcomes"]["injected"] >= 20, sealed
    assert sealed["outcomes"].get("sealed_wrong_error", 0) == 0, sealed
    assert sealed["outcomes"].get("detected", 0) >= 0.8 * sealed["outcomes"]["injected"], sealed
    assert sealed["fallback_results"].get("returned_newest_intact", 0) > 0, sealed
    assert {"corrupt", "key_mismatch"} <= set(quick["sealed_refusal_codes"])


def test_quick_campaign_damages_what_storage_format_3_added(quick: dict[str, Any]) -> None:
    """Packed entries, blob_ref rows, labels and seq_high_water are among the targets; damage
    to packed entries and blob_ref is caught (refused or reported by verify) in most cases;
    every case ran a GC that deleted checkpoints and blobs and re-read what it kept; every
    recorded label was looked up."""
    by_target = quick["by_target"]
    for target in ("entries", "blob_ref", "label", "seq_high_water"):
        assert target in by_target, set(by_target)
    for target in ("entries", "blob_ref"):
        row = by_target[target]
        assert row.get("detected", 0) + row.get("refused", 0) >= 0.7 * row["injected"], row
    gc = quick["format3"]["gc"]
    assert gc["completed"] >= 0.7 * quick["counts"]["injected"], gc
    assert gc["checkpoints_deleted"] > 0 and gc["blobs_deleted"] > 0 and gc["reads_ok"] > 1000
    assert quick["format3"]["labels"]["checked"] > 1000


def test_quick_campaign_no_crash_no_hang_no_wrong_bytes_nothing_undetected(
    quick: dict[str, Any],
) -> None:
    """The bars that hold today: no process crash or hang, never a byte (or manifest) that
    differs from what was committed under that checkpoint id, and verify reports a problem
    whenever a read was refused."""
    counts = quick["counts"]
    for bar in ("crash", "hang", "wrong_bytes", "undetected"):
        assert counts[bar] == 0, (bar, _failures(quick, bar))


def test_quick_campaign_every_zero_bar_holds(quick: dict[str, Any]) -> None:
    counts = quick["counts"]
    broken = {bar: _failures(quick, bar) for bar in quick["failure_bars"] if counts[bar]}
    assert not broken, broken


# -- helpers for the reproductions --------------------------------------------------------


def _tamper(path: Path | str, sql: str, params: tuple[object, ...] = ()) -> None:
    """Change rows behind ckptdb's back (apsw, the same SQLite library; no handle open)."""
    raw_sql(path, sql, params)


def _two_namespaces(path: Path) -> dict[str, str]:
    with ckptdb.open(path) as db:
        ids = {
            "a1": db.commit("alpha", {"s": b"alpha-1"}, metadata={"t": 1}).checkpoint_id,
            "a2": db.commit("alpha", {"s": b"alpha-2"}, metadata={"t": 2}).checkpoint_id,
            "a3": db.commit("alpha", {"s": b"alpha-3"}, metadata={"t": 3}).checkpoint_id,
            "b1": db.commit("beta", {"s": b"beta-secret"}).checkpoint_id,
        }
    return ids


# -- B1: invalid UTF-8 in a TEXT column -----------------------------------------------------


def test_invalid_utf8_in_a_text_column_is_a_typed_error(db_path: Path) -> None:
    ids = _two_namespaces(db_path)
    # One flipped high bit in the stored metadata text of CURRENT of alpha.
    _tamper(
        db_path,
        "UPDATE checkpoint SET metadata = CAST(CAST(metadata AS BLOB) || x'ff' AS TEXT)"
        " WHERE id = ?",
        (ids["a3"],),
    )
    with ckptdb.open(db_path) as db:
        with pytest.raises(errors.CorruptionError):
            db.current("alpha")
        assert db.load("alpha", fallback=True).checkpoint.id == ids["a2"]
        assert not db.verify().ok


# -- B2: ns@current / ns@fallback / ns~N trust an unverified pointer --------------------------


def test_resolve_current_never_follows_a_damaged_pointer_seq_to_another_namespace(
    db_path: Path, tmp_path: Path
) -> None:
    ids = _two_namespaces(db_path)
    # The pointer of alpha now names beta's checkpoint (one integer in one row).
    _tamper(
        db_path,
        "UPDATE pointer SET current_seq = (SELECT seq FROM checkpoint WHERE id = ?)"
        " WHERE namespace_id = (SELECT namespace_id FROM namespace WHERE name = 'alpha')",
        (ids["b1"],),
    )
    with ckptdb.open(db_path) as db:
        # The seq is not covered by the pointer's digest; the ids of the move that set it
        # are, and they name alpha's true CURRENT, which reads back verified.
        assert db.current("alpha").id == ids["a3"]  # type: ignore[union-attr]
        assert db.resolve("alpha@current") == ids["a3"]  # before B2's fix: beta's
        with pytest.raises(errors.CorruptionError) as caught:
            db.commit("alpha", {"s": b"alpha-4"})  # writes refuse until it is repaired
        assert caught.value.details["reason"] == "pointer_dangling"
        assert "foreign_key" in {p.code for p in db.verify().problems}
    result = CliRunner().invoke(main, ["cat", str(db_path), "alpha@current", "s"])
    assert result.stdout_bytes == b"alpha-3"
    result = CliRunner().invoke(
        main, ["checkout", str(db_path), "alpha@current", str(tmp_path / "o")]
    )
    assert result.exit_code == 0 and (tmp_path / "o" / "s").read_bytes() == b"alpha-3"
    with ckptdb.open(db_path) as db:
        db.set_current("alpha", ids["a3"])  # the repair: the pointer's seq is rewritten
        assert db.verify().ok
        db.commit("alpha", {"s": b"alpha-4"})


# -- B3: fallback follows the parent link of a checkpoint whose manifest is damaged ----------


def test_fallback_never_leaves_the_namespace(db_path: Path) -> None:
    ids = _two_namespaces(db_path)
    _tamper(db_path, "UPDATE checkpoint SET parent_id = ? WHERE id = ?", (ids["b1"], ids["a3"]))
    with ckptdb.open(db_path) as db:
        loaded = db.load("alpha", fallback=True)
        assert loaded.checkpoint.namespace == "alpha"  # today: beta's checkpoint
        assert loaded.checkpoint.id == ids["a2"]


@pytest.mark.parametrize(
    ("column", "value"), [("parent_id", "a1"), ("parent_id", None), ("generation", 1)]
)
def test_fallback_returns_the_newest_intact_ancestor(
    db_path: Path, column: str, value: object
) -> None:
    ids = _two_namespaces(db_path)
    new = ids.get(value, value) if isinstance(value, str) else value
    _tamper(db_path, f"UPDATE checkpoint SET {column} = ? WHERE id = ?", (new, ids["a3"]))
    with ckptdb.open(db_path) as db:
        loaded = db.load("alpha", fallback=True)
        assert loaded.checkpoint.id == ids["a2"]  # the parent, which is intact


# -- B4/B5: unverified JSON parsed in lineage and receipts ------------------------------------


@pytest.mark.parametrize("metadata", ['{"t":', "[1, 2]"])
def test_lineage_with_a_damaged_manifest_raises_a_typed_error(db_path: Path, metadata: str) -> None:
    ids = _two_namespaces(db_path)
    _tamper(db_path, "UPDATE checkpoint SET metadata = ? WHERE id = ?", (metadata, ids["a1"]))
    with ckptdb.open(db_path) as db:
        try:
            lineage = db.lineage("alpha")
        except errors.CkptdbError:
            return
        assert [c.id for c in lineage][:2] == [ids["a3"], ids["a2"]]


def test_receipts_with_a_damaged_body_raise_a_typed_error(db_path: Path) -> None:
    _two_namespaces(db_path)
    with ckptdb.open(db_path) as db:
        db.verify()  # stores a receipt
    _tamper(db_path, "UPDATE receipt SET body = '{\"ok\": tru'")
    with ckptdb.open(db_path) as db:
        assert any(p.code == "receipt_mismatch" for p in db.verify().problems)
        with contextlib.suppress(errors.CkptdbError):
            db.receipts()


# -- B6: an I/O error while reading a chunk escapes untranslated ------------------------------


def test_chunk_read_error_is_a_typed_error(tmp_path: Path) -> None:
    src = tmp_path / "src.ckpt"
    with ckptdb.open(src, chunk_size=CHUNK, page_size=4096) as db:
        ack = db.commit("ns", {"big": os.urandom(8 * CHUNK)})
    # Newer commits live in the WAL (a reader holds its snapshot, so nothing is
    # checkpointed); then the main file loses its tail, where the chunk pages are.
    holder = apsw.Connection(str(src))
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM checkpoint").fetchall()
    with ckptdb.open(src) as db:
        db.commit("other", {"x": b"1"})
    damaged = tmp_path / "damaged.ckpt"
    shutil.copy2(src, damaged)
    shutil.copy2(f"{src}-wal", f"{damaged}-wal")
    holder.execute("COMMIT")
    holder.close()
    os.truncate(damaged, os.path.getsize(damaged) // 2)
    with ckptdb.open(damaged) as db:
        cp = db.get(ack.checkpoint_id)
        with pytest.raises(errors.CkptdbError):
            cp.read("big")


# -- B7: a damaged setting breaks open ------------------------------------------------------


@pytest.mark.parametrize("value", ["x", "", "-5", "0"])
def test_damaged_chunk_size_setting_is_refused_with_a_typed_error(
    db_path: Path, value: str
) -> None:
    _two_namespaces(db_path)
    _tamper(db_path, "UPDATE setting SET value = ? WHERE key = 'chunk_size'", (value,))
    with pytest.raises(errors.CkptdbError):
        ckptdb.open(db_path).close()


# -- B8: an inconsistent id index trips an assert ----------------------------------------------


def _flip_index_key(path: Path, checkpoint_id: str) -> None:
    """Change one hex digit of ``checkpoint_id`` inside the unique index on checkpoint.id
    (the table row keeps the right id): the lookup by id no longer finds it."""
    rows = raw_sql(
        path,
        "SELECT pageno FROM dbstat WHERE name = 'sqlite_autoindex_checkpoint_1'"
        " AND pagetype = 'leaf'",
    )
    page_size = int(raw_sql(path, "PRAGMA page_size")[0][0])  # type: ignore[call-overload]
    with open(path, "r+b") as fh:
        for (pageno,) in rows:
            fh.seek((int(pageno) - 1) * page_size)  # type: ignore[call-overload]
            page = bytearray(fh.read(page_size))
            at = page.find(checkpoint_id.encode())
            if at >= 0:
                page[at] = ord("0") if page[at] != ord("0") else ord("1")
                fh.seek((int(pageno) - 1) * page_size)  # type: ignore[call-overload]
                fh.write(page)
                return
    raise AssertionError("id not found in the index")


def test_current_with_a_damaged_id_index_raises_a_typed_error(db_path: Path) -> None:
    ids = _two_namespaces(db_path)
    _flip_index_key(db_path, ids["a3"])
    with ckptdb.open(db_path) as db:
        assert not db.verify().ok  # integrity_check sees the index/table mismatch
        with pytest.raises(errors.CkptdbError):
            db.current("alpha")


# -- B1b: a damaged record yields a value of the wrong type --------------------------------


def _retype_metadata_as_blob(path: Path, checkpoint_id: str) -> None:
    """Edit the record of a checkpoint row in place so that its metadata column, still the
    same bytes, is typed BLOB instead of TEXT (one serial-type byte of the record header:
    what a single flipped bit can do; STRICT only checks types when rows are written)."""
    rows = raw_sql(
        path, "SELECT pageno FROM dbstat WHERE name = 'checkpoint' AND pagetype = 'leaf'"
    )
    page_size = int(raw_sql(path, "PRAGMA page_size")[0][0])  # type: ignore[call-overload]
    with open(path, "r+b") as fh:
        for (pageno,) in rows:
            offset = (int(pageno) - 1) * page_size  # type: ignore[call-overload]
            fh.seek(offset)
            page = bytearray(fh.read(page_size))
            at = page.find(checkpoint_id.encode())
            if at < 0:
                continue
            # The record body starts with the id (seq is the rowid, stored as NULL); the
            # header before it: [length][serial types of the 10 columns].
            for length in range(2, 30):
                start = at - length
                if page[start] != length:
                    continue
                types, i = [], start + 1
                while i < at:
                    value = 0
                    while True:
                        value = (value << 7) | (page[i] & 0x7F)
                        i += 1
                        if page[i - 1] < 0x80:
                            break
                    types.append((value, i))
                # 10 columns, 11 for rows written since schema v5 (code_revision), 13 since
                # v7 (entries, label)
                if len(types) in (10, 11, 13) and types[6][0] >= 13 and types[6][0] % 2 == 1:
                    end = types[6][1]
                    assert page[end - 1] < 0x80, "a one-byte serial type is expected"
                    page[end - 1] -= 1  # TEXT of n bytes (2n+13) -> BLOB of n bytes (2n+12)
                    fh.seek(offset)
                    fh.write(page)
                    return
    raise AssertionError("record not found")


def test_value_of_the_wrong_type_in_a_damaged_record_is_a_typed_error(
    db_path: Path,
) -> None:
    ids = _two_namespaces(db_path)
    _retype_metadata_as_blob(db_path, ids["a3"])
    assert raw_sql(db_path, "SELECT typeof(metadata) FROM checkpoint WHERE id = ?", (ids["a3"],))[
        0
    ] == ("blob",)
    with ckptdb.open(db_path) as db:
        with pytest.raises(errors.CorruptionError):
            db.current("alpha")
        assert db.load("alpha", fallback=True).checkpoint.id == ids["a2"]
        assert not db.verify().ok


# -- B9: a deleted CURRENT goes unreported --------------------------------------------------


def test_verify_reports_a_namespace_that_lost_its_current(db_path: Path) -> None:
    _two_namespaces(db_path)
    _tamper(
        db_path,
        "DELETE FROM pointer WHERE namespace_id ="
        " (SELECT namespace_id FROM namespace WHERE name = 'alpha')",
    )
    with ckptdb.open(db_path) as db:
        assert db.current("alpha") is None  # the lineage is silently orphaned
        assert not db.verify().ok


def test_verify_reports_a_truncated_pointer_history(db_path: Path) -> None:
    _two_namespaces(db_path)
    _tamper(
        db_path,
        "DELETE FROM pointer_history WHERE revision <= 2 AND namespace_id ="
        " (SELECT namespace_id FROM namespace WHERE name = 'alpha')",
    )
    with ckptdb.open(db_path) as db:
        assert not db.verify().ok


# -- B20: a location of the wrong type in a damaged record (full campaign, seed 7, case 754) --


def test_verify_reports_a_receipt_whose_locations_are_not_text(db_path: Path) -> None:
    _two_namespaces(db_path)
    with ckptdb.open(db_path) as db:
        db.gc(ckptdb.RetentionPolicy(keep_last=1), grace=0)
    assert store_wrong_types(db_path, "receipt", {"namespace": 7, "checkpoint_id": 1795964554602})
    assert raw_sql(db_path, "SELECT DISTINCT typeof(checkpoint_id) FROM receipt") == [("integer",)]
    with ckptdb.open(db_path) as db:
        report = db.verify()
        assert not report.ok
        damaged = [p for p in report.problems if p.code == "receipt_mismatch"]
        assert damaged and all(p.checkpoint_id is None and p.namespace is None for p in damaged)
        with pytest.raises(errors.CorruptionError):
            db.receipts()
        assert db.load("alpha").checkpoint.read("s") == b"alpha-3"  # the data is untouched


# -- format 3: what GC and commits do on damaged bookkeeping -------------------------------


def test_gc_refuses_a_file_with_a_deleted_blob_ref_row_and_deletes_nothing(
    db_path: Path,
) -> None:
    """A blob_ref row deleted behind ckptdb's back: a sweep decides from those rows whether
    a blob is still used, so the blob two checkpoints share would go with the one GC
    deletes. Verify reports the row missing; GC refuses before deleting anything (F3-5)."""
    with ckptdb.open(db_path) as db:
        old = db.commit("ns", {"shared": b"s" * 5000, "own": b"1"}).checkpoint_id
        db.commit("ns", {"shared": b"s" * 5000, "own": b"2"})
        kept = db.commit("ns", {"shared": b"s" * 5000, "own": b"3"}).checkpoint_id
    _tamper(
        db_path,
        "DELETE FROM blob_ref WHERE checkpoint_seq IN (SELECT seq FROM checkpoint WHERE id <> ?)"
        " AND blob_id = (SELECT blob_id FROM blob WHERE size = 5000)",
        (old,),
    )
    with ckptdb.open(db_path) as db:
        assert "blob_ref_missing" in {p.code for p in db.verify().problems}
        with pytest.raises(errors.CorruptionError) as caught:
            db.gc(ckptdb.RetentionPolicy(keep_last=1), grace=0)
        assert caught.value.code == "corrupt"
        assert caught.value.details.get("reason") == "blob_ref_missing"
        assert "Nothing was deleted" in str(caught.value)
        assert db.existing([old, kept]) == {old, kept}
        assert db.get(kept).read("shared") == b"s" * 5000
        assert db.get(old).read("shared") == b"s" * 5000
        # A dry run still estimates (it deletes nothing).
        assert db.gc(ckptdb.RetentionPolicy(keep_last=1), grace=0, dry_run=True).dry_run


def test_gc_runs_past_stray_blob_ref_rows_and_one_blob_named_twice(db_path: Path) -> None:
    """What makes the rows and the packed entries differ in number without any row
    missing -- a stray row, a checkpoint naming one blob under two names -- never stops
    GC, and what it keeps reads back."""
    with ckptdb.open(db_path) as db:
        first = db.commit("ns", {"a": b"twice" * 100, "b": b"twice" * 100, "c": b"1"})
        db.commit("ns", {"a": b"other" * 100, "c": b"2"})  # the fallback: kept
        kept = db.commit("ns", {"a": b"twice" * 100, "c": b"3"}).checkpoint_id
    _tamper(
        db_path,
        "INSERT INTO blob_ref (blob_id, checkpoint_seq)"
        " SELECT blob_id, (SELECT max(seq) FROM checkpoint) FROM blob WHERE size = 500"
        " AND blob_id NOT IN (SELECT blob_id FROM blob_ref"
        " WHERE checkpoint_seq = (SELECT max(seq) FROM checkpoint))",
    )
    with ckptdb.open(db_path) as db:
        assert "blob_ref_stray" in {p.code for p in db.verify().problems}
        report = db.gc(ckptdb.RetentionPolicy(keep_last=1), grace=0)
        assert report.deleted_ids == [first.checkpoint_id]
        assert db.get(kept).read("a") == b"twice" * 100


@pytest.mark.parametrize("size", [3000, 400_000])  # inline, chunked
def test_a_blob_deleted_under_a_stored_checkpoint_reads_as_corruption_not_as_collected(
    db_path: Path, size: int
) -> None:
    """A handle that read a checkpoint before (its manifest cached) and finds its blob row
    gone: while the checkpoint is stored that is damage (F3-4; it said the checkpoint was
    garbage-collected); once the checkpoint is gone too, it was collected."""
    with ckptdb.open(db_path) as db:
        cid = db.commit("ns", {"a": os.urandom(size)}).checkpoint_id
        db.commit("ns", {"a": b"newer"})
        db.commit("ns", {"a": b"newest"})
        cp = db.get(cid)
        raw_sql(db_path, "DELETE FROM blob WHERE size = ?", (size,))
        with pytest.raises(errors.CorruptionError) as caught:
            db.get(cid).read("a")
        assert caught.value.details.get("reason") == "blob_missing"
        assert caught.value.details.get("checkpoint_id") == cid
        raw_sql(
            db_path,
            "DELETE FROM blob_ref WHERE checkpoint_seq = (SELECT seq FROM checkpoint WHERE id = ?)",
            (cid,),
        )
        raw_sql(db_path, "DELETE FROM checkpoint WHERE id = ?", (cid,))
        with pytest.raises(errors.CheckpointNotFoundError):
            cp.read("a")


def test_a_seq_high_water_at_its_largest_value_refuses_commits_with_a_typed_error(
    db_path: Path,
) -> None:
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"a": b"1"})
    _tamper(db_path, "UPDATE seq_high_water SET seq = ?", ((1 << 63) - 1,))
    with ckptdb.open(db_path) as db:
        with pytest.raises(errors.CorruptionError) as caught:
            db.commit("ns", {"a": b"2"})
        assert caught.value.details.get("reason") == "seq_exhausted"
        assert "Nothing was written" in str(caught.value)
        assert db.current("ns").read("a") == b"1"  # type: ignore[union-attr]


def _point_label_index_entry_elsewhere(path: Path, label: str, other_seq: int) -> None:
    """Make the entry of ``label`` in the label index lead to the row ``other_seq`` (the
    rowid ending its record: one byte for a small seq), as a flipped bit there does."""
    ((root,),) = raw_sql(
        path, "SELECT rootpage FROM sqlite_schema WHERE name = 'checkpoint_by_label'"
    )
    page_size = int(raw_sql(path, "PRAGMA page_size")[0][0])  # type: ignore[call-overload]
    data = bytearray(path.read_bytes())
    start = (int(root) - 1) * page_size  # type: ignore[call-overload]
    at = bytes(data[start : start + page_size]).index(label.encode()) + len(label)
    assert data[start + at] < 0x80  # a one-byte integer (seq < 128)
    data[start + at] = other_seq
    path.write_bytes(bytes(data))


def test_get_labelled_never_follows_a_damaged_label_index_entry_to_another_checkpoint(
    db_path: Path,
) -> None:
    """Found by the campaign (seed 23, 3,000 cases, case 190: bit flips in a leaf of the
    label index): SQLite reads an indexed column from the index, so an entry leading to
    another row of the namespace returned that row as the checkpoint labelled ``step-2``
    -- its manifest intact, so nothing else noticed. The labelled checkpoint, or a typed
    error."""
    with ckptdb.open(db_path) as db:
        ids = [
            db.commit("ns", {"s": str(i).encode()}, label=f"step-{i}").checkpoint_id
            for i in range(3)
        ]
    seqs = dict(raw_sql(db_path, "SELECT id, seq FROM checkpoint"))
    _point_label_index_entry_elsewhere(db_path, "step-2", int(seqs[ids[0]]))  # type: ignore[call-overload]
    with ckptdb.open(db_path) as db:
        assert not db.verify().ok  # integrity_check sees the index/table mismatch
        try:
            found = db.get_labelled("ns", "step-2")
        except errors.CkptdbError:
            return
        assert found is not None and found.id == ids[2], found and found.id[:12]


# -- the harness itself -----------------------------------------------------------------------


def test_wal_payload_flip_with_recomputed_checksums_reaches_ckptdb(tmp_path: Path) -> None:
    """The WAL checksum rewrite works: SQLite accepts a damaged frame, so the damage reaches
    ckptdb, which refuses the bytes and reports them (rather than SQLite silently dropping
    the frame, which is what happens without the rewrite)."""
    src = tmp_path / "src.ckpt"
    with ckptdb.open(src, chunk_size=CHUNK, page_size=4096) as db:
        db.commit("ns", {"s": b"first"})
    holder = apsw.Connection(str(src))
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM checkpoint").fetchall()
    payload = os.urandom(CHUNK)
    with ckptdb.open(src) as db:
        head = db.commit("ns", {"s": b"second", "big": payload + b"tail"}).checkpoint_id
    for resum, expect_rollback in ((False, True), (True, False)):
        work = tmp_path / f"resum-{resum}"
        work.mkdir()
        shutil.copy2(src, work / "db.ckpt")
        shutil.copy2(f"{src}-wal", work / "db.ckpt-wal")
        wal = work / "db.ckpt-wal"
        data = bytearray(wal.read_bytes())
        at = data.rfind(payload[100:164])  # the newest frame holding that page
        assert at > 0
        data[at] ^= 0x01
        wal.write_bytes(bytes(data))
        if resum:
            wal_resum(wal)
        with ckptdb.open(work / "db.ckpt") as db:
            if expect_rollback:
                with pytest.raises(errors.CheckpointNotFoundError):
                    db.get(head)
            else:
                with pytest.raises(errors.CorruptionError):
                    db.get(head).read("big")
                assert not db.verify().ok
    holder.execute("COMMIT")
    holder.close()
