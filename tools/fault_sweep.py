"""Sweep every I/O fault point of ckptdb's writing operations.

    python tools/fault_sweep.py              # every point of every operation (hours: CDC)
    python tools/fault_sweep.py --quick      # a sample of points (CI)
    python tools/fault_sweep.py --only rotate-key,shred-key --json out.json

For each operation (creating a file; a small, a chunked and a CDC commit, a group commit,
a commit that an evicting quota makes room for, a fork by copy_checkpoints, a GC sweep, an
export, a schema migration from v1, and one from v6 whose data step -- storage format 3
moving each checkpoint's entries into its row -- runs two checkpoints per transaction so
that every batch boundary is a fault point; in an encrypted key scope a small and a CDC
commit, rotate_key, and shred_key of a scope with namespaces and of one without) and each
kind of call (xWrite, xSync, xTruncate, xFileSize), error (SQLITE_IOERR, SQLITE_FULL) and
mode (once, persistent), the operation is run once to count its calls, then again with the
Nth call failing, for N = 1 .. count. At the moment of the fault the fault VFS keeps a
"process crash" image (files as the OS holds them) and a "power loss" image (each file as
of its last successful sync). Then:

* a failed operation returned no acknowledgement;
* the live handle, a reopened handle and both images pass integrity_check and ckptdb's
  verify, and show the old state or the new one, complete -- never a mix;
* every acknowledged commit is in the power-loss image (synchronous=FULL): the one acked
  before the operation, and the operation's own if it was acknowledged; the unfaulted run
  and the power-loss image taken right after it show the new state.

The key-scope operations add (see each one's docstring): images are opened with the key;
no image's raw bytes (file and WAL, read before anything opens it) ever hold a sealed
value's plaintext marker or its plain sha256; after rotate_key exactly one of the old and
the new key opens the scope (the new one once acknowledged); after shred_key the scope is
intact or shredded, the other scopes intact, shred_key again completes it, and a completed
shred leaves neither the wrapped key nor sampled sealed bytes in the file or the WAL.

``migrate-v6`` counts a file at schema 6, or at 7 with part of its entries moved, as the
old state if it is whole (see its docstring): ``migrate up`` again on a copy finishes it.

Any violation is printed and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

import ckptdb
from ckptdb import errors
from ckptdb.connection.faults import OPS, FaultPlan, FaultVFS, copy_image
from ckptdb.ops import migrate as migrate_op
from ckptdb.store.migrations import core_set

CHUNK = 64 * 1024
REPO = Path(__file__).resolve().parent.parent
V1_FIXTURE = REPO / "tests" / "fixtures" / "v1.ckpt"
V6_FIXTURE = REPO / "tests" / "fixtures" / "v6.ckpt"
#: Checkpoints per transaction of schema 7's data step in the ``migrate-v6`` operation (the
#: library moves 2000): small, so every batch boundary of the move is a fault point.
SWEEP_MOVE_BATCH = 2


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
    #: Checks of an image's raw bytes (file + WAL), run before anything opens it (opening
    #: may checkpoint the WAL away): ``raw_check(path, ctx, acked)`` returns problems.
    raw_check: Callable[[Path, dict[str, Any], bool], list[str]] | None = None
    #: Run once before the sweep of the operation: proves its checks can fail.
    selftest: Callable[[], None] | None = None
    #: What the operation's observers saw, by kind, for the report (e.g. how far a
    #: migration had got in the images it found whole).
    seen: Counter[str] = field(default_factory=Counter)


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


# -- copy_checkpoints -------------------------------------------------------------------------


def _copy_op() -> Operation:
    """A fork: a lineage copied by reference into a namespace that already has a CURRENT
    (one transaction: every copy, its entries and one pointer move). "new" = every copy
    there with its source's bytes and CURRENT on the copy of the newest; "old" = none."""

    def setup(path: Path, vfs: str) -> dict[str, Any]:
        with _open(path, vfs) as db:
            ids = [
                db.commit(
                    "src", {"w": bytes([i]) * (2 * CHUNK + i), "s": str(i)}, metadata={"i": i}
                ).checkpoint_id
                for i in range(40)
            ]
            base = db.commit("dst", {"own": b"mine"}).checkpoint_id
            contents = {cid: {n: db.get(cid).read(n) for n in ("w", "s")} for cid in ids}
        return {"ids": ids, "base": base, "contents": contents}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with _open(path, vfs) as db:
            report = db.copy_checkpoints(ctx["ids"], "dst", metadata={"fork": True})
        if report.created != len(ctx["ids"]):
            raise AssertionError(f"copied {report.created} of {len(ctx['ids'])}")
        return True

    def state(path: Path, ctx: dict[str, Any]) -> str:
        with _open(path) as db:
            if not db.verify().ok:
                return "broken:verify"
            cp = db.current("dst")
            assert cp is not None
            stored = db.query(
                "SELECT count(*) FROM checkpoint WHERE namespace_id ="
                " (SELECT namespace_id FROM namespace WHERE name = 'dst')"
            ).rows[0][0]
            if cp.id == ctx["base"] and stored == 1:
                return "old"
            lineage = db.lineage("dst")
            if stored == 1 + len(ctx["ids"]) and len(lineage) == len(ctx["ids"]):
                sources = list(reversed(ctx["ids"]))
                for info, source in zip(lineage, sources, strict=True):
                    got = db.get(info.id)
                    if {n: got.read(n) for n in got.entries} != ctx["contents"][source]:
                        return f"mixed:bytes:{info.id[:12]}"
                    if not info.metadata.get("fork"):
                        return f"mixed:metadata:{info.id[:12]}"
                return "new"
            return f"mixed:{cp.id[:12]}:{stored}"

    return Operation("copy-checkpoints", setup, run, state)


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


