"""Export and import between an SQLite file and a PostgreSQL database, both ways, verified:
the same checkpoint ids, bytes, lineage and (for an export) pointer history; a damaged or
encrypted source refused with nothing written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from conftest import raw_sql

import ckptdb
from ckptdb import errors

BIG = os.urandom(200_000)  # chunked: its chunks travel verbatim


def _fill(db: ckptdb.Database) -> dict[str, str]:
    a = db.commit("job/a", {"x": b"1", "big": BIG}, metadata={"step": 1}, label="first")
    b = db.commit("job/a", {"x": b"2", "big": BIG + b"!"}, metadata={"step": 2})
    c = db.commit("job/b", {"y": b"y"})
    db.set_current("job/a", a.checkpoint_id)  # CURRENT a, fallback b
    return {"a": a.checkpoint_id, "b": b.checkpoint_id, "c": c.checkpoint_id}


def _state(db: ckptdb.Database) -> dict[str, Any]:
    """What a transfer must keep: per namespace CURRENT, its lineage and every entry's bytes."""
    out: dict[str, Any] = {}
    for ns in sorted(n.name for n in db.namespaces()):
        cur = db.current(ns)
        assert cur is not None
        out[ns] = []
        for info in db.lineage(ns):
            c = db.get(info.id)
            out[ns].append(
                (c.id, c.generation, c.metadata, {k: c.read(k) for k in sorted(c.entries)})
            )
    return out


def test_an_sqlite_file_imports_into_postgresql_and_exports_back(
    pg_url: str, tmp_path: Path
) -> None:
    src = tmp_path / "src.ckpt"
    with ckptdb.open(src) as db:
        ids = _fill(db)
        before = _state(db)
    with ckptdb.open(pg_url) as pg:
        report = pg.import_file(src)
        assert report.checkpoints_copied == 3 and report.pointers_moved == ["job/a", "job/b"]
        assert _state(pg) == before
        assert pg.get_labelled("job/a", "first").id == ids["a"]  # type: ignore[union-attr]
        assert pg.verify().ok
        again = pg.import_file(src)  # idempotent: nothing copied twice
        assert again.checkpoints_copied == 0 and again.checkpoints_present == 3
        history = [(m.revision, m.current_id, m.digest) for m in pg.history("job/a")]
        out = tmp_path / "back.ckpt"
        exported = pg.export(out)
        assert exported.checkpoints_copied >= 2
    with ckptdb.open(out) as db:
        assert db.verify().ok
        assert _state(db) == before
        # The history travels verbatim: its digest chain is the database's.
        assert [(m.revision, m.current_id, m.digest) for m in db.history("job/a")] == history
        receipts = [r.kind for r in db.receipts()]
        assert "export" in receipts


def test_a_postgresql_database_exports_what_it_holds_with_its_history(
    pg_url: str, tmp_path: Path
) -> None:
    with ckptdb.open(pg_url) as pg:
        ids = _fill(pg)
        before = _state(pg)
        history = {
            ns: [(m.revision, m.current_id, m.fallback_id, m.digest) for m in pg.history(ns)]
            for ns in ("job/a", "job/b")
        }
        out = tmp_path / "out.ckpt"
        report = pg.export(out, namespaces=["job/a"])
        assert report.namespaces == ["job/a"] and report.checkpoints_copied == 2
    with ckptdb.open(out) as db:
        assert db.verify().ok
        assert _state(db) == {"job/a": before["job/a"]}
        assert [
            (m.revision, m.current_id, m.fallback_id, m.digest) for m in db.history("job/a")
        ] == history["job/a"]
        assert db.pointer("job/a").fallback_id == ids["b"]  # type: ignore[union-attr]
    # and on into another file
    with (
        ckptdb.open(pg_url.replace("/t_", "/u_", 1), create=True)
        if False
        else ckptdb.open(str(tmp_path / "second.ckpt")) as second
    ):
        second.import_file(out)
        assert _state(second) == {"job/a": before["job/a"]}


def test_a_damaged_database_is_not_exported(pg_url: str, tmp_path: Path) -> None:
    with ckptdb.open(pg_url) as pg:
        _fill(pg)
    raw_sql(
        pg_url,
        "UPDATE chunk_data SET data = decode(repeat('00', length(data)), 'hex')"
        " WHERE chunk_id = (SELECT min(chunk_id) FROM chunk_data)",
    )
    out = tmp_path / "out.ckpt"
    with ckptdb.open(pg_url) as pg, pytest.raises(errors.CorruptionError):
        pg.export(out)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_encrypted_namespace_does_not_leave_its_scope(pg_url: str, tmp_path: Path) -> None:
    with ckptdb.open(pg_url, keys={"tenant": bytes(range(32))}) as pg:
        pg.set_encryption("secret/", key_id="tenant")
        pg.commit("secret/x", {"k": b"v"})
        pg.commit("plain/x", {"k": b"v"})
        with pytest.raises(errors.EncryptedScopeError):
            pg.export(tmp_path / "all.ckpt")
        assert not (tmp_path / "all.ckpt").exists()
        pg.export(tmp_path / "plain.ckpt", namespaces=["plain/x"])
    with ckptdb.open(tmp_path / "plain.ckpt") as db:
        assert [n.name for n in db.namespaces()] == ["plain/x"]


def test_an_import_into_postgresql_refuses_a_fork_without_overwrite(
    pg_url: str, tmp_path: Path
) -> None:
    src = tmp_path / "src.ckpt"
    with ckptdb.open(src) as db:
        db.commit("job/a", {"x": b"file"})
    with ckptdb.open(pg_url) as pg:
        mine = pg.commit("job/a", {"x": b"database"})
        report = pg.import_file(src)
        assert [c.namespace for c in report.conflicts] == ["job/a"]
        assert pg.current("job/a").id == mine.checkpoint_id  # type: ignore[union-attr]
        forced = pg.import_file(src, overwrite=True)
        assert forced.pointers_moved == ["job/a"]
        assert pg.verify().ok
