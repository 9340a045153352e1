"""Byte progress for operations that read or write entry bytes (commit, checkout, export,
import, verify): ``progress(done_bytes, total_bytes)`` callbacks, never printing."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Mapping
from typing import IO, Any

from .. import errors
from ..types import Addressed, BlobRef, Entry, Progress


def _size_of(value: Any) -> int | None:
    if isinstance(value, Entry):
        value = value.value
    if isinstance(value, BlobRef):
        return 0  # re-used without reading a byte
    if isinstance(value, Addressed):
        return len(value.data)
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, os.PathLike):
        try:
            return os.stat(value, follow_symlinks=False).st_size
        except OSError:
            return None
    return None  # a stream: counted as it is read


class CommitBytes:
    """Counts the bytes a commit hashes and stages, against the sizes known up front (an
    entry given as a stream adds what it turns out to hold)."""

    def __init__(self, progress: Progress, entries: Mapping[str, Any]) -> None:
        self._progress = progress
        self._known = {name: _size_of(value) for name, value in entries.items()}
        self._total = sum(s for s in self._known.values() if s is not None)
        self._done = 0
        self._current = 0

    def read(self, n: int) -> None:
        """``n`` more bytes of the current entry were read."""
        self._current += n
        done = self._done + self._current
        self._progress(done, max(self._total, done))

    def entry_done(self, name: str, size: int) -> None:
        """An entry is prepared: its real size replaces what was known up front."""
        known = self._known.get(name)
        self._total += size - (known or 0)
        self._done += size
        self._current = 0
        self._progress(self._done, max(self._total, self._done))


class CountingReader(io.RawIOBase):
    """A binary stream that reports every byte read from the stream it wraps."""

    def __init__(
        self,
        source: IO[bytes] | io.RawIOBase,
        on_bytes: Callable[[int], None],
        *,
        owns: bool = False,
    ) -> None:
        super().__init__()
        self._source = source
        self._on_bytes = on_bytes
        self._owns = owns

    def close(self) -> None:
        """Close; the wrapped stream too when this reader owns it."""
        if self._owns and not self.closed:
            self._source.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        readinto = getattr(self._source, "readinto", None)
        if readinto is not None:
            got = readinto(buffer)
        else:
            view = memoryview(buffer).cast("B")
            data = self._source.read(len(view))
            if data is None:
                return None
            if not isinstance(data, bytes | bytearray | memoryview):
                raise errors.InvalidEntryError(
                    "entry stream returned str; open files in binary mode ('rb')"
                )
            got = len(data)
            view[:got] = data
        if got:
            self._on_bytes(got)
        return got  # type: ignore[no-any-return]
