"""The codec chain: the one seam through which every stored chunk passes.

Writing a chunk::

    codec_id, stored = encode(raw)                 # compress (or keep raw), then seal
    ... store (codec_id, len(raw), stored) beside the chunk's sha256 of ``raw`` ...

Reading it back::

    raw = decode(codec_id, stored, raw_size)       # unseal, then decompress, bounded
    ... verify sha256(raw) against the chunk's address before handing out a byte ...

The content address stays the sha256 of the *raw* bytes, so compression never changes an
identity and dedup works across codecs. :func:`decode` never returns bytes of a length other
than ``raw_size`` and never allocates more than ``raw_size`` (plus zstd's small window
state): a damaged frame, a frame claiming another size, trailing bytes, an unknown codec or
a "zip bomb" raise :class:`ChunkDecodeError` (a :class:`~ckptdb.errors.CorruptionError`).
zstd frames carry their own xxhash64 checksum, so most damage is caught here; whatever
decodes to the right length but wrong bytes is caught by the caller's sha256 check.

Codec ids
---------
A codec id is one small int, the chain written down: bits 0-7 name the compression codec
(:data:`RAW` = 0, :data:`ZSTD` = 1, more via :func:`register_codec`), bits 8-15 name the
sealing layer (0 = none). ``codec_id == 0`` is "raw, unsealed": a stored chunk is then its
raw bytes, which is what every chunk written before storage format 2 is.

The sealing seam (for the encryption issue)
-------------------------------------------
A :class:`Sealer` (e.g. AES-256-GCM with a per-scope data key and a fresh nonce) is applied
*after* compression on write and *before* decompression on read: ciphertext does not
compress, and the compressed length leaks less than the raw one. ``encode`` and ``decode``
take ``sealer=`` and ``aad=``: the associated data the caller binds into the seal (scope,
chunk identity, format version), so a sealed chunk moved to another row or scope fails to
open. A sealer's ``open`` must raise :class:`ChunkDecodeError` (or another
``CorruptionError``) when authentication fails. Nothing else in ckptdb needs to change for
it: the store keeps passing ``(codec_id, stored, raw_size)`` through this module.

Thread-safety and the GIL
-------------------------
``zstandard`` compressor/decompressor objects must not be shared between threads, so each
thread lazily builds its own (:func:`_zstd_compressor`, :func:`_zstd_decompressor`) and
reuses it for every chunk (building one costs more than compressing a small chunk). The
zstandard C extension releases the GIL inside ``compress``/``decompress``, so threads encode
and decode chunks in parallel. All functions here are safe to call from any thread.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

import zstandard

from .. import limits
from ..errors import CkptdbError, CorruptionError, InvalidInputError

#: Compression codec ids (bits 0-7 of a codec id). Stable forever: they are in files.
RAW = 0
ZSTD = 1

#: zstd level for new chunks. Chosen by ``tools/bench_chunking.py`` on 8 KiB CDC chunks:
#: level 1 gave the same ratio as level 3 (2.58 on chat-like JSON; chunks are too small for
#: level 3's larger search to pay) at ~1.25x its speed on text and random bytes; levels 6+
#: gained ~2% ratio for 3-5x less speed; negative levels lost 30-40% of the ratio.
DEFAULT_ZSTD_LEVEL = 1

#: The largest raw record :func:`encode` takes and :func:`decode` accepts: the one bound
#: (:data:`ckptdb.limits.MAX_RECORD_BYTES`) every chunker's records stay within, so what was
#: written always decodes; a larger ``raw_size`` is damaged metadata and must not become a
#: giant allocation.
MAX_RAW_SIZE = limits.MAX_RECORD_BYTES

# zstd's "fast" negative levels trade ratio for speed; below -7 they barely compress text.
_MIN_ZSTD_LEVEL = -7
_MAX_ZSTD_LEVEL = zstandard.MAX_COMPRESSION_LEVEL
_COMPRESSION_MASK = 0xFF
_SEAL_SHIFT = 8
_MAX_CODEC_ID = 0xFFFF


class ChunkDecodeError(CorruptionError):
    """A stored chunk cannot be decoded into exactly its recorded raw size: damaged or
    foreign bytes, an unknown codec id, or a seal that does not open. No bytes were
    returned. (Defined here until the store layer settles; it belongs in ckptdb.errors.)"""

    code = "chunk_undecodable"


class CodecUnavailableError(CkptdbError):
    """A chunk is sealed and no (or another) sealer was given: a key is needed to read it."""

    code = "codec_unavailable"


class InvalidCodecError(InvalidInputError):
    """A codec or sealer cannot be registered or used as asked (bad id, duplicate, level)."""

    code = "invalid_codec"


class Codec(Protocol):
    """A compression codec (bits 0-7 of a codec id)."""

    @property
    def codec_id(self) -> int:
        """Its id, 1-255, stable forever once files hold it."""
        ...

    def compress(self, raw: bytes | memoryview) -> bytes:
        """``raw`` compressed (the caller keeps raw if this is not shorter)."""
        ...

    def decompress(self, stored: bytes | memoryview, raw_size: int) -> bytes:
        """Exactly ``raw_size`` bytes, or :class:`ChunkDecodeError`; never allocate more
        than ``raw_size`` plus a bounded working set."""
        ...


class Sealer(Protocol):
    """An authenticated-encryption layer (bits 8-15 of a codec id), applied last on write."""

    @property
    def seal_id(self) -> int:
        """Its id, 1-255, stable forever once files hold it."""
        ...

    def seal(self, data: bytes, aad: bytes) -> bytes:
        """``data`` sealed, binding ``aad``."""
        ...

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        """The sealed data, or :class:`ChunkDecodeError` if it does not authenticate."""
        ...


_local = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    """This thread's compressor for ``level`` (zstandard objects are not thread-safe)."""
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "cctx", None)
    if cache is None:
        cache = _local.cctx = {}
    cctx = cache.get(level)
    if cctx is None:
        # Content size in the header lets decode reject a size mismatch before it
        # allocates; the 4-byte checksum turns most bit flips into a typed error here;
        # no dictionary id (we use none) saves header bytes.
        cctx = cache[level] = zstandard.ZstdCompressor(
            level=level, write_checksum=True, write_content_size=True, write_dict_id=False
        )
    return cctx


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor."""
    dctx: zstandard.ZstdDecompressor | None = getattr(_local, "dctx", None)
    if dctx is None:
        # max_window_size bounds the decoder's working memory for a hostile frame; it must
        # admit every frame encode makes for a record of up to MAX_RAW_SIZE.
        dctx = _local.dctx = zstandard.ZstdDecompressor(
            max_window_size=limits.MAX_ZSTD_WINDOW_BYTES
        )
    return dctx


@dataclass(frozen=True, slots=True)
class ZstdCodec:
    """zstd, one frame per chunk, content size and checksum in the frame."""

    level: int = DEFAULT_ZSTD_LEVEL
    codec_id: int = ZSTD

    def compress(self, raw: bytes | memoryview) -> bytes:
        return _zstd_compressor(self.level).compress(raw)

    def decompress(self, stored: bytes | memoryview, raw_size: int) -> bytes:
        if raw_size == 0:
            # encode never compresses an empty chunk, and zstandard reads
            # max_output_size=0 as "no limit": refuse rather than decode unbounded.
            raise ChunkDecodeError("a zstd chunk cannot be empty", expected_size=0)
        try:
            params = zstandard.get_frame_parameters(stored)
        except zstandard.ZstdError as exc:
            raise ChunkDecodeError(f"damaged zstd frame header: {exc}") from None
        # Check the size the frame claims before zstd allocates it: a damaged or hostile
        # header must not turn into a large allocation, and a frame of another size is not
        # this chunk.
        if params.content_size != raw_size:
            raise ChunkDecodeError(
                f"zstd frame holds {params.content_size} bytes, the chunk has {raw_size}",
                expected_size=raw_size,
            )
        try:
            # allow_extra_data=False: bytes after the frame mean the row is not what we wrote.
            out = _zstd_decompressor().decompress(
                stored, max_output_size=raw_size, allow_extra_data=False
            )
        except zstandard.ZstdError as exc:
            raise ChunkDecodeError(f"damaged zstd frame: {exc}") from None
        if len(out) != raw_size:  # zstd checks this itself; never trust one layer
            raise ChunkDecodeError(
                f"zstd frame decoded to {len(out)} bytes, the chunk has {raw_size}",
                expected_size=raw_size,
            )
        return out


_CODECS: dict[int, Codec] = {ZSTD: ZstdCodec()}
_registry_lock = threading.Lock()


def register_codec(codec: Codec) -> None:
    """Add a compression codec (ids 2-255; 0 and 1 are raw and zstd). Registering an id
    twice is refused: an id means one format forever."""
    cid = codec.codec_id
    if type(cid) is not int or not 2 <= cid <= _COMPRESSION_MASK:
        raise InvalidCodecError(f"a codec id must be an int in [2, 255], got {cid!r}")
    with _registry_lock:
        if cid in _CODECS:
            raise InvalidCodecError(f"codec id {cid} is already registered")
        _CODECS[cid] = codec


def compression_of(codec_id: int) -> int:
    """The compression codec of a codec id (bits 0-7), whatever seals it."""
    return codec_id & _COMPRESSION_MASK


def codec_name(codec_id: int) -> str:
    """A readable name for a codec id (``raw``, ``zstd``, ``zstd+seal1``...), for tools."""
    comp = codec_id & _COMPRESSION_MASK
    seal = codec_id >> _SEAL_SHIFT
    base = {RAW: "raw", ZSTD: "zstd"}.get(comp, f"codec{comp}")
    return base if not seal else f"{base}+seal{seal}"


def encode(
    raw: bytes | bytearray | memoryview,
    *,
    compression: int = ZSTD,
    level: int | None = None,
    sealer: Sealer | None = None,
    aad: bytes = b"",
) -> tuple[int, bytes]:
    """Encode one chunk for storage: ``(codec_id, stored_bytes)``.

    Compresses with ``compression`` (zstd at ``level``, default :data:`DEFAULT_ZSTD_LEVEL`)
    and keeps the raw bytes instead when that is not strictly shorter (random or already
    compressed data; an empty chunk). With ``sealer``, the result is then sealed binding
    ``aad``, and the sealer's id goes in bits 8-15 of ``codec_id``.
    """
    size = raw.nbytes if isinstance(raw, memoryview) else len(raw)
    if size > MAX_RAW_SIZE:
        # decode refuses it, so storing it would acknowledge bytes no reader gets back.
        raise InvalidCodecError(
            f"a record of {size} bytes is larger than the format's {MAX_RAW_SIZE}; "
            "nothing was stored. Cut it into smaller chunks (a ckptdb chunker never makes "
            "one this large)",
            size=size,
            limit=MAX_RAW_SIZE,
        )
    data = raw if isinstance(raw, bytes) else bytes(raw)
    codec_id = RAW
    stored = data
    if data and compression != RAW:
        codec: Codec
        if compression == ZSTD and level is not None:
            if type(level) is not int or not _MIN_ZSTD_LEVEL <= level <= _MAX_ZSTD_LEVEL:
                raise InvalidCodecError(
                    f"zstd level must be an int in [{_MIN_ZSTD_LEVEL}, {_MAX_ZSTD_LEVEL}], "
                    f"got {level!r}"
                )
            codec = ZstdCodec(level=level)
        else:
            found = _CODECS.get(compression)
            if found is None:
                raise InvalidCodecError(f"no compression codec with id {compression!r}")
            codec = found
        packed = codec.compress(data)
        if len(packed) < len(data):
            codec_id, stored = compression, packed
    if sealer is not None:
        seal_id = sealer.seal_id
        if type(seal_id) is not int or not 1 <= seal_id <= _COMPRESSION_MASK:
            raise InvalidCodecError(f"a seal id must be an int in [1, 255], got {seal_id!r}")
        stored = sealer.seal(stored, aad)
        codec_id |= seal_id << _SEAL_SHIFT
    return codec_id, stored


def decode(
    codec_id: int,
    stored: bytes | memoryview,
    raw_size: int,
    *,
    sealer: Sealer | None = None,
    aad: bytes = b"",
) -> bytes:
    """Decode one stored chunk into exactly ``raw_size`` bytes, or raise.

    The result still has to be checked against the chunk's sha256 by the caller (this
    function only guarantees the length, and zstd's own checksum). Raises
    :class:`ChunkDecodeError` for anything that does not decode to ``raw_size`` bytes and
    :class:`CodecUnavailableError` for a sealed chunk without its sealer.
    """
    if type(codec_id) is not int or not 0 <= codec_id <= _MAX_CODEC_ID:
        raise ChunkDecodeError(f"codec id {codec_id!r} is not a valid codec id")
    if type(raw_size) is not int or not 0 <= raw_size <= MAX_RAW_SIZE:
        raise ChunkDecodeError(
            f"raw size {raw_size!r} is outside [0, {MAX_RAW_SIZE}]", expected_size=raw_size
        )
    seal = codec_id >> _SEAL_SHIFT
    comp = codec_id & _COMPRESSION_MASK
    data = stored if isinstance(stored, bytes) else bytes(stored)
    if seal:
        if sealer is None or sealer.seal_id != seal:
            raise CodecUnavailableError(
                f"the chunk is sealed ({codec_name(codec_id)}); its sealer (key) is needed",
                codec_id=codec_id,
            )
        data = sealer.open(data, aad)
    if comp == RAW:
        if len(data) != raw_size:
            raise ChunkDecodeError(
                f"raw chunk holds {len(data)} bytes, the chunk has {raw_size}",
                expected_size=raw_size,
            )
        return data
    codec = _CODECS.get(comp)
    if codec is None:
        raise ChunkDecodeError(f"unknown compression codec id {comp}", codec_id=codec_id)
    out = codec.decompress(data, raw_size)
    if len(out) != raw_size:  # a registered codec's bug must not leak wrong-length bytes
        raise ChunkDecodeError(
            f"{codec_name(codec_id)} decoded to {len(out)} bytes, the chunk has {raw_size}",
            expected_size=raw_size,
        )
    return out
