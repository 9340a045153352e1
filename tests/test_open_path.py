"""Opening a ckptdb file costs one connection: the checks that decide whether the file may
be trusted run on the handle's own connection when nothing that connection does before
they pass can change a byte (the header is ckptdb's and in WAL mode, no rollback journal,
no frames in the WAL). Otherwise a separate read-only probe runs them first, as before.
Either way a refused file keeps every byte of the database and its WAL (and no -wal or
-shm is left beside a file that had none)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest
from conftest import all_files_digest, raw_sql

import ckptdb
from ckptdb import errors


@contextmanager
def connections() -> Iterator[list[str]]:
    """The files every apsw connection made in the block opened."""
    opened: list[str] = []

    def hook(conn: apsw.Connection) -> None:
        opened.append(conn.filename)

    apsw.connection_hooks.append(hook)
    try:
        yield opened
    finally:
        apsw.connection_hooks.remove(hook)


@pytest.fixture
def closed_file(tmp_path: Path) -> Path:
    path = tmp_path / "f.ckpt"
    with ckptdb.open(path) as db:
        db.commit("brain", {"a": b"1"})
    assert not Path(str(path) + "-wal").exists()  # the last close checkpointed it away
    return path


def _newest(db: ckptdb.Database) -> bytes:
    checkpoint = db.current("brain")
    assert checkpoint is not None
    return checkpoint.read("a")


def _database_connections(opened: list[str], path: Path) -> int:
    # The schema proof builds its expected schema once per process in memory: not a file.
    return sum(1 for name in opened if name and Path(name).name == path.name)


def test_a_closed_file_opens_with_one_connection(closed_file: Path) -> None:
    ckptdb.open(closed_file).close()  # the process's one-time work (expected schema)
    with connections() as opened, ckptdb.open(closed_file) as db:
        assert _newest(db) == b"1"
    assert _database_connections(opened, closed_file) == 1


def test_a_read_only_open_uses_one_connection(closed_file: Path) -> None:
    with connections() as opened, ckptdb.open(closed_file, readonly=True) as db:
        assert _newest(db) == b"1"
    assert _database_connections(opened, closed_file) == 1


def test_frames_in_the_wal_send_the_open_through_the_probe(closed_file: Path) -> None:
    with ckptdb.open(closed_file) as writer:
        writer.commit("brain", {"a": b"2"})  # left in the WAL while this handle is open
        assert Path(str(closed_file) + "-wal").stat().st_size > 0
        with connections() as opened, ckptdb.open(closed_file) as db:
            assert _newest(db) == b"2"
        assert _database_connections(opened, closed_file) == 2


def _tamper_leaving_wal(path: Path, sql: str) -> None:
    """Run ``sql`` on the file and close without checkpointing: its frames stay in the WAL."""
    conn = apsw.Connection(str(path))
    conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
    conn.execute(sql)
    conn.close()


@pytest.mark.parametrize("wal_frames", [False, True], ids=["checkpointed", "frames-in-wal"])
def test_a_refused_file_keeps_every_byte_and_side_file(
    closed_file: Path, tmp_path: Path, wal_frames: bool
) -> None:
    path = tmp_path / "tampered.ckpt"
    shutil.copy(closed_file, path)
    sql = "CREATE TRIGGER evil AFTER INSERT ON pin BEGIN SELECT 1; END"
    if wal_frames:
        _tamper_leaving_wal(path, sql)
        assert Path(str(path) + "-wal").stat().st_size > 0
    else:
        raw_sql(path, sql)
        assert not Path(str(path) + "-wal").exists()
    before = all_files_digest(path)
    with pytest.raises(errors.SchemaMismatchError) as exc:
        ckptdb.open(path)
    assert exc.value.code == "schema_mismatch"
    after = all_files_digest(path)
    if wal_frames:
        # Any reader of a WAL takes a read mark in the -shm (shared memory, rebuilt from the
        # WAL by every recovery): the database and the WAL are what must not change.
        del before["-shm"], after["-shm"]
    assert after == before


def test_a_refused_file_beside_a_rollback_journal_is_not_rolled_back(
    closed_file: Path, tmp_path: Path
) -> None:
    path = tmp_path / "journal.ckpt"
    shutil.copy(closed_file, path)
    raw_sql(path, "UPDATE ckptdb_migration SET checksum = ? WHERE version = 1", ("0" * 64,))
    journal = Path(str(path) + "-journal")
    journal.write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\x00" * 504)
    before = {**all_files_digest(path), "journal": journal.read_bytes().hex()}
    with pytest.raises(errors.MigrationChecksumError):
        ckptdb.open(path)
    assert {**all_files_digest(path), "journal": journal.read_bytes().hex()} == before
