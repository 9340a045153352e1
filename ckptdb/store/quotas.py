"""The ``quota`` table: limits on what the namespaces under a name prefix may hold.

This module is the only code that writes ``quota``, and the only code that reads it. It
also holds the usage reads a quota is checked against -- the number and logical size of
the ``checkpoint`` rows of a namespace or of every namespace under a prefix, and the
``namespace_usage`` view -- which only read tables other modules own, never write them.

    quota (prefix, applies_to, max_checkpoints, max_bytes, on_exceed, updated_at_ms)
          PRIMARY KEY (prefix, applies_to), WITHOUT ROWID

Invariants (the SQL constraints state 1; ops/quota.py validates 2 before any write):

1. At least one limit is set: ``max_checkpoints >= 1`` or ``max_bytes >= 0`` (or both).
2. ``prefix`` is ``''`` (every namespace) or a text a namespace can start with: at most
   256 characters (a namespace's own limit), no control character, no leading
   whitespace, NFC-normalized.
3. A namespace N is under a quota exactly when ``N.startswith(prefix)`` (code points, which
   is also SQLite's BINARY order over UTF-8). ``applies_to = 'each'`` bounds the usage of
   every such namespace on its own; ``'total'`` bounds the sum over all of them. Usage is
   (count of checkpoint rows, sum of their ``total_size``): logical bytes, what loads
   return, whatever deduplication and compression save.
4. Rows change only through :func:`upsert` and :func:`delete`, and each of them drops the
   connection's :class:`QuotaCache`. Another connection's change is seen through
   ``PRAGMA data_version``, which moves whenever another connection commits. So a commit
   transaction is always checked against the quota rows committed when it began.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import errors, models
from ..connection.engine import EngineConnection
from .rows import check_types

if TYPE_CHECKING:
    from ..connection.postgres import PgConnection

_N = type(None)
_QUOTA_TYPES: tuple[Any, ...] = (str, str, (int, _N), (int, _N), str, int)
_COLUMNS = "prefix, applies_to, max_checkpoints, max_bytes, on_exceed, updated_at_ms"


@dataclass(frozen=True)
class QuotaRow:
    """One row of ``quota``, type-checked."""

    prefix: str
    applies_to: str
    max_checkpoints: int | None
    max_bytes: int | None
    on_exceed: str
    updated_at_ms: int

    def model(self) -> models.Quota:
        """The public model of this row."""
        return models.Quota(
            prefix=self.prefix,
            applies_to=self.applies_to,  # type: ignore[arg-type]
            max_checkpoints=self.max_checkpoints,
            max_bytes=self.max_bytes,
            on_exceed=self.on_exceed,  # type: ignore[arg-type]
            updated_at=models.from_ms(self.updated_at_ms),
        )

    def describe(self) -> str:
        """How a message names this quota."""
        return f"quota {self.prefix!r} ({self.applies_to}, {self.on_exceed})"


def _row(values: tuple[Any, ...]) -> QuotaRow:
    check_types(values, _QUOTA_TYPES, "quota row")
    row = QuotaRow(*values)
    if (
        row.applies_to not in ("each", "total")
        or row.on_exceed not in ("refuse", "evict")
        or (row.max_checkpoints is None and row.max_bytes is None)
    ):
        raise errors.CorruptionError(
            f"the stored quota {row.prefix!r} is damaged (applies_to {row.applies_to!r}, "
            f"on_exceed {row.on_exceed!r}); set it again (`set_quota`, `ckptdb quota set`) "
            "or clear it (`clear_quota`, `ckptdb quota clear`).",
            reason="quota_damaged",
        )
    return row


@dataclass
class QuotaCache:
    """The quota rows as one connection last read them, and how to match a namespace.

    Valid until invalidated: when this connection writes the table (:func:`upsert`,
    :func:`delete`) or another connection committed (the handle's check with ``PRAGMA
    data_version`` at the start of each write transaction). Used under the handle lock."""

    #: True once the rows are read
    loaded: bool = False
    rows: tuple[QuotaRow, ...] = ()
    by_prefix: dict[str, list[QuotaRow]] = field(default_factory=dict)
    #: the distinct prefix lengths, longest first: matching a name looks up its prefix of
    #: each of these lengths (a few dict lookups, whatever the number of quotas)
    lengths: tuple[int, ...] = ()

    def invalidate(self) -> None:
        """Forget the rows: the next :func:`matching` reads the table again."""
        self.loaded = False

    def fill(self, rows: list[QuotaRow]) -> None:
        """Remember ``rows``."""
        by_prefix: dict[str, list[QuotaRow]] = {}
        for row in rows:
            by_prefix.setdefault(row.prefix, []).append(row)
        self.rows = tuple(rows)
        self.by_prefix = by_prefix
        self.lengths = tuple(sorted({len(p) for p in by_prefix}, reverse=True))
        self.loaded = True


# -- the quota rows ----------------------------------------------------------------------


_ALL = f"SELECT {_COLUMNS} FROM quota ORDER BY prefix, applies_to"


def all_quotas(conn: EngineConnection) -> list[QuotaRow]:
    """Every stored quota, by prefix then applies_to."""
    return [_row(r) for r in conn.execute(_ALL)]


def prefetch(conn: PgConnection, cache: QuotaCache) -> None:
    """Refill ``cache`` with the rows as the write transaction just begun sees them, in the
    round trip of its BEGIN (PostgreSQL, where other writers may change them at any time
    and every write transaction reads them again)."""
    cache.invalidate()
    conn.prefetch(_ALL, lambda rows: cache.fill([_row(r) for r in rows]))


def get(conn: EngineConnection, prefix: str, applies_to: str) -> QuotaRow | None:
    """The quota of (prefix, applies_to), if one is stored."""
    row = conn.one(
        f"SELECT {_COLUMNS} FROM quota WHERE prefix = ? AND applies_to = ?", (prefix, applies_to)
    )
    return None if row is None else _row(row)


def upsert(conn: EngineConnection, cache: QuotaCache, row: QuotaRow) -> None:
    """Store (or replace) the quota of (prefix, applies_to), inside a write transaction."""
    cache.invalidate()
    conn.execute(
        f"INSERT INTO quota ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (prefix, applies_to) DO UPDATE SET"
        " max_checkpoints = excluded.max_checkpoints, max_bytes = excluded.max_bytes,"
        " on_exceed = excluded.on_exceed, updated_at_ms = excluded.updated_at_ms",
        (
            row.prefix,
            row.applies_to,
            row.max_checkpoints,
            row.max_bytes,
            row.on_exceed,
            row.updated_at_ms,
        ),
    )


def delete(conn: EngineConnection, cache: QuotaCache, prefix: str, applies_to: str) -> bool:
    """Remove the quota of (prefix, applies_to), inside a write transaction; True if there
    was one."""
    cache.invalidate()
    conn.execute("DELETE FROM quota WHERE prefix = ? AND applies_to = ?", (prefix, applies_to))
    return conn.changes() > 0


def lock_prefix(conn: EngineConnection, prefix: str) -> None:
    """Serialize with every other commit under ``prefix`` until this transaction ends (a
    quota over the prefix's total reads all their usage; a no-op on SQLite, whose writers
    are serialized already)."""
    conn.lock(f"quota:{prefix}")


def matching(conn: EngineConnection, cache: QuotaCache, namespace: str) -> list[QuotaRow]:
    """The quotas ``namespace`` is under, longest prefix first ('each' before 'total'),
    as committed when the caller's write transaction began (call it inside one).

    The rows are read once and kept until the cache is invalidated: by this connection's
    own writes to the table (:func:`upsert`, :func:`delete`) and by the handle when another
    connection committed (its check right after ``BEGIN IMMEDIATE``, ``ops/handle``). A
    match then costs a dict lookup per distinct prefix length."""
    if not cache.loaded:
        cache.fill(all_quotas(conn))
    if not cache.rows:
        return []
    found: list[QuotaRow] = []
    size = len(namespace)
    for length in cache.lengths:
        if length <= size:
            rows = cache.by_prefix.get(namespace[:length])
            if rows:
                found.extend(sorted(rows, key=lambda r: r.applies_to))
    return found


# -- usage (reads of checkpoint / namespace rows and the namespace_usage view) -------------


def _successor(prefix: str) -> str | None:
    """The smallest text after every text that starts with ``prefix`` (None: there is none,
    ``prefix`` is empty or all U+10FFFF). Code point order is SQLite's BINARY order over
    UTF-8, so ``prefix <= name < successor`` is a range scan of the unique index on names."""
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if code == 0xD800:
            code = 0xE000  # surrogates are not text
        if code <= 0x10FFFF:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None


def _under(prefix: str) -> tuple[str, tuple[str, ...]]:
    """A WHERE clause on ``namespace`` (alias ``n``) selecting the names under ``prefix``."""
    upper = _successor(prefix)
    if not prefix:
        return "TRUE", ()
    if upper is None:
        return "n.name >= ?", (prefix,)
    return "n.name >= ? AND n.name < ?", (prefix, upper)


def _usage(row: tuple[Any, ...] | None, with_bytes: bool) -> tuple[int, int | None]:
    if row is None:
        return 0, 0 if with_bytes else None
    check_types(row, (int, int if with_bytes else _N), "checkpoint sizes")
    return int(row[0]), row[1]


# Counting alone reads only the index on (namespace_id, generation); the sum of sizes
# reads every row of the namespace too (measured ~33 ns against ~100 ns per checkpoint),
# so it is asked for only by a quota that has a byte limit.
def _figures(with_bytes: bool) -> str:
    # The sum cast: PostgreSQL types a sum of BIGINT as numeric (a decimal in Python).
    return "count(*), " + (
        "CAST(coalesce(sum(c.total_size), 0) AS BIGINT)" if with_bytes else "NULL"
    )


def namespace_usage(
    conn: EngineConnection, namespace_id: int, *, with_bytes: bool
) -> tuple[int, int | None]:
    """(checkpoints, logical bytes) of one namespace; bytes None unless ``with_bytes``."""
    return _usage(
        conn.one(
            f"SELECT {_figures(with_bytes)} FROM checkpoint c WHERE c.namespace_id = ?",
            (namespace_id,),
        ),
        with_bytes,
    )


def prefix_usage(
    conn: EngineConnection, prefix: str, *, with_bytes: bool
) -> tuple[int, int | None]:
    """(checkpoints, logical bytes) of every namespace under ``prefix`` together; bytes
    None unless ``with_bytes``."""
    where, params = _under(prefix)
    return _usage(
        conn.one(
            f"SELECT {_figures(with_bytes)} FROM checkpoint c WHERE c.namespace_id IN"
            f" (SELECT n.namespace_id FROM namespace n WHERE {where})",
            params,
        ),
        with_bytes,
    )


def namespaces_under(conn: EngineConnection, prefix: str) -> dict[str, int]:
    """name -> id of every namespace under ``prefix``."""
    where, params = _under(prefix)
    out: dict[str, int] = {}
    for row in conn.execute(
        f"SELECT n.name, n.namespace_id FROM namespace n WHERE {where}", params
    ):
        check_types(row, (str, int), "namespace row")
        out[row[0]] = row[1]
    return out


def oldest_first(
    conn: EngineConnection, *, namespace_id: int | None = None, prefix: str | None = None
) -> Iterator[tuple[int, int, int]]:
    """(seq, namespace_id, total_size) of the checkpoints of one namespace
    (``namespace_id``) or of every namespace under ``prefix``, oldest first: by creation
    time, then by storage order. Streamed, so an eviction that needs the oldest few reads
    only those into Python."""
    params: tuple[int | str, ...]
    if namespace_id is not None:
        where, params = "c.namespace_id = ?", (namespace_id,)
    else:
        under, names = _under(prefix or "")
        where = f"c.namespace_id IN (SELECT n.namespace_id FROM namespace n WHERE {under})"
        params = names
    for row in conn.iterate(
        f"SELECT c.seq, c.namespace_id, c.total_size FROM checkpoint c WHERE {where}"
        " ORDER BY c.created_at_ms, c.seq",
        params,
    ):
        check_types(row, (int, int, int), "checkpoint row")
        yield row[0], row[1], row[2]


def usage_by_namespace(conn: EngineConnection) -> list[models.NamespaceUsage]:
    """Every namespace's checkpoints, logical and stored bytes (the ``namespace_usage``
    view), by name."""
    out = []
    for row in conn.execute(
        "SELECT namespace, checkpoints, logical_bytes, stored_bytes FROM namespace_usage"
        " ORDER BY namespace"
    ):
        check_types(row, (str, int, int, int), "namespace_usage row")
        out.append(
            models.NamespaceUsage(
                namespace=row[0], checkpoints=row[1], logical_bytes=row[2], stored_bytes=row[3]
            )
        )
    return out
