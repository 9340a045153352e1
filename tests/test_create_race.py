"""Creating a new file: the whole schema and the file's layout settings land in one commit,
so neither a process racing to open the same new path nor a crash between two commits can
find tables without settings (which reads as a damaged file)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path

from conftest import child_env

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
            [sys.executable, __file__, str(tmp_path), str(k), repr(start)],
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


if __name__ == "__main__":
    _racer(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
