"""Content-defined chunking (CDC) of blobs: where a blob is cut into the chunks it is stored as.

A blob above :attr:`ChunkParams.single_chunk_threshold` bytes is cut with FastCDC (the 2020
variant of Xia et al., "The Design of Fast Content-Defined Chunking for Data Deduplication
Based Storage Systems", gear hash rolled two bytes at a time, normalized chunking), as
implemented by the ``pyfastcdc`` package (Cython, GIL released while cutting). Cut points
depend only on the bytes near them, so a blob that gained, lost or changed a few bytes shares
every chunk away from the edit with its previous version, wherever the edit is.

Dedup across versions needs *identical* cut points, so the parameters are a per-file
setting, written once when the file is created (:meth:`ChunkParams.to_settings`) and read
back for every later write (:meth:`ChunkParams.from_settings`). The algorithm itself is
pinned by name (:data:`ALGORITHM`) and by golden vectors in ``tests/test_chunking.py``: an
upgrade of ``pyfastcdc`` that moved a single cut point fails that test instead of silently
halving the dedup of every existing file.

Two entry points cut the same way (tested):

* :func:`cut` -- a blob in memory; yields zero-copy ``memoryview`` slices of it;
* :func:`cut_stream` -- a binary stream (``readinto`` or ``read``); yields ``bytes`` and
  holds at most ``2 * max_size`` bytes of buffer, whatever the stream's length.

Thread-safety: every function may be called from any number of threads at once. The
``pyfastcdc.FastCDC`` object (a gear table plus the sizes; documented as not safe for
concurrent use) is cached per thread; each call gets its own cutting iterator. The cutting
loop releases the GIL, so two threads cut two blobs on two cores.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyfastcdc

from .. import limits
from ..errors import InvalidInputError

#: The name of the cutting algorithm, recorded with the parameters in every file. A
#: different algorithm (or a pyfastcdc whose cuts moved) must get a new name, never reuse
#: this one: files already written depend on these exact cut points.
ALGORITHM = "fastcdc2020-gear0"

# pyfastcdc's own limits (its constructor rejects values outside them).
_MIN_SIZE_RANGE = (64, 1 << 20)
_AVG_SIZE_RANGE = (256, 4 << 20)
_MAX_SIZE_RANGE = (1024, 16 << 20)
_NORMALIZATION_LEVELS = (0, 1, 2, 3)


class InvalidChunkParamsError(InvalidInputError):
    """Chunking parameters are out of range, inconsistent, or name an unknown algorithm.

    Defined here until the store layer settles; it belongs in :mod:`ckptdb.errors`."""

    code = "invalid_chunk_params"


class _Readable(Protocol):
    def read(self, n: int = ..., /) -> bytes: ...


@dataclass(frozen=True, slots=True)
class ChunkParams:
    """One file's chunking parameters (validated on construction; immutable).

    ``min_size`` / ``avg_size`` / ``max_size``: FastCDC's sizes in bytes. No chunk is longer
    than ``max_size``; only a blob's last chunk may be shorter than ``min_size``. As in
    the FastCDC paper (3.4, "cut-point skipping"), the mean chunk is about
    ``avg_size + min_size`` (the mask is tested only after ``min_size`` bytes).
    ``normalization``: FastCDC's normalized-chunking level (0-3); higher gives a tighter
    spread of sizes around the mean.
    ``single_chunk_threshold``: a blob shorter than this is stored as one chunk without
    running the cutter (small commits pay nothing; a blob of a few chunks gains little).
    """

    min_size: int
    avg_size: int
    max_size: int
    normalization: int = 1
    single_chunk_threshold: int = 16 * 1024
    algorithm: str = ALGORITHM

    def __post_init__(self) -> None:
        for name in ("min_size", "avg_size", "max_size", "normalization"):
            value = getattr(self, name)
            if type(value) is not int:
                raise InvalidChunkParamsError(
                    f"chunking parameter {name} must be an int, not {type(value).__name__}",
                    parameter=name,
                )
        if type(self.single_chunk_threshold) is not int:
            raise InvalidChunkParamsError(
                "chunking parameter single_chunk_threshold must be an int",
                parameter="single_chunk_threshold",
            )
        if self.algorithm != ALGORITHM:
            raise InvalidChunkParamsError(
                f"unknown chunking algorithm {self.algorithm!r} (this ckptdb knows "
                f"{ALGORITHM!r}); the file was written by another version of ckptdb",
                parameter="algorithm",
            )
        for name, (lo, hi) in (
            ("min_size", _MIN_SIZE_RANGE),
            ("avg_size", _AVG_SIZE_RANGE),
            ("max_size", _MAX_SIZE_RANGE),
        ):
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise InvalidChunkParamsError(
                    f"chunking parameter {name}={value} is outside [{lo}, {hi}]",
                    parameter=name,
                )
        # FastCDC derives its masks from log2(avg_size): only a power of two means what it
        # says, and a non-power would round silently.
        if self.avg_size & (self.avg_size - 1):
            raise InvalidChunkParamsError(
                f"avg_size={self.avg_size} must be a power of two", parameter="avg_size"
            )
        if not self.min_size < self.avg_size < self.max_size:
            raise InvalidChunkParamsError(
                f"chunk sizes must satisfy min_size < avg_size < max_size, got "
                f"{self.min_size} / {self.avg_size} / {self.max_size}",
                parameter="sizes",
            )
        if self.normalization not in _NORMALIZATION_LEVELS:
            raise InvalidChunkParamsError(
                f"normalization={self.normalization} must be one of {_NORMALIZATION_LEVELS}",
                parameter="normalization",
            )
        # A single chunk must still respect max_size (the row-size bound the store relies on).
        if not 0 <= self.single_chunk_threshold <= self.max_size:
            raise InvalidChunkParamsError(
                f"single_chunk_threshold={self.single_chunk_threshold} must be within "
                f"[0, max_size={self.max_size}]",
                parameter="single_chunk_threshold",
            )

    def to_settings(self) -> dict[str, Any]:
        """The parameters as a JSON-ready mapping, for the file's settings (written once)."""
        return {
            "algorithm": self.algorithm,
            "min_size": self.min_size,
            "avg_size": self.avg_size,
            "max_size": self.max_size,
            "normalization": self.normalization,
            "single_chunk_threshold": self.single_chunk_threshold,
        }

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ChunkParams:
        """Parameters read back from a file's settings; an unknown, missing or extra key is
        refused (an :class:`InvalidChunkParamsError`), never guessed."""
        if not isinstance(settings, Mapping):
            raise InvalidChunkParamsError("chunking settings must be a mapping")
        expected = {
            "algorithm",
            "min_size",
            "avg_size",
            "max_size",
            "normalization",
            "single_chunk_threshold",
        }
        keys = set(settings)
        if keys != expected:
            raise InvalidChunkParamsError(
                f"chunking settings have keys {sorted(keys)}, expected {sorted(expected)}",
                missing=sorted(expected - keys),
                extra=sorted(str(k) for k in keys - expected),
            )
        return cls(
            min_size=settings["min_size"],
            avg_size=settings["avg_size"],
            max_size=settings["max_size"],
            normalization=settings["normalization"],
            single_chunk_threshold=settings["single_chunk_threshold"],
            algorithm=settings["algorithm"],
        )


