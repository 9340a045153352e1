"""The ``pointer`` and ``pointer_history`` tables: CURRENT per namespace and every move.

This module is the only code that reads or writes them. Invariants (see schema/ckptdb.sql):
a pointer's ``digest`` seals (namespace, revision, current, fallback, previous digest) and
chains to the previous move; the newest history row of a namespace equals its pointer;
``fallback`` is always the previous CURRENT.
"""

from __future__ import annotations

import json
from typing import Any

from .. import canonical, errors
from ..connection.engine import EngineConnection
from . import dialect
from .rows import (
    HISTORY_TYPES,
    POINTER_TYPES,
    CurrentSummary,
    HistoryRow,
    PointerRow,
    check_types,
    pointer_dangling,
    typed,
)

# The current checkpoint's text columns are read as bytes and decoded here, so damage to
# them spoils only the summary, not the pointer. (Namespace names come from scalar
# subqueries, as in _CHECKPOINT_COLUMNS.) When a pointer names a checkpoint row that is
# not stored (deleted outside ckptdb: no foreign key prevents it since schema v6; and a
# seq freed that way can be reused, so the row must also be of the namespace), its ids
# come from the move that set it -- the history row of the same revision, which the
# pointer's digest must match -- so reads fail closed or fall back instead of treating the
# namespace as empty. COALESCE and CASE evaluate those subqueries only in that case.
_MOVE = (
    "(SELECT h.{col} FROM pointer_history h"
    " WHERE h.namespace_id = p.namespace_id AND h.revision = p.revision)"
)
_POINTER_COLUMNS = (
    "p.namespace_id, (SELECT name FROM namespace WHERE namespace_id = p.namespace_id),"
    f" p.current_seq, COALESCE(c.id, {_MOVE.format(col='current_id')}),"
    " CASE WHEN p.fallback_seq IS NULL THEN NULL"
    f" ELSE COALESCE(f.id, {_MOVE.format(col='fallback_id')}) END, p.revision, p.digest,"
    " p.previous_digest, p.updated_at_ms, {parent}, c.generation,"
    " c.entry_count, c.total_size, {metadata},"
    " (SELECT scope_id FROM namespace WHERE namespace_id = p.namespace_id), c.seq IS NOT NULL"
)


def _pointer_columns(conn: EngineConnection) -> str:
    return _POINTER_COLUMNS.format(
        parent=dialect.text_as_bytes(conn, "c.parent_id"),
        metadata=dialect.text_as_bytes(conn, "c.metadata"),
    )


def _summary(values: tuple[Any, ...]) -> CurrentSummary | None:
    parent, generation, entry_count, total_size, metadata = values
    if not (
        isinstance(parent, bytes | None)
        and isinstance(metadata, bytes)
        and all(isinstance(v, int) for v in (generation, entry_count, total_size))
    ):
        return None
    try:
        return CurrentSummary(
            None if parent is None else parent.decode(),
            generation,
            entry_count,
            total_size,
            metadata.decode(),
        )
    except UnicodeDecodeError:
        return None


def _pointer(row: tuple[Any, ...]) -> PointerRow:
    head = row[: len(POINTER_TYPES)]
    check_types(head, POINTER_TYPES, "pointer row")
    ns_id, name, seq, current_id, fallback_id, revision, digest, previous, updated = head
    check_types(row[-2:-1], ((int, type(None)),), "namespace row")
    stored = bool(row[-1])
    generation = row[len(POINTER_TYPES) + 1]
    return PointerRow(
        ns_id, name, seq, current_id, fallback_id, revision, digest, previous, updated,
        _summary(row[len(POINTER_TYPES) : -2]) if stored else None, row[-2], stored,
        generation if type(generation) is int else None,
    )  # fmt: skip


def lock_namespace(conn: EngineConnection, namespace: str) -> None:
    """Serialize with every other transaction that moves this namespace's pointer, until
    this one ends: what it then reads of the pointer stays true until it commits. A no-op
    on SQLite, whose write transaction already excludes every other writer; on PostgreSQL
    an advisory lock (the compare-and-swap ``UPDATE`` of :func:`move` stays the guard of
    any writer that did not take it)."""
    conn.lock(f"namespace:{namespace}")


def try_lock_namespace(conn: EngineConnection, namespace: str) -> bool:
    """:func:`lock_namespace` without waiting: False when another transaction holds it
    (always taken on SQLite)."""
    return conn.try_lock(f"namespace:{namespace}")


