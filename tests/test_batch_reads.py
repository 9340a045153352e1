"""Reading many checkpoints and entries at once (``get_many``, ``read_many``): one read for
all of them, every manifest and every byte verified as the one-at-a-time calls do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import raw_sql
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors


def test_get_many_answers_in_the_order_asked_and_leaves_out_what_is_not_stored(
    db: ckptdb.Database,
) -> None:
    ids = [db.commit("ns", {"a": str(i).encode()}).checkpoint_id for i in range(4)]
    never = "0" * 64
    found = db.get_many([ids[2], never, ids[0], ids[2], ids[3]])
    assert list(found) == [ids[2], ids[0], ids[3]]
    assert all(found[c].id == c for c in found)
    assert found[ids[0]].read("a") == b"0"
    assert db.get_many([]) == {}
    with pytest.raises(errors.InvalidInputError):
        db.get_many(["not an id"])


def test_get_many_checks_each_manifest_against_its_id(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        good = db.commit("ns", {"a": b"1"}).checkpoint_id
        forged = db.commit("ns", {"a": b"2"}, metadata={"step": 1}).checkpoint_id
    raw_sql(db_path, "UPDATE checkpoint SET metadata = '{\"step\":2}' WHERE id = ?", (forged,))
    with ckptdb.open(db_path) as db, pytest.raises(errors.CorruptionError):
        db.get_many([good, forged])


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(min_value=0, max_value=300_000), min_size=1, max_size=6))
def test_read_many_returns_the_same_bytes_as_reading_one_by_one(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int]
) -> None:
    # Inline entries come from one statement; chunked ones (above the chunk size) take the
    # one-blob path: the caller cannot tell, except by the number of reads.
    path = tmp_path_factory.mktemp("many") / "m.ckpt"
    with ckptdb.open(path) as db:
        cps = [
            db.get(db.commit(f"ns{i}", {"e": os.urandom(n), "same": b"x"}).checkpoint_id)
            for i, n in enumerate(sizes)
        ]
        wanted = [(cp, name) for cp in cps for name in ("e", "same")]
        assert db.read_many(wanted) == [cp.read(name) for cp, name in wanted]
        assert db.read_many([]) == []


def test_read_many_refuses_damaged_bytes_and_unknown_entries(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        first = db.commit("ns", {"a": b"fine" * 40}).checkpoint_id
        second = db.commit("other", {"b": b"will be damaged" * 20}).checkpoint_id
    raw_sql(
        db_path,
        "UPDATE blob SET inline_data = zeroblob(length(inline_data)) WHERE size = ?",
        (len(b"will be damaged" * 20),),
    )
    with ckptdb.open(db_path) as db:
        cps = db.get_many([first, second])
        with pytest.raises(errors.CorruptionError) as caught:
            db.read_many([(cps[first], "a"), (cps[second], "b")])
        assert caught.value.code == "corrupt"
        assert caught.value.details.get("entry") == "b"
        assert db.read_many([(cps[first], "a")]) == [b"fine" * 40]
        with pytest.raises(errors.EntryNotFoundError):
            db.read_many([(cps[first], "nope")])


@settings(max_examples=20, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=300_000), min_size=1, max_size=5),
    prefetch=st.lists(st.sampled_from(["e", "same", "absent"]), max_size=3),
)
def test_prefetched_entries_read_the_same_bytes(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], prefetch: list[str]
) -> None:
    # Whatever is prefetched -- inline or chunked entries, names some checkpoints lack --
    # every read answers exactly what a plain read does.
    path = tmp_path_factory.mktemp("prefetch") / "p.ckpt"
    with ckptdb.open(path) as db:
        ids = [
            db.commit(f"ns{i}", {"e": os.urandom(n), "same": b"x"}).checkpoint_id
            for i, n in enumerate(sizes)
        ]
        plain = db.get_many(ids)
        fetched = db.get_many(ids, prefetch=prefetch)
        assert list(fetched) == ids
        wanted = [(cp, name) for cp in fetched.values() for name in ("e", "same")]
        expected = [plain[cp.id].read(name) for cp, name in wanted]
        assert db.read_many(wanted) == expected
        assert [cp.read(name) for cp, name in wanted] == expected


def test_a_prefetched_entry_is_held_verified_from_the_read_that_fetched_it(
    db_path: Path,
) -> None:
    value = b"held bytes " * 30
    with ckptdb.open(db_path) as db:
        cid = db.commit("ns", {"a": value, "b": b"not prefetched"}).checkpoint_id
        fetched = db.get_many([cid], prefetch=["a"])[cid]
        plain = db.get(cid)
        # Damage the stored bytes behind the handle's back: what was verified at the
        # prefetch is what it hands out; a read of the file now refuses the bytes.
        raw_sql(db_path, "UPDATE blob SET inline_data = zeroblob(length(inline_data))")
        assert fetched.read("a") == value
        assert db.read_many([(fetched, "a")]) == [value]
        with pytest.raises(errors.CorruptionError):
            plain.read("a")
        with pytest.raises(errors.CorruptionError):
            fetched.read("b")


def test_a_damaged_entry_is_not_prefetched_and_its_read_says_why(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        cid = db.commit("ns", {"a": b"will be damaged" * 20}).checkpoint_id
    raw_sql(db_path, "UPDATE blob SET inline_data = zeroblob(length(inline_data))")
    with ckptdb.open(db_path) as db:
        cp = db.get_many([cid], prefetch=["a"])[cid]  # the manifest itself is intact
        with pytest.raises(errors.CorruptionError) as caught:
            cp.read("a")
        assert caught.value.details.get("entry") == "a"
        with pytest.raises(errors.CorruptionError):
            db.read_many([(cp, "a")])


def test_prefetch_takes_any_number_of_names(db: ckptdb.Database) -> None:
    # More names than SQLite takes parameters in one statement, beside the ids.
    cid = db.commit("ns", {"a": b"1", "b": b"2"}).checkpoint_id
    names = ["a", *(f"n{i}" for i in range(40_000)), "b"]
    cp = db.get_many([cid], prefetch=names)[cid]
    assert db.read_many([(cp, "a"), (cp, "b")]) == [b"1", b"2"]


@pytest.mark.parametrize("prefetch", ["a", b"a", 3, ["a", ""], ["../a"]])
def test_get_many_refuses_a_prefetch_that_is_not_a_list_of_entry_names(
    db: ckptdb.Database, prefetch: object
) -> None:
    cid = db.commit("ns", {"a": b"1"}).checkpoint_id
    with pytest.raises(errors.CkptdbError) as caught:
        db.get_many([cid], prefetch=prefetch)  # type: ignore[arg-type]
    assert caught.value.code in {"invalid_input", "invalid_entry_name"}
