"""The ``key_scope`` table and the keyring that unlocks its scopes.

Invariants (schema v5):

* prefixes never overlap: no scope's prefix starts with another's, so a namespace belongs
  to at most one scope, decided by its name;
* a scope is created before any namespace under its prefix exists (they would hold
  plaintext), and a namespace's ``scope_id`` is fixed when the namespace row is created;
* ``wrapped_key`` is the scope's data key sealed by the host's key, bound to
  ``(scope_id, key_generation, key_id, prefix)`` (``store/crypto.py``); the data key itself
  is never stored. ``key_generation`` grows by one at each rotation;
* a shredded scope keeps its row as a tombstone (``wrapped_key`` NULL, ``shredded_at_ms``
  set): a commit under its prefix is refused rather than written in plaintext.

The :class:`Keyring` is per handle: the host's keys (a mapping or a callable, never stored),
the scope rows it last read, and the scopes it unlocked. Rows are re-read whenever a lookup
meets a scope it does not know, and the commit transaction re-checks the scope a commit was
prepared for (``ops/commit.py``), so a scope created by another handle is never missed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import errors, keyids
from ..connection import Connection
from ..connection.engine import EngineConnection
from . import crypto, dialect
from .crypto import PLAINTEXT, Scope
from .rows import check_types

#: The host's keys: key id -> 32-byte key, or a function from a key id to its key (None
#: when the host does not have it), e.g. a call to a KMS.
KeyProvider = Mapping[str, bytes] | Callable[[str], bytes | None]

_N = type(None)
_COLUMNS = (
    "scope_id, key_id, prefix, algorithm, wrapped_key, key_generation, seal_metadata,"
    " created_at_ms, rotated_at_ms, shredded_at_ms"
)
_TYPES: tuple[Any, ...] = (int, str, str, str, (bytes, _N), int, int, int, (int, _N), (int, _N))


@dataclass(frozen=True)
class ScopeRow:
    """One row of ``key_scope``."""

    scope_id: int
    key_id: str
    prefix: str
    algorithm: str
    #: kept out of repr: no repr, log line or message carries a wrapped key
    wrapped_key: bytes | None = field(repr=False)
    key_generation: int
    seal_metadata: int
    created_at_ms: int
    rotated_at_ms: int | None
    shredded_at_ms: int | None

    @property
    def shredded(self) -> bool:
        """True once the scope was shredded."""
        return self.wrapped_key is None

    def covers(self, namespace: str) -> bool:
        """True when ``namespace`` lies under this scope's prefix."""
        return namespace.startswith(self.prefix)


def all_rows(conn: EngineConnection) -> list[ScopeRow]:
    """Every key scope, by id."""
    out = []
    for row in conn.execute(f"SELECT {_COLUMNS} FROM key_scope ORDER BY scope_id"):
        check_types(row, _TYPES, "key scope row")
        out.append(ScopeRow(*row))
    return out


def lock_scopes(conn: EngineConnection) -> None:
    """Serialize with every transaction that creates a key scope or a namespace, until
    this one ends: a scope is created only while no namespace exists under its prefix, and
    a namespace joins the scope covering it -- two checks that must not interleave (a
    no-op on SQLite, whose writers are serialized already)."""
    conn.lock("key_scopes")


def covering_scope_id(conn: EngineConnection, namespace: str) -> int | None:
    """The key scope a new namespace of this name belongs to (None: plaintext), read in
    the caller's transaction; KeyShreddedError when that scope was shredded."""
    row = conn.one(
        "SELECT scope_id, key_id, wrapped_key IS NULL FROM key_scope"
        " WHERE substr(?1, 1, length(prefix)) = prefix",
        (namespace,),
    )
    if row is None:
        return None
    check_types(row, (int, str, int), "key scope row")
    if row[2]:
        raise errors.KeyShreddedError(
            f"namespace {namespace!r} lies under the prefix of key id "
            f"{keyids.shown(row[1])}, which was shredded; nothing was written. Use a namespace "
            "outside that prefix.",
            key_id=keyids.detail(row[1]),
        )
    return int(row[0])


