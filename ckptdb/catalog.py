"""Reading the catalog: checkpoints, entries, pointers, lineage and pointer history.

Plain row types and the SQL that fills them. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from . import canonical, errors, validation
from .connection import Connection

T = TypeVar("T")
_N = type(None)
CHECKPOINT_TYPES: tuple[Any, ...] = (int, str, str, int, (str, _N), int, int, str, int, int)
ENTRY_TYPES: tuple[Any, ...] = (str, int, str, int, (str, _N), (str, _N), int)
_POINTER_TYPES: tuple[Any, ...] = (int, str, int, str, (str, _N), int, str, (str, _N), int)
_HISTORY_TYPES: tuple[Any, ...] = (str, int, str, (str, _N), (str, _N), str, str, int)


def check_types(row: tuple[Any, ...], types: tuple[Any, ...], what: str) -> None:
    """Raise CorruptionError unless every value has its column's type: a damaged record
    can hold a value of another type (STRICT tables check types on write only), and that
    must surface as corruption, not as a TypeError far away."""
    for value, expected in zip(row, types, strict=True):
        if not isinstance(value, expected):
            raise errors.CorruptionError(
                f"{what}: a stored value has the wrong type ({type(value).__name__}); the "
                "record is damaged. Run `ckptdb verify`.",
                reason="wrong_type",
            )


def typed(cls: type[T], row: tuple[Any, ...], types: tuple[Any, ...], what: str) -> T:
    """Build ``cls`` from a row after :func:`check_types`."""
    check_types(row, types, what)
    return cls(*row)


# The namespace name comes from a scalar subquery rather than a join: measured 3-4x faster
# for these single-row lookups on every commit and load (docs/performance.md).
_CHECKPOINT_COLUMNS = (
    "c.seq, c.id, (SELECT name FROM namespace WHERE namespace_id = c.namespace_id),"
    " c.namespace_id, c.parent_id, c.generation, c.created_at_ms, c.metadata, c.entry_count,"
    " c.total_size"
)


@dataclass(frozen=True)
class CheckpointRow:
    """A row of ``checkpoint`` joined with its namespace name."""

    seq: int
    id: str
    namespace: str
    namespace_id: int
    parent_id: str | None
    generation: int
    created_at_ms: int
    metadata_json: str
    entry_count: int
    total_size: int


@dataclass(frozen=True)
class EntryRow:
    """An entry joined with its blob."""

    name: str
    blob_id: int
    digest: str
    size: int
    media_type: str | None
    schema_pin: str | None
    chunk_count: int

    def record(self) -> canonical.EntryRecord:
        """The entry as it takes part in the checkpoint identity."""
        return canonical.EntryRecord(
            self.name, self.digest, self.size, self.media_type, self.schema_pin
        )


@dataclass(frozen=True)
class CurrentSummary:
    """What a commit needs to know about the checkpoint CURRENT names (from its row, not
    verified: only used where a mismatch is harmless or re-checked through the id)."""

    parent_id: str | None
    generation: int
    entry_count: int
    total_size: int
    metadata_json: str


@dataclass(frozen=True)
class PointerRow:
    """The CURRENT pointer of a namespace, plus a summary of the checkpoint it names."""

    namespace_id: int
    namespace: str
    current_seq: int
    current_id: str
    fallback_id: str | None
    revision: int
    digest: str
    previous_digest: str | None
    updated_at_ms: int
    #: None when the row of the current checkpoint is damaged (a value of the wrong type or
    #: text that is not UTF-8): the pointer itself is still readable, so fallback can work.
    summary: CurrentSummary | None

    def current_summary(self) -> CurrentSummary:
        """The summary, or CorruptionError when the current checkpoint's row is damaged."""
        if self.summary is None:
            raise errors.CorruptionError(
                f"namespace {self.namespace!r}: the row of its CURRENT checkpoint "
                f"{self.current_id[:12]} is damaged. Run `ckptdb verify`, then move CURRENT "
                "to a verified checkpoint with set_current (load with fallback finds one).",
                namespace=self.namespace,
                checkpoint_id=self.current_id,
                reason="wrong_type",
            )
        return self.summary


