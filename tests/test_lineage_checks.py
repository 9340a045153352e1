"""The reader's checks at load (issue 14, section 3): lineage (``expect``), entry schema
pins (``accept_schemas``), a size bound (``max_bytes``) and the writer's code revision.

Every test works on real database files. Damage is made with raw SQL on the file, so a
check that is decided "from the manifest, before any blob byte is read" can be told from
one that read the bytes: the damaged bytes would have raised CorruptionError first.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from click.testing import CliRunner
from conftest import raw_sql
from hypothesis import given, settings

import ckptdb
from ckptdb import Entry, errors, load_checks
from ckptdb.cli import main

FIXTURES = Path(__file__).parent / "fixtures"


def _corrupt(db_path: str, checkpoint_id: str) -> None:
    """Flip a byte of the stored bytes of every (inline) entry of one checkpoint."""
    rows = raw_sql(
        db_path,
        "SELECT b.blob_id, b.inline_data FROM blob_ref e JOIN blob b ON b.blob_id = e.blob_id"
        " JOIN checkpoint c ON c.seq = e.checkpoint_seq WHERE c.id = ?",
        (checkpoint_id,),
    )
    assert rows
    for blob_id, inline in rows:
        assert isinstance(inline, bytes) and inline
        data = bytearray(inline)
        data[len(data) // 2] ^= 0x01
        raw_sql(
            db_path, "UPDATE blob SET inline_data = ? WHERE blob_id = ?", (bytes(data), blob_id)
        )


def _receipt_count(db: ckptdb.Database) -> int:
    return len(db.receipts(kind="fallback"))


# -- expect: the lineage the reader is on --------------------------------------------------


def test_mismatch_names_every_field_expected_and_found(db: ckptdb.Database) -> None:
    db.commit("ns", {"s": b"1"}, metadata={"run_id": "r1", "plan_digest": "d1", "n": 1})
    with pytest.raises(errors.LineageMismatchError) as exc:
        db.load("ns", expect={"run_id": "r2", "plan_digest": "d1", "n": 1, "epoch": 4})
    err = exc.value
    assert err.code == "lineage_mismatch" and isinstance(err, errors.LoadRefusedError)
    assert err.fields == ["epoch", "run_id"]
    assert [(m.field, m.expected, m.found) for m in err.mismatches] == [
        ("epoch", "4", None),
        ("run_id", '"r2"', '"r1"'),
    ]
    assert "field 'epoch': expected 4, found missing" in err.message
    assert 'field \'run_id\': expected "r2", found "r1"' in err.message
    assert "fallback=True" in err.message  # what to do
    as_json = err.to_dict()
    assert as_json["fields"] == ["epoch", "run_id"]
    assert as_json["mismatches"][0] == {"field": "epoch", "expected": "4", "found": None}
    assert err.checkpoint_id == db.current("ns").id  # type: ignore[union-attr]
    # a match loads normally, as exact
    loaded = db.load("ns", expect={"run_id": "r1", "plan_digest": "d1"})
    assert loaded.disposition == "exact" and loaded.receipt is None


def test_values_compare_as_canonical_json(db: ckptdb.Database) -> None:
    db.commit(
        "ns",
        {"s": b"1"},
        metadata={"n": 1, "f": 1.5, "b": True, "z": None, "obj": {"a": 1, "b": [1, 2]}},
    )
    # key order inside an object does not matter; a tuple is a JSON array
    db.load("ns", expect={"obj": {"b": (1, 2), "a": 1}, "z": None, "f": 1.5, "b": True})
    for field, value in [("n", 1.0), ("n", True), ("b", 1), ("n", "1"), ("z", 0)]:
        with pytest.raises(errors.LineageMismatchError) as exc:
            db.load("ns", expect={field: value})
        assert exc.value.fields == [field]
    with pytest.raises(errors.LineageMismatchError) as exc:
        db.load("ns", expect={"missing": None})  # null expected, field absent
    assert exc.value.mismatches[0].found is None


def _tagged(value: Any) -> Any:
    """An oracle independent of ckptdb's canonical encoding: JSON values with their JSON
    type attached, floats by repr, objects as sorted items."""
    if value is None or isinstance(value, bool):
        return ("const", repr(value))
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list | tuple):
        return ("list", tuple(_tagged(v) for v in value))
    return ("obj", tuple(sorted((k, _tagged(v)) for k, v in value.items())))


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e300])
    | st.sampled_from(["", "a", "r1", "r2", "é"])
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner),
    max_leaves=6,
)
_keys = st.sampled_from(["run_id", "plan_digest", "step", "a", ""])


@st.composite
def _meta_and_expect(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    meta = draw(st.dictionaries(_keys, _values, max_size=4))
    expect: dict[str, Any] = {}
    for key in draw(st.lists(_keys, max_size=4, unique=True)):
        if key in meta and draw(st.booleans()):
            value = meta[key]
            if isinstance(value, dict):  # same value, another key order
                value = dict(reversed(list(value.items())))
            expect[key] = value
        else:
            expect[key] = draw(_values)
    return meta, expect


def test_refused_exactly_when_some_field_differs(tmp_path: Path) -> None:
    counter = itertools.count()
    with ckptdb.open(tmp_path / "p.ckpt") as db:

        @settings(max_examples=150, deadline=None)
        @given(_meta_and_expect())
        def check(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
            meta, expect = case
            ns = f"ns-{next(counter)}"
            db.commit(ns, {"s": b"x"}, metadata=meta)
            differing = sorted(
                k for k in expect if k not in meta or _tagged(meta[k]) != _tagged(expect[k])
            )
            if not differing:
                assert db.load(ns, expect=expect).disposition == "exact"
                return
            with pytest.raises(errors.LineageMismatchError) as exc:
                db.load(ns, expect=expect)
            assert exc.value.fields == differing
            for m in exc.value.mismatches:
                assert m.expected == json.dumps(
                    expect[m.field], sort_keys=True, separators=(",", ":"), ensure_ascii=False
                )
                assert (m.found is None) == (m.field not in meta)

        check()


@settings(max_examples=40, deadline=None)
@given(
    runs=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=6),
    damaged=st.sets(st.integers(0, 5)),
    wanted=st.sampled_from(["a", "b", "c"]),
)
def test_fallback_skips_to_the_newest_matching_intact_ancestor(
    tmp_path_factory: pytest.TempPathFactory, runs: list[str], damaged: set[int], wanted: str
) -> None:
    path = tmp_path_factory.mktemp("walk") / "w.ckpt"
    with ckptdb.open(path) as db:
        ids = [
            db.commit("ns", {"s": os.urandom(64)}, metadata={"run_id": r, "i": i}).checkpoint_id
            for i, r in enumerate(runs)
        ]
        for i in damaged & set(range(len(ids))):
            _corrupt(db.path, ids[i])
        walk = list(reversed(range(len(ids))))  # newest first
        usable = [i for i in walk if runs[i] == wanted and i not in damaged]
        expected_rejects = [i for i in walk if not usable or i > usable[0]]
        if not usable:
            with pytest.raises(errors.NoUsableCheckpointError) as none:
                db.load("ns", expect={"run_id": wanted}, fallback=True)
            if any(runs[i] != wanted for i in walk):
                assert "checks you gave" in none.value.message
            receipt = db.receipts(kind="fallback", limit=1)[0]
            assert [r["checkpoint_id"] for r in receipt.body["rejected"]] == [
                ids[i] for i in expected_rejects
            ]
            return
        loaded = db.load("ns", expect={"run_id": wanted}, fallback=True)
        assert loaded.checkpoint.id == ids[usable[0]]
        assert loaded.checkpoint.metadata["run_id"] == wanted
        if usable[0] == len(ids) - 1:
            assert loaded.disposition == "exact" and loaded.receipt is None
            return
        assert loaded.disposition == "degraded_fallback" and loaded.receipt is not None
        rejected = loaded.receipt.rejected
        assert [r.checkpoint_id for r in rejected] == [ids[i] for i in expected_rejects]
        for r, i in zip(rejected, expected_rejects, strict=True):
            if runs[i] != wanted:  # decided from the manifest: damage is never reached
                assert r.code == "lineage_mismatch" and r.fields == ["run_id"]
                assert f'found "{runs[i]}"' in r.detail
            else:
                assert r.code.startswith("corrupt") and r.fields is None
        stored = db.receipts(kind="fallback", limit=1)[0]
        assert stored.receipt_id == loaded.receipt.receipt_id
        assert [r.get("fields") for r in stored.body["rejected"]] == [r.fields for r in rejected]
        # CURRENT never moves
        assert db.current("ns").id == ids[-1]  # type: ignore[union-attr]


def test_fallback_from_a_given_checkpoint_applies_the_same_checks(db: ckptdb.Database) -> None:
    a = db.commit("ns", {"s": b"1"}, metadata={"run_id": "r1"})
    b = db.commit("ns", {"s": b"2"}, metadata={"run_id": "r2"})
    db.commit("ns", {"s": b"3"}, metadata={"run_id": "r1"})
    with pytest.raises(errors.LineageMismatchError):
        db.load_checkpoint(b.checkpoint_id, expect={"run_id": "r1"})
    loaded = db.load_checkpoint(b.checkpoint_id, expect={"run_id": "r1"}, fallback=True)
    assert loaded.checkpoint.id == a.checkpoint_id
    assert loaded.receipt is not None and loaded.receipt.requested_id == b.checkpoint_id


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"expect": ["run_id"]}, "expect must be a dict"),
        ({"expect": {1: "a"}}, "is not a str"),
        ({"expect": {"a": float("nan")}}, "NaN"),
        ({"expect": {"a": {1, 2}}}, "not JSON"),
        ({"expect": {"a": b"bytes"}}, "not JSON"),
        ({"expect": {"\ud800": 1}}, "not valid Unicode"),
        ({"accept_schemas": ["state"]}, "accept_schemas must be a dict"),
        ({"accept_schemas": {"state": "3"}}, "version number"),
        ({"accept_schemas": {"state": True}}, "version number"),
        ({"accept_schemas": {"state": -1}}, "version number"),
        ({"accept_schemas": {"": 1}}, "schema name"),
        ({"accept_schemas": {"a\nb": 1}}, "schema name"),
        ({"accept_schemas": {"state/v3": 3}}, "{'state': 3}"),
        ({"max_bytes": -1}, "max_bytes"),
        ({"max_bytes": 1.5}, "max_bytes"),
        ({"max_bytes": True}, "max_bytes"),
    ],
)
def test_bad_checks_are_refused_before_anything_is_read(
    db: ckptdb.Database, kwargs: dict[str, Any], needle: str
) -> None:
    # The namespace does not exist: reading anything would raise NamespaceNotFoundError.
    for call in (
        lambda: db.load("nowhere", **kwargs),
        lambda: db.load_checkpoint("0" * 64, **kwargs),
        lambda: db.checkout("0" * 64, db.path + ".out", **kwargs),
    ):
        with pytest.raises(errors.InvalidLoadCheckError) as exc:
            call()
        assert exc.value.code == "invalid_load_check"
        assert isinstance(exc.value, errors.InvalidInputError)
        assert needle in exc.value.message
    assert not os.path.exists(db.path + ".out")


# -- accept_schemas: entry schema pins ---------------------------------------------------


@pytest.mark.parametrize(
    ("pin", "parsed"),
    [
        ("state/v3", ("state", 3)),
        ("graph-snapshot/v12", ("graph-snapshot", 12)),
        ("tenant/state/v2", ("tenant/state", 2)),
        ("state/v03", ("state", 3)),
        ("state/v1/v2", ("state/v1", 2)),
        ("state/v" + "9" * 40, ("state", load_checks.MAX_SCHEMA_VERSION)),
        ("state", None),
        ("state/3", None),
        ("state/v", None),
        ("state/v3.1", None),
        ("state/V3", None),
        ("state/v-1", None),
        ("/v3", None),
        ("state/v٣", None),  # a non-ASCII digit is not a version
    ],
)
def test_pin_grammar(pin: str, parsed: tuple[str, int] | None) -> None:
    assert load_checks.parse_schema_pin(pin) == parsed


def test_newer_pin_is_refused_and_other_pins_pass(db: ckptdb.Database) -> None:
    ack = db.commit(
        "ns",
        {
            "a.json": Entry(b"1", schema_pin="state/v4"),
            "b.json": Entry(b"2", schema_pin="graph/v9"),
            "c.json": Entry(b"3", schema_pin="state"),
            "d.json": b"4",
        },
    )
    for accept in ({"state": 4}, {"state": 10}, {"other": 0}, {"graph": 9, "state": 4}, {}):
        assert db.load("ns", accept_schemas=accept).checkpoint.id == ack.checkpoint_id
    with pytest.raises(errors.SchemaPinTooNewError) as exc:
        db.load("ns", accept_schemas={"state": 3, "graph": 9})
    err = exc.value
    assert err.code == "schema_pin_too_new" and isinstance(err, errors.LoadRefusedError)
    assert (err.entry, err.pin, err.schema, err.version, err.accepted) == (
        "a.json",
        "state/v4",
        "state",
        4,
        3,
    )
    assert "'a.json'" in err.message and "state/v4" in err.message and "3" in err.message
    assert err.to_dict()["entry"] == "a.json" and err.to_dict()["accepted"] == 3


@settings(max_examples=100, deadline=None)
@given(
    pins=st.lists(
        st.one_of(
            st.builds(
                lambda n, v: f"{n}/v{v}", st.sampled_from(["s", "t", "a/s"]), st.integers(0, 6)
            ),
            st.sampled_from(["s", "s/3", "s/v", "t/v1.0", "S/v9"]),
        ),
        min_size=1,
        max_size=4,
    ),
    accept=st.dictionaries(st.sampled_from(["s", "t", "a/s", "S"]), st.integers(0, 6)),
)
def test_refused_exactly_when_a_versioned_pin_is_newer(
    tmp_path_factory: pytest.TempPathFactory, pins: list[str], accept: dict[str, int]
) -> None:
    path = tmp_path_factory.mktemp("pins") / "p.ckpt"
    with ckptdb.open(path) as db:
        db.commit("ns", {f"e{i}": Entry(b"x", schema_pin=p) for i, p in enumerate(pins)})
        too_new = []
        for i, pin in enumerate(pins):
            name, _, version = pin.rpartition("/v")
            if name and version.isdigit() and name in accept and int(version) > accept[name]:
                too_new.append(f"e{i}")
        if not too_new:
            db.load("ns", accept_schemas=accept)
            return
        with pytest.raises(errors.SchemaPinTooNewError) as exc:
            db.load("ns", accept_schemas=accept)
        assert exc.value.entry == too_new[0]


def test_fallback_skips_checkpoints_pinned_too_new(db: ckptdb.Database) -> None:
    v2 = db.commit("ns", {"state.json": Entry(b"old", schema_pin="state/v2")})
    v3 = db.commit("ns", {"state.json": Entry(b"mid", schema_pin="state/v3")})
    db.commit("ns", {"state.json": Entry(b"new", schema_pin="state/v4")})
    loaded = db.load("ns", accept_schemas={"state": 3}, fallback=True)
    assert loaded.checkpoint.id == v3.checkpoint_id and loaded.degraded
    assert loaded.receipt is not None
    (rejected,) = loaded.receipt.rejected
    assert rejected.code == "schema_pin_too_new" and rejected.entry == "state.json"
    loaded = db.load("ns", accept_schemas={"state": 2}, fallback=True)
    assert loaded.checkpoint.id == v2.checkpoint_id
    assert [r.code for r in loaded.receipt.rejected] == ["schema_pin_too_new"] * 2  # type: ignore[union-attr]
    with pytest.raises(errors.NoUsableCheckpointError):
        db.load("ns", accept_schemas={"state": 1}, fallback=True)


# -- max_bytes: the caller's memory bound ----------------------------------------------------


def test_max_bytes_is_checked_before_any_byte_is_read(db: ckptdb.Database) -> None:
    small = db.commit("ns", {"s": os.urandom(100)})
    big = db.commit("ns", {"s": os.urandom(300), "t": os.urandom(200)})
    assert db.load("ns", max_bytes=500).checkpoint.id == big.checkpoint_id  # the bound itself
    _corrupt(db.path, big.checkpoint_id)
    # Damaged bytes would raise CorruptionError if they were read: the size decides first.
    for fallback in (False, True):
        before = _receipt_count(db)
        with pytest.raises(errors.LoadTooLargeError) as exc:
            db.load("ns", max_bytes=499, fallback=fallback)
        err = exc.value
        assert err.code == "load_too_large" and isinstance(err, errors.LoadRefusedError)
        assert (err.size, err.max_bytes, err.checkpoint_id) == (500, 499, big.checkpoint_id)
        assert "none of its bytes was read" in err.message
        assert _receipt_count(db) == before  # nothing was returned: no fallback receipt
    # not skipped for its size, but an older one is returned when the newest is damaged
    loaded = db.load("ns", max_bytes=500, fallback=True)
    assert loaded.checkpoint.id == small.checkpoint_id


def test_fallback_refuses_an_oversized_ancestor_and_says_what_it_passed(
    db: ckptdb.Database,
) -> None:
    db.commit("ns", {"s": os.urandom(1000)}, metadata={"run_id": "r1"})
    other = db.commit("ns", {"s": os.urandom(10)}, metadata={"run_id": "r2"})
    with pytest.raises(errors.LoadTooLargeError) as exc:
        db.load("ns", expect={"run_id": "r1"}, max_bytes=100, fallback=True)
    assert exc.value.details["rejected"] == [other.checkpoint_id]
    assert "lineage_mismatch" in exc.value.message
    assert "does not skip a checkpoint for its size" in exc.value.message


# -- code revision ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "x" * 201, "abc\n", "a\x00b", "\ud800", " abc", 7, b"abc"])
def test_code_revision_is_validated_before_the_file_is_touched(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "new.ckpt"
    with pytest.raises(errors.InvalidInputError) as exc:
        ckptdb.open(path, code_revision=bad)  # type: ignore[arg-type]
    assert "code_revision" in exc.value.message
    assert not path.exists()


def test_code_revision_is_recorded_beside_the_manifest_not_in_the_id(tmp_path: Path) -> None:
    with ckptdb.open(tmp_path / "a.ckpt", code_revision="rev-a" * 40) as a:
        ack = a.commit("ns", {"s": b"same"}, metadata={"k": 1})
        assert a.code_revision == "rev-a" * 40
        cp = a.get(ack.checkpoint_id)
        assert cp.code_revision == "rev-a" * 40 == cp.info.code_revision
        assert a.lineage("ns")[0].code_revision == "rev-a" * 40
    with ckptdb.open(tmp_path / "b.ckpt", code_revision="rev-b") as b:
        assert b.commit("ns", {"s": b"same"}, metadata={"k": 1}).checkpoint_id == ack.checkpoint_id
    with ckptdb.open(tmp_path / "c.ckpt") as c:
        assert c.commit("ns", {"s": b"same"}, metadata={"k": 1}).checkpoint_id == ack.checkpoint_id
        assert c.current("ns").code_revision is None  # type: ignore[union-attr]
        assert c.code_revision is None
    rows = raw_sql(
        tmp_path / "b.ckpt", "SELECT code_revision FROM checkpoints WHERE namespace = 'ns'"
    )
    assert rows == [("rev-b",)]
    assert ckptdb.CheckpointInfo.model_validate_json(cp.info.model_dump_json()) == cp.info


def test_group_commits_record_the_revision(tmp_path: Path) -> None:
    import threading

    with ckptdb.open(tmp_path / "g.ckpt", code_revision="g1") as db:
        threads = [
            threading.Thread(target=db.commit, args=(f"ns{i}", {"s": str(i).encode()}))
            for i in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert raw_sql(tmp_path / "g.ckpt", "SELECT DISTINCT code_revision FROM checkpoint") == [
        ("g1",)
    ]


def test_another_revision_loads_with_a_note_and_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "r.ckpt"
    with ckptdb.open(path, code_revision="abc123") as db:
        ack = db.commit("ns", {"s": b"1"})
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the same revision: no warning
            assert db.load("ns").revision_mismatch is None
    with ckptdb.open(path) as db, warnings.catch_warnings():
        warnings.simplefilter("error")  # the reader's revision unknown: nothing to compare
        assert db.load("ns").revision_mismatch is None
    with ckptdb.open(path, code_revision="def456") as db:
        with pytest.warns(RuntimeWarning, match="abc123.*def456") as caught:
            loaded = db.load("ns")
        assert loaded.disposition == "exact" and loaded.checkpoint.id == ack.checkpoint_id
        note = loaded.revision_mismatch
        assert note == ckptdb.RevisionMismatch(
            checkpoint_id=ack.checkpoint_id, written_by="abc123", reading="def456"
        )
        # attributed to the caller, not to ckptdb's internals
        assert [w.filename for w in caught] == [__file__]
        with pytest.warns(RuntimeWarning) as caught:
            assert db.load_checkpoint(ack.checkpoint_id).revision_mismatch == note
        assert [w.filename for w in caught] == [__file__]
        with pytest.warns(RuntimeWarning) as caught:
            result = db.checkout("ns", tmp_path / "out")
        assert result.revision_mismatch == note and [w.filename for w in caught] == [__file__]
        # a checkpoint with no recorded revision is never a mismatch
        db_unknown = ckptdb.open(tmp_path / "u.ckpt")
        db_unknown.commit("ns", {"s": b"1"})
        db_unknown.close()
    with ckptdb.open(tmp_path / "u.ckpt", code_revision="def456") as db, warnings.catch_warnings():
        warnings.simplefilter("error")
        assert db.load("ns").revision_mismatch is None


def test_the_revision_note_is_about_the_checkpoint_returned_by_fallback(tmp_path: Path) -> None:
    path = tmp_path / "f.ckpt"
    with ckptdb.open(path, code_revision="old") as db:
        old = db.commit("ns", {"s": os.urandom(32)})
    with ckptdb.open(path, code_revision="new") as db:
        head = db.commit("ns", {"s": os.urandom(32)})
        _corrupt(db.path, head.checkpoint_id)
        with pytest.warns(RuntimeWarning, match="'old'"):
            loaded = db.load("ns", fallback=True)
        assert loaded.checkpoint.id == old.checkpoint_id and loaded.degraded
        assert loaded.revision_mismatch is not None
        assert loaded.revision_mismatch.written_by == "old"


def test_export_and_import_carry_the_revision(tmp_path: Path) -> None:
    with ckptdb.open(tmp_path / "src.ckpt", code_revision="r1") as src:
        src.commit("ns", {"s": b"1"})
        src.export(tmp_path / "out.ckpt")
    with ckptdb.open(tmp_path / "dst.ckpt") as dst:
        dst.import_file(tmp_path / "out.ckpt")
        assert dst.current("ns").code_revision == "r1"  # type: ignore[union-attr]
        assert dst.verify().ok


def test_an_export_written_before_revisions_existed_still_imports(tmp_path: Path) -> None:
    old = tmp_path / "v4.ckpt"
    shutil.copyfile(FIXTURES / "v4.ckpt", old)
    with ckptdb.open(old):  # an export of schema version 4, upgraded as any old file is
        pass
    with ckptdb.open(tmp_path / "dst.ckpt", code_revision="now") as dst:
        receipt = dst.import_file(old)
        assert receipt.checkpoints_copied > 0
        infos = [i for ns in receipt.namespaces for i in dst.lineage(ns)]
        assert infos and all(i.code_revision is None for i in infos)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # unknown revision: no mismatch
            dst.load(receipt.namespaces[0])


def test_import_refuses_a_hostile_revision(tmp_path: Path) -> None:
    with ckptdb.open(tmp_path / "src.ckpt", code_revision="r1") as src:
        src.commit("ns", {"s": b"1"})
        src.export(tmp_path / "out.ckpt")
    raw_sql(tmp_path / "out.ckpt", "UPDATE checkpoint SET code_revision = 'x' || char(27) || '[2J'")
    with ckptdb.open(tmp_path / "dst.ckpt") as dst:
        with pytest.raises(errors.InvalidExportError, match="code_revision"):
            dst.import_file(tmp_path / "out.ckpt")
        assert dst.namespaces() == []


# -- the command line --------------------------------------------------------------------------


def test_cli_checkout_checks(tmp_path: Path) -> None:
    path = tmp_path / "c.ckpt"
    with ckptdb.open(path) as db:
        first = db.commit(
            "ns", {"s": Entry(b"1", schema_pin="state/v1")}, metadata={"run_id": "r1", "n": 3}
        )
        db.commit("ns", {"s": Entry(b"22", schema_pin="state/v2")}, metadata={"run_id": "r2"})
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(main, ["checkout", str(path), "ns", *args])

    res = run(str(tmp_path / "o1"), "--expect", "run_id=r1", "--json")
    assert res.exit_code == 15, res.output
    out = json.loads(res.stdout)
    assert out["code"] == "lineage_mismatch" and out["fields"] == ["run_id"]
    assert out["mismatches"] == [{"field": "run_id", "expected": '"r1"', "found": '"r2"'}]
    assert not (tmp_path / "o1").exists()

    res = run(str(tmp_path / "o2"), "--expect", "run_id=r1", "--expect", "n=3", "--fallback")
    assert res.exit_code == 13, res.output
    assert (tmp_path / "o2" / "s").read_bytes() == b"1"
    assert "lineage_mismatch" in res.output

    res = run(str(tmp_path / "o3"), "--accept-schema", "state=1")
    assert res.exit_code == 15 and "schema_pin_too_new" in res.output
    res = run(str(tmp_path / "o4"), "--accept-schema", "state=1", "--fallback", "--json")
    assert res.exit_code == 13
    assert json.loads(res.stdout)["checkpoint_id"] == first.checkpoint_id

    res = run(str(tmp_path / "o5"), "--max-bytes", "1", "--fallback")
    assert res.exit_code == 15 and "load_too_large" in res.output
    assert not (tmp_path / "o5").exists()
    assert run(str(tmp_path / "o6"), "--max-bytes", "2").exit_code == 0

    for bad in (["--expect", "novalue"], ["--accept-schema", "state=x"], ["--accept-schema", "=1"]):
        res = run(str(tmp_path / "o7"), *bad)
        assert res.exit_code == 7 and "invalid_load_check" in res.output, res.output


def test_cli_show_prints_the_revision(tmp_path: Path) -> None:
    path = tmp_path / "s.ckpt"
    with ckptdb.open(path, code_revision="deadbeef1234") as db:
        db.commit("ns", {"s": b"1"})
    res = CliRunner().invoke(main, ["show", str(path), "ns"])
    assert res.exit_code == 0 and "revision    deadbeef1234" in res.output
    res = CliRunner().invoke(main, ["show", str(path), "ns", "--json"])
    assert json.loads(res.stdout)["code_revision"] == "deadbeef1234"
