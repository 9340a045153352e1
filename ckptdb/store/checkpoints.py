"""The ``namespace``, ``checkpoint``, ``blob_ref``, ``seq_high_water`` and ``entry`` tables:
immutable manifests and lineage.

This module and its two companions are the only code that reads or writes them (GC's
batch deletes rows it lists, see :mod:`.gc_batch`): the whole-table reads of verify, GC's
mark, stats and transfer are in :mod:`.checkpoint_scans`, schema 7's move of ``entry`` rows
in :mod:`.entry_move`. This module holds every read of one checkpoint, every write, and the
one lineage walk (parent links, each step to a strictly smaller generation so damaged
links cannot loop).

Storage format 3 (schema version 7) packs a checkpoint's entries into its own row
(``checkpoint.entries``, a JSON array of ``[name, blob_id, media_type, schema_pin]``, each
without its trailing nulls, sorted by name) and records each entry's blob in ``blob_ref``
for GC. Rows stored before version 7 keep ``entries`` NULL and their entries in ``entry``
until :func:`.entry_move.pack_entries` moves them; every read here takes both. The column's
encoding, and its decoding where PostgreSQL reads it, are :mod:`.packed`'s.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from .. import canonical, errors, validation
from ..connection import Connection
from ..connection.engine import EngineConnection
from . import dialect, scopes
from .packed import pack, unpacked
from .rows import CHECKPOINT_TYPES, ENTRY_TYPES, CheckpointRow, EntryRow, check_types, typed

_N = type(None)


# The namespace name comes from a scalar subquery rather than a join: measured 3-4x faster
# for these single-row lookups on every commit and load (docs/performance.md).
CHECKPOINT_COLUMNS = (
    "c.seq, c.id, (SELECT name FROM namespace WHERE namespace_id = c.namespace_id),"
    " c.namespace_id, c.parent_id, c.generation, c.created_at_ms, c.metadata, c.entry_count,"
    " c.total_size, c.code_revision, c.label"
)


def checkpoint_row(row: tuple[Any, ...]) -> CheckpointRow:
    return typed(CheckpointRow, row, CHECKPOINT_TYPES, "checkpoint row")


def checkpoint_by_id(
    conn: EngineConnection, checkpoint_id: str, *, scan: bool = False, confirm: bool = False
) -> CheckpointRow | None:
    """The checkpoint with this full id. ``scan`` reads the table instead of the index on
    ids (slow; for recovery, when a damaged index may hide a row that is there).
    ``confirm`` also reads the id from the table row the index led to (fallback, once a
    manifest failed)."""
    where = f"{dialect.unindexed(conn, 'c.id')} = ?" if scan else "c.id = ?"
    row = conn.one(
        f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoint c WHERE {where}",
        (checkpoint_id,),
    )
    if row is None:
        return None
    found = checkpoint_row(row)
    if scan:
        return found
    # SQLite trusts an index: a damaged entry of the id index leads to another row. When
    # the index covers a column, SQLite reads it from the index, so ``found.id`` is the
    # asked id even then; the other columns are the other row's. The table row, read by
    # its rowid, says which checkpoint it is -- a manifest check catches the mix, but
    # fallback would follow the other row's parent link, so it confirms.
    if found.id != checkpoint_id or (
        confirm
        and conn.scalar("SELECT id FROM checkpoint WHERE seq = ?", (found.seq,)) != checkpoint_id
    ):
        return checkpoint_by_id(conn, checkpoint_id, scan=True)
    return found


def checkpoint_by_label(
    conn: EngineConnection, namespace: str, label: str, *, scan: bool = False
) -> CheckpointRow | None:
    """The checkpoint of ``namespace`` labelled ``label`` (one lookup in the label index;
    ``scan``: the namespace's rows instead, for when the index is damaged)."""
    source, labelled = "checkpoint c", "c.label"
    if scan:
        source, labelled = dialect.scanned(conn, source, labelled)
    row = conn.one(
        f"SELECT {CHECKPOINT_COLUMNS} FROM {source} WHERE c.namespace_id ="
        f" (SELECT namespace_id FROM namespace WHERE name = ?) AND {labelled} = ?",
        (namespace, label),
    )
    if row is None:
        return None
    found = checkpoint_row(row)
    if found.namespace != namespace:
        check_namespace(namespace, found.namespace, found.id)
    # SQLite reads the label from the index that found the row: a damaged index entry
    # leads to another row of the namespace and reports the asked label for it. The table
    # row, read by its rowid, says which label it carries (as checkpoint_by_id does).
    if (
        not scan
        and conn.scalar("SELECT label FROM checkpoint WHERE seq = ?", (found.seq,)) != label
    ):
        return checkpoint_by_label(conn, namespace, label, scan=True)
    return found


def existing_ids(conn: EngineConnection, checkpoint_ids: list[str]) -> set[str]:
    """Which of these full checkpoint ids are stored (one indexed statement per 500)."""
    found: set[str] = set()
    for start in range(0, len(checkpoint_ids), 500):
        part = checkpoint_ids[start : start + 500]
        marks = ", ".join("?" * len(part))
        found.update(
            str(r[0])
            for r in conn.execute(f"SELECT id FROM checkpoint WHERE id IN ({marks})", part)
        )
    return found


def checkpoint_ids_by_prefix(conn: EngineConnection, prefix: str, limit: int = 2) -> list[str]:
    """Full ids starting with ``prefix`` (lowercase hex), at most ``limit``."""
    upper = prefix + "g"  # 'g' sorts after every hex digit: a range scan on the unique index
    rows = conn.execute(
        "SELECT id FROM checkpoint WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
        (prefix, upper, limit),
    )
    return [str(r[0]) for r in rows]


def _entry_source(listed: bool) -> str:
    """A query of every entry -- of the checkpoints ``:seqs`` (a JSON array of seqs) when
    ``listed`` -- as (checkpoint_seq, name, blob_id, media_type, schema_pin): packed ones
    from their row, the others from ``entry``. A packed array that is not valid JSON yields
    one entry of nulls (never an SQL error), which the type check then reports as damage."""
    seqs = "(SELECT value FROM json_each(:seqs))"
    return (
        "SELECT c.seq AS checkpoint_seq, json_extract(j.value, '$[0]') AS name,"
        " json_extract(j.value, '$[1]') AS blob_id, json_extract(j.value, '$[2]') AS media_type,"
        " json_extract(j.value, '$[3]') AS schema_pin FROM checkpoint c, json_each("
        "CASE WHEN json_valid(c.entries) THEN c.entries ELSE '[null]' END) j"
        f" WHERE c.entries IS NOT NULL{f' AND c.seq IN {seqs}' if listed else ''}"
        " UNION ALL SELECT checkpoint_seq, name, blob_id, media_type, schema_pin FROM entry"
        f"{f' WHERE checkpoint_seq IN {seqs}' if listed else ''}"
    )


_LISTED_ENTRIES = _entry_source(listed=True)
EVERY_ENTRY = _entry_source(listed=False)


def _entries_with_blobs(conn: EngineConnection, seqs: list[int]) -> list[Any]:
    """(checkpoint_seq, name, blob_id, digest, size, media_type, schema_pin, chunk_count,
    scope_id) of every entry of ``seqs``, by seq then name, in one statement."""
    if conn.dialect != "sqlite":
        rows = conn.execute(
            f"SELECT seq, entries FROM checkpoint WHERE seq IN {dialect.int_list(conn)}"
            " ORDER BY seq",
            (json.dumps(seqs),),
        )
        entries, _ = unpacked(conn, [(r[0], r[1]) for r in rows], ())
        return [e for seq_entries in entries.values() for e in seq_entries]
    return conn.execute(
        "SELECT e.checkpoint_seq, e.name, e.blob_id, b.digest, b.size, e.media_type,"
        f" e.schema_pin, b.chunk_count, b.scope_id FROM ({_LISTED_ENTRIES}) e"
        " LEFT JOIN blob b ON b.blob_id = e.blob_id ORDER BY e.checkpoint_seq, e.name",
        {"seqs": json.dumps(seqs)},
    )


def _entry_row(r: Any) -> EntryRow:
    if r[3] is None:
        raise errors.CorruptionError(
            f"entry {r[1]!r} names a blob that does not exist",
            entry=str(r[1]),
            reason="blob_missing",
        )
    return typed(EntryRow, r[1:], ENTRY_TYPES, "entry row")


def entries_of(conn: EngineConnection, checkpoint_seq: int) -> list[EntryRow]:
    """Entries of a checkpoint, sorted by name."""
    return [_entry_row(r) for r in _entries_with_blobs(conn, [checkpoint_seq])]


def checkpoints_by_ids(
    conn: EngineConnection, checkpoint_ids: list[str]
) -> dict[str, CheckpointRow]:
    """The stored checkpoints among ``checkpoint_ids`` (full ids), by id; a row the id
    index led to under another id (damage) is left out, so the caller's miss path decides."""
    found: dict[str, CheckpointRow] = {}
    for start in range(0, len(checkpoint_ids), 500):
        part = checkpoint_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        for r in conn.execute(
            f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoint c WHERE c.id IN ({marks})", part
        ):
            row = checkpoint_row(r)
            found[row.id] = row
    return found


#: What :func:`manifests_by_ids` finds of one checkpoint: its row, its entries (sorted by
#: name), and the stored form -- (bytes, codec id, key scope id) as the ``blob`` row holds
#: them, not yet decoded or verified -- of each asked-for entry stored inline.
Manifest = tuple[CheckpointRow, list[EntryRow], dict[str, tuple[object, object, object]]]


def manifests_by_ids(
    conn: EngineConnection, checkpoint_ids: list[str], inline_of: tuple[str, ...] = ()
) -> dict[str, Manifest]:
    """The stored checkpoints among ``checkpoint_ids`` with their entries (sorted by name),
    by id: one statement per 500 ids for rows and packed entries together (format 3), plus
    one for the entries of rows stored before it that are not moved yet. ``inline_of``:
    entry names whose stored bytes come along in the same statement when their blob is
    inline (for rows not moved yet they do not: the caller reads them). A row the id
    index led to under another id (damage) is left out, as :func:`checkpoints_by_ids`
    does; a damaged entry raises CorruptionError, as :func:`entries_of` does."""
    if conn.dialect != "sqlite":
        return _pg_manifests(conn, checkpoint_ids, inline_of)
    found: dict[str, Manifest] = {}
    unmoved: dict[int, str] = {}
    width = len(CHECKPOINT_TYPES)
    # The asked-for entries' stored bytes, beside the blob columns the manifest needs
    # anyway: no second statement for a small entry read with its manifest.
    # The names travel as one JSON parameter: any number of them fits beside 500 ids.
    held = (
        "CASE WHEN b.chunk_count = 0 AND json_extract(j.value, '$[0]') IN"
        " (SELECT value FROM json_each(?)) THEN b.inline_data END, b.codec"
        if inline_of
        else "NULL, NULL"
    )
    names = (json.dumps(inline_of),) if inline_of else ()
    for start in range(0, len(checkpoint_ids), 500):
        part = checkpoint_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        # Row columns, then whether its entries are still in ``entry``, then one packed
        # entry (none: j.key is NULL) as _entry_row reads it: key, name, blob_id, digest,
        # size, media_type, schema_pin, chunk_count, scope_id; then the held bytes, codec.
        for r in conn.execute(
            f"SELECT {CHECKPOINT_COLUMNS}, c.entries IS NULL, j.key,"
            " json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), b.digest, b.size,"
            " json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]'), b.chunk_count,"
            f" b.scope_id, {held} FROM checkpoint c LEFT JOIN json_each(CASE WHEN"
            " c.entries IS NULL OR json_valid(c.entries) THEN c.entries ELSE '[null]' END) j"
            " LEFT JOIN blob b ON b.blob_id = json_extract(j.value, '$[1]')"
            f" WHERE c.id IN ({marks}) ORDER BY c.seq, {width + 3}",
            (*names, *part),
        ):
            cid = r[1]
            if cid not in found:
                row = checkpoint_row(r[:width])
                found[cid] = (row, [], {})
                if r[width]:
                    unmoved[row.seq] = cid
            if r[width + 1] is not None:
                entry = _entry_row(r[width + 1 : width + 10])
                found[cid][1].append(entry)
                if r[width + 10] is not None:
                    found[cid][2][entry.name] = (r[width + 10], r[width + 11], entry.scope_id)
    if unmoved:
        for seq, entries in entries_of_many(conn, list(unmoved)).items():
            found[unmoved[seq]][1].extend(entries)
    return found


def _pg_manifests(
    conn: EngineConnection, checkpoint_ids: list[str], inline_of: tuple[str, ...]
) -> dict[str, Manifest]:
    """:func:`manifests_by_ids` on PostgreSQL: the rows and their packed entries in one
    statement, the entries parsed here, their blob rows in a second (parsing JSON in the
    server measured no faster and unsafe on damage: docs/postgresql.md)."""
    found: dict[str, Manifest] = {}
    width = len(CHECKPOINT_TYPES)
    for start in range(0, len(checkpoint_ids), 500):
        part = checkpoint_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        rows = [
            (checkpoint_row(r[:width]), r[width])
            for r in conn.execute(
                f"SELECT {CHECKPOINT_COLUMNS}, c.entries FROM checkpoint c"
                f" WHERE c.id IN ({marks}) ORDER BY c.seq",
                part,
            )
        ]
        entries, held = unpacked(conn, [(row.seq, packed) for row, packed in rows], inline_of)
        for row, _ in rows:
            if row.id in found:
                continue
            found[row.id] = (
                row,
                [_entry_row(e) for e in entries[row.seq]],
                held.get(row.seq, {}),
            )
    return found


def entries_of_many(
    conn: EngineConnection, checkpoint_seqs: list[int]
) -> dict[int, list[EntryRow]]:
    """Entries of many checkpoints (seq -> entries sorted by name) in one statement per 500
    checkpoints; a checkpoint without entries maps to an empty list."""
    out: dict[int, list[EntryRow]] = {seq: [] for seq in checkpoint_seqs}
    for start in range(0, len(checkpoint_seqs), 500):
        for r in _entries_with_blobs(conn, checkpoint_seqs[start : start + 500]):
            check_types(r[:1], (int,), "entry row")
            out[r[0]].append(_entry_row(r))
    return out


def recomputed_id(
    row: CheckpointRow, entries: list[EntryRow], entries_json: str | None = None
) -> str:
    """The id the stored manifest actually hashes to (``entries_json``: the entries'
    canonical JSON when the caller has it already)."""
    return canonical.checkpoint_id(
        row.namespace,
        row.parent_id,
        row.generation,
        entries if entries_json is None else entries_json,
        row.metadata_json,
    )


def check_namespace(namespace: str, found: str, checkpoint_id: str) -> None:
    """Raise CorruptionError when following stored links from ``namespace`` reached a
    checkpoint of another namespace (only damage can make a link cross namespaces)."""
    if found != namespace:
        raise errors.CorruptionError(
            f"checkpoint {checkpoint_id[:12]} was reached from namespace {namespace!r} but "
            f"belongs to {found!r}; a stored link is damaged. Run `ckptdb verify`.",
            checkpoint_id=checkpoint_id,
            reason="wrong_namespace",
        )


def check_manifest(
    row: CheckpointRow, entries: list[EntryRow], entries_json: str | None = None
) -> None:
    """Raise CorruptionError unless the stored rows hash to the checkpoint's id."""
    if (
        len(entries) != row.entry_count
        or sum(e.size for e in entries) != row.total_size
        or recomputed_id(row, entries, entries_json) != row.id
    ):
        raise errors.CorruptionError(
            f"checkpoint {row.id[:12]} of namespace {row.namespace!r}: its stored manifest "
            "does not hash to its id (rows were damaged or altered)",
            checkpoint_id=row.id,
            reason="manifest_mismatch",
        )


def namespace_id(conn: EngineConnection, namespace: str) -> int | None:
    """Id of a namespace row, if it exists."""
    found = namespace_row(conn, namespace)
    return None if found is None else found[0]


def namespace_row(
    conn: EngineConnection, namespace: str, *, scan: bool = False
) -> tuple[int, int | None] | None:
    """(id, key scope id) of the namespace row named ``namespace``, or None. The name is
    read back from the row itself (by its key: SQLite would answer from the index on names
    it searched), so a damaged entry of that index leading to another namespace's row is
    passed by a search of the table (``scan``)."""
    source, name = "namespace n", "n.name"
    if scan:
        source, name = dialect.scanned(conn, source, name)
    row = conn.one(
        "SELECT n.namespace_id, n.scope_id,"
        " (SELECT t.name FROM namespace t WHERE t.namespace_id = n.namespace_id)"
        f" FROM {source} WHERE {name} = ?",
        (namespace,),
    )
    if row is None:
        return None
    check_types(row, (int, (int, _N), str), "namespace row")
    if row[2] == namespace:
        return int(row[0]), row[1]
    if scan:
        raise errors.CorruptionError(
            f"the row found for namespace {namespace!r} is {row[2]!r}'s; the namespace table "
            "is damaged. Run `ckptdb verify`.",
            namespace=namespace,
            reason="index_damaged",
        )
    return namespace_row(conn, namespace, scan=True)


def checkpoint_counts(conn: EngineConnection) -> dict[int, int]:
    """Number of stored checkpoints per namespace id."""
    counts: dict[int, int] = {}
    for row in conn.execute("SELECT namespace_id, count(*) FROM checkpoint GROUP BY namespace_id"):
        check_types(row, (int, int), "checkpoint row")
        counts[row[0]] = row[1]
    return counts


def _walk(seed: str, *, limited: bool) -> str:
    """The one lineage walk: from the checkpoints ``seed`` selects (as ``seq, parent_id,
    generation``), follow parent links to their stored ancestors with each one's depth.
    Every step must go to a strictly smaller generation, so damaged links cannot loop."""
    bound = " WHERE CAST(:limit AS BIGINT) < 0 OR w.depth + 1 < :limit" if limited else ""
    return (
        "WITH RECURSIVE walk (seq, parent_id, generation, depth) AS ("
        f" SELECT seq, parent_id, generation, 0 FROM ({seed}) AS seed"
        " UNION ALL"
        " SELECT c.seq, c.parent_id, c.generation, w.depth + 1 FROM walk w"
        " JOIN checkpoint c ON c.id = w.parent_id AND c.generation < w.generation"
        f"{bound})"
    )


def lineage(conn: EngineConnection, start_id: str, limit: int | None = None) -> list[CheckpointRow]:
    """``start_id`` and its stored ancestors, newest first (stops where GC pruned)."""
    rows = conn.execute(
        _walk("SELECT seq, parent_id, generation FROM checkpoint WHERE id = :start", limited=True)
        + f" SELECT {CHECKPOINT_COLUMNS} FROM walk w JOIN checkpoint c ON c.seq = w.seq"
        " ORDER BY w.depth",
        {"start": start_id, "limit": -1 if limit is None else limit},
    )
    return [checkpoint_row(r) for r in rows]


def depths_from_current(
    conn: EngineConnection, namespace_ids: list[int], *, limit: int | None = None
) -> dict[int, int]:
    """seq -> distance from CURRENT along parent links, for the given namespaces; with
    ``limit``, only the checkpoints less than ``limit`` steps from CURRENT (GC walks only as
    deep as its policy looks: keep_last=5 needs 5 steps, not the whole lineage)."""
    depths: dict[int, int] = {}
    for start in range(0, len(namespace_ids), 500):
        part = namespace_ids[start : start + 500]
        params: dict[str, int] = {f"n{i}": ns for i, ns in enumerate(part)}
        params["limit"] = -1 if limit is None else limit
        marks = ",".join(f":n{i}" for i in range(len(part)))
        seed = (
            "SELECT c.seq, c.parent_id, c.generation FROM pointer p"
            " JOIN checkpoint c ON c.seq = p.current_seq AND c.namespace_id = p.namespace_id"
            f" WHERE p.namespace_id IN ({marks})"
        )
        rows = conn.execute(
            _walk(seed, limited=True) + " SELECT seq, min(depth) FROM walk GROUP BY seq", params
        )
        depths.update({int(s): int(d) for s, d in rows})
    return depths


def require_checkpoint(conn: EngineConnection, checkpoint_id: str) -> CheckpointRow:
    """The checkpoint with this full id, or CheckpointNotFoundError."""
    validation.checkpoint_id(checkpoint_id)
    # A miss is confirmed by a scan of the table: an entry missing from a damaged id index
    # must not turn a stored, intact checkpoint into "not found" (a miss is the rare path).
    row = checkpoint_by_id(conn, checkpoint_id) or checkpoint_by_id(conn, checkpoint_id, scan=True)
    if row is None:
        raise errors.CheckpointNotFoundError(
            f"no checkpoint {checkpoint_id[:12]}... in this database (never committed here, or "
            "garbage-collected)",
            checkpoint_id=checkpoint_id,
        )
    return row


# -- writing (publish and import) ------------------------------------------------------


def ensure_namespace(conn: EngineConnection, namespace: str, now_ms: int) -> tuple[int, int | None]:
    """(id, key scope id) of the namespace row, creating it if needed (inside a write
    transaction that holds the namespace's lock, see :func:`.pointers.lock_namespace`): a
    new namespace joins the key scope whose prefix covers its name, and a shredded scope's
    prefix takes no new namespace (KeyShreddedError)."""
    found = namespace_row(conn, namespace)
    if found is not None:
        if found[1] is not None:
            # A row without a pointer in a key scope: a shred may be dropping it right now
            # (the drop deletes the pointer first, the row last), and its scope refuses it.
            scopes.covering_scope_id(conn, namespace)
        return found
    scopes.lock_scopes(conn)
    scope_id = scopes.covering_scope_id(conn, namespace)
    new_id = conn.insert_returning(
        "INSERT INTO namespace (name, created_at_ms, scope_id) VALUES (?, ?, ?)",
        (namespace, now_ms, scope_id),
        "namespace_id",
    )
    return new_id, scope_id


def count_under_prefix(conn: EngineConnection, prefix: str) -> int:
    """Number of namespaces whose name starts with ``prefix``."""
    return int(
        conn.scalar(
            "SELECT count(*) FROM namespace WHERE substr(name, 1, length(?1)) = ?1", (prefix,)
        )
        or 0
    )


def namespaces_under_prefix(conn: EngineConnection, prefix: str) -> list[tuple[str, object]]:
    """(name, stored scope_id) of every namespace whose name starts with ``prefix``."""
    return [
        (str(r[0]), r[1])
        for r in conn.execute(
            "SELECT name, scope_id FROM namespace WHERE substr(name, 1, length(?1)) = ?1"
            " ORDER BY name",
            (prefix,),
        )
    ]


def namespaces_of_scope(conn: EngineConnection, scope_id: int) -> list[str]:
    """Names of the namespaces in a key scope."""
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM namespace WHERE scope_id = ? ORDER BY name", (scope_id,)
        )
    ]


