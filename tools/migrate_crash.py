"""Crash loop of schema 7's data step: SIGKILL `ckptdb migrate DB up` while it moves entries.

    python tools/migrate_crash.py --kills 40                 # 20,000 checkpoints (~15 min)
    python tools/migrate_crash.py --quick --kills 4          # 5,000 checkpoints (CI)
    python tools/migrate_crash.py --kills 40 --seed 7 --json out.json

The file. No writer of storage format 2 exists any more, so the file is built at schema 7
with this code (``--checkpoints`` commits over several namespaces: inline and chunked
entries, blobs shared between checkpoints and namespaces, media types and schema pins),
then demoted with raw SQL to exactly the state migration 0007's DDL leaves a format-2 file
in -- the state its data step (``ops/migrate.move_entries``) starts from:

* ``INSERT INTO entry ... SELECT`` every packed entry back into the format-2 table (0007
  leaves every entry there: its DDL only adds the column);
* ``DELETE FROM blob_ref`` (0007 creates the table empty);
* ``UPDATE checkpoint SET entries = NULL`` (the column 0007 adds is NULL on every stored
  row);
* ``UPDATE seq_high_water SET seq = max(seq)`` (0007's INSERT sets it so; a file created
  at schema 7 that never deleted a checkpoint holds 0). Labels stay NULL: the builder
  gives none, as no format-2 row had one.

The demoted file must verify and read back every checkpoint's entries as before; then,
``--kills`` times: copy it, run ``python -m ckptdb.cli migrate COPY up --no-backup`` in a
subprocess, SIGKILL it at a random moment -- one kill in ten while it starts and opens the
file; of the others half at a uniform moment of the move, timed from that run's own first
WAL write (an unkilled run gives the first window; a kill that lands after the last batch
narrows it), half once it has written a uniform fraction of the bytes an unkilled run
writes to the WAL -- and check the copy as the kill left it (opened with
``migrate="check"``, which moves nothing):

* the schema version is 7 and the move stopped at a batch boundary: the moved rows are
  the lowest seqs, a multiple of MOVE_BATCH of them (or all), and no moved row keeps an
  ``entry`` row;
* ``verify`` passes (every blob, ``blob_ref`` against the packed entries -- none missing,
  none stray -- and the rows not moved yet read from ``entry``);
* every checkpoint's entries (name, digest, size, media type, schema pin), read through
  ``get`` one by one, through ``get_many`` and through the ``entries`` view, are identical
  to what was committed (read before the demotion);
* a second ``migrate up`` (a subprocess again, unkilled) exits 0 having moved exactly the
  rows left, ``migration_status()`` then says nothing is left to move, ``entry`` is empty,
  and verify and the entries check pass again.

The demoted file itself must pass the same checks before the first kill.

Exit status 1 on any violation.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import apsw

import ckptdb
from ckptdb.ops.migrate import MOVE_BATCH

CHUNK = 64 * 1024
FULL_CHECKPOINTS = 20_000
QUICK_CHECKPOINTS = 5_000
NAMESPACES = 40
#: Checkpoint ids read per get_many call when fingerprinting.
READ_BATCH = 500

DEMOTE = (
    "INSERT INTO entry (checkpoint_seq, name, blob_id, media_type, schema_pin)"
    " SELECT c.seq, json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'),"
    " json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]')"
    " FROM checkpoint c, json_each(c.entries) j",
    "DELETE FROM blob_ref",
    "UPDATE checkpoint SET entries = NULL",
    "UPDATE seq_high_water SET seq = (SELECT coalesce(max(seq), 0) FROM checkpoint)",
)


def _entries_for(i: int) -> dict[str, Any]:
    """Commit ``i``'s content: a small unique state, a blob shared by 100 consecutive
    commits (and so across namespaces), every 10th a typed entry, every 250th a chunked
    one."""
    rng = random.Random(i)
    out: dict[str, Any] = {
        "state.json": json.dumps({"i": i, "pad": "x" * rng.randrange(40)}).encode(),
        "shared.bin": random.Random(i // 100).randbytes(300),
    }
    if i % 10 == 0:
        out["typed.txt"] = ckptdb.Entry(
            f"typed {i}\n", media_type="text/plain", schema_pin=f"typed/v{i % 3}"
        )
    if i % 250 == 0:
        out["model.bin"] = random.Random(i // 500).randbytes(2 * CHUNK + 17)
    return out


def build(path: Path, checkpoints: int) -> dict[str, str]:
    """Build the demoted file (see the module docstring); returns the fingerprint of its
    entries as committed (before the demotion)."""
    with ckptdb.open(path, chunk_size=CHUNK) as db:
        for i in range(checkpoints):
            db.commit(f"ns-{i % NAMESPACES:02d}", _entries_for(i), metadata={"i": i})
        committed = _fingerprints(db)
    conn = apsw.Connection(str(path))
    try:
        with conn:
            for statement in DEMOTE:
                conn.execute(statement)
        conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
    finally:
        conn.close()
    return committed


def _fingerprints(db: ckptdb.Database) -> dict[str, str]:
    """Digests of every checkpoint's entries (name, digest, size, media type, schema pin),
    read three ways: ``get`` one by one, ``get_many`` (a read error there is recorded as
    its fingerprint, so it differs), and the ``entries`` view."""
    ids = [str(r[0]) for r in db.query("SELECT id FROM checkpoint ORDER BY id", timeout=None).rows]

    def entries(h: Any, cp: ckptdb.Checkpoint) -> None:
        for e in cp.entries.values():
            h.update(repr((cp.id, e.name, e.digest, e.size, e.media_type, e.schema_pin)).encode())

    one = hashlib.sha256()
    for cid in ids:
        entries(one, db.get(cid))
    many = hashlib.sha256()
    try:
        for start in range(0, len(ids), READ_BATCH):
            part = ids[start : start + READ_BATCH]
            found = db.get_many(part)
            for cid in part:
                if cid not in found:
                    raise KeyError(f"get_many left out {cid[:12]}")
                entries(many, found[cid])
        many_digest = many.hexdigest()
    except (ckptdb.CkptdbError, KeyError) as exc:
        many_digest = f"get_many failed: {type(exc).__name__}: {str(exc)[:200]}"
    view = hashlib.sha256()
    rows = db.query(
        "SELECT checkpoint_id, name, digest, size, media_type, schema_pin FROM entries"
        " ORDER BY checkpoint_id, name",
        timeout=None,
    ).rows
    for row in rows:
        view.update(repr(tuple(row)).encode())
    return {
        "checkpoints": str(len(ids)),
        "get": one.hexdigest(),
        "get_many": many_digest,
        "view": view.hexdigest(),
    }


def _differences(got: dict[str, str], want: dict[str, str]) -> list[str]:
    """What differs between two fingerprints (``get_many``: the reference is ``get``'s)."""
    out = [k for k in ("checkpoints", "get", "view") if got[k] != want[k]]
    if got["get_many"] != want["get"]:
        failed = got["get_many"].startswith("get_many failed")
        out.append(f"get_many ({got['get_many']})" if failed else "get_many")
    return out


def _layout(db: ckptdb.Database) -> dict[str, int]:
    """Where the move stands: rows left, moved rows above an unmoved one (0 if the move went
    in seq order), moved rows that still have entry rows."""

    def one(sql: str) -> int:
        return int(db.query(sql, timeout=None).rows[0][0])

    return {
        "left": one("SELECT count(*) FROM checkpoint WHERE entries IS NULL"),
        "out_of_order": one(
            "SELECT count(*) FROM checkpoint WHERE entries IS NOT NULL AND seq >"
            " (SELECT coalesce(min(seq), 1 << 62) FROM checkpoint WHERE entries IS NULL)"
        ),
        "entry_rows_of_moved": one(
            "SELECT count(*) FROM entry e JOIN checkpoint c ON c.seq = e.checkpoint_seq"
            " WHERE c.entries IS NOT NULL"
        ),
        "entry_rows": one("SELECT count(*) FROM entry"),
    }


def _cli(path: Path, command: str, *options: str) -> subprocess.Popen[str]:
    """``ckptdb migrate COMMAND PATH OPTIONS`` as a subprocess."""
    return subprocess.Popen(
        [sys.executable, "-m", "ckptdb.cli", "migrate", command, str(path), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class _WalWatch:
    """Bytes a process wrote to a WAL file, from its size polled now and then (the sum of
    its growth: SQLite restarts the WAL after a checkpoint, and may truncate it then)."""

    def __init__(self, path: Path) -> None:
        self.wal = Path(f"{path}-wal")
        self.size = 0
        self.written = 0

    def poll(self) -> int:
        """Bytes written so far."""
        try:
            size = self.wal.stat().st_size
        except FileNotFoundError:  # the process closed the file and SQLite removed its WAL
            size = 0
        self.written += max(0, size - self.size)
        self.size = size
        return self.written


def _timed_run(path: Path) -> tuple[float, float, int, dict[str, Any]]:
    """An unkilled ``migrate up``: seconds to its first WAL write and to its exit, the bytes
    it wrote to the WAL, and its JSON result."""
    watch = _WalWatch(path)
    started = time.monotonic()
    proc = _cli(path, "up", "--no-backup", "--json")
    first_write = None
    while proc.poll() is None:
        if watch.poll() and first_write is None:
            first_write = time.monotonic() - started
        time.sleep(0.0002)
    ended = time.monotonic() - started
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"migrate up failed unkilled: {err[-2000:]}")
    return (first_write or 0.0), ended, watch.written, json.loads(out)


def check(path: Path, before: dict[str, str], total: int) -> tuple[list[str], int]:
    """The checks after a kill (see the module docstring): problems, and rows left."""
    problems: list[str] = []
    with ckptdb.open(path, migrate="check") as db:
        status = db.migration_status()
        if status.file_version != 7 or status.pending:
            problems.append(f"schema version {status.file_version}, pending {status.pending}")
        layout = _layout(db)
        left = layout["left"]
        if left != status.checkpoints_to_move:
            problems.append(f"status says {status.checkpoints_to_move} to move, {left} are")
        if left and (total - left) % MOVE_BATCH:
            problems.append(f"{total - left} moved: not a whole number of batches")
        if layout["out_of_order"] or layout["entry_rows_of_moved"]:
            problems.append(f"the move is not a clean prefix: {layout}")
        report = db.verify()
        if not report.ok:
            problems.append(f"verify: {[(p.code, p.detail) for p in report.problems[:3]]}")
        try:
            differ = _differences(_fingerprints(db), before)
        except ckptdb.CkptdbError as exc:
            differ = [f"{exc.code}: {exc}"]
        problems += [f"entries read through {d} differ from before the move" for d in differ]
    return problems, left


def finish(path: Path, before: dict[str, str], left: int) -> list[str]:
    """A second ``migrate up`` finishes the move (see the module docstring)."""
    problems: list[str] = []
    proc = _cli(path, "up", "--no-backup", "--json")
    out, err = proc.communicate()
    if proc.returncode != 0:
        return [f"migrate up again exited {proc.returncode}: {err[-500:]}"]
    moved = json.loads(out).get("checkpoints_moved")
    if moved != left:
        problems.append(f"migrate up again moved {moved}, {left} were left")
    with ckptdb.open(path, migrate="check") as db:
        status = db.migration_status()
        if status.checkpoints_to_move or not status.up_to_date:
            problems.append(f"after migrate up again: {status}")
        if _layout(db)["entry_rows"]:
            problems.append("entry still holds rows after the move finished")
        report = db.verify()
        if not report.ok:
            problems.append(f"verify after finishing: {[p.code for p in report.problems[:3]]}")
        differ = _differences(_fingerprints(db), before)
        problems += [f"entries read through {d} differ after finishing" for d in differ]
    return problems


def _kill_at_random(
    path: Path, rng: random.Random, first_write: float, span: float, wal_bytes: int
) -> tuple[str, float, float | None]:
    """Run ``migrate up`` on ``path`` and SIGKILL it at a random moment, one of three ways:
    one time in ten at a uniform moment before the move (while it starts and opens the
    file); else, half the time, at a uniform moment of the ``span`` seconds the move takes,
    timed from this run's own first WAL write (the start-up time varies more than the move
    takes), and half the time once it has written a uniform fraction of the ``wal_bytes``
    an unkilled run writes to the WAL (a kill while a batch's frames are being written, or
    right after). Returns how, when (seconds after the start) and, for a timed kill, how
    long after the first WAL write."""
    watch = _WalWatch(path)
    started = time.monotonic()
    proc = _cli(path, "up", "--no-backup", "--json")
    offset = None
    roll = rng.random()
    if roll < 0.1:
        how = "while starting"
        time.sleep(rng.uniform(0.0, first_write))
    elif roll < 0.55:
        how = "timed"
        while proc.poll() is None and not watch.poll():
            time.sleep(0.0002)
        offset = rng.uniform(0.0, 1.05 * span)
        time.sleep(offset)
    else:
        how = "by WAL bytes"
        target = rng.uniform(1, wal_bytes)
        while proc.poll() is None and watch.poll() < target:
            time.sleep(0.0002)
    at = time.monotonic() - started
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return how, at, offset


def run(kills: int, seed: int, checkpoints: int, workdir: Path) -> dict[str, Any]:
    """Build, calibrate, kill ``kills`` times; returns the figures and violations."""
    rng = random.Random(seed)
    started = time.monotonic()
    pristine = workdir / "demoted.ckpt"
    before = build(pristine, checkpoints)
    built = time.monotonic() - started
    violations: list[str] = []
    with ckptdb.open(pristine, migrate="check") as db:
        layout = _layout(db)
        if layout["left"] != checkpoints or layout["entry_rows"] < 2 * checkpoints:
            violations.append(f"the demoted file is not the state 0007 leaves: {layout}")
        report = db.verify()
        if not report.ok:
            violations.append(f"the demoted file: verify: {[p.code for p in report.problems]}")
        differ = _differences(_fingerprints(db), before)
        violations += [f"the demoted file: entries read through {d} differ" for d in differ]
    work = workdir / "work.ckpt"

    def fresh() -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{work}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(pristine, work)

    # Calibration: an unkilled run moves everything and the checks pass.
    fresh()
    first_write, ended, wal_bytes, result = _timed_run(work)
    if result.get("checkpoints_moved") != checkpoints:
        violations.append(f"an unkilled run moved {result.get('checkpoints_moved')}")
    violations += [f"unkilled: {p}" for p in check(work, before, checkpoints)[0]]
    span = max(ended - first_write, 0.05)
    landed = {"before_the_move": 0, "mid_move": 0, "after_the_move": 0}
    ways: Counter[str] = Counter()
    looping = time.monotonic()
    batches_done: list[int] = []
    for kill in range(kills):
        fresh()
        how, delay, offset = _kill_at_random(work, rng, first_write, span, wal_bytes)
        problems, left = check(work, before, checkpoints)
        if not left and offset is not None:
            # Came after the last batch: the move is shorter than the unkilled run's exit
            # (receipt, close) told; aim the next kills inside it.
            span = max(0.01, min(span, offset))
        if left == checkpoints:
            where = "before_the_move"
        elif left:
            where = "mid_move"
            batches_done.append((checkpoints - left) // MOVE_BATCH)
        else:
            where = "after_the_move"
        landed[where] += 1
        ways[f"{how}: {where.replace('_', ' ')}"] += 1
        problems += finish(work, before, left)
        violations += [f"kill {kill} (after {delay:.3f} s, {left} left): {p}" for p in problems]
    return {
        "kills": kills,
        "seed": seed,
        "checkpoints": checkpoints,
        "entries": layout["entry_rows"],
        "move_batch": MOVE_BATCH,
        "unkilled": {
            "first_wal_write_s": round(first_write, 3),
            "exit_s": round(ended, 3),
            "wal_bytes": wal_bytes,
        },
        "kills_landed": landed,
        "kills_by_way": dict(sorted(ways.items())),
        "batches_done_at_mid_move_kills": sorted(batches_done),
        "seconds_build": round(built, 1),
        "seconds_per_kill": round((time.monotonic() - looping) / max(kills, 1), 1),
        "seconds": round(time.monotonic() - started, 1),
        "violations": violations,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CHECKPOINTS} checkpoints")
    parser.add_argument("--checkpoints", type=int, help=f"default {FULL_CHECKPOINTS}")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    count = args.checkpoints or (QUICK_CHECKPOINTS if args.quick else FULL_CHECKPOINTS)
    with tempfile.TemporaryDirectory(prefix="ckptdb-migrate-crash-") as tmp:
        result = run(args.kills, args.seed, count, Path(tmp))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
