"""A primary that replicates while it commits, for the kill -9 tests (run as a script).

    python replicate_worker.py DB URL COMMITS [sync_interval]

Prints ``litestream PID`` once replicating, then for every commit ``acked ID`` once
``wait()`` returned for it; after COMMITS waited commits it keeps committing without waiting
(``unwaited ID``) until killed."""

from __future__ import annotations

import os
import sys

import ckptdb


def main() -> None:
    path, url, commits = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sync_interval = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    with ckptdb.open(path) as db:
        if db.current("run") is None:
            db.commit("run", {"state.json": b"{}"})
        with ckptdb.replicate(path, to=url, sync_interval=sync_interval) as rep:
            print(f"litestream {rep.pid}", flush=True)
            n = 0
            while True:
                n += 1
                payload = os.urandom(64) + str(n).encode()
                ack = db.commit("run", {"state.json": payload, "n": str(n).encode()})
                if n <= commits:
                    rep.wait(ack.checkpoint_id, timeout=30)
                    print(f"acked {ack.checkpoint_id}", flush=True)
                else:
                    print(f"unwaited {ack.checkpoint_id}", flush=True)


if __name__ == "__main__":
    main()
