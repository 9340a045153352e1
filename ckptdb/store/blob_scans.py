"""Whole-table reads and deletes of the blob tables: for verify, stats, GC's orphan
sweep and shredding a key scope.

Functions taking the connection, like the other table modules: they scan every blob or
chunk (verify reads each one as stored, to judge it itself), count and total them, or
delete what nothing references any more (orphan chunks) or may reference (a shredded key
scope's records). Nothing here keeps state; the deletes of a GC batch are in
:mod:`.gc_batch`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from ..connection import Connection
from ..connection.engine import EngineConnection
from . import dialect
from .crypto import PLAINTEXT, Scope
from .encoding import decoded


def count_chunks(conn: EngineConnection) -> int:
    """Number of stored chunks."""
    return int(conn.scalar("SELECT count(*) FROM chunk") or 0)


def count_blobs(conn: EngineConnection) -> int:
    """Number of stored blobs."""
    return int(conn.scalar("SELECT count(*) FROM blob") or 0)


def iter_chunks_with_bytes(conn: EngineConnection) -> Iterator[tuple[Any, ...]]:
    """(chunk_id, digest, size, codec, stored size, stored bytes, scope_id, sealed_digest)
    of every chunk, values as stored (for verify)."""
    return conn.iterate(
        "SELECT c.chunk_id, c.digest, c.size, c.codec, c.stored_size, d.data, c.scope_id,"
        " c.sealed_digest FROM chunk c LEFT JOIN chunk_data d ON d.chunk_id = c.chunk_id"
    )


def iter_blob_rows(conn: EngineConnection, *, with_inline: bool) -> Iterator[tuple[Any, ...]]:
    """(blob_id, digest, size, chunk_count, chunk_list_digest, inline bytes or None, codec,
    scope_id, sealed_digest) of every blob, values as stored (for verify)."""
    return conn.iterate(
        "SELECT blob_id, digest, size, chunk_count, chunk_list_digest,"
        f" {'inline_data' if with_inline else 'NULL'}, codec, scope_id, sealed_digest FROM blob"
    )


def chunk_rows_of(conn: EngineConnection, blob_id: int) -> list[tuple[Any, ...]]:
    """(seq, chunk_id, digest, size) of a blob's chunk list in order, values as stored
    (digest and size None where the chunk is gone)."""
    return conn.execute(
        "SELECT bc.seq, bc.chunk_id, c.digest, c.size FROM blob_chunk bc"
        " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id WHERE bc.blob_id = ? ORDER BY bc.seq",
        (blob_id,),
    )


def chunk_raw(conn: EngineConnection, chunk_id: int, scope: Scope = PLAINTEXT) -> bytes | None:
    """The decoded (unverified) bytes of one chunk, or None when they do not decode."""
    row = conn.one(
        "SELECT c.codec, d.data, c.size, c.digest FROM chunk c JOIN chunk_data d"
        " ON d.chunk_id = c.chunk_id WHERE c.chunk_id = ?",
        (chunk_id,),
    )
    if row is None or not isinstance(row[2], int):
        return None
    return decoded(row[0], row[1], row[2], scope, row[3] if isinstance(row[3], str) else "")


def stored_bytes(conn: EngineConnection) -> tuple[int, int]:
    """(inline bytes, chunk bytes) stored, after compression."""
    row = conn.one(
        "SELECT (SELECT coalesce(sum(length(inline_data)), 0) FROM blob WHERE chunk_count = 0),"
        " (SELECT coalesce(sum(coalesce(stored_size, size)), 0) FROM chunk)"
    )
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def delete_orphan_chunks(conn: EngineConnection, cutoff_ms: int, limit: int) -> tuple[int, int]:
    """Delete up to ``limit`` chunks no blob references that were last touched before
    ``cutoff_ms`` (staged by a publish that crashed or lost a compare-and-swap; GC's grace
    period protects those still being staged). Returns (count, bytes)."""
    if conn.dialect != "sqlite":
        return delete_unreferenced_chunks(conn, cutoff_ms, limit=limit)
    rows = conn.execute(
        "DELETE FROM chunk WHERE chunk_id IN (SELECT c.chunk_id FROM chunk c"
        " WHERE c.last_touched_ms < :cutoff AND NOT EXISTS"
        " (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = c.chunk_id) LIMIT :limit)"
        " AND last_touched_ms < :cutoff"
        " AND NOT EXISTS (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = chunk.chunk_id)"
        " RETURNING size",
        {"cutoff": cutoff_ms, "limit": limit},
    )
    return len(rows), sum(r[0] for r in rows if type(r[0]) is int)


def held_orphan_chunks(
    conn: EngineConnection, cutoff_ms: int
) -> tuple[int, int, int | None, int | None]:
    """(count, bytes, oldest and newest last touch in ms) of the chunks no blob references
    that were touched at or after ``cutoff_ms``: what GC's grace period keeps."""
    row = conn.one(
        "SELECT count(*), coalesce(sum(size), 0), min(last_touched_ms), max(last_touched_ms)"
        " FROM chunk c WHERE c.last_touched_ms >= ?"
        " AND NOT EXISTS (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = c.chunk_id)",
        (cutoff_ms,),
    )
    return (0, 0, None, None) if row is None else (int(row[0]), int(row[1]), row[2], row[3])


