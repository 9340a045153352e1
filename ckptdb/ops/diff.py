"""``diff``: what changed between two checkpoints, and how they are related.

Entries are compared by digest (and media type / schema pin). For an entry whose bytes
changed, ``bytes_shared`` counts the bytes of the new content that sit in chunks the old
content has too (same chunk digest): with chunked storage, a large entry that changed a
little shares most of its bytes. Inline (small) blobs share nothing unless equal.

The lineage relation follows stored parent links from both checkpoints (the same walk as
the ``lineage`` view: each step to a strictly smaller generation). Both manifests are
checked against their ids; ``verify`` checks every link.
"""

from __future__ import annotations

import json
from typing import Any

from .. import models
from ..store import checkpoints
from ..store.rows import EntryRow
from .checkpoint import Checkpoint, metadata_of
from .unit import Unit, reads


def _chunk_sizes(tx: Unit, entry: EntryRow) -> dict[str, int]:
    """digest -> size of the chunks of a chunked blob (empty for an inline blob)."""
    if entry.chunk_count == 0:
        return {}
    _, chunks = tx.blobs.chunk_list(entry.blob_id)
    return {c[1]: c[2] for c in chunks if c[1] is not None and c[2] is not None}


def _shared(tx: Unit, old: EntryRow, new: EntryRow) -> int:
    if old.digest == new.digest:
        return new.size
    theirs = _chunk_sizes(tx, old)
    if not theirs:
        return 0
    if new.chunk_count == 0:
        return 0
    _, chunks = tx.blobs.chunk_list(new.blob_id)
    return sum(c[2] for c in chunks if c[1] is not None and c[2] is not None and c[1] in theirs)


def _entries(
    tx: Unit, a: dict[str, EntryRow], b: dict[str, EntryRow]
) -> tuple[list[models.EntryDiff], int]:
    out: list[models.EntryDiff] = []
    unchanged = 0
    for name in sorted(a.keys() | b.keys()):
        ea, eb = a.get(name), b.get(name)
        if ea is not None and eb is not None:
            same_bytes = ea.digest == eb.digest
            if same_bytes and (ea.media_type, ea.schema_pin) == (eb.media_type, eb.schema_pin):
                unchanged += 1
                continue
            change = "changed"
            shared = _shared(tx, ea, eb) if not same_bytes else eb.size
        else:
            change = "added" if ea is None else "removed"
            shared = 0
        out.append(
            models.EntryDiff(
                name=name,
                change=change,  # type: ignore[arg-type]
                size_a=None if ea is None else ea.size,
                size_b=None if eb is None else eb.size,
                digest_a=None if ea is None else ea.digest,
                digest_b=None if eb is None else eb.digest,
                content_changed=ea is None or eb is None or ea.digest != eb.digest,
                bytes_shared=shared if change == "changed" else 0,
                media_type_a=None if ea is None else ea.media_type,
                media_type_b=None if eb is None else eb.media_type,
                schema_pin_a=None if ea is None else ea.schema_pin,
                schema_pin_b=None if eb is None else eb.schema_pin,
            )
        )
    return out, unchanged


def _metadata(a: dict[str, Any], b: dict[str, Any]) -> list[models.MetadataDiff]:
    out: list[models.MetadataDiff] = []
    for key in sorted(a.keys() | b.keys()):
        if key not in b:
            out.append(models.MetadataDiff(key=key, change="removed", a=a[key]))
        elif key not in a:
            out.append(models.MetadataDiff(key=key, change="added", b=b[key]))
        elif json.dumps(a[key], sort_keys=True) != json.dumps(b[key], sort_keys=True):
            out.append(models.MetadataDiff(key=key, change="changed", a=a[key], b=b[key]))
    return out


def _ancestry(tx: Unit, checkpoint_id: str) -> dict[str, int]:
    """id -> distance (generations) of every stored ancestor of a checkpoint, itself at 0."""
    return {row.id: i for i, row in enumerate(checkpoints.lineage(tx.conn, checkpoint_id, None))}


def relation(tx: Unit, a: str, b: str) -> tuple[str, str | None, int | None, int | None]:
    """(relation, common ancestor, generations from it to a, to b) -- see
    :class:`ckptdb.models.CheckpointDiff`."""
    if a == b:
        return "same", a, 0, 0
    up_a = _ancestry(tx, a)
    if b in up_a:
        return "descendant", b, up_a[b], 0
    up_b = _ancestry(tx, b)
    if a in up_b:
        return "ancestor", a, 0, up_b[a]
    # The newest common ancestor: the shared id nearest to b (then to a).
    shared = [(up_b[i], up_a[i], i) for i in up_b if i in up_a]
    if not shared:
        return "unrelated", None, None, None
    db, da, common = min(shared)
    return "siblings", common, da, db


@reads
def diff(tx: Unit, a: str, b: str) -> models.CheckpointDiff:
    """See :meth:`ckptdb.Database.diff` (inside a read transaction)."""
    conn = tx.conn
    rows = {}
    for cid in (a, b):
        row = checkpoints.require_checkpoint(conn, cid)
        entries = checkpoints.entries_of(conn, row.seq)
        Checkpoint(tx.handle, row, entries)  # the manifest must hash to its id
        rows[cid] = (row, {e.name: e for e in entries})
    (row_a, entries_a), (row_b, entries_b) = rows[a], rows[b]
    changes, unchanged = _entries(tx, entries_a, entries_b)
    rel, common, gen_a, gen_b = relation(tx, a, b)
    return models.CheckpointDiff(
        a=a,
        b=b,
        namespace_a=row_a.namespace,
        namespace_b=row_b.namespace,
        relation=rel,  # type: ignore[arg-type]
        common_ancestor_id=common,
        generations_a=gen_a,
        generations_b=gen_b,
        entries=changes,
        unchanged=unchanged,
        size_a=row_a.total_size,
        size_b=row_b.total_size,
        metadata=_metadata(metadata_of(tx.handle, row_a), metadata_of(tx.handle, row_b)),
    )
