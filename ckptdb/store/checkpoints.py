"""The ``namespace``, ``checkpoint`` and ``entry`` tables: immutable manifests and lineage.

This module is the only code that reads or writes them, and holds the one lineage walk
(parent links, each step to a strictly smaller generation so damaged links cannot loop).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from .. import canonical, errors, validation
from ..connection import Connection
from . import scopes
from .rows import CHECKPOINT_TYPES, ENTRY_TYPES, CheckpointRow, EntryRow, check_types, typed

_N = type(None)


# The namespace name comes from a scalar subquery rather than a join: measured 3-4x faster
# for these single-row lookups on every commit and load (docs/performance.md).
_CHECKPOINT_COLUMNS = (
    "c.seq, c.id, (SELECT name FROM namespace WHERE namespace_id = c.namespace_id),"
    " c.namespace_id, c.parent_id, c.generation, c.created_at_ms, c.metadata, c.entry_count,"
    " c.total_size, c.code_revision"
)


def _checkpoint(row: tuple[Any, ...]) -> CheckpointRow:
    return typed(CheckpointRow, row, CHECKPOINT_TYPES, "checkpoint row")


def checkpoint_by_id(
    conn: Connection, checkpoint_id: str, *, scan: bool = False, confirm: bool = False
) -> CheckpointRow | None:
    """The checkpoint with this full id. ``scan`` reads the table instead of the index on
    ids (slow; for recovery, when a damaged index may hide a row that is there).
    ``confirm`` also reads the id from the table row the index led to (fallback, once a
    manifest failed)."""
    where = "+c.id = ?" if scan else "c.id = ?"  # unary + keeps SQLite off the index
    row = conn.one(
        f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoint c WHERE {where}",
        (checkpoint_id,),
    )
    if row is None:
        return None
    found = _checkpoint(row)
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


def existing_ids(conn: Connection, checkpoint_ids: list[str]) -> set[str]:
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


def checkpoint_ids_by_prefix(conn: Connection, prefix: str, limit: int = 2) -> list[str]:
    """Full ids starting with ``prefix`` (lowercase hex), at most ``limit``."""
    upper = prefix + "g"  # 'g' sorts after every hex digit: a range scan on the unique index
    rows = conn.execute(
        "SELECT id FROM checkpoint WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
        (prefix, upper, limit),
    )
    return [str(r[0]) for r in rows]


def entries_of(conn: Connection, checkpoint_seq: int) -> list[EntryRow]:
    """Entries of a checkpoint, sorted by name."""
    rows = conn.execute(
        "SELECT e.name, e.blob_id, b.digest, b.size, e.media_type, e.schema_pin, b.chunk_count,"
        " b.scope_id FROM entry e LEFT JOIN blob b ON b.blob_id = e.blob_id"
        " WHERE e.checkpoint_seq = ? ORDER BY e.name",
        (checkpoint_seq,),
    )
    out = []
    for r in rows:
        if r[2] is None:
            raise errors.CorruptionError(
                f"entry {r[0]!r} names a blob that does not exist",
                entry=str(r[0]),
                reason="blob_missing",
            )
        out.append(typed(EntryRow, r, ENTRY_TYPES, "entry row"))
    return out


def checkpoints_by_ids(conn: Connection, checkpoint_ids: list[str]) -> dict[str, CheckpointRow]:
    """The stored checkpoints among ``checkpoint_ids`` (full ids), by id; a row the id
    index led to under another id (damage) is left out, so the caller's miss path decides."""
    found: dict[str, CheckpointRow] = {}
    for start in range(0, len(checkpoint_ids), 500):
        part = checkpoint_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        for r in conn.execute(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoint c WHERE c.id IN ({marks})", part
        ):
            row = _checkpoint(r)
            found[row.id] = row
    return found


