"""Quotas: limits on the checkpoints and logical bytes kept under a namespace prefix,
enforced inside the commit transaction (issue 14).

A quota names a prefix (``''`` = every namespace), whether it bounds each namespace under
it on its own (``each``) or all of them together (``total``), at most how many checkpoints
and/or logical bytes (the sum of the checkpoints' total sizes, what loads return) they may
hold, and what a commit that would pass it gets:

* ``refuse`` -- :class:`~ckptdb.errors.QuotaExceededError` (``quota_exceeded``); nothing
  of that commit is written.
* ``evict``  -- the oldest checkpoints under the quota that nothing protects are deleted in
  the same transaction, oldest first (by creation time, then storage order), until the
  commit fits. Protected: every CURRENT and fallback, every pin, and whatever the stored
  retention policy of the namespace (or the database-wide one) keeps -- GC's own rules
  (:func:`ckptdb.ops.gc.protected_seqs`, :func:`ckptdb.ops.gc.kept_by_stored_policies`),
  with "no policy" meaning "nothing beyond the protected". The deletion is GC's own
  (:func:`ckptdb.ops.gc.delete_batch`: checkpoints, then the blobs nothing references any
  more, then their chunks unless touched within GC's grace period, which the next ``gc``
  collects). A ``quota_evict`` receipt lists what went, in the same transaction. If
  evicting everything it may does not make room, the commit is refused as above and
  nothing is evicted.

When several quotas cover a namespace, the evicting ones run first (longest prefix first,
``each`` before ``total``), then every refusing one is checked against the usage that
results: a commit stands only when all of them hold.

Only a commit that stores a new checkpoint is checked: an idempotent commit (the content
CURRENT already holds) and a move back to a stored checkpoint add nothing. A quota set
below what a namespace already holds takes effect at its next commit. With group commit
each member is checked in its own savepoint, against what the members before it left, so
one member's refusal fails that member alone.

On PostgreSQL, where commits to other namespaces run at once, a ``total`` quota's commits
queue on the prefix's lock (:func:`ckptdb.store.quotas.lock_prefix`), and an eviction takes
the lock of each other namespace it deletes from without waiting: its holder may be a commit
under the same prefix waiting for this one. A namespace held elsewhere is passed over; when
what is left cannot make room, the commit is a retryable ``BusyTimeoutError`` (nothing
written or evicted).

The check runs in ``ops/commit.publish`` after the pointer moved (so the new checkpoint is
CURRENT and the previous one its fallback, both protected) and before the ``on_publish``
hook. When no quota covers the namespace it costs one ``PRAGMA data_version`` (the quota
rows are cached per connection, see :mod:`ckptdb.store.quotas`).
"""

from __future__ import annotations

import dataclasses
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

from .. import errors, models, validation
from ..connection.engine import EngineConnection
from ..store import pointers, quotas
from ..store.quotas import QuotaRow
from ..store.receipts import store_receipt
from . import gc
from .unit import Unit, holds, writes

__all__ = [
    "APPLIES_TO",
    "ON_EXCEED",
    "AppliesTo",
    "OnExceed",
    "check_applies_to",
    "check_prefix",
    "clear_quota",
    "enforce",
    "list_quotas",
    "quota_row",
    "set_quota",
]

AppliesTo = Literal["each", "total"]
OnExceed = Literal["refuse", "evict"]
APPLIES_TO = ("each", "total")
ON_EXCEED = ("refuse", "evict")
#: The largest limit accepted (SQLite's INTEGER).
MAX_LIMIT = 2**63 - 1


# -- validating what a caller asks for --------------------------------------------------


def check_prefix(prefix: object) -> str:
    """``prefix`` if it can start a namespace name (or is ``''``, every namespace), else
    InvalidQuotaError."""
    if not isinstance(prefix, str):
        raise errors.InvalidQuotaError(
            f"a quota prefix must be a str (use '' for every namespace), got "
            f"{type(prefix).__name__}",
            field="prefix",
        )
    if not prefix:
        return prefix
    shown = repr(prefix[:80])
    if len(prefix) > validation.MAX_NAMESPACE_CHARS:
        raise errors.InvalidQuotaError(
            f"quota prefix {shown}... is {len(prefix)} characters; a namespace has at most "
            f"{validation.MAX_NAMESPACE_CHARS}, so it could never match one",
            field="prefix",
        )
    bad = next(
        (
            ch
            for ch in prefix
            if unicodedata.category(ch) in ("Cc", "Cs") or ch in ("\u2028", "\u2029")
        ),
        None,
    )
    if bad is not None:
        raise errors.InvalidQuotaError(
            f"quota prefix {shown} contains the control character {bad!r}; namespaces never "
            "do, so it could never match one",
            field="prefix",
        )
    if prefix != prefix.lstrip():
        raise errors.InvalidQuotaError(
            f"quota prefix {shown} starts with whitespace; namespaces never do, so it could "
            "never match one",
            field="prefix",
        )
    if unicodedata.normalize("NFC", prefix) != prefix:
        raise errors.InvalidQuotaError(
            f"quota prefix {shown} is not NFC-normalized, as namespace names are; give "
            "unicodedata.normalize('NFC', prefix)",
            field="prefix",
        )
    return prefix