def lock_namespaces_of(conn: EngineConnection, seqs: list[int]) -> None:
    """:func:`lock_namespace` for every namespace holding one of the checkpoints ``seqs``,
    in name order (so two transactions that lock several never wait for each other in a
    cycle). A no-op on SQLite, without a statement."""
    if conn.dialect == "sqlite" or not seqs:
        return
    names = conn.execute(
        "SELECT DISTINCT n.name FROM checkpoint c JOIN namespace n"
        f" ON n.namespace_id = c.namespace_id WHERE c.seq IN {dialect.int_list(conn)}"
        " ORDER BY n.name",
        (json.dumps(sorted(set(seqs))),),
    )
    for (name,) in names:
        lock_namespace(conn, str(name))


def pointer(conn: EngineConnection, namespace: str, *, scan: bool = False) -> PointerRow | None:
    """The CURRENT pointer of a namespace, or None when it has none (a pointer naming a
    checkpoint that is not stored is returned, with ``current_stored`` False).

    The namespace's name is read back from its row: a damaged entry of the index on names
    that leads to another namespace's row (whose pointer is intact, its digest right for
    its own name) is passed by a search of the table (``scan``), as
    :func:`.checkpoints.checkpoint_by_id` does for ids."""
    source, name = dialect.scanned(conn, "namespace", "name") if scan else ("namespace", "name")
    row = conn.one(
        f"SELECT {_pointer_columns(conn)}"
        " FROM pointer p LEFT JOIN checkpoint c"
        " ON c.seq = p.current_seq AND c.namespace_id = p.namespace_id"
        " LEFT JOIN checkpoint f ON f.seq = p.fallback_seq AND f.namespace_id = p.namespace_id"
        f" WHERE p.namespace_id = (SELECT namespace_id FROM {source} WHERE {name} = ?)",
        (namespace,),
    )
    if row is None:
        return None
    found = _pointer(row)
    if found.namespace == namespace:
        return found
    if scan:
        raise errors.CorruptionError(
            f"the pointer found for namespace {namespace!r} belongs to {found.namespace!r}; "
            "the namespace table is damaged. Run `ckptdb verify`.",
            namespace=namespace,
            reason="index_damaged",
        )
    return pointer(conn, namespace, scan=True)


def all_pointers(conn: EngineConnection, *, unstored: bool = False) -> list[PointerRow]:
    """Every CURRENT pointer that names a stored checkpoint, by namespace name (verify
    reports the others: :func:`dangling`); with ``unstored``, the others too (their ids
    from the pointer history, ``current_stored`` False: import checks a source's)."""
    join = "LEFT JOIN" if unstored else "JOIN"
    rows = conn.execute(
        f"SELECT {_pointer_columns(conn)}"
        " FROM pointer p JOIN namespace n ON n.namespace_id = p.namespace_id"
        f" {join} checkpoint c ON c.seq = p.current_seq AND c.namespace_id = p.namespace_id"
        " LEFT JOIN checkpoint f ON f.seq = p.fallback_seq AND f.namespace_id = p.namespace_id"
        " ORDER BY n.name"
    )
    return [_pointer(r) for r in rows]


def history(conn: EngineConnection, namespace: str, limit: int | None = None) -> list[HistoryRow]:
    """Pointer moves of a namespace, newest first."""
    rows = conn.execute(
        "SELECT n.name, h.revision, h.current_id, h.fallback_id, h.previous_digest, h.digest,"
        " h.reason, h.at_ms FROM pointer_history h"
        " JOIN namespace n ON n.namespace_id = h.namespace_id"
        " WHERE n.name = ? ORDER BY h.revision DESC LIMIT ?",
        (namespace, dialect.no_limit(conn) if limit is None else limit),
    )
    return [typed(HistoryRow, r, HISTORY_TYPES, "pointer history row") for r in rows]


def moves_to(conn: EngineConnection, namespace_id: int, checkpoint_id: str) -> list[HistoryRow]:
    """The pointer moves of a namespace that made ``checkpoint_id`` CURRENT, newest first."""
    rows = conn.execute(
        "SELECT n.name, h.revision, h.current_id, h.fallback_id, h.previous_digest, h.digest,"
        " h.reason, h.at_ms FROM pointer_history h"
        " JOIN namespace n ON n.namespace_id = h.namespace_id"
        " WHERE h.namespace_id = ? AND h.current_id = ? ORDER BY h.revision DESC",
        (namespace_id, checkpoint_id),
    )
    return [typed(HistoryRow, r, HISTORY_TYPES, "pointer history row") for r in rows]