#: The defaults for a new file (chosen by ``tools/bench_chunking.py``; see its report):
#: small enough that a 300 KB growing list stores a few KB per version, large enough that
#: a 1 GiB file is ~95k chunks, not hundreds of thousands of rows.
DEFAULT_PARAMS = ChunkParams(min_size=2 * 1024, avg_size=8 * 1024, max_size=64 * 1024)

_local = threading.local()


def _cutter(params: ChunkParams) -> pyfastcdc.FastCDC:
    """This thread's FastCDC object for ``params`` (built once per thread and parameter set)."""
    cache: dict[ChunkParams, pyfastcdc.FastCDC] | None = getattr(_local, "cutters", None)
    if cache is None:
        cache = _local.cutters = {}
    cutter = cache.get(params)
    if cutter is None:
        if len(cache) > 16:  # a process uses one or two parameter sets; never grow unbounded
            cache.clear()
        cutter = cache[params] = pyfastcdc.FastCDC(
            params.avg_size,
            min_size=params.min_size,
            max_size=params.max_size,
            normalized_chunking=params.normalization,  # type: ignore[arg-type]
            seed=0,  # the reference gear table; part of ALGORITHM
        )
    return cutter


def cut(
    data: bytes | bytearray | memoryview, params: ChunkParams = DEFAULT_PARAMS
) -> Iterator[memoryview]:
    """Cut a blob in memory into chunks: zero-copy slices of ``data``, in order, whose
    concatenation is ``data``. An empty blob yields one empty chunk (a blob always has at
    least one chunk, so an empty blob still has a row to point at)."""
    view = memoryview(data).cast("B")
    if len(view) < params.single_chunk_threshold or len(view) == 0:
        yield view
        return
    for chunk in _cutter(params).cut_buf(view):
        yield chunk.data


