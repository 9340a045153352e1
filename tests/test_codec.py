"""The codec chain: round trips, raw fallback, bounded and typed decoding, the seal seam."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import struct
import threading
import tracemalloc

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptdb.errors import CorruptionError
from ckptdb.store import codec
from ckptdb.store.codec import ChunkDecodeError, CodecUnavailableError, InvalidCodecError

TEXT = b"".join(
    b'{"role": "user", "content": "message number %d says hello"}' % i for i in range(300)
)


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=70_000) | st.text(max_size=5_000).map(str.encode))
def test_decode_inverts_encode(raw: bytes) -> None:
    codec_id, stored = codec.encode(raw)
    assert codec_id in (codec.RAW, codec.ZSTD)
    assert len(stored) <= len(raw)  # never stored larger than raw
    assert codec.decode(codec_id, stored, len(raw)) == raw


def test_compressible_is_zstd_and_random_is_raw() -> None:
    codec_id, stored = codec.encode(TEXT)
    assert codec_id == codec.ZSTD and len(stored) < len(TEXT) // 5
    noise = os.urandom(10_000)
    assert codec.encode(noise) == (codec.RAW, noise)
    assert codec.encode(b"") == (codec.RAW, b"")
    assert codec.encode(memoryview(TEXT))[1] == stored
    for level in (-7, 1, 19):
        cid, s = codec.encode(TEXT, level=level)
        assert codec.decode(cid, s, len(TEXT)) == TEXT


@pytest.mark.parametrize("level", [0.5, 23, -8, True])
def test_bad_level_is_a_typed_error(level: object) -> None:
    with pytest.raises(InvalidCodecError):
        codec.encode(TEXT, level=level)  # type: ignore[arg-type]


def test_wrong_size_unknown_codec_and_trailing_bytes_are_typed_errors() -> None:
    cid, stored = codec.encode(TEXT)
    bad = [
        (cid, stored, len(TEXT) - 1),
        (cid, stored, len(TEXT) + 1),
        (cid, stored, 0),
        (cid, stored + b"\0", len(TEXT)),
        (cid, stored + stored, len(TEXT)),
        (cid, stored[:-1], len(TEXT)),
        (cid, stored[:10], len(TEXT)),
        (cid, b"", len(TEXT)),
        (codec.RAW, b"abc", 4),
        (codec.RAW, b"abcd", 3),
        (77, stored, len(TEXT)),  # no such codec
        (-1, stored, len(TEXT)),
        (cid, stored, -1),
        (cid, stored, codec.MAX_RAW_SIZE + 1),
    ]
    for codec_id, data, size in bad:
        with pytest.raises(ChunkDecodeError) as info:
            codec.decode(codec_id, data, size)
        assert isinstance(info.value, CorruptionError)
        assert info.value.code == "chunk_undecodable"


def _flip_outcomes(raw: bytes) -> tuple[int, int]:
    """Flip every bit of raw's zstd frame, one at a time: (typed errors, decodes)."""
    cid, stored = codec.encode(raw)
    assert cid == codec.ZSTD
    digest = hashlib.sha256(raw).digest()
    errors = decodes = 0
    for bit in range(len(stored) * 8):
        damaged = bytearray(stored)
        damaged[bit // 8] ^= 1 << (bit % 8)
        try:
            out = codec.decode(cid, bytes(damaged), len(raw))
        except ChunkDecodeError:
            errors += 1
            continue
        decodes += 1
        # It decoded: the length is right by contract, and if the bytes differ, the
        # caller's sha256 check (done by the store on every read) catches it.
        assert len(out) == len(raw)
        assert out == raw or hashlib.sha256(out).digest() != digest
    return errors, decodes


def test_every_single_bit_flip_in_a_frame_is_caught() -> None:
    errors, decodes = _flip_outcomes(TEXT[:3000])
    # zstd's checksum and our size checks turn nearly every flip into a typed error; the
    # few that decode are flips in bits zstd ignores (e.g. reserved or unused header bits).
    assert errors > 0.95 * (errors + decodes)


@settings(max_examples=25, deadline=None)
@given(raw=st.text(min_size=200, max_size=2_000).map(lambda s: (s * 3).encode()))
def test_bit_flips_never_yield_wrong_length_bytes(raw: bytes) -> None:
    if codec.encode(raw)[0] == codec.ZSTD:
        _flip_outcomes(raw)


def _set_content_size(frame: bytes, size: int) -> bytes:
    """Rewrite the 4-byte frame-content-size field of a zstd frame (FHD FCS flag 2)."""
    fhd = frame[4]
    assert fhd >> 6 == 2 and fhd & 3 == 0  # 4-byte content size, no dictionary id
    single_segment = (fhd >> 5) & 1
    at = 5 + (0 if single_segment else 1)
    return frame[:at] + struct.pack("<I", size) + frame[at + 4 :]


def test_zip_bombs_are_refused_without_allocating_them() -> None:
    zeros = 64 << 20
    bomb_unknown = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(zeros))
    honest = zstandard.ZstdCompressor(write_checksum=True).compress(bytes(zeros))
    lying = _set_content_size(honest, 1000)  # claims 1000 bytes, holds 64 MiB
    tracemalloc.start()
    try:
        for frame, size in ((bomb_unknown, 1000), (honest, 1000), (lying, 1000)):
            with pytest.raises(ChunkDecodeError):
                codec.decode(codec.ZSTD, frame, size)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