def check_pointer(ptr: PointerRow) -> None:
    """Raise CorruptionError unless the pointer row matches its digest (fail closed)."""
    expected = canonical.pointer_digest(
        ptr.namespace, ptr.revision, ptr.current_id, ptr.fallback_id, ptr.previous_digest
    )
    if expected != ptr.digest:
        raise errors.CorruptionError(
            f"the CURRENT pointer of namespace {ptr.namespace!r} does not match its digest; "
            "refusing to guess which checkpoint is current. Run `ckptdb verify`, then move "
            "CURRENT explicitly with set_current to a verified checkpoint.",
            namespace=ptr.namespace,
            reason="pointer_mismatch",
        )


def move(
    conn: EngineConnection,
    *,
    namespace: str,
    namespace_id: int,
    previous: PointerRow | None,
    new_seq: int,
    new_id: str,
    reason: str,
    now_ms: int,
    fallback: tuple[int, str] | bool | None = True,
    current: CurrentSummary | None = None,
    scope_id: int | None = None,
) -> PointerRow:
    """Point CURRENT at ``new_id`` and append the move to the pointer history (inside the
    caller's write transaction). Returns the pointer as it is now; its ``summary`` is
    ``current`` (the new CURRENT's, when the caller knows it) and its ``scope_id`` the
    namespace's key scope as the caller gives it.

    ``fallback``: True (the default) makes the old CURRENT the fallback; a (seq, id) pair or
    None names the fallback explicitly (used when moving away from a checkpoint known to be
    damaged, which must not become the fallback)."""
    if (
        previous is None
        and conn.dialect == "sqlite"
        and conn.scalar("SELECT 1 FROM pointer WHERE namespace_id = ?", (namespace_id,))
    ):
        # The caller read no pointer, yet the row exists: under SQLite's write lock the
        # caller's read is still true, so this is a damaged or edited file. (On PostgreSQL
        # it is a writer that got there first: the insert below loses to it.)
        raise pointer_dangling(namespace)
    if previous is not None and not previous.current_stored and fallback is True:
        # The old CURRENT is not stored, so it cannot become the fallback. Moving away
        # with an explicit fallback (set_current after verifying) is the repair.
        raise pointer_dangling(namespace)
    revision = previous.revision + 1 if previous is not None else 1
    if fallback is True:
        fallback_seq = previous.current_seq if previous is not None else None
        fallback_id = previous.current_id if previous is not None else None
    elif fallback is None or fallback is False:
        fallback_seq, fallback_id = None, None
    else:
        fallback_seq, fallback_id = fallback
    previous_digest = previous.digest if previous is not None else None
    digest = canonical.pointer_digest(namespace, revision, new_id, fallback_id, previous_digest)
    if previous is None and conn.scalar(
        "SELECT 1 FROM pointer_history WHERE namespace_id = ? LIMIT 1", (namespace_id,)
    ):
        # No pointer but a history: a drop of the namespace is under way (it deletes the
        # pointer first, the checkpoints in batches, the namespace and its history last).
        raise errors.ConflictError(
            f"namespace {namespace!r} is being dropped by another handle; nothing was "
            "written. Try again once the drop finished (the namespace then starts anew).",
            expected=None,
            actual=None,
            namespace=namespace,
            reason="namespace_dropping",
        )
    if previous is None:
        # The first move of a namespace. Writers that run at once (PostgreSQL) may both
        # have read no pointer: the loser's insert does nothing and it writes nothing.
        created = conn.execute(
            "INSERT INTO pointer (namespace_id, current_seq, fallback_seq, revision, digest,"
            " previous_digest, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (namespace_id) DO NOTHING RETURNING 1",
            (namespace_id, new_seq, fallback_seq, revision, digest, previous_digest, now_ms),
        )
        if not created:
            raise errors.ConflictError(
                f"namespace {namespace!r}: another writer made the first checkpoint CURRENT "
                "while this one was being written; nothing was written. Try again.",
                expected=None,
                actual=None,
                namespace=namespace,
                reason="pointer_moved",
            )
    else:
        # A compare-and-swap on the pointer the caller read (or cached): a move decided
        # against any other state would fork the chain, so it writes nothing instead.
        cas = (
            "UPDATE pointer SET current_seq = ?, fallback_seq = ?, revision = ?, digest = ?,"
            " previous_digest = ?, updated_at_ms = ?, confirmed_at_ms = NULL"
            " WHERE namespace_id = ? AND revision = ? AND digest = ? RETURNING 1"
        )
        values = (
            new_seq, fallback_seq, revision, digest, previous_digest, now_ms,
            namespace_id, previous.revision, previous.digest,
        )  # fmt: skip
        logged = (
            namespace_id, revision, new_id, fallback_id, previous_digest, digest, reason, now_ms,
        )  # fmt: skip
        if conn.dialect == "postgresql":
            # The move and its history row in one statement (one round trip to the
            # server): the row is written only when the compare-and-swap moved.
            moved = conn.execute(
                f"WITH moved AS ({cas}) INSERT INTO pointer_history (namespace_id, revision,"
                " current_id, fallback_id, previous_digest, digest, reason, at_ms)"
                " SELECT ?, ?, ?, ?, ?, ?, ?, ? FROM moved RETURNING 1",
                (*values, *logged),
            )
            if moved:
                return _moved(namespace, namespace_id, new_seq, new_id, fallback_id, revision,
                              digest, previous_digest, now_ms, current, scope_id)  # fmt: skip
        else:
            moved = conn.execute(cas, values)
        if not moved:
            raise errors.ConflictError(
                f"namespace {namespace!r}: CURRENT moved while this change was being "
                f"written (revision {previous.revision} is no longer the pointer's); nothing "
                "was written. Try again.",
                expected=previous.current_id,
                actual=None,
                namespace=namespace,
                reason="pointer_moved",
            )
    conn.execute(
        "INSERT INTO pointer_history (namespace_id, revision, current_id, fallback_id,"
        " previous_digest, digest, reason, at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (namespace_id, revision, new_id, fallback_id, previous_digest, digest, reason, now_ms),
    )
    return _moved(namespace, namespace_id, new_seq, new_id, fallback_id, revision, digest,
                  previous_digest, now_ms, current, scope_id)  # fmt: skip


