"""Sealed pending writes (langgraph schema version 2): every lg_write row carries a digest
that reads and ``ckptdb verify`` check; rows of older files are sealed on the first
read-write open.

``tests/fixtures/langgraph-v1.ckpt`` is a file written by the saver at langgraph schema
version 1 (core version 4): thread ``t1`` with three checkpoints, each with two pending
writes of task ``task-<i>`` (task path ``p``), an interrupt of task ``task-int`` on the
last one, and thread ``t2`` / namespace ``child:1`` with one checkpoint and one write. It
was made by running, before migration 0002 existed, a script equivalent to
``_fixture_script`` below; it must never change.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import store_wrong_types
from langgraph.checkpoint.base import empty_checkpoint

import ckptdb
from ckptdb.integrations.langgraph import CkptdbSaver
from ckptdb.integrations.langgraph.sealing import UNSEALED_MARKER, write_digest

FIXTURE = Path(__file__).parent / "fixtures" / "langgraph-v1.ckpt"
FIXTURE_SHA256 = "321a2dbce42e156ebd568b739b0c3506cea9646171eaaeafd8ac9d19ee818127"


def _fixture_script(out: Path) -> None:
    """How the fixture was made (kept for the record; not run by the tests)."""
    with CkptdbSaver(out) as saver:
        config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        for i in range(3):
            cp = empty_checkpoint()
            cp["id"] = f"1ef0000{i}-0000-6000-8000-000000000000"
            cp["channel_values"] = {"msg": f"hello {i}", "big": "x" * 400 + str(i)}
            cp["channel_versions"] = {"msg": str(i + 1), "big": str(i + 1)}
            config = saver.put(config, cp, {"step": i, "source": "loop"}, {"msg": str(i + 1)})
            saver.put_writes(
                config, [("msg", f"pending {i}"), ("other", {"k": i})], f"task-{i}", "p"
            )
        saver.put_writes(config, [("__interrupt__", "stop")], "task-int")
        sub: Any = {"configurable": {"thread_id": "t2", "checkpoint_ns": "child:1"}}
        cp = empty_checkpoint()
        cp["id"] = "1ef00010-0000-6000-8000-000000000000"
        cp["channel_values"] = {"a": 1}
        sub = saver.put(sub, cp, {"step": 0}, {})
        saver.put_writes(sub, [("a", 2)], "task-sub")


def cfg(thread: str, ns: str = "") -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}


def _checkpoint(i: int) -> Any:
    cp = empty_checkpoint()
    cp["id"] = f"1ef1000{i}-0000-6000-8000-000000000000"
    cp["channel_values"] = {"a": i}
    return cp


def _saved(path: Path) -> Any:
    with CkptdbSaver(path) as saver:
        config = saver.put(cfg("t"), _checkpoint(0), {"step": 0}, {})
        saver.put_writes(config, [("a", "a value that still decodes"), ("b", 7)], "task")
        return config


def _sql(path: Path, sql: str, params: tuple[Any, ...] = ()) -> None:
    db = ckptdb.open(path)
    try:
        with db.write_session() as s:
            s.execute(sql, params)
    finally:
        db.close()


def test_every_write_is_sealed_with_a_domain_separated_digest(tmp_path: Path) -> None:
    path = tmp_path / "s.ckpt"
    config = _saved(path)
    cid = config["configurable"]["checkpoint_id"]
    with CkptdbSaver(path) as saver, saver.db.read_session() as s:
        rows = s.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type,"
            " value, task_path, digest FROM lg_write ORDER BY idx"
        )
    assert len(rows) == 2
    for r in rows:
        assert r[9] == write_digest(*r[:9])
        assert r[9] != hashlib.sha256(r[7]).hexdigest()  # not a plain content address
    # every field is part of the identity
    base = ("t", "", cid, "task", 0, "a", "msgpack", b"v", "")
    variants = {write_digest(*base)}
    for i, other in enumerate(("u", "x", "c2", "task2", 1, "b", "json", b"w", "p")):
        variants.add(write_digest(*base[:i], other, *base[i + 1 :]))  # type: ignore[arg-type]
    assert len(variants) == 10
    # the length prefix keeps field boundaries: ("ab", "c") is not ("a", "bc")
    assert write_digest("ab", "c", *base[2:]) != write_digest("a", "bc", *base[2:])


def test_the_write_digest_is_the_stored_format() -> None:
    # Digests are stored: any change to how they are computed must fail here first (these
    # values were computed by the first implementation, in schema version 2).
    assert (
        write_digest(
            "thread-1", "", "1ef-id", "task", -1, "__error__", "msgpack", b"\x81\xa1a\x01", "p:0"
        )
        == "a83c40e3e3bcb43ea1d7eb3f9122aff4a9d8e64f6ebb9ff4906dd44cb54036b5"
    )
    assert (
        write_digest("t\u00e9", "sub", "id2", "tk", 7, "messages", "json", b"", "")
        == "7488ec44ef9f4c9652e865c752bd3ce2e51567b695b2824099e80decdbac0970"
    )


def test_a_damaged_value_that_still_decodes_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "d.ckpt"
    _saved(path)
    with CkptdbSaver(path) as saver, saver.db.read_session() as s:
        value = s.scalar("SELECT value FROM lg_write WHERE idx = 0")
    assert isinstance(value, bytes)
    damaged = value.replace(b"still", b"STILL")
    _sql(path, "UPDATE lg_write SET value = ? WHERE idx = 0", (damaged,))
    with CkptdbSaver(path) as saver:
        assert saver.serde.loads_typed(("msgpack", damaged)) == "a value that STILL decodes"
        with pytest.raises(ckptdb.CorruptionError) as info:
            saver.get_tuple(cfg("t"))
        assert info.value.details.get("reason") == "write_digest_mismatch"
        with pytest.raises(ckptdb.CorruptionError):
            list(saver.list(cfg("t")))
        with pytest.raises(ckptdb.CorruptionError):
            saver.copy_thread("t", "t-copy")
        report = saver.db.verify()
        assert not report.ok
        assert [p.code for p in report.problems] == ["lg_write_mismatch"]
        assert saver.db.verify(quick=True).ok  # quick: digests are not recomputed


def test_a_write_damaged_after_this_saver_wrote_and_read_it_is_still_caught(
    tmp_path: Path,
) -> None:
    """Seals this saver computed or checked are remembered (so re-reads skip hashing), but
    only for rows equal to what was sealed: a row damaged since is hashed and refused."""
    path = tmp_path / "warm.ckpt"
    with CkptdbSaver(path) as saver:
        config = saver.put(cfg("t"), _checkpoint(0), {"step": 0}, {})
        saver.put_writes(config, [("a", "a value that still decodes"), ("b", 7)], "task")
        child = saver.put(config, _checkpoint(1), {"step": 1}, {})
        for _ in range(2):  # the first read checks, the second is served from the cache
            got = saver.get_tuple(config)
            assert got is not None
            assert [w[2] for w in got.pending_writes or []] == ["a value that still decodes", 7]
            history = saver.get_delta_channel_history(config=child, channels=["a"])
            assert [w[2] for w in history["a"]["writes"]] == ["a value that still decodes"]
        with saver.db.read_session() as s:
            value = s.scalar("SELECT value FROM lg_write WHERE idx = 0")
        assert isinstance(value, bytes)
        _sql(path, "UPDATE lg_write SET value = ? WHERE idx = 0", (value.replace(b"l", b"L"),))
        with pytest.raises(ckptdb.CorruptionError):
            saver.get_tuple(config)
        with pytest.raises(ckptdb.CorruptionError):
            saver.get_delta_channel_history(config=child, channels=["a"])


def test_a_lost_digest_is_corruption_once_the_file_is_sealed(tmp_path: Path) -> None:
    path = tmp_path / "n.ckpt"
    _saved(path)
    _sql(path, "UPDATE lg_write SET digest = NULL WHERE idx = 1")
    with CkptdbSaver(path) as saver:
        with pytest.raises(ckptdb.CorruptionError):
            saver.get_tuple(cfg("t"))
        assert [p.code for p in saver.db.verify().problems] == ["lg_write_unsealed"]


def test_verify_checks_the_saver_tables_without_importing_langgraph(tmp_path: Path) -> None:
    path = tmp_path / "cli.ckpt"
    _saved(path)
    _sql(path, "UPDATE lg_write SET value = x'a3616263' WHERE idx = 1")
    code = (
        "import sys, ckptdb\n"
        f"r = ckptdb.open({str(path)!r}).verify()\n"
        "assert 'langgraph' not in sys.modules, 'verify imported LangGraph'\n"
        "print(','.join(p.code for p in r.problems))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "lg_write_mismatch"
    cli = subprocess.run(
        [sys.executable, "-m", "ckptdb.cli", "verify", str(path), "--json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode != 0 and "lg_write_mismatch" in cli.stdout


def test_damaged_rows_of_every_saver_table_are_verify_findings(tmp_path: Path) -> None:
    path = tmp_path / "rows.ckpt"
    _saved(path)
    db = ckptdb.open(path)
    try:
        assert db.verify().ok
    finally:
        db.close()
    _sql(path, "UPDATE lg_checkpoint SET ckpt_id = ?", ("z" * 64,))
    assert store_wrong_types(path, "lg_namespace", {"thread_id": b"\x00"})
    assert store_wrong_types(path, "lg_write", {"task_id": 5})
    db = ckptdb.open(path)
    try:
        # (SQLite's integrity check also flags the STRICT violations: sqlite_integrity)
        codes = sorted(p.code for p in db.verify().problems if p.code.startswith("lg_"))
    finally:
        db.close()
    assert codes == ["lg_row_damaged", "lg_row_damaged", "lg_write_damaged", "lg_write_damaged"]


def test_the_v1_fixture_upgrades_and_every_write_is_sealed(tmp_path: Path) -> None:
    assert hashlib.sha256(FIXTURE.read_bytes()).hexdigest() == FIXTURE_SHA256, (
        "a committed fixture must never change"
    )
    path = tmp_path / "old.ckpt"
    shutil.copyfile(FIXTURE, path)
    # the core schema first (it moved on since the fixture was made), then read-only,
    # before the saver's own upgrade: readable, writes unsealed (no digest column yet)
    ckptdb.open(path).close()
    with CkptdbSaver(ckptdb.open(path, readonly=True)) as ro:
        before = ro.get_tuple(cfg("t1"))
        sub_before = ro.get_tuple(cfg("t2", "child:1"))
    assert before is not None and sub_before is not None
    assert [w[2] for w in before.pending_writes or []] == ["stop", "pending 2", {"k": 2}]
    # the first read-write open migrates and seals every old row in one go
    with CkptdbSaver(path) as saver:
        with saver.db.read_session() as s:
            assert s.scalar("SELECT count(*) FROM lg_write WHERE digest IS NULL") == 0
            assert s.scalar("SELECT count(*) FROM lg_write") == 8
            assert s.scalar("SELECT count(*) FROM lg_meta WHERE key = ?", (UNSEALED_MARKER,)) == 0
        after = saver.get_tuple(cfg("t1"))
        assert after is not None
        assert after.pending_writes == before.pending_writes
        assert after.checkpoint == before.checkpoint
        assert saver.get_tuple(cfg("t2", "child:1")) == sub_before
        assert len(list(saver.list(cfg("t1")))) == 3
        report = saver.db.verify()
        assert report.ok, report.problems
        saver.put_writes(after.config, [("msg", "new")], "task-new")
        assert len(saver.get_tuple(cfg("t1")).pending_writes or []) == 4  # type: ignore[union-attr]


def test_a_file_migrated_but_not_yet_sealed_reads_read_only(tmp_path: Path) -> None:
    """The marker window: migrated to version 2 (by a process that stopped before sealing),
    then opened read-only -- NULL digests are accepted while the marker says so."""
    path = tmp_path / "window.ckpt"
    shutil.copyfile(FIXTURE, path)
    with CkptdbSaver(path):
        pass
    _sql(path, "UPDATE lg_write SET digest = NULL")
    _sql(path, "INSERT INTO lg_meta (key, value) VALUES (?, 'pending')", (UNSEALED_MARKER,))
    with CkptdbSaver(ckptdb.open(path, readonly=True)) as ro:
        assert ro.get_tuple(cfg("t1")) is not None
        assert ro.db.verify().ok
    with CkptdbSaver(path) as saver:  # read-write: sealed again
        assert saver.db.verify().ok
        with saver.db.read_session() as s:
            assert s.scalar("SELECT count(*) FROM lg_write WHERE digest IS NULL") == 0
