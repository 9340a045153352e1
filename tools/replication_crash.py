"""Crash drill: kill -9 a replicating primary at random moments, many times; after each
kill, restore the replica and check that every checkpoint whose ``wait()`` returned is
present and verifies. Exits non-zero on the first violation.

    python tools/replication_crash.py [--quick] [--rounds N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import ckptdb

WORKER = Path(__file__).resolve().parent.parent / "tests" / "replicate_worker.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="5 rounds")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--sync-interval", type=float, default=0.1)
    args = parser.parse_args()
    rounds = 5 if args.quick else args.rounds
    rng = random.Random(args.seed)
    acked: list[str] = []
    with tempfile.TemporaryDirectory(prefix="replication-crash-") as tmp:
        root = Path(tmp)
        primary, replica = root / "run.ckpt", "file://" + str(root / "replica")
        for n in range(rounds):
            proc = subprocess.Popen(
                [sys.executable, str(WORKER), str(primary), replica, "1000000",
                 str(args.sync_interval)],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            assert proc.stdout is not None
            lines: list[str] = []
            ready = threading.Event()

            def read(stream=proc.stdout, sink=lines, flag=ready) -> None:  # type: ignore[no-untyped-def]
                for line in stream:
                    sink.append(line)
                    flag.set()

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            if not ready.wait(30):
                print(f"round {n}: primary did not start", file=sys.stderr)
                return 2
            time.sleep(rng.uniform(0.05, 2.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            reader.join(5)
            new = [line.split()[1] for line in lines if line.startswith("acked ")]
            acked += new
            dest = root / "restored.ckpt"
            ckptdb.restore(replica, dest, force=True)
            with ckptdb.open(dest, readonly=True) as copy:
                for cid in acked:
                    try:
                        copy.get(cid).read("state.json")
                    except ckptdb.errors.CkptdbError as exc:
                        print(f"round {n}: acked {cid[:12]} lost: {exc.code}", file=sys.stderr)
                        return 1
                if not copy.verify().ok:
                    print(f"round {n}: restored copy failed verify", file=sys.stderr)
                    return 1
            print(f"round {n}: +{len(new)} acked, {len(acked)} in all present and verified")
    print(f"ok: {rounds} kills, {len(acked)} acknowledged checkpoints, none lost")
    return 0


if __name__ == "__main__":
    sys.exit(main())