def _moved(
    namespace: str,
    namespace_id: int,
    new_seq: int,
    new_id: str,
    fallback_id: str | None,
    revision: int,
    digest: str,
    previous_digest: str | None,
    now_ms: int,
    current: CurrentSummary | None,
    scope_id: int | None,
) -> PointerRow:
    """The pointer as a move just wrote it."""
    return PointerRow(
        namespace_id, namespace, new_seq, new_id, fallback_id, revision, digest,
        previous_digest, now_ms, current, scope_id, True,
        None if current is None else current.generation,
    )  # fmt: skip


def confirm(conn: EngineConnection, ptr: PointerRow, now_ms: int) -> None:
    """Write a tiny change so the enclosing transaction's COMMIT syncs the WAL.

    Used when CURRENT already names the checkpoint being committed: the frames that hold it
    may come from an attempt whose COMMIT failed, and a successful commit after them is what
    makes them durable before it is acknowledged (``confirmed_at_ms`` exists for this).
    """
    conn.execute(
        "UPDATE pointer SET confirmed_at_ms = ? WHERE namespace_id = ?",
        (now_ms, ptr.namespace_id),
    )


def history_of(conn: EngineConnection, namespace_id: int) -> list[tuple[Any, ...]]:
    """The raw history rows of a namespace, oldest first, as stored (for a verbatim copy):
    (revision, current_id, fallback_id, previous_digest, digest, reason, at_ms)."""
    return conn.execute(
        "SELECT revision, current_id, fallback_id, previous_digest, digest, reason, at_ms"
        " FROM pointer_history WHERE namespace_id = ? ORDER BY revision",
        (namespace_id,),
    )


def insert_verbatim(
    conn: EngineConnection,
    ptr: PointerRow,
    *,
    namespace_id: int,
    current_seq: int,
    fallback_seq: int | None,
    history: list[tuple[Any, ...]],
) -> None:
    """Copy a pointer and its whole history exactly as another file holds them (export),
    so its digest chain verifies in the copy too."""
    conn.execute(
        "INSERT INTO pointer (namespace_id, current_seq, fallback_seq, revision, digest,"
        " previous_digest, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            namespace_id,
            current_seq,
            fallback_seq,
            ptr.revision,
            ptr.digest,
            ptr.previous_digest,
            ptr.updated_at_ms,
        ),
    )
    conn.executemany(
        "INSERT INTO pointer_history (namespace_id, revision, current_id, fallback_id,"
        " previous_digest, digest, reason, at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(namespace_id, *h) for h in history],
    )


