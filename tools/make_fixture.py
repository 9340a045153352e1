"""Generate a fixture database of the current schema version, for upgrade tests.

    python tools/make_fixture.py            # writes tests/fixtures/v<N>.ckpt and v<N>.json

Run it once per schema version, *before* adding the next migration, and commit both files:
tests/test_upgrade.py upgrades a copy of every fixture with the current code and checks
that every checkpoint, entry and pointer listed in the JSON survived intact. The data is
varied on purpose: several namespaces, chunked and inline blobs shared across checkpoints,
media types and schema pins, an explicit rollback, fallback and verify receipts; from v5 a
key scope (its test key in the JSON), a quota, a pin, a code revision and a fork.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from pathlib import Path

import ckptdb
from ckptdb.store.migrations import core_set

REPO = Path(__file__).resolve().parent.parent
CHUNK = 64 * 1024
#: The host key of the fixture's key scope (v5 and later); written into the JSON so the
#: upgrade test can open the scope. A test key, nothing else uses it.
FIXTURE_KEYS = {"fixture": bytes(range(200, 232))}


def build(path: Path) -> dict[str, object]:
    rng = random.Random(1)
    shared = rng.randbytes(3 * CHUNK + 100)  # a chunked blob reused by several checkpoints
    with ckptdb.open(path, chunk_size=CHUNK, keys=FIXTURE_KEYS, code_revision="fixture") as db:
        for turn in range(1, 6):
            db.commit(
                "agent/brain-1",
                {
                    "graph/snapshot.json": json.dumps({"turn": turn, "n": list(range(turn))}),
                    "weights.bin": shared if turn < 4 else rng.randbytes(2 * CHUNK + 7),
                    "notes.md": ckptdb.Entry(f"turn {turn}\n", media_type="text/markdown"),
                },
                metadata={"turn_count": turn, "source_revision": f"rev{turn}"},
            )
        for step in range(3):
            db.commit(
                "train/run-7",
                {
                    "model.pt": rng.randbytes(1000 + step),
                    "optimizer.pt": shared,
                    "schema.json": ckptdb.Entry(b"{}", schema_pin="train-state/v2"),
                },
                metadata={"step": step * 100, "loss": round(1.0 / (step + 1), 4), "run_id": "r7"},
            )
        lineage = db.lineage("train/run-7")
        db.set_current("train/run-7", lineage[1].id, reason="rollback: diverged")
        db.commit("train/run-7", {"model.pt": b"after rollback"}, metadata={"step": 150})
        db.commit("thread/∂-unicode ns", {"a/b/c.txt": "ünïcödé", "empty": b""})
        _since_v5(db, rng)
        db.load("agent/brain-1", fallback=True)
        db.verify()
        expected: dict[str, object] = {"schema_version": core_set().latest, "namespaces": {}}
        for ns in db.namespaces():
            pointer = db.pointer(ns.name)
            assert pointer is not None
            expected["namespaces"][ns.name] = {  # type: ignore[index]
                "current": pointer.current_id,
                "fallback": pointer.fallback_id,
                "revision": pointer.revision,
                "pointer_digest": pointer.digest,
                "lineage": [
                    {
                        "id": info.id,
                        "generation": info.generation,
                        "metadata": info.metadata,
                        "entries": {
                            e.name: {"digest": e.digest, "size": e.size} for e in info.entries
                        },
                    }
                    for info in db.lineage(ns.name)
                ],
            }
        expected["receipts"] = len(db.receipts())
        expected["keys"] = {k: v.hex() for k, v in FIXTURE_KEYS.items()}
    return expected


def _since_v5(db: ckptdb.Database, rng: random.Random) -> None:
    """What schema v5 added: a key scope sealing bytes and metadata, a quota, a pin, a code
    revision (set at open), and a fork (copy_checkpoints) sharing blobs."""
    db.set_encryption("tenant/", key_id="fixture", metadata=True)
    for turn in range(2):
        db.commit(
            "tenant/thread-1",
            {
                "state.json": json.dumps({"turn": turn, "text": "sealed " * 400}),
                "b": rng.randbytes(3 * CHUNK),
            },
            metadata={"turn": turn},
        )
    db.set_quota("train/", max_checkpoints=1000)
    db.pin("agent/brain-1@current", "fixture-pin", note="kept by every GC")
    ids = [c.id for c in reversed(db.lineage("agent/brain-1", limit=3))]
    db.copy_checkpoints(ids, "agent/brain-1-fork", metadata={"forked": True})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Write tests/fixtures/v<N>.ckpt and v<N>.json for the current schema "
        "version N (once per version, before the next migration is added)."
    )
    parser.add_argument("--force", action="store_true", help="replace an existing fixture")
    args = parser.parse_args(argv)
    version = core_set().latest
    out = REPO / "tests" / "fixtures" / f"v{version}.ckpt"
    if out.exists() and not args.force:
        sys.exit(f"{out} exists; fixtures are generated once per version (use --force)")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(str(out) + suffix):
            os.remove(str(out) + suffix)
    expected = build(out)
    expected["sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
    (out.with_suffix(".json")).write_text(json.dumps(expected, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {out} ({out.stat().st_size} bytes) and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