def insert(
    conn: EngineConnection,
    *,
    key_id: str,
    prefix: str,
    wrap: Callable[[int], bytes],
    now_ms: int,
    seal_metadata: bool = False,
) -> int:
    """Create a scope (inside a write transaction); ``wrap(scope_id)`` seals its new data
    key for that id. Returns the id."""
    scope_id = int(conn.scalar("SELECT coalesce(max(scope_id), 0) + 1 FROM key_scope"))
    # The id is chosen before the row exists: the wrapped key is bound to it. (Scopes are
    # created one at a time: under SQLite's write lock, or the caller's scope lock.)
    conn.execute(
        "INSERT INTO key_scope (scope_id, key_id, prefix, algorithm, wrapped_key,"
        f" key_generation, seal_metadata, created_at_ms){dialect.explicit_key(conn)}"
        " VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
        (scope_id, key_id, prefix, crypto.ALGORITHM, wrap(scope_id), int(seal_metadata), now_ms),
    )
    return scope_id


def rewrap(conn: EngineConnection, row: ScopeRow, wrapped: bytes, now_ms: int) -> None:
    """Store the data key wrapped under a new host key, one generation on (inside a write
    transaction). The old wrapped key is overwritten in place."""
    conn.execute(
        "UPDATE key_scope SET wrapped_key = ?, key_generation = ?, rotated_at_ms = ?"
        " WHERE scope_id = ? AND key_generation = ?",
        (wrapped, row.key_generation + 1, now_ms, row.scope_id, row.key_generation),
    )
    if conn.changes() != 1:
        raise errors.ScopeChangedError(
            f"key id {keyids.shown(row.key_id)} was rotated or shredded by another handle "
            "meanwhile; nothing was written. Open again with the current key and retry.",
            key_id=keyids.detail(row.key_id),
        )


def tombstone(conn: EngineConnection, scope_id: int, now_ms: int) -> None:
    """Forget the scope's wrapped data key (crypto-shredding; inside a write transaction)."""
    conn.execute(
        "UPDATE key_scope SET wrapped_key = NULL, shredded_at_ms = ? WHERE scope_id = ?",
        (now_ms, scope_id),
    )


def any_scope(conn: EngineConnection) -> bool:
    """True when the file has a key scope (a shredded one too: its tombstone stays), read in
    the caller's transaction."""
    return bool(conn.scalar("SELECT EXISTS (SELECT 1 FROM key_scope)"))


def zero_deleted_content(conn: Connection) -> None:
    """Make SQLite overwrite with zeros, on this connection, whatever it frees: deleted
    cells, freed pages, and the space a b-tree rebalance leaves behind (``secure_delete``
    ON; FAST would leave freed pages and rebalance remnants as they were). In a file with
    key scopes no freed page or cell may keep a scope's wrapped key, records or metadata
    after a rotation, a GC or a shred."""
    conn.pragma("secure_delete", 1)


