"""Sweep every I/O fault point of ckptdb's writing operations.

    python tools/fault_sweep.py              # every point of every operation (minutes)
    python tools/fault_sweep.py --quick      # a sample of points (CI, under a minute)
    python tools/fault_sweep.py --json out.json

For each operation (a small commit, a chunked commit, a group of commits, a commit that an
evicting quota makes room for, a GC sweep, an export, a schema migration) and each kind of
call (xWrite, xSync, xTruncate, xFileSize), error (SQLITE_IOERR, SQLITE_FULL) and mode
(once, persistent), the operation is run once to count its calls, then again with the Nth
call failing, for N = 1 .. count. At the moment of the fault the fault VFS keeps a "process
crash" image (files as the OS holds them) and a "power loss" image (each file as of its last
successful sync). Then:

* a failed operation returned no acknowledgement;
* the live handle, a reopened handle and both images pass integrity_check and ckptdb's
  verify, and show the old state or the new one, complete -- never a mix;
* every acknowledged commit is in the power-loss image (synchronous=FULL): the one acked
  before the operation, and the operation's own if it was acknowledged.

Any violation is printed and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

import ckptdb
from ckptdb import errors
from ckptdb.connection.faults import OPS, FaultPlan, FaultVFS, copy_image
from ckptdb.store.migrations import core_set

CHUNK = 64 * 1024
REPO = Path(__file__).resolve().parent.parent
V1_FIXTURE = REPO / "tests" / "fixtures" / "v1.ckpt"


@dataclass
class Outcome:
    """What one faulted run showed."""

    acked: bool
    error: str | None
    states: dict[str, str]  # observer -> "old" | "new" | "mixed:..." | "broken:..."


@dataclass
class Operation:
    """A writing operation under test."""

    name: str
    setup: Callable[[Path, str], dict[str, Any]]
    run: Callable[[Path, str, dict[str, Any]], bool]  # returns True when acknowledged
    state: Callable[[Path, dict[str, Any]], str]  # "old" / "new" / "mixed..."


def _open(path: Path, vfs: str | None = None, **kw: Any) -> ckptdb.Database:
    # Fixed 64 KiB chunks, so a small entry already has several (cheap fault points).
    return ckptdb.open(path, chunk_size=CHUNK, vfs=vfs, **kw)


def _open_cdc(path: Path, vfs: str | None = None, **kw: Any) -> ckptdb.Database:
    # A file as created by default: content-defined chunks and zstd (storage format 2).
    return ckptdb.open(path, vfs=vfs, **kw)


# -- commit ---------------------------------------------------------------------------------


def _commit_op(
    name: str, entries: dict[str, bytes], opener: Callable[..., ckptdb.Database] = _open
) -> Operation:
    def setup(path: Path, vfs: str) -> dict[str, Any]:
        with opener(path, vfs) as db:
            base = db.commit("ns", {"state": b"base", "w": b"x" * 3000})
        return {"base": base.checkpoint_id, "new": None}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with opener(path, vfs) as db:
            ack = db.commit("ns", entries)
            ctx["new"] = ack.checkpoint_id
            return True

    def state(path: Path, ctx: dict[str, Any]) -> str:
        with opener(path) as db:
            if not db.verify().ok:
                return "broken:verify"
            cp = db.current("ns")
            assert cp is not None
            cp.verify()
            if cp.id == ctx["base"]:
                return "old"
            if cp.parent_id == ctx["base"] and {n: cp.read(n) for n in cp.entries} == entries:
                ctx.setdefault("new", cp.id)
                return "new"
            return f"mixed:{cp.id[:12]}"

    return Operation(name, setup, run, state)


def _evict_op() -> Operation:
    """A commit an evicting quota makes room for: in the commit's own transaction the oldest
    checkpoint, its blobs and its chunks go, and a quota_evict receipt is written. Old: the
    three checkpoints and CURRENT as before; new: the commit, the two newer ones, and the
    receipt naming the evicted one -- never a commit without its eviction or the reverse."""
    entries = {"m": os.urandom(2 * CHUNK + 5), "state": b"new"}

    def setup(path: Path, vfs: str) -> dict[str, Any]:
        with _open(path, vfs) as db:
            db.set_quota("ns", max_checkpoints=3, on_exceed="evict")
            ids = [
                db.commit(
                    "ns", {"m": os.urandom(2 * CHUNK + i), "state": str(i).encode()}
                ).checkpoint_id
                for i in range(3)
            ]
        # Chunks touched more than the grace period ago: the eviction deletes them too
        # (younger ones it leaves to the next GC).
        raw = apsw.Connection(str(path))
        try:
            raw.execute("UPDATE chunk SET last_touched_ms = 0")
        finally:
            raw.close()
        return {"ids": ids}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with _open(path, vfs) as db:
            ack = db.commit("ns", entries)
        if ack.evicted_ids != ctx["ids"][:1]:
            raise AssertionError(f"evicted {ack.evicted_ids}, not the oldest checkpoint")
        return True

    def state(path: Path, ctx: dict[str, Any]) -> str:
        ids = ctx["ids"]
        with _open(path) as db:
            if not db.verify().ok:
                return "broken:verify"
            cp = db.current("ns")
            assert cp is not None
            cp.verify()
            present = {str(r[0]) for r in db.query("SELECT id FROM checkpoint").rows}
            receipts = db.receipts(kind="quota_evict")
            if cp.id == ids[-1] and present == set(ids) and not receipts:
                return "old"
            if (
                cp.parent_id == ids[-1]
                and {n: cp.read(n) for n in cp.entries} == entries
                and present == {*ids[1:], cp.id}
                and [r.body["deleted_ids"] for r in receipts] == [ids[:1]]
            ):
                return "new"
            return f"mixed:{cp.id[:12]}:{len(present)}:{len(receipts)}"

    return Operation("commit-evict", setup, run, state)


# -- gc -------------------------------------------------------------------------------------


def _gc_op() -> Operation:
    def setup(path: Path, vfs: str) -> dict[str, Any]:
        with _open(path, vfs) as db:
            ids = [
                db.commit("ns", {"w": bytes([i]) * (2 * CHUNK + i), "s": str(i)}).checkpoint_id
                for i in range(6)
            ]
            db.pin(ids[1], "keep")
        return {"all": set(ids), "kept": {ids[-1], ids[-2], ids[1]}}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with _open(path, vfs) as db:
            db.gc(ckptdb.RetentionPolicy(keep_last=2), grace=0)
        return True

    def state(path: Path, ctx: dict[str, Any]) -> str:
        with _open(path) as db:
            if not db.verify().ok:
                return "broken:verify"
            for cid in ctx["kept"]:
                db.get(cid).verify()
            present = {str(r[0]) for r in db.query("SELECT id FROM checkpoint").rows}
        if present == ctx["all"]:
            return "old"
        if present == ctx["kept"]:
            return "new"
        # A sweep commits in batches: a prefix of the plan done is a complete state too.
        if ctx["kept"] <= present <= ctx["all"]:
            return "new"
        return "mixed"

    return Operation("gc", setup, run, state)


# -- export ---------------------------------------------------------------------------------


def _export_op() -> Operation:
    def setup(path: Path, vfs: str) -> dict[str, Any]:
        with _open(path, vfs) as db:
            for i in range(3):
                db.commit("ns", {"w": bytes([i]) * (CHUNK + 5), "s": str(i)})
            ids = [c.id for c in db.lineage("ns")]
        return {"ids": ids, "dest": path.parent / "exported.ckpt"}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with _open(path, vfs) as db:
            db.export(ctx["dest"])
        return True

    def state(path: Path, ctx: dict[str, Any]) -> str:
        with _open(path) as db:
            if not db.verify().ok or [c.id for c in db.lineage("ns")] != ctx["ids"]:
                return "broken:source"
        dest = ctx["dest"]
        if not dest.exists():
            return "old"
        with _open(dest) as out:
            ok = out.verify().ok and [c.id for c in out.lineage("ns")] == ctx["ids"]
        return "new" if ok else "mixed:partial-export"

    return Operation("export", setup, run, state)


# -- migration -----------------------------------------------------------------------------


def _migrate_op() -> Operation:
    expected = json.loads(V1_FIXTURE.with_suffix(".json").read_text())

    def setup(path: Path, vfs: str) -> dict[str, Any]:
        shutil.copyfile(V1_FIXTURE, path)
        return {}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with ckptdb.open(path, migrate="check", vfs=vfs) as db:
            db.migrate(backup=False)
        return True

    def state(path: Path, ctx: dict[str, Any]) -> str:
        with ckptdb.open(path, migrate="check") as db:
            version = db.migration_status().file_version
        latest = core_set().latest
        if version == 1:
            return "old"
        if not 1 < version <= latest:
            return f"mixed:version-{version}"
        # Each migration is its own transaction, so a fault may leave the file at any
        # version in between: that counts as "old" (not migrated yet) only if it is whole --
        # the remaining migrations apply on the next open (of a copy: the file under test
        # stays as the fault left it) and the data verifies.
        with tempfile.TemporaryDirectory() as scratch:
            copied = copy_image(path.parent, path.name, Path(scratch))
            assert copied is not None
            with ckptdb.open(copied, migrate="auto") as db:
                if not db.verify().ok:
                    return "broken:verify"
                for ns, want in expected["namespaces"].items():
                    if db.pointer(ns).current_id != want["current"]:  # type: ignore[union-attr]
                        return "mixed:pointer"
        return "new" if version == latest else "old"

    return Operation("migrate", setup, run, state)


GROUP = 3  # members of the concurrent batch


def _group_op() -> Operation:
    """GROUP threads committing through one handle at once, published as one batch (group
    commit): the namespaces must all show the old state or all the new one."""
    names = [f"ns{i}" for i in range(GROUP)]
    entries = [{"state": f"new{i}".encode(), "g": bytes([i]) * 3000} for i in range(GROUP)]

    def setup(path: Path, vfs: str) -> dict[str, Any]:
        with _open(path, vfs) as db:
            base = {ns: db.commit(ns, {"state": b"base"}).checkpoint_id for ns in names}
        return {"base": base}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with _open(path, vfs) as db:
            group = db._group  # how the sweep knows every member has queued
            assert group is not None
            results: list[Any] = [None] * GROUP

            def member(i: int) -> None:
                try:
                    results[i] = db.commit(names[i], entries[i])
                except errors.CkptdbError as exc:
                    results[i] = exc

            threads = [threading.Thread(target=member, args=(i,)) for i in range(GROUP)]
            # Holding the lead makes every member queue; the end of the hold releases
            # them as one batch.
            with group.held():
                for i, thread in enumerate(threads):
                    thread.start()
                    while group.queued < i + 1:
                        time.sleep(0.001)
            for thread in threads:
                thread.join()
        failures = [r for r in results if isinstance(r, errors.CkptdbError)]
        if failures:
            raise failures[0]
        return True

    def state(path: Path, ctx: dict[str, Any]) -> str:
        with _open(path) as db:
            if not db.verify().ok:
                return "broken:verify"
            seen = []
            for i, ns in enumerate(names):
                cp = db.current(ns)
                assert cp is not None
                cp.verify()
                if cp.id == ctx["base"][ns]:
                    seen.append("old")
                elif cp.parent_id == ctx["base"][ns] and cp.read("state") == entries[i]["state"]:
                    seen.append("new")
                else:
                    seen.append(f"other:{cp.id[:12]}")
            return seen[0] if len(set(seen)) == 1 else f"mixed:{','.join(seen)}"

    return Operation("commit-group", setup, run, state)


def operations() -> list[Operation]:
    """Every operation the sweep covers."""
    return [
        _commit_op("commit-small", {"state": b'{"turn": 2}', "g": os.urandom(3000)}),
        _commit_op("commit-chunked", {"m": os.urandom(3 * CHUNK + 11), "state": b"{}"}),
        _commit_op(
            "commit-cdc",
            {
                # compressible, cut in memory and written inside the commit transaction
                "messages.json": json.dumps(
                    [{"n": i, "text": "word " * 60} for i in range(300)]
                ).encode(),
                # incompressible and over 4 MiB: staged in the large tier before the commit
                "weights.bin": os.urandom(5 * 1024 * 1024 + 3),
            },
            _open_cdc,
        ),
        _group_op(),
        _evict_op(),
        _gc_op(),
        _export_op(),
        _migrate_op(),
    ]


@dataclass
class Totals:
    """Figures of a sweep."""

    points: int = 0
    acked: int = 0
    failed: int = 0
    old: int = 0
    new: int = 0
    images_checked: int = 0
    violations: list[str] = field(default_factory=list)


def _observe(op: Operation, path: Path, ctx: dict[str, Any]) -> str:
    try:
        return op.state(path, ctx)
    except errors.CkptdbError as exc:
        return f"broken:{exc.code}:{exc}"


def sweep_point(
    vfs: FaultVFS,
    op: Operation,
    kind: str,
    error: str,
    persistent: bool,
    nth: int,
    workdir: Path,
    totals: Totals,
) -> None:
    """Run one faulted operation and check every observer."""
    case = workdir / f"{op.name}-{kind}-{error}-{int(persistent)}-{nth}"
    case.mkdir(parents=True)
    path = case / "db.ckpt"
    ctx = op.setup(path, vfs.name)
    plan = FaultPlan(op=kind, nth=nth, error=error, persistent=persistent)  # type: ignore[arg-type]
    acked = False
    failure: str | None = None
    with vfs.armed(plan, watch=[path], images_dir=case / "images"):
        try:
            acked = op.run(path, vfs.name, ctx)
        except errors.CkptdbError as exc:
            failure = exc.code
    label = f"{op.name} {kind}#{nth} {error}{' persistent' if persistent else ''}"
    totals.points += 1
    if not plan.fired:
        return
    totals.acked += int(acked)
    totals.failed += int(not acked)
    states = {"reopened": _observe(op, path, ctx)}
    vfs.power_image(path, case / "final-power")
    for image in ("crash", "power"):
        copied = copy_image(case / "images" / image, path.name, case / f"check-{image}")
        if copied is not None:
            states[image] = _observe(op, copied, ctx)
            totals.images_checked += 1
    final = copy_image(case / "final-power", path.name, case / "check-final-power")
    if final is not None:
        states["final-power"] = _observe(op, final, ctx)
        totals.images_checked += 1
    for observer, observed in states.items():
        if observed not in ("old", "new"):
            totals.violations.append(f"{label}: {observer} is {observed}")
    if acked:
        for observer in ("reopened", "final-power"):
            if states.get(observer, "new") != "new":
                totals.violations.append(f"{label}: acknowledged but {observer} shows old")
    if failure is not None and failure not in (
        "io_error",
        "disk_full",
        "commit_outcome_unknown",
        "migration_failed",
        "chunk_missing",
    ):
        totals.violations.append(f"{label}: unexpected error code {failure}")
    totals.old += sum(1 for s in states.values() if s == "old")
    totals.new += sum(1 for s in states.values() if s == "new")
    shutil.rmtree(case, ignore_errors=True)


def run_sweep(quick: bool, only: str | None = None) -> dict[str, Any]:
    """Run the sweep; returns the figures (and violations)."""
    vfs = FaultVFS(f"fault-sweep-{os.getpid()}")
    workdir = Path(tempfile.mkdtemp(prefix="ckptdb-fault-sweep-"))
    per_op: dict[str, dict[str, Any]] = {}
    totals = Totals()
    started = time.monotonic()
    try:
        for op in operations():
            if only and op.name != only:
                continue
            before = Totals(**{k: getattr(totals, k) for k in ("points", "acked", "failed")})
            counts_dir = workdir / f"count-{op.name}"
            counts_dir.mkdir()
            ctx = op.setup(counts_dir / "db.ckpt", vfs.name)
            with vfs.armed(vfs.count_calls()) as counter:
                op.run(counts_dir / "db.ckpt", vfs.name, ctx)
            counts = dict(counter.counts)
            combos = [
                (k, e, p)
                for k in OPS
                for e, p in (("ioerr", False), ("full", False), ("ioerr", True))
            ]
            for kind, error, persistent in combos:
                total = counts[kind]
                if not total:
                    continue
                points = range(1, total + 1)
                if quick:
                    step = max(1, total // 6)
                    points = range(1, total + 1, step)
                for nth in points:
                    sweep_point(vfs, op, kind, error, persistent, nth, workdir, totals)
            per_op[op.name] = {
                "calls": counts,
                "points": totals.points - before.points,
                "failed": totals.failed - before.failed,
                "acked": totals.acked - before.acked,
            }
    finally:
        vfs.unregister()
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "mode": "quick" if quick else "full",
        "seconds": round(time.monotonic() - started, 1),
        "fault_points": totals.points,
        "operations_failed_without_ack": totals.failed,
        "operations_acked_after_recovery": totals.acked,
        "observations_old": totals.old,
        "observations_new": totals.new,
        "images_checked": totals.images_checked,
        "violations": totals.violations,
        "per_operation": per_op,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only",
        help="one operation (commit-small, commit-chunked, commit-cdc, commit-group,"
        " commit-evict, gc, export, migrate)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run_sweep(args.quick, args.only)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
