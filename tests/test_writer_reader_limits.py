"""Whatever a writer accepts, every reader of the same version reads back (issue 23, family 1).

Each writer parameter is driven over its whole accepted range -- the boundaries included --
and what was written is read back through every reader: ``read``, ``iter_bytes``, a reopened
handle (settings read back from the file), ``verify``, and export + import. One past each
boundary is refused, typed, with nothing created. Large values use compressible bytes, so
the cost is hashing and compressing, not disk.
"""

from __future__ import annotations

import io
import math
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from conftest import file_digest, raw_sql
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors, limits, validation
from ckptdb.ops import export_check
from ckptdb.store import codec
from ckptdb.store.chunking import (
    _AVG_SIZE_RANGE,
    _MAX_SIZE_RANGE,
    _MIN_SIZE_RANGE,
    LARGE_TIER_BYTES,
    LARGE_TIER_FACTOR,
    ChunkParams,
    FixedChunker,
    InvalidChunkParamsError,
    chunker_from_settings,
)
from ckptdb.store.crypto import Scope

KEY = bytes(range(32))
KEYS = {"k": KEY}
MIB = 1 << 20
MIN_CHUNK = limits.MIN_CHUNK_BYTES
MAX_CHUNK = limits.MAX_CHUNK_BYTES
#: The bound the decoder held before issue 23: one byte past it was accepted, acknowledged
#: and never read back.
OLD_DECODER_BOUND = 64 * MIB