# -- drop a namespace: a small deletion, one transaction ------------------------------------


def _drop_op() -> Operation:
    """drop_namespace of a namespace small enough for one transaction (checkpoints,
    pointer, pin, the blobs and chunks only it used, and the receipt commit together),
    beside a namespace that shares one of its chunked blobs."""

    def setup(path: Path, vfs: str) -> dict[str, Any]:
        shared = bytes(range(256)) * (2 * CHUNK // 256 + 1)
        with _open(path, vfs) as db:
            keep = db.commit("keep", {"shared": shared, "own": b"kept"}).checkpoint_id
            gone = [
                db.commit(
                    "gone", {"shared": shared, "w": bytes([i]) * (2 * CHUNK + i), "s": str(i)}
                ).checkpoint_id
                for i in range(4)
            ]
            db.pin(gone[1], "old-one")
        return {"keep": keep, "gone": set(gone), "shared": shared}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with _open(path, vfs) as db:
            report = db.drop_namespace("gone", force=True)
        if report.checkpoints_deleted != len(ctx["gone"]):
            raise AssertionError(f"dropped {report.checkpoints_deleted} of {len(ctx['gone'])}")
        return True

    def state(path: Path, ctx: dict[str, Any]) -> str:
        with _open(path) as db:
            if not db.verify().ok:
                return "broken:verify"
            if db.get(ctx["keep"]).read("shared") != ctx["shared"]:
                return "broken:shared"
            present = {str(r[0]) for r in db.query("SELECT id FROM checkpoint").rows}
            names = {n.name for n in db.namespaces()}
            pins = {p.name for p in db.pins()}
        if present == {ctx["keep"], *ctx["gone"]} and "gone" in names and pins == {"old-one"}:
            return "old"
        if present == {ctx["keep"]} and names == {"keep"} and not pins:
            return "new"
        return f"mixed:{len(present)}:{sorted(names)}:{sorted(pins)}"

    return Operation("drop-namespace", setup, run, state)


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


# -- creating a file -------------------------------------------------------------------------


def _create_op() -> Operation:
    """Creating a new file: every migration and the layout settings in one transaction, so
    a fault leaves the file empty (the next open creates it) or whole, never tables
    without their settings."""

    def setup(path: Path, vfs: str) -> dict[str, Any]:
        return {}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        _open(path, vfs).close()
        return True

    def state(path: Path, ctx: dict[str, Any]) -> str:
        if not path.exists() or path.stat().st_size == 0:
            return "old"
        with ckptdb.open(path, migrate="check") as db:
            version = db.migration_status().file_version
            if version == 0:
                return "old"
            if version != core_set().latest:
                return f"mixed:version-{version}"
            if db.chunk_size != CHUNK:
                return f"mixed:chunk_size-{db.chunk_size}"
            if not db.verify().ok or db.namespaces():
                return "broken:verify"
        return "new"

    return Operation("create", setup, run, state)


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
        return "new" if version == latest and not _to_move(path) else "old"

    return Operation("migrate", setup, run, state)


def _to_move(path: Path, keys: dict[str, bytes] | None = None) -> int:
    """Checkpoints whose entries schema 7's data step has still to move."""
    with ckptdb.open(path, migrate="check", keys=keys) as db:
        return db.migration_status().checkpoints_to_move


def _fixture_problem(db: ckptdb.Database, expected: dict[str, Any]) -> str | None:
    """What differs from a fixture's record (None: nothing): every recorded checkpoint with
    its generation, metadata and entries (digest, size), every entry read back (a verified
    read; plaintext ones also against their sha256), every pointer as recorded."""
    sealed = tuple(s.prefix for s in db.key_scopes())
    for ns, want in expected["namespaces"].items():
        pointer = db.pointer(ns)
        if pointer is None or (
            pointer.current_id,
            pointer.fallback_id,
            pointer.revision,
            pointer.digest,
        ) != (want["current"], want["fallback"], want["revision"], want["pointer_digest"]):
            return f"pointer of {ns}"
        for recorded in want["lineage"]:
            cp = db.get(recorded["id"])
            if (cp.generation, cp.metadata) != (recorded["generation"], recorded["metadata"]):
                return f"manifest of {cp.id[:12]}"
            listed = {e.name: {"digest": e.digest, "size": e.size} for e in cp.entries.values()}
            if listed != recorded["entries"]:
                return f"entries of {cp.id[:12]}"
            for name, info in recorded["entries"].items():
                data = cp.read(name)
                if len(data) != info["size"] or (
                    not ns.startswith(sealed) and hashlib.sha256(data).hexdigest() != info["digest"]
                ):
                    return f"bytes of {cp.id[:12]}/{name}"
    return None


def _migrate_v6_op() -> Operation:
    """Schema 6 -> 7 on the v6 fixture (a key scope among its namespaces): 0007's DDL in one
    transaction, then the data step moving :data:`SWEEP_MOVE_BATCH` checkpoints per
    transaction. The file must be whole at every point: at schema 6, or at 7 with any
    number of batches moved (that is "old": whole, not finished), verify passing on a copy
    as it is (schema 7: reads take both layouts) and every recorded checkpoint reading back
    with its recorded digests and pointers; and ``migrate up`` run again on a copy finishes
    it (nothing left to move, the ``entry`` table empty, the same checks pass)."""
    expected = json.loads(V6_FIXTURE.with_suffix(".json").read_text())
    keys = {k: bytes.fromhex(v) for k, v in expected["keys"].items()}

    def setup(path: Path, vfs: str) -> dict[str, Any]:
        shutil.copyfile(V6_FIXTURE, path)
        return {}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        default = migrate_op.MOVE_BATCH
        migrate_op.MOVE_BATCH = SWEEP_MOVE_BATCH
        try:
            with ckptdb.open(path, migrate="check", vfs=vfs, keys=keys) as db:
                result = db.migrate(backup=False)
        finally:
            migrate_op.MOVE_BATCH = default
        if result.to_version != core_set().latest:
            raise AssertionError(f"migrated to {result.to_version}")
        return True

    def whole(path: Path) -> str | None:
        with ckptdb.open(path, migrate="check", keys=keys) as db:
            if not db.verify().ok:
                return "verify"
            problem = _fixture_problem(db, expected)
            return problem

    def state(path: Path, ctx: dict[str, Any]) -> str:
        with ckptdb.open(path, migrate="check", keys=keys) as db:
            status = db.migration_status()
        version, left = status.file_version, status.checkpoints_to_move
        latest = core_set().latest
        if version not in (latest - 1, latest):
            return f"mixed:version-{version}"
        op.seen[f"schema {version}, {left} checkpoints to move"] += 1
        with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
            copied = copy_image(path.parent, path.name, Path(scratch) / "as-is")
            assert copied is not None
            if version == latest:  # schema 6 is checked once migrated, below
                problem = whole(copied)
                if problem:
                    return f"broken:as left: {problem}"
            with ckptdb.open(copied, migrate="check", keys=keys) as db:
                db.migrate(backup=False)
                again = db.migration_status()
                unmoved = db.query("SELECT count(*) FROM entry").rows[0][0]
            if not again.up_to_date or again.checkpoints_to_move or unmoved:
                return f"broken:migrating again left {again.checkpoints_to_move} to move"
            problem = whole(copied)
            if problem:
                return f"broken:migrated again: {problem}"
        return "new" if version == latest and not left else "old"

    def selftest() -> None:
        """The classifier can fail: a migrated copy that lost one ``blob_ref`` row, a row
        emptied as if moved without its entries, and a schema-6 copy that lost an entry
        row are never "old" or "new"."""
        damages = [
            (True, "DELETE FROM blob_ref WHERE (blob_id, checkpoint_seq) ="
                   " (SELECT blob_id, checkpoint_seq FROM blob_ref LIMIT 1)"),
            (True, "UPDATE checkpoint SET entries = NULL WHERE seq = (SELECT max(seq) FROM"
                   " checkpoint)"),
            (False, "DELETE FROM entry WHERE (checkpoint_seq, name) ="
                    " (SELECT checkpoint_seq, name FROM entry LIMIT 1)"),
        ]  # fmt: skip
        for migrated, sql in damages:
            with tempfile.TemporaryDirectory() as scratch:
                path = Path(scratch) / "db.ckpt"
                setup(path, "")
                if migrated:
                    with ckptdb.open(path, keys=keys):
                        pass
                raw = apsw.Connection(str(path))
                try:
                    raw.execute(sql)
                finally:
                    raw.close()
                seen = _observe(op, path, {})
                assert seen not in ("old", "new"), f"{sql!r} left a state seen as {seen}"

    op = Operation("migrate-v6", setup, run, state, selftest=selftest)
    return op


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
                    # A member may fail before it queues (a fault in a read of its
                    # prepare step): it is then done, and counts as settled.
                    while group.queued + sum(not t.is_alive() for t in threads[: i + 1]) < i + 1:
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


# -- encryption at rest (key scopes) --------------------------------------------------------

KEY_A = bytes(range(32))
KEY_A_NEXT = bytes(range(64, 96))
KEY_B = bytes(range(128, 160))
SEALED_NS = "tenant-a/ns"
_FILLER = b" ".join(f"filler word {i}".encode() for i in range(40))


def _keyed(keys: dict[str, bytes]) -> Callable[..., ckptdb.Database]:
    """An opener with the host's keys (a file as created by default: CDC chunks, zstd)."""

    def opener(path: Path, vfs: str | None = None, **kw: Any) -> ckptdb.Database:
        return ckptdb.open(path, vfs=vfs, keys=keys, **kw)

    return opener


def _secret(tag: str, size: int) -> bytes:
    """Plaintext that zstd shrinks ~10x yet stores with raw (not Huffman-coded) literals,
    so an unsealed copy would show the marker ``MARKER-<tag>`` on disk: every line is the
    marker, a counter, 48 random bytes and a repeated filler."""
    rng = random.Random(tag)
    out = bytearray()
    n = 0
    while len(out) < size:
        out += f"MARKER-{tag} {n} ".encode() + rng.randbytes(48) + _FILLER + b"\n"
        n += 1
    return bytes(out[:size])


def _disk(path: Path) -> bytes:
    """Every byte SQLite keeps on disk for this database: the file and its WAL."""
    return b"".join(
        Path(str(path) + suffix).read_bytes()
        for suffix in ("", "-wal")
        if Path(str(path) + suffix).exists()
    )


def _needles(*values: bytes) -> list[tuple[str, bytes]]:
    """What must never be on disk for sealed values (made by :func:`_secret`): their
    markers, their plain sha256."""
    return [n for value in values for n in _value_needles(value)]


def _value_needles(value: bytes) -> list[tuple[str, bytes]]:
    marker = value[: value.index(b" ")]
    tag = marker.decode().removeprefix("MARKER-")
    digest = hashlib.sha256(value)
    return [
        (f"marker of {tag}", marker),
        (f"sha256 of {tag}", digest.digest()),
        (f"sha256 hex of {tag}", digest.hexdigest().encode()),
    ]


def _found(path: Path, needles: list[tuple[str, bytes]]) -> list[str]:
    disk = _disk(path)
    return [what for what, needle in needles if needle in disk]


def _selftest_needles(needles: list[tuple[str, bytes]], values: dict[str, bytes]) -> None:
    """The raw-bytes check can see plaintext: the same values committed to a plaintext
    namespace put every marker on disk (else the check would pass vacuously)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "plain.ckpt"
        with ckptdb.open(path) as db:
            db.commit("plain/probe", values)
            markers = [n for n in needles if n[0].startswith("marker")]
            missing = [what for what, needle in markers if needle not in _disk(path)]
        assert not missing, f"the raw-bytes check could not see plaintext: {missing}"


def _sealed_commit_op(name: str, entries: dict[str, bytes]) -> Operation:
    """A commit into an encrypted scope: old-or-new seen WITH the key, keyless verify of the
    sealed bytes, and no plaintext marker or plain sha256 of any sealed value in the raw
    bytes of any image."""
    opener = _keyed({"a": KEY_A})
    base = {"state": _secret(f"{name}-base", 1500)}
    needles = _needles(base["state"], *entries.values())

    def setup(path: Path, vfs: str) -> dict[str, Any]:
        with opener(path, vfs) as db:
            db.set_encryption("tenant-a/", key_id="a")
            cp = db.commit(SEALED_NS, base)
        return {"base": cp.checkpoint_id}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with opener(path, vfs) as db:
            db.commit(SEALED_NS, entries)
            return True

    def state(path: Path, ctx: dict[str, Any]) -> str:
        with opener(path) as db:
            report = db.verify()
            if not report.ok or report.sealed_only:
                return f"broken:verify:{report.sealed_only}"
            cp = db.current(SEALED_NS)
            assert cp is not None
            cp.verify()
            got = {n: cp.read(n) for n in cp.entries}
            if cp.id == ctx["base"] and got == base:
                seen = "old"
            elif cp.parent_id == ctx["base"] and got == entries:
                seen = "new"
            else:
                return f"mixed:{cp.id[:12]}"
        with ckptdb.open(path) as keyless:  # sealed bytes against sealed_digest
            report = keyless.verify()
            if not report.ok or report.sealed_only != ["a"]:
                return f"broken:keyless-verify:{report.problems[:2]}"
        return seen

    def raw_check(path: Path, ctx: dict[str, Any], acked: bool) -> list[str]:
        return [f"{what} found in the raw bytes" for what in _found(path, needles)]

    def selftest() -> None:
        _selftest_needles(_needles(*entries.values()), entries)

    return Operation(name, setup, run, state, raw_check, selftest)


def _rotate_op() -> Operation:
    """rotate_key: afterwards exactly one of the old and the new key opens the scope (the new
    one once the rotation was acknowledged), and its data reads back intact."""
    entries = {"state.json": _secret("rot-state", 1200), "log.txt": _secret("rot-log", 120_000)}
    plain = {"p": b"plaintext namespace"}
    needles = _needles(*entries.values())

    def setup(path: Path, vfs: str) -> dict[str, Any]:
        with _keyed({"a": KEY_A})(path, vfs) as db:
            db.set_encryption("tenant-a/", key_id="a")
            db.commit(SEALED_NS, entries)
            db.commit("plain/ns", plain)
        return {}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with _keyed({"a": KEY_A})(path, vfs) as db:
            db.rotate_key("a", KEY_A_NEXT)
        return True

    def opens(path: Path, key: bytes) -> str:
        with ckptdb.open(path, keys={"a": key}) as db:
            plain_cp = db.current("plain/ns")
            if plain_cp is None or plain_cp.read("p") != plain["p"]:
                return "broken:plaintext namespace"
            cp = db.current(SEALED_NS)
            if cp is None:
                return "broken:no current"
            try:
                got = {n: cp.read(n) for n in cp.entries}
            except errors.KeyMismatchError:
                return "mismatch"
            if got != entries:
                return "broken:content"
            report = db.verify()
            if not report.ok or report.sealed_only:
                return f"broken:verify:{report.sealed_only}"
            (scope,) = [s for s in db.key_scopes() if s.key_id == "a"]
            return f"opens:generation-{scope.key_generation}"

    def state(path: Path, ctx: dict[str, Any]) -> str:
        old, new = opens(path, KEY_A), opens(path, KEY_A_NEXT)
        if old == "opens:generation-1" and new == "mismatch":
            return "old"
        if new == "opens:generation-2" and old == "mismatch":
            return "new"
        if old == new == "mismatch":
            return "broken:neither key opens the scope"
        return f"mixed:old key {old}, new key {new}"

    def raw_check(path: Path, ctx: dict[str, Any], acked: bool) -> list[str]:
        return [f"{what} found in the raw bytes" for what in _found(path, needles)]

    return Operation("rotate-key", setup, run, state, raw_check)


def _shred_op(name: str, *, namespaces: bool) -> Operation:
    """shred_key: at every fault point the scope is either still usable with its key and
    intact, or shredded (KeyShreddedError); the other scope and the plaintext namespace stay
    intact; shred_key again on the image completes the shred, after which no wrapped key
    (of any generation) and no sampled sealed byte of the scope is in the file or the WAL --
    as after an acknowledged shred, in the image itself and in its power-loss image.

    ``namespaces``: the scope holds two namespaces (one pinned), their last commits only in
    the WAL; else it holds no namespace, only chunks staged by a commit that then lost its
    compare-and-swap, and its wrapped keys and chunks are all in WAL frames."""
    keys = {"a": KEY_A_NEXT, "b": KEY_B}
    a_content = (
        {
            "tenant-a/t": {
                "state.json": _secret("shred-t2", 900),
                "log.txt": _secret("shred-tl", 90_000),
            },
            "tenant-a/u": {"state.json": _secret("shred-u", 3000)},
        }
        if namespaces
        else {}
    )
    orphan = _secret("shred-orphan", 4 * 1024 * 1024 + 10)
    keep = {
        "tenant-b/t": {
            "state.json": _secret("shred-b", 800),
            "log.txt": _secret("shred-bl", 40_000),
        },
        "plain/p": {"p": b"plaintext namespace"},
    }
    sealed_needles = _needles(
        orphan,
        *(v for content in (*a_content.values(), keep["tenant-b/t"]) for v in content.values()),
    )

    def setup(path: Path, vfs: str) -> dict[str, Any]:
        wrapped: list[bytes] = []
        # A short busy timeout: rotate_key's truncating checkpoint gives up at once on the
        # holder's old snapshot (rather than waiting it out), so generation 1 stays in WAL
        # frames where the holder was there first.
        db = _keyed({"a": KEY_A, "b": KEY_B})(path, vfs, busy_timeout=0.05)
        # A reader holding an old snapshot keeps what follows in WAL frames: no checkpoint
        # can copy it into the file before the shred starts.
        holder = apsw.Connection(str(path))
        try:
            if not namespaces:
                holder.execute("BEGIN")
                holder.execute("SELECT count(*) FROM sqlite_schema").fetchall()
            db.set_encryption("tenant-a/", key_id="a")
            db.set_encryption("tenant-b/", key_id="b")
            if namespaces:
                db.commit(
                    "tenant-a/t",
                    {
                        "state.json": _secret("shred-t1", 700),
                        "old.txt": _secret("shred-to", 50_000),
                    },
                )
            for ns, content in keep.items():
                db.commit(ns, content)
            wrapped.append(_wrapped_key(path))
            db.rotate_key("a", KEY_A_NEXT)  # generation 1 under KEY_A, 2 under KEY_A_NEXT
            wrapped.append(_wrapped_key(path))
            if namespaces:
                holder.execute("BEGIN")
                holder.execute("SELECT count(*) FROM checkpoint").fetchall()
                for ns, content in a_content.items():
                    db.commit(ns, content)
                db.pin("tenant-a/t@current", "keep-a")
            else:
                try:  # staged (over 4 MiB), then refused: the chunks stay, unreferenced
                    db.commit("tenant-a/t", {"archive.txt": orphan}, expect_current="0" * 64)
                    raise AssertionError("the compare-and-swap did not fail")
                except errors.ConflictError:
                    pass
            samples = _sealed_samples(path, "a")
            db.close()
            holder.execute("COMMIT")
        finally:
            holder.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
            holder.close()
            db.close()
        assert os.path.getsize(str(path) + "-wal") > 0
        disk = _disk(path)
        samples = [s for s in samples if s in disk]  # a sample straddling a page is no needle
        # rotate_key retired generation 1 from the WAL unless the holder's snapshot kept it.
        kept = wrapped if not namespaces else wrapped[1:]
        assert len(samples) >= 4 and all(w in disk for w in kept), "setup left no secret"
        shredded = [("wrapped key (generation 1)", wrapped[0]), ("wrapped key", wrapped[1])]
        shredded += [(f"sealed sample {i} of scope a", s) for i, s in enumerate(samples)]
        return {"shredded": shredded}

    def run(path: Path, vfs: str, ctx: dict[str, Any]) -> bool:
        with _keyed(keys)(path, vfs) as db:
            report = db.shred_key("a")
        ctx["wal_truncated"] = report.wal_truncated
        return True

    def intact_others(db: ckptdb.Database) -> str | None:
        for ns, content in keep.items():
            cp = db.current(ns)
            if cp is None or {n: cp.read(n) for n in cp.entries} != content:
                return f"broken:{ns} not intact"
        return None

    def state(path: Path, ctx: dict[str, Any]) -> str:
        with _keyed(keys)(path) as db:
            report = db.verify()
            broken = intact_others(db)
            if broken:
                return broken
            (scope,) = [s for s in db.key_scopes() if s.key_id == "a"]
            # A shred interrupted while dropping a namespace of the scope leaves that
            # namespace without its pointer (drop_namespace deletes in batches, the pointer
            # first); verify reports it until shred_key runs again. Nothing else may fail.
            problems = [
                p
                for p in report.problems
                if not (
                    scope.shredded
                    and p.code == "pointer_missing"
                    and (p.namespace or "").startswith("tenant-a/")
                )
            ]
            if problems:
                return f"broken:verify:{problems[:2]}"
            if not scope.shredded:
                if report.sealed_only:
                    return f"broken:verify:{report.sealed_only}"
                for ns, content in a_content.items():
                    cp = db.current(ns)
                    if cp is None or {n: cp.read(n) for n in cp.entries} != content:
                        return f"broken:{ns} neither intact nor shredded"
                seen = "old"
            else:
                try:
                    db.commit("tenant-a/new", {"x": b"after the shred"})
                    return "broken:a commit under a shredded prefix succeeded"
                except errors.KeyShreddedError:
                    pass
                left = [i.name for i in db.namespaces() if i.name.startswith("tenant-a/")]
                for ns in left:
                    cp = db.current(ns)
                    if cp is None:
                        continue
                    for entry in cp.entries:
                        try:
                            cp.read(entry)
                            return f"broken:{ns}/{entry} read after the shred"
                        except errors.KeyShreddedError:
                            pass
                seen = "new"
        # Shredding again (on a copy: observers after this one see the image as it was)
        # completes the shred; then nothing of the scope is left on disk.
        scratch = Path(tempfile.mkdtemp(dir=path.parent, prefix="reshred-"))
        copied = copy_image(path.parent, path.name, scratch)
        assert copied is not None
        with _keyed(keys)(copied) as db:
            report = db.shred_key("a")
            if not report.wal_truncated:
                return "broken:re-shred left the WAL"
            left = _found(copied, ctx["shredded"])
            if left:
                return f"broken:after shred_key again, on disk: {left}"
            if any(i.name.startswith("tenant-a/") for i in db.namespaces()):
                return "broken:re-shred left a namespace of the scope"
            broken = intact_others(db)
            if broken:
                return broken + " after the re-shred"
            if not db.verify().ok:
                return "broken:verify after the re-shred"
        left = _found(copied, ctx["shredded"])
        shutil.rmtree(scratch, ignore_errors=True)
        return f"broken:after shred_key again and close, on disk: {left}" if left else seen

    def raw_check(path: Path, ctx: dict[str, Any], acked: bool) -> list[str]:
        problems = [f"{what} found in the raw bytes" for what in _found(path, sealed_needles)]
        if acked:
            problems += [
                f"shred acknowledged (wal_truncated={ctx.get('wal_truncated')}) but {what} is"
                " still in the raw bytes"
                for what in _found(path, ctx["shredded"])
            ]
        return problems

    return Operation(name, setup, run, state, raw_check)


def _wrapped_key(path: Path) -> bytes:
    conn = apsw.Connection(str(path))
    try:
        (wrapped,) = conn.execute("SELECT wrapped_key FROM key_scope WHERE key_id = 'a'").fetchone()
    finally:
        conn.close()
    assert isinstance(wrapped, bytes)
    return wrapped


def _sealed_samples(path: Path, key_id: str) -> list[bytes]:
    """Pieces of the stored (sealed) bytes of a scope's chunks and inline blobs."""
    conn = apsw.Connection(str(path))
    try:
        rows = conn.execute(
            "SELECT substr(d.data, 13, 48) FROM chunk_data d JOIN chunk c USING (chunk_id)"
            " JOIN key_scope s ON s.scope_id = c.scope_id WHERE s.key_id = ?"
            " UNION ALL SELECT substr(b.inline_data, 13, 16) FROM blob b JOIN key_scope s"
            " ON s.scope_id = b.scope_id WHERE s.key_id = ? AND b.chunk_count = 0",
            (key_id, key_id),
        ).fetchall()
    finally:
        conn.close()
    return [bytes(r[0]) for r in rows]


@functools.cache
def operations() -> list[Operation]:
    """Every operation the sweep covers (built once: some hold megabytes of content)."""
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
        _create_op(),
        _group_op(),
        _evict_op(),
        _copy_op(),
        _gc_op(),
        _drop_op(),
        _export_op(),
        _migrate_op(),
        _migrate_v6_op(),
        _sealed_commit_op(
            "commit-sealed",
            {
                "state.json": _secret("sealed-state", 1800),
                "notes.txt": _secret("sealed-notes", 9000),
            },
        ),
        _sealed_commit_op(
            "commit-sealed-cdc",
            {
                # content-defined chunks, cut in memory and written inside the commit
                "messages.json": _secret("sealed-messages", 160_000),
                # over 4 MiB: staged (sealed) in the large tier before the commit
                "archive.txt": _secret("sealed-archive", 4 * 1024 * 1024 + 5000),
            },
        ),
        _rotate_op(),
        _shred_op("shred-key", namespaces=True),
        _shred_op("shred-key-unused", namespaces=False),
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
    raw: dict[str, list[str]] = {}

    def observe(observer: str, image: Path, after_ack: bool) -> None:
        # The raw bytes first: opening an image may checkpoint its WAL away.
        if op.raw_check is not None:
            raw[observer] = op.raw_check(image, ctx, after_ack)
        states[observer] = _observe(op, image, ctx)

    states: dict[str, str] = {}
    # What the operation left once it returned: acknowledged or not, it is complete.
    observe("reopened", path, acked)
    vfs.power_image(path, case / "final-power")
    for image in ("crash", "power"):  # taken when the fault fired: the operation was midway
        copied = copy_image(case / "images" / image, path.name, case / f"check-{image}")
        if copied is not None:
            observe(image, copied, False)
            totals.images_checked += 1
    final = copy_image(case / "final-power", path.name, case / "check-final-power")
    if final is not None:
        observe("final-power", final, acked)
        totals.images_checked += 1
    for observer, problems in raw.items():
        totals.violations.extend(f"{label}: {observer}: {problem}" for problem in problems)
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


def run_sweep(quick: bool, only: list[str] | None = None) -> dict[str, Any]:
    """Run the sweep (``only``: these operations); returns the figures (and violations)."""
    known = [op.name for op in operations()]
    unknown = sorted(set(only or ()) - set(known))
    if unknown:
        raise SystemExit(f"unknown operation(s) {unknown}; known: {', '.join(known)}")
    vfs = FaultVFS(f"fault-sweep-{os.getpid()}")
    workdir = Path(tempfile.mkdtemp(prefix="ckptdb-fault-sweep-"))
    per_op: dict[str, dict[str, Any]] = {}
    totals = Totals()
    started = time.monotonic()
    try:
        for op in operations():
            if only and op.name not in only:
                continue
            before = Totals(**{k: getattr(totals, k) for k in ("points", "acked", "failed")})
            if op.selftest is not None:
                op.selftest()
                op.seen.clear()
            counts_dir = workdir / f"count-{op.name}"
            counts_dir.mkdir()
            counted = counts_dir / "db.ckpt"
            ctx = op.setup(counted, vfs.name)
            with vfs.armed(vfs.count_calls(), watch=[counted]) as counter:
                op.run(counted, vfs.name, ctx)
            counts = dict(counter.counts)
            combos = [
                (k, e, p)
                for k in OPS
                for e, p in (("ioerr", False), ("full", False), ("ioerr", True))
            ]
            # The unfaulted run, as it left the file and as a power loss right after its
            # acknowledgement would (each file as of its last sync), shows the new state.
            vfs.power_image(counted, counts_dir / "power")
            power = copy_image(counts_dir / "power", counted.name, counts_dir / "check-power")
            for observer, image in (("unfaulted", counted), ("unfaulted power-loss", power)):
                assert image is not None
                if op.raw_check is not None:
                    totals.violations.extend(
                        f"{op.name} {observer}: {problem}"
                        for problem in op.raw_check(image, ctx, True)
                    )
                seen = _observe(op, image, ctx)
                if seen != "new":
                    totals.violations.append(f"{op.name} {observer}: shows {seen}")
                totals.images_checked += observer != "unfaulted"
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
                **({"states_seen": dict(sorted(op.seen.items()))} if op.seen else {}),
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
        help="operations, comma-separated: " + ", ".join(op.name for op in operations()),
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run_sweep(args.quick, args.only.split(",") if args.only else None)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
