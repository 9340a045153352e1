"""Stored retention policies: what GC applies when it is run without one (``store/settings``
owns the table)."""

from __future__ import annotations

from ..retention import RetentionPolicy
from ..store import settings
from .unit import Unit, holds, writes


@writes
def set_policy(tx: Unit, scope: str, policy: RetentionPolicy) -> None:
    """See :meth:`ckptdb.Database.set_retention` (``scope``: a namespace or ``*``)."""
    settings.set_policy(tx.conn, scope, policy, tx.now_ms)


@writes
def clear_policy(tx: Unit, scope: str) -> bool:
    """See :meth:`ckptdb.Database.clear_retention`."""
    return settings.clear_policy(tx.conn, scope)


@holds()
def stored_policies(tx: Unit) -> dict[str, RetentionPolicy]:
    """See :meth:`ckptdb.Database.retention`."""
    return settings.stored_policies(tx.conn)