class Keyring:
    """The host's keys and the scopes of one handle (thread-safe)."""

    def __init__(self, provider: KeyProvider | None = None) -> None:
        self._provider = provider
        self._lock = threading.Lock()
        self._rows: list[ScopeRow] | None = None
        self._unlocked: dict[int, Scope] = {}
        self._overrides: dict[str, bytes] = {}

    # -- the scope rows --------------------------------------------------------------------

    def rows(self, conn: EngineConnection, *, reload: bool = False) -> list[ScopeRow]:
        """The scope rows (read once, again on ``reload``)."""
        with self._lock:
            if self._rows is None or reload:
                self._rows = all_rows(conn)
                known = {r.scope_id: r for r in self._rows}
                # A rotated, shredded or replaced scope must be unlocked again.
                for scope_id in list(self._unlocked):
                    if scope_id not in known or known[scope_id].shredded:
                        del self._unlocked[scope_id]
            return self._rows

    def forget(self) -> None:
        """Drop the cached rows and unlocked scopes (after this handle changed them)."""
        with self._lock:
            self._rows = None
            self._unlocked.clear()

    def row_for_namespace(
        self, conn: EngineConnection, namespace: str, *, reload: bool = False
    ) -> ScopeRow | None:
        """The scope whose prefix ``namespace`` lies under, if any."""
        for row in self.rows(conn, reload=reload):
            if row.covers(namespace):
                return row
        return None

    # -- unlocking -------------------------------------------------------------------------

    def host_key(self, key_id: str) -> bytes | None:
        """The host's key for ``key_id`` (validated), or None when it has none."""
        key = self._overrides.get(key_id)
        if key is not None:
            return key
        provider = self._provider
        if provider is None:
            return None
        found = provider.get(key_id) if isinstance(provider, Mapping) else provider(key_id)
        return None if found is None else crypto.check_key(found, key_id)

    def use_host_key(self, key_id: str, key: bytes) -> None:
        """Use ``key`` for ``key_id`` from now on (after this handle rotated it)."""
        with self._lock:
            self._overrides[key_id] = key

    def scope_for_namespace(self, conn: EngineConnection, namespace: str) -> Scope:
        """How ``namespace``'s bytes are addressed and sealed: PLAINTEXT outside every
        scope; KeyUnavailableError, KeyMismatchError or KeyShreddedError when its scope
        cannot be used."""
        known = self.known_scope(namespace)
        if known is not None:
            return known
        row = self.row_for_namespace(conn, namespace)
        return PLAINTEXT if row is None else self._unlock(row)

    def known_scope(self, namespace: str) -> Scope | None:
        """:meth:`scope_for_namespace` from the rows already read, without a connection;
        None when they are not read (a commit prepared outside the handle lock then
        prepares under it)."""
        rows = self._rows
        if rows is None:
            return None
        for row in rows:
            if row.covers(namespace):
                return self._unlock(row)
        return PLAINTEXT

    def scope(self, conn: EngineConnection, scope_id: object) -> Scope:
        """The scope a stored record names (``None``: plaintext)."""
        if scope_id is None:
            return PLAINTEXT
        if type(scope_id) is not int:
            raise errors.CorruptionError(
                "a stored record names a key scope of the wrong type; the record is damaged",
                reason="wrong_type",
            )
        with self._lock:
            cached = self._unlocked.get(scope_id)
        if cached is not None:
            return cached
        for reload in (False, True):
            for row in self.rows(conn, reload=reload):
                if row.scope_id == scope_id:
                    return self._unlock(row)
        raise errors.CorruptionError(
            f"a stored record names key scope {scope_id}, which the file does not have; the "
            "record is damaged. Run `ckptdb verify`.",
            reason="unknown_scope",
        )

    def _unlock(self, row: ScopeRow) -> Scope:
        with self._lock:
            cached = self._unlocked.get(row.scope_id)
        if cached is not None:
            return cached
        if row.shredded:
            raise errors.KeyShreddedError(
                f"key id {keyids.shown(row.key_id)} (namespaces under {row.prefix!r}) was "
                "shredded; its data is gone and its prefix takes no new commits",
                key_id=keyids.detail(row.key_id),
            )
        if row.algorithm != crypto.ALGORITHM:
            raise errors.SchemaError(
                f"key id {keyids.shown(row.key_id)} uses encryption {row.algorithm!r}, which "
                f"this ckptdb does not know (it knows {crypto.ALGORITHM!r}): the file was "
                "written by a newer ckptdb (upgrade) or its key_scope row is damaged (run "
                "`ckptdb verify`)",
            )
        data_key = self.data_key(row)
        scope = Scope.unlocked(
            row.scope_id, row.key_id, data_key, seal_metadata=bool(row.seal_metadata)
        )
        with self._lock:
            self._unlocked[row.scope_id] = scope
        return scope

    def data_key(self, row: ScopeRow) -> bytes:
        """The scope's data key, unwrapped with the host's current key for it."""
        kek = self.host_key(row.key_id)
        if kek is None:
            raise errors.KeyUnavailableError(
                f"namespaces under {row.prefix!r} are encrypted with key id "
                f"{keyids.shown(row.key_id)}, which this handle was not given (other "
                "namespaces work without it)",
                key_id=keyids.detail(row.key_id),
            )
        assert row.wrapped_key is not None
        return crypto.unwrap(
            kek,
            row.wrapped_key,
            key_id=row.key_id,
            prefix=row.prefix,
            generation=row.key_generation,
            scope_id=row.scope_id,
        )
