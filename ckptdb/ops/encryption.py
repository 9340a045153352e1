"""Key scopes: creating one, rotating its key, shredding it, listing them.

The cryptography is in ``store/crypto.py``, the table and the keyring in
``store/scopes.py``; what happens to a commit or a read inside a scope is decided where
those happen (``ops/commit.py``, ``store/blobs.py``). This module holds the operator's acts,
each recorded by a receipt that names key ids, never key material.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .. import errors, keyids, models, validation
from ..connection import Connection
from ..connection.engine import sqlite_only
from ..store import blob_scans, checkpoints, crypto, receipts, scopes
from ..store.scopes import ScopeRow
from . import deletion, gc
from .handle import Handle
from .unit import Unit, holding, holds

MAX_KEY_ID_CHARS = keyids.MAX_KEY_ID_CHARS
MAX_PREFIX_CHARS = 1024


def key_id(value: object) -> str:
    """A validated key id (``keyids.check``: never echoes what it was given)."""
    return keyids.check(value)


def _prefix(value: object) -> str:
    # A key passed in the prefix's place (set_encryption(key, key_id=...)) must not be
    # echoed: a rejected prefix is described, never shown.
    if not isinstance(value, str):
        raise errors.InvalidNamespaceError(
            f"a key scope prefix must be a str of 1-{MAX_PREFIX_CHARS} characters, got "
            f"{type(value).__name__}"
        )
    if not 1 <= len(value) <= MAX_PREFIX_CHARS:
        raise errors.InvalidNamespaceError(
            f"a key scope prefix must be a str of 1-{MAX_PREFIX_CHARS} characters, got {len(value)}"
        )
    if "\0" in value or validation.has_surrogate(value):
        raise errors.InvalidNamespaceError(
            f"a key scope prefix must not hold NUL or unpaired surrogates (got {len(value)} "
            "characters holding one)"
        )
    return value


def _info(row: ScopeRow, namespaces: int) -> models.KeyScope:
    return models.KeyScope(
        key_id=row.key_id,
        prefix=row.prefix,
        algorithm=row.algorithm,
        key_generation=row.key_generation,
        seal_metadata=bool(row.seal_metadata),
        shredded=row.shredded,
        namespaces=namespaces,
        created_at=models.from_ms(row.created_at_ms),
        rotated_at=None if row.rotated_at_ms is None else models.from_ms(row.rotated_at_ms),
        shredded_at=None if row.shredded_at_ms is None else models.from_ms(row.shredded_at_ms),
    )


def _row(tx: Unit, kid: str) -> ScopeRow:
    for row in scopes.all_rows(tx.conn):
        if row.key_id == kid:
            return row
    raise errors.NotFoundError(
        f"no key scope with key id {keyids.shown(kid)}; create one with "
        "set_encryption(prefix, key_id=...)",
        key_id=keyids.detail(kid),
    )


@holds()
def scope_of(tx: Unit, namespace: str, *, fresh: bool = False) -> crypto.Scope:
    """How ``namespace``'s bytes are addressed and sealed (see ``Keyring``). ``fresh``: for
    an answer the caller keeps -- "not encrypted" is then checked against the file's
    scopes as they are now, not as this handle last read them (another handle may have
    created one)."""
    scope = tx.keyring.scope_for_namespace(tx.conn, namespace)
    if fresh and not scope.sealed:
        tx.keyring.rows(tx.conn, reload=True)
        scope = tx.keyring.scope_for_namespace(tx.conn, namespace)
    return scope


@holds()
def list_scopes(tx: Unit) -> list[models.KeyScope]:
    """Every key scope, shredded ones included."""
    with tx.read_batch():
        return [
            _info(r, len(checkpoints.namespaces_of_scope(tx.conn, r.scope_id)))
            for r in scopes.all_rows(tx.conn)
        ]


def set_encryption(
    handle: Handle, prefix: object, key_id_value: object, metadata: object = False
) -> models.KeyScope:
    """See :meth:`ckptdb.Database.set_encryption`."""
    text = _prefix(prefix)
    kid = key_id(key_id_value)
    if type(metadata) is not bool:
        raise errors.InvalidInputError(
            f"metadata must be True or False, got {type(metadata).__name__}"
        )
    kek = handle.keyring.host_key(kid)
    if kek is None:
        raise errors.KeyUnavailableError(
            f"set_encryption needs the key for key id {keyids.shown(kid)}, which this handle "
            "was not given",
            key_id=keyids.detail(kid),
        )
    with holding(handle, write=True) as tx:
        now = tx.now_ms
        try:
            with tx.conn.write_transaction():
                return _create_scope(tx, text, kid, kek, metadata, now)
        finally:
            # Still holding the handle: no other thread of this handle may look the new
            # scope up in a keyring that does not know it yet.
            handle.scopes_changed()


def _create_scope(
    tx: Unit, text: str, kid: str, kek: bytes, metadata: bool, now: int
) -> models.KeyScope:
    conn = tx.conn
    scopes.lock_scopes(conn)
    for row in scopes.all_rows(conn):
        if row.key_id == kid:
            if row.prefix == text and not row.shredded and bool(row.seal_metadata) == metadata:
                return _info(row, len(checkpoints.namespaces_of_scope(conn, row.scope_id)))
            raise errors.ScopeConflictError(
                f"key id {keyids.shown(kid)} already encrypts {row.prefix!r}"
                + (" (shredded)" if row.shredded else "")
                + "; a key id names one scope. Choose another key id."
            )
        if text.startswith(row.prefix) or row.prefix.startswith(text):
            raise errors.ScopeConflictError(
                f"prefix {text!r} overlaps {row.prefix!r} (key id {keyids.shown(row.key_id)}"
                + (", shredded" if row.shredded else "")
                + "); key scope prefixes must not contain one another"
            )
    existing = checkpoints.count_under_prefix(conn, text)
    if existing:
        raise errors.ScopeConflictError(
            f"{existing} namespace(s) already exist under {text!r} and hold plaintext; a "
            "key scope must be set before the first commit under its prefix. Choose a new "
            "prefix (or copy the data into one)."
        )
    data_key = crypto.new_data_key()
    # This transaction's check found no scope yet (ops/handle.py): from this row on the
    # file has one, so whatever it frees or rebalances from here is zeroed too.
    if isinstance(conn, Connection):
        scopes.zero_deleted_content(conn)
    scope_id = scopes.insert(
        conn,
        key_id=kid,
        prefix=text,
        wrap=lambda sid: crypto.wrap(
            kek, data_key, key_id=kid, prefix=text, generation=1, scope_id=sid
        ),
        now_ms=now,
        seal_metadata=metadata,
    )
    receipts.store_receipt(
        conn,
        "set_encryption",
        {"key_id": kid, "prefix": text, "algorithm": crypto.ALGORITHM, "metadata": metadata},
        namespace=None,
        checkpoint_id=None,
        at_ms=now,
    )
    created = next(r for r in scopes.all_rows(conn) if r.scope_id == scope_id)
    return _info(created, 0)


def rotate_key(handle: Handle, key_id_value: object, new_key: object) -> models.KeyScope:
    """See :meth:`ckptdb.Database.rotate_key`."""
    kid = key_id(key_id_value)
    new = crypto.check_key(new_key, kid)
    with holding(handle, write=True) as tx:
        now = tx.now_ms
        rotated, count = _rewrap(tx, kid, new, now)
        # Still holding the handle, so no other thread unlocks with the old key meanwhile.
        handle.keyring.use_host_key(kid, new)
        handle.scopes_changed()
        # The UPDATE overwrote the old wrapped key in its page, but the WAL still holds
        # earlier frames of that page: with the old (leaked) host key they open the data
        # key, which rotation does not change. Retire them, so a copy of the file and its
        # WAL taken from now on holds the new wrapped key only.
        _retire_wal(
            tx,
            lambda emptied: receipts.store_receipt(
                tx.conn,
                "rotate_key",
                {
                    "key_id": kid,
                    "key_generation": rotated.key_generation,
                    "wal_truncated": emptied,
                },
                namespace=None,
                checkpoint_id=None,
                at_ms=now,
            ),
        )
    return _info(rotated, count)


def _wal_empty(tx: Unit) -> bool:
    """True when the WAL holds no frame on disk (False under Litestream, whose WAL ckptdb
    never truncates)."""
    wal = tx.handle.path + "-wal"
    return not sqlite_only(tx.conn, "key rotation").litestream_managed() and (
        not os.path.exists(wal) or os.path.getsize(wal) == 0
    )


def _retire_wal(tx: Unit, record: Callable[[bool], int]) -> tuple[int, bool]:
    """Empty the WAL after an act that retired key material (a rotation's old wrapped key,
    a shredded scope's pages), with ``record(emptied)`` -- the act's receipt -- as the first
    transaction of the emptied WAL. Returns (receipt id, whether the WAL ended empty).

    The checkpoint copies the current pages into the file (the retired bytes there were
    overwritten, and deleted content is zeroed: ``secure_delete``) and truncates the WAL.
    SQLite does not sync the WAL after truncating it, so until the next commit's fsync a
    power loss could bring back the WAL as of its last sync -- old frames among them: the
    receipt is that commit, and what a power loss can bring back from then on is its frames
    alone; the second checkpoint removes those too. While Litestream manages the file these
    checkpoints are PASSIVE (``Connection.wal_checkpoint``): the WAL is Litestream's to
    restart, so old frames stay in it until Litestream does, and ``False`` says so."""
    if not isinstance(tx.conn, Connection):
        # PostgreSQL: the server keeps the retired bytes in dead row versions until VACUUM
        # reuses their space (without zeroing it), in its WAL and in backups; no client can
        # retire them. They are sealed under the host key: what rotation promises there is
        # that the *new* key opens the scope, and the old one keeps opening those copies --
        # discard it (docs/security.md, "On PostgreSQL"). ``False`` says so.
        with tx.conn.write_transaction():
            return record(False), False
    conn = tx.conn
    conn.wal_checkpoint("TRUNCATE", wait=conn.lock_waits.timeout)
    emptied = _wal_empty(tx)
    with conn.write_transaction():
        receipt_id = record(emptied)
    conn.wal_checkpoint("TRUNCATE", wait=conn.lock_waits.timeout)
    return receipt_id, _wal_empty(tx)


def _rewrap(tx: Unit, kid: str, new: bytes, now: int) -> tuple[ScopeRow, int]:
    with tx.conn.write_transaction():
        conn = tx.conn
        row = _row(tx, kid)
        if row.shredded:
            raise errors.KeyShreddedError(
                f"key id {keyids.shown(kid)} was shredded; nothing to rotate",
                key_id=keyids.detail(kid),
            )
        data_key = tx.handle.keyring.data_key(row)  # KeyMismatch/KeyUnavailable: nothing written
        wrapped = crypto.wrap(
            new,
            data_key,
            key_id=kid,
            prefix=row.prefix,
            generation=row.key_generation + 1,
            scope_id=row.scope_id,
        )
        scopes.rewrap(conn, row, wrapped, now)
        return _row(tx, kid), len(checkpoints.namespaces_of_scope(conn, row.scope_id))


def shred_key(handle: Handle, key_id_value: object) -> models.ShredReport:
    """See :meth:`ckptdb.Database.shred_key`."""
    kid = key_id(key_id_value)
    with holding(handle, write=True) as tx:
        now = tx.now_ms
        conn = tx.conn
        # 1. Forget the wrapped data key first, in its own transaction: from its COMMIT on,
        # every copy of the scope's bytes -- here, in backups, in replicas -- is unreadable.
        with conn.write_transaction():
            row = _row(tx, kid)
            if not row.shredded:
                scopes.tombstone(conn, row.scope_id, now)
        handle.scopes_changed()
        # 2. Delete its namespaces (a crash here leaves sealed bytes nobody can open; calling
        # shred_key again finishes the job). A namespace created meanwhile by a handle that
        # still held the key is found by the next round.
        dropped: list[str] = []
        checkpoints_deleted = 0
        for _ in range(100):
            with conn.read_transaction():
                names = checkpoints.namespaces_of_scope(conn, row.scope_id)
            if not names:
                break
            for name in names:
                report = deletion.drop_namespace_in(tx, name, force=True, dry_run=False)
                checkpoints_deleted += report.checkpoints_deleted
                dropped.append(name)
        # 3. Staged or orphaned records of the scope.
        with conn.write_transaction():
            blobs_deleted, chunks_deleted = blob_scans.delete_scope_records(conn, row.scope_id)
        # 4. Free pages go back to the OS (zeroed first: secure_delete); then the WAL is
        # emptied with the receipt as its first transaction, so no earlier frame with the
        # wrapped key or the scope's bytes stays on disk.
        if isinstance(conn, Connection):
            gc.reclaim(conn)
        receipt_id, truncated = _retire_wal(
            tx,
            lambda _emptied: receipts.store_receipt(
                conn,
                "shred_key",
                {
                    "key_id": kid,
                    "prefix": row.prefix,
                    "namespaces": sorted(set(dropped)),
                    "checkpoints_deleted": checkpoints_deleted,
                    "blobs_deleted": blobs_deleted,
                    "chunks_deleted": chunks_deleted,
                },
                namespace=None,
                checkpoint_id=None,
                at_ms=now,
            ),
        )
    return models.ShredReport(
        key_id=kid,
        prefix=row.prefix,
        receipt_id=receipt_id,
        namespaces=sorted(set(dropped)),
        checkpoints_deleted=checkpoints_deleted,
        blobs_deleted=blobs_deleted,
        chunks_deleted=chunks_deleted,
        wal_truncated=truncated,
        at=models.from_ms(now),
    )
