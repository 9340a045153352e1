#!/usr/bin/env python3
"""Corruption campaign: damage a ckptdb file in thousands of ways and check every promise.

    python tools/corruption_campaign.py --quick              # ~300 cases, well under a minute
    python tools/corruption_campaign.py                      # full: 3000 cases
    python tools/corruption_campaign.py --seed 7 --cases 5000 --json out.json
    python tools/corruption_campaign.py --replay out.json --case 123   # re-run one case here

Method
------
1. A *pristine* database is built (twice) (chunk size 64 KiB, page size 4 KiB, so chunked
   blobs, overflow chains and multi-level b-trees exist): several namespaces with lineages
   of several generations, inline and chunked entries, blobs shared between checkpoints and
   namespaces, chunks shared between blobs, an empty entry, media types and schema pins,
   a rollback with ``set_current``, a branch with ``base=``, pins, receipts, a GC that cut
   a lineage, and free pages (a GC sweep interrupted before its incremental vacuum); and an
   encrypted key scope (``sealed/``: two namespaces, sealed inline blobs and sealed chunks
   shared between generations, a key rotated once), opened with its key by every check.
   It is a storage-format-3 file: entries packed into their checkpoint rows, ``blob_ref``
   beside them, labels on most checkpoints (``commit(label=)``), and its highest seqs
   given to a namespace since dropped (so ``seq_high_water`` stands above every stored
   seq).
   The first part is built once and copied, so both variants hold the same scope (its data
   key) and the same (keyed) checkpoint ids. Variant ``checkpointed`` has no WAL. Variant
   ``wal`` holds its last commits only in WAL frames (a raw apsw reader keeps a snapshot
   open so they are never checkpointed, and the database and its -wal are copied while
   they are).
   The expected bytes of every entry of every checkpoint, every manifest and the lineage
   of every namespace are recorded.
2. Cases are drawn with a seeded RNG and resolved to concrete mutations by the parent
   process, against the pristine page map taken from SQLite's ``dbstat`` table (owner
   b-tree and page type of every page; free and pointer-map pages are the rest) and the
   parsed WAL (header, frame headers, frame payloads, and which page each frame holds):

   * page level, main file: bit flips (biased to the cell-content area of b-tree pages),
     random byte runs, zeroed pages, a page overwritten with another page (misdirected
     write), flips in the 100-byte database header, truncation;
   * WAL: flips in the WAL header, in frame headers, in frame payloads (checksums left
     wrong: SQLite drops the frame and every later one), and in frame payloads with the
     checksum chain recomputed (SQLite accepts the damaged page), and a torn WAL tail;
   * row level, through a raw apsw connection (SQL bypassing ckptdb, like an operator or
     another program): chunk bytes, chunk/blob digests and sizes, chunk lists (order,
     targets, missing rows), inline bytes, manifest fields (metadata, parent, generation,
     namespace, counts), invalid UTF-8 in text columns, pointers
     (current/fallback/revision/digest), pointer history, namespace names;
   * format 3, through SQL too: a checkpoint's packed ``entries`` -- one element edited
     (blob id retargeted to another existing blob or to none, turned into text or a real;
     renamed, dropped, added, duplicated, shortened to its name, media type or schema pin
     set, a field added, invalid UTF-8 in its name), the text as a whole (a flipped bit,
     invalid UTF-8, cut short, replaced by other JSON, NULL -- which reads as "not moved
     yet" --, its elements reversed, another row's entries) and a format-2 ``entry`` row
     beside packed entries; ``blob_ref`` rows (one deleted, every row of a blob deleted, a
     stray one added, one naming no checkpoint, retargeted to another blob or checkpoint);
     ``label`` (set to another checkpoint's label of the same namespace -- the unique index
     refuses it, so the case is "not applicable" --, swapped between two checkpoints, set
     to one of another namespace, changed, cleared, added, invalid UTF-8); and
     ``seq_high_water`` (lowered, deleted, raised, set to 2^63-1);
   * the encrypted scope, through SQL too: sealed chunk and inline bytes flipped, truncated
     or moved from another sealed record, their sealed digests, keyed digests, codec and
     scope ids (a sealed record claiming plaintext, a plaintext one claiming the scope),
     sealed entries pointed at other blobs, their packed text flipped, a ``blob_ref`` row
     of a sealed blob deleted, a namespace taken out of the scope, and the
     ``key_scope`` row: wrapped key flipped or truncated, generation, prefix, key id,
     algorithm and scope id changed (page-level damage reaches its page as well).

3. Every case runs in a worker subprocess (batches; a crash or hang of the worker is
   observed and counted, never fatal): the pristine files are copied, the mutation applied,
   then ckptdb opens the copy (a typed error = "refused at open") and:

   * ``get`` + ``read`` of every entry of every recorded checkpoint (and streaming reads of
     chunked entries): the bytes must be exactly the expected bytes of that checkpoint id
     (a streamed prefix must be a prefix of them), the manifest must be the expected one,
     or a ``ckptdb.CkptdbError`` must be raised;
   * ``current``/``load`` of every namespace, then ``load(ns, fallback=True)``: the result
     must be, entry for entry, the expected bytes, and must be the newest checkpoint along
     the namespace's recorded lineage (from the CURRENT found in the file) whose every entry
     read back correctly -- or a typed error;
   * ``checkout(..., fallback=True)`` of every namespace: the files written are the
     expected bytes of the checkpoint reported;
   * informational calls (lineage, namespaces, history, pins, receipts, stats) must
     return or raise a typed error; ``resolve('ns@current' | 'ns@fallback' | 'ns~1')``
     must name a checkpoint of that namespace or raise;
   * ``get_labelled`` of every recorded label: the checkpoint committed with it, None or a
     typed error;
   * ``verify()`` must report a problem whenever any read failed;
   * GC (``keep_last=1`` in every namespace, no grace period): it completes or raises a
     typed error; every recorded checkpoint it kept is read again (the expected bytes or a
     typed error), and verify must report a problem if one of those reads fails;
   * last, a commit on the damaged file (re-using the bytes of the largest recorded entry,
     so deduplication meets damaged chunks) succeeds and reads back, or raises a typed
     error; the seq it took is noted when the pristine file had given it before.

   A row-level case whose statements changed nothing (an UPDATE writing the value already
   there) is not counted ("not applicable").

   Outcomes: ``refused`` (typed error at open), ``detected`` (verify reported problems),
   ``benign`` (no observable effect, e.g. a flip in free space), ``rolled_back`` (WAL
   damage made SQLite drop the newest commits: an older, consistent state -- SQLite's WAL
   design, not detectable by ckptdb), ``label_unverified`` (a row edit of ``label`` moved
   or removed a label: labels are not part of a manifest, so verify cannot see it),
   ``write_refused`` (verify said ok, every read succeeded, the commit was refused with a
   typed error), and the failures, which must all be zero:
   ``wrong_bytes`` (bytes or a manifest differing from the record of the checkpoint the
   handle claims to be), ``wrong_checkpoint`` (a reference such as ``ns@current``, CURRENT,
   a load, a fallback or a checkout resolved to a checkpoint that is not of that namespace
   or not on its lineage; a label resolved to another checkpoint than the one committed
   with it, unless the case edited labels), ``untyped`` (an exception that is not a
   CkptdbError),
   ``crash``, ``hang``, ``undetected`` (a read failed yet verify said ok), ``silent_loss``
   (a checkpoint, a namespace's CURRENT or a label vanished without a WAL cause and verify
   said ok), ``fallback_not_newest`` (fallback skipped an intact ancestor, or found none while
   one existed), ``sealed_wrong_error`` (damage to the encrypted scope's records or its
   key_scope row made a read of the scope fail with another error than CorruptionError or
   KeyMismatchError -- SchemaError is also expected for an unknown algorithm name (a row
   edit or page damage that changed it: a newer ckptdb's file looks the same), and
   KeyUnavailableError for a key id changed to one the host was not given, which verify
   then lists among the scopes it checked without their key), ``gc_robbed`` (GC deleted
   bytes that a checkpoint it kept still uses, on a file verify had found nothing wrong
   with), ``gc_undetected`` (a read failed after GC yet verify then said ok).

   A deleted ``blob_ref`` row is damage verify reports (``blob_ref_missing``, "do not run
   gc on this file"); GC trusts ``blob_ref`` and may then delete the blob a kept checkpoint
   still uses. That loss is counted apart (``gc_lost_after_detected_damage``), not as
   ``gc_robbed``: the bar there is that the later read raises a typed error.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import selectors
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

import ckptdb
from ckptdb import errors
from ckptdb.store.crypto import ALGORITHM
from ckptdb.testing.wal import wal_resum

CHUNK = 64 * 1024
PAGE = 4096
DB_NAME = "campaign.ckpt"
VARIANTS = ("checkpointed", "wal")
QUICK_CASES = 300
FULL_CASES = 3000
CASE_TIMEOUT = 120.0
QUICK_TIMEOUT = 30.0
WAL_HEADER = 32
FRAME_HEADER = 24
#: The encrypted key scope of the pristine database, and the host's keys (the scope was
#: created under KEY_FIRST and rotated to KEY: generation 2).
SEALED_PREFIX = "sealed/"
KEY_ID = "s"
KEY_FIRST = bytes(range(32))
KEY = bytes(range(100, 132))
KEYS = {KEY_ID: KEY}
#: The typed errors a read in the encrypted scope may end in when its sealed records or its
#: key_scope row are damaged (anything else is a ``sealed_wrong_error``).
SEALED_CODES = frozenset({"corrupt", "key_mismatch"})
#: ... except where the damage itself reads as something else: an algorithm name this
#: ckptdb does not know is what a file from a newer ckptdb holds (SchemaError, "upgrade").
#: A key id changed to another valid one names a key the host was not given (the wrap binds
#: the key id, but checking that needs the key): KeyUnavailableError, verify lists it.
SEALED_CODES_ALSO = {
    "row_key_scope_algorithm": frozenset({"schema_error"}),
    "row_key_scope_key_id": frozenset({"key_unavailable"}),
}

#: A namespace whose checkpoints took the highest seqs of the pristine file, then dropped.
TOP_DROPPED = "zeta/dropped"

#: Outcomes that are failures: each must be zero.
FAILURES = (
    "wrong_bytes",
    "wrong_checkpoint",
    "untyped",
    "crash",
    "hang",
    "undetected",
    "silent_loss",
    "fallback_not_newest",
    "sealed_wrong_error",
    "gc_robbed",
    "gc_undetected",
)
#: Case kinds whose damage SQLite itself answers by dropping the newest WAL frames.
WAL_LOSS_KINDS = frozenset(
    {"wal_header_flip", "wal_frame_header_flip", "wal_payload_flip", "wal_truncate"}
)


# ---------------------------------------------------------------------------------------
# The pristine database


#: The JSON path ('$[k]') of the packed entry named ?2 in the row being updated.
_ELEMENT = (
    "(SELECT '$[' || j.key || ']' FROM json_each(checkpoint.entries) j"
    " WHERE json_extract(j.value, '$[0]') = ?2)"
)


def payload(tag: str, size: int) -> bytes:
    """Deterministic pseudo-random bytes named by ``tag``."""
    out = bytearray()
    counter = 0
    seed = tag.encode()
    while len(out) < size:
        out += hashlib.sha256(seed + counter.to_bytes(8, "little")).digest()
        counter += 1
    return bytes(out[:size])


@dataclass
class Recorder:
    """The expected state: every checkpoint's manifest and bytes."""

    blobs_dir: Path
    checkpoints: dict[str, dict[str, Any]] = field(default_factory=dict)

    def record(
        self,
        db: ckptdb.Database,
        checkpoint_id: str,
        entries: dict[str, Any],
        label: str | None = None,
    ) -> None:
        cp = db.get(checkpoint_id)
        manifest: dict[str, Any] = {}
        for name, given in entries.items():
            media_type = schema = None
            value = given
            if isinstance(given, ckptdb.Entry):
                media_type, schema, value = given.media_type, given.schema_pin, given.value
            data = value.encode() if isinstance(value, str) else bytes(value)
            digest = hashlib.sha256(data).hexdigest()
            (self.blobs_dir / digest).write_bytes(data)
            manifest[name] = {
                "digest": digest,
                "size": len(data),
                "media_type": media_type,
                "schema": schema,
            }
            if cp.entries[name].digest != digest:  # a keyed address: an encrypted scope
                manifest[name]["address"] = cp.entries[name].digest
        self.checkpoints[checkpoint_id] = {
            "namespace": cp.namespace,
            "parent": cp.parent_id,
            "generation": cp.generation,
            "metadata": cp.metadata,
            "entries": manifest,
            "label": label,
        }

    def commit(self, db: ckptdb.Database, ns: str, entries: dict[str, Any], **kw: Any) -> str:
        ack = db.commit(ns, entries, **kw)
        self.record(db, ack.checkpoint_id, entries, kw.get("label"))
        return ack.checkpoint_id