def delete_staged_chunks(
    conn: EngineConnection, chunk_ids: Sequence[int], staged_at_ms: int
) -> tuple[int, int]:
    """Delete those of ``chunk_ids`` -- chunks one commit inserted while staging, at
    ``staged_at_ms`` -- that no blob references and nothing touched since (a dedup hit of
    another commit's staging moves the time). Returns (count, bytes)."""
    rows = conn.execute(
        f"DELETE FROM chunk WHERE chunk_id IN {dialect.int_list(conn)}"
        " AND last_touched_ms = ?"
        " AND NOT EXISTS (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = chunk.chunk_id)"
        " RETURNING size",
        (json.dumps([int(c) for c in chunk_ids]), staged_at_ms),
    )
    return len(rows), sum(r[0] for r in rows if type(r[0]) is int)


def delete_scope_records(conn: EngineConnection, scope_id: int) -> tuple[int, int]:
    """Delete every blob and chunk of a key scope (its namespaces are gone: nothing else
    can reference them). Returns (blobs, chunks) deleted."""
    conn.execute(
        "DELETE FROM blob_chunk WHERE blob_id IN (SELECT blob_id FROM blob WHERE scope_id = ?)",
        (scope_id,),
    )
    blobs = len(conn.execute("DELETE FROM blob WHERE scope_id = ? RETURNING blob_id", (scope_id,)))
    # A chunk of the scope still listed by a blob of another scope cannot exist (addresses
    # are keyed per scope); the NOT EXISTS keeps the foreign key safe even so.
    chunks = len(
        conn.execute(
            "DELETE FROM chunk WHERE scope_id = ? AND NOT EXISTS"
            " (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = chunk.chunk_id) RETURNING chunk_id",
            (scope_id,),
        )
    )
    return blobs, chunks


def scope_record_counts(conn: Connection, scope_id: int) -> tuple[int, int]:
    """(blobs, chunks) stored for a key scope."""
    row = conn.one(
        "SELECT (SELECT count(*) FROM blob WHERE scope_id = ?1),"
        " (SELECT count(*) FROM chunk WHERE scope_id = ?1)",
        (scope_id,),
    )
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


#: The chunk ids of the JSON array bound at ?2 (PostgreSQL).
_LISTED = "(SELECT l.x::BIGINT AS id FROM jsonb_array_elements_text(?2::jsonb) AS l(x))"


def delete_unreferenced_chunks(
    conn: EngineConnection,
    cutoff_ms: int,
    chunk_ids: list[int] | None = None,
    limit: int | None = None,
) -> tuple[int, int]:
    """PostgreSQL: delete the chunks no blob references that were last touched before
    ``cutoff_ms`` -- among ``chunk_ids`` if given, at most ``limit`` -- each locked first,
    skipping those a publish holds, and checked for references after the locks (see
    :mod:`.gc_batch`). Returns (count, bytes)."""
    among = "" if chunk_ids is None else f" AND chunk_id IN {_LISTED}"
    bound = "" if limit is None else f" LIMIT {int(limit)}"
    listed = () if chunk_ids is None else (json.dumps(sorted(set(chunk_ids))),)
    locked = [
        int(r[0])
        for r in conn.execute(
            f"SELECT chunk_id FROM chunk c WHERE last_touched_ms < ?1{among}"
            " AND NOT EXISTS (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = c.chunk_id)"
            f" ORDER BY chunk_id{bound} FOR UPDATE SKIP LOCKED",
            (cutoff_ms, *listed),
        )
    ]
    if not locked:
        return 0, 0
    rows = conn.execute(
        f"DELETE FROM chunk c WHERE chunk_id IN {_LISTED} AND last_touched_ms < ?1"
        " AND NOT EXISTS (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = c.chunk_id)"
        " RETURNING size",
        (cutoff_ms, json.dumps(locked)),
    )
    return len(rows), sum(r[0] for r in rows if type(r[0]) is int)
