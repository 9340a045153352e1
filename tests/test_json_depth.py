"""Issue 23, family 5b: JSON nested deeper than the input rules allow is a typed error
wherever it comes from, never an untyped RecursionError (CLI exit 1).

The rule (``validation.MAX_JSON_DEPTH``): nothing in a JSON value sits deeper than 64
levels below its top. Caller JSON given as text (``--meta``, ``--meta-json``, ``--expect``,
``--where``, ``--keep-matching``) is refused (exit 7, nothing written) by a linear scan
before Python's recursive parser sees it; a file's stored metadata that breaks the rule (a
crafted file: ids and digests can be made consistent) is a CorruptionError for every
reader -- prune's filter, GC's keep_best/keep_matching, show, log, diff, fork, checkout --
and a problem for verify.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import engine, prepared_blob, publish_crafted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors
from ckptdb.cli import main
from ckptdb.retention import KeepBest, RetentionPolicy

LIMIT = 64  # the documented rule; the test states it rather than importing it
DEPTHS = st.one_of(st.integers(0, 80), st.integers(80, 3000), st.just(100_000))


def nested(kinds: list[bool]) -> str:
    """JSON text of containers nested ``len(kinds)`` deep (True: an object, False: an
    array) around the number 1, built without recursion."""
    opening = "".join('{"a": ' if obj else "[" for obj in kinds)
    closing = "".join("}" if obj else "]" for obj in reversed(kinds))
    return opening + "1" + closing


def _kinds(depth: int, data: st.DataObject) -> list[bool]:
    if depth > 200:  # drawing each level would be slow; the pattern does not matter
        return [i % 3 == 0 for i in range(depth)]
    return data.draw(st.lists(st.booleans(), min_size=depth, max_size=depth))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("depth")
    db = root / "d.ckpt"
    with ckptdb.open(db) as handle:
        ack = handle.commit("brain", {"a": b"1"}, metadata={"run": "r1"})
    (root / "file.txt").write_bytes(b"x")
    return {"root": root, "db": db, "id": ack.checkpoint_id}


def _cli(*argv: str) -> Any:
    return CliRunner().invoke(main, list(argv), catch_exceptions=False)


OPTIONS = ["--meta", "--meta-json", "--expect", "--where", "--keep-matching"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(depth=DEPTHS, option=st.sampled_from(OPTIONS), data=st.data())
def test_cli_json_options_hold_the_depth_rule(
    box: dict[str, Any], depth: int, option: str, data: st.DataObject
) -> None:
    db, root = box["db"], box["root"]
    before = _digest(db)
    if option == "--meta-json":
        # The whole metadata object: the innermost value sits `depth` levels down.
        kinds = [True, *_kinds(max(depth - 1, 0), data)]
        (root / "meta.json").write_text(nested(kinds))
        accepted = len(kinds) <= LIMIT
        argv = ["commit", str(db), "brain", str(root / "file.txt"), "--meta-json"]
        argv.append(str(root / "meta.json"))
    else:
        # KEY=VALUE: the value sits one level down, so its innermost value depth + 1.
        pair = "k=" + nested(_kinds(depth, data))
        accepted = depth + 1 <= LIMIT
        argv = {
            "--meta": ["commit", str(db), "brain", str(root / "file.txt"), "--meta", pair],
            "--expect": ["checkout", str(db), box["id"], str(root / "out"), "--expect", pair],
            "--where": ["prune", str(db), "--where", pair, "--dry-run"],
            "--keep-matching": ["gc", str(db), "--keep-matching", pair, "--dry-run"],
        }[option]
    result = _cli(*argv, "--json")
    assert result.exit_code != 1, result.stdout[-2000:]
    if accepted:
        # --expect never matches metadata {"run": "r1"}: refused by the reader's check.
        assert result.exit_code == (15 if option == "--expect" else 0), result.stdout[-2000:]
        if option in ("--meta", "--meta-json"):  # put the file back as it was
            with ckptdb.open(db) as handle:
                handle.set_current("brain", box["id"], verify=False)
        return
    assert result.exit_code == 7, result.stdout[-2000:]
    error = json.loads(result.stdout)
    assert error["code"].startswith("invalid_") and str(LIMIT) in error["message"], error
    assert _digest(db) == before  # nothing written


def test_a_deep_string_value_is_not_json() -> None:
    """A VALUE that is a JSON string holding brackets is a string, at any length."""
    from ckptdb import validation

    text = json.dumps("[" * 100_000)
    assert validation.parse_json(text, "x") == "[" * 100_000
    assert validation.json_nesting(text) == 0


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:\u00e9\n'),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\a', max_size=3), inner, max_size=3)
    ),
    max_leaves=20,
)


def _containers(value: Any) -> int:
    stack, deepest = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list | dict):
            deepest = max(deepest, depth)
            stack.extend(
                (v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES, indent=st.sampled_from([None, 0, 2]), ascii_only=st.booleans())
def test_json_nesting_is_the_depth_of_the_text(
    value: Any, indent: int | None, ascii_only: bool
) -> None:
    from ckptdb import validation

    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    assert validation.json_nesting(text) == _containers(value)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet='[]{}"\\ 1,:a', max_size=400), deep=st.integers(0, 5000))
def test_text_the_scan_passes_never_makes_the_parser_recurse_too_deep(text: str, deep: int) -> None:
    """Whatever text the scan finds shallow, Python's parser handles without a
    RecursionError; whatever it refuses, parse_json refuses typed."""
    from ckptdb import validation

    for candidate in (text, "[" * deep + text, text + "{" * deep, '"' + "[" * deep):
        if validation.json_nesting(candidate) <= LIMIT + 1:
            with contextlib.suppress(ValueError):  # invalid JSON is fine; recursing is not
                json.loads(candidate)
        with contextlib.suppress(errors.InvalidInputError):
            validation.parse_json(candidate, "x")


def _craft(path: Path, metadata_json: str, base: str) -> str:
    """Publish, through the publish internals, a checkpoint whose stored metadata is
    ``metadata_json`` as is (a hostile writer: the id and digests are consistent)."""
    with engine(path) as eng:
        blob = prepared_blob(eng, b"crafted")
        return publish_crafted(
            eng, "brain", [("a", blob, None, None)], metadata_json, base=base
        ).checkpoint_id


STORED = st.one_of(
    st.integers(0, 80).map(lambda d: ("depth", d)),
    st.sampled_from([("depth", 1000), ("depth", 100_000), ("digits", 5000), ("list", 0)]),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=STORED, data=st.data())
def test_hostile_stored_metadata_is_corruption_for_every_reader(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, int], data: st.DataObject
) -> None:
    kind, depth = case
    path = tmp_path_factory.mktemp("stored") / "s.ckpt"
    with ckptdb.open(path) as db:
        root = db.commit("brain", {"a": b"0"}, metadata={"loss": 0.5}).checkpoint_id
    if kind == "depth":
        # {"loss": 1, "deep": <containers>}: the innermost value sits depth + 1 levels down.
        text = '{"deep":' + nested(_kinds(depth, data)) + ',"loss":1}'
        hostile = depth + 1 > LIMIT
    elif kind == "digits":
        text, hostile = '{"loss":' + "7" * depth + "}", True
    else:
        text, hostile = "[1]", True
    crafted = _craft(path, text, root)
    with ckptdb.open(path) as db:
        db.set_current("brain", root, verify=False)  # the crafted one is a side branch
        calls = {
            "prune": lambda: db.prune({"loss": 1}, dry_run=True),
            "keep_best": lambda: db.gc(
                RetentionPolicy(keep_best=(KeepBest(key="loss", n=1),)), dry_run=True
            ),
            "keep_matching": lambda: db.gc(
                RetentionPolicy(keep_matching={"loss": 1}), dry_run=True
            ),
            "get": lambda: db.get(crafted).metadata,
            "log": lambda: db.log("brain", all=True),
            "diff": lambda: db.diff(root, crafted),
            "checkout": lambda: db.checkout(crafted, str(path.parent / "out"), force=True),
        }
        for name, call in calls.items():
            if hostile:
                with pytest.raises(errors.CorruptionError) as caught:
                    call()
                assert crafted[:12] in caught.value.message, name
            else:
                call()
        report = db.verify(quick=True)
    unreadable = [p for p in report.problems if p.code == "unreadable"]
    assert [p.checkpoint_id for p in unreadable] == ([crafted] if hostile else [])
    cli = _cli("show", str(path), crafted, "--json")
    assert cli.exit_code == (5 if hostile else 0), cli.stdout[-1000:]


def nested_value(kinds: list[bool]) -> Any:
    """The Python value of :func:`nested` (built inside out, without recursion)."""
    value: Any = 1
    for obj in reversed(kinds):
        value = {"a": value} if obj else [value]
    return value


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(depth=DEPTHS, call=st.sampled_from(["commit", "prune", "keep_matching", "expect"]))
def test_api_json_values_hold_the_depth_rule(box: dict[str, Any], depth: int, call: str) -> None:
    """The same rule for JSON given as Python values: {"k": <depth containers>} puts the
    innermost value depth + 1 levels down."""
    value = {"k": nested_value([i % 2 == 0 for i in range(depth)])}
    accepted = depth + 1 <= LIMIT
    before = _digest(box["db"])
    with ckptdb.open(box["db"]) as db:
        calls = {
            "commit": lambda: db.commit("scratch", {"a": b"1"}, metadata=value),
            "prune": lambda: db.prune(value, dry_run=True),
            "keep_matching": lambda: RetentionPolicy(keep_matching=value),
            "expect": lambda: db.load("brain", expect=value),
        }
        if accepted:
            try:
                calls[call]()
            except errors.LoadRefusedError:
                assert call == "expect"  # {"k": ...} is not the stored metadata
            if call == "commit":  # what a writer accepts, every reader reads back
                assert db.current("scratch").metadata == value  # type: ignore[union-attr]
                assert db.verify(quick=True).ok
                db.drop_namespace("scratch")
            return
        with pytest.raises(errors.InvalidInputError) as caught:
            calls[call]()
        assert str(LIMIT) in caught.value.message
    assert _digest(box["db"]) == before