def insert(
    conn: EngineConnection,
    *,
    checkpoint_id: str,
    namespace_id: int,
    parent_id: str | None,
    generation: int,
    created_at_ms: int,
    metadata_json: str,
    total_size: int,
    entries: list[tuple[str, int, str | None, str | None]],
    code_revision: str | None,
    label: str | None = None,
) -> tuple[int, bool]:
    """Insert a manifest and its entries ((name, blob_id, media_type, schema_pin), in name
    order) unless a checkpoint with this id exists. Returns (seq, inserted).

    ``code_revision`` is recorded beside the manifest; when the checkpoint exists already
    its stored revision (that of its first writer) is kept. ``label`` must name no other
    checkpoint of the namespace, and an existing checkpoint must carry the same label
    (LabelTakenError otherwise; nothing is written)."""
    if label is not None:
        _check_labels_free(conn, namespace_id, {label: checkpoint_id})
    try:
        new = conn.execute(
            _insert_statement(conn) + " ON CONFLICT (id) DO NOTHING RETURNING seq",
            (
                checkpoint_id,
                namespace_id,
                parent_id,
                generation,
                created_at_ms,
                metadata_json,
                len(entries),
                total_size,
                canonical.FORMAT_VERSION,  # the manifest encoding the id was computed with
                code_revision,
                pack(entries),
                label,
            ),
        )
    except errors.SqlError:
        if isinstance(conn, Connection):
            _refuse_exhausted_seqs(conn)  # the one cause a caller can act on, said so
        raise
    if not new:
        # The same manifest was published before (then CURRENT moved away and back).
        existing = checkpoint_by_id(conn, checkpoint_id)
        if existing is None:
            raise errors.CorruptionError(
                f"checkpoint {checkpoint_id[:12]} is stored but cannot be found by its id "
                "(a damaged index); run `ckptdb verify`",
                checkpoint_id=checkpoint_id,
                reason="index_damaged",
            )
        if label is not None and label_of(conn, existing.seq) != label:
            raise errors.LabelTakenError(
                f"checkpoint {checkpoint_id[:12]} (the same content on the same parent) is "
                f"stored already under another label than {label!r}; a checkpoint keeps the "
                "label it was first committed with. Nothing was written.",
                label=label,
                checkpoint_id=checkpoint_id,
            )
        return existing.seq, False
    seq = int(new[0][0])
    _reference_blobs(conn, [(blob_id, seq) for _, blob_id, _, _ in entries])
    return seq, True


