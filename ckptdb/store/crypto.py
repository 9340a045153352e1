"""The cryptography of a key scope: data keys, wrapping, keyed addresses and sealing.

A key scope (``store/scopes.py``) has one random 256-bit *data key*. It is stored only
wrapped -- sealed with AES-256-GCM under the host's *key encryption key* (KEK), binding the
scope's key id, prefix and key generation -- and two keys are derived from it with HKDF-SHA256:

* the *address key*: a chunk's or blob's content address inside the scope is
  HMAC-SHA256(address key, raw bytes), so the file never holds the plain sha256 of a tenant's
  content and identical content in two scopes has two unrelated addresses;
* the *sealing key*: every stored chunk and inline blob is compressed, then sealed with
  AES-256-GCM under a fresh random 96-bit nonce, the associated data binding the record kind,
  the scope id, the content address, the raw size and the format version -- a sealed record
  moved to another row, scope or file does not open.

Stored layout of a sealed record: ``nonce (12 bytes) || ciphertext || tag (16 bytes)``. The
AES and HMAC work runs in OpenSSL (the ``cryptography`` package, AES-NI where the CPU has it).

Random nonces: NIST SP 800-38D bounds one key to 2^32 random-nonce messages; a scope seals
one message per distinct chunk it stores, far below that for any realistic tenant (2^32 chunks
of 8 KiB are 32 TiB). Rotation re-wraps the data key; it does not change it (O(1), no data
rewritten) -- see docs/security.md for what that does and does not protect against.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESGCMSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .. import canonical, errors, keyids
from . import codec

#: The algorithm recorded in ``key_scope.algorithm``: the wrap, the derivation and the seal.
ALGORITHM = "aes256gcm-hkdf-sha256-v1"
#: Seal id in bits 8-15 of a codec id.
SEAL_AES256GCM = 1
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
_FORMAT = 1
_WRAP_DOMAIN = b"ckptdb/wrap/v1\0"
_CHUNK_DOMAIN = b"ckptdb/chunk/v1\0"
_BLOB_DOMAIN = b"ckptdb/blob/v1\0"
_METADATA_DOMAIN = b"ckptdb/metadata/v1\0"
_RECORD_DOMAIN = b"ckptdb/record/v1\0"
#: The one key of a sealed metadata object (a reserved metadata key).
SEALED_METADATA = "ckptdb:sealed"


class _Hash(Protocol):
    def update(self, data: bytes | memoryview, /) -> None: ...
    def hexdigest(self) -> str: ...


def check_key(key: object, key_id: str) -> bytes:
    """A host key as 32 bytes, or InvalidKeyError (which never shows the key)."""
    if isinstance(key, bytearray | memoryview):
        key = bytes(key)
    if not isinstance(key, bytes) or len(key) != KEY_BYTES:
        got = f"{len(key)} bytes" if isinstance(key, bytes) else type(key).__name__
        raise errors.InvalidKeyError(
            f"the key for key id {keyids.shown(key_id)} must be {KEY_BYTES} bytes (got "
            f"{got}); generate one with os.urandom(32) or take it from your KMS"
        )
    return key


def new_data_key() -> bytes:
    """A fresh random data key."""
    return os.urandom(KEY_BYTES)


def _wrap_aad(key_id: str, prefix: str, generation: int, scope_id: int) -> bytes:
    if not (0 <= scope_id < 2**64 and 0 <= generation < 2**64):
        # The schema's CHECKs hold only for rows SQLite wrote; a damaged page can hold any
        # integer, and these are bound as unsigned 64-bit numbers.
        raise errors.CorruptionError(
            f"the key scope of key id {keyids.shown(key_id)} holds an id or key generation "
            "out of range; its key_scope row is damaged. Run `ckptdb verify`.",
            key_id=keyids.detail(key_id),
            reason="key_scope_damaged",
        )
    return (
        _WRAP_DOMAIN
        + struct.pack(">QQ", scope_id, generation)
        + key_id.encode("utf-8")
        + b"\0"
        + prefix.encode("utf-8")
    )


def wrap(
    kek: bytes, data_key: bytes, *, key_id: str, prefix: str, generation: int, scope_id: int
) -> bytes:
    """The data key sealed by the host's key, bound to the scope and its generation."""
    nonce = os.urandom(NONCE_BYTES)
    aad = _wrap_aad(key_id, prefix, generation, scope_id)
    return nonce + AESGCM(kek).encrypt(nonce, data_key, aad)


