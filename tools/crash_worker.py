"""A workload that commits, pins and collects garbage in a loop until it is killed.

Used by tools/crash_loop.py (and so by the test suite): the parent kills this process with
SIGKILL at random moments and then checks the database.

Protocol (stdout, one line each, flushed *after* the operation returned):
``READY``; ``ACK <i> <checkpoint id>`` after commit ``i``; ``PIN <name> <checkpoint id>``
after a pin; ``GC <deleted>`` after a garbage collection.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys

import ckptdb

NAMESPACE = "crash"
CHUNK_SIZE = 64 * 1024
KEEP_LAST = 4


def entries_for(i: int) -> dict[str, bytes]:
    """The content of commit ``i``: small JSON state; every 5th commit a chunked blob, and
    a blob shared by many commits (so GC has shared bytes to get wrong)."""
    rng = random.Random(i)
    out = {
        "state.json": json.dumps({"i": i}).encode(),
        "shared.bin": random.Random(i // 10).randbytes(CHUNK_SIZE + 100),
    }
    if i % 5 == 0:
        out["model.bin"] = rng.randbytes(rng.randint(CHUNK_SIZE + 1, 3 * CHUNK_SIZE))
    else:
        out["notes.txt"] = hashlib.sha256(str(i).encode()).hexdigest().encode() * rng.randint(1, 40)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--start", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out = sys.stdout
    with ckptdb.open(args.db, chunk_size=CHUNK_SIZE) as db:
        out.write("READY\n")
        out.flush()
        i = args.start
        while True:
            ack = db.commit(NAMESPACE, entries_for(i), metadata={"i": i})
            out.write(f"ACK {i} {ack.checkpoint_id}\n")
            out.flush()
            roll = rng.random()
            if roll < 0.08:
                pin = db.pin(ack.checkpoint_id, f"pin-{i}")
                out.write(f"PIN {pin.name} {pin.checkpoint_id}\n")
                out.flush()
            elif roll < 0.25:
                report = db.gc(ckptdb.RetentionPolicy(keep_last=KEEP_LAST), grace=0)
                out.write(f"GC {report.checkpoints_deleted}\n")
                out.flush()
            i += 1


if __name__ == "__main__":
    main()