def entries_of_many(conn: Connection, checkpoint_seqs: list[int]) -> dict[int, list[EntryRow]]:
    """Entries of many checkpoints (seq -> entries sorted by name) in one statement per 500
    checkpoints; a checkpoint without entries maps to an empty list."""
    out: dict[int, list[EntryRow]] = {seq: [] for seq in checkpoint_seqs}
    for start in range(0, len(checkpoint_seqs), 500):
        part = checkpoint_seqs[start : start + 500]
        marks = ",".join("?" * len(part))
        for r in conn.execute(
            "SELECT e.checkpoint_seq, e.name, e.blob_id, b.digest, b.size, e.media_type,"
            " e.schema_pin, b.chunk_count, b.scope_id FROM entry e"
            " LEFT JOIN blob b ON b.blob_id = e.blob_id"
            f" WHERE e.checkpoint_seq IN ({marks}) ORDER BY e.checkpoint_seq, e.name",
            part,
        ):
            if r[3] is None:
                raise errors.CorruptionError(
                    f"entry {r[1]!r} names a blob that does not exist",
                    entry=str(r[1]),
                    reason="blob_missing",
                )
            check_types(r[:1], (int,), "entry row")
            out[r[0]].append(typed(EntryRow, r[1:], ENTRY_TYPES, "entry row"))
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


def namespace_id(conn: Connection, namespace: str) -> int | None:
    """Id of a namespace row, if it exists."""
    value = conn.scalar("SELECT namespace_id FROM namespace WHERE name = ?", (namespace,))
    return None if value is None else int(value)


def checkpoint_counts(conn: Connection) -> dict[int, int]:
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
    bound = " WHERE :limit < 0 OR w.depth + 1 < :limit" if limited else ""
    return (
        "WITH RECURSIVE walk (seq, parent_id, generation, depth) AS ("
        f" SELECT seq, parent_id, generation, 0 FROM ({seed})"
        " UNION ALL"
        " SELECT c.seq, c.parent_id, c.generation, w.depth + 1 FROM walk w"
        " JOIN checkpoint c ON c.id = w.parent_id AND c.generation < w.generation"
        f"{bound})"
    )


def lineage(conn: Connection, start_id: str, limit: int | None = None) -> list[CheckpointRow]:
    """``start_id`` and its stored ancestors, newest first (stops where GC pruned)."""
    rows = conn.execute(
        _walk("SELECT seq, parent_id, generation FROM checkpoint WHERE id = :start", limited=True)
        + f" SELECT {_CHECKPOINT_COLUMNS} FROM walk w JOIN checkpoint c ON c.seq = w.seq"
        " ORDER BY w.depth",
        {"start": start_id, "limit": -1 if limit is None else limit},
    )
    return [_checkpoint(r) for r in rows]


def depths_from_current(
    conn: Connection, namespace_ids: list[int], *, limit: int | None = None
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


def require_checkpoint(conn: Connection, checkpoint_id: str) -> CheckpointRow:
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


def ensure_namespace(conn: Connection, namespace: str, now_ms: int) -> tuple[int, int | None]:
    """(id, key scope id) of the namespace row, creating it if needed (inside a write
    transaction): a new namespace joins the key scope whose prefix covers its name, and a
    shredded scope's prefix takes no new namespace (KeyShreddedError)."""
    row = conn.one("SELECT namespace_id, scope_id FROM namespace WHERE name = ?", (namespace,))
    if row is not None:
        check_types(row, (int, (int, _N)), "namespace row")
        return int(row[0]), row[1]
    scope_id = scopes.covering_scope_id(conn, namespace)
    conn.execute(
        "INSERT INTO namespace (name, created_at_ms, scope_id) VALUES (?, ?, ?)",
        (namespace, now_ms, scope_id),
    )
    return conn.last_insert_rowid(), scope_id


def count_under_prefix(conn: Connection, prefix: str) -> int:
    """Number of namespaces whose name starts with ``prefix``."""
    return int(
        conn.scalar(
            "SELECT count(*) FROM namespace WHERE substr(name, 1, length(?1)) = ?1", (prefix,)
        )
        or 0
    )


def namespaces_under_prefix(conn: Connection, prefix: str) -> list[tuple[str, object]]:
    """(name, stored scope_id) of every namespace whose name starts with ``prefix``."""
    return [
        (str(r[0]), r[1])
        for r in conn.execute(
            "SELECT name, scope_id FROM namespace WHERE substr(name, 1, length(?1)) = ?1"
            " ORDER BY name",
            (prefix,),
        )
    ]


def namespaces_of_scope(conn: Connection, scope_id: int) -> list[str]:
    """Names of the namespaces in a key scope."""
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM namespace WHERE scope_id = ? ORDER BY name", (scope_id,)
        )
    ]


