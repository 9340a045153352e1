"""GC says what its grace period held back (issue 26, item 2): how many unreferenced chunks
and bytes, when they become collectable, and -- for people -- the command that collects them
now; in the report, its --json, its receipt and the CLI's text."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner
from conftest import raw_sql

import ckptdb
from ckptdb import RetentionPolicy
from ckptdb.cli import main

CHUNK = 64 * 1024
HOUR_MS = 3_600_000
START_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z


class Clock:
    """A clock the test moves (milliseconds since the epoch)."""

    def __init__(self) -> None:
        self.ms = START_MS

    def __call__(self) -> int:
        return self.ms


def _orphans(path: str) -> tuple[int, int]:
    """(count, bytes) of the chunks no blob references, read from the file itself."""
    row = raw_sql(
        path,
        "SELECT count(*), coalesce(sum(size), 0) FROM chunk"
        " WHERE chunk_id NOT IN (SELECT chunk_id FROM blob_chunk)",
    )[0]
    return int(row[0]), int(row[1])  # type: ignore[call-overload]


def _chunks_of(path: str, checkpoint_id: str) -> tuple[int, int]:
    """(count, bytes) of the chunks the entries of one checkpoint use."""
    row = raw_sql(
        path,
        "SELECT count(DISTINCT c.chunk_id), coalesce(sum(c.size), 0) FROM checkpoint k"
        " JOIN blob_ref e ON e.checkpoint_seq = k.seq JOIN blob_chunk bc ON bc.blob_id = e.blob_id"
        " JOIN chunk c ON c.chunk_id = bc.chunk_id WHERE k.id = ?",
        (checkpoint_id,),
    )[0]
    return int(row[0]), int(row[1])  # type: ignore[call-overload]


def test_the_report_says_what_the_grace_period_holds_and_until_when(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "g.ckpt"
    with ckptdb.open(path, chunk_size=CHUNK, clock=clock) as db:
        # Values larger than a chunk are staged before their commit: their chunks carry the
        # time they were staged at, which the grace period is measured from.
        first = db.commit("run", {"w": os.urandom(5 * CHUNK)})
        staged_ms = clock.ms
        clock.ms += 10 * 60_000
        db.commit("run", {"w": os.urandom(5 * CHUNK)})
        clock.ms += 10 * 60_000
        db.commit("run", {"w": os.urandom(5 * CHUNK)})
        doomed_chunks, doomed_bytes = _chunks_of(db.path, first.checkpoint_id)
        assert doomed_chunks >= 5

        plan = db.gc(RetentionPolicy(keep_last=1), grace="1h", dry_run=True)
        report = db.gc(RetentionPolicy(keep_last=1), grace="1h")
        assert report.checkpoints_deleted == 1 and report.chunks_deleted == 0
        held = report.grace_held
        assert (held.chunks, held.bytes) == (doomed_chunks, doomed_bytes)
        assert (held.chunks, held.bytes) == _orphans(db.path)
        free_at = datetime.fromtimestamp((staged_ms + HOUR_MS) / 1000, tz=UTC)
        assert held.first_free_at == held.all_free_at == free_at
        # The dry run announced exactly that.
        assert plan.grace_held == held
        # The receipt keeps it.
        body = db.receipts(kind="gc")[0].body["grace_held"]
        assert body["chunks"] == doomed_chunks and body["bytes"] == doomed_bytes

        # Past the grace period the same GC collects them, and nothing is held any more.
        clock.ms = staged_ms + HOUR_MS + 1  # "free after": strictly later
        later = db.gc(RetentionPolicy(keep_last=1), grace="1h")
        assert (later.chunks_deleted, later.bytes_freed) == (doomed_chunks, doomed_bytes)
        assert later.grace_held.chunks == 0 and later.grace_held.first_free_at is None
        assert _orphans(db.path) == (0, 0)
        assert db.verify().ok


def test_oldest_and_newest_held_chunks_give_a_window(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "w.ckpt"
    with ckptdb.open(path, chunk_size=CHUNK, clock=clock) as db:
        for minute in (0, 20, 40):
            clock.ms = START_MS + minute * 60_000
            db.commit("run", {"w": os.urandom(3 * CHUNK)})
        clock.ms = START_MS + 45 * 60_000
        db.commit("run", {"small": b"x"})
        db.commit("run", {"small": b"y"})  # the big ones are neither CURRENT nor fallback
        held = db.gc(RetentionPolicy(keep_last=1), grace="1h").grace_held
        assert held.first_free_at == datetime.fromtimestamp((START_MS + HOUR_MS) / 1000, tz=UTC)
        assert held.all_free_at == held.first_free_at + timedelta(minutes=40)
        # A shorter grace period holds nothing of them.
        assert db.gc(RetentionPolicy(keep_last=1), grace="30m").grace_held.chunks > 0
        assert db.gc(RetentionPolicy(keep_last=1), grace="1m").grace_held.chunks == 0


def test_the_cli_says_it_in_text_and_json(tmp_path: Path) -> None:
    path = tmp_path / "c.ckpt"
    with ckptdb.open(path, chunk_size=CHUNK) as db:
        for _ in range(3):
            db.commit("run", {"w": os.urandom(4 * CHUNK)})
    runner = CliRunner()
    text = runner.invoke(main, ["gc", str(path), "--keep-last", "1"], catch_exceptions=False)
    assert text.exit_code == 0, text.output
    line = next(x for x in text.stdout.splitlines() if "grace period" in x)
    assert " chunks held by the 1h grace period; free after " in line
    assert line.endswith(f" UTC, or run `ckptdb gc {path} --grace 0s` when no commit is running")
    shown = line.split("free after ")[1].split(" UTC")[0]
    # --json of the same state (nothing deleted now, the same chunks still held).
    result = runner.invoke(main, ["gc", str(path), "--keep-last", "1", "--json"])
    held = json.loads(result.stdout)["grace_held"]
    assert held["chunks"] >= 4 and held["bytes"] >= 4 * CHUNK
    all_free = datetime.fromisoformat(held["all_free_at"])
    ceiling = all_free.replace(second=0, microsecond=0) + timedelta(minutes=1)
    assert shown == ceiling.strftime("%H:%M") or shown == ceiling.strftime("%Y-%m-%d %H:%M")
    assert all_free - datetime.now(UTC) <= timedelta(hours=1)
    # The command it names collects them.
    done = json.loads(runner.invoke(main, ["gc", str(path), "--grace", "0s", "--json"]).stdout)
    assert done["chunks_deleted"] == held["chunks"] and done["grace_held"]["chunks"] == 0
    quiet = runner.invoke(main, ["gc", str(path), "--keep-last", "1"])
    assert "grace period" not in quiet.stdout
