"""Database.copy_checkpoints: forks by reference in one transaction -- the copies share
every blob, keep their sources' structure, and on any error nothing is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors

KEY = bytes(range(32))


def _chain(db: ckptdb.Database, namespace: str, n: int) -> list[str]:
    return [
        db.commit(
            namespace,
            {"big.bin": os.urandom(40_000) + bytes([i]), "step": str(i)},
            metadata={"step": i},
        ).checkpoint_id
        for i in range(n)
    ]


def _snapshot(path: Path) -> list[tuple[object, ...]]:
    """Every row a copy could write (checkpoints, entries, pointers, history, blobs)."""
    return [
        *raw_sql(path, "SELECT id, namespace_id, parent_id, metadata FROM checkpoint ORDER BY id"),
        *raw_sql(path, "SELECT seq, entries FROM checkpoint ORDER BY seq"),
        *raw_sql(path, "SELECT * FROM blob_ref ORDER BY checkpoint_seq, blob_id"),
        *raw_sql(path, "SELECT * FROM pointer ORDER BY namespace_id"),
        *raw_sql(path, "SELECT namespace_id, revision, digest FROM pointer_history ORDER BY 1, 2"),
        *raw_sql(path, "SELECT count(*), sum(size) FROM blob"),
        *raw_sql(path, "SELECT count(*) FROM namespace"),
    ]


def test_a_copy_shares_every_blob_and_keeps_the_lineage(db: ckptdb.Database) -> None:
    ids = _chain(db, "run", 6)
    before = db.stats()
    report = db.copy_checkpoints(ids, "fork", metadata={"forked_from": "run"}, reason="fork")
    after = db.stats()
    assert report.created == 6
    assert (after.blobs, after.stored_bytes) == (before.blobs, before.stored_bytes)
    copies = [report.copies[c] for c in ids]
    assert len(set(copies) | set(ids)) == 12  # the namespace is part of each id
    lineage = db.lineage("fork")
    assert [c.id for c in lineage] == list(reversed(copies))
    assert [c.generation for c in lineage] == [6, 5, 4, 3, 2, 1]
    for source, copy in zip(ids, copies, strict=True):
        src, dst = db.get(source), db.get(copy)
        assert dst.namespace == "fork"
        assert dst.metadata == {**src.metadata, "forked_from": "run"}
        assert {n: dst.read(n) for n in dst.entries} == {n: src.read(n) for n in src.entries}
    assert db.pointer("fork").current_id == copies[-1]  # type: ignore[union-attr]
    assert [m.reason for m in db.history("fork")] == ["fork"]  # one move, not one per copy
    assert db.verify().ok


def test_copying_again_is_a_no_op(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        ids = _chain(db, "run", 4)
        first = db.copy_checkpoints(ids, "fork")
        rows = _snapshot(db_path)
        second = db.copy_checkpoints(ids, "fork")
        assert second.created == 0
        assert second.copies == first.copies
        assert second.pointer_revision == first.pointer_revision
        assert _snapshot(db_path) == rows


def test_parents_override_the_stored_links(db: ckptdb.Database) -> None:
    ids = _chain(db, "run", 4)
    earlier = db.copy_checkpoints(ids[:2], "fork")
    # ids[2] and ids[3] hang under the earlier copy of ids[1]; ids[3] under ids[2] as stored
    report = db.copy_checkpoints(ids[2:], "fork", parents={ids[2]: earlier.copies[ids[1]]})
    assert [c.id for c in db.lineage("fork")] == [
        report.copies[ids[3]],
        report.copies[ids[2]],
        earlier.copies[ids[1]],
        earlier.copies[ids[0]],
    ]
    # None makes a root; another source of the same call is followed in order
    roots = db.copy_checkpoints([ids[3], ids[1]], "roots", parents={ids[1]: None, ids[3]: ids[1]})
    assert db.get(roots.copies[ids[3]]).parent_id == roots.copies[ids[1]]
    assert db.get(roots.copies[ids[1]]).parent_id is None
    assert roots.current_id == roots.copies[ids[1]]  # the copy of the last id given


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"parents": {"0" * 64: None}}, errors.InvalidInputError),
        ({"expect_current": "f" * 64}, errors.ConflictError),
        ({"metadata": {"ckptdb:sealed": 1}}, errors.InvalidMetadataError),
        ({"metadata": {"x": float("nan")}}, errors.InvalidMetadataError),
        ({"reason": ""}, errors.InvalidInputError),
    ],
)
def test_bad_arguments_write_nothing(
    db_path: Path, kwargs: dict[str, object], error: type[Exception]
) -> None:
    with ckptdb.open(db_path) as db:
        ids = _chain(db, "run", 3)
        db.commit("fork", {"own": b"1"})
        rows = _snapshot(db_path)
        with pytest.raises(error) as caught:
            db.copy_checkpoints(ids, "fork", **kwargs)  # type: ignore[arg-type]
        assert caught.value.code  # type: ignore[attr-defined]
        assert _snapshot(db_path) == rows


@pytest.mark.parametrize(
    "ids",
    [[], "not-a-list", ["abc"], [None]],
)
def test_bad_id_lists_are_refused(db: ckptdb.Database, ids: object) -> None:
    with pytest.raises(errors.InvalidInputError):
        db.copy_checkpoints(ids, "fork")  # type: ignore[arg-type]


def test_a_parent_in_another_namespace_and_a_missing_source_write_nothing(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        ids = _chain(db, "run", 3)
        other = db.commit("other", {"x": b"1"}).checkpoint_id
        rows = _snapshot(db_path)
        with pytest.raises(errors.InvalidReferenceError, match="belongs to namespace 'other'"):
            db.copy_checkpoints(ids, "fork", parents={ids[0]: other})
        with pytest.raises(errors.CheckpointNotFoundError):
            db.copy_checkpoints([*ids, "e" * 64], "fork")
        assert _snapshot(db_path) == rows


def test_a_damaged_source_is_refused_and_nothing_is_copied(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        ids = _chain(db, "run", 3)
    raw_sql(db_path, "UPDATE checkpoint SET metadata = '{\"step\":99}' WHERE id = ?", (ids[1],))
    rows = _snapshot(db_path)
    with ckptdb.open(db_path) as db:
        with pytest.raises(errors.CorruptionError) as caught:
            db.copy_checkpoints(ids, "fork")
        assert caught.value.details["reason"] == "manifest_mismatch"
    assert _snapshot(db_path) == rows


def test_copies_stay_inside_their_key_scope(db_path: Path) -> None:
    with ckptdb.open(db_path, keys={"a": KEY}) as db:
        db.set_encryption("t/", key_id="a", metadata=True)
        ids = _chain(db, "t/run", 3)
        rows = _snapshot(db_path)
        with pytest.raises(errors.EncryptedScopeError):
            db.copy_checkpoints(ids, "plain-fork")
        # no entries to tell: the namespaces' scopes decide (its metadata is sealed)
        empty = db.commit("t/empty", {}, metadata={"secret": 1}).checkpoint_id
        rows = _snapshot(db_path)
        with pytest.raises(errors.EncryptedScopeError):
            db.copy_checkpoints([empty], "plain-fork")
        assert _snapshot(db_path) == rows
        report = db.copy_checkpoints(ids, "t/fork", metadata={"fork": 1})
        copy = db.get(report.copies[ids[-1]])
        assert copy.metadata == {"step": 2, "fork": 1}
        assert copy.read("step") == b"2"
    with ckptdb.open(db_path) as keyless:
        stored = keyless.get(report.copies[ids[-1]]).metadata
        assert set(stored) == {"ckptdb:sealed"}  # sealed for the scope, like its source


def test_a_target_quota_refuses_the_whole_copy(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        ids = _chain(db, "run", 4)
        db.set_quota("fork", max_checkpoints=2)
        rows = _snapshot(db_path)
        with pytest.raises(errors.QuotaExceededError):
            db.copy_checkpoints(ids, "fork")
        assert _snapshot(db_path) == rows


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    shape=st.lists(st.integers(min_value=-1, max_value=30), min_size=1, max_size=12),
    picks=st.lists(st.integers(min_value=0, max_value=11), min_size=1, max_size=12),
)
def test_any_tree_copies_to_the_same_shape(
    tmp_path_factory: pytest.TempPathFactory, shape: list[int], picks: list[int]
) -> None:
    """A random tree of checkpoints (each on a random earlier one, or on CURRENT), any
    subset copied: each copy's parent is the copy of its source's parent when that was
    copied, else none; generations count from there; bytes are the source's."""
    path = tmp_path_factory.mktemp("tree") / "t.ckpt"
    with ckptdb.open(path) as db:
        ids: list[str] = []
        for i, at in enumerate(shape):
            base = ids[at % len(ids)] if ids and at >= 0 else None  # None: on CURRENT
            ack = db.commit("src", {"v": f"value {i}".encode()}, base=base, metadata={"i": i})
            ids.append(ack.checkpoint_id)
        chosen = list(dict.fromkeys(ids[p % len(ids)] for p in picks))
        report = db.copy_checkpoints(chosen, "dst")
        for source in chosen:
            src, dst = db.get(source), db.get(report.copies[source])
            if src.parent_id in report.copies:
                assert dst.parent_id == report.copies[src.parent_id]
                assert dst.generation == db.get(dst.parent_id).generation + 1
            else:
                assert dst.parent_id is None and dst.generation == 1
            assert dst.read("v") == src.read("v")
        assert report.current_id == report.copies[chosen[-1]]
        assert db.verify().ok
