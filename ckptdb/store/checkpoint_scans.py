"""Whole-table reads of the checkpoint tables: for verify, GC's mark, deletion by
metadata, stats, export and import.

Functions taking the connection, like :mod:`.checkpoints` (which owns these tables and
holds every read of one checkpoint or lineage); these read every row, as stored, for a
caller that judges it itself. Nothing here writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from ..connection import Connection
from ..connection.engine import EngineConnection
from . import dialect
from .checkpoints import CHECKPOINT_COLUMNS, EVERY_ENTRY, checkpoint_row
from .packed import unpacked
from .rows import CheckpointRow, check_types

_N = type(None)
_CANDIDATE_TYPES: tuple[Any, ...] = (int, int, int, int, (str, _N))


def iter_retention_candidates(
    conn: EngineConnection,
    namespace_ids: list[int],
    *,
    with_metadata: bool,
    seqs: Iterable[int] | None = None,
) -> Iterator[tuple[int, int, int, int, str | None]]:
    """(seq, namespace_id, generation, created_at_ms, metadata or None) of every checkpoint
    of the given namespaces (with ``seqs``: only of those checkpoints), type-checked."""
    only = "" if seqs is None else f" AND seq IN {dialect.int_list(conn)}"
    listed = () if seqs is None else (json.dumps([int(s) for s in seqs]),)
    for start in range(0, len(namespace_ids), 500):
        part = namespace_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        for row in conn.iterate(
            "SELECT seq, namespace_id, generation, created_at_ms,"
            f" {'metadata' if with_metadata else 'NULL'} FROM checkpoint"
            f" WHERE namespace_id IN ({marks}){only}",
            (*part, *listed),
        ):
            # The check of check_types, inlined: GC reads every candidate row (100,000 at a
            # time), and the generic loop was a third of the mark phase. apsw returns exact
            # ints and strs (never a subclass), so ``type(...) is`` is the same test.
            seq, namespace_id, generation, created, meta = row
            if not (
                type(seq) is int
                and type(namespace_id) is int
                and type(generation) is int
                and type(created) is int
                and (meta is None or type(meta) is str)
            ):
                check_types(row, _CANDIDATE_TYPES, "checkpoint row")  # raises CorruptionError
            yield row


def seqs_in_namespaces(conn: EngineConnection, namespace_ids: list[int]) -> list[int]:
    """The seqs of every checkpoint of the given namespaces (GC's mark: one integer column
    from the per-namespace index, no row decoding)."""
    out: list[int] = []
    for start in range(0, len(namespace_ids), 500):
        part = namespace_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        if conn.dialect != "sqlite":
            out.extend(
                int(r[0])
                for r in conn.execute(
                    f"SELECT seq FROM checkpoint WHERE namespace_id IN ({marks})", part
                )
            )
            continue
        # One JSON array rather than a row per seq: json.loads builds the list in C, half
        # the cost of fetching 100,000 one-column rows. ``seq`` is the rowid: always an
        # integer, so no type check is needed.
        listed = conn.scalar(
            f"SELECT json_group_array(seq) FROM checkpoint WHERE namespace_id IN ({marks})",
            part,
        )
        out.extend(json.loads(listed))
    return out


def iter_metadata(conn: EngineConnection) -> Iterator[tuple[int, str, str, str]]:
    """(seq, id, namespace, metadata JSON) of every checkpoint."""
    for row in conn.iterate(
        "SELECT c.seq, c.id, n.name, c.metadata FROM checkpoint c"
        " JOIN namespace n ON n.namespace_id = c.namespace_id"
    ):
        check_types(row, (int, str, str, str), "checkpoint row")
        yield row


def all_rows(conn: Connection) -> list[CheckpointRow]:
    """Every checkpoint row (for import), type-checked."""
    rows = conn.execute(f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoint c")
    return [checkpoint_row(r) for r in rows]


def count(conn: EngineConnection) -> int:
    """Number of stored checkpoints."""
    return int(conn.scalar("SELECT count(*) FROM checkpoint") or 0)


def generations(conn: EngineConnection) -> dict[Any, Any]:
    """id -> generation of every checkpoint (as stored; for verify's lineage check)."""
    return dict(conn.execute("SELECT id, generation FROM checkpoint"))


def iter_manifests(conn: EngineConnection) -> Iterator[tuple[Any, ...]]:
    """Every checkpoint row with each of its entries (one row per entry, a checkpoint with
    none once), ordered by checkpoint then entry name, values as stored (for verify):
    the 10 checkpoint columns, the 8 entry columns, then ``code_revision`` and ``label``."""
    if conn.dialect != "sqlite":
        return _pg_manifests(conn)
    return conn.iterate(
        "SELECT c.seq, c.id, n.name, c.namespace_id, c.parent_id, c.generation,"
        " c.created_at_ms, c.metadata, c.entry_count, c.total_size,"
        " e.name, e.blob_id, b.digest, b.size, e.media_type, e.schema_pin, b.chunk_count,"
        " b.scope_id, c.code_revision, c.label"
        " FROM checkpoint c JOIN namespace n ON n.namespace_id = c.namespace_id"
        f" LEFT JOIN ({EVERY_ENTRY}) e ON e.checkpoint_seq = c.seq"
        " LEFT JOIN blob b ON b.blob_id = e.blob_id ORDER BY c.seq, e.name"
    )


def _pg_manifests(conn: EngineConnection) -> Iterator[tuple[Any, ...]]:
    """:func:`iter_manifests` on PostgreSQL: the rows in pages of 500, their packed entries
    parsed here with their blob rows read by id (:func:`.packed.unpacked`), in the
    same shape and order."""
    rows = conn.iterate(
        "SELECT c.seq, c.id, n.name, c.namespace_id, c.parent_id, c.generation,"
        " c.created_at_ms, c.metadata, c.entry_count, c.total_size, c.code_revision, c.label,"
        " c.entries FROM checkpoint c JOIN namespace n ON n.namespace_id = c.namespace_id"
        " ORDER BY c.seq"
    )
    page: list[tuple[Any, ...]] = []
    for row in rows:
        page.append(row)
        if len(page) == 500:
            yield from _pg_manifest_page(conn, page)
            page = []
    yield from _pg_manifest_page(conn, page)


def _pg_manifest_page(
    conn: EngineConnection, page: list[tuple[Any, ...]]
) -> Iterator[tuple[Any, ...]]:
    if not page:
        return
    entries, _ = unpacked(conn, [(r[0], r[12]) for r in page], ())
    for r in page:
        listed = sorted(entries[r[0]], key=lambda e: (e[1] is None, str(e[1])))
        if not listed:
            yield (*r[:10], *(None,) * 8, r[10], r[11])
        for e in listed:
            # (name, blob_id, digest, size, media_type, schema_pin, chunk_count, scope_id)
            yield (*r[:10], *e[1:9], r[10], r[11])


def blob_refs_missing(conn: EngineConnection) -> list[tuple[Any, Any]]:
    """(checkpoint_seq, blob_id) of every packed entry without its ``blob_ref`` row (GC
    would not see that the entry uses the blob)."""
    if conn.dialect != "sqlite":
        return _pg_blob_refs_missing(conn)
    return conn.execute(
        "SELECT c.seq, json_extract(j.value, '$[1]') FROM checkpoint c, json_each(c.entries) j"
        " WHERE c.entries IS NOT NULL AND json_valid(c.entries) AND NOT EXISTS (SELECT 1"
        " FROM blob_ref r WHERE r.blob_id = json_extract(j.value, '$[1]')"
        " AND r.checkpoint_seq = c.seq) ORDER BY 1"
    )


def _pg_packed_refs(conn: EngineConnection) -> Iterator[tuple[int, int]]:
    """(checkpoint_seq, blob_id) of every packed entry, parsed here (PostgreSQL); a row
    whose entries are not a JSON array of arrays contributes nothing (verify reports it)."""
    for seq, text in conn.iterate("SELECT seq, entries FROM checkpoint ORDER BY seq"):
        try:
            entries = json.loads(text) if isinstance(text, str) else []
        except ValueError:
            continue
        for entry in entries if isinstance(entries, list) else []:
            blob_id = entry[1] if isinstance(entry, list) and len(entry) > 1 else None
            if type(blob_id) is int:
                yield int(seq), blob_id


def _pg_blob_refs_missing(conn: EngineConnection) -> list[tuple[Any, Any]]:
    """:func:`blob_refs_missing` on PostgreSQL, whose packed entries are parsed here (as
    every read of them there is: docs/postgresql.md); inside the caller's transaction."""
    refs = {
        (int(s), int(b)) for s, b in conn.iterate("SELECT checkpoint_seq, blob_id FROM blob_ref")
    }
    return [pair for pair in dict.fromkeys(_pg_packed_refs(conn)) if pair not in refs]


def blob_refs_possibly_missing(conn: EngineConnection) -> bool:
    """Whether :func:`blob_refs_missing` may find something: False when the ``blob_ref``
    rows number exactly the packed entries (two aggregates, no JSON parsed). A checkpoint
    naming one blob under two names has one row for both, so a mismatch alone proves
    nothing: the caller then runs the exact scan."""
    row = conn.one(
        "SELECT (SELECT count(*) FROM blob_ref),"
        " (SELECT coalesce(sum(entry_count), 0) FROM checkpoint WHERE entries IS NOT NULL)"
    )
    return row is None or row[0] != row[1]


def blob_refs_stray(conn: EngineConnection) -> list[tuple[Any, Any]]:
    """(checkpoint_seq, blob_id) of every ``blob_ref`` row no packed entry accounts for
    (it only keeps a blob from being collected)."""
    if conn.dialect != "sqlite":
        used = set(_pg_packed_refs(conn))
        return sorted(
            (int(s), int(b))
            for s, b in conn.iterate("SELECT checkpoint_seq, blob_id FROM blob_ref")
            if (int(s), int(b)) not in used
        )
    return conn.execute(
        "SELECT r.checkpoint_seq, r.blob_id FROM blob_ref r WHERE NOT EXISTS (SELECT 1"
        " FROM checkpoint c, json_each(CASE WHEN json_valid(c.entries) THEN c.entries"
        " ELSE '[]' END) j WHERE c.seq = r.checkpoint_seq"
        " AND json_extract(j.value, '$[1]') = r.blob_id) ORDER BY 1"
    )


def logical_bytes(conn: EngineConnection) -> int:
    """Sum of every checkpoint's total size (what the checkpoints hold, before dedup)."""
    return int(conn.scalar("SELECT coalesce(sum(total_size), 0) FROM checkpoint") or 0)


def ids_with_namespaces(conn: Connection) -> list[tuple[Any, ...]]:
    """(id, namespace name) of every checkpoint, values as stored (for import checks)."""
    return conn.execute(
        "SELECT c.id, n.name FROM checkpoint c JOIN namespace n ON n.namespace_id = c.namespace_id"
    )