def protected_seqs(conn: EngineConnection, namespace_id: int | None = None) -> set[int]:
    """Seqs of every CURRENT and fallback (of one namespace, or all)."""
    protected: set[int] = set()
    for row in conn.execute(
        "SELECT current_seq, fallback_seq FROM pointer"
        " WHERE CAST(?1 AS BIGINT) IS NULL OR namespace_id = ?1",
        (namespace_id,),
    ):
        check_types(row, (int, (int, type(None))), "pointer row")
        protected.update(v for v in row if v is not None)
    return protected


def protected_among(conn: EngineConnection, seqs: list[int]) -> set[int]:
    """The seqs among ``seqs`` that a CURRENT or fallback names -- any namespace's pointer:
    a damaged one may name another namespace's checkpoint, and that one is kept too. One
    statement whatever the number of namespaces (a deletion of one LangGraph thread no
    longer reads every pointer of the file)."""
    if not seqs:
        return set()
    wanted = set(seqs)
    listed = json.dumps(sorted(wanted))
    found: set[int] = set()
    seqs_in = dialect.int_list(conn, "?1")
    for row in conn.execute(
        "SELECT current_seq, fallback_seq FROM pointer"
        f" WHERE current_seq IN {seqs_in} OR fallback_seq IN {seqs_in}",
        (listed,),
    ):
        check_types(row, (int, (int, type(None))), "pointer row")
        found.update(v for v in row if v is not None)
    return found & wanted


def dangling(conn: EngineConnection) -> list[tuple[Any, str, Any]]:
    """(namespace id, 'current' or 'fallback', seq) of every pointer that names a checkpoint
    row that is not stored (for verify: what the foreign keys of schema v5 prevented). The
    ids and seqs are returned as stored: a damaged row may hold a value of another type."""
    return [
        (ns_id, str(role), seq)
        for ns_id, role, seq in conn.execute(
            "SELECT p.namespace_id, 'current', p.current_seq FROM pointer p"
            " WHERE NOT EXISTS (SELECT 1 FROM checkpoint c"
            " WHERE c.seq = p.current_seq AND c.namespace_id = p.namespace_id)"
            " UNION ALL SELECT p.namespace_id, 'fallback', p.fallback_seq FROM pointer p"
            " WHERE p.fallback_seq IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM checkpoint c"
            " WHERE c.seq = p.fallback_seq AND c.namespace_id = p.namespace_id)"
        )
    ]


def delete(conn: EngineConnection, namespace_id: int) -> None:
    """Remove a namespace's pointer (drop_namespace; its history goes with the namespace)."""
    conn.execute("DELETE FROM pointer WHERE namespace_id = ?", (namespace_id,))


def trim_history(conn: EngineConnection, namespace_id: int, moves: int) -> tuple[int, int | None]:
    """Delete the moves older than the newest ``moves`` (inside the caller's write
    transaction). Returns (rows deleted, first revision kept or None if nothing changed)."""
    newest = conn.scalar(
        "SELECT max(revision) FROM pointer_history WHERE namespace_id = ?", (namespace_id,)
    )
    if newest is None or int(newest) <= moves:
        return 0, None
    floor = int(newest) - moves + 1
    conn.execute(
        "DELETE FROM pointer_history WHERE namespace_id = ? AND revision < ?",
        (namespace_id, floor),
    )
    changed = conn.changes()
    return changed, floor if changed else None


def iterate_history(conn: EngineConnection) -> Any:
    """Every history row as stored, by namespace and revision (for verify):
    (namespace_id, revision, current_id, fallback_id, previous_digest, digest)."""
    return conn.iterate(
        "SELECT namespace_id, revision, current_id, fallback_id, previous_digest, digest"
        " FROM pointer_history ORDER BY namespace_id, revision"
    )


def count(conn: EngineConnection) -> int:
    """Number of namespaces with a CURRENT pointer."""
    return int(conn.scalar("SELECT count(*) FROM pointer") or 0)
