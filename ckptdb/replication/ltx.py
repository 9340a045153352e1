"""Reading what a replica holds: Litestream's list of its LTX files (``litestream ltx``),
asked of the replica storage itself, never of a running replicator."""

from __future__ import annotations

import json
import os

from .. import errors
from .binaries import run_litestream
from .config import ReplicaURL
from .models import LtxFile


def list_files(replica: ReplicaURL, *, env: dict[str, str] | None = None) -> list[LtxFile]:
    """Every LTX file of the replica at every level, oldest first. Empty: no replica."""
    local = replica.local_dir
    if local is not None and not os.path.isdir(local):
        return []
    result = run_litestream(["ltx", "-json", "-level", "all", replica.url], env=env, timeout=60)
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        text = message[-1] if message else f"exit status {result.returncode}"
        if any(word in text.lower() for word in ("not found", "no such", "nosuchbucket")):
            return []
        raise errors.ReplicationError(f"cannot list the replica {replica.display}: {text}")
    try:
        rows = json.loads(result.stdout or "[]") or []
        files = [
            LtxFile(
                level=int(r["level"]),
                min_txid=int(r["min_txid"], 16),
                max_txid=int(r["max_txid"], 16),
                size=int(r["size"]),
                timestamp=r["timestamp"],
            )
            for r in rows
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.ReplicationError(
            f"litestream listed the replica {replica.display} in a form ckptdb does not read: {exc}"
        ) from exc
    return sorted(files, key=lambda f: (f.max_txid, f.level))


def head_txid(files: list[LtxFile]) -> int | None:
    """The newest transaction id a listing holds."""
    return max((f.max_txid for f in files), default=None)
