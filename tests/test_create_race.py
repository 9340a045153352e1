"""Creating a new file: the whole schema and the file's layout settings land in one commit,
so neither a process racing to open the same new path nor a kill -9 between two commits can
leave tables without settings (which reads as a damaged file)."""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import child_env, raw_sql

import ckptdb

WAL_HEADER = 32
FRAME_HEADER = 24


def _commit_frames(wal: Path, page_size: int) -> int:
    """How many commits the WAL file holds (frames whose header records a database size)."""
    data = wal.read_bytes()
    commits = 0
    offset = WAL_HEADER
    while offset + FRAME_HEADER + page_size <= len(data):
        _page, db_size = struct.unpack(">II", data[offset : offset + 8])
        commits += db_size != 0
        offset += FRAME_HEADER + page_size
    return commits


def test_a_new_file_gets_its_schema_and_settings_in_one_commit(tmp_path: Path) -> None:
    path = tmp_path / "new.ckpt"
    with ckptdb.open(path, chunk_size=131072) as db:
        # The handle is still open, so nothing has checkpointed the WAL into the file.
        wal = Path(f"{path}-wal")
        page_size = struct.unpack(">I", wal.read_bytes()[8:12])[0]
        assert _commit_frames(wal, page_size) == 1
        assert db.chunk_size == 131072
        db.commit("ns", {"a": b"x"})
    with ckptdb.open(path) as db:
        assert db.chunk_size == 131072
        assert db.verify().ok


def test_a_new_file_opened_with_migrate_check_stays_empty_until_migrated(tmp_path: Path) -> None:
    path = tmp_path / "unmigrated.ckpt"
    with ckptdb.open(path, migrate="check") as db:
        status = db.migration_status()
        assert status.file_version == 0 and status.pending
    with ckptdb.open(path, chunk_size=131072) as db:  # the first open that migrates creates it
        assert db.chunk_size == 131072
        assert db.migration_status().pending == []


def test_a_file_an_interrupted_creation_left_without_settings_is_finished(
    tmp_path: Path,
) -> None:
    # What a crash between the migrations and the settings commit of an earlier release
    # left behind: every table, no chunk_size, nothing stored.
    path = tmp_path / "interrupted.ckpt"
    ckptdb.open(path).close()
    raw_sql(path, "DELETE FROM setting WHERE key = 'chunk_size'")
    with ckptdb.open(path, chunk_size=131072) as db:
        assert db.chunk_size == 131072
        db.commit("ns", {"a": b"x" * 300_000})
    with ckptdb.open(path) as db:
        assert db.chunk_size == 131072
        assert db.verify().ok


def test_an_interrupted_creation_is_not_finished_by_an_open_that_must_not_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "interrupted.ckpt"
    ckptdb.open(path).close()
    raw_sql(path, "DELETE FROM setting WHERE key = 'chunk_size'")
    for kwargs in ({"readonly": True}, {"migrate": "check"}):
        with pytest.raises(ckptdb.DatabaseFileError) as caught:
            ckptdb.open(path, **kwargs)  # type: ignore[arg-type]
        assert "open it read-write once" in str(caught.value)
        assert raw_sql(path, "SELECT count(*) FROM setting WHERE key = 'chunk_size'") == [(0,)]
    with ckptdb.open(path) as db:
        assert db.chunk_size > 0


def test_a_file_that_stores_data_without_its_chunk_size_is_refused_untouched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "damaged.ckpt"
    with ckptdb.open(path) as db:
        db.commit("ns", {"a": b"x"})
    raw_sql(path, "DELETE FROM setting WHERE key = 'chunk_size'")
    with pytest.raises(ckptdb.CorruptionError) as caught:
        ckptdb.open(path)
    assert caught.value.details["reason"] == "bad_setting"
    assert raw_sql(path, "SELECT count(*) FROM setting WHERE key = 'chunk_size'") == [(0,)]


ROUNDS = 12
RACERS = 4


def _racer(directory: str, racer: int, start: float) -> None:
    """Open each round's new file at the same instant as the other racers, asking for a
    chunk size of its own; commit; report the chunk size the file took."""
    sizes = []
    for r in range(ROUNDS):
        time.sleep(max(0.0, start + r * 0.25 - time.time()))
        with ckptdb.open(Path(directory) / f"{r}.ckpt", chunk_size=65536 * (racer + 1)) as db:
            db.commit(f"racer{racer}", {"r": str(r).encode()})
            sizes.append(db.chunk_size)
    print(json.dumps(sizes))


def test_processes_racing_to_create_one_file_all_open_it(tmp_path: Path) -> None:
    start = time.time() + 2.0  # past every racer's interpreter start-up
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "race", str(tmp_path), str(k), repr(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for k in range(RACERS)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    sizes = [json.loads(out) for out, _err in outputs]
    for r in range(ROUNDS):
        path = tmp_path / f"{r}.ckpt"
        with ckptdb.open(path) as db:
            # One racer created the file; every racer then used its chunk size, not its own.
            assert {s[r] for s in sizes} == {db.chunk_size}
            assert sorted(n.name for n in db.namespaces()) == [f"racer{k}" for k in range(RACERS)]
            assert db.verify().ok


def _creator(directory: str) -> None:
    """Create new files one after another until killed."""
    for n in range(1_000_000):
        path = Path(directory) / f"{n}.ckpt"
        print(path, flush=True)
        with ckptdb.open(path, chunk_size=131072) as db:
            db.commit("ns", {"n": str(n).encode()})


def test_a_creation_killed_at_any_moment_leaves_a_file_that_opens(tmp_path: Path) -> None:
    rng = random.Random(11)
    for kill in range(6):
        directory = tmp_path / str(kill)
        directory.mkdir()
        proc = subprocess.Popen(
            [sys.executable, __file__, "create", str(directory)],
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        assert proc.stdout is not None
        proc.stdout.readline()  # started creating its first file
        time.sleep(rng.uniform(0.05, 0.6))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        created = sorted(directory.glob("*.ckpt"))
        assert created
        for path in created:
            # Whole (and then with the requested chunk size) or still empty, never between,
            # read before any ckptdb open (a read-write one would finish a half-made file).
            (version,) = raw_sql(path, "PRAGMA user_version")[0]
            if version:
                stored = raw_sql(path, "SELECT value FROM setting WHERE key = 'chunk_size'")
                assert stored == [("131072",)], (path, version)
            with ckptdb.open(path) as db:
                names = [n.name for n in db.namespaces()]
                assert names in ([], ["ns"])
                if names:
                    assert db.chunk_size == 131072
                assert db.verify().ok


if __name__ == "__main__":
    if sys.argv[1] == "create":
        _creator(sys.argv[2])
    else:
        _racer(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