def check_applies_to(applies_to: object) -> str:
    """``'each'`` or ``'total'``, else InvalidQuotaError."""
    if not isinstance(applies_to, str) or applies_to not in APPLIES_TO:
        raise errors.InvalidQuotaError(
            f"applies_to must be 'each' (every namespace under the prefix on its own) or "
            f"'total' (all of them together), got {applies_to!r}",
            field="applies_to",
        )
    return applies_to


def _limit(name: str, value: object, lowest: int) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= MAX_LIMIT:
        raise errors.InvalidQuotaError(
            f"{name} must be a whole number from {lowest} to {MAX_LIMIT}, or None for no "
            f"limit; got {value!r}",
            field=name,
        )
    return value


def quota_row(
    prefix: object,
    *,
    max_checkpoints: object,
    max_bytes: object,
    applies_to: object,
    on_exceed: object,
    now_ms: int = 0,
) -> QuotaRow:
    """The row ``set_quota`` stores, after checking every argument (InvalidQuotaError);
    ``set_quota`` stamps it with the time it is stored."""
    prefix = check_prefix(prefix)
    applies_to = check_applies_to(applies_to)
    if not isinstance(on_exceed, str) or on_exceed not in ON_EXCEED:
        raise errors.InvalidQuotaError(
            f"on_exceed must be 'refuse' (the commit fails with quota_exceeded) or 'evict' "
            f"(the oldest unprotected checkpoints make room), got {on_exceed!r}",
            field="on_exceed",
        )
    most = _limit("max_checkpoints", max_checkpoints, 1)
    size = _limit("max_bytes", max_bytes, 0)
    if most is None and size is None:
        raise errors.InvalidQuotaError(
            "a quota needs a limit: give max_checkpoints, max_bytes or both "
            "(to remove a quota, clear it)",
            field="max_checkpoints",
        )
    if on_exceed == "evict" and applies_to == "each" and most is not None and most < 2:
        raise errors.InvalidQuotaError(
            "an evicting quota on each namespace needs max_checkpoints of at least 2: a "
            "namespace's CURRENT and its fallback are never evicted, so with 1 every commit "
            "after the first would be refused. Use 2 or more, or on_exceed='refuse' for a "
            "namespace that takes a single checkpoint",
            field="max_checkpoints",
        )
    return QuotaRow(prefix, applies_to, most, size, on_exceed, now_ms)


# -- the stored quotas ---------------------------------------------------------------------


@writes
def set_quota(tx: Unit, row: QuotaRow) -> models.Quota:
    """Store (or replace) a quota, stamped with the unit's time; returns it as stored."""
    conn = tx.conn
    quotas.upsert(conn, tx.quotas, dataclasses.replace(row, updated_at_ms=tx.now_ms))
    stored = quotas.get(conn, row.prefix, row.applies_to)
    if stored is None:
        raise errors.CorruptionError(
            f"the quota {row.prefix!r} ({row.applies_to}) cannot be read back after storing "
            "it; run `ckptdb verify`",
            reason="quota_missing",
        )
    return stored.model()


@writes
def clear_quota(tx: Unit, prefix: str, applies_to: str) -> bool:
    """Remove a quota; True if there was one."""
    return quotas.delete(tx.conn, tx.quotas, prefix, applies_to)


@holds()
def list_quotas(tx: Unit) -> list[models.Quota]:
    """Every stored quota, by prefix then applies_to."""
    return [row.model() for row in quotas.all_quotas(tx.conn)]


# -- enforcement, inside the commit transaction ------------------------------------------


@dataclass(frozen=True)
class _Usage:
    """What a quota counts; ``logical_bytes`` is None when the quota has no byte limit
    (then it is not read: summing sizes costs a row read per checkpoint)."""

    checkpoints: int
    logical_bytes: int | None

    def over(self, rule: QuotaRow) -> tuple[str, int, int] | None:
        """(limit name, limit, usage) of the first limit of ``rule`` this usage passes."""
        if rule.max_checkpoints is not None and self.checkpoints > rule.max_checkpoints:
            return "max_checkpoints", rule.max_checkpoints, self.checkpoints
        if (
            rule.max_bytes is not None
            and self.logical_bytes is not None
            and self.logical_bytes > rule.max_bytes
        ):
            return "max_bytes", rule.max_bytes, self.logical_bytes
        return None

    def value(self, limit: str) -> int:
        """The figure a limit counts."""
        if limit == "max_checkpoints":
            return self.checkpoints
        return self.logical_bytes or 0

    def minus(self, total_size: int) -> _Usage:
        """This usage without one checkpoint of ``total_size`` bytes."""
        size = None if self.logical_bytes is None else self.logical_bytes - total_size
        return _Usage(self.checkpoints - 1, size)

    def body(self) -> dict[str, int | None]:
        return {"checkpoints": self.checkpoints, "logical_bytes": self.logical_bytes}


