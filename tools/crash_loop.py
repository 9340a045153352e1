"""Crash loop: SIGKILL a process that commits, pins, forks and collects garbage, again and again.

    python tools/crash_loop.py --kills 100      # quick mode (what CI runs, ~1 minute)
    python tools/crash_loop.py --kills 2000     # release mode (~15-20 minutes)
    python tools/crash_loop.py --kills 100 --json out.json --seed 7
    python tools/crash_loop.py --kills 100 --encrypted   # into a key scope, rotating its key

After every kill the parent checks, on the file the dead process left:

* it passes integrity_check and ckptdb's full verify (so GC never removed bytes a stored
  checkpoint needs);
* CURRENT is the last acknowledged commit or the one right after it, with exactly the
  content of that commit;
* no acknowledged checkpoint is lost: the last ``KEEP_LAST`` acknowledged commits (the
  retention window the workload's GC uses) and every acknowledged pin are present and
  verify, and the label each commit was given (``commit-<i>``) finds it;
* every acknowledged fork (``copy_checkpoints`` of the newest checkpoints into a new
  namespace) is there with its CURRENT on the acknowledged copy, holding its source's
  content (a fork the kill interrupted must leave nothing verify would flag).

``--encrypted``: the worker commits into an encrypted key scope and now and then rotates
its key (keys travel in a 0600 key file, never on a command line; see crash_worker.py).
After each kill, before anything opens the file, its raw bytes and its WAL's must not hold
the plaintext marker every sealed commit carries; then exactly one key of the key file (the
current one, or the one a rotation in flight was installing) must open the scope, its key
generation must be at least that of the last acknowledged rotation, and every check above
runs with that key (verify must check every sealed record with it, not just their sealed
digests).

Exit status 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import os
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

from crash_worker import (  # noqa: E402
    CHUNK_SIZE,
    KEEP_LAST,
    KEY_ID,
    MARKER,
    NAMESPACE,
    SEALED_NAMESPACE,
    entries_for,
    label_for,
    read_keys,
    write_keys,
)

import ckptdb  # noqa: E402
from ckptdb import errors  # noqa: E402


def _disk(path: Path) -> bytes:
    return b"".join(
        Path(str(path) + suffix).read_bytes()
        for suffix in ("", "-wal")
        if Path(str(path) + suffix).exists()
    )


def _marker_visible_in_plaintext(workdir: Path) -> bool:
    """The marker check can fail: a sealed commit's entries, committed in plaintext, put the
    marker on disk."""
    probe = workdir / "probe.ckpt"
    with ckptdb.open(probe, chunk_size=CHUNK_SIZE) as db:
        db.commit(NAMESPACE, entries_for(5, sealed=True))
        return MARKER in _disk(probe)


def _working_key(db_path: Path, candidates: list[bytes]) -> tuple[bytes | None, list[str]]:
    """The one candidate key that opens the scope (None when nothing sealed exists yet to
    tell), and what was wrong."""
    opening = []
    for key in candidates:
        with ckptdb.open(db_path, keys={KEY_ID: key}) as db:
            cp = db.current(SEALED_NAMESPACE)
            if cp is None:
                return None, []
            try:
                cp.read("secret.txt")
                opening.append(key)
            except errors.KeyMismatchError:
                pass
    if len(opening) != 1:
        return None, [f"{len(opening)} of the {len(candidates)} keys of the key file open it"]
    return opening[0], []


def run(
    kills: int,
    seed: int,
    workdir: Path,
    env: dict[str, str] | None = None,
    encrypted: bool = False,
) -> dict[str, Any]:
    """Run the loop; returns figures and violations."""
    rng = random.Random(seed)
    db_path = workdir / "crash.ckpt"
    key_file = workdir / "keys.json"
    namespace = SEALED_NAMESPACE if encrypted else NAMESPACE
    acked: dict[int, str] = {}
    pins: dict[str, str] = {}
    forks: dict[str, str] = {}  # acknowledged: namespace -> the copy CURRENT must name
    violations: list[str] = []
    gcs = 0
    mid_commit = 0
    rotations = 0
    rotation_generation = 0  # of the last acknowledged rotate_key
    in_flight = 0  # kills with two keys in the key file
    in_flight_new = 0  # ... of which the new key was already the scope's
    next_i = 1
    started = time.monotonic()
    worker = [str(TOOLS / "crash_worker.py"), str(db_path)]
    if encrypted:
        if not _marker_visible_in_plaintext(workdir):
            violations.append("the plaintext marker is not visible even in plaintext")
        write_keys(key_file, [os.urandom(32)])
        worker += ["--key-file", str(key_file)]
    for kill in range(kills):
        proc = subprocess.Popen(
            [
                sys.executable,
                *worker,
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
            elif word == "FORK":
                forks[args[0]] = args[1]
            elif word == "GC":
                gcs += 1
            elif word == "ROTATED":
                rotations += 1
                rotation_generation = int(args[0])
        keys = None
        if encrypted:
            if MARKER in _disk(db_path):
                violations.append(f"kill {kill}: plaintext of a sealed commit on disk")
            candidates = read_keys(key_file)
            key, problems = _working_key(db_path, candidates)
            violations.extend(f"kill {kill}: {p}" for p in problems)
            if key is None:
                key = candidates[0]
            in_flight += len(candidates) > 1
            in_flight_new += len(candidates) > 1 and key == candidates[-1]
            write_keys(key_file, [key])  # the next worker starts with the scope's key
            keys = {KEY_ID: key}
        try:
            with ckptdb.open(db_path, chunk_size=CHUNK_SIZE, keys=keys) as db:
                report = db.verify()
                if not report.ok:
                    violations.append(f"kill {kill}: verify failed: {report.problems[:3]}")
                if report.sealed_only:
                    violations.append(f"kill {kill}: verify could not open {report.sealed_only}")
                if encrypted:
                    scopes = db.key_scopes()
                    generation = scopes[0].key_generation if scopes else 0
                    if generation < rotation_generation:
                        violations.append(
                            f"kill {kill}: key generation {generation}, but rotation to"
                            f" {rotation_generation} was acknowledged"
                        )
                cp = db.current(namespace)
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
                if {n: cp.read(n) for n in cp.entries} != entries_for(i, encrypted):
                    violations.append(f"kill {kill}: CURRENT {i} has the wrong content")
                # keep_last counts generations along the lineage (commit k's parent is k-1),
                # whether or not the kill let the worker report the ack.
                window = sorted(k for k in acked if i - KEEP_LAST < k <= i)
                for k in window:
                    try:
                        db.get(acked[k]).verify()
                        labelled = db.get_labelled(namespace, label_for(k))
                        if labelled is None or labelled.id != acked[k]:
                            violations.append(f"kill {kill}: label of acknowledged {k} lost")
                    except ckptdb.CkptdbError as exc:
                        lineage = [int(c.metadata["i"]) for c in db.lineage(namespace)]
                        violations.append(
                            f"kill {kill}: acknowledged {k} lost: {exc.code} (lineage {lineage}, "
                            f"window {window}, last ack {last_ack})"
                        )
                for name, cid in pins.items():
                    try:
                        db.get(cid).verify()
                    except ckptdb.CkptdbError as exc:
                        violations.append(f"kill {kill}: pinned {name} lost: {exc.code}")
                for fork_ns, cid in forks.items():
                    head = db.current(fork_ns)
                    if head is None or head.id != cid:
                        violations.append(f"kill {kill}: acknowledged fork {fork_ns} lost")
                    elif {n: head.read(n) for n in head.entries} != entries_for(
                        int(head.metadata["i"]), encrypted
                    ):
                        violations.append(f"kill {kill}: fork {fork_ns} has the wrong content")
                next_i = i + 1
        except ckptdb.CkptdbError as exc:
            violations.append(f"kill {kill}: cannot open after the kill: {exc.code}: {exc}")
            break
    out: dict[str, Any] = {
        "kills": kills,
        "seed": seed,
        "encrypted": encrypted,
        "seconds": round(time.monotonic() - started, 1),
        "commits_acknowledged": len(acked),
        "pins_acknowledged": len(pins),
        "forks_acknowledged": len(forks),
        "gc_runs_completed": gcs,
        "kills_landing_mid_commit": mid_commit,
        "acknowledged_lost": sum(1 for v in violations if "lost" in v),
        "violations": violations,
    }
    if encrypted:
        out.update(
            rotations_acknowledged=rotations,
            key_generation=rotation_generation,
            kills_with_a_rotation_in_flight=in_flight,
            kills_in_flight_after_the_rotation_committed=in_flight_new,
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--encrypted", action="store_true", help="commit into a key scope")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckptdb-crash-") as tmp:
        result = run(args.kills, args.seed, Path(tmp), encrypted=args.encrypted)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