# The current checkpoint's text columns are read as bytes and decoded here, so damage to
# them spoils only the summary, not the pointer. (Namespace names come from scalar
# subqueries, as in _CHECKPOINT_COLUMNS.)
_POINTER_COLUMNS = (
    "p.namespace_id, (SELECT name FROM namespace WHERE namespace_id = p.namespace_id),"
    " p.current_seq, c.id, f.id, p.revision, p.digest,"
    " p.previous_digest, p.updated_at_ms, CAST(c.parent_id AS BLOB), c.generation,"
    " c.entry_count, c.total_size, CAST(c.metadata AS BLOB)"
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
    head = row[: len(_POINTER_TYPES)]
    check_types(head, _POINTER_TYPES, "pointer row")
    ns_id, name, seq, current_id, fallback_id, revision, digest, previous, updated = head
    return PointerRow(
        ns_id, name, seq, current_id, fallback_id, revision, digest, previous, updated,
        _summary(row[len(_POINTER_TYPES) :]),
    )  # fmt: skip


@dataclass(frozen=True)
class HistoryRow:
    """One pointer move."""

    namespace: str
    revision: int
    current_id: str
    fallback_id: str | None
    previous_digest: str | None
    digest: str
    reason: str
    at_ms: int

    def intact(self) -> bool:
        """True when the row matches its digest (so its ids can be trusted)."""
        return self.digest == canonical.pointer_digest(
            self.namespace, self.revision, self.current_id, self.fallback_id, self.previous_digest
        )


def _checkpoint(row: tuple[Any, ...]) -> CheckpointRow:
    return typed(CheckpointRow, row, CHECKPOINT_TYPES, "checkpoint row")


def checkpoint_by_id(
    conn: Connection, checkpoint_id: str, *, scan: bool = False
) -> CheckpointRow | None:
    """The checkpoint with this full id. ``scan`` reads the table instead of the index on
    ids (slow; for recovery, when a damaged index may hide a row that is there)."""
    where = "+c.id = ?" if scan else "c.id = ?"  # unary + keeps SQLite off the index
    row = conn.one(
        f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoint c WHERE {where}",
        (checkpoint_id,),
    )
    return None if row is None else _checkpoint(row)


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
        "SELECT e.name, e.blob_id, b.digest, b.size, e.media_type, e.schema_pin, b.chunk_count"
        " FROM entry e LEFT JOIN blob b ON b.blob_id = e.blob_id"
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


def recomputed_id(row: CheckpointRow, entries: list[EntryRow]) -> str:
    """The id the stored manifest actually hashes to."""
    return canonical.checkpoint_id(
        row.namespace,
        row.parent_id,
        row.generation,
        [e.record() for e in entries],
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


def check_manifest(row: CheckpointRow, entries: list[EntryRow]) -> None:
    """Raise CorruptionError unless the stored rows hash to the checkpoint's id."""
    if len(entries) != row.entry_count or recomputed_id(row, entries) != row.id:
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


def pointer(conn: Connection, namespace: str) -> PointerRow | None:
    """The CURRENT pointer of a namespace, or None when it has none."""
    row = conn.one(
        f"SELECT {_POINTER_COLUMNS}"
        " FROM pointer p JOIN checkpoint c ON c.seq = p.current_seq"
        " LEFT JOIN checkpoint f ON f.seq = p.fallback_seq"
        " WHERE p.namespace_id = (SELECT namespace_id FROM namespace WHERE name = ?)",
        (namespace,),
    )
    return None if row is None else _pointer(row)


def all_pointers(conn: Connection) -> list[PointerRow]:
    """Every CURRENT pointer, by namespace name."""
    rows = conn.execute(
        f"SELECT {_POINTER_COLUMNS}"
        " FROM pointer p JOIN namespace n ON n.namespace_id = p.namespace_id"
        " JOIN checkpoint c ON c.seq = p.current_seq"
        " LEFT JOIN checkpoint f ON f.seq = p.fallback_seq ORDER BY n.name"
    )
    return [_pointer(r) for r in rows]


def checkpoint_counts(conn: Connection) -> dict[int, int]:
    """Number of stored checkpoints per namespace id."""
    counts: dict[int, int] = {}
    for row in conn.execute("SELECT namespace_id, count(*) FROM checkpoint GROUP BY namespace_id"):
        check_types(row, (int, int), "checkpoint row")
        counts[row[0]] = row[1]
    return counts


def lineage(conn: Connection, start_id: str, limit: int | None = None) -> list[CheckpointRow]:
    """``start_id`` and its stored ancestors, newest first (stops where GC pruned).

    Each step must go to a strictly smaller generation, so damaged links cannot loop.
    """
    rows = conn.execute(
        "WITH RECURSIVE walk (seq, parent_id, generation, depth) AS ("
        "  SELECT seq, parent_id, generation, 0 FROM checkpoint WHERE id = ?"
        "  UNION ALL"
        "  SELECT c.seq, c.parent_id, c.generation, w.depth + 1 FROM walk w"
        "  JOIN checkpoint c ON c.id = w.parent_id AND c.generation < w.generation"
        "  WHERE ? < 0 OR w.depth + 1 < ?"
        f") SELECT {_CHECKPOINT_COLUMNS} FROM walk w JOIN checkpoint c ON c.seq = w.seq"
        " ORDER BY w.depth",
        (start_id, -1 if limit is None else limit, -1 if limit is None else limit),
    )
    return [_checkpoint(r) for r in rows]


def history(conn: Connection, namespace: str, limit: int | None = None) -> list[HistoryRow]:
    """Pointer moves of a namespace, newest first."""
    rows = conn.execute(
        "SELECT n.name, h.revision, h.current_id, h.fallback_id, h.previous_digest, h.digest,"
        " h.reason, h.at_ms FROM pointer_history h"
        " JOIN namespace n ON n.namespace_id = h.namespace_id"
        " WHERE n.name = ? ORDER BY h.revision DESC LIMIT ?",
        (namespace, -1 if limit is None else limit),
    )
    return [typed(HistoryRow, r, _HISTORY_TYPES, "pointer history row") for r in rows]


def moves_to(conn: Connection, namespace_id: int, checkpoint_id: str) -> list[HistoryRow]:
    """The pointer moves of a namespace that made ``checkpoint_id`` CURRENT, newest first."""
    rows = conn.execute(
        "SELECT n.name, h.revision, h.current_id, h.fallback_id, h.previous_digest, h.digest,"
        " h.reason, h.at_ms FROM pointer_history h"
        " JOIN namespace n ON n.namespace_id = h.namespace_id"
        " WHERE h.namespace_id = ? AND h.current_id = ? ORDER BY h.revision DESC",
        (namespace_id, checkpoint_id),
    )
    return [typed(HistoryRow, r, _HISTORY_TYPES, "pointer history row") for r in rows]


def chunk_size(conn: Connection, lowest: int, highest: int) -> int:
    """The chunk size fixed when the file was created (setting ``chunk_size``)."""
    stored = conn.scalar("SELECT value FROM setting WHERE key = 'chunk_size'")
    if not (isinstance(stored, str) and stored.isascii() and stored.isdigit()):
        size = None
    else:
        size = int(stored)
    if size is None or not lowest <= size <= highest:
        raise errors.CorruptionError(
            f"the stored chunk_size setting ({stored!r}) is missing or not a whole number "
            f"between {lowest} and {highest}; the file is damaged. Restore it from a backup "
            "or export.",
            reason="bad_setting",
        )
    return size


def require_checkpoint(conn: Connection, checkpoint_id: str) -> CheckpointRow:
    """The checkpoint with this full id, or CheckpointNotFoundError."""
    validation.checkpoint_id(checkpoint_id)
    row = checkpoint_by_id(conn, checkpoint_id)
    if row is None:
        raise errors.CheckpointNotFoundError(
            f"no checkpoint {checkpoint_id[:12]}... in this database (never committed here, or "
            "garbage-collected)",
            checkpoint_id=checkpoint_id,
        )
    return row


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
