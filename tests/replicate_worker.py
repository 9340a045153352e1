"""A primary that replicates while it commits, for the kill -9 tests (run as a script).

    python replicate_worker.py DB URL COMMITS [sync_interval] [wait_every] [payload_bytes]

Prints ``litestream PID TXID`` once replicating (TXID: the newest Litestream position built
from the local file at that moment, so the crash tests can tell this run's replica files
from earlier runs'), then for every commit ``acked ID`` once ``wait()`` returned for it
(every ``wait_every``-th commit is waited for, the others print ``unwaited ID``); after
COMMITS commits it keeps committing without waiting until killed. Each commit carries
``payload_bytes`` random bytes (64 by default; more fills the WAL faster, so a round sees
several WAL checkpoints and restarts)."""

from __future__ import annotations

import os
import sys

import ckptdb


def main() -> None:
    path, url, commits = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sync_interval = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    wait_every = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    size = int(sys.argv[6]) if len(sys.argv) > 6 else 64
    with ckptdb.open(path) as db:
        if db.current("run") is None:
            db.commit("run", {"state.json": b"{}"})
        with ckptdb.replicate(path, to=url, sync_interval=sync_interval) as rep:
            print(f"litestream {rep.pid} {rep.status().local_txid or 0}", flush=True)
            n = 0
            while True:
                n += 1
                payload = os.urandom(size) + str(n).encode()
                ack = db.commit("run", {"state.json": payload, "n": str(n).encode()})
                if n <= commits and n % wait_every == 0:
                    rep.wait(ack.checkpoint_id, timeout=30)
                    print(f"acked {ack.checkpoint_id}", flush=True)
                else:
                    print(f"unwaited {ack.checkpoint_id}", flush=True)


if __name__ == "__main__":
    main()
