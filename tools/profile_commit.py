"""Where a small commit's time goes: WAL frames per commit by b-tree, and COMMIT vs. the rest.

    python tools/profile_commit.py              # 1,000 commits of 3 x 1 KiB
    python tools/profile_commit.py --commits 200 --json out.json

A commit's COMMIT writes one WAL frame (a page) per b-tree page the transaction changed,
then fsyncs; on the project's VMs each frame costs about as much as 25 us. This tool commits
``--commits`` small checkpoints (after a warm-up that gives the indexes some depth), then:

* reads the WAL and attributes every frame to the table or index owning its page (SQLite's
  ``dbstat``; page 1 is ``sqlite_schema``, the file header; pointer-map pages have no owner);
* times ``Database.commit`` end to end and the COMMIT statement inside it.

It explains the ratio to the SQLite floor in docs/performance.md; run it before and after a
schema change that adds or drops an index.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import ckptdb

WAL_HEADER = 32
FRAME_HEADER = 24


def _entries() -> dict[str, bytes]:
    return {name: os.urandom(1024) for name in ("a", "b", "c")}


def frames_by_btree(path: Path, commits: int) -> dict[str, float]:
    """WAL frames per commit, by owning b-tree, over ``commits`` fresh commits."""
    with ckptdb.open(path) as db:
        for _ in range(300):
            db.commit("bench", _entries())
        db._handle.store.conn._raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        # Keep every frame in the WAL while counting (no automatic checkpoint).
        db._handle.store.conn._raw.pragma("wal_autocheckpoint", 0)
        for _ in range(commits):
            db.commit("bench", _entries())
        wal = Path(f"{path}-wal").read_bytes()
        # Owners as of now, so pages allocated during the run are attributed too.
        owner = {
            int(page): str(name)
            for name, page in db._handle.store.conn._raw.execute("SELECT name, pageno FROM dbstat")
        }
    counts: collections.Counter[str] = collections.Counter()
    page_size = struct.unpack(">I", wal[8:12])[0]
    at = WAL_HEADER
    while at + FRAME_HEADER + page_size <= len(wal):
        page = struct.unpack(">I", wal[at : at + 4])[0]
        counts[owner.get(page, "pointer map / free")] += 1
        at += FRAME_HEADER + page_size
    return {name: round(n / commits, 2) for name, n in counts.most_common()}


class _TimedCommit:
    """Wraps the raw apsw connection and times its COMMIT statements."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def execute(self, sql: str, *args: Any) -> Any:
        if sql != "COMMIT":
            return self._raw.execute(sql, *args)
        t0 = time.perf_counter()
        try:
            return self._raw.execute(sql, *args)
        finally:
            self.seconds += time.perf_counter() - t0


def time_split(path: Path, commits: int) -> dict[str, float]:
    """Microseconds per commit: end to end, and of that the COMMIT statement."""
    with ckptdb.open(path) as db:
        for _ in range(300):
            db.commit("bench", _entries())
        timed = _TimedCommit(db._handle.store.conn._raw)
        db._handle.store.conn._raw = timed
        batch = [_entries() for _ in range(commits)]
        t0 = time.perf_counter()
        for entries in batch:
            db.commit("bench", entries)
        total = time.perf_counter() - t0
        db._handle.store.conn._raw = timed._raw
    return {
        "commit_us": round(total / commits * 1e6),
        "of_which_COMMIT_us": round(timed.seconds / commits * 1e6),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ckptdb-profile-"))
    try:
        frames = frames_by_btree(workdir / "frames.ckpt", min(args.commits, 200))
        result = {
            "frames_per_commit": round(sum(frames.values()), 1),
            "frames_by_btree": frames,
            **time_split(workdir / "time.ckpt", args.commits),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
