"""Crash drill: kill -9 a replicating primary (the writer and its Litestream) at random
moments, many times; after each kill, restore the replica's newest position and check the
contract:

* ``restore`` of the newest position succeeds (no ``replica_damaged``);
* every checkpoint whose ``wait()`` returned, in any round so far, is in the restore and
  verifies;
* the replica's level-0 LTX headers written while the round's Litestream ran show no
  skipped WAL generation and no re-snapshot (``ckptdb.replication.ltx.audit``): either one
  means something restarted the WAL under Litestream and frames it never copied were
  overwritten. This check does not depend on where the kill lands, so a regression shows
  in every run, not only in the unlucky ones.

    python tools/replication_crash.py [--quick] [--rounds N] [--seed S] [--wait-every K]

Prints one line per round and a summary (rounds, kills, waited checkpoints, violations by
kind); exits 1 if any round broke the contract (all rounds run with --keep-going).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import ckptdb
from ckptdb.replication import ltx

WORKER = Path(__file__).resolve().parent.parent / "tests" / "replicate_worker.py"


def one_round(
    root: Path, rng: random.Random, acked: list[str], args: argparse.Namespace
) -> tuple[list[str], list[str]]:
    """Run, kill, restore, check. Returns (new acked ids, violations)."""
    primary, replica_dir = root / "run.ckpt", root / "replica"
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(primary), "file://" + str(replica_dir), "1000000",
         str(args.sync_interval), str(args.wait_every)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    ready = threading.Event()

    def read(stream=proc.stdout) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            lines.append(line)
            if line.startswith("acked "):
                ready.set()  # kill only once the barrier works: every round tests it

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not ready.wait(60):
        proc.kill()
        proc.wait()
        return [], ["primary_did_not_start"]
    _, pid_text, start_text = next(x for x in lines if x.startswith("litestream ")).split()
    time.sleep(rng.uniform(args.min_delay, args.max_delay))
    # The writer and its Litestream die together, as on a power cut of one machine.
    for pid in (proc.pid, int(pid_text)):
        # Litestream may already have gone with its parent (PR_SET_PDEATHSIG).
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    reader.join(5)
    new = [line.split()[1] for line in lines if line.startswith("acked ")]
    acked += new
    with ckptdb.open(primary, readonly=True) as db:
        seq_page = int(
            db.query("SELECT rootpage FROM sqlite_schema WHERE name = '_litestream_seq'").rows[0][0]
        )
    violations = [
        f"{a.kind}: {a.detail}"
        for a in ltx.audit(ltx.local_headers(str(replica_dir)), seq_page=seq_page)
        if a.txid > int(start_text)
    ]
    dest = root / "restored.ckpt"
    try:
        ckptdb.restore("file://" + str(replica_dir), dest, force=True)
    except ckptdb.errors.ReplicaDamagedError as exc:
        return new, [*violations, f"newest_refused: {exc}"]
    with ckptdb.open(dest, readonly=True) as copy:
        for cid in acked:
            try:
                copy.get(cid).read("state.json")
            except ckptdb.errors.CkptdbError as exc:
                violations.append(f"acked_lost: {cid[:12]}: {exc.code}")
        if not copy.verify().ok:
            violations.append("restored_copy_failed_verify")
    return new, violations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="5 rounds")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--sync-interval", type=float, default=0.1)
    parser.add_argument("--wait-every", type=int, default=5, help="wait() on every K-th commit")
    parser.add_argument(
        "--min-delay", type=float, default=0.0, help="seconds from the first ack to the kill"
    )
    parser.add_argument("--max-delay", type=float, default=3.0)
    parser.add_argument("--keep-going", action="store_true", help="run every round")
    parser.add_argument("--dir", help="work here and keep the files (default: a temp dir)")
    args = parser.parse_args()
    rounds = 5 if args.quick else args.rounds
    rng = random.Random(args.seed)
    acked: list[str] = []
    kinds: Counter[str] = Counter()
    bad_rounds = 0
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="replication-crash-") as scratch:
        tmp = args.dir or scratch
        os.makedirs(tmp, exist_ok=True)
        for n in range(rounds):
            new, violations = one_round(Path(tmp), rng, acked, args)
            state = "ok" if not violations else f"{len(violations)} violation(s)"
            print(f"round {n}: +{len(new)} acked, {len(acked)} in all: {state}", flush=True)
            for violation in violations:
                print(f"  {violation}", flush=True)
                kinds[violation.split(":")[0]] += 1
            if violations:
                bad_rounds += 1
                if not args.keep_going:
                    break
    summary = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"
    print(
        f"{'FAILED' if bad_rounds else 'ok'}: {n + 1} rounds/kills, {len(acked)} waited "
        f"checkpoints, {bad_rounds} round(s) with violations ({summary}), "
        f"{time.monotonic() - began:.0f} s"
    )
    return 1 if bad_rounds else 0


if __name__ == "__main__":
    sys.exit(main())
