"""When each LangGraph thread was last active: the ``lg_thread`` table (langgraph schema
version 4), the only module that reads or writes it.

A thread's row holds the time (epoch milliseconds, by the database's clock) of its last
put or pending write -- and, when the saver refreshes on reads, its last read. Threads
whose row is older than a TTL are the ones :mod:`.expiry` sweeps. Every function runs in
its caller's session (a write transaction for the writes)."""

from __future__ import annotations

import builtins

from ...extension import Session, check_types

#: The langgraph schema version that created ``lg_thread`` (a file opened read-only before
#: it was applied has no such table).
ACTIVITY_VERSION = 4
#: How long a saver without a TTL lets a thread's recorded activity lag behind
#: (milliseconds): a TTL applied later (``ckptdb langgraph expire``, a saver given ``ttl=``)
#: still knows when each thread was last used, to the minute.
UNSET_REFRESH_MS = 60_000


#: The upsert of a thread's activity, per engine (SQLite's two-argument max() is
#: PostgreSQL's greatest()); the saver's put folds PostgreSQL's into its own statement.
TOUCH = {
    dialect: "INSERT INTO lg_thread (thread_id, touched_at_ms) VALUES (?, ?) ON CONFLICT"
    f" (thread_id) DO UPDATE SET touched_at_ms = {larger}(lg_thread.touched_at_ms,"
    " excluded.touched_at_ms)"
    for dialect, larger in (("sqlite", "max"), ("postgresql", "greatest"))
}


def touch(session: Session, thread_id: str, at_ms: int) -> None:
    """Record activity of the thread at ``at_ms`` (never moving its time back: another
    process's clock may be a little behind this one's)."""
    session.execute(TOUCH[session.dialect], (thread_id, at_ms))


def forget(session: Session, thread_id: str, *, idle_before_ms: int | None = None) -> bool:
    """Remove the thread's row (only if it is older than ``idle_before_ms`` when given: a
    thread touched since its sweep began stays live). True when a row was removed."""
    if idle_before_ms is None:
        session.execute("DELETE FROM lg_thread WHERE thread_id = ?", (thread_id,))
    else:
        session.execute(
            "DELETE FROM lg_thread WHERE thread_id = ? AND touched_at_ms < ?",
            (thread_id, idle_before_ms),
        )
    return session.changes() > 0


def idle(
    session: Session, idle_before_ms: int, limit: int, after: tuple[int, str] | None
) -> builtins.list[tuple[int, str]]:
    """(touched_at_ms, thread_id) of at most ``limit`` threads last active before
    ``idle_before_ms``, oldest first, after ``after`` in that order (a cursor, so threads
    a sweep leaves in place are not met again)."""
    if after is None:
        rows = session.execute(
            "SELECT touched_at_ms, thread_id FROM lg_thread WHERE touched_at_ms < ?"
            " ORDER BY touched_at_ms, thread_id LIMIT ?",
            (idle_before_ms, limit),
        )
    else:
        rows = session.execute(
            "SELECT touched_at_ms, thread_id FROM lg_thread WHERE touched_at_ms < ?"
            " AND (touched_at_ms, thread_id) > (?, ?) ORDER BY touched_at_ms, thread_id LIMIT ?",
            (idle_before_ms, *after, limit),
        )
    out: builtins.list[tuple[int, str]] = []
    for row in rows:
        check_types(tuple(row), (int, str), "lg_thread row")
        out.append((int(row[0]), str(row[1])))
    return out


def touched_at(session: Session, thread_id: str) -> int | None:
    """When the thread was last active (epoch ms), or None when it has no row."""
    found = session.scalar("SELECT touched_at_ms FROM lg_thread WHERE thread_id = ?", (thread_id,))
    if found is None:
        return None
    check_types((found,), (int,), "lg_thread row")
    return int(found)