def _usage(conn: EngineConnection, rule: QuotaRow, namespace_id: int) -> _Usage:
    with_bytes = rule.max_bytes is not None
    if rule.applies_to == "each":
        return _Usage(*quotas.namespace_usage(conn, namespace_id, with_bytes=with_bytes))
    return _Usage(*quotas.prefix_usage(conn, rule.prefix, with_bytes=with_bytes))


def _scope(rule: QuotaRow, namespace: str) -> str:
    if rule.applies_to == "each":
        return f"namespace {namespace!r}"
    if not rule.prefix:
        return "all namespaces together"
    return f"the namespaces under {rule.prefix!r} together"


def _unit(limit: str, value: int) -> str:
    return f"{value:,} checkpoint(s)" if limit == "max_checkpoints" else f"{value:,} logical bytes"


def _exceeded(
    rule: QuotaRow,
    namespace: str,
    over: tuple[str, int, int],
    *,
    left: _Usage | None = None,
) -> errors.QuotaExceededError:
    """The refusal of a commit to ``namespace`` by ``rule``; ``left``: for an evicting
    quota, the usage that evicting everything it may would still leave."""
    limit, maximum, usage = over
    head = (
        f"commit to {namespace!r} refused by {rule.describe()}: it would bring "
        f"{_scope(rule, namespace)} to {_unit(limit, usage)}, over the {maximum:,} allowed"
    )
    details: dict[str, Any] = {
        "namespace": namespace,
        "prefix": rule.prefix,
        "applies_to": rule.applies_to,
        "on_exceed": rule.on_exceed,
        "limit": limit,
        "maximum": maximum,
        "usage": usage,
    }
    if left is None:
        return errors.QuotaExceededError(
            f"{head}. Nothing was written. Free room first (gc, prune, drop_namespace), "
            "raise or clear the quota (set_quota / clear_quota, `ckptdb quota set|clear`), "
            "or make it evict the oldest checkpoints (on_exceed='evict').",
            **details,
        )
    remaining = left.value(limit)
    details["reachable"] = remaining
    return errors.QuotaExceededError(
        f"{head}, and evicting every checkpoint under it that nothing protects would still "
        f"leave {_unit(limit, remaining)} (CURRENT, fallbacks, pins and what stored "
        "retention policies keep are never evicted). Nothing was written or evicted. Raise "
        "or clear the quota, or unpin or relax retention under it.",
        **details,
    )


def _evict(
    conn: EngineConnection,
    rule: QuotaRow,
    namespace: str,
    namespace_id: int,
    usage: _Usage,
    now_ms: int,
) -> tuple[gc.Sweep, _Usage]:
    """Delete the oldest unprotected checkpoints under ``rule`` until ``usage`` fits it;
    QuotaExceededError (before deleting anything) when it cannot."""
    if rule.applies_to == "each":
        scope = {namespace: namespace_id}
        oldest = quotas.oldest_first(conn, namespace_id=namespace_id)
    else:
        scope = quotas.namespaces_under(conn, rule.prefix)
        oldest = quotas.oldest_first(conn, prefix=rule.prefix)
    # What GC itself would never take (CURRENT, fallbacks, pins), and what the stored
    # retention policies keep (a namespace without one keeps nothing more).
    keep = gc.protected_seqs(conn) | gc.kept_by_stored_policies(conn, scope, now_ms)
    names = {ns_id: name for name, ns_id in scope.items()}
    held = _NamespaceLocks(conn, namespace_id)
    chosen: list[int] = []
    left = usage
    for seq, ns_id, total_size in oldest:
        if left.over(rule) is None:
            break
        # (A namespace not in ``scope`` appeared after it was read -- PostgreSQL, a quota
        # set meanwhile: its retention was not asked, so it is not a candidate.)
        name = names.get(ns_id)
        if seq not in keep and name is not None and held.take(ns_id, name):
            chosen.append(seq)
            left = left.minus(total_size)
    if left.over(rule) is not None and held.busy:
        raise errors.BusyTimeoutError(
            f"commit to {namespace!r}: {rule.describe()} must evict to make room, and the "
            f"oldest checkpoints it may take are in namespaces another writer holds right "
            f"now ({', '.join(repr(names[i]) for i in sorted(held.busy))}); nothing was "
            "written or evicted. Retry the commit."
        )
    _refuse_unless_fits(rule, namespace, usage, left)
    cutoff_ms = now_ms - int(gc.DEFAULT_GRACE_SECONDS * 1000)
    swept = gc.delete_batch_retrying(
        conn, chosen, cutoff_ms, lambda: conn.savepoint("ckptdb_evict")
    )
    after = _usage(conn, rule, namespace_id)
    # The plan and the deletion read the same transaction on SQLite; on PostgreSQL a pin
    # or a retention change committed meanwhile protects what the plan chose (the deletion
    # re-checks), so an eviction may make less room than planned: it must not let the
    # commit through.
    _refuse_unless_fits(rule, namespace, usage, after)
    return swept, after


