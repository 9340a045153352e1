"""Schema version 7's data step: moving the entries of rows stored before storage format
3 from the ``entry`` table into their checkpoint rows (``checkpoint.entries``) and
``blob_ref``, in batches the caller commits one by one (:func:`ckptdb.ops.migrate.
move_entries`). Until a row is moved, :mod:`.checkpoints` reads its entries from ``entry``.
"""

from __future__ import annotations

import json

from ..connection import Connection


def unpacked_after(conn: Connection, after_seq: int, limit: int) -> list[int]:
    """Up to ``limit`` seqs above ``after_seq`` whose entries are still in ``entry`` (a
    range over the rowid: a batch costs what it moves, not the size of the table)."""
    return [
        int(r[0])
        for r in conn.execute(
            "SELECT seq FROM checkpoint WHERE seq > ? AND entries IS NULL ORDER BY seq LIMIT ?",
            (after_seq, limit),
        )
    ]


def has_unmoved(conn: Connection) -> bool:
    """Whether any entry is still stored in the format-2 ``entry`` table (one probe)."""
    return conn.one("SELECT 1 FROM entry LIMIT 1") is not None


def count_unpacked(conn: Connection) -> int:
    """How many checkpoints still keep their entries in ``entry`` (one scan)."""
    return int(conn.scalar("SELECT count(*) FROM checkpoint WHERE entries IS NULL") or 0)


def pack_entries(conn: Connection, seqs: list[int]) -> None:
    """Move the entries of these checkpoints from ``entry`` into their rows and
    ``blob_ref``, inside the caller's transaction (each call is complete on its own: a
    row is either moved with its references or untouched). Rows are moved as stored:
    damage is carried over for ``verify`` to report, and a reference to a blob that does
    not exist gets no ``blob_ref`` row (its foreign key)."""
    listed = json.dumps(seqs)
    conn.execute(
        "UPDATE checkpoint SET entries = (SELECT json_group_array(CASE WHEN"
        " e.media_type IS NULL AND e.schema_pin IS NULL THEN json_array(e.name, e.blob_id)"
        " ELSE json_array(e.name, e.blob_id, e.media_type, e.schema_pin) END"
        " ORDER BY e.name) FROM entry e"
        " WHERE e.checkpoint_seq = checkpoint.seq)"
        " WHERE seq IN (SELECT value FROM json_each(?1)) AND entries IS NULL",
        (listed,),
    )
    conn.execute(
        "INSERT OR IGNORE INTO blob_ref (blob_id, checkpoint_seq)"
        " SELECT e.blob_id, e.checkpoint_seq FROM entry e"
        " WHERE e.checkpoint_seq IN (SELECT value FROM json_each(?1))"
        " AND EXISTS (SELECT 1 FROM blob b WHERE b.blob_id = e.blob_id)",
        (listed,),
    )
    conn.execute(
        "DELETE FROM entry WHERE checkpoint_seq IN (SELECT value FROM json_each(?1))",
        (listed,),
    )
