"""Errors of keys and encryption, and of the host store seam (``ckptdb.host_store``)."""

from __future__ import annotations

from ._base import AdvisedError, CkptdbError, CorruptionError, InvalidInputError, NotFoundError

# --- keys and encryption ---------------------------------------------------------------
# Messages and details of these errors name key ids, never key material.


class InvalidKeyError(InvalidInputError):
    """A key given to ckptdb is not 32 bytes, or a key provider returned something else."""

    code = "invalid_key"
    exit_status = 14


class KeyUnavailableError(AdvisedError):
    """The key of a key scope was not given to this handle: that scope cannot be read or
    written (every other scope works). Open with ``keys={key_id: key}``."""

    code = "key_unavailable"
    exit_status = 14
    advice = "open the database with keys={key_id: <32-byte key>} (or a key provider that knows it)"


class KeyMismatchError(CkptdbError):
    """The key given for a key id does not open the scope's wrapped data key (a wrong key,
    the key from before a rotation, or an altered wrapped key). Nothing was written."""

    code = "key_mismatch"
    exit_status = 14


class KeyShreddedError(CkptdbError):
    """The key scope was shredded: its data is gone for good and its prefix takes no new
    namespaces."""

    code = "key_shredded"
    exit_status = 14


class ScopeConflictError(InvalidInputError):
    """A key scope cannot be created as asked: its prefix overlaps another scope's, its key
    id is taken, or namespaces already exist under the prefix (they hold plaintext)."""

    code = "scope_conflict"


class ScopeChangedError(CkptdbError):
    """Encryption settings of a namespace changed while a commit was being prepared (another
    handle created a key scope): nothing was written; commit again."""

    code = "scope_changed"
    retryable = True


class EncryptedScopeError(InvalidInputError):
    """An operation would carry an encrypted namespace's content out of its key scope in
    plaintext (export, copy to another file): refused."""

    code = "encrypted_scope"


# --- the host store seam (ckptdb.host_store) ---------------------------------------------


class InvalidStoreKeyError(InvalidInputError):
    """A host store's ``put`` got a key it cannot take as a label: a key is a non-empty str of
    at most 1024 characters with no NUL and no lone surrogate. Nothing was stored."""

    code = "invalid_store_key"


class InvalidLocationError(InvalidInputError):
    """A host store's ``get`` got something its ``put`` could never have returned (not a str,
    malformed, or naming another store's objects). Pass only locations this store returned."""

    code = "invalid_location"


class LocationNotFoundError(NotFoundError):
    """A host store location names nothing the store holds: it was never written there, or
    it was deleted (or garbage-collected) since."""

    code = "location_not_found"


class LocationCorruptError(CorruptionError):
    """The bytes stored at a host store location no longer match their digest; none were
    returned. Put the bytes again from their source, if there is one."""

    code = "location_corrupt"