def insert(
    conn: Connection,
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
) -> tuple[int, bool]:
    """Insert a manifest and its entries ((name, blob_id, media_type, schema_pin), in name
    order) unless a checkpoint with this id exists. Returns (seq, inserted).

    ``code_revision`` is recorded beside the manifest; when the checkpoint exists already
    its stored revision (that of its first writer) is kept."""
    new = conn.execute(
        "INSERT OR IGNORE INTO checkpoint (id, namespace_id, parent_id, generation,"
        " created_at_ms, metadata, entry_count, total_size, format, code_revision)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
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
        ),
    )
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
        return existing.seq, False
    # last_insert_rowid() is the checkpoint's seq throughout: ``entry`` is a WITHOUT ROWID
    # table, whose inserts do not change it (so the rows need no seq spliced in).
    conn.executemany(
        "INSERT INTO entry (checkpoint_seq, name, blob_id, media_type, schema_pin)"
        " VALUES (last_insert_rowid(), ?, ?, ?, ?)",
        entries,
    )
    return int(new[0][0]), True


class NewCheckpoint(NamedTuple):
    """A manifest to store with :func:`insert_many` (entries as in :func:`insert`)."""

    checkpoint_id: str
    parent_id: str | None
    generation: int
    metadata_json: str
    total_size: int
    entries: list[tuple[str, int, str | None, str | None]]