#: The columns a new checkpoint row is written with, and their values: ``seq`` above every
#: stored one and every deleted one (``seq_high_water``), so a seq is never given twice.
_INSERT_COLUMNS = (
    "seq, id, namespace_id, parent_id, generation, created_at_ms, metadata, entry_count,"
    " total_size, format, code_revision, entries, label"
)
_INSERT_VALUES = (
    "max(coalesce((SELECT max(seq) FROM checkpoint), 0),"
    " coalesce((SELECT seq FROM seq_high_water WHERE name = 'checkpoint'), 0)) + 1,"
    " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
)
#: On PostgreSQL ``seq`` is an identity column: a sequence never gives a value twice, even
#: one a rolled-back or deleted row had, which is what ``seq_high_water`` does on SQLite.
_PG_INSERT = (
    "INSERT INTO checkpoint (id, namespace_id, parent_id, generation, created_at_ms,"
    " metadata, entry_count, total_size, format, code_revision, entries, label)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _insert_statement(conn: EngineConnection) -> str:
    if conn.dialect == "sqlite":
        return f"INSERT INTO checkpoint ({_INSERT_COLUMNS}) VALUES ({_INSERT_VALUES})"
    return _PG_INSERT


def _refuse_exhausted_seqs(conn: Connection) -> None:
    """CorruptionError when no seq is left to give (the highest stored or deleted one is
    SQLite's largest integer: ``+ 1`` becomes a REAL, which the column refuses). Only
    damage or an edit outside ckptdb gets there; checked only once an insert failed."""
    top = conn.scalar(
        "SELECT max(coalesce((SELECT max(seq) FROM checkpoint), 0),"
        " coalesce((SELECT seq FROM seq_high_water WHERE name = 'checkpoint'), 0))"
    )
    if isinstance(top, int) and top >= _MAX_SEQ:
        raise errors.CorruptionError(
            f"no checkpoint row id is left to give: the highest one used is {top} (SQLite's "
            "largest integer), which only a change outside ckptdb (seq_high_water or a "
            "checkpoint row) can reach. Nothing was written. Run `ckptdb verify`, then "
            "restore the file from a backup or `ckptdb export` its checkpoints into a new one.",
            reason="seq_exhausted",
            seq=top,
        )


#: SQLite's largest integer: a checkpoint's seq cannot go past it.
_MAX_SEQ = (1 << 63) - 1


def _check_labels_free(conn: EngineConnection, namespace_id: int, wanted: dict[str, str]) -> None:
    """Raise LabelTakenError when a label of ``wanted`` (label -> the id about to take it)
    already names another checkpoint of the namespace."""
    labels = list(wanted)
    for start in range(0, len(labels), 500):
        part = labels[start : start + 500]
        marks = ",".join("?" * len(part))
        for label, holder in conn.execute(
            f"SELECT label, id FROM checkpoint WHERE namespace_id = ? AND label IN ({marks})",
            (namespace_id, *part),
        ):
            if holder != wanted[label]:
                raise errors.LabelTakenError(
                    f"label {label!r} already names checkpoint {str(holder)[:12]} of the "
                    "namespace; a label names one checkpoint. Nothing was written.",
                    label=str(label),
                    checkpoint_id=str(holder),
                )


def label_of(conn: EngineConnection, seq: int) -> str | None:
    """The label of a stored checkpoint row (None: it has none)."""
    value = conn.scalar("SELECT label FROM checkpoint WHERE seq = ?", (seq,))
    return value if isinstance(value, str) else None


def _reference_blobs(conn: EngineConnection, refs: list[tuple[int, int]]) -> None:
    """Record that these (blob_id, checkpoint_seq) pairs are in use (an entry of a new
    checkpoint; two entries with the same blob share one row)."""
    conn.executemany(
        dialect.insert_or_ignore(
            conn,
            " INTO blob_ref (blob_id, checkpoint_seq) VALUES (?, ?)",
            "blob_id, checkpoint_seq",
        ),
        refs,
    )


class NewCheckpoint(NamedTuple):
    """A manifest to store with :func:`insert_many` (entries as in :func:`insert`)."""

    checkpoint_id: str
    parent_id: str | None
    generation: int
    metadata_json: str
    total_size: int
    entries: list[tuple[str, int, str | None, str | None]]
    label: str | None = None


def insert_many(
    conn: EngineConnection,
    namespace_id: int,
    manifests: list[NewCheckpoint],
    *,
    created_at_ms: int,
    code_revision: str | None,
) -> tuple[dict[str, int], int]:
    """Insert many manifests of one namespace with their entries in a few statements,
    skipping those stored already. Returns (seq by id, how many were new)."""
    unique = list({m.checkpoint_id: m for m in manifests}.values())
    ids = [m.checkpoint_id for m in unique]
    before = existing_ids(conn, ids)
    new = [m for m in unique if m.checkpoint_id not in before]
    _check_labels_free(conn, namespace_id, {m.label: m.checkpoint_id for m in new if m.label})
    conn.executemany(
        _insert_statement(conn) + " ON CONFLICT (id) DO NOTHING",
        [
            (
                m.checkpoint_id,
                namespace_id,
                m.parent_id,
                m.generation,
                created_at_ms,
                m.metadata_json,
                len(m.entries),
                m.total_size,
                canonical.FORMAT_VERSION,
                code_revision,
                pack(m.entries),
                m.label,
            )
            for m in new
        ],
    )
    seqs = {cid: row.seq for cid, row in checkpoints_by_ids(conn, ids).items()}
    for cid in ids:
        if cid not in seqs:
            raise errors.CorruptionError(
                f"checkpoint {cid[:12]} is stored but cannot be found by its id (a damaged "
                "index); run `ckptdb verify`",
                checkpoint_id=cid,
                reason="index_damaged",
            )
    _reference_blobs(conn, [(e[1], seqs[m.checkpoint_id]) for m in new for e in m.entries])
    return seqs, len(new)


# -- scans (GC, prune, verify, transfer) ------------------------------------------------


def namespaces_by_name(conn: EngineConnection) -> dict[str, int]:
    """Every namespace row: name -> id."""
    rows = conn.execute("SELECT namespace_id, name FROM namespace ORDER BY name")
    out: dict[str, int] = {}
    for row in rows:
        check_types(row, (int, str), "namespace row")
        out[row[1]] = row[0]
    return out


def seqs_of_namespace(conn: EngineConnection, namespace_id: int) -> list[tuple[int, str]]:
    """(seq, id) of every checkpoint of a namespace."""
    return [
        (int(s), str(i))
        for s, i in conn.execute(
            "SELECT seq, id FROM checkpoint WHERE namespace_id = ?", (namespace_id,)
        )
    ]


def delete_namespace_if_empty(conn: EngineConnection, namespace_id: int) -> None:
    """Remove a namespace row once no checkpoint belongs to it (its pointer history goes
    with it)."""
    conn.execute(
        "DELETE FROM namespace WHERE namespace_id = ? AND NOT EXISTS"
        " (SELECT 1 FROM checkpoint WHERE namespace_id = ?)",
        (namespace_id, namespace_id),
    )


def namespace_name(conn: EngineConnection, namespace_id: int) -> str | None:
    """The name of a namespace id."""
    value = conn.scalar("SELECT name FROM namespace WHERE namespace_id = ?", (namespace_id,))
    return None if value is None else str(value)
