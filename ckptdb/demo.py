"""The Quickstart demo: a small, real tour that yields what it does, step by step.

It writes only to its own namespace (``demo/agent``) in the database it is given and does
its corruption-and-fallback act on a scratch copy in a temporary directory, so nothing of the
user's is ever damaged.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Iterator

from . import errors
from .database import open as open_database

NAMESPACE = "demo/agent"


def _state(turn: int) -> dict[str, bytes]:
    graph = {"turn": turn, "nodes": [f"fact-{i}" for i in range(turn * 3)]}
    return {
        "graph/snapshot.json": json.dumps(graph, indent=1).encode(),
        "memory/notes.md": f"# notes\nturn {turn}: learned {turn * 3} facts\n".encode(),
        "config.json": b'{"model": "demo", "temperature": 0.2}',  # never changes: deduped
    }


def run(path: str) -> Iterator[str]:
    """Run the demo against the database at ``path`` (created when missing: the tour is the
    one command besides ``init`` that makes a file of its own), yielding lines to show."""
    state = "an existing file" if os.path.lexists(path) else "created for the tour"
    yield f"ckptdb demo -- database {os.path.abspath(path)} ({state})"
    with open_database(path) as db:
        if db.pointer(NAMESPACE) is not None:
            # Each run tells the same story: the previous run's namespace starts over.
            dropped = db.drop_namespace(NAMESPACE, force=True)
            yield (
                f"   (removed the previous demo run: {dropped.checkpoints_deleted} checkpoints "
                f"of namespace {NAMESPACE!r}; nothing else is touched)"
            )
        yield ""
        yield f"1. Committing 3 checkpoints of an agent's state to namespace {NAMESPACE!r}"
        for turn in (1, 2, 3):
            ack = db.commit(NAMESPACE, _state(turn), metadata={"turn": turn})
            yield (
                f"   turn {turn}: checkpoint {ack.checkpoint_id[:12]} generation "
                f"{ack.generation}, {ack.bytes_stored} bytes stored, "
                f"{ack.bytes_deduplicated} deduplicated"
            )
        again = db.commit(NAMESPACE, _state(3), metadata={"turn": 3})
        yield (
            f"   retrying turn 3 is idempotent: same id {again.checkpoint_id[:12]}, "
            f"created={again.created}"
        )
        yield ""
        yield "2. The lineage, newest first (what `ckptdb log DB demo/agent` shows):"
        for info in db.lineage(NAMESPACE):
            yield (
                f"   {info.id[:12]}  gen {info.generation}  {info.created_at:%Y-%m-%dT%H:%M:%SZ}"
                f"  {len(info.entries)} entries  {info.total_size} bytes  turn="
                f"{info.metadata['turn']}"
            )
        loaded = db.load(NAMESPACE)
        snapshot = json.loads(loaded.checkpoint.read("graph/snapshot.json"))
        yield (
            f"   load() verified every byte of CURRENT: disposition={loaded.disposition}, "
            f"{len(snapshot['nodes'])} nodes in the graph"
        )
        with tempfile.TemporaryDirectory(prefix="ckptdb-demo-") as scratch:
            copy = os.path.join(scratch, "scratch.ckpt")
            db.export(copy, namespaces=[NAMESPACE])
            yield ""
            yield f"3. Fallback, on a scratch copy ({copy}); your file is not touched"
            with open_database(copy) as sdb:
                current = sdb.current(NAMESPACE)
                assert current is not None
                digest = current.entries["memory/notes.md"].digest
            # Simulate bit rot on the closed scratch copy, from outside ckptdb (as any other
            # program could): upper-case the stored bytes of the newest notes.
            with contextlib.closing(sqlite3.connect(copy)) as raw, raw:
                raw.execute(
                    "UPDATE blob SET inline_data = CAST(upper(CAST(inline_data AS TEXT)) AS BLOB)"
                    " WHERE digest = ?",
                    (digest,),
                )
            with open_database(copy) as sdb:
                yield f"   flipped bytes of 'memory/notes.md' in checkpoint {current.id[:12]}"
                try:
                    sdb.load(NAMESPACE)
                except errors.CorruptionError as exc:
                    yield f"   load() refuses it: error {exc.code}: {exc.message}"
                result = sdb.load(NAMESPACE, fallback=True)
                receipt = result.receipt
                assert receipt is not None
                rejected = receipt.rejected[0]
                yield (
                    f"   load(fallback=True) -> {result.disposition}: checkpoint "
                    f"{result.checkpoint.id[:12]} (generation {result.checkpoint.generation}), "
                    f"receipt #{receipt.receipt_id} rejects {rejected.checkpoint_id[:12]}"
                    f" ({rejected.code}, entry {rejected.entry!r})"
                )
                report = sdb.verify()
                yield (
                    f"   verify() on the scratch copy: ok={report.ok}, "
                    f"{len(report.problems)} problem(s): "
                    + ", ".join(sorted({p.code for p in report.problems}))
                )
        report = db.verify()
        yield ""
        yield (
            f"4. verify() on your database: ok={report.ok}, {report.checkpoints_checked} "
            f"checkpoints, {report.bytes_checked} bytes checked"
        )
        stats = db.stats()
        yield (
            f"   {stats.checkpoints} checkpoints, {stats.logical_bytes} logical bytes stored in "
            f"{stats.stored_bytes} (dedup ratio {stats.dedup_ratio})"
        )
    yield ""
    yield "Next:"
    yield f"   ckptdb log {path} {NAMESPACE}"
    yield f"   ckptdb cat {path} {NAMESPACE}@current graph/snapshot.json"
    yield f'   sqlite3 {path} "SELECT namespace, depth, checkpoint_id FROM lineage"'