def unwrap(
    kek: bytes, wrapped: bytes, *, key_id: str, prefix: str, generation: int, scope_id: int
) -> bytes:
    """The data key, or KeyMismatchError: a wrong host key, or a wrapped key that is not
    this scope's current one (damaged, from another scope, or an older generation)."""
    if len(wrapped) != NONCE_BYTES + KEY_BYTES + TAG_BYTES:
        raise errors.KeyMismatchError(
            f"the wrapped data key of key id {keyids.shown(key_id)} has the wrong length; it "
            "is damaged",
            key_id=keyids.detail(key_id),
        )
    aad = _wrap_aad(key_id, prefix, generation, scope_id)
    try:
        return AESGCM(kek).decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], aad)
    except InvalidTag:
        raise errors.KeyMismatchError(
            f"the key given for key id {keyids.shown(key_id)} does not open this file's data "
            "key: it is not the key the scope was last wrapped with (after rotate_key, use "
            "the new key), or the stored wrapped key was altered. Nothing was written.",
            key_id=keyids.detail(key_id),
        ) from None


def _derive(data_key: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=purpose).derive(
        data_key
    )


def _sha256(data: bytes = b"") -> Any:
    """``hashlib.sha256`` behind a Python function. Given as ``digestmod``, it makes
    :class:`hmac.HMAC` key two hashlib states once (the RFC 2104 construction, in the
    standard library's own code) instead of setting up an OpenSSL MAC for every address
    (a provider fetch, a context, the key's two blocks); a copy of the keyed object then
    costs about what a sha256 does. Measured here on 1 KiB, warm: ``hmac.digest`` ~4 us, a
    keyed copy ~2.5 us, sha256 ~1.7 us; as the first call after a commit (its code cold,
    as once per entry of a small commit): ~35-45 us, ~17 us, ~12-16 us. End to end, 2-3 %
    of a small commit's CPU (tools/bench_encryption.py; docs/performance.md)."""
    return hashlib.sha256(data)


