"""The ``checkpoint.entries`` text of storage format 3: written here (:func:`pack`) on both
engines, and read here (:func:`unpacked`) on PostgreSQL, where a statement cannot turn a
damaged array into a reported corruption as SQLite's ``json_valid`` lets it (docs/
postgresql.md: parsing in Python measured as fast for a page, twice as fast for a scan).

Owned with the ``checkpoint`` table by :mod:`.checkpoints`; this module only encodes and
decodes the one column (and reads the blob rows the decoded entries name).
"""

from __future__ import annotations

import json
from typing import Any

from ..connection.engine import EngineConnection
from . import dialect


def pack(entries: list[tuple[str, int, str | None, str | None]]) -> str:
    """The ``checkpoint.entries`` text of these (name, blob_id, media_type, schema_pin)
    entries, given in name order: a JSON array of arrays without spaces, each without its
    trailing nulls (most entries have neither media type nor schema pin; a reader's
    ``json_extract`` of a missing element is NULL all the same)."""
    return json.dumps(
        [
            (name, blob_id) if media is None and pin is None else (name, blob_id, media, pin)
            for name, blob_id, media, pin in entries
        ],
        separators=(",", ":"),
        ensure_ascii=False,
    )


def unpacked(
    conn: EngineConnection, packed: list[tuple[int, object]], inline_of: tuple[str, ...]
) -> tuple[dict[int, list[tuple[Any, ...]]], dict[int, dict[str, tuple[object, object, object]]]]:
    """The entries of packed ``checkpoint.entries`` texts by seq, each as (checkpoint_seq,
    name, blob_id, digest, size, media_type, schema_pin, chunk_count, scope_id) -- its blob
    row's columns read in one statement, None where it has none -- and the stored (bytes,
    codec, scope) of the entries named in ``inline_of`` whose blob is inline. A text that
    is not a JSON array of arrays yields one entry of nulls, which the type check reports
    as damage (as the SQLite statement does)."""
    parsed: dict[int, list[list[Any]]] = {}
    blob_ids: set[int] = set()
    held_ids: set[int] = set()  # the blobs whose stored bytes come along
    for seq, text in packed:
        items: list[list[Any]] = [[None]]
        if isinstance(text, str):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if isinstance(value, list):
                items = [v if isinstance(v, list) and v else [None] for v in value]
        parsed[seq] = items
        for v in items:
            if len(v) > 1 and type(v[1]) is int:
                blob_ids.add(v[1])
                if v[0] in inline_of:
                    held_ids.add(v[1])
    blobs: dict[int, tuple[Any, ...]] = {}
    for r in conn.execute(
        "SELECT blob_id, digest, size, chunk_count, scope_id, CASE WHEN chunk_count = 0 AND"
        f" blob_id IN {dialect.int_list(conn, '?2')} THEN inline_data END, codec FROM blob"
        f" WHERE blob_id IN {dialect.int_list(conn, '?1')}",
        (json.dumps(sorted(blob_ids)), json.dumps(sorted(held_ids))),
    ):
        blobs[r[0]] = r
    entries: dict[int, list[tuple[Any, ...]]] = {}
    held: dict[int, dict[str, tuple[object, object, object]]] = {}
    for seq, items in parsed.items():
        rows = entries[seq] = []
        for item in items:
            name, blob_id, media, pin = (*item, None, None, None, None)[:4]
            b = blobs.get(blob_id) if type(blob_id) is int else None
            if b is None:
                rows.append((seq, name, blob_id, None, None, media, pin, None, None))
                continue
            rows.append((seq, name, blob_id, b[1], b[2], media, pin, b[3], b[4]))
            if b[5] is not None and name in inline_of:
                held.setdefault(seq, {})[name] = (b[5], b[6], b[4])
    return entries, held
