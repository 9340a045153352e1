"""Key scopes: creating one, rotating its key, shredding it, listing them.

The cryptography is in ``store/crypto.py``, the table and the keyring in
``store/scopes.py``; what happens to a commit or a read inside a scope is decided where
those happen (``ops/commit.py``, ``store/blobs.py``). This module holds the operator's acts,
each recorded by a receipt that names key ids, never key material.
"""

from __future__ import annotations

import os
import time

from .. import errors, models, validation
from ..store import Store, blobs, checkpoints, crypto, receipts, scopes
from ..store.scopes import ScopeRow
from . import gc
from .handle import Handle

MAX_KEY_ID_CHARS = 200
MAX_PREFIX_CHARS = 1024


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def key_id(value: object) -> str:
    """A validated key id: printable text without NUL, 1-200 characters."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_KEY_ID_CHARS:
        raise errors.InvalidKeyError(
            f"a key id must be a str of 1-{MAX_KEY_ID_CHARS} characters, got {value!r}"
        )
    if not value.isprintable() or validation.has_surrogate(value):
        raise errors.InvalidKeyError(
            f"key id {value!r} holds control or unpaired surrogate characters; use printable text"
        )
    return value


def _prefix(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_PREFIX_CHARS:
        raise errors.InvalidNamespaceError(
            f"a key scope prefix must be a str of 1-{MAX_PREFIX_CHARS} characters, got {value!r}"
        )
    if "\0" in value or validation.has_surrogate(value):
        raise errors.InvalidNamespaceError(
            f"key scope prefix {value!r} holds NUL or unpaired surrogates"
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


def _row(store: Store, kid: str) -> ScopeRow:
    for row in scopes.all_rows(store.conn):
        if row.key_id == kid:
            return row
    raise errors.NotFoundError(
        f"no key scope with key id {kid!r}; create one with set_encryption(prefix, key_id=...)",
        key_id=kid,
    )


def list_scopes(store: Store) -> list[models.KeyScope]:
    """Every key scope, shredded ones included."""
    with store.conn.read_transaction():
        return [
            _info(r, len(checkpoints.namespaces_of_scope(store.conn, r.scope_id)))
            for r in scopes.all_rows(store.conn)
        ]


def set_encryption(
    handle: Handle, prefix: object, key_id_value: object, metadata: object = False
) -> models.KeyScope:
    """See :meth:`ckptdb.Database.set_encryption`."""
    text = _prefix(prefix)
    kid = key_id(key_id_value)
    if type(metadata) is not bool:
        raise errors.InvalidInputError(f"metadata must be True or False, got {metadata!r}")
    kek = handle.keyring.host_key(kid)
    if kek is None:
        raise errors.KeyUnavailableError(
            f"set_encryption needs the key for key id {kid!r}: open the database with "
            f"keys={{{kid!r}: <32-byte key>}} (or a key provider that knows it)",
            key_id=kid,
        )
    now = _now_ms()
    with handle.use(write=True) as store:
        try:
            with store.conn.write_transaction():
                return _create_scope(store, text, kid, kek, metadata, now)
        finally:
            # Still holding the handle: no other thread of this handle may look the new
            # scope up in a keyring that does not know it yet.
            handle.scopes_changed()


def _create_scope(
    store: Store, text: str, kid: str, kek: bytes, metadata: bool, now: int
) -> models.KeyScope:
    conn = store.conn
    for row in scopes.all_rows(conn):
        if row.key_id == kid:
            if row.prefix == text and not row.shredded and bool(row.seal_metadata) == metadata:
                return _info(row, len(checkpoints.namespaces_of_scope(conn, row.scope_id)))
            raise errors.ScopeConflictError(
                f"key id {kid!r} already encrypts {row.prefix!r}"
                + (" (shredded)" if row.shredded else "")
                + "; a key id names one scope. Choose another key id."
            )
        if text.startswith(row.prefix) or row.prefix.startswith(text):
            raise errors.ScopeConflictError(
                f"prefix {text!r} overlaps {row.prefix!r} (key id {row.key_id!r}"
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
    now = _now_ms()
    with handle.use(write=True) as store:
        rotated, count = _rewrap(handle, store, kid, new, now)
        # Still holding the handle, so no other thread unlocks with the old key meanwhile.
        handle.keyring.use_host_key(kid, new)
        handle.scopes_changed()
    return _info(rotated, count)


def _rewrap(handle: Handle, store: Store, kid: str, new: bytes, now: int) -> tuple[ScopeRow, int]:
    with store.conn.write_transaction():
        conn = store.conn
        row = _row(store, kid)
        if row.shredded:
            raise errors.KeyShreddedError(f"key id {kid!r} was shredded; nothing to rotate")
        data_key = handle.keyring.data_key(row)  # KeyMismatch/KeyUnavailable: nothing written
        wrapped = crypto.wrap(
            new,
            data_key,
            key_id=kid,
            prefix=row.prefix,
            generation=row.key_generation + 1,
            scope_id=row.scope_id,
        )
        scopes.rewrap(conn, row, wrapped, now)
        receipts.store_receipt(
            conn,
            "rotate_key",
            {"key_id": kid, "key_generation": row.key_generation + 1},
            namespace=None,
            checkpoint_id=None,
            at_ms=now,
        )
        return _row(store, kid), len(checkpoints.namespaces_of_scope(conn, row.scope_id))


def shred_key(handle: Handle, key_id_value: object) -> models.ShredReport:
    """See :meth:`ckptdb.Database.shred_key`."""
    kid = key_id(key_id_value)
    now = _now_ms()
    with handle.use(write=True) as store:
        conn = store.conn
        # 1. Forget the wrapped data key first, in its own transaction: from its COMMIT on,
        # every copy of the scope's bytes -- here, in backups, in replicas -- is unreadable.
        with conn.write_transaction():
            row = _row(store, kid)
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
                report = gc.drop_namespace(store, name, force=True, dry_run=False)
                checkpoints_deleted += report.checkpoints_deleted
                dropped.append(name)
        # 3. Staged or orphaned records of the scope.
        with conn.write_transaction():
            blobs_deleted, chunks_deleted = blobs.delete_scope_records(conn, row.scope_id)
        # 4. Overwritten pages reach the file and the WAL is emptied, so no earlier frame
        # with the wrapped key or the scope's bytes stays on disk in the WAL.
        gc.reclaim(conn)
        conn.wal_checkpoint("TRUNCATE", wait=conn.lock_waits.timeout)
        # 5. The receipt, as the first transaction of the emptied WAL: SQLite does not sync
        # the WAL after truncating it, so until this commit's fsync a power loss could bring
        # back the WAL as of its last sync -- old frames, the wrapped key's among them. What
        # a power loss can bring back from now on is this transaction's frames alone.
        with conn.write_transaction():
            receipt_id = receipts.store_receipt(
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
            )
        conn.wal_checkpoint("TRUNCATE", wait=conn.lock_waits.timeout)
        wal = handle.path + "-wal"
        truncated = not conn.litestream_managed() and (
            not os.path.exists(wal) or os.path.getsize(wal) == 0
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
