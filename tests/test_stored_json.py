"""JSON read back from a file that ckptdb did not write that way (issue 23, family 5): a
setting or a receipt body nested past the depth rule, or holding what no parser converts,
is a typed CorruptionError (or a verify problem), never a RecursionError or ValueError."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors
from ckptdb.validation import MAX_JSON_DEPTH, stored_json

# Text a hostile writer could leave: far too deep for Python's parser, one level too deep,
# digits Python refuses to convert, a constant JSON does not have, bytes that are not UTF-8.
HOSTILE = [
    "[" * 100_000 + "]" * 100_000,
    "[" * (MAX_JSON_DEPTH + 1) + "1" + "]" * (MAX_JSON_DEPTH + 1),
    "7" * 5000,
    '{"a": NaN}',
]


def _set(path: Path, sql: str, params: tuple[object, ...]) -> None:
    # Python's own sqlite3, as an operator's tool would: ckptdb never writes these values.
    con = sqlite3.connect(path)
    try:
        con.execute(sql, params)
        con.commit()
    finally:
        con.close()


@pytest.mark.parametrize("text", HOSTILE, ids=["deep", "one-too-deep", "digits", "nan"])
@pytest.mark.parametrize("key", ["chunking", "features"])
def test_hostile_setting_refuses_open_typed(tmp_path: Path, key: str, text: str) -> None:
    path = tmp_path / "s.ckpt"
    with ckptdb.open(path) as db:
        db.commit("ns", {"a": b"x" * 10_000})
    _set(path, "INSERT OR REPLACE INTO setting (key, value) VALUES (?, ?)", (key, text))
    with pytest.raises(errors.CorruptionError) as caught, ckptdb.open(path) as db:
        db.load("ns").checkpoint.read("a")
    assert caught.value.details.get("reason") == "bad_setting"


@pytest.mark.parametrize("text", HOSTILE, ids=["deep", "one-too-deep", "digits", "nan"])
def test_hostile_receipt_body_is_corruption(tmp_path: Path, text: str) -> None:
    path = tmp_path / "r.ckpt"
    with ckptdb.open(path) as db:
        db.commit("ns", {"a": b"x"})
        db.gc(ckptdb.RetentionPolicy(keep_last=1))
    _set(path, "UPDATE receipt SET body = ?", (text,))
    with ckptdb.open(path) as db:
        with pytest.raises(errors.CorruptionError) as caught:
            db.receipts()
        assert caught.value.details.get("reason") == "receipt_damaged"
        report = db.verify()  # reports the damaged receipt, does not crash
    assert not report.ok


def _nested(depth: int, innermost: str) -> str:
    return "[" * depth + innermost + "]" * depth


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(1, 3 * MAX_JSON_DEPTH), empty=st.booleans())
def test_stored_json_holds_the_writers_depth_rule(depth: int, empty: bool) -> None:
    # A value at depth d holds what sits at d + 1: the innermost "1" inside ``depth``
    # arrays is at depth ``depth``; an empty innermost array is at depth ``depth - 1``.
    text = _nested(depth, "" if empty else "1")
    deepest = depth - 1 if empty else depth
    if deepest <= MAX_JSON_DEPTH:
        assert stored_json(text, "test value", "test") is not None
    else:
        with pytest.raises(errors.CorruptionError):
            stored_json(text, "test value", "test")
