"""Two roles for the publish-vs-GC race test (tests/test_gc_concurrency.py):

    python tools/gc_race.py publish DB ROUNDS   # commits chunked checkpoints, prints ACK lines
    python tools/gc_race.py gc DB ROUNDS        # runs aggressive GC (keep_last=2, grace=0)

The publisher re-uses old chunks (dedup) so GC is constantly deleting bytes a publish is
about to reference; a publish that loses that race must fail with the retryable
ChunkMissingError and succeed on retry -- never acknowledge a checkpoint with missing bytes.
"""

from __future__ import annotations

import random
import sys
import time

import ckptdb
from ckptdb import errors

CHUNK = 64 * 1024


def publish(path: str, rounds: int) -> None:
    rng = random.Random(42)
    pool = [rng.randbytes(CHUNK) for _ in range(6)]  # chunks that keep coming back
    retries = 0
    with ckptdb.open(path, chunk_size=CHUNK) as db:
        for i in range(rounds):
            data = b"".join(rng.choice(pool) for _ in range(3)) + i.to_bytes(4, "little")
            for attempt in range(20):
                try:
                    ack = db.commit("race", {"w": data, "i": str(i)}, metadata={"i": i})
                    break
                except errors.ChunkMissingError:
                    retries += 1
                    time.sleep(0.001 * attempt)
            else:
                raise SystemExit(f"commit {i} kept losing its chunks")
            print(f"ACK {i} {ack.checkpoint_id}", flush=True)
    print(f"RETRIES {retries}", flush=True)


def collect(path: str, rounds: int) -> None:
    policy = ckptdb.RetentionPolicy(keep_last=2)
    deleted = 0
    with ckptdb.open(path, chunk_size=CHUNK) as db:
        for _ in range(rounds):
            deleted += db.gc(policy, grace=0).checkpoints_deleted
        # On a loaded machine the publisher may start late: keep collecting (bounded) until
        # this process has collected something while the publisher runs.
        deadline = time.monotonic() + 60
        while not deleted and time.monotonic() < deadline:
            deleted += db.gc(policy, grace=0).checkpoints_deleted
            time.sleep(0.01)
    print(f"DELETED {deleted}", flush=True)


if __name__ == "__main__":
    role, db_path, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    {"publish": publish, "gc": collect}[role](db_path, count)
