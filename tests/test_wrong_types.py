"""A damaged record can hold a value of any SQLite type in any column: STRICT tables check
types when a row is written, never when it is read, and one flipped serial-type byte of a
record header turns text into an integer or bytes into text. For every column of every
table and every wrong type, each read path must return or raise a typed ``CkptdbError``,
and ``verify`` must report the damage. (The full corruption campaign found the first such
crash, in ``verify`` itself; this sweeps the whole class.)"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest
from conftest import REPO, store_wrong_types

import ckptdb
from ckptdb import errors

WRONG_VALUES: dict[str, object] = {"integer": 12345, "real": 1.5, "text": "x", "blob": b"\x07"}


def _build(path: Path) -> None:
    """Every table gets rows: inline and chunked blobs, pins, receipts, a retention policy."""
    with ckptdb.open(path, chunk_size=65536) as db:
        first = db.commit("alpha", {"s": b"alpha-1", "big": b"x" * 200_000}, metadata={"t": 1})
        db.commit("alpha", {"s": b"alpha-2"}, metadata={"t": 2})
        db.commit("alpha", {"s": b"alpha-3"}, metadata={"t": 3})
        db.commit("beta", {"s": b"beta"})
        db.pin(first.checkpoint_id, "first", note="kept")
        db.set_retention(ckptdb.RetentionPolicy(keep_last=5), namespace="alpha")
        db.gc(grace=0)  # the stored policy: a gc receipt
        db.load("alpha", fallback=True)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wrong-types") / "pristine.ckpt"
    _build(path)
    return path


def _read_everything(db: ckptdb.Database, export_to: Path) -> list[str]:
    """Every read path; returns what raised something other than a CkptdbError."""
    untyped: list[str] = []

    def attempt(name: str, call: Callable[[], object]) -> None:
        try:
            call()
        except errors.CkptdbError:
            pass
        except Exception as exc:  # the finding this test exists for
            untyped.append(f"{name}: {type(exc).__name__}: {exc}")

    def read_current(ns: str) -> None:
        cp = db.current(ns)
        for name in cp.entries if cp else ():
            cp.read(name)
            with cp.open(name) as stream:
                stream.read()

    attempt("namespaces", db.namespaces)
    for ns in ("alpha", "beta"):
        attempt(f"current({ns})", lambda ns=ns: read_current(ns))
        attempt(f"load({ns}, fallback)", lambda ns=ns: db.load(ns, fallback=True))
        attempt(f"lineage({ns})", lambda ns=ns: db.lineage(ns))
        attempt(f"history({ns})", lambda ns=ns: db.history(ns))
        for ref in (f"{ns}@current", f"{ns}@fallback", f"{ns}~1"):
            attempt(f"resolve({ref})", lambda ref=ref: db.resolve(ref))
    attempt("pins", db.pins)
    attempt("receipts", db.receipts)
    attempt("stats", db.stats)
    attempt("retention", db.retention)
    attempt("export", lambda: db.export(export_to))
    attempt("gc(dry_run)", lambda: db.gc(dry_run=True, grace=0))
    attempt("gc", lambda: db.gc(grace=0))
    return untyped


def _schema_columns() -> list[tuple[str, str, str]]:
    """(table, column, declared type) of the full schema, read from the shipped schema."""
    conn = apsw.Connection(":memory:")
    conn.execute((REPO / "schema" / "ckptdb.sql").read_text())
    tables = [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    columns = []
    for table in tables:
        info = list(conn.execute(f"PRAGMA table_info({table})"))
        sql = str(conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (table,)).get)
        keys = [r for r in info if r[5]]
        for r in info:
            rowid_alias = keys == [r] and r[2] == "INTEGER" and "WITHOUT ROWID" not in sql
            if not rowid_alias:  # SQLite itself keeps a rowid alias an integer
                columns.append((table, str(r[1]), str(r[2]).lower()))
    return columns


COLUMNS = _schema_columns()


@pytest.mark.parametrize(
    ("table", "column", "declared"), COLUMNS, ids=[f"{t}.{c}" for t, c, _ in COLUMNS]
)
def test_a_value_of_the_wrong_type_is_a_typed_error_and_verify_reports_it(
    pristine: Path, tmp_path: Path, table: str, column: str, declared: str
) -> None:
    for kind, value in WRONG_VALUES.items():
        if kind == declared:
            continue
        path = tmp_path / f"{kind}.ckpt"
        shutil.copy(pristine, path)
        if not store_wrong_types(path, table, {column: value}):
            continue  # e.g. a rowid alias, which SQLite keeps an integer
        try:
            db = ckptdb.open(path)
        except errors.CkptdbError:
            continue  # refused at open: typed, which is all that is asked
        with db:
            report = db.verify()
            assert not report.ok, f"{table}.{column} = {value!r} went unreported"
            untyped = _read_everything(db, tmp_path / f"{kind}-export.ckpt")
        assert not untyped, f"{table}.{column} = {value!r}: {untyped}"