class _NamespaceLocks:
    """The namespace locks an eviction takes beside its own namespace's (which its commit
    holds): without waiting, because the holder may be a commit under the same quota that
    waits for this one's prefix lock (:func:`quotas.lock_prefix`), or a GC batch that takes
    namespaces in name order -- waiting would close a cycle. A namespace another writer
    holds is passed over (``busy``); what it holds is in flux anyway. Always taken on
    SQLite, whose writer is alone."""

    def __init__(self, conn: EngineConnection, own_id: int) -> None:
        self._conn = conn
        self._held = {own_id}
        self.busy: set[int] = set()

    def take(self, ns_id: int, name: str) -> bool:
        if ns_id in self._held:
            return True
        if ns_id in self.busy:
            return False
        if pointers.try_lock_namespace(self._conn, name):
            self._held.add(ns_id)
            return True
        self.busy.add(ns_id)
        return False


def _refuse_unless_fits(rule: QuotaRow, namespace: str, usage: _Usage, left: _Usage) -> None:
    """QuotaExceededError naming the limit ``left`` still passes (with the usage the commit
    would have brought, ``usage``), if any."""
    over = left.over(rule)
    if over is not None:
        limit, maximum, _ = over
        raise _exceeded(rule, namespace, (limit, maximum, usage.value(limit)), left=left)


def enforce(tx: Unit, namespace: str, namespace_id: int, checkpoint_id: str) -> list[str]:
    """Check every quota ``namespace`` is under after a commit stored ``checkpoint_id``
    (inside the commit's write transaction, after the pointer moved). Returns the ids an
    evicting quota deleted (recorded in a ``quota_evict`` receipt); raises
    QuotaExceededError when a quota does not hold -- the caller's transaction (or group
    commit member's savepoint) then rolls back, evictions included."""
    conn = tx.conn
    rules = quotas.matching(conn, tx.quotas, namespace)
    if not rules:
        return []
    for rule in rules:
        if rule.applies_to != "each":
            # Other namespaces under the prefix count too; where their writers run at once
            # (PostgreSQL), they queue here, longest prefix first (no two commits can wait
            # for each other: every lock taken is a prefix of the committing namespace).
            quotas.lock_prefix(conn, rule.prefix)
    now_ms = tx.now_ms
    evicted: list[str] = []
    records: list[dict[str, Any]] = []
    totals = gc.Sweep()
    for rule in rules:
        if rule.on_exceed != "evict":
            continue
        usage = _usage(conn, rule, namespace_id)
        if usage.over(rule) is None:
            continue
        swept, after = _evict(conn, rule, namespace, namespace_id, usage, now_ms)
        evicted.extend(swept.deleted_ids)
        totals.blobs += swept.blobs
        totals.chunks += swept.chunks
        totals.bytes_freed += swept.bytes_freed
        records.append(
            {
                "prefix": rule.prefix,
                "applies_to": rule.applies_to,
                "max_checkpoints": rule.max_checkpoints,
                "max_bytes": rule.max_bytes,
                "before": usage.body(),
                "after": after.body(),
                "evicted": len(swept.deleted_ids),
            }
        )
    for rule in rules:
        if rule.on_exceed != "refuse":
            continue
        over = _usage(conn, rule, namespace_id).over(rule)
        if over is not None:
            raise _exceeded(rule, namespace, over)
    if evicted:
        store_receipt(
            conn,
            "quota_evict",
            {
                "by_commit": checkpoint_id,
                "quotas": records,
                "checkpoints_deleted": len(evicted),
                "blobs_deleted": totals.blobs,
                "chunks_deleted": totals.chunks,
                "bytes_freed": totals.bytes_freed,
                **gc.receipt_ids(evicted),
            },
            namespace=namespace,
            checkpoint_id=checkpoint_id,
            at_ms=now_ms,
        )
    return sorted(evicted)
