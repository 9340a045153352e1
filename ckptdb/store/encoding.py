"""What stored bytes become on their way into the blob tables, and back.

Every stored byte passes through the codec chain (``store/codec.py``, sealed in a key scope
by ``store/crypto.py``). Going in, :class:`EncodedChunk` hashes and encodes a chunk once,
outside any lock, and :class:`EncodingCache` keeps recent encodings so that a value that
changes a little per checkpoint is not compressed (and sealed) again. Coming out,
:func:`decoded` and :func:`verified_inline` turn a stored record back into raw bytes, or
None when the record is damaged: a damaged record may hold any type where the bytes should be.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from .. import errors
from . import codec
from .crypto import PLAINTEXT, Scope


class EncodingCache:
    """The stored encodings this handle made recently, by (key scope, content address).

    A value that changes a little per checkpoint (a growing message list) is cut into the
    same chunks every time; compressing (and sealing) each again was a quarter of such a
    commit's CPU. The encoding of bytes is a function of the bytes (zstd is deterministic;
    a seal under another nonce opens the same), so one made earlier for the same address
    is as good as a new one. Bounded by the stored bytes it holds; thread-safe (group
    commit prepares in several threads)."""

    #: chunks above this are not kept (large-tier chunks of big files would only churn it)
    MAX_CHUNK = 64 * 1024

    def __init__(self, max_bytes: int = 16 * 1024 * 1024) -> None:
        self._max_bytes = max_bytes
        self._held = 0
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[int | None, str], tuple[int, int, bytes, bytes | None]]
        self._items = OrderedDict()

    def get(
        self, scope_id: int | None, digest: str, size: int
    ) -> tuple[int, bytes, bytes | None] | None:
        """(codec id, stored bytes, sealed digest) made for this address, if held."""
        with self._lock:
            hit = self._items.get((scope_id, digest))
            if hit is None or hit[0] != size:
                return None
            self._items.move_to_end((scope_id, digest))
            return hit[1], hit[2], hit[3]

    def put(
        self,
        scope_id: int | None,
        digest: str,
        size: int,
        encoding: tuple[int, bytes, bytes | None],
    ) -> None:
        """Remember an encoding just made (dropping the least recently used)."""
        if size > self.MAX_CHUNK:
            return
        codec_id, stored, sealed_digest = encoding
        with self._lock:
            old = self._items.pop((scope_id, digest), None)
            if old is not None:
                self._held -= len(old[2])
            self._items[(scope_id, digest)] = (size, codec_id, stored, sealed_digest)
            self._held += len(stored)
            while self._held > self._max_bytes and self._items:
                _, dropped = self._items.popitem(last=False)
                self._held -= len(dropped[2])

    def clear(self) -> None:
        """Forget everything (e.g. when key scopes changed)."""
        with self._lock:
            self._items.clear()
            self._held = 0


@dataclass(frozen=True, slots=True)
class EncodedChunk:
    """One chunk ready to store: its content address, raw size and stored encoding (and,
    in a key scope, the scope and the sha256 of the sealed bytes)."""

    digest: str
    size: int
    codec: int
    stored: bytes
    scope_id: int | None = None
    sealed_digest: bytes | None = None

    @classmethod
    def of(
        cls,
        raw: bytes | memoryview,
        *,
        compress: bool = True,
        scope: Scope = PLAINTEXT,
        cache: EncodingCache | None = None,
    ) -> EncodedChunk:
        """Hash and encode raw bytes (outside any lock; hashlib, zstd and OpenSSL release
        the GIL). ``compress=False`` stores them raw without trying (a stream found
        incompressible); ``scope`` addresses and seals them for a key scope; ``cache``
        supplies (and keeps) the encoding made earlier for the same address."""
        data = raw if isinstance(raw, bytes) else bytes(raw)
        digest = scope.address(data)
        encoding = None if cache is None else cache.get(scope.scope_id, digest, len(data))
        if encoding is None:
            encoding = scope.encode(data, digest, compress=compress)
            if cache is not None:
                cache.put(scope.scope_id, digest, len(data), encoding)
        codec_id, stored, sealed_digest = encoding
        return cls(digest, len(data), codec_id, stored, scope.scope_id, sealed_digest)


def decoded(
    codec_id: object,
    stored: object,
    size: int,
    scope: Scope = PLAINTEXT,
    digest: str = "",
    *,
    blob: bool = False,
) -> bytes | None:
    """The raw bytes of a stored value, or None when it does not decode to ``size`` bytes
    (a damaged record may hold any type where the bytes should be; a sealed one must open
    under ``scope`` with the associated data of ``digest``)."""
    data = b"" if stored is None else stored
    if not isinstance(data, bytes) or type(codec_id) is not int:
        return None
    if codec_id == codec.RAW and not scope.sealed:
        return data if len(data) == size else None
    if scope.sealed and not _is_hex_digest(digest):
        return None
    try:
        return scope.decode(codec_id, data, size, digest, blob=blob)
    except errors.CkptdbError:
        return None


def _is_hex_digest(value: object) -> bool:
    if not isinstance(value, str) or len(value) != 64:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


def verified_inline(
    stored: object,
    size: int,
    digest: str,
    codec_id: object = codec.RAW,
    scope: Scope = PLAINTEXT,
) -> bytes | None:
    """The raw bytes of an inline blob when they decode to ``size`` bytes with ``digest``,
    else None. A damaged record can hold a value of any type where the bytes should be."""
    data = decoded(codec_id, stored, size, scope, digest, blob=True)
    if data is None:
        return None
    return data if scope.address(data) == digest else None
