"""The ``setting`` and ``retention`` tables: per-file settings and stored retention policies."""

from __future__ import annotations

import pydantic

from .. import errors
from ..connection import Connection
from ..retention import RetentionPolicy
from .rows import check_types


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


def init_chunk_size(conn: Connection, size: int) -> None:
    """Record the chunk size of a new file (inside a write transaction; never changed)."""
    conn.execute(
        "INSERT OR IGNORE INTO setting (key, value) VALUES ('chunk_size', ?)", (str(size),)
    )


def stored_policies(conn: Connection) -> dict[str, RetentionPolicy]:
    """Stored retention policies by scope ('*' = database-wide)."""
    policies: dict[str, RetentionPolicy] = {}
    for row in conn.execute("SELECT scope, policy FROM retention"):
        check_types(row, (str, str), "retention row")
        scope, policy = row
        try:
            policies[scope] = RetentionPolicy.model_validate_json(policy)
        except pydantic.ValidationError as exc:
            raise errors.CorruptionError(
                f"the stored retention policy of {scope!r} is damaged ({exc.error_count()} "
                "problem(s)). Set it again (`set_retention`, `ckptdb retention set`) or clear "
                "it (`clear_retention`, `ckptdb retention clear`).",
                reason="retention_damaged",
            ) from exc
    return policies


def set_policy(conn: Connection, scope: str, policy: RetentionPolicy, now_ms: int) -> None:
    """Store (or replace) the policy of a scope (inside a write transaction)."""
    conn.execute(
        "INSERT INTO retention (scope, policy, updated_at_ms) VALUES (?, ?, ?)"
        " ON CONFLICT (scope) DO UPDATE SET policy = excluded.policy,"
        " updated_at_ms = excluded.updated_at_ms",
        (scope, policy.model_dump_json(), now_ms),
    )


def clear_policy(conn: Connection, scope: str) -> bool:
    """Remove the policy of a scope; True if there was one."""
    conn.execute("DELETE FROM retention WHERE scope = ?", (scope,))
    return conn.changes() > 0