def chunk_lengths(
    data: bytes | bytearray | memoryview, params: ChunkParams = DEFAULT_PARAMS
) -> list[int]:
    """The lengths of the chunks :func:`cut` yields (cut points without the bytes)."""
    return [len(c) for c in cut(data, params)]


class _Prefixed:
    """A reader that first returns ``prefix``, then reads from ``stream``: lets
    :func:`cut_stream` peek at the threshold's worth of bytes and still cut from offset 0."""

    def __init__(self, prefix: bytes, stream: _Readable) -> None:
        self._prefix = memoryview(prefix)
        self._stream = stream

    def readinto(self, buf: memoryview) -> int:
        if self._prefix:
            n = min(len(buf), len(self._prefix))
            buf[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._stream.read(len(buf))
        buf[: len(data)] = data
        return len(data)


def _read_exactly(stream: _Readable, n: int) -> bytes:
    """Up to ``n`` bytes, fewer only at end of stream (short reads are retried)."""
    parts: list[bytes] = []
    got = 0
    while got < n:
        part = stream.read(n - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def cut_stream(stream: _Readable, params: ChunkParams = DEFAULT_PARAMS) -> Iterator[bytes]:
    """Cut a binary stream into chunks, yielding each as ``bytes``: the same chunks
    :func:`cut` gives for the stream's whole content, with memory bounded by the parameters
    (``pyfastcdc`` keeps one ``2 * max_size`` buffer; each chunk is copied out of it once,
    since that buffer is reused for the next chunk). ``stream`` needs ``read(n)``; short
    reads are fine. The stream is read to its end."""
    # Peek at least one byte, so a threshold of 0 still tells an empty stream from one
    # that must be cut.
    head = _read_exactly(stream, max(params.single_chunk_threshold, 1))
    if len(head) < params.single_chunk_threshold or not head:
        yield head
        return
    for chunk in _cutter(params).cut_stream(_Prefixed(head, stream)):
        yield bytes(chunk.data)


# -- the chunker a file uses ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FixedChunker:
    """Fixed-size cutting (storage format 1, and files created with an explicit
    ``chunk_size``): a blob of at most ``size`` bytes is kept whole. ``size`` must be a
    chunk size the format accepts (:data:`ckptdb.limits.MIN_CHUNK_BYTES` to
    :data:`ckptdb.limits.MAX_CHUNK_BYTES`), whether a caller chose it or a file's
    settings name it: a larger one would store records no reader decodes."""

    size: int
    #: blobs at most this long are stored whole, inline in their blob row (an attribute:
    #: every commit reads it)
    inline_limit: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if type(self.size) is not int or not (
            limits.MIN_CHUNK_BYTES <= self.size <= limits.MAX_CHUNK_BYTES
        ):
            raise InvalidChunkParamsError(
                f"a fixed chunk size must be a whole number of bytes from "
                f"{limits.MIN_CHUNK_BYTES} to {limits.MAX_CHUNK_BYTES}, got {self.size!r}",
                parameter="size",
            )
        object.__setattr__(self, "inline_limit", self.size)

    @property
    def max_record(self) -> int:
        """The largest raw record (a whole blob or a chunk) this chunker makes."""
        return self.size

    @property
    def whole_limit(self) -> int:
        """A stream up to this long is read whole and cut like bytes in memory."""
        return self.size

    def cut(self, data: bytes | bytearray | memoryview) -> Iterator[memoryview]:
        """Slices of ``size`` bytes (the last one shorter)."""
        view = memoryview(data).cast("B")
        for start in range(0, max(len(view), 1), self.size):
            yield view[start : start + self.size]

    def cut_stream(self, stream: _Readable) -> Iterator[bytes]:
        """The same pieces from a stream, one piece in memory at a time."""
        while True:
            piece = _read_exactly(stream, self.size)
            if piece:
                yield piece
            if len(piece) < self.size:
                return

    def settings(self) -> dict[str, Any]:
        """The ``chunking`` setting that records this chunker."""
        return {"algorithm": "fixed", "size": self.size}


#: Blobs larger than this are cut with the large tier (see :class:`ContentChunker`).
LARGE_TIER_BYTES = 4 * 1024 * 1024
#: The large tier's sizes are the file's sizes times this (a fixed part of the algorithm:
#: changing it would move every cut point of every large blob).
LARGE_TIER_FACTOR = 32


def large_tier(params: ChunkParams) -> ChunkParams:
    """The parameters of the large tier, derived from a file's recorded parameters."""
    return ChunkParams(
        min_size=params.min_size * LARGE_TIER_FACTOR,
        avg_size=params.avg_size * LARGE_TIER_FACTOR,
        max_size=params.max_size * LARGE_TIER_FACTOR,
        normalization=params.normalization,
        single_chunk_threshold=0,
        algorithm=params.algorithm,
    )


@dataclass(frozen=True, slots=True)
class ContentChunker:
    """Content-defined cutting with :class:`ChunkParams`: an edit changes only the chunks
    around it, so a blob that grew or changed a little shares every other chunk with its
    previous version.

    Two tiers, chosen by the blob's length alone (so the same content is always cut the
    same way): a blob of up to :data:`LARGE_TIER_BYTES` with the file's parameters (8 KiB
    chunks by default: a growing list shares all but a few KiB per version), a larger one
    with sizes :data:`LARGE_TIER_FACTOR` times larger (256 KiB by default: a 1 GiB file is
    ~4,000 chunks instead of ~130,000, and a 1 MiB edit still costs ~1.3 MiB). A blob that
    crosses the boundary shares nothing with its previous version, once.
    """

    params: ChunkParams
    #: blobs shorter than the threshold are stored whole, inline in their blob row
    inline_limit: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inline_limit", max(self.params.single_chunk_threshold - 1, 0))
        # Parameters valid for the small tier can derive an impossible large tier (e.g.
        # max_size above 512 KiB): the file would take small blobs and refuse every large
        # one at commit time. Refused here instead, where a file's settings are read.
        large_tier(self.params)
        if self.max_record > limits.MAX_RECORD_BYTES:
            raise InvalidChunkParamsError(
                f"chunking parameters {self.params.to_settings()} make chunks larger than "
                f"the format's {limits.MAX_RECORD_BYTES} bytes",
                parameter="max_size",
            )

    @property
    def max_record(self) -> int:
        """The largest raw record (a whole blob or a chunk) this chunker makes: a chunk
        of the large tier (an inline blob is below the threshold, at most ``max_size``)."""
        return max(self.params.max_size * LARGE_TIER_FACTOR, self.inline_limit)

    @property
    def whole_limit(self) -> int:
        """A stream up to this long is read whole and cut like bytes in memory (so the
        tier it falls in is the one its length says)."""
        return LARGE_TIER_BYTES

    def cut(self, data: bytes | bytearray | memoryview) -> Iterator[memoryview]:
        """Content-defined chunks of ``data`` (zero-copy), in its length's tier."""
        if len(data) > LARGE_TIER_BYTES:
            return cut(data, large_tier(self.params))
        return cut(data, self.params)

    def cut_stream(self, stream: _Readable) -> Iterator[bytes]:
        """Content-defined chunks of a stream known to be longer than
        :data:`LARGE_TIER_BYTES` (the large tier), memory bounded by the parameters."""
        return cut_stream(stream, large_tier(self.params))

    def settings(self) -> dict[str, Any]:
        """The ``chunking`` setting that records this chunker."""
        return self.params.to_settings()


Chunker = FixedChunker | ContentChunker


def chunker_from_settings(value: Mapping[str, Any]) -> Chunker:
    """The chunker a file's ``chunking`` setting names (InvalidChunkParamsError otherwise)."""
    if not isinstance(value, Mapping):
        raise InvalidChunkParamsError("the chunking setting must be a JSON object")
    if value.get("algorithm") == "fixed":
        if set(value) != {"algorithm", "size"}:
            raise InvalidChunkParamsError(f"invalid fixed chunking setting {dict(value)!r}")
        return FixedChunker(value["size"])
    return ContentChunker(ChunkParams.from_settings(value))
