"""A workload that commits, pins and collects garbage in a loop until it is killed.

Used by tools/crash_loop.py (and so by the test suite): the parent kills this process with
SIGKILL at random moments and then checks the database.

Protocol (stdout, one line each, flushed *after* the operation returned):
``READY``; ``ACK <i> <checkpoint id>`` after commit ``i`` (labelled ``commit-<i>``);
``PIN <name> <checkpoint id>`` after a pin; ``GC <deleted>`` after a garbage collection;
``ROTATED <generation>`` after a ``rotate_key``; ``FORK <namespace> <checkpoint id>``
after ``copy_checkpoints`` copied the newest checkpoints of the lineage into a new
namespace (the id: the copy of CURRENT).

With ``--key-file PATH`` the worker commits into an encrypted key scope (namespace
:data:`SEALED_NAMESPACE`, key id :data:`KEY_ID`) and now and then rotates its key. Keys never
appear on a command line: the file (0600, JSON ``{"keys": [hex, ...]}``) holds the current
key first; before each ``rotate_key`` the worker rewrites it with the current key and the
new one (durably: temporary file, fsync, rename, directory fsync), so whoever checks the
file after a kill can try both; once the rotation returned it holds the new key alone.
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

NAMESPACE = "crash"
SEALED_NAMESPACE = "tenant/crash"
SCOPE_PREFIX = "tenant/"
KEY_ID = "tenant"
CHUNK_SIZE = 64 * 1024
KEEP_LAST = 4
ROTATE_EVERY = 0.06  # chance, after a commit, of a rotate_key (encrypted mode)
#: Every sealed commit holds this marker in plaintext; it must never be on disk.
MARKER = b"MARKER-crash-plaintext"


def read_keys(path: Path) -> list[bytes]:
    """The keys of a key file, current first."""
    return [bytes.fromhex(k) for k in json.loads(path.read_text())["keys"]]


def write_keys(path: Path, keys: list[bytes]) -> None:
    """Replace the key file durably (owner-only)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps({"keys": [k.hex() for k in keys]}).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def entries_for(i: int, sealed: bool = False) -> dict[str, bytes]:
    """The content of commit ``i``: small JSON state; every 5th commit a chunked blob, and
    a blob shared by many commits (so GC has shared bytes to get wrong). ``sealed``: plus a
    text entry holding :data:`MARKER` (stored raw by zstd: random bytes in every line)."""
    rng = random.Random(i)
    out = {
        "state.json": json.dumps({"i": i}).encode(),
        "shared.bin": random.Random(i // 10).randbytes(CHUNK_SIZE + 100),
    }
    if i % 5 == 0:
        out["model.bin"] = rng.randbytes(rng.randint(CHUNK_SIZE + 1, 3 * CHUNK_SIZE))
    else:
        out["notes.txt"] = hashlib.sha256(str(i).encode()).hexdigest().encode() * rng.randint(1, 40)
    if sealed:
        out["secret.txt"] = b"".join(
            MARKER + b" %d %d " % (i, n) + rng.randbytes(40) + b"\n" for n in range(200)
        )
    return out


def label_for(i: int) -> str:
    """The label commit ``i`` is given (``commit(label=)``)."""
    return f"commit-{i}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--start", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--key-file", type=Path, help="encrypted mode: the keys (see above)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out = sys.stdout
    sealed = args.key_file is not None
    key = read_keys(args.key_file)[0] if sealed else b""
    namespace = SEALED_NAMESPACE if sealed else NAMESPACE
    keys = {KEY_ID: key} if sealed else None
    with ckptdb.open(args.db, chunk_size=CHUNK_SIZE, keys=keys) as db:
        if sealed:
            db.set_encryption(SCOPE_PREFIX, key_id=KEY_ID)  # the same again: a no-op
        out.write("READY\n")
        out.flush()
        i = args.start
        while True:
            ack = db.commit(
                namespace, entries_for(i, sealed), metadata={"i": i}, label=label_for(i)
            )
            out.write(f"ACK {i} {ack.checkpoint_id}\n")
            out.flush()
            if sealed and rng.random() < ROTATE_EVERY:
                new = os.urandom(32)
                write_keys(args.key_file, [key, new])  # before: a kill may land in between
                scope = db.rotate_key(KEY_ID, new)
                out.write(f"ROTATED {scope.key_generation}\n")
                out.flush()
                key = new
                write_keys(args.key_file, [key])
            roll = rng.random()
            if roll < 0.08:
                pin = db.pin(ack.checkpoint_id, f"pin-{i}")
                out.write(f"PIN {pin.name} {pin.checkpoint_id}\n")
                out.flush()
            elif roll < 0.25:
                report = db.gc(ckptdb.RetentionPolicy(keep_last=KEEP_LAST), grace=0)
                out.write(f"GC {report.checkpoints_deleted}\n")
                out.flush()
            elif roll < 0.31:
                # A fork lands whole or not at all (one transaction), in the source's scope.
                lineage = db.lineage(namespace, limit=KEEP_LAST)
                target = f"{SCOPE_PREFIX if sealed else ''}fork-{i}"
                copied = db.copy_checkpoints([c.id for c in reversed(lineage)], target)
                out.write(f"FORK {target} {copied.current_id}\n")
                out.flush()
            i += 1


if __name__ == "__main__":
    main()