def insert_many(
    conn: Connection,
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
    conn.executemany(
        "INSERT OR IGNORE INTO checkpoint (id, namespace_id, parent_id, generation,"
        " created_at_ms, metadata, entry_count, total_size, format, code_revision)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
    conn.executemany(
        "INSERT INTO entry (checkpoint_seq, name, blob_id, media_type, schema_pin)"
        " VALUES (?, ?, ?, ?, ?)",
        [(seqs[m.checkpoint_id], *e) for m in new for e in m.entries],
    )
    return seqs, len(new)


# -- scans (GC, prune, verify, transfer) ------------------------------------------------


def namespaces_by_name(conn: Connection) -> dict[str, int]:
    """Every namespace row: name -> id."""
    rows = conn.execute("SELECT namespace_id, name FROM namespace ORDER BY name")
    out: dict[str, int] = {}
    for row in rows:
        check_types(row, (int, str), "namespace row")
        out[row[1]] = row[0]
    return out


_CANDIDATE_TYPES: tuple[Any, ...] = (int, int, int, int, (str, _N))


def iter_retention_candidates(
    conn: Connection,
    namespace_ids: list[int],
    *,
    with_metadata: bool,
    seqs: Iterable[int] | None = None,
) -> Iterator[tuple[int, int, int, int, str | None]]:
    """(seq, namespace_id, generation, created_at_ms, metadata or None) of every checkpoint
    of the given namespaces (with ``seqs``: only of those checkpoints), type-checked."""
    only = "" if seqs is None else " AND seq IN (SELECT value FROM json_each(?))"
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


def seqs_in_namespaces(conn: Connection, namespace_ids: list[int]) -> list[int]:
    """The seqs of every checkpoint of the given namespaces (GC's mark: one integer column
    from the per-namespace index, no row decoding)."""
    out: list[int] = []
    for start in range(0, len(namespace_ids), 500):
        part = namespace_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        # One JSON array rather than a row per seq: json.loads builds the list in C, half
        # the cost of fetching 100,000 one-column rows. ``seq`` is the rowid: always an
        # integer, so no type check is needed.
        listed = conn.scalar(
            f"SELECT json_group_array(seq) FROM checkpoint WHERE namespace_id IN ({marks})",
            part,
        )
        out.extend(json.loads(listed))
    return out


def seqs_of_namespace(conn: Connection, namespace_id: int) -> list[tuple[int, str]]:
    """(seq, id) of every checkpoint of a namespace."""
    return [
        (int(s), str(i))
        for s, i in conn.execute(
            "SELECT seq, id FROM checkpoint WHERE namespace_id = ?", (namespace_id,)
        )
    ]


def iter_metadata(conn: Connection) -> Iterator[tuple[int, str, str, str]]:
    """(seq, id, namespace, metadata JSON) of every checkpoint."""
    for row in conn.iterate(
        "SELECT c.seq, c.id, n.name, c.metadata FROM checkpoint c"
        " JOIN namespace n ON n.namespace_id = c.namespace_id"
    ):
        check_types(row, (int, str, str, str), "checkpoint row")
        yield row


def all_rows(conn: Connection) -> list[CheckpointRow]:
    """Every checkpoint row (for import), type-checked."""
    return [_checkpoint(r) for r in conn.execute(f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoint c")]


def delete_namespace_if_empty(conn: Connection, namespace_id: int) -> None:
    """Remove a namespace row once no checkpoint belongs to it (its pointer history goes
    with it)."""
    conn.execute(
        "DELETE FROM namespace WHERE namespace_id = ? AND NOT EXISTS"
        " (SELECT 1 FROM checkpoint WHERE namespace_id = ?)",
        (namespace_id, namespace_id),
    )


def namespace_name(conn: Connection, namespace_id: int) -> str | None:
    """The name of a namespace id."""
    value = conn.scalar("SELECT name FROM namespace WHERE namespace_id = ?", (namespace_id,))
    return None if value is None else str(value)


def count(conn: Connection) -> int:
    """Number of stored checkpoints."""
    return int(conn.scalar("SELECT count(*) FROM checkpoint") or 0)


def generations(conn: Connection) -> dict[Any, Any]:
    """id -> generation of every checkpoint (as stored; for verify's lineage check)."""
    return dict(conn.execute("SELECT id, generation FROM checkpoint"))


def iter_manifests(conn: Connection) -> Iterator[tuple[Any, ...]]:
    """Every checkpoint row with each of its entries (one row per entry, a checkpoint with
    none once), ordered by checkpoint then entry name, values as stored (for verify):
    the 10 checkpoint columns, the 8 entry columns, then ``code_revision``."""
    return conn.iterate(
        "SELECT c.seq, c.id, n.name, c.namespace_id, c.parent_id, c.generation,"
        " c.created_at_ms, c.metadata, c.entry_count, c.total_size,"
        " e.name, e.blob_id, b.digest, b.size, e.media_type, e.schema_pin, b.chunk_count,"
        " b.scope_id, c.code_revision"
        " FROM checkpoint c JOIN namespace n ON n.namespace_id = c.namespace_id"
        " LEFT JOIN entry e ON e.checkpoint_seq = c.seq"
        " LEFT JOIN blob b ON b.blob_id = e.blob_id ORDER BY c.seq, e.name"
    )


def logical_bytes(conn: Connection) -> int:
    """Sum of every checkpoint's total size (what the checkpoints hold, before dedup)."""
    return int(conn.scalar("SELECT coalesce(sum(total_size), 0) FROM checkpoint") or 0)


def ids_with_namespaces(conn: Connection) -> list[tuple[Any, ...]]:
    """(id, namespace name) of every checkpoint, values as stored (for import checks)."""
    return conn.execute(
        "SELECT c.id, n.name FROM checkpoint c JOIN namespace n ON n.namespace_id = c.namespace_id"
    )