@dataclass(frozen=True)
class _AesGcmSealer:
    """codec.Sealer for AES-256-GCM with a random nonce per record."""

    aead: AESGCM
    seal_id: int = SEAL_AES256GCM

    def seal(self, data: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self.aead.encrypt(nonce, data, aad)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        if len(sealed) < NONCE_BYTES + TAG_BYTES:
            raise codec.ChunkDecodeError("a sealed record is shorter than its nonce and tag")
        try:
            # A view, not a slice: slicing would copy the whole record before decrypting.
            body = memoryview(sealed)[NONCE_BYTES:]
            return self.aead.decrypt(sealed[:NONCE_BYTES], body, aad)
        except InvalidTag:
            raise codec.ChunkDecodeError(
                "a sealed record does not authenticate (damaged, or moved from another row, "
                "scope or file)"
            ) from None


@dataclass(frozen=True)
class Scope:
    """How the bytes of one key scope are addressed and sealed (:data:`PLAINTEXT` for the
    namespaces outside every scope: sha256 addresses, nothing sealed)."""

    scope_id: int | None = None
    key_id: str | None = None
    _mac: hmac.HMAC | None = field(default=None, repr=False)  # keyed once, copied per use
    _sealer: _AesGcmSealer | None = field(default=None, repr=False)
    #: set when the scope seals checkpoint metadata too
    _metadata_key: bytes | None = field(default=None, repr=False)
    #: seals an integration's own records (e.g. the LangGraph saver's pending writes)
    _record_sealer: _AesGcmSealer | None = field(default=None, repr=False)

    @classmethod
    def unlocked(
        cls, scope_id: int, key_id: str, data_key: bytes, *, seal_metadata: bool = False
    ) -> Scope:
        """The scope whose data key is ``data_key``."""
        return cls(
            scope_id,
            key_id,
            hmac.new(_derive(data_key, b"ckptdb address key v1"), digestmod=_sha256),
            _AesGcmSealer(AESGCM(_derive(data_key, b"ckptdb sealing key v1"))),
            _derive(data_key, b"ckptdb metadata key v1") if seal_metadata else None,
            _AesGcmSealer(AESGCM(_derive(data_key, b"ckptdb record key v1"))),
        )

    def seal_record(self, data: bytes, context: bytes) -> bytes:
        """``data`` sealed for an integration's own table (AES-256-GCM, fresh nonce),
        bound to ``context`` (what identifies the row) and to this scope."""
        assert self._record_sealer is not None and self.scope_id is not None
        aad = _RECORD_DOMAIN + struct.pack(">QQ", _FORMAT, self.scope_id) + context
        return self._record_sealer.seal(data, aad)

    def open_record(self, sealed: bytes, context: bytes) -> bytes:
        """The data of :meth:`seal_record`, or CorruptionError (damaged, or sealed for
        another row or scope)."""
        assert self._record_sealer is not None and self.scope_id is not None
        aad = _RECORD_DOMAIN + struct.pack(">QQ", _FORMAT, self.scope_id) + context
        try:
            return self._record_sealer.open(sealed, aad)
        except codec.ChunkDecodeError:
            raise errors.CorruptionError(
                "a sealed record does not open (damaged, or sealed for another row or scope)",
                reason="record_sealed",
            ) from None

    def seal_metadata(self, metadata_json: str) -> str:
        """The metadata as stored: unchanged, or -- in a scope that seals metadata --
        ``{"ckptdb:sealed": ...}`` holding it sealed with AES-256-GCM-SIV under a nonce
        derived from the plaintext. Deterministic on purpose: the same metadata seals to the
        same text, so a checkpoint's id (computed over what is stored, and verifiable
        without the key) stays a function of its content and idempotent commits still
        converge. It shows only which checkpoints of the scope have equal metadata."""
        if self._metadata_key is None:
            return metadata_json
        plain = metadata_json.encode("utf-8")
        nonce = hmac.digest(self._metadata_key, plain, "sha256")[:NONCE_BYTES]
        sealed = AESGCMSIV(self._metadata_key).encrypt(nonce, plain, self._metadata_aad())
        return canonical.dumps(
            {SEALED_METADATA: {"v": 1, "data": base64.b64encode(nonce + sealed).decode()}}
        )

    def open_metadata(self, stored: dict[str, Any]) -> dict[str, Any]:
        """The metadata of a sealed metadata object, or CorruptionError."""
        if self._metadata_key is None:
            raise errors.CorruptionError(
                "checkpoint metadata is sealed but its scope does not seal metadata; the "
                "record was altered",
                reason="metadata_sealed",
            )
        try:
            blob = base64.b64decode(stored[SEALED_METADATA]["data"], validate=True)
            plain = AESGCMSIV(self._metadata_key).decrypt(
                blob[:NONCE_BYTES], blob[NONCE_BYTES:], self._metadata_aad()
            )
            value = json.loads(plain.decode("utf-8"))
        except (InvalidTag, KeyError, TypeError, ValueError, binascii.Error):
            raise errors.CorruptionError(
                "sealed checkpoint metadata does not open (damaged, or moved from another scope)",
                reason="metadata_sealed",
            ) from None
        if not isinstance(value, dict):
            raise errors.CorruptionError(
                "sealed metadata is not an object", reason="metadata_sealed"
            )
        return value

    def _metadata_aad(self) -> bytes:
        assert self.scope_id is not None
        return _METADATA_DOMAIN + struct.pack(">QQ", _FORMAT, self.scope_id)

    @property
    def sealed(self) -> bool:
        """True for a key scope (its records are sealed)."""
        return self._sealer is not None

    def address(self, data: bytes) -> str:
        """The content address of ``data`` in this scope (hex)."""
        if self._mac is None:
            return hashlib.sha256(data).hexdigest()
        mac = self._mac.copy()
        mac.update(data)
        return mac.hexdigest()

    def hasher(self) -> _Hash:
        """An incremental :meth:`address` (for a blob read or written in pieces)."""
        if self._mac is None:
            return hashlib.sha256()
        return self._mac.copy()

    def _aad(self, domain: bytes, digest: str, size: int) -> bytes:
        assert self.scope_id is not None
        return domain + struct.pack(">QQQ", _FORMAT, self.scope_id, size) + bytes.fromhex(digest)

    def encode(
        self, raw: bytes, digest: str, *, compress: bool = True, blob: bool = False
    ) -> tuple[int, bytes, bytes | None]:
        """(codec id, stored bytes, sha256 of the stored bytes when sealed) of one record."""
        compression = codec.ZSTD if compress else codec.RAW
        if self._sealer is None:
            codec_id, stored = codec.encode(raw, compression=compression)
            return codec_id, stored, None
        aad = self._aad(_BLOB_DOMAIN if blob else _CHUNK_DOMAIN, digest, len(raw))
        codec_id, stored = codec.encode(raw, compression=compression, sealer=self._sealer, aad=aad)
        return codec_id, stored, hashlib.sha256(stored).digest()

    def holds_same(
        self,
        stored_codec: object,
        stored: object,
        ours_codec: int,
        ours: bytes,
        digest: str,
        size: int,
        *,
        blob: bool = False,
    ) -> bool:
        """True when ``stored`` -- a record found under ``digest`` -- opens in this scope as
        the record of ``digest`` and ``size`` and holds exactly the encoding that ``ours``
        (just encoded by this scope from raw bytes whose address is ``digest``) holds.

        It then decodes to the same raw bytes as ours, which is what a dedup hit must know
        before it references a stored copy: the check a plaintext hit makes by comparing
        the stored bytes with its own (sealed bytes never compare equal, each seal has a
        fresh nonce), done under the seal instead of by decompressing and hashing the
        stored copy again. False (the caller then decodes and hashes) when anything
        differs or does not open."""
        if (
            self._sealer is None
            or type(stored_codec) is not int
            or stored_codec != ours_codec
            or not isinstance(stored, bytes)
        ):
            return False
        aad = self._aad(_BLOB_DOMAIN if blob else _CHUNK_DOMAIN, digest, size)
        try:
            return self._sealer.open(stored, aad) == self._sealer.open(ours, aad)
        except codec.ChunkDecodeError:
            return False

    def decode(
        self, codec_id: int, stored: bytes, size: int, digest: str, *, blob: bool = False
    ) -> bytes:
        """The raw bytes of a stored record (still to be checked against ``digest`` with
        :meth:`address`). Raises ChunkDecodeError, or KeyUnavailable-style errors from the
        codec for a sealed record outside a key scope."""
        if self._sealer is None:
            return codec.decode(codec_id, stored, size)
        aad = self._aad(_BLOB_DOMAIN if blob else _CHUNK_DOMAIN, digest, size)
        return codec.decode(codec_id, stored, size, sealer=self._sealer, aad=aad)


#: The namespaces outside every key scope.
PLAINTEXT = Scope()


def is_sealed_metadata(value: object) -> bool:
    """True for metadata stored sealed (``{"ckptdb:sealed": {...}}``)."""
    return isinstance(value, dict) and len(value) == 1 and SEALED_METADATA in value
