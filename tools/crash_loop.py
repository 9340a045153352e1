"""Crash loop: SIGKILL a process that commits, pins and collects garbage, again and again.

    python tools/crash_loop.py --kills 100      # quick mode (what CI runs, ~1 minute)
    python tools/crash_loop.py --kills 2000     # release mode (~15-20 minutes)
    python tools/crash_loop.py --kills 100 --json out.json --seed 7

After every kill the parent checks, on the file the dead process left:

* it passes integrity_check and ckptdb's full verify (so GC never removed bytes a stored
  checkpoint needs);
* CURRENT is the last acknowledged commit or the one right after it, with exactly the
  content of that commit;
* no acknowledged checkpoint is lost: the last ``KEEP_LAST`` acknowledged commits (the
  retention window the workload's GC uses) and every acknowledged pin are present and
  verify.

Exit status 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

from crash_worker import CHUNK_SIZE, KEEP_LAST, NAMESPACE, entries_for  # noqa: E402

import ckptdb  # noqa: E402


def run(kills: int, seed: int, workdir: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the loop; returns figures and violations."""
    rng = random.Random(seed)
    db_path = workdir / "crash.ckpt"
    acked: dict[int, str] = {}
    pins: dict[str, str] = {}
    violations: list[str] = []
    gcs = 0
    mid_commit = 0
    next_i = 1
    started = time.monotonic()
    for kill in range(kills):
        proc = subprocess.Popen(
            [
                sys.executable,
                str(TOOLS / "crash_worker.py"),
                str(db_path),
                "--start",
                str(next_i),
                "--seed",
                str(rng.randrange(1 << 30)),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "READY":
            violations.append(f"kill {kill}: worker did not start")
            proc.kill()
            proc.wait()
            break
        time.sleep(rng.uniform(0.0, 0.12))
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate()
        last_ack = next_i - 1  # durable before this run started
        for line in rest.splitlines():
            word, *args = line.split()
            if word == "ACK":
                acked[int(args[0])] = args[1]
                last_ack = int(args[0])
            elif word == "PIN":
                pins[args[0]] = args[1]
            elif word == "GC":
                gcs += 1
        try:
            with ckptdb.open(db_path, chunk_size=CHUNK_SIZE) as db:
                report = db.verify()
                if not report.ok:
                    violations.append(f"kill {kill}: verify failed: {report.problems[:3]}")
                cp = db.current(NAMESPACE)
                if cp is None:
                    if last_ack:
                        violations.append(f"kill {kill}: CURRENT vanished")
                    continue
                i = int(cp.metadata["i"])
                if i not in (last_ack, last_ack + 1):
                    violations.append(f"kill {kill}: CURRENT is {i}, last ack {last_ack}")
                elif i == last_ack and i in acked and cp.id != acked[i]:
                    violations.append(f"kill {kill}: CURRENT is not the acknowledged {i}")
                mid_commit += int(i == last_ack + 1)
                if {n: cp.read(n) for n in cp.entries} != entries_for(i):
                    violations.append(f"kill {kill}: CURRENT {i} has the wrong content")
                # keep_last counts generations along the lineage (commit k's parent is k-1),
                # whether or not the kill let the worker report the ack.
                window = sorted(k for k in acked if i - KEEP_LAST < k <= i)
                for k in window:
                    try:
                        db.get(acked[k]).verify()
                    except ckptdb.CkptdbError as exc:
                        lineage = [int(c.metadata["i"]) for c in db.lineage(NAMESPACE)]
                        violations.append(
                            f"kill {kill}: acknowledged {k} lost: {exc.code} (lineage {lineage}, "
                            f"window {window}, last ack {last_ack})"
                        )
                for name, cid in pins.items():
                    try:
                        db.get(cid).verify()
                    except ckptdb.CkptdbError as exc:
                        violations.append(f"kill {kill}: pinned {name} lost: {exc.code}")
                next_i = i + 1
        except ckptdb.CkptdbError as exc:
            violations.append(f"kill {kill}: cannot open after the kill: {exc.code}: {exc}")
            break
    return {
        "kills": kills,
        "seed": seed,
        "seconds": round(time.monotonic() - started, 1),
        "commits_acknowledged": len(acked),
        "pins_acknowledged": len(pins),
        "gc_runs_completed": gcs,
        "kills_landing_mid_commit": mid_commit,
        "acknowledged_lost": sum(1 for v in violations if "lost" in v),
        "violations": violations,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckptdb-crash-") as tmp:
        result = run(args.kills, args.seed, Path(tmp))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
