"""GC's batch: the checkpoints one sweep transaction deletes, and what that frees.

A :class:`GcBatch` holds three lists of row ids in temporary tables of its connection --
the checkpoints (seqs) to delete, the blobs they may free, the chunks those may free -- and
runs every step of a deletion or of its estimate as one set-based statement over them (no
per-row Python, no round trip of ids through Python: an executemany of one row per id cost
more than the deletions of a batch's blobs). This module alone names those tables; callers
get typed operations.

Why the deletes live here and not in the tables' own modules (:mod:`.checkpoints`,
:mod:`.blobs`): each is one statement joining a temporary list with the table, so keeping it
there would mean handing that module the list's table name or SQL text, or the ids through
Python. The batch is a GC-only view over those tables: it deletes only rows its lists name,
only as GC and a quota's eviction do, and the guard that refuses to delete a CURRENT or
fallback (every deletion of checkpoints passes here) moved here with it. Inserting and
reading rows stays with the tables' modules.

Like every store function, a batch works inside its caller's transaction and opens none.

On PostgreSQL (:class:`_SharedGcBatch`) the lists travel as JSON parameters instead (a
temporary table cannot be created in a read-only transaction, where a dry run estimates),
and other writers run during a batch: it deletes a blob or chunk only once it holds the
row's lock (``FOR UPDATE SKIP LOCKED``: one a publish is about to reference -- it read it
``FOR KEY SHARE`` -- is skipped, and a publish that comes later waits, then finds it gone),
and decides that nothing references it in a statement run after taking the locks (so it
sees every reference committed before). The foreign keys from ``blob_ref`` and
``blob_chunk`` stay the last guard: a delete that would leave a reference dangling fails,
and the caller's transaction with it. PostgreSQL stores no format-2 ``entry`` rows and
writes every ``blob_ref`` row with its checkpoint, so the batch lists blobs from those.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from .. import errors
from ..connection.engine import EngineConnection
from .blob_scans import delete_unreferenced_chunks

_TABLES = ("gc_checkpoint", "gc_blob", "gc_chunk")
_CREATE = (
    "CREATE TEMP TABLE IF NOT EXISTS gc_checkpoint (seq INTEGER PRIMARY KEY)",
    "CREATE TEMP TABLE IF NOT EXISTS gc_blob (blob_id INTEGER PRIMARY KEY)",
    "CREATE TEMP TABLE IF NOT EXISTS gc_chunk (chunk_id INTEGER PRIMARY KEY)",
)
_EMPTY = tuple(f"DELETE FROM temp.{table}" for table in _TABLES)
_DROP = tuple(f"DROP TABLE IF EXISTS temp.{table}" for table in _TABLES)
_CHECKPOINTS = "(SELECT seq FROM temp.gc_checkpoint)"
#: (blob_id, checkpoint_seq) of every packed entry of the listed checkpoints (format 3); a
#: packed array that is not valid JSON contributes nothing (its blobs stay: a leak that
#: verify reports, never a blob freed while in use).
_PACKED_REFS = (
    "(SELECT json_extract(j.value, '$[1]') AS blob_id, c.seq AS checkpoint_seq"
    " FROM checkpoint c, json_each(c.entries) j"
    f" WHERE c.seq IN {_CHECKPOINTS} AND c.entries IS NOT NULL AND json_valid(c.entries))"
)
_BLOBS = "(SELECT blob_id FROM temp.gc_blob)"
#: A chunk ``c`` that no blob references once the listed blobs are deleted (a chunk only
#: they use, or one no blob uses now).
_ORPHANED = (
    "(c.chunk_id IN (SELECT bc.chunk_id FROM blob_chunk bc"
    f"   WHERE bc.blob_id IN {_BLOBS})"
    "  AND NOT EXISTS (SELECT 1 FROM blob_chunk bc2 WHERE bc2.chunk_id = c.chunk_id"
    f"   AND bc2.blob_id NOT IN {_BLOBS})"
    "  OR NOT EXISTS (SELECT 1 FROM blob_chunk bc3 WHERE bc3.chunk_id = c.chunk_id))"
)


class GcBatch:
    """The checkpoints one GC step deletes (or estimates), with the blobs and chunks that
    may become unreferenced, listed in temporary tables of one connection.

    Open it with :meth:`open` inside the caller's transaction. Its steps, in order:
    :meth:`list_blobs` (before the checkpoints' entries go), :meth:`delete_checkpoints`,
    :meth:`unlist_blobs_in_use`, :meth:`list_chunks`, :meth:`delete_blobs`,
    :meth:`delete_chunks` -- or, for an estimate that deletes nothing,
    :meth:`checkpoint_ids`, :meth:`list_blobs`, ``unlist_blobs_in_use(ignore_listed=True)``,
    :meth:`blob_totals` and :meth:`chunks_freed`.
    """

    def __init__(self, conn: EngineConnection) -> None:
        self._conn = conn

    @classmethod
    @contextmanager
    def open(cls, conn: EngineConnection, seqs: Iterable[int]) -> Iterator[GcBatch]:
        """A batch listing the checkpoints ``seqs`` (no blobs or chunks yet), inside the
        caller's transaction. Its lists are emptied when the block ends (the tables stay
        until :meth:`drop_tables`: an eviction runs inside a commit that may still be
        reading, and SQLite refuses to drop a table under a running statement). After an
        error the lists are left as they are: the caller's rollback takes what this
        transaction created, and the next batch empties the rest."""
        if conn.dialect != "sqlite":
            yield _SharedGcBatch(conn, seqs)
            return
        for statement in _CREATE + _EMPTY:
            conn.execute(statement)
        # One statement for the whole list (SQLite parses the JSON array in C).
        conn.execute(
            "INSERT OR IGNORE INTO temp.gc_checkpoint (seq) SELECT value FROM json_each(?)",
            (json.dumps([int(s) for s in seqs]),),
        )
        yield cls(conn)
        for statement in _EMPTY:
            conn.execute(statement)

    @staticmethod
    def drop_tables(conn: EngineConnection) -> None:
        """Drop the batches' temporary tables, when a GC is over (inside the caller's
        transaction, with no statement of it still running; PostgreSQL's batches make
        none)."""
        if conn.dialect != "sqlite":
            return
        for statement in _DROP:
            conn.execute(statement)

    # -- checkpoints ----------------------------------------------------------------------

    def checkpoint_ids(self) -> list[str]:
        """Ids of the listed checkpoints that are stored, by seq."""
        # ``IN`` rather than a join: the planner has no statistics on a temporary table and
        # chose to scan all of ``checkpoint`` once per GC batch (quadratic in the file).
        return [
            str(r[0])
            for r in self._conn.execute(
                f"SELECT id FROM checkpoint WHERE seq IN {_CHECKPOINTS} ORDER BY seq"
            )
        ]

    def delete_checkpoints(self) -> list[str]:
        """Delete the listed checkpoints and their entries; returns the deleted ids.

        Refuses with ProtectedError (nothing deleted) when a CURRENT or fallback is listed:
        every deletion of checkpoints passes here, so this is where the schema's rule lives
        since v6 dropped the pointer's foreign keys (callers already leave protected
        checkpoints out; this is the second line of defence)."""
        self._refuse_protected()
        # Blob references and format-2 entries first, each in one statement in key order
        # (left to ON DELETE CASCADE, SQLite runs a sub-program per checkpoint row, which
        # measured ~1.4x slower for a GC batch; the cascade on ``entry`` stays as the
        # schema's safety net, then finding nothing to delete).
        self._conn.execute(
            f"DELETE FROM blob_ref WHERE (blob_id, checkpoint_seq) IN {_PACKED_REFS}"
        )
        self._conn.execute(f"DELETE FROM entry WHERE checkpoint_seq IN {_CHECKPOINTS}")
        rows = self._conn.execute(
            f"DELETE FROM checkpoint WHERE seq IN {_CHECKPOINTS} RETURNING id"
        )
        # No later checkpoint may take a deleted one's seq (see seq_high_water).
        self._conn.execute(
            "INSERT INTO seq_high_water (name, seq) SELECT 'checkpoint', coalesce(max(seq), 0)"
            " FROM temp.gc_checkpoint WHERE true"
            " ON CONFLICT (name) DO UPDATE SET seq = max(seq, excluded.seq)"
        )
        return [str(r[0]) for r in rows]

    def _refuse_protected(self) -> None:
        named = self._pointed_at()
        if named:
            namespace, seq = named[0]
            raise errors.ProtectedError(
                f"refusing to delete checkpoint seq {seq}: it is the CURRENT or fallback of "
                f"namespace {namespace!r} (and {len(named) - 1} more listed). Nothing was "
                "deleted; this is a bug in the caller, please report it.",
                namespace=namespace,
                seq=seq,
            )

    def _pointed_at(self) -> list[tuple[str, int]]:
        """(namespace, seq) of every CURRENT or fallback the batch lists. One pass over the
        pointers, each probing the list's key (a batch reads every pointer anyway to know
        what is protected), and no index on the pointer's seq columns (schema v6 dropped
        them)."""
        rows = self._conn.execute(
            "SELECT (SELECT name FROM namespace n WHERE n.namespace_id = p.namespace_id),"
            f" CASE WHEN p.current_seq IN {_CHECKPOINTS} THEN p.current_seq"
            " ELSE p.fallback_seq END FROM pointer p"
            f" WHERE p.current_seq IN {_CHECKPOINTS} OR p.fallback_seq IN {_CHECKPOINTS}"
        )
        return [(str(name), int(seq)) for name, seq in rows]

    # -- blobs ----------------------------------------------------------------------------

    def list_blobs(self) -> None:
        """List the distinct blobs the entries of the listed checkpoints use (before those
        entries are deleted)."""
        self._conn.execute(
            "INSERT OR IGNORE INTO temp.gc_blob (blob_id) SELECT blob_id FROM entry"
            f" WHERE checkpoint_seq IN {_CHECKPOINTS}"
            f" UNION SELECT blob_id FROM {_PACKED_REFS} WHERE typeof(blob_id) = 'integer'"
        )

    def unlist_blobs_in_use(self, *, ignore_listed: bool = False) -> None:
        """Take off the list the blobs an entry still uses (a ``blob_ref`` row, or a
        format-2 ``entry`` row); ``ignore_listed``: not counting the entries of the listed
        checkpoints (an estimate, which deletes none of them)."""
        others = f" AND e.checkpoint_seq NOT IN {_CHECKPOINTS}" if ignore_listed else ""
        self._conn.execute(
            "DELETE FROM temp.gc_blob WHERE EXISTS (SELECT 1 FROM blob_ref e"
            f" WHERE e.blob_id = temp.gc_blob.blob_id{others})"
            " OR EXISTS (SELECT 1 FROM entry e"
            f" WHERE e.blob_id = temp.gc_blob.blob_id{others})"
        )

    def blob_totals(self) -> tuple[int, int]:
        """(count, inline bytes) of the listed blobs."""
        row = self._conn.one(
            "SELECT count(*), coalesce(sum(CASE WHEN chunk_count = 0 THEN size ELSE 0 END), 0)"
            f" FROM blob WHERE blob_id IN {_BLOBS}"
        )
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def delete_blobs(self) -> tuple[int, int]:
        """Delete the listed blobs and their chunk lists. Returns (count, inline bytes)."""
        # Chunk lists first, in one statement: the ON DELETE CASCADE would run a sub-program
        # per blob row (kept as the schema's safety net; it then finds nothing).
        self._conn.execute(f"DELETE FROM blob_chunk WHERE blob_id IN {_BLOBS}")
        # RETURNING counts what was deleted in the same pass (no separate totals query).
        rows = self._conn.execute(
            f"DELETE FROM blob WHERE blob_id IN {_BLOBS} RETURNING size, chunk_count"
        )
        # A damaged size counts as 0, as SQL's sum() of a non-numeric text would.
        return len(rows), sum(size for size, chunks in rows if chunks == 0 and type(size) is int)

    # -- chunks ---------------------------------------------------------------------------

    def list_chunks(self) -> None:
        """List the distinct chunks the listed blobs use (before those blobs are deleted)."""
        self._conn.execute(
            "INSERT OR IGNORE INTO temp.gc_chunk (chunk_id) SELECT DISTINCT chunk_id"
            f" FROM blob_chunk WHERE blob_id IN {_BLOBS}"
        )

    def chunks_freed(self, cutoff_ms: int) -> tuple[int, int]:
        """(count, bytes) of the chunks that deleting the listed blobs would free, with the
        orphans last touched before ``cutoff_ms`` (an estimate's figure)."""
        row = self._conn.one(
            "SELECT count(*), coalesce(sum(size), 0) FROM chunk c"
            f" WHERE c.last_touched_ms < ? AND {_ORPHANED}",
            (cutoff_ms,),
        )
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def chunks_held(self, cutoff_ms: int) -> tuple[int, int, int | None, int | None]:
        """(count, bytes, oldest and newest last touch in ms) of the chunks that would be
        unreferenced once the listed blobs are deleted but were touched at or after
        ``cutoff_ms``: what the grace period keeps (an estimate's figure)."""
        row = self._conn.one(
            "SELECT count(*), coalesce(sum(size), 0), min(last_touched_ms),"
            f" max(last_touched_ms) FROM chunk c WHERE c.last_touched_ms >= ? AND {_ORPHANED}",
            (cutoff_ms,),
        )
        return (0, 0, None, None) if row is None else (int(row[0]), int(row[1]), row[2], row[3])

    def delete_chunks(self, cutoff_ms: int) -> tuple[int, int]:
        """Delete the listed chunks no blob references any more that were last touched
        before ``cutoff_ms`` (a publish in flight may be staging the others; a later GC
        collects them once they are orphans). Returns (count, bytes)."""
        rows = self._conn.execute(
            "DELETE FROM chunk WHERE chunk_id IN (SELECT chunk_id FROM temp.gc_chunk)"
            " AND last_touched_ms < ?"
            " AND NOT EXISTS (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = chunk.chunk_id)"
            " RETURNING size",
            (cutoff_ms,),
        )
        return len(rows), sum(r[0] for r in rows if type(r[0]) is int)


def _ids(values: Iterable[int]) -> str:
    return json.dumps(sorted({int(v) for v in values}))


#: The integers of the JSON array bound at ?1 (at ?2: the second list of a statement).
#: (Each names its own alias and column: an unqualified name in a subquery may resolve to
#: a column of the outer query.)
_L1 = "(SELECT l1.x::BIGINT AS id FROM jsonb_array_elements_text(?1::jsonb) AS l1(x))"
_L2 = "(SELECT l2.x::BIGINT AS id FROM jsonb_array_elements_text(?2::jsonb) AS l2(x))"


class _SharedGcBatch(GcBatch):
    """:class:`GcBatch` on PostgreSQL, where other writers run at once (see the module
    docstring): the lists are kept here and bound as JSON arrays."""

    def __init__(self, conn: EngineConnection, seqs: Iterable[int]) -> None:
        super().__init__(conn)
        self._seqs = _ids(seqs)
        self._blob_ids = "[]"
        self._chunk_ids = "[]"

    def checkpoint_ids(self) -> list[str]:
        return [
            str(r[0])
            for r in self._conn.execute(
                f"SELECT id FROM checkpoint WHERE seq IN {_L1} ORDER BY seq", (self._seqs,)
            )
        ]

    def _pointed_at(self) -> list[tuple[str, int]]:
        rows = self._conn.execute(
            "SELECT (SELECT name FROM namespace n WHERE n.namespace_id = p.namespace_id),"
            f" CASE WHEN p.current_seq IN {_L1} THEN p.current_seq ELSE p.fallback_seq END"
            f" FROM pointer p WHERE p.current_seq IN {_L1} OR p.fallback_seq IN {_L1}",
            (self._seqs,),
        )
        return [(str(name), int(seq)) for name, seq in rows]

    def delete_checkpoints(self) -> list[str]:
        self._refuse_protected()
        self._conn.execute(f"DELETE FROM blob_ref WHERE checkpoint_seq IN {_L1}", (self._seqs,))
        rows = self._conn.execute(
            f"DELETE FROM checkpoint WHERE seq IN {_L1} RETURNING id", (self._seqs,)
        )
        return [str(r[0]) for r in rows]  # (an identity never gives a seq twice)

    def list_blobs(self) -> None:
        self._blob_ids = _ids(
            r[0]
            for r in self._conn.execute(
                f"SELECT DISTINCT blob_id FROM blob_ref WHERE checkpoint_seq IN {_L1}",
                (self._seqs,),
            )
        )

    def unlist_blobs_in_use(self, *, ignore_listed: bool = False) -> None:
        others = f" AND e.checkpoint_seq NOT IN {_L2}" if ignore_listed else ""
        self._blob_ids = _ids(
            r[0]
            for r in self._conn.execute(
                f"SELECT b.id FROM {_L1} b WHERE NOT EXISTS (SELECT 1 FROM blob_ref e"
                f" WHERE e.blob_id = b.id{others})",
                (self._blob_ids, self._seqs) if ignore_listed else (self._blob_ids,),
            )
        )

    def blob_totals(self) -> tuple[int, int]:
        row = self._conn.one(
            "SELECT count(*), coalesce(sum(CASE WHEN chunk_count = 0 THEN size ELSE 0 END), 0)"
            f" FROM blob WHERE blob_id IN {_L1}",
            (self._blob_ids,),
        )
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def delete_blobs(self) -> tuple[int, int]:
        # Lock first, skipping what a publish holds; then, in a statement that sees every
        # reference committed before the locks, keep what is referenced after all.
        locked = [
            r[0]
            for r in self._conn.execute(
                f"SELECT blob_id FROM blob WHERE blob_id IN {_L1}"
                " ORDER BY blob_id FOR UPDATE SKIP LOCKED",
                (self._blob_ids,),
            )
        ]
        self._blob_ids = _ids(
            r[0]
            for r in self._conn.execute(
                f"SELECT b.id FROM {_L1} b WHERE NOT EXISTS"
                " (SELECT 1 FROM blob_ref e WHERE e.blob_id = b.id)",
                (_ids(locked),),
            )
        )
        self._conn.execute(f"DELETE FROM blob_chunk WHERE blob_id IN {_L1}", (self._blob_ids,))
        rows = self._conn.execute(
            f"DELETE FROM blob WHERE blob_id IN {_L1} RETURNING size, chunk_count",
            (self._blob_ids,),
        )
        return len(rows), sum(size for size, chunks in rows if chunks == 0 and type(size) is int)

    def list_chunks(self) -> None:
        self._chunk_ids = _ids(
            r[0]
            for r in self._conn.execute(
                f"SELECT DISTINCT chunk_id FROM blob_chunk WHERE blob_id IN {_L1}",
                (self._blob_ids,),
            )
        )

    def _orphaned(self) -> str:
        return _ORPHANED.replace(_BLOBS, _L2)

    def chunks_freed(self, cutoff_ms: int) -> tuple[int, int]:
        row = self._conn.one(
            "SELECT count(*), coalesce(sum(size), 0) FROM chunk c"
            f" WHERE c.last_touched_ms < ?1 AND {self._orphaned()}",
            (cutoff_ms, self._blob_ids),
        )
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def chunks_held(self, cutoff_ms: int) -> tuple[int, int, int | None, int | None]:
        row = self._conn.one(
            "SELECT count(*), coalesce(sum(size), 0), min(last_touched_ms),"
            " max(last_touched_ms) FROM chunk c"
            f" WHERE c.last_touched_ms >= ?1 AND {self._orphaned()}",
            (cutoff_ms, self._blob_ids),
        )
        return (0, 0, None, None) if row is None else (int(row[0]), int(row[1]), row[2], row[3])

    def delete_chunks(self, cutoff_ms: int) -> tuple[int, int]:
        return delete_unreferenced_chunks(self._conn, cutoff_ms, json.loads(self._chunk_ids))
