"""Reading what a replica holds: Litestream's list of its LTX files (``litestream ltx``),
asked of the replica storage itself, never of a running replicator; and the headers of a
local replica's LTX files, which record the WAL each file was cut from (:func:`audit`)."""

from __future__ import annotations

import itertools
import json
import os
import struct

from .. import errors
from .binaries import run_litestream
from .config import ReplicaURL
from .models import LtxAnomaly, LtxFile, LtxHeader


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


# -- LTX headers: the replica's own record of which WAL each file was cut from -----------

#: LTX (superfly/ltx, the format Litestream 0.5 writes): a 100-byte big-endian header,
#: page frames, a page index (uvarint triples ending in 0, then its u64 size) and a
#: 16-byte trailer.
_MAGIC = b"LTX1"
_HEADER = struct.Struct(">4sIIIQQqQqqIIQ")
_TRAILER_SIZE = 16


def read_header(path: str) -> LtxHeader:
    """The header of one LTX file, plus how many pages it carries (from its page index)."""
    with open(path, "rb") as handle:
        raw = handle.read(_HEADER.size)
        size = os.fstat(handle.fileno()).st_size
        if len(raw) < _HEADER.size or size < _HEADER.size + _TRAILER_SIZE + 8:
            raise errors.ReplicationError(f"{path} is too short to be an LTX file")
        (magic, flags, page_size, commit, min_txid, max_txid, timestamp, _checksum,
         wal_offset, wal_size, salt1, salt2, _node) = _HEADER.unpack(raw)  # fmt: skip
        if magic != _MAGIC:
            raise errors.ReplicationError(f"{path} is not an LTX file (magic {magic!r})")
        handle.seek(size - _TRAILER_SIZE - 8)
        index_size = int.from_bytes(handle.read(8), "big")
        start = size - _TRAILER_SIZE - 8 - index_size
        if index_size <= 0 or start < _HEADER.size:
            raise errors.ReplicationError(f"{path} has a damaged page index")
        handle.seek(start)
        pgnos = _index_pages(handle.read(index_size), path)
    return LtxHeader(
        path=path,
        flags=flags,
        page_size=page_size,
        commit=commit,
        min_txid=min_txid,
        max_txid=max_txid,
        timestamp_ms=timestamp,
        wal_offset=wal_offset,
        wal_size=wal_size,
        wal_salt1=salt1,
        wal_salt2=salt2,
        pages=len(pgnos),
        pgnos=frozenset(pgnos),
    )


def _index_pages(data: bytes, path: str) -> list[int]:
    """The page numbers of a page index (pgno, offset, size uvarints; a lone 0 ends it)."""
    found: list[int] = []
    pos = 0
    while True:
        values = []
        for _ in range(3):
            value, shift = 0, 0
            while True:
                if pos >= len(data) or shift > 63:
                    raise errors.ReplicationError(f"{path} has a damaged page index")
                byte = data[pos]
                pos += 1
                value |= (byte & 0x7F) << shift
                shift += 7
                if byte < 0x80:
                    break
            values.append(value)
            if not values[0]:
                return found  # the end marker is a single 0 (no offset or size follow)
        found.append(values[0])


def local_headers(replica_dir: str, level: int = 0) -> list[LtxHeader]:
    """The headers of every LTX file at ``level`` of a ``file://`` replica, oldest first."""
    folder = os.path.join(replica_dir, "ltx", str(level))
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".ltx"))
    except FileNotFoundError:
        return []
    headers = []
    for name in names:
        try:
            headers.append(read_header(os.path.join(folder, name)))
        except FileNotFoundError:
            continue  # compacted away between the listing and the read
    return sorted(headers, key=lambda h: (h.min_txid, h.max_txid))


def audit(headers: list[LtxHeader], *, seq_page: int | None = None) -> list[LtxAnomaly]:
    """What the level-0 headers of a replica say about WAL frames Litestream never copied.

    * ``skipped_wal_generation``: SQLite adds one to the WAL's salt-1 each time it
      restarts the WAL, so a replicator that saw every WAL generation lists salt-1 values
      that grow by exactly one; a bigger step means a whole generation was written,
      checkpointed and overwritten unread.
    * ``resnapshot``: a level-0 file after the first that carries every page of the
      database -- Litestream found the WAL overwritten behind its back and started over.
    * ``foreign_wal_restart`` (with ``seq_page``, the root page of ``_litestream_seq``):
      Litestream restarts the WAL itself, after copying every frame, with a write to
      ``_litestream_seq``, so the first file of each new WAL generation carries that page;
      one that does not was restarted by another connection's checkpoint, and whatever
      the old generation held past Litestream's last copy is missing from the replica.

    Any of them means something other than Litestream restarted the WAL while it was
    replicating. The verdict depends only on the files, not on timing."""
    found: list[LtxAnomaly] = []
    for previous, current in itertools.pairwise(headers):
        if current.wal_salt1 != previous.wal_salt1:
            step = (current.wal_salt1 - previous.wal_salt1) % (1 << 32)
            if step != 1:
                found.append(
                    LtxAnomaly(
                        kind="skipped_wal_generation",
                        txid=current.min_txid,
                        detail=f"WAL salt-1 went from {previous.wal_salt1} to "
                        f"{current.wal_salt1} between txid {previous.max_txid} and "
                        f"{current.min_txid}: {step - 1} WAL generation(s) never read",
                    )
                )
            elif seq_page is not None and not current.is_snapshot and seq_page not in current.pgnos:
                found.append(
                    LtxAnomaly(
                        kind="foreign_wal_restart",
                        txid=current.min_txid,
                        detail=f"the WAL generation starting at txid {current.min_txid} was "
                        "not started by Litestream (no write to _litestream_seq, page "
                        f"{seq_page}): another connection checkpointed and restarted the WAL",
                    )
                )
        if current.is_snapshot:
            found.append(
                LtxAnomaly(
                    kind="resnapshot",
                    txid=current.min_txid,
                    detail=f"txid {current.min_txid} is a full snapshot ({current.pages} of "
                    f"{current.commit} pages): Litestream lost its place in the WAL",
                )
            )
    return found