def _phase_one(db: ckptdb.Database, rec: Recorder) -> None:
    settings = b'{"lr": 0.001, "layers": 12}'
    for g in range(1, 7):
        model_gen = g - (g + 1) % 2  # new model bytes on odd generations only
        rec.commit(
            db,
            "alpha",
            {
                "state.json": json.dumps({"turn": g, "nodes": list(range(g))}).encode(),
                "model.bin": payload(f"alpha-model-{model_gen}", 3 * CHUNK + 123),
                "config/settings.json": settings,
                "notes/é.txt": ckptdb.Entry(
                    f"notes of turn {g}\n", media_type="text/plain", schema_pin="notes/v1"
                ),
            },
            metadata={"turn": g, "loss": 1.0 / g, "tags": ["a", str(g)]},
            label=f"alpha-turn-{g}",
        )
    shared_head = payload("beta-head", CHUNK)
    for g in range(1, 5):
        rec.commit(
            db,
            "beta",
            {
                "weights.bin": shared_head + payload(f"beta-tail-{g}", CHUNK + 7 * g),
                "config/settings.json": settings,
                "empty": b"",
                "log.txt": f"beta generation {g}\n" * 20,
            },
            metadata={"generation_hint": g},
            label=f"beta-{g:02d}",
        )
    ns = "gamma/ünï"
    g1 = rec.commit(db, ns, {"s": b"gamma-1", "blob": payload("gamma-blob", 5000)})
    g2 = rec.commit(db, ns, {"s": b"gamma-2", "blob": payload("gamma-blob", 5000)})
    rec.commit(db, ns, {"s": b"gamma-3 (abandoned)", "blob": payload("gamma-3", 70000)})
    db.set_current(ns, g2, reason="rollback")
    rec.commit(db, ns, {"s": b"gamma-4 on gamma-2", "blob": payload("gamma-4", 9000)})
    rec.commit(db, ns, {"s": b"gamma branch on gamma-1"}, base=g1)
    rec.commit(db, ns, {"s": b"gamma-6", "blob": payload("gamma-blob", 5000)})
    delta = []
    for g in range(1, 6):
        delta.append(
            rec.commit(
                db,
                "delta",
                {"d": f"delta-{g}".encode(), "big": payload(f"delta-big-{g % 2}", 2 * CHUNK)},
                metadata={"g": g},
            )
        )
    db.pin(delta[1], "delta-keep", note="survives gc")
    db.pin(rec_first(rec, "alpha", 3), "release-3")
    # GC cuts delta's stored lineage: generations 1 and 3 go (2 is pinned).
    report = db.gc(ckptdb.RetentionPolicy.build(keep_last=2), namespaces=["delta"], grace=0)
    assert report.checkpoints_deleted == 2, report
    for cid in (delta[0], delta[2]):
        rec.checkpoints.pop(cid)
    # An encrypted key scope: sealed inline blobs and chunks (shared between generations
    # of a growing blob), a lineage, and a key rotated once (generation 2).
    db.set_encryption(SEALED_PREFIX, key_id=KEY_ID)
    history = b""
    for g in range(1, 5):
        history += payload(f"sealed-history-{g}", CHUNK // 2 + 100)
        rec.commit(
            db,
            "sealed/chat",
            {
                "state.json": json.dumps({"turn": g, "secret": True}).encode(),
                "history.bin": history,
                "note.txt": f"sealed note of turn {g}\n" * (g * 3),
            },
            metadata={"turn": g},
            label=f"turn-{g}",
        )
        if g == 2:
            db.rotate_key(KEY_ID, KEY)
    rec.commit(db, "sealed/other", {"s": b"sealed other", "blob": payload("sealed-blob", 5000)})
    db.verify()  # a verify receipt
    # An orphan staged chunk (a commit that lost its compare-and-swap after staging).
    with contextlib.suppress(errors.ConflictError):
        db.commit("alpha", {"orphan.bin": payload("orphan", 9 * CHUNK)}, expect_current=None)


def rec_first(rec: Recorder, ns: str, generation: int) -> str:
    for cid, info in rec.checkpoints.items():
        if info["namespace"] == ns and info["generation"] == generation:
            return cid
    raise KeyError((ns, generation))


def _phase_two(db: ckptdb.Database, rec: Recorder) -> None:
    """The last commits: in the ``wal`` variant they exist only as WAL frames."""
    head = rec.commit(
        db,
        "alpha",
        {
            "state.json": b'{"turn": 7}',
            "model.bin": payload("alpha-model-7", 2 * CHUNK + 5),
            "config/settings.json": b'{"lr": 0.001, "layers": 12}',
        },
        metadata={"turn": 7},
    )
    rec.commit(
        db,
        "beta",
        {"weights.bin": payload("beta-head", CHUNK) + payload("beta-tail-5", 100)},
        metadata={"generation_hint": 5},
    )
    rec.commit(db, "epsilon", {"only": b"epsilon-1", "big": payload("eps", CHUNK + 1)})
    rec.commit(db, "epsilon", {"only": b"epsilon-2", "big": payload("eps", CHUNK + 1)})
    rec.commit(
        db,
        "sealed/chat",
        {
            "state.json": b'{"turn": 5, "secret": true}',
            "history.bin": payload("sealed-history-5", 2 * CHUNK + 9),
        },
        metadata={"turn": 5},
    )
    db.pin(head, "alpha-head")
    # The highest seqs ever given go with a dropped namespace: seq_high_water stands above
    # every stored seq, so a lowered high-water mark would give one of them again.
    for turn in range(2):
        db.commit(TOP_DROPPED, {"s": f"dropped {turn}".encode()}, label=f"dropped-{turn}")
    db.drop_namespace(TOP_DROPPED, force=True)


def _free_some_pages(path: Path) -> None:
    """Delete the orphan chunk as a GC sweep would, without the incremental vacuum that
    normally follows (a GC interrupted between sweep and reclaim): free pages remain."""
    conn = apsw.Connection(str(path))
    try:
        conn.pragma("foreign_keys", 1)
        conn.execute(
            "DELETE FROM chunk WHERE NOT EXISTS"
            " (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = chunk.chunk_id)"
        )
    finally:
        conn.close()


def _lineages(path: Path) -> dict[str, Any]:
    """CURRENT and the stored lineage of every namespace, as ckptdb sees the pristine."""
    with ckptdb.open(path, readonly=True) as db:
        out = {}
        for info in db.namespaces():
            out[info.name] = {
                "current": info.current_id,
                "fallback": info.fallback_id,
                "lineage": [c.id for c in db.lineage(info.name)],
            }
        return out


def _page_map(path: Path, wal: bool) -> dict[int, dict[str, Any]]:
    """Owner and type of every page: through the WAL or of the main file alone."""
    uri = "file:" + str(path) + ("" if wal else "?immutable=1")
    conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        page_count = int(conn.pragma("page_count"))
        rows = conn.execute("SELECT name, pageno, pagetype, ncell FROM dbstat").fetchall()
    finally:
        conn.close()
    pages: dict[int, dict[str, Any]] = {}
    for name, pageno, pagetype, ncell in rows:
        pages[int(pageno)] = {"owner": str(name), "type": str(pagetype), "ncell": ncell}
    entries_per_map = PAGE // 5
    ptrmap = set()
    p = 2
    while p <= page_count:
        ptrmap.add(p)
        p += entries_per_map + 1
    for pageno in range(1, page_count + 1):
        if pageno not in pages:
            pages[pageno] = {
                "owner": "(ptrmap)" if pageno in ptrmap else "(free)",
                "type": "ptrmap" if pageno in ptrmap else "free",
                "ncell": 0,
            }
    return pages


def _wal_frames(wal_path: Path) -> list[dict[str, Any]]:
    """Frames of a WAL file: offset, page number, commit marker, validity by salt."""
    data = wal_path.read_bytes()
    if len(data) < WAL_HEADER:
        return []
    salt = data[16:24]
    size = struct.unpack(">I", data[8:12])[0]
    frames = []
    off = WAL_HEADER
    index = 0
    while off + FRAME_HEADER + size <= len(data):
        pgno, commit = struct.unpack(">II", data[off : off + 8])
        frames.append(
            {
                "index": index,
                "offset": off,
                "pgno": pgno,
                "commit": commit,
                "current_salt": data[off + 8 : off + 16] == salt,
            }
        )
        off += FRAME_HEADER + size
        index += 1
    last_commit = max((f["index"] for f in frames if f["commit"]), default=-1)
    newest: dict[int, int] = {}
    for f in frames:
        if f["index"] <= last_commit:
            newest[f["pgno"]] = f["index"]
    for f in frames:
        f["superseded"] = newest.get(f["pgno"]) != f["index"]
    return frames


def build_pristine(root: Path) -> dict[str, Any]:
    """Build both variants under ``root``; returns (and writes) the campaign metadata."""
    root.mkdir(parents=True, exist_ok=True)
    blobs = root / "blobs"
    blobs.mkdir(exist_ok=True)
    meta: dict[str, Any] = {"variants": {}, "chunk_size": CHUNK, "page_size": PAGE}
    expected: dict[str, Any] | None = None
    # Phase one once: both variants then hold the same key scope (the same data key), so
    # their sealed checkpoints have the same (keyed) ids.
    base = root / "build-base"
    base.mkdir()
    base_rec = Recorder(blobs)
    with ckptdb.open(
        base / DB_NAME, chunk_size=CHUNK, page_size=PAGE, keys={KEY_ID: KEY_FIRST}
    ) as db:
        _phase_one(db, base_rec)
    _free_some_pages(base / DB_NAME)
    assert not os.path.exists(f"{base / DB_NAME}-wal")
    for variant in VARIANTS:
        work = root / f"build-{variant}"
        work.mkdir()
        path = work / DB_NAME
        shutil.copy2(base / DB_NAME, path)
        rec = Recorder(blobs, json.loads(json.dumps(base_rec.checkpoints)))
        out = root / variant
        out.mkdir()
        if variant == "checkpointed":
            with ckptdb.open(path, keys=KEYS) as db:
                _phase_two(db, rec)
            assert not os.path.exists(str(path) + "-wal") or os.path.getsize(f"{path}-wal") == 0
            shutil.copy2(path, out / DB_NAME)
            main_map = _page_map(out / DB_NAME, wal=False)
            full_map = main_map
            frames: list[dict[str, Any]] = []
        else:
            holder = apsw.Connection(str(path))
            holder.execute("BEGIN")
            holder.execute("SELECT count(*) FROM checkpoint").fetchall()
            try:
                with ckptdb.open(path, keys=KEYS) as db:
                    _phase_two(db, rec)
                shutil.copy2(path, out / DB_NAME)
                shutil.copy2(f"{path}-wal", out / f"{DB_NAME}-wal")
            finally:
                holder.execute("COMMIT")
                holder.close()
            main_map = _page_map(out / DB_NAME, wal=False)
            probe = root / "probe-wal"
            probe.mkdir()
            shutil.copy2(out / DB_NAME, probe / DB_NAME)
            shutil.copy2(out / f"{DB_NAME}-wal", probe / f"{DB_NAME}-wal")
            full_map = _page_map(probe / DB_NAME, wal=True)
            shutil.rmtree(probe)
            frames = _wal_frames(out / f"{DB_NAME}-wal")
            assert frames, "the wal variant has no WAL frames"
        shutil.rmtree(work)
        # Sanity: the pristine copy verifies and matches the record.
        check = root / "sanity"
        check.mkdir()
        for name in os.listdir(out):
            shutil.copy2(out / name, check / name)
        with ckptdb.open(check / DB_NAME, keys=KEYS) as db:
            report = db.verify()
            assert report.ok and not report.sealed_only, report.problems
        lineages = _lineages(check / DB_NAME)
        raw = apsw.Connection(str(check / DB_NAME))
        try:
            high_water = int(raw.execute("SELECT seq FROM seq_high_water").fetchall()[0][0])  # type: ignore[arg-type]
            top = int(raw.execute("SELECT max(seq) FROM checkpoint").fetchall()[0][0])  # type: ignore[arg-type]
        finally:
            raw.close()
        assert high_water > top, "the highest seqs ever given must be deleted ones"
        shutil.rmtree(check)
        state = {"checkpoints": rec.checkpoints, "namespaces": lineages}
        if expected is None:
            expected = state
        else:
            assert state == expected, "the two variants hold different content"
        meta["variants"][variant] = {
            "files": sorted(os.listdir(out)),
            "main_pages": {str(k): v for k, v in main_map.items()},
            "pages": {str(k): v for k, v in full_map.items()},
            "frames": frames,
            "high_water": high_water,
        }
    shutil.rmtree(base)
    assert expected is not None
    meta["expected"] = expected
    (root / "meta.json").write_text(json.dumps(meta))
    return meta


# ---------------------------------------------------------------------------------------
# Cases: resolved to concrete mutations by the parent


def _category(info: dict[str, Any]) -> str:
    owner, kind = info["owner"], info["type"]
    if owner in ("(free)", "(ptrmap)"):
        return kind
    if owner == "sqlite_schema":
        return "schema"
    base = "index" if (owner.startswith("sqlite_autoindex") or "_by_" in owner) else owner
    return f"{base}:{kind}"


def _content_offset(page: bytes, pageno: int, info: dict[str, Any], rng: random.Random) -> int:
    """An offset inside the page, biased to bytes that hold data."""
    if info["type"] in ("leaf", "internal") and rng.random() < 0.85:
        head = 100 if pageno == 1 else 0
        start = struct.unpack(">H", page[head + 5 : head + 7])[0] or PAGE
        if start < PAGE:
            return rng.randrange(start, PAGE)
    if info["type"] == "overflow" and rng.random() < 0.85:
        return rng.randrange(4, PAGE)
    return rng.randrange(0, PAGE)


class CaseMaker:
    """Draws cases for one variant from the pristine files and metadata."""

    def __init__(self, root: Path, meta: dict[str, Any], variant: str) -> None:
        self.root = root
        self.variant = variant
        vmeta = meta["variants"][variant]
        self.main_pages = {int(k): v for k, v in vmeta["main_pages"].items()}
        self.pages = {int(k): v for k, v in vmeta["pages"].items()}
        self.frames = vmeta["frames"]
        self.db_bytes = (root / variant / DB_NAME).read_bytes()
        wal = root / variant / f"{DB_NAME}-wal"
        self.wal_bytes = wal.read_bytes() if wal.exists() else b""
        self.by_category: dict[str, list[int]] = {}
        for pageno, info in sorted(self.main_pages.items()):
            self.by_category.setdefault(_category(info), []).append(pageno)
        self.rows = self._rows()

    def _rows(self) -> dict[str, list[Any]]:
        """Keys of the rows row-level cases pick from (read from the pristine state)."""
        tmp = Path(tempfile.mkdtemp(prefix="campaign-rows-"))
        try:
            for name in os.listdir(self.root / self.variant):
                shutil.copy2(self.root / self.variant / name, tmp / name)
            conn = apsw.Connection(str(tmp / DB_NAME))
            q = conn.execute
            out: dict[str, list[Any]] = {
                "chunk": [r[0] for r in q("SELECT chunk_id FROM chunk ORDER BY chunk_id")],
                "inline": [
                    r[0] for r in q("SELECT blob_id FROM blob WHERE chunk_count = 0 AND size > 0")
                ],
                "chunked": [r[0] for r in q("SELECT blob_id FROM blob WHERE chunk_count > 1")],
                "blob": [r[0] for r in q("SELECT blob_id FROM blob ORDER BY blob_id")],
                "checkpoint": [r[0] for r in q("SELECT seq FROM checkpoint ORDER BY seq")],
                "entry": [
                    list(r)
                    for r in q(
                        "SELECT c.seq, json_extract(j.value, '$[0]') FROM checkpoint c,"
                        " json_each(c.entries) j ORDER BY 1, 2"
                    )
                ],
                "pointer": [r[0] for r in q("SELECT namespace_id FROM pointer ORDER BY 1")],
                "history": [
                    list(r) for r in q("SELECT namespace_id, revision FROM pointer_history")
                ],
                "namespace": [list(r) for r in q("SELECT namespace_id, name FROM namespace")],
                "receipt": [r[0] for r in q("SELECT receipt_id FROM receipt ORDER BY 1")],
                "ids": [list(r) for r in q("SELECT seq, id, namespace_id FROM checkpoint")],
                "scope": [r[0] for r in q("SELECT scope_id FROM key_scope ORDER BY 1")],
                "sealed_chunk": [
                    list(r)
                    for r in q(
                        "SELECT chunk_id, size FROM chunk WHERE scope_id IS NOT NULL ORDER BY 1"
                    )
                ],
                "plain_chunk": [
                    r[0] for r in q("SELECT chunk_id FROM chunk WHERE scope_id IS NULL ORDER BY 1")
                ],
                "sealed_inline": [
                    r[0]
                    for r in q(
                        "SELECT blob_id FROM blob WHERE scope_id IS NOT NULL AND chunk_count = 0"
                        " AND size > 0 ORDER BY 1"
                    )
                ],
                "sealed_blob": [
                    r[0]
                    for r in q("SELECT blob_id FROM blob WHERE scope_id IS NOT NULL ORDER BY 1")
                ],
                "plain_blob": [
                    r[0] for r in q("SELECT blob_id FROM blob WHERE scope_id IS NULL ORDER BY 1")
                ],
                "sealed_namespace": [
                    r[0] for r in q("SELECT namespace_id FROM namespace WHERE scope_id IS NOT NULL")
                ],
                "sealed_entry": [
                    list(r)
                    for r in q(
                        "SELECT c.seq, json_extract(j.value, '$[0]') FROM checkpoint c,"
                        " json_each(c.entries) j"
                        " JOIN namespace n ON n.namespace_id = c.namespace_id"
                        " WHERE n.scope_id IS NOT NULL ORDER BY 1, 2"
                    )
                ],
                "blob_ref": [
                    list(r) for r in q("SELECT blob_id, checkpoint_seq FROM blob_ref ORDER BY 1, 2")
                ],
                "sealed_blob_ref": [
                    list(r)
                    for r in q(
                        "SELECT r.blob_id, r.checkpoint_seq FROM blob_ref r JOIN blob b"
                        " USING (blob_id) WHERE b.scope_id IS NOT NULL ORDER BY 1, 2"
                    )
                ],
                "label": [
                    list(r)
                    for r in q(
                        "SELECT seq, label, namespace_id FROM checkpoint"
                        " WHERE label IS NOT NULL ORDER BY 1"
                    )
                ],
                "unlabelled": [
                    r[0] for r in q("SELECT seq FROM checkpoint WHERE label IS NULL ORDER BY 1")
                ],
            }
            conn.close()
            return out
        finally:
            shutil.rmtree(tmp)

    # -- page level -------------------------------------------------------------------

    def _pick_page(self, rng: random.Random) -> int:
        category = rng.choice(sorted(self.by_category))
        return rng.choice(self.by_category[category])

    def page_case(self, rng: random.Random) -> dict[str, Any]:
        pageno = self._pick_page(rng)
        info = self.main_pages[pageno]
        page = self.db_bytes[(pageno - 1) * PAGE : pageno * PAGE]
        base = (pageno - 1) * PAGE
        style = rng.choices(["flip", "run", "zero", "misdirected"], [6, 2, 1, 1])[0]
        ops: list[dict[str, Any]] = []
        if style == "flip":
            for _ in range(rng.choice([1, 1, 1, 2, 3, 8])):
                off = _content_offset(page, pageno, info, rng)
                ops.append(
                    {"op": "xor", "file": "db", "offset": base + off, "mask": 1 << rng.randrange(8)}
                )
        elif style == "run":
            off = _content_offset(page, pageno, info, rng)
            n = min(rng.randrange(4, 65), PAGE - off)
            data = bytes(rng.randrange(256) for _ in range(n))
            ops.append({"op": "write", "file": "db", "offset": base + off, "hex": data.hex()})
        elif style == "zero":
            ops.append({"op": "write", "file": "db", "offset": base, "hex": bytes(PAGE).hex()})
        else:
            other = rng.choice([p for p in self.main_pages if p != pageno])
            src = self.db_bytes[(other - 1) * PAGE : other * PAGE]
            ops.append({"op": "write", "file": "db", "offset": base, "hex": src.hex()})
            info = dict(info, misdirected_from=other)
        return {
            "kind": f"page_{style}",
            "target": _category(info),
            "page": pageno,
            "ops": ops,
        }

    def header_case(self, rng: random.Random) -> dict[str, Any]:
        off = rng.randrange(0, 100)
        return {
            "kind": "db_header_flip",
            "target": "db_header",
            "ops": [{"op": "xor", "file": "db", "offset": off, "mask": 1 << rng.randrange(8)}],
        }

    def truncate_case(self, rng: random.Random) -> dict[str, Any]:
        size = len(self.db_bytes)
        cut = rng.choice([rng.randrange(1, size // PAGE) * PAGE, rng.randrange(100, size)])
        return {
            "kind": "truncate",
            "target": "db_file",
            "ops": [{"op": "truncate", "file": "db", "size": cut}],
        }

    # -- WAL ----------------------------------------------------------------------------

    def wal_case(self, rng: random.Random) -> dict[str, Any]:
        style = rng.choices(
            ["wal_header_flip", "wal_frame_header_flip", "wal_payload_flip",
             "wal_payload_resum", "wal_truncate"],
            [1, 2, 2, 6, 1],
        )[0]  # fmt: skip
        frame = rng.choice(self.frames)
        owner = self.pages.get(frame["pgno"], {"owner": "?", "type": "?"})
        target = _category(owner) + (" (superseded frame)" if frame["superseded"] else "")
        if style == "wal_header_flip":
            off = rng.randrange(0, WAL_HEADER)
            ops = [{"op": "xor", "file": "wal", "offset": off, "mask": 1 << rng.randrange(8)}]
            target = "wal_header"
        elif style == "wal_frame_header_flip":
            off = frame["offset"] + rng.randrange(0, FRAME_HEADER)
            ops = [{"op": "xor", "file": "wal", "offset": off, "mask": 1 << rng.randrange(8)}]
        elif style == "wal_truncate":
            ops = [{"op": "truncate", "file": "wal", "size": rng.randrange(0, len(self.wal_bytes))}]
            target = "wal_tail"
        else:
            start = frame["offset"] + FRAME_HEADER
            page = self.wal_bytes[start : start + PAGE]
            ops = []
            for _ in range(rng.choice([1, 1, 2, 4])):
                off = _content_offset(page, frame["pgno"], owner, rng)
                ops.append(
                    {
                        "op": "xor",
                        "file": "wal",
                        "offset": start + off,
                        "mask": 1 << rng.randrange(8),
                    }
                )
            if style == "wal_payload_resum":
                ops.append({"op": "wal_resum"})
        return {
            "kind": style,
            "target": target,
            "frame": frame["index"],
            "pgno": frame["pgno"],
            "ops": ops,
        }

    # -- row level ----------------------------------------------------------------------

    def row_case(self, rng: random.Random) -> dict[str, Any]:
        r = self.rows
        hexd = "".join(rng.choice("0123456789abcdef") for _ in range(64))
        choices: list[tuple[str, list[tuple[str, list[Any]]]]] = []

        def add(kind: str, sql: str, *params: Any) -> None:
            choices.append((kind, [(sql, list(params))]))

        def add_many(kind: str, *statements: tuple[str, list[Any]]) -> None:
            choices.append((kind, list(statements)))

        chunk = rng.choice(r["chunk"])
        add(
            "chunk_data_flip",
            "UPDATE chunk_data SET data = ?1 WHERE chunk_id = ?2",
            {"flip_blob": ["chunk_data", "data", "chunk_id", chunk, rng.randrange(CHUNK)]},
            chunk,
        )
        add("chunk_data_delete", "DELETE FROM chunk_data WHERE chunk_id = ?", chunk)
        add("chunk_digest", "UPDATE chunk SET digest = ? WHERE chunk_id = ?", hexd, chunk)
        add(
            "chunk_size",
            "UPDATE chunk SET size = size + ? WHERE chunk_id = ?",
            rng.choice([-1, 1, 7]),
            chunk,
        )
        if r["inline"]:
            blob = rng.choice(r["inline"])
            add(
                "inline_flip",
                "UPDATE blob SET inline_data = ?1 WHERE blob_id = ?2",
                {"flip_blob": ["blob", "inline_data", "blob_id", blob, None]},
                blob,
            )
            add(
                "inline_truncate",
                "UPDATE blob SET inline_data = substr(inline_data, 1, length(inline_data) - 1)"
                " WHERE blob_id = ?",
                blob,
            )
        blob = rng.choice(r["blob"])
        add("blob_digest", "UPDATE blob SET digest = ? WHERE blob_id = ?", hexd, blob)
        add("blob_size", "UPDATE blob SET size = size + 1 WHERE blob_id = ?", blob)
        if r["chunked"]:
            cb = rng.choice(r["chunked"])
            swap = "UPDATE blob_chunk SET seq = ? WHERE blob_id = ? AND seq = ?"
            add_many(
                "chunk_list_swap",
                (swap, [1_000_000, cb, 0]),
                (swap, [0, cb, 1]),
                (swap, [1, cb, 1_000_000]),
            )
            add(
                "chunk_list_retarget",
                "UPDATE blob_chunk SET chunk_id = ? WHERE blob_id = ? AND seq = 0",
                rng.choice(r["chunk"]),
                cb,
            )
            add(
                "chunk_list_drop",
                "DELETE FROM blob_chunk WHERE blob_id = ?"
                " AND seq = (SELECT max(seq) FROM blob_chunk WHERE blob_id = ?)",
                cb,
                cb,
            )
            add(
                "chunk_list_digest",
                "UPDATE blob SET chunk_list_digest = ? WHERE blob_id = ?",
                hexd,
                cb,
            )
            add(
                "chunk_count", "UPDATE blob SET chunk_count = chunk_count - 1 WHERE blob_id = ?", cb
            )
        cseq, cid, nsid = rng.choice(r["ids"])
        others = [x for x in r["ids"] if x[0] != cseq]
        oseq, oid, onsid = rng.choice(others)
        same_ns = [x for x in others if x[2] == nsid] or others
        add(
            "manifest_metadata",
            "UPDATE checkpoint SET metadata = ? WHERE seq = ?",
            json.dumps({"turn": rng.randrange(99)}, separators=(",", ":")),
            cseq,
        )
        add(
            "manifest_metadata_not_json",
            "UPDATE checkpoint SET metadata = '{\"turn\":' WHERE seq = ?",
            cseq,
        )
        add(
            "manifest_metadata_not_object",
            "UPDATE checkpoint SET metadata = '[1,2]' WHERE seq = ?",
            cseq,
        )
        add(
            "manifest_metadata_bad_utf8",
            "UPDATE checkpoint SET metadata = CAST(CAST(metadata AS BLOB) || x'ff' AS TEXT)"
            " WHERE seq = ?",
            cseq,
        )
        add(
            "manifest_parent_same_ns",
            "UPDATE checkpoint SET parent_id = ? WHERE seq = ?",
            rng.choice(same_ns)[1],
            cseq,
        )
        add(
            "manifest_parent_other_ns",
            "UPDATE checkpoint SET parent_id = ? WHERE seq = ?",
            oid,
            cseq,
        )
        add(
            "manifest_parent_random",
            "UPDATE checkpoint SET parent_id = ? WHERE seq = ?",
            hexd,
            cseq,
        )
        add("manifest_parent_null", "UPDATE checkpoint SET parent_id = NULL WHERE seq = ?", cseq)
        add(
            "manifest_generation",
            "UPDATE checkpoint SET generation = ? WHERE seq = ?",
            rng.choice([1, 2, 50]),
            cseq,
        )
        add(
            "manifest_namespace",
            "UPDATE checkpoint SET namespace_id = ? WHERE seq = ?",
            onsid,
            cseq,
        )
        add(
            "manifest_entry_count",
            "UPDATE checkpoint SET entry_count = entry_count + 1 WHERE seq = ?",
            cseq,
        )
        add("manifest_id", "UPDATE checkpoint SET id = ? WHERE seq = ?", hexd, cseq)
        add(
            "manifest_id_bad_utf8",
            "UPDATE checkpoint SET id = CAST(substr(CAST(id AS BLOB), 1, 63) || x'e9' AS TEXT)"
            " WHERE seq = ?",
            cseq,
        )
        add_many(
            "manifest_swap_ids",
            ("UPDATE checkpoint SET id = ? WHERE seq = ?", [hexd, cseq]),
            ("UPDATE checkpoint SET id = ? WHERE seq = ?", [cid, oseq]),
            ("UPDATE checkpoint SET id = ? WHERE seq = ?", [oid, cseq]),
        )
        pns = rng.choice(r["pointer"])
        add(
            "pointer_current",
            "UPDATE pointer SET current_seq = ? WHERE namespace_id = ?",
            oseq,
            pns,
        )
        add(
            "pointer_fallback",
            "UPDATE pointer SET fallback_seq = ? WHERE namespace_id = ?",
            oseq,
            pns,
        )
        add(
            "pointer_revision",
            "UPDATE pointer SET revision = revision + 1 WHERE namespace_id = ?",
            pns,
        )
        add("pointer_digest", "UPDATE pointer SET digest = ? WHERE namespace_id = ?", hexd, pns)
        add("pointer_delete", "DELETE FROM pointer WHERE namespace_id = ?", pns)
        hns, hrev = rng.choice(r["history"])
        add(
            "history_current",
            "UPDATE pointer_history SET current_id = ? WHERE namespace_id = ? AND revision = ?",
            oid,
            hns,
            hrev,
        )
        add(
            "history_delete",
            "DELETE FROM pointer_history WHERE namespace_id = ? AND revision = ?",
            hns,
            hrev,
        )
        (ns1, name1), (ns2, name2) = rng.sample(r["namespace"], 2)
        add_many(
            "namespace_swap_names",
            ("UPDATE namespace SET name = ? WHERE namespace_id = ?", [hexd, ns1]),
            ("UPDATE namespace SET name = ? WHERE namespace_id = ?", [name1, ns2]),
            ("UPDATE namespace SET name = ? WHERE namespace_id = ?", [name2, ns1]),
        )
        add(
            "namespace_bad_utf8",
            "UPDATE namespace SET name = CAST(CAST(name AS BLOB) || x'c3' AS TEXT)"
            " WHERE namespace_id = ?",
            ns1,
        )
        if r["receipt"]:
            add(
                "receipt_body",
                "UPDATE receipt SET body = '{\"ok\":true}' WHERE receipt_id = ?",
                rng.choice(r["receipt"]),
            )
        add(
            "setting_chunk_size",
            "UPDATE setting SET value = ? WHERE key = 'chunk_size'",
            rng.choice(["1", "x", "-5", ""]),
        )
        kind, statements = rng.choice(choices)
        return {
            "kind": f"row_{kind}",
            "target": kind.split("_")[0],
            "ops": [{"op": "sql", "statements": statements}],
        }

    # -- format 3: packed entries, blob_ref, labels, seq_high_water -------------------------

    def format3_case(self, rng: random.Random) -> dict[str, Any]:
        """Damage to what storage format 3 added: a checkpoint's packed ``entries`` (one
        element, found by name, edited; the text flipped, cut, replaced), the ``blob_ref``
        rows GC trusts, the ``label`` column and its unique index, and ``seq_high_water``."""
        r = self.rows
        choices: list[tuple[str, str, list[tuple[str, list[Any]]]]] = []

        def add(kind: str, target: str, sql: str, *params: Any) -> None:
            choices.append((kind, target, [(sql, list(params))]))

        seq, name = rng.choice(r["entry"])
        other_seq = rng.choice([s for s in r["checkpoint"] if s != seq])
        # Each element case edits one element of the JSON array, found by name (?2), in the
        # row of seq ?1.
        packed = "UPDATE checkpoint SET entries = {} WHERE seq = ?1"
        element = [seq, name]
        add(
            "entry_retarget",
            "entries",
            packed.format(f"json_replace(entries, {_ELEMENT} || '[1]', ?3)"),
            *element,
            rng.choice(r["blob"]),
        )
        add(
            "entry_blob_missing",
            "entries",
            packed.format(f"json_replace(entries, {_ELEMENT} || '[1]', ?3)"),
            *element,
            max(r["blob"]) + rng.randrange(1, 1000),
        )
        add(
            "entry_blob_id_text",  # "7": the join with blob still matches (numeric affinity)
            "entries",
            packed.format(
                f"json_replace(entries, {_ELEMENT} || '[1]',"
                f" CAST(json_extract(entries, {_ELEMENT} || '[1]') AS TEXT))"
            ),
            *element,
        )
        add(
            "entry_blob_id_real",  # 7.0: equal to 7 in SQL
            "entries",
            packed.format(
                f"json_replace(entries, {_ELEMENT} || '[1]',"
                f" json_extract(entries, {_ELEMENT} || '[1]') + 0.0)"
            ),
            *element,
        )
        add(
            "entry_rename",
            "entries",
            packed.format(f"json_replace(entries, {_ELEMENT} || '[0]', ?2 || 'x')"),
            *element,
        )
        add(
            "entry_delete",
            "entries",
            packed.format(f"json_remove(entries, {_ELEMENT})"),
            *element,
        )
        add(
            "entry_insert",
            "entries",
            packed.format("json_insert(entries, '$[#]', json_array('extra', ?2))"),
            seq,
            rng.choice(r["blob"]),
        )
        add(
            "entry_duplicate",
            "entries",
            packed.format(f"json_insert(entries, '$[#]', json(json_extract(entries, {_ELEMENT})))"),
            *element,
        )
        add(
            "entry_short",  # [name]: no blob id
            "entries",
            packed.format(f"json_replace(entries, {_ELEMENT}, json_array(?2))"),
            *element,
        )
        # Trailing nulls are not stored ([name, blob_id] when neither is set): json_set adds.
        add(
            "entry_media_type",
            "entries",
            packed.format(f"json_set(entries, {_ELEMENT} || '[2]', 'application/x-evil')"),
            *element,
        )
        add(
            "entry_schema_pin",
            "entries",
            packed.format(
                f"json_set(entries, {_ELEMENT} || '[2]',"
                f" json_extract(entries, {_ELEMENT} || '[2]'), {_ELEMENT} || '[3]', 'evil/v9')"
            ),
            *element,
        )
        add(
            "entry_extra_field",
            "entries",
            packed.format(
                f"json_set(entries, {_ELEMENT} || '[2]',"
                f" json_extract(entries, {_ELEMENT} || '[2]'), {_ELEMENT} || '[3]',"
                f" json_extract(entries, {_ELEMENT} || '[3]'), {_ELEMENT} || '[4]', 'x')"
            ),
            *element,
        )
        add(
            "entry_name_bad_utf8",
            "entries",
            packed.format(
                "CAST(replace(CAST(entries AS BLOB), CAST(json_quote(?2) AS BLOB),"
                " CAST(json_quote(?2) AS BLOB) || x'ff') AS TEXT)"
            ),
            *element,
        )
        add(
            "entries_flip",
            "entries",
            packed.format("CAST(?2 AS TEXT)"),
            seq,
            {"flip_text": ["checkpoint", "entries", "seq", seq, rng.randrange(1 << 16),
                           1 << rng.randrange(8)]},
        )  # fmt: skip
        add(
            "entries_bad_utf8",
            "entries",
            packed.format(
                "CAST(substr(CAST(entries AS BLOB), 1, ?2) || x'c3'"
                " || substr(CAST(entries AS BLOB), ?2 + 1) AS TEXT)"
            ),
            seq,
            rng.randrange(1, 40),
        )
        add(
            "entries_cut",  # not JSON any more
            "entries",
            packed.format("substr(entries, 1, max(1, length(entries) - ?2))"),
            seq,
            rng.randrange(1, 30),
        )
        add(
            "entries_replaced",
            "entries",
            packed.format("?2"),
            seq,
            rng.choice(["[]", "{}", '"x"', "null", "[1,2]", "[[]]", "[null]", '[["a",1,2,3]]']),
        )
        add("entries_null", "entries", packed.format("NULL"), seq)  # reads as "not moved yet"
        add(
            "entries_unsorted",
            "entries",
            packed.format(
                "(SELECT json_group_array(json(value)) FROM"
                " (SELECT value FROM json_each(entries) ORDER BY key DESC))"
            ),
            seq,
        )
        add(
            "entries_of_another_row",
            "entries",
            packed.format("(SELECT entries FROM checkpoint WHERE seq = ?2)"),
            seq,
            other_seq,
        )
        add(
            "entry_row_beside_packed",  # a format-2 entry row for a packed checkpoint
            "entries",
            "INSERT INTO entry (checkpoint_seq, name, blob_id) VALUES (?, 'ghost', ?)",
            seq,
            rng.choice(r["blob"]),
        )
        # blob_ref: the rows GC trusts to tell that a blob is still used.
        ref_blob, ref_seq = rng.choice(r["blob_ref"])
        refs = set(map(tuple, r["blob_ref"]))
        stray = [(b, c) for b in r["blob"] for c in r["checkpoint"] if (b, c) not in refs]
        one_ref = "WHERE blob_id = ?1 AND checkpoint_seq = ?2"
        add("blob_ref_delete", "blob_ref", f"DELETE FROM blob_ref {one_ref}", ref_blob, ref_seq)
        add(
            "blob_ref_delete_blob",  # every row of a blob that several checkpoints may use
            "blob_ref",
            "DELETE FROM blob_ref WHERE blob_id = ?",
            ref_blob,
        )
        add(
            "blob_ref_stray",
            "blob_ref",
            "INSERT INTO blob_ref (blob_id, checkpoint_seq) VALUES (?, ?)",
            *rng.choice(stray),
        )
        add(
            "blob_ref_no_checkpoint",
            "blob_ref",
            "INSERT INTO blob_ref (blob_id, checkpoint_seq) VALUES (?, ?)",
            rng.choice(r["blob"]),
            max(r["checkpoint"]) + rng.randrange(1, 1000),
        )
        add(
            "blob_ref_retarget_blob",
            "blob_ref",
            f"UPDATE OR IGNORE blob_ref SET blob_id = ?3 {one_ref}",
            ref_blob,
            ref_seq,
            rng.choice(r["blob"]),
        )
        add(
            "blob_ref_retarget_checkpoint",
            "blob_ref",
            f"UPDATE OR IGNORE blob_ref SET checkpoint_seq = ?3 {one_ref}",
            ref_blob,
            ref_seq,
            rng.choice(r["checkpoint"]),
        )
        # label: the caller's own name of a checkpoint, unique per namespace (an index).
        lseq, label, lns = rng.choice(r["label"])
        same_ns = [x for x in r["label"] if x[2] == lns and x[0] != lseq]
        other_ns = [x for x in r["label"] if x[2] != lns]
        set_label = "UPDATE checkpoint SET label = ? WHERE seq = ?"
        if same_ns:
            add("label_taken", "label", set_label, rng.choice(same_ns)[1], lseq)
            oseq, olabel, _ = rng.choice(same_ns)
            choices.append(
                (
                    "label_swap",
                    "label",
                    [
                        (set_label, ["swapping", lseq]),
                        (set_label, [label, oseq]),
                        (set_label, [olabel, lseq]),
                    ],
                )
            )
        if other_ns:
            add("label_of_another_namespace", "label", set_label, rng.choice(other_ns)[1], lseq)
        add("label_changed", "label", set_label, f"{label}-renamed", lseq)
        add("label_cleared", "label", "UPDATE checkpoint SET label = NULL WHERE seq = ?", lseq)
        add(
            "label_bad_utf8",
            "label",
            "UPDATE checkpoint SET label = CAST(CAST(label AS BLOB) || x'ff' AS TEXT)"
            " WHERE seq = ?",
            lseq,
        )
        if r["unlabelled"]:
            add("label_added", "label", set_label, "added-label", rng.choice(r["unlabelled"]))
        # seq_high_water: a seq is never given twice while it holds.
        mark = "UPDATE seq_high_water SET seq = ? WHERE name = 'checkpoint'"
        add(
            "seq_high_water_lowered",
            "seq_high_water",
            mark,
            rng.choice([0, 1, max(r["checkpoint"])]),
        )
        add("seq_high_water_deleted", "seq_high_water", "DELETE FROM seq_high_water")
        add("seq_high_water_max", "seq_high_water", mark, (1 << 63) - 1)
        add("seq_high_water_raised", "seq_high_water", mark, max(r["checkpoint"]) + 10_000)
        kind, target, statements = rng.choice(choices)
        return {
            "kind": f"row_{kind}",
            "target": target,
            "ops": [{"op": "sql", "statements": statements}],
        }

    # -- the encrypted key scope ------------------------------------------------------------

    def sealed_case(self, rng: random.Random) -> dict[str, Any]:
        """Damage to a sealed chunk or inline blob, a sealed record's bookkeeping, or the
        key_scope row (the wrapped data key and what the wrap is bound to)."""
        r = self.rows
        hexd = "".join(rng.choice("0123456789abcdef") for _ in range(64))
        choices: list[tuple[str, str, list[tuple[str, list[Any]]]]] = []

        def add(kind: str, target: str, sql: str, *params: Any) -> None:
            choices.append((kind, target, [(sql, list(params))]))

        chunk, size = rng.choice(r["sealed_chunk"])
        other = rng.choice([c for c, _ in r["sealed_chunk"] if c != chunk])
        add(
            "sealed_chunk_flip",
            "sealed_chunk",
            "UPDATE chunk_data SET data = ?1 WHERE chunk_id = ?2",
            {"flip_blob": ["chunk_data", "data", "chunk_id", chunk, rng.randrange(size)]},
            chunk,
        )
        add(
            "sealed_chunk_moved",  # another sealed record of the scope in this row
            "sealed_chunk",
            "UPDATE chunk_data SET data = (SELECT data FROM chunk_data WHERE chunk_id = ?)"
            " WHERE chunk_id = ?",
            other,
            chunk,
        )
        add(
            "sealed_chunk_truncate",
            "sealed_chunk",
            "UPDATE chunk_data SET data = substr(data, 1, length(data) - 1) WHERE chunk_id = ?",
            chunk,
        )
        add(
            "sealed_chunk_sealed_digest",
            "sealed_chunk",
            "UPDATE chunk SET sealed_digest = unhex(?) WHERE chunk_id = ?",
            hexd,
            chunk,
        )
        add(
            "sealed_chunk_claims_plaintext",
            "sealed_chunk",
            "UPDATE chunk SET scope_id = NULL, sealed_digest = NULL WHERE chunk_id = ?",
            chunk,
        )
        add(
            "sealed_chunk_codec_unsealed",
            "sealed_chunk",
            "UPDATE chunk SET codec = codec & 255 WHERE chunk_id = ?",
            chunk,
        )
        add(
            "sealed_chunk_digest",
            "sealed_chunk",
            "UPDATE chunk SET digest = ? WHERE chunk_id = ?",
            hexd,
            chunk,
        )
        add(
            "plain_chunk_claims_sealed",
            "sealed_chunk",
            "UPDATE chunk SET scope_id = ? WHERE chunk_id = ?",
            rng.choice(r["scope"]),
            rng.choice(r["plain_chunk"]),
        )
        if r["sealed_inline"]:
            blob = rng.choice(r["sealed_inline"])
            add(
                "sealed_inline_flip",
                "sealed_inline",
                "UPDATE blob SET inline_data = ?1 WHERE blob_id = ?2",
                {"flip_blob": ["blob", "inline_data", "blob_id", blob, None]},
                blob,
            )
            others = [b for b in r["sealed_inline"] if b != blob]
            if others:
                add(
                    "sealed_inline_moved",
                    "sealed_inline",
                    "UPDATE blob SET inline_data = (SELECT inline_data FROM blob WHERE"
                    " blob_id = ?) WHERE blob_id = ?",
                    rng.choice(others),
                    blob,
                )
            add(
                "sealed_inline_claims_plaintext",
                "sealed_inline",
                "UPDATE blob SET scope_id = NULL, sealed_digest = NULL WHERE blob_id = ?",
                blob,
            )
        blob = rng.choice(r["sealed_blob"])
        add(
            "sealed_blob_sealed_digest",
            "sealed_inline",
            "UPDATE blob SET sealed_digest = unhex(?) WHERE blob_id = ?",
            hexd,
            blob,
        )
        seq, name = rng.choice(r["sealed_entry"])
        add(
            "sealed_entry_to_plain_blob",
            "sealed_entry",
            f"UPDATE checkpoint SET entries = json_replace(entries, {_ELEMENT} || '[1]', ?3)"
            " WHERE seq = ?1",
            seq,
            name,
            rng.choice(r["plain_blob"]),
        )
        add(
            "sealed_entry_to_other_sealed_blob",
            "sealed_entry",
            f"UPDATE checkpoint SET entries = json_replace(entries, {_ELEMENT} || '[1]', ?3)"
            " WHERE seq = ?1",
            seq,
            name,
            rng.choice(r["sealed_blob"]),
        )
        add(
            "sealed_entries_flip",
            "sealed_entry",
            "UPDATE checkpoint SET entries = CAST(?2 AS TEXT) WHERE seq = ?1",
            seq,
            {"flip_text": ["checkpoint", "entries", "seq", seq, rng.randrange(1 << 16),
                           1 << rng.randrange(8)]},
        )  # fmt: skip
        ref_blob, ref_seq = rng.choice(r["sealed_blob_ref"])
        add(
            "sealed_blob_ref_delete",
            "sealed_entry",
            "DELETE FROM blob_ref WHERE blob_id = ? AND checkpoint_seq = ?",
            ref_blob,
            ref_seq,
        )
        add(
            "namespace_scope_cleared",
            "sealed_namespace",
            "UPDATE namespace SET scope_id = NULL WHERE namespace_id = ?",
            rng.choice(r["sealed_namespace"]),
        )
        scope = rng.choice(r["scope"])
        add(
            "key_scope_wrapped_key_flip",
            "key_scope",
            "UPDATE key_scope SET wrapped_key = ?1 WHERE scope_id = ?2",
            {"flip_blob": ["key_scope", "wrapped_key", "scope_id", scope, rng.randrange(60)]},
            scope,
        )
        add(
            "key_scope_wrapped_key_truncate",
            "key_scope",
            "UPDATE key_scope SET wrapped_key = substr(wrapped_key, 1, 59) WHERE scope_id = ?",
            scope,
        )
        add(
            "key_scope_generation",
            "key_scope",
            "UPDATE key_scope SET key_generation = ? WHERE scope_id = ?",
            rng.choice([1, 3, 7]),
            scope,
        )
        add(
            "key_scope_prefix",
            "key_scope",
            "UPDATE key_scope SET prefix = ? WHERE scope_id = ?",
            rng.choice(["sealeD/", "sealed/chat", "other/"]),
            scope,
        )
        add(
            "key_scope_key_id",
            "key_scope",
            "UPDATE key_scope SET key_id = ? WHERE scope_id = ?",
            rng.choice(["t", "s ", "S"]),
            scope,
        )
        add(
            "key_scope_algorithm",
            "key_scope",
            "UPDATE key_scope SET algorithm = 'aes128gcm-unknown-v9' WHERE scope_id = ?",
            scope,
        )
        add(
            "key_scope_scope_id",
            "key_scope",
            "UPDATE key_scope SET scope_id = scope_id + 10 WHERE scope_id = ?",
            scope,
        )
        kind, target, statements = rng.choice(choices)
        return {
            "kind": f"row_{kind}",
            "target": target,
            "ops": [{"op": "sql", "statements": statements}],
        }

    def draw(self, rng: random.Random) -> dict[str, Any]:
        families = ["page", "header", "truncate", "row", "format3", "sealed"] + (
            ["wal"] if self.frames else []
        )
        weights = [10, 1, 0.5, 6, 6, 3] + ([5] if self.frames else [])
        family = rng.choices(families, weights)[0]
        return {
            "page": self.page_case,
            "header": self.header_case,
            "truncate": self.truncate_case,
            "row": self.row_case,
            "format3": self.format3_case,
            "sealed": self.sealed_case,
            "wal": self.wal_case,
        }[family](rng)


def make_cases(root: Path, meta: dict[str, Any], count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` cases, half per variant, reproducible from ``seed``."""
    rng = random.Random(seed)
    makers = {v: CaseMaker(root, meta, v) for v in VARIANTS}
    cases = []
    for index in range(count):
        variant = VARIANTS[index % len(VARIANTS)]
        case = makers[variant].draw(rng)
        case.update(index=index, variant=variant)
        cases.append(case)
    return cases


# ---------------------------------------------------------------------------------------
# Applying a case (in the worker)


def _flip_text_param(conn: apsw.Connection, spec: list[Any]) -> bytes:
    """The bytes of a TEXT column with one bit flipped (offset taken modulo its length)."""
    table, column, key, rowid, offset, mask = spec
    row = conn.execute(
        f"SELECT CAST({column} AS BLOB) FROM {table} WHERE {key} = ?", (rowid,)
    ).fetchone()
    assert row is not None and isinstance(row[0], bytes | None)
    data = bytearray(row[0] or b"\x00")
    data[offset % len(data)] ^= mask
    return bytes(data)


def _param(conn: apsw.Connection, raw: Any) -> Any:
    """A statement parameter: as given, or computed from the row it damages."""
    if not isinstance(raw, dict):
        return raw
    if "flip_text" in raw:
        return _flip_text_param(conn, raw["flip_text"])
    return _flip_blob_param(conn, raw["flip_blob"])


def _flip_blob_param(conn: apsw.Connection, spec: list[Any]) -> bytes:
    table, column, key, rowid, offset = spec
    (value,) = conn.execute(f"SELECT {column} FROM {table} WHERE {key} = ?", (rowid,)).fetchone()
    data = bytearray(value)
    if not data:
        return b"\x00"
    pos = (offset if offset is not None else len(data) // 2) % len(data)
    data[pos] ^= 0x10
    return bytes(data)


def _content_digest(conn: apsw.Connection) -> str:
    """Digest of every row of every table (to tell a real change from a no-op UPDATE)."""
    h = hashlib.sha256()
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")]
    for table in sorted(tables):
        columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        hexed = ", ".join(f'hex("{c}")' for c in columns)  # text that is not UTF-8, too
        h.update(table.encode())
        for row in conn.execute(f'SELECT {hexed} FROM "{table}" ORDER BY 1'):
            h.update(repr(row).encode())
    return h.hexdigest()


def apply_case(case: dict[str, Any], directory: Path) -> None:
    db = directory / DB_NAME
    wal = directory / f"{DB_NAME}-wal"
    for op in case["ops"]:
        target = db if op.get("file", "db") == "db" else wal
        if op["op"] == "xor":
            with open(target, "r+b") as fh:
                fh.seek(op["offset"])
                byte = fh.read(1)
                fh.seek(op["offset"])
                fh.write(bytes([byte[0] ^ op["mask"]]))
        elif op["op"] == "write":
            with open(target, "r+b") as fh:
                fh.seek(op["offset"])
                fh.write(bytes.fromhex(op["hex"]))
        elif op["op"] == "truncate":
            os.truncate(target, op["size"])
        elif op["op"] == "wal_resum":
            wal_resum(wal)
        elif op["op"] == "sql":
            conn = apsw.Connection(str(db))
            try:
                # Keep a WAL variant's frames in the WAL (no checkpoint when closing).
                conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
                before = _content_digest(conn)
                with conn:
                    for sql, raw in op["statements"]:
                        params = [_param(conn, p) for p in raw]
                        conn.execute(sql, params).fetchall()
                # An UPDATE that wrote the value already there changed nothing: not a case.
                case["rows_changed"] = int(_content_digest(conn) != before)
            finally:
                conn.close()
        else:  # pragma: no cover
            raise ValueError(op)


# ---------------------------------------------------------------------------------------
# Checking a case (in the worker)


class Observer:
    """Runs every check against one damaged copy; collects observations."""

    def __init__(
        self,
        expected: dict[str, Any],
        blobs: Path,
        directory: Path,
        rotation: int = 0,
        high_water: int = 0,
    ) -> None:
        #: Which streaming API and which namespace's checkout this case exercises (all of
        #: them across consecutive cases; one each per case keeps a case fast).
        self.rotation = rotation
        self.exp = expected["checkpoints"]
        self.namespaces = expected["namespaces"]
        self.blobs = blobs
        self.dir = directory
        #: The highest seq the pristine file ever gave (its seq_high_water).
        self.high_water = high_water
        self.obs: dict[str, Any] = {
            "open": None,
            "reads_ok": 0,
            "reads_refused": 0,
            "gc_reads_ok": 0,
            "gc_reads_refused": 0,
            "batch_reads_ok": 0,
            "batch_reads_refused": 0,
            "labels_checked": 0,
            "labels_missing": 0,
            "label_moved": [],
            "gc_lost": [],
            "absent": 0,
            "wrong": [],
            "wrong_checkpoint": [],
            "untyped": [],
            "refusals": Counter(),
            "sealed_refusals": Counter(),  # codes of refused reads in the encrypted scope
            "fallback": {},
            "verify": None,
        }
        self.intact: dict[str, bool] = {}
        self.present: dict[str, bool] = {}

    def expected_bytes(self, digest: str) -> bytes:
        return (self.blobs / digest).read_bytes()

    @contextlib.contextmanager
    def guard(
        self, what: str, refused: list[bool] | None = None, sealed: bool = False
    ) -> Iterator[None]:
        """Typed errors are allowed (counted); anything else is an untyped failure.
        ``sealed``: a read in the encrypted scope (its refusal codes are counted apart)."""
        try:
            yield
        except errors.CkptdbError as exc:
            if not exc.code or not str(exc):
                self.obs["untyped"].append(f"{what}: CkptdbError without code/message {exc!r}")
            self.obs["refusals"][exc.code] += 1
            if sealed:
                self.obs["sealed_refusals"][exc.code] += 1
            if refused is not None:
                refused.append(True)
        except Exception as exc:
            self.untyped(what, exc)
            if refused is not None:
                refused.append(True)

    def untyped(self, what: str, exc: BaseException) -> None:
        """Record an exception that is not a CkptdbError, with where ckptdb raised it."""
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/ckptdb/" in f.filename]
        where = "?"
        if frames:
            f = frames[-1]
            where = f"ckptdb/{f.filename.rsplit('/ckptdb/', 1)[1]}:{f.lineno} {f.name}"
        self.obs["untyped"].append(f"{what}: {type(exc).__name__} [{where}]: {exc}"[:500])
        self.obs.setdefault("untyped_sites", []).append(f"{type(exc).__name__} at {where}")

    def wrong(self, message: str, kind: str = "bytes") -> None:
        """Record wrong data handed out: ``bytes`` (bytes or a manifest that differ from
        the record of the checkpoint the handle claims to be) or ``checkpoint`` (a
        reference, CURRENT, a load or a checkout resolved to a checkpoint that is not of
        the namespace asked for, or not on its lineage)."""
        self.obs["wrong" if kind == "bytes" else "wrong_checkpoint"].append(message[:400])

    def run(self) -> dict[str, Any]:
        path = self.dir / DB_NAME
        db = None
        try:
            db = ckptdb.open(path, keys=KEYS)
            self.obs["open"] = "ok"
        except errors.CkptdbError as exc:
            self.obs["open"] = f"refused:{exc.code}"
        except Exception as exc:
            self.obs["open"] = "untyped"
            self.untyped("open", exc)
        if db is None:
            return self.finish()
        try:
            # A changed algorithm name is what a newer ckptdb's file holds: SchemaError.
            names = db.query("SELECT algorithm FROM key_scopes").rows
            self.obs["algorithm_changed"] = any(r[0] != ALGORITHM for r in names)
        except errors.CkptdbError:
            pass  # the damage shows in the reads below
        try:
            self.check_reads(db)
            self.check_batch_reads(db)
            self.check_labels(db)
            self.check_namespaces(db)
            self.check_informational(db)
            self.check_verify(db)
            self.check_gc(db)
            self.check_write(db)  # last: it may repair damaged chunks through deduplication
        finally:
            with self.guard("close"):
                db.close()
        return self.finish()

    def finish(self) -> dict[str, Any]:
        self.obs["refusals"] = dict(self.obs["refusals"])
        self.obs["sealed_refusals"] = dict(self.obs["sealed_refusals"])
        return self.obs

    # -- reads --------------------------------------------------------------------------

    def check_checkpoint(
        self,
        cp: ckptdb.Checkpoint,
        cid: str,
        where: str,
        read_bytes: bool = True,
        tally: str = "reads",
    ) -> bool:
        """Compare a checkpoint handle with the record. Returns True when every entry read
        back exactly; wrong bytes or a wrong manifest are recorded. Without ``read_bytes``
        only the manifest is compared (the bytes were read through another handle).
        ``tally``: the counters of reads that succeeded or were refused (``reads_ok``...)."""
        exp = self.exp[cid]
        sealed = exp["namespace"].startswith(SEALED_PREFIX)
        if cp.id != cid:
            self.wrong(
                f"{where}: asked for {cid[:12]}, got a handle for {cp.id[:12]}", kind="checkpoint"
            )
            return False
        if cp.namespace != exp["namespace"] or cp.parent_id != exp["parent"]:
            self.wrong(f"{where}: manifest of {cid[:12]} differs (namespace/parent)")
        if cp.generation != exp["generation"]:
            self.wrong(f"{where}: generation of {cid[:12]} differs")
        names = set(cp.entries)
        if names != set(exp["entries"]):
            self.wrong(f"{where}: entries of {cid[:12]} differ: {sorted(names)}")
            return False
        meta_failed: list[bool] = []
        with self.guard(f"{where}: metadata", meta_failed):
            if cp.metadata != exp["metadata"]:
                self.wrong(f"{where}: metadata of {cid[:12]} differs")
        intact = not meta_failed
        for name, info in exp["entries"].items():
            entry = cp.entries[name]
            if entry.digest != info.get("address", info["digest"]) or entry.size != info["size"]:
                self.wrong(f"{where}: entry info {name!r} of {cid[:12]} differs")
            if not read_bytes:
                continue
            expected = self.expected_bytes(info["digest"])
            failed: list[bool] = []
            with self.guard(f"{where}: read {cid[:12]}/{name}", failed, sealed):
                data = cp.read(name)
                if data != expected:
                    self.wrong(f"{where}: read {cid[:12]}/{name}: {len(data)} wrong bytes")
                    failed.append(True)
            if len(expected) > CHUNK and self.rotation % 2 == 0:
                got = bytearray()
                with self.guard(f"{where}: stream {cid[:12]}/{name}", failed, sealed):
                    for piece in cp.iter_bytes(name):
                        got += piece
                        if not expected.startswith(got):
                            self.wrong(f"{where}: stream {cid[:12]}/{name}: wrong piece")
                            break
                    else:
                        if bytes(got) != expected:
                            self.wrong(f"{where}: stream {cid[:12]}/{name}: short")
            if len(expected) > CHUNK and self.rotation % 2 == 1:
                with (
                    self.guard(f"{where}: open {cid[:12]}/{name}", failed, sealed),
                    cp.open(name) as fh,
                ):
                    head = fh.read(1000)
                    if not expected.startswith(head):
                        self.wrong(f"{where}: open {cid[:12]}/{name}: wrong bytes")
                    rest = fh.read()
                    if head + rest != expected:
                        self.wrong(f"{where}: open {cid[:12]}/{name}: wrong bytes")
            if failed:
                intact = False
                self.obs[f"{tally}_refused"] += 1
            else:
                self.obs[f"{tally}_ok"] += 1
        return intact

    def check_reads(self, db: ckptdb.Database) -> None:
        for cid in self.exp:
            cp = None
            try:
                cp = db.get(cid)
            except errors.CheckpointNotFoundError:
                self.obs["absent"] += 1
                self.present[cid] = False
                self.intact[cid] = False
                continue
            except errors.CkptdbError as exc:
                self.obs["refusals"][exc.code] += 1
                if self.exp[cid]["namespace"].startswith(SEALED_PREFIX):
                    self.obs["sealed_refusals"][exc.code] += 1
                self.obs["reads_refused"] += 1
            except Exception as exc:
                self.untyped(f"get {cid[:12]}", exc)
                self.obs["reads_refused"] += 1
            self.present[cid] = True
            self.intact[cid] = cp is not None and self.check_checkpoint(cp, cid, "get")

    def check_batch_reads(self, db: ckptdb.Database) -> None:
        """``get_many`` of every recorded checkpoint with every entry prefetched (the small
        ones come with their manifests, verified in that statement), each compared with the
        record entry by entry (``Checkpoint.read`` hands out the prefetched bytes), then
        ``read_many`` of all of them at once: right bytes or a typed error, never others."""
        names = sorted({n for exp in self.exp.values() for n in exp["entries"]})
        found: dict[str, ckptdb.Checkpoint] = {}
        with self.guard("get_many(prefetch)"):
            found = db.get_many(list(self.exp), prefetch=names)
        wanted: list[tuple[ckptdb.Checkpoint, str]] = []
        expected: list[bytes] = []
        for cid, cp in found.items():
            if self.check_checkpoint(cp, cid, "get_many", tally="batch_reads"):
                for name, info in self.exp[cid]["entries"].items():
                    wanted.append((cp, name))
                    expected.append(self.expected_bytes(info["digest"]))
        with self.guard("read_many"):
            if db.read_many(wanted) != expected:
                self.wrong("read_many of prefetched checkpoints: wrong bytes")

    def check_labels(self, db: ckptdb.Database) -> None:
        """``get_labelled`` of every recorded label: the checkpoint committed with it, None
        (the label is gone) or a typed error. Another checkpoint of the namespace is
        recorded in ``label_moved`` (:func:`classify` decides whether the damage explains
        it); one of another namespace is a wrong checkpoint."""
        for cid, exp in self.exp.items():
            label, ns = exp.get("label"), exp["namespace"]
            if label is None:
                continue
            self.obs["labels_checked"] += 1
            with self.guard(f"get_labelled {ns} {label}", sealed=ns.startswith(SEALED_PREFIX)):
                cp = db.get_labelled(ns, label)
                if cp is None:
                    self.obs["labels_missing"] += 1
                elif cp.id not in self.exp or self.exp[cp.id]["namespace"] != ns:
                    self.wrong(
                        f"get_labelled({ns}, {label}) returned {cp.id[:12]}, not a checkpoint"
                        f" of {ns}",
                        kind="checkpoint",
                    )
                else:
                    if cp.id != cid:
                        self.obs["label_moved"].append(
                            f"get_labelled({ns}, {label}) returned {cp.id[:12]}, committed"
                            f" with label {self.exp[cp.id].get('label')!r}; {cid[:12]} was"
                        )
                    self.check_checkpoint(cp, cp.id, f"get_labelled({ns}, {label})", False)

    # -- namespaces, load, fallback, checkout ---------------------------------------------

    def lineage_from(self, cid: str) -> list[str]:
        out = []
        walk: str | None = cid
        while walk is not None and walk in self.exp and self.present.get(walk, False):
            out.append(walk)
            walk = self.exp[walk]["parent"]
        return out

    def check_namespaces(self, db: ckptdb.Database) -> None:
        for ns in self.namespaces:
            with self.guard(f"current {ns}"):
                cp = db.current(ns)
                if cp is not None:
                    if cp.id not in self.exp or self.exp[cp.id]["namespace"] != ns:
                        self.wrong(
                            f"current({ns}) returned {cp.id[:12]}, not a checkpoint of {ns}",
                            kind="checkpoint",
                        )
                    else:
                        self.check_checkpoint(cp, cp.id, f"current({ns})", read_bytes=False)
            with self.guard(f"load {ns}"):
                loaded = db.load(ns)
                if (
                    loaded.checkpoint.id not in self.exp
                    or self.exp[loaded.checkpoint.id]["namespace"] != ns
                ):
                    self.wrong(
                        f"load({ns}) returned a checkpoint that is not of {ns}", kind="checkpoint"
                    )
                elif not self.check_checkpoint(
                    loaded.checkpoint, loaded.checkpoint.id, f"load({ns})", read_bytes=False
                ):
                    self.wrong(
                        f"load({ns}) returned {loaded.checkpoint.id[:12]}, which does not read back"
                    )
            self.check_fallback(db, ns)
        names = sorted(self.namespaces)
        self.check_checkout(db, names[self.rotation % len(names)])

    def check_fallback(self, db: ckptdb.Database, ns: str) -> None:
        record: dict[str, Any] = {}
        self.obs["fallback"][ns] = record
        current: str | None = None
        with self.guard(f"pointer {ns}"):
            ptr = db.pointer(ns)
            current = ptr.current_id if ptr is not None else None
            if ptr is None:
                self.obs["lost"] = self.obs.get("lost", 0) + 1
        trusted = (
            current is not None and current in self.exp and self.exp[current]["namespace"] == ns
        )
        lineage = self.lineage_from(current) if trusted and current else []
        first_intact = next((c for c in lineage if self.intact.get(c)), None)
        record["expected"] = first_intact[:12] if first_intact else None
        try:
            result = db.load(ns, fallback=True)
        except errors.NoUsableCheckpointError:
            record["result"] = "no_usable"
            if first_intact is not None:
                record["status"] = "not_newest"
            return
        except errors.CkptdbError as exc:
            record["result"] = f"refused:{exc.code}"
            if first_intact is not None:
                record["status"] = "gave_up"
            return
        except Exception as exc:
            self.untyped(f"load {ns} fallback", exc)
            record["result"] = "untyped"
            return
        got = result.checkpoint.id
        record["result"] = got[:12]
        if got not in self.exp or self.exp[got]["namespace"] != ns:
            record["status"] = "wrong"
            self.wrong(
                f"fallback({ns}) returned {got[:12]} of another namespace or unknown",
                kind="checkpoint",
            )
            return
        if not self.check_checkpoint(result.checkpoint, got, f"fallback({ns})"):
            record["status"] = "inconsistent"
            self.wrong(f"fallback({ns}) returned {got[:12]}, which does not read back")
            return
        if not trusted:
            return
        if got not in lineage:
            record["status"] = "wrong"
            self.wrong(
                f"fallback({ns}) returned {got[:12]}, not an ancestor of CURRENT", kind="checkpoint"
            )
        elif got != first_intact and first_intact is None:
            # Direct reads (get by id) failed for every checkpoint -- e.g. a damaged index on
            # ids -- yet fallback found this one by scanning the table, and it read back
            # intact above: better than the reads, not a failure.
            record["status"] = "found_by_scan"
        elif got != first_intact:
            assert first_intact is not None
            if lineage.index(got) > lineage.index(first_intact):
                record["status"] = "not_newest"
            else:
                record["status"] = "inconsistent"
        elif (result.disposition == "exact") != (got == current):
            self.wrong(
                f"fallback({ns}): disposition {result.disposition} for {got[:12]}",
                kind="checkpoint",
            )

    def check_checkout(self, db: ckptdb.Database, ns: str) -> None:
        target = self.dir / "out" / ns.replace("/", "_")
        target.parent.mkdir(exist_ok=True)
        with self.guard(f"checkout {ns}"):
            result = db.checkout(f"{ns}@current", target, fallback=True)
            cid = result.checkpoint_id
            if cid not in self.exp or self.exp[cid]["namespace"] != ns:
                self.wrong(
                    f"checkout({ns}) wrote {cid[:12]}, not a checkpoint of {ns}", kind="checkpoint"
                )
                return
            written = {
                str(p.relative_to(target)): p.read_bytes() for p in target.rglob("*") if p.is_file()
            }
            want = {
                n: self.expected_bytes(i["digest"]) for n, i in self.exp[cid]["entries"].items()
            }
            if written != want:
                self.wrong(f"checkout({ns}) wrote files that differ from {cid[:12]}")
        leftovers = [p for p in target.parent.iterdir() if p.name.startswith(".")]
        if leftovers:
            self.wrong(f"checkout({ns}) left {leftovers}")

    def check_informational(self, db: ckptdb.Database) -> None:
        for ns in self.namespaces:
            with self.guard(f"lineage {ns}"):
                db.lineage(ns)
            with self.guard(f"history {ns}"):
                db.history(ns)
            for ref in (f"{ns}@current", f"{ns}@fallback", f"{ns}~1"):
                with self.guard(f"resolve {ref}"):
                    got = db.resolve(ref)
                    if got in self.exp and self.exp[got]["namespace"] != ns:
                        self.wrong(
                            f"resolve({ref}) gave {got[:12]} of another namespace",
                            kind="checkpoint",
                        )
        with self.guard("namespaces"):
            db.namespaces()
        with self.guard("pins"):
            db.pins()
        with self.guard("receipts"):
            db.receipts()
        with self.guard("stats"):
            db.stats()

    def check_gc(self, db: ckptdb.Database) -> None:
        """GC on the damaged file (keep the newest checkpoint of every namespace, no grace
        period): it completes or raises a typed error. Then every recorded checkpoint it
        kept is read again: the expected bytes or a typed error, never wrong bytes. A
        checkpoint that read back intact before GC and fails after it lost bytes to GC
        (``gc_lost``; a failure unless verify had reported damage first, see
        :func:`classify`); a refused read after GC must be reported by verify."""
        with self.guard("gc"):
            report = db.gc(ckptdb.RetentionPolicy(keep_last=1), grace=0)
            self.obs["gc"] = {
                "checkpoints": report.checkpoints_deleted,
                "blobs": report.blobs_deleted,
            }
        if "gc" not in self.obs:
            self.obs["gc"] = "refused"
            return
        kept: set[str] = set()
        with self.guard("existing after gc"):
            kept = db.existing(list(self.exp))
        for cid in sorted(kept):
            intact = False
            with self.guard(f"get {cid[:12]} after gc"):
                cp = db.get(cid)
                intact = self.check_checkpoint(cp, cid, "after gc", tally="gc_reads")
            if not intact and self.intact.get(cid):
                self.obs["gc_lost"].append(cid[:12])
        if self.obs["gc_reads_refused"]:
            try:
                after = db.verify()
                # A scope verify checked without its key counts as found (see check_verify).
                unkeyed = [k for k in after.sealed_only if k not in KEYS]
                self.obs["gc_verify"] = "ok" if after.ok and not unkeyed else "problems"
            except errors.CkptdbError as exc:
                self.obs["gc_verify"] = f"refused:{exc.code}"
            except Exception as exc:
                self.untyped("verify after gc", exc)

    def check_write(self, db: ckptdb.Database) -> None:
        """A commit on the damaged file: it succeeds and reads back, or raises a typed error
        (never wrong bytes, never a hang). It re-uses the bytes of a recorded chunked entry,
        so deduplication meets the damaged chunks (ckptdb rewrites a damaged chunk from
        the caller's verified bytes instead of inheriting it)."""
        big = max(
            (i for c in self.exp.values() for i in c["entries"].values()),
            key=lambda i: (i["size"], i["digest"]),
        )
        entries = {
            "probe.txt": b"written after the damage",
            "reused.bin": self.expected_bytes(big["digest"]),
        }
        with self.guard("write: commit"):
            try:
                ack = db.commit("campaign/probe", entries, metadata={"probe": True})
            except errors.CkptdbError as exc:
                self.obs["write_refused"] = exc.code
                raise
            cp = db.get(ack.checkpoint_id)
            for name, data in entries.items():
                if cp.read(name) != data:
                    self.wrong(f"write: {name} read back wrong after a commit on the damage")
            # A seq the pristine file gave once (to a checkpoint since deleted) given again.
            seq = db.query("SELECT seq FROM checkpoint WHERE id = ?", (ack.checkpoint_id,))
            self.obs["seq_reused"] = bool(seq.rows) and int(seq.rows[0][0]) <= self.high_water
        # The same into the encrypted scope, re-using its largest sealed entry's bytes.
        big = max(
            (
                i
                for c in self.exp.values()
                if c["namespace"].startswith(SEALED_PREFIX)
                for i in c["entries"].values()
            ),
            key=lambda i: (i["size"], i["digest"]),
        )
        entries = {
            "probe.txt": b"sealed, after the damage",
            "reused.bin": self.expected_bytes(big["digest"]),
        }
        with self.guard("write: sealed commit"):
            ack = db.commit("sealed/probe", entries, metadata={"probe": True})
            cp = db.get(ack.checkpoint_id)
            for name, data in entries.items():
                if cp.read(name) != data:
                    self.wrong(f"write: sealed {name} read back wrong after a commit on the damage")

    def check_verify(self, db: ckptdb.Database) -> None:
        try:
            report = db.verify()
        except errors.CkptdbError as exc:
            self.obs["verify"] = f"refused:{exc.code}"
            return
        except Exception as exc:
            self.untyped("verify", exc)
            self.obs["verify"] = "untyped"
            return
        self.obs["verify"] = "ok" if report.ok else "problems"
        self.obs["verify_codes"] = sorted({p.code for p in report.problems})
        # Scopes verify could check only without their key: with every key the pristine
        # file needs at hand, a key id listed here is one the damage made up.
        self.obs["verify_unkeyed"] = [k for k in report.sealed_only if k not in KEYS]


def classify(case: dict[str, Any], obs: dict[str, Any]) -> list[str]:
    """Outcome labels of one case: exactly one of refused/detected/benign/rolled_back/
    undetected/silent_loss, plus any failure labels."""
    labels = []
    if obs.get("crash"):
        return ["crash"]
    if obs.get("hang"):
        return ["hang"]
    if obs["wrong"]:
        labels.append("wrong_bytes")
    if obs.get("wrong_checkpoint"):
        labels.append("wrong_checkpoint")
    if obs["untyped"]:
        labels.append("untyped")
    allowed = SEALED_CODES | SEALED_CODES_ALSO.get(case["kind"], frozenset())
    if obs.get("algorithm_changed"):  # page damage that hit the algorithm name
        allowed |= {"schema_error"}
    if (
        case.get("target", "").startswith(("sealed_", "key_scope"))
        and set(obs.get("sealed_refusals", {})) - allowed
    ):
        labels.append("sealed_wrong_error")
    # A label edited in its row moves with the edit (labels are not part of the manifest);
    # any other damage that makes a label find another checkpoint is a wrong resolution.
    if (
        obs.get("label_moved")
        and not case["kind"].startswith("row_label_")
        and "wrong_checkpoint" not in labels
    ):
        labels.append("wrong_checkpoint")
    statuses = [f.get("status") for f in obs["fallback"].values()]
    if "not_newest" in statuses:
        labels.append("fallback_not_newest")
    # GC freed bytes a checkpoint it kept still used, though verify had found nothing wrong.
    if obs.get("gc_lost") and obs["open"] == "ok" and obs["verify"] == "ok":
        labels.append("gc_robbed")
    if obs.get("gc_reads_refused") and obs.get("gc_verify") == "ok":
        labels.append("gc_undetected")
    if obs["open"] != "ok" and obs["open"] != "untyped":
        labels.append("refused")
    elif obs["verify"] in ("problems", "refused") or str(obs["verify"]).startswith("refused"):
        labels.append("detected")
    elif obs["verify"] == "ok" and obs.get("verify_unkeyed"):
        labels.append("detected")  # verify names a key scope it had no key for
    elif obs["verify"] == "ok":
        failed_reads = obs["reads_refused"] > 0
        if failed_reads:
            labels.append("undetected")
        elif obs["absent"] or obs.get("lost"):
            labels.append("rolled_back" if case["kind"] in WAL_LOSS_KINDS else "silent_loss")
        elif obs.get("labels_missing") or obs.get("label_moved"):
            # Labels are not part of a manifest: an edit of the column is not damage verify
            # can see (a documented limit); any other cause must be.
            if case["kind"].startswith("row_label_"):
                labels.append("label_unverified")
            else:
                labels.append("rolled_back" if case["kind"] in WAL_LOSS_KINDS else "silent_loss")
        elif obs.get("write_refused"):
            labels.append("write_refused")  # commits fail (typed) and verify says ok
        else:
            labels.append("benign")
    return labels


def check_case(
    case: dict[str, Any], root: Path, meta: dict[str, Any], keep: bool = False
) -> dict[str, Any]:
    """Copy the pristine variant, apply the case, observe. Runs in a worker."""
    work = Path(tempfile.mkdtemp(prefix=f"case-{case['index']}-"))
    try:
        for name in meta["variants"][case["variant"]]["files"]:
            shutil.copy2(root / case["variant"] / name, work / name)
        started = time.monotonic()
        try:
            apply_case(case, work)
        except apsw.Error as exc:
            return {"not_applied": f"{type(exc).__name__}: {exc}"}
        obs = Observer(
            meta["expected"],
            root / "blobs",
            work,
            case["index"],
            meta["variants"][case["variant"]]["high_water"],
        ).run()
        obs["rows_changed"] = case.get("rows_changed")
        obs["seconds"] = round(time.monotonic() - started, 3)
        return obs
    finally:
        if keep:
            print(f"case files kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def worker_main(root: Path, batch_file: Path) -> None:
    """Run the cases of a batch file, one JSON line per result on stdout."""
    meta = json.loads((root / "meta.json").read_text())
    cases = json.loads(batch_file.read_text())
    out = sys.stdout
    for case in cases:
        out.write(f"BEGIN {case['index']}\n")
        out.flush()
        try:
            obs = check_case(case, root, meta)
        except Exception as exc:  # a bug of this harness, never counted as a ckptdb crash
            obs = {"harness_error": "".join(traceback.format_exception(exc))[-2000:]}
        out.write("RESULT " + json.dumps({"index": case["index"], "obs": obs}) + "\n")
        out.flush()


# ---------------------------------------------------------------------------------------
# The parent: batches in subprocesses, crash and hang detection, the summary


def _run_batch(
    root: Path, cases: list[dict[str, Any]], timeout: float
) -> dict[int, dict[str, Any]]:
    """Run cases in worker subprocesses, restarting after a crash or a hang."""
    results: dict[int, dict[str, Any]] = {}
    todo = list(cases)
    while todo:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(todo, fh)
            batch = Path(fh.name)
        proc = subprocess.Popen(
            [sys.executable, str(root / "worker.py"), "--worker", str(root), str(batch)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_child_env(),
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        current: int | None = None
        stderr_tail: list[str] = []
        drain = threading.Thread(target=_drain, args=(proc, stderr_tail))
        drain.start()
        hung = False
        pending = b""
        eof = False
        while not eof:
            if not sel.select(timeout):
                hung = True
                proc.kill()
                break
            data = os.read(fd, 1 << 16)
            eof = not data
            pending += data
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode()
                if line.startswith("BEGIN "):
                    current = int(line.split()[1])
                elif line.startswith("RESULT "):
                    got = json.loads(line[7:])
                    results[got["index"]] = got["obs"]
                    current = None
        proc.wait()
        drain.join()
        sel.close()
        batch.unlink()
        done = set(results)
        if current is not None:
            kind = "hang" if hung else "crash"
            results[current] = {
                kind: True,
                "returncode": proc.returncode,
                "stderr": stderr_tail[-5:],
                "wrong": [],
                "untyped": [],
                "fallback": {},
            }
            done.add(current)
        elif proc.returncode != 0 and not hung:
            raise RuntimeError(f"worker failed outside a case: {stderr_tail}")
        todo = [c for c in todo if c["index"] not in done]
    return results


def _drain(proc: subprocess.Popen[bytes], tail: list[str]) -> None:
    assert proc.stderr is not None
    tail.extend(proc.stderr.read().decode(errors="replace").splitlines()[-20:])


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    return env


def run_campaign(
    *,
    cases: int,
    seed: int,
    workers: int = 2,
    timeout: float = CASE_TIMEOUT,
    workdir: Path | None = None,
    log: Any = None,
) -> dict[str, Any]:
    """Build, draw, run and summarize a campaign. Returns the JSON-ready summary."""
    started = time.monotonic()
    own_dir = workdir is None
    root = Path(tempfile.mkdtemp(prefix="ckptdb-campaign-")) if workdir is None else workdir
    try:
        # Workers run a snapshot of this file: editing it during a run cannot mix versions.
        root.mkdir(parents=True, exist_ok=True)
        shutil.copy2(__file__, root / "worker.py")
        meta = build_pristine(root)
        drawn = make_cases(root, meta, cases, seed)
        built = time.monotonic()
        chunks = [drawn[i::workers] for i in range(workers)]
        results: dict[int, dict[str, Any]] = {}
        lock = threading.Lock()

        def run(part: list[dict[str, Any]]) -> None:
            size = 25
            for start in range(0, len(part), size):
                got = _run_batch(root, part[start : start + size], timeout)
                with lock:
                    results.update(got)
                    if log is not None:
                        print(f"  {len(results)}/{len(drawn)} cases", file=log, flush=True)

        threads = [threading.Thread(target=run, args=(c,)) for c in chunks if c]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        summary = summarize(drawn, results, meta)
        summary.update(
            seed=seed,
            cases_requested=cases,
            workers=workers,
            seconds_build=round(built - started, 2),
            seconds_total=round(time.monotonic() - started, 2),
            sqlite=apsw.sqlite_lib_version(),
            ckptdb=ckptdb.__version__,
        )
        return summary
    finally:
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)


def summarize(
    cases: list[dict[str, Any]], results: dict[int, dict[str, Any]], meta: dict[str, Any]
) -> dict[str, Any]:
    totals: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = {}
    by_target: dict[str, Counter[str]] = {}
    failures = []
    not_applied = 0
    refusal_codes: Counter[str] = Counter()
    sealed_codes: Counter[str] = Counter()
    sealed_cases: Counter[str] = Counter()  # cases damaging the encrypted scope's records
    sealed_fallback: Counter[str] = Counter()  # load(fallback=True) of its namespaces there
    untyped_kinds: Counter[str] = Counter()
    reads: Counter[str] = Counter()
    harness_errors: list[dict[str, Any]] = []
    fallback_results: Counter[str] = Counter()
    not_applied_kinds: Counter[str] = Counter()  # e.g. refused by a constraint of the schema
    open_refusals: Counter[str] = Counter()
    format3: dict[str, Counter[str]] = {
        k: Counter()
        for k in ("gc", "gc_lost_after_detected_damage", "label_moved_by_label_edit",
                  "labels", "seq_reused")
    }  # fmt: skip
    for case in cases:
        obs = results[case["index"]]
        if "harness_error" in obs:
            harness_errors.append({"index": case["index"], "error": obs["harness_error"]})
            continue
        if "not_applied" in obs or (
            case["kind"].startswith("row_") and obs.get("rows_changed") == 0
        ):
            not_applied += 1
            not_applied_kinds[case["kind"]] += 1
            continue
        if str(obs.get("open")).startswith("refused:"):
            open_refusals[str(obs["open"]).removeprefix("refused:")] += 1
        gc = obs.get("gc", "not_run")
        format3["gc"]["completed" if isinstance(gc, dict) else str(gc or "not_run")] += 1
        if isinstance(gc, dict):
            format3["gc"]["checkpoints_deleted"] += gc["checkpoints"]
            format3["gc"]["blobs_deleted"] += gc["blobs"]
        format3["gc"]["reads_ok"] += obs.get("gc_reads_ok", 0)
        format3["gc"]["reads_refused"] += obs.get("gc_reads_refused", 0)
        if obs.get("gc_lost") and obs["verify"] != "ok":
            format3["gc_lost_after_detected_damage"][case["kind"]] += 1
        if obs.get("label_moved") and case["kind"].startswith("row_label_"):
            format3["label_moved_by_label_edit"][case["kind"]] += 1
        format3["labels"]["checked"] += obs.get("labels_checked", 0)
        format3["labels"]["missing"] += obs.get("labels_missing", 0)
        if obs.get("seq_reused") and case["kind"] not in WAL_LOSS_KINDS:  # else rolled back
            format3["seq_reused"][case["kind"]] += 1
        labels = classify(case, obs)
        totals["injected"] += 1
        for label in labels:
            totals[label] += 1
        by_kind.setdefault(case["kind"], Counter()).update([*labels, "injected"])
        by_target.setdefault(case.get("target", "?"), Counter()).update([*labels, "injected"])
        refusal_codes.update(obs.get("refusals", {}))
        sealed_codes.update(obs.get("sealed_refusals", {}))
        if case.get("target", "").startswith(("sealed_", "key_scope")):
            sealed_cases.update([*labels, "injected"])
            for ns, f in obs.get("fallback", {}).items():
                if ns.startswith(SEALED_PREFIX):
                    sealed_fallback[f.get("status") or _fallback_kind(f.get("result"))] += 1
        reads["ok"] += obs.get("reads_ok", 0)
        reads["refused"] += obs.get("reads_refused", 0)
        reads["batch_ok"] += obs.get("batch_reads_ok", 0)
        reads["batch_refused"] += obs.get("batch_reads_refused", 0)
        for f in obs.get("fallback", {}).values():
            fallback_results[f.get("status") or _fallback_kind(f.get("result"))] += 1
        for site in set(obs.get("untyped_sites", [])):
            untyped_kinds[site] += 1
        if any(label in FAILURES for label in labels):
            failures.append(
                {
                    "index": case["index"],
                    "variant": case["variant"],
                    "kind": case["kind"],
                    "target": case.get("target"),
                    "labels": labels,
                    "ops": case["ops"],
                    "wrong": obs.get("wrong", [])[:5],
                    "wrong_checkpoint": obs.get("wrong_checkpoint", [])[:5],
                    "untyped": obs.get("untyped", [])[:5],
                    "label_moved": obs.get("label_moved", [])[:5],
                    "gc_lost": obs.get("gc_lost", [])[:5],
                    "sealed_refusals": obs.get("sealed_refusals", {}),
                    "fallback": {
                        ns: f for ns, f in obs.get("fallback", {}).items() if f.get("status")
                    },
                    "verify": obs.get("verify"),
                }
            )
    expected = meta["expected"]
    pristine = {
        "checkpoints": len(expected["checkpoints"]),
        "entries": sum(len(c["entries"]) for c in expected["checkpoints"].values()),
        "namespaces": len(expected["namespaces"]),
        "pages": {v: len(m["main_pages"]) for v, m in meta["variants"].items()},
        "wal_frames": len(meta["variants"]["wal"]["frames"]),
        "page_categories": dict(
            Counter(_category(i) for i in meta["variants"]["checkpointed"]["main_pages"].values())
        ),
    }
    counts = {k: totals.get(k, 0) for k in
              ("injected", "refused", "detected", "benign", "rolled_back", "label_unverified",
               "write_refused", *FAILURES)}  # fmt: skip
    return {
        "counts": counts,
        "not_applied": not_applied,
        "not_applied_by_kind": dict(not_applied_kinds.most_common()),
        "open_refusal_codes": dict(open_refusals.most_common()),
        "format3": {k: dict(v.most_common()) for k, v in format3.items()},
        "reads": dict(reads),
        "fallback_results": dict(fallback_results.most_common()),
        "refusal_codes": dict(refusal_codes.most_common()),
        "sealed_refusal_codes": dict(sealed_codes.most_common()),
        "sealed_targets": {
            "outcomes": dict(sealed_cases.most_common()),
            "fallback_results": dict(sealed_fallback.most_common()),
        },
        "untyped_exception_types": dict(untyped_kinds.most_common(20)),
        "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
        "by_target": {k: dict(v) for k, v in sorted(by_target.items())},
        "pristine": pristine,
        "failures": failures,
        "harness_errors": harness_errors,
        "ok": all(counts[f] == 0 for f in FAILURES) and not harness_errors,
        "failure_bars": list(FAILURES),
    }


def _fallback_kind(result: str | None) -> str:
    """Group load(fallback=True) results: a checkpoint id, or the error."""
    if result is None or result in ("no_usable", "untyped") or result.startswith("refused"):
        return str(result)
    return "returned_newest_intact"


def _print_summary(summary: dict[str, Any]) -> None:
    c = summary["counts"]
    print(
        f"seed {summary['seed']}: {c['injected']} cases injected ({summary['not_applied']} "
        f"not applicable) in {summary['seconds_total']} s"
    )
    print(
        f"  refused at open {c['refused']}, detected by verify {c['detected']}, benign "
        f"{c['benign']}, rolled back by SQLite's WAL recovery {c['rolled_back']}, label "
        f"edits verify cannot see {c['label_unverified']}, commits refused while verify "
        f"says ok {c['write_refused']}"
    )
    print("  failures: " + ", ".join(f"{k} {c[k]}" for k in FAILURES))
    print(f"  reads: {summary['reads']}")
    print(f"  refused reads in the encrypted scope, by code: {summary['sealed_refusal_codes']}")
    sealed = summary["sealed_targets"]
    print(f"  cases damaging sealed records or key_scope: {sealed['outcomes']}")
    print(
        f"    load(fallback=True) of the encrypted namespaces there: {sealed['fallback_results']}"
    )
    print(f"  load(fallback=True) per namespace: {summary['fallback_results']}")
    print(f"  refused at open, by code: {summary['open_refusal_codes']}")
    print(f"  not applicable, by kind: {summary['not_applied_by_kind']}")
    for what, figures in summary["format3"].items():
        print(f"  format 3, {what.replace('_', ' ')}: {figures}")
    if summary["untyped_exception_types"]:
        print("  untyped exceptions (cases, by type and raising site):")
        for site, n in summary["untyped_exception_types"].items():
            print(f"    {n:>4}  {site}")
    width = max(len(k) for k in summary["by_kind"])
    print(f"  {'kind':<{width}}  injected refused detected benign rolled_back unverified failing")
    for kind, row in summary["by_kind"].items():
        failing = sum(row.get(f, 0) for f in FAILURES)
        unverified = row.get("label_unverified", 0) + row.get("write_refused", 0)
        print(
            f"  {kind:<{width}}  {row.get('injected', 0):>8} {row.get('refused', 0):>7} "
            f"{row.get('detected', 0):>8} {row.get('benign', 0):>6} "
            f"{row.get('rolled_back', 0):>11} {unverified:>10} {failing:>7}"
        )
    for f in summary["failures"][:15]:
        detail = (
            f["wrong"]
            or f["wrong_checkpoint"]
            or f["untyped"]
            or f["label_moved"]
            or [f"gc lost {f['gc_lost']}" if f["gc_lost"] else json.dumps(f["fallback"])]
        )[0]
        print(f"  FAIL case {f['index']} {f['variant']} {f['kind']} {f['labels']}: {detail[:200]}")
    for h in summary["harness_errors"][:3]:
        print(f"  HARNESS ERROR in case {h['index']} (a bug of this tool):\n{h['error']}")
    print("RESULT: " + ("all zero-bars hold" if summary["ok"] else "FAILURES (see above)"))


def replay(path: Path, index: int) -> None:
    """Re-run one case of a saved JSON report in this process, printing every observation."""
    summary = json.loads(path.read_text())
    root = Path(tempfile.mkdtemp(prefix="ckptdb-replay-"))
    try:
        meta = build_pristine(root)
        cases = make_cases(root, meta, summary["cases_requested"], summary["seed"])
        case = cases[index]
        print(json.dumps({k: v for k, v in case.items() if k != "ops"}, indent=1))
        print(json.dumps(case["ops"])[:2000])
        obs = check_case(case, root, meta, keep=True)
        print(json.dumps(obs, indent=1, default=str))
        print("labels:", classify(case, obs) if "not_applied" not in obs else obs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CASES} cases")
    parser.add_argument("--cases", type=int, help=f"number of cases (default {FULL_CASES})")
    parser.add_argument("--seed", type=int, help="RNG seed (default: random, printed)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--timeout", type=float, default=CASE_TIMEOUT, help="seconds per case")
    parser.add_argument("--json", dest="json_out", help="write the full summary here")
    parser.add_argument("--replay", help="a JSON summary written by --json")
    parser.add_argument("--case", type=int, help="with --replay: the case index")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(Path(args.worker[0]), Path(args.worker[1]))
        return 0
    if args.replay:
        replay(Path(args.replay), int(args.case or 0))
        return 0
    if args.quick and args.timeout == CASE_TIMEOUT:
        args.timeout = QUICK_TIMEOUT
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    count = args.cases or (QUICK_CASES if args.quick else FULL_CASES)
    print(f"corruption campaign: seed {seed}, {count} cases, {args.workers} workers", flush=True)
    summary = run_campaign(
        cases=count, seed=seed, workers=args.workers, timeout=args.timeout, log=sys.stderr
    )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=1))
    _print_summary(summary)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
