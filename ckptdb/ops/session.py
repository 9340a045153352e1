"""Sessions: the transactions an integration runs its own SQL in (see ckptdb.extension).

Every session -- read or write, and the one an ``on_publish`` hook or a verify hook gets --
is confined to the integration's own tables by the connection's authorizer: a statement
that would write a core table, change the schema or control the transaction is refused
before it runs (``IntegrationWriteRefusedError``), so an integration cannot corrupt the
rows the core's guarantees rest on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..extension import Session
from ..store import CORE_TABLES
from .handle import Handle
from .unit import reading, writing


@contextmanager
def write_session(handle: Handle) -> Iterator[Session]:
    """See :meth:`ckptdb.Database.write_session`."""
    # Confined to the integration's own tables: it moves no pointer.
    with (
        writing(handle, keeps_heads=True) as tx,
        tx.conn.integration_session(CORE_TABLES) as s,
    ):
        yield s


@contextmanager
def read_session(handle: Handle, *, snapshot: bool) -> Iterator[Session]:
    """See :meth:`ckptdb.Database.read_session`."""
    # Confined too: a read session has no business writing, least of all core rows.
    # (PostgreSQL without a snapshot: the handle's connection runs every statement outside
    # a write transaction read-only, and refuses a session outside a transaction otherwise.)
    with (
        reading(handle, snapshot=snapshot) as tx,
        tx.conn.integration_session(CORE_TABLES) as session,
    ):
        yield session