def _compressible(size: int, seed: int = 0) -> bytes:
    """``size`` bytes that zstd shrinks a thousandfold (distinct per ``seed``)."""
    unit = (f"{seed:08d}".encode() + bytes(range(256))) * 4
    return (unit * (size // len(unit) + 1))[:size]


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ckptdb-limits-") as d:
        yield Path(d)


def _new_path() -> Path:
    # Hypothesis runs many examples per test call (and pytest's tmp_path is one per call):
    # each example gets a fresh directory of its own.
    return Path(tempfile.mkdtemp(prefix="ckptdb-limits-")) / "db.ckpt"


def _cleanup(path: Path) -> None:
    for p in path.parent.iterdir():
        p.unlink()
    path.parent.rmdir()


def _read_everything_back(
    path: Path, namespace: str, values: dict[str, bytes], chunk_size: int
) -> None:
    """Every reader, on a fresh handle: the chunk size read back from the file, each entry
    read whole or streamed (both for the small ones), and a full verify."""
    with ckptdb.open(path, keys=KEYS) as db:
        assert db.chunk_size == chunk_size
        cp = db.load(namespace).checkpoint
        for name, value in values.items():
            if name != "cut":
                assert cp.read(name) == value
            if name != "whole" or len(value) <= 4 * MIB:
                assert b"".join(cp.iter_bytes(name)) == value
        report = db.verify()
        assert report.ok, report.problems


# -- chunk_size: every accepted value reads back ---------------------------------------------


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
@given(
    chunk_size=st.integers(MIN_CHUNK, MAX_CHUNK),
    encrypted=st.booleans(),
    stream=st.booleans(),
)
@example(chunk_size=MIN_CHUNK, encrypted=True, stream=True)
@example(chunk_size=MIN_CHUNK + 1, encrypted=False, stream=False)
@example(chunk_size=OLD_DECODER_BOUND + 1, encrypted=False, stream=False)
@example(chunk_size=65 * MIB, encrypted=True, stream=True)
@example(chunk_size=MAX_CHUNK, encrypted=True, stream=False)
def test_every_accepted_chunk_size_reads_back(
    chunk_size: int, encrypted: bool, stream: bool
) -> None:
    """The largest records a file of this chunk size holds: a blob of exactly
    ``chunk_size`` bytes (stored whole, inline) and one of a byte more (a full chunk, then
    one byte), plain or sealed, given in memory or as a stream. Above 128 MiB only the
    whole one, to keep an example near a quarter GiB of hashing; a chunk of the largest size
    goes through the codec in the tests below."""
    path = _new_path()
    try:
        namespace = "sealed/t" if encrypted else "plain/t"
        # Zero bytes: free to allocate, and zstd makes a few KiB of them.
        values = {"whole": bytes(chunk_size), "small": b"tiny"}
        if chunk_size <= 128 * MIB:
            values["cut"] = bytes(chunk_size + 1)
        with ckptdb.open(path, chunk_size=chunk_size, keys=KEYS) as db:
            if encrypted:
                db.set_encryption("sealed/", key_id="k")
            given_values = {
                name: (io.BytesIO(value) if stream else value) for name, value in values.items()
            }
            db.commit(namespace, given_values)
        _read_everything_back(path, namespace, values, chunk_size)
    finally:
        _cleanup(path)


@pytest.mark.parametrize(
    "chunk_size", [MIN_CHUNK - 1, MAX_CHUNK + 1, 0, -1, 2**63, True, 1.5, "4MiB", 4 * MIB + 0.0]
)
def test_chunk_size_outside_the_range_is_refused_and_nothing_is_created(
    workdir: Path, chunk_size: object
) -> None:
    path = workdir / "db.ckpt"
    with pytest.raises(errors.InvalidInputError) as info:
        ckptdb.open(path, chunk_size=chunk_size)  # type: ignore[arg-type]
    assert "chunk_size" in info.value.message
    assert not path.exists()


# -- the codec: what it encodes, it decodes, over the whole record range ----------------------


def _scopes() -> list[Scope]:
    from ckptdb.store.crypto import PLAINTEXT

    return [PLAINTEXT, Scope.unlocked(7, "k", KEY)]


@pytest.mark.parametrize("blob", [False, True])
def test_the_largest_record_encodes_and_decodes_plain_and_sealed(blob: bool) -> None:
    raw = bytes(codec.MAX_RAW_SIZE)  # zero-filled lazily: cheap to make, fast to compress
    for scope in _scopes():
        digest = scope.address(raw)
        codec_id, stored, _ = scope.encode(raw, digest, blob=blob)
        assert scope.decode(codec_id, stored, len(raw), digest, blob=blob) == raw
        # The stored chunk that claims one byte more is refused before any allocation.
        with pytest.raises(codec.ChunkDecodeError):
            scope.decode(codec_id, stored, len(raw) + 1, digest, blob=blob)


def test_a_record_larger_than_the_decoder_takes_is_refused_by_the_encoder() -> None:
    too_big = bytes(codec.MAX_RAW_SIZE + 1)
    for scope in _scopes():
        with pytest.raises(codec.InvalidCodecError) as info:
            scope.encode(too_big, "00" * 32)
        assert isinstance(info.value, errors.InvalidInputError)
        assert info.value.details["limit"] == codec.MAX_RAW_SIZE
    with pytest.raises(codec.InvalidCodecError):
        codec.encode(memoryview(too_big))


@pytest.mark.parametrize("level", range(-7, zstandard.MAX_COMPRESSION_LEVEL + 1))
def test_every_encoder_level_makes_windows_the_decoder_admits(level: int) -> None:
    """zstd picks its window from the level and the content size; the decoder's bound must
    admit the largest window the encoder can choose for the largest record (single-segment
    frames use the content size itself, at most MAX_RAW_SIZE)."""
    params = zstandard.ZstdCompressionParameters.from_level(level, source_size=codec.MAX_RAW_SIZE)
    assert 1 << params.window_log <= limits.MAX_ZSTD_WINDOW_BYTES
    assert codec.MAX_RAW_SIZE <= limits.MAX_ZSTD_WINDOW_BYTES


def test_a_level_22_frame_over_the_old_window_bound_decodes() -> None:
    """At level 22 a record of just over 64 MiB is one single-segment frame whose window is
    its whole size: the old 64 MiB window bound refused it."""
    raw = _compressible(OLD_DECODER_BOUND + 1024)
    codec_id, stored = codec.encode(raw, level=22)
    assert zstandard.get_frame_parameters(stored).window_size > OLD_DECODER_BOUND
    assert codec.decode(codec_id, stored, len(raw)) == raw


# -- chunkers: every one the settings reader accepts makes records the decoder reads ---------


def test_every_fixed_chunk_size_the_writer_accepts_is_a_chunker_the_reader_accepts() -> None:
    for bad in (MIN_CHUNK - 1, MAX_CHUNK + 1, 1 << 40, 0, -5, True, 4.0, "65536", None):
        with pytest.raises(InvalidChunkParamsError):
            chunker_from_settings({"algorithm": "fixed", "size": bad})
    for size in (MIN_CHUNK, MIN_CHUNK + 1, limits.DEFAULT_CHUNK_BYTES, MAX_CHUNK):
        chunker = chunker_from_settings({"algorithm": "fixed", "size": size})
        assert chunker == FixedChunker(size)
        assert chunker.max_record == size <= codec.MAX_RAW_SIZE


def _power_of_two(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(math.ceil(math.log2(lo)), int(math.log2(hi))).map(lambda e: 1 << e)


@settings(max_examples=60, deadline=None, database=None)
@given(
    min_size=st.integers(*_MIN_SIZE_RANGE),
    avg_size=_power_of_two(*_AVG_SIZE_RANGE),
    max_size=st.integers(*_MAX_SIZE_RANGE),
    normalization=st.integers(0, 3),
    threshold=st.integers(0, _MAX_SIZE_RANGE[1]),
    seed=st.integers(0, 2**32 - 1),
)
@example(min_size=2048, avg_size=8192, max_size=1 << 20, normalization=1, threshold=0, seed=1)
@example(
    min_size=_MIN_SIZE_RANGE[1] - 1,
    avg_size=_AVG_SIZE_RANGE[1],
    max_size=_MAX_SIZE_RANGE[1],
    normalization=3,
    threshold=16384,
    seed=2,
)
def test_every_chunking_setting_the_reader_accepts_can_write_every_blob(
    min_size: int,
    avg_size: int,
    max_size: int,
    normalization: int,
    threshold: int,
    seed: int,
) -> None:
    """A file's ``chunking`` setting is read back into a chunker when the file opens; if it
    is accepted there, every blob -- small tier, large tier -- must cut into records the
    codec encodes and decodes (before, a max_size above 512 KiB was accepted and then made
    every blob over 4 MiB fail at commit time)."""
    try:
        params = ChunkParams(min_size, avg_size, max_size, normalization, threshold)
    except InvalidChunkParamsError:
        return  # not accepted at all: nothing to read back
    try:
        chunker = chunker_from_settings(params.to_settings())
    except InvalidChunkParamsError:
        # Refused where the file's settings are read: only a setting whose large tier is
        # impossible, and that one is refused before anything is written with it.
        assert (
            min_size * LARGE_TIER_FACTOR > _MIN_SIZE_RANGE[1]
            or avg_size * LARGE_TIER_FACTOR > _AVG_SIZE_RANGE[1]
            or max_size * LARGE_TIER_FACTOR > _MAX_SIZE_RANGE[1]
        )
        return
    rng = random.Random(seed)
    longest = 0
    for size in (max(threshold - 1, 0), LARGE_TIER_BYTES + 1 + rng.randrange(1 << 20)):
        blob = rng.randbytes(size)
        pieces = list(chunker.cut(blob))
        assert b"".join(pieces) == blob
        longest = max(longest, *(len(p) for p in pieces))
    assert longest <= chunker.max_record <= codec.MAX_RAW_SIZE
    largest = bytes(chunker.max_record)
    codec_id, stored = codec.encode(largest)
    assert codec.decode(codec_id, stored, len(largest)) == largest


def _set_setting(path: Path, key: str, value: str) -> None:
    raw_sql(path, "UPDATE setting SET value = ? WHERE key = ?", (value, key))
    assert raw_sql(path, "SELECT value FROM setting WHERE key = ?", (key,)) == [(value,)]


@pytest.mark.parametrize(
    "chunking",
    [
        # fixed sizes no writer accepts: one would store records no reader decodes
        '{"algorithm": "fixed", "size": 1073741824}',
        '{"algorithm": "fixed", "size": 268435457}',
        '{"algorithm": "fixed", "size": 1024}',
        # valid small tier, impossible large tier (max_size x 32 over pyfastcdc's range)
        '{"algorithm": "fastcdc2020-gear0", "avg_size": 8192, "max_size": 1048576,'
        ' "min_size": 2048, "normalization": 1, "single_chunk_threshold": 16384}',
    ],
)
def test_a_chunking_setting_no_writer_makes_is_refused_when_the_file_opens(
    workdir: Path, chunking: str
) -> None:
    path = workdir / "db.ckpt"
    with ckptdb.open(path, chunk_size=MIN_CHUNK) as db:
        db.commit("n", {"a": b"x"})
    _set_setting(path, "chunking", chunking)
    before = file_digest(path)
    for readonly in (True, False):
        with pytest.raises(errors.CorruptionError) as info:
            ckptdb.open(path, readonly=readonly)
        assert info.value.details.get("reason") == "bad_setting"
        assert "chunking" in info.value.message
    assert file_digest(path) == before


@pytest.mark.parametrize("stored", [str(MIN_CHUNK - 1), str(MAX_CHUNK + 1), "0", "4MiB"])
def test_a_chunk_size_setting_no_writer_makes_is_refused_when_the_file_opens(
    workdir: Path, stored: str
) -> None:
    path = workdir / "db.ckpt"
    with ckptdb.open(path) as db:
        db.commit("n", {"a": b"x"})
    _set_setting(path, "chunk_size", stored)
    with pytest.raises(errors.CorruptionError) as info:
        ckptdb.open(path, readonly=True)
    assert info.value.details.get("reason") == "bad_setting"


# -- page_size -------------------------------------------------------------------------------


@pytest.mark.parametrize("page_size", [4096, 8192, 16384, 32768, 65536])
def test_every_accepted_page_size_reads_back(workdir: Path, page_size: int) -> None:
    path = workdir / "db.ckpt"
    values = {"a": _compressible(300_000), "b": b"small"}
    with ckptdb.open(path, page_size=page_size) as db:
        db.commit("n", values)
    assert raw_sql(path, "PRAGMA page_size") == [(page_size,)]
    _read_everything_back(path, "n", values, limits.DEFAULT_CHUNK_BYTES)


@pytest.mark.parametrize("page_size", [2048, 4097, 131072, 0, True, 4096.0, "4096"])
def test_page_size_outside_the_range_is_refused_and_nothing_is_created(
    workdir: Path, page_size: object
) -> None:
    path = workdir / "db.ckpt"
    with pytest.raises(errors.InvalidInputError) as info:
        ckptdb.open(path, page_size=page_size)  # type: ignore[arg-type]
    assert "page_size" in info.value.message
    assert not path.exists()


# -- metadata: what a handle accepts, every reader (import included) takes --------------------


def _metadata_of_exactly(size: int) -> dict[str, str]:
    """Metadata whose canonical JSON is exactly ``size`` bytes (``{}`` below 8 bytes)."""
    overhead = len('{"m":""}')
    if size < overhead:
        return {}
    return {"m": "x" * (size - overhead)}


@settings(max_examples=3, deadline=None, database=None)
@given(limit=st.integers(limits.MIN_METADATA_BYTES, 4 * MIB))
@example(limit=limits.MIN_METADATA_BYTES)
@example(limit=validation.DEFAULT_MAX_METADATA_BYTES)
def test_accepted_metadata_limits_read_back_through_export_and_import(limit: int) -> None:
    """A handle's ``max_metadata_bytes``: metadata of exactly the limit commits, loads,
    exports and imports (the importer checks metadata against its own bound); one byte more
    is refused with nothing written. (The top of the range, 64 MiB, costs ~20 s end to end
    here; the next test holds both checks to it directly.)"""
    path = _new_path()
    try:
        meta = _metadata_of_exactly(limit)
        with ckptdb.open(path, max_metadata_bytes=limit) as db:
            ack = db.commit("n", {"a": b"x"}, metadata=meta)
            over = {"m": "x" * (limit - len('{"m":""}') + 1)} if limit >= 8 else {"m": ""}
            with pytest.raises(errors.InvalidMetadataError):
                db.commit("n", {"a": b"y"}, metadata=over)
            assert db.load("n").checkpoint.id == ack.checkpoint_id  # nothing written
            db.export(path.parent / "export.ckpt")
        with ckptdb.open(path.parent / "import.ckpt") as dst:
            dst.import_file(path.parent / "export.ckpt")
            cp = dst.load("n").checkpoint
            assert cp.id == ack.checkpoint_id
            assert cp.metadata == meta
    finally:
        _cleanup(path)


def test_the_largest_metadata_a_handle_accepts_is_what_import_accepts() -> None:
    """The writer's check (at the largest ``max_metadata_bytes`` open accepts) and the
    importer's check of stored metadata take the same largest text, and refuse one more."""
    top = limits.MAX_METADATA_BYTES
    ckptdb_open_accepts = validation.max_metadata_bytes(top)
    text = validation.metadata(_metadata_of_exactly(top), ckptdb_open_accepts)
    assert len(text.encode()) == top
    assert export_check._metadata_ok(text) is None
    over = text[:-2] + 'x"}'
    assert export_check._metadata_ok(over) is not None
    with pytest.raises(errors.InvalidInputError):
        validation.max_metadata_bytes(top + 1)


@pytest.mark.parametrize(
    "value", [limits.MAX_METADATA_BYTES + 1, 2**62, 1, 0, -1, True, 1024.0, "256KiB", None]
)
def test_max_metadata_bytes_outside_the_range_is_refused_and_nothing_is_created(
    workdir: Path, value: object
) -> None:
    """A limit above the format's would let a commit store metadata that import refuses; a
    limit below two bytes would refuse every commit. Both are refused at open, typed."""
    path = workdir / "db.ckpt"
    with pytest.raises(errors.InvalidInputError) as info:
        ckptdb.open(path, max_metadata_bytes=value)  # type: ignore[arg-type]
    assert "max_metadata_bytes" in info.value.message
    assert not path.exists()


# -- names: the longest the writer takes is read back and checked out ------------------------


def test_the_longest_names_read_back_and_check_out(workdir: Path) -> None:
    path = workdir / "db.ckpt"
    segment = "\u00e9" * 127 + "s"  # 255 UTF-8 bytes: the longest segment
    name = "/".join([segment] * 7)
    name = name + "/" + "n" * (validation.MAX_NAME_CHARS - len(name) - 1)
    assert len(name) == validation.MAX_NAME_CHARS
    assert len(segment.encode()) == validation.MAX_NAME_SEGMENT_BYTES
    namespace = "N" * validation.MAX_NAMESPACE_CHARS
    with ckptdb.open(path, keys=KEYS) as db:
        db.set_encryption("N", key_id="k")
        db.commit(namespace, {name: b"deep"})
    with ckptdb.open(path, keys=KEYS) as db:
        assert db.load(namespace).checkpoint.read(name) == b"deep"
        db.checkout(namespace + "@current", workdir / "out")
    assert (workdir / "out" / name).read_bytes() == b"deep"
    for too_long in (name + "x", segment + "x"):
        with ckptdb.open(path) as db, pytest.raises(errors.InvalidNameError):
            db.commit("plain", {too_long: b"x"})