class _ToySealer:
    """A stand-in for AES-GCM: XOR with a keystream plus an HMAC tag over aad + data."""

    seal_id = 1

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _stream(self, n: int) -> bytes:
        return hashlib.shake_256(self._key).digest(n)

    def seal(self, data: bytes, aad: bytes) -> bytes:
        body = bytes(a ^ b for a, b in zip(data, self._stream(len(data)), strict=True))
        return body + hmac.digest(self._key, aad + body, "sha256")

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        body, tag = sealed[:-32], sealed[-32:]
        if not hmac.compare_digest(tag, hmac.digest(self._key, aad + body, "sha256")):
            raise ChunkDecodeError("seal does not open")
        return bytes(a ^ b for a, b in zip(body, self._stream(len(body)), strict=True))


def test_the_seal_step_wraps_compression_and_binds_associated_data() -> None:
    sealer = _ToySealer(b"k" * 32)
    cid, stored = codec.encode(TEXT, sealer=sealer, aad=b"scope/chunk-1")
    assert cid == codec.ZSTD | (1 << 8) and codec.codec_name(cid) == "zstd+seal1"
    assert codec.decode(cid, stored, len(TEXT), sealer=sealer, aad=b"scope/chunk-1") == TEXT
    with pytest.raises(ChunkDecodeError):
        codec.decode(cid, stored, len(TEXT), sealer=sealer, aad=b"scope/chunk-2")
    with pytest.raises(CodecUnavailableError):
        codec.decode(cid, stored, len(TEXT))
    noise = os.urandom(500)
    cid, stored = codec.encode(noise, sealer=sealer)
    assert cid == codec.RAW | (1 << 8)
    assert codec.decode(cid, stored, 500, sealer=sealer) == noise


class _Reverse:
    """A toy codec to show the registry (never used for real data)."""

    codec_id = 254

    def compress(self, raw: bytes | memoryview) -> bytes:
        return bytes(raw)[::-1][:-1]  # "shorter" so encode keeps it

    def decompress(self, stored: bytes | memoryview, raw_size: int) -> bytes:
        return bytes(stored)[::-1]  # one byte short: decode must refuse it


def test_registry_refuses_bad_ids_and_guards_registered_codecs() -> None:
    with pytest.raises(InvalidCodecError):
        codec.register_codec(codec.ZstdCodec())  # id 1 is built in
    with pytest.raises(InvalidCodecError):
        codec.register_codec(type("C", (_Reverse,), {"codec_id": 256})())
    with contextlib.suppress(InvalidCodecError):  # registered by an earlier run here
        codec.register_codec(_Reverse())
    with pytest.raises(InvalidCodecError):
        codec.register_codec(_Reverse())
    cid, stored = codec.encode(b"abcdef", compression=254)
    assert cid == 254
    with pytest.raises(ChunkDecodeError):  # the buggy codec's short output never leaks
        codec.decode(cid, stored, 6)
    with pytest.raises(InvalidCodecError):
        codec.encode(b"abc", compression=99)


def test_threads_share_nothing_unsafe() -> None:
    blobs = [TEXT + os.urandom(8) + TEXT[: i * 100] for i in range(8)]
    failures: list[BaseException] = []

    def work(blob: bytes) -> None:
        try:
            for _ in range(200):
                cid, stored = codec.encode(blob)
                assert codec.decode(cid, stored, len(blob)) == blob
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(b,)) for b in blobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
