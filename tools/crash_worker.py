"""A workload that commits deterministic checkpoints in a loop until it is killed.

Used by the crash tests and tools/crash_loop.py: the parent kills this process with
SIGKILL at random moments and then checks that the database is intact and that CURRENT is
the last acknowledged checkpoint or the one right after it.

Protocol (stdout, one line each, flushed): ``READY`` once the database is open, then
``ACK <i> <checkpoint id>`` after commit ``i`` returned its acknowledgement.
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


def entries_for(i: int) -> dict[str, bytes]:
    """The content of commit ``i``: small JSON state, and every 7th commit a chunked blob."""
    out = {"state.json": json.dumps({"i": i}).encode()}
    if i % 7 == 0:
        rng = random.Random(i)
        out["model.bin"] = rng.randbytes(rng.randint(CHUNK_SIZE + 1, 3 * CHUNK_SIZE))
    else:
        out["notes.txt"] = hashlib.sha256(str(i).encode()).hexdigest().encode() * 8
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--start", type=int, required=True)
    parser.add_argument("--count", type=int, default=10**9)
    args = parser.parse_args()
    with ckptdb.open(args.db, chunk_size=CHUNK_SIZE) as db:
        print("READY", flush=True)
        for i in range(args.start, args.start + args.count):
            ack = db.commit(NAMESPACE, entries_for(i), metadata={"i": i})
            sys.stdout.write(f"ACK {i} {ack.checkpoint_id}\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
