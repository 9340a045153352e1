"""Digests of large blobs: their chunk digests kept compactly, and the whole-blob hash
computed on a helper thread while the caller works on the chunks."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import overload

from .crypto import PLAINTEXT, Scope

#: Buffers queued for the whole-blob hash at most (memory stays bounded if it falls behind).
_HASH_WINDOW = 32


class DigestList(Sequence[str]):
    """Hex sha256 digests kept as 32 raw bytes each: the chunk list of a 1 GiB blob cut
    into 8 KiB chunks has ~130,000 of them, which as Python strings would cost ~15 MB."""

    __slots__ = ("_raw",)

    def __init__(self, digests: Iterable[str] = ()) -> None:
        self._raw = bytearray()
        for digest in digests:
            self.append(digest)

    def append(self, digest: str) -> None:
        """Add one hex digest at the end."""
        self._raw += bytes.fromhex(digest)

    def __len__(self) -> int:
        return len(self._raw) // 32

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._raw[32 * index : 32 * index + 32].hex()

    def __iter__(self) -> Iterator[str]:
        raw = self._raw
        for start in range(0, len(raw), 32):
            yield raw[start : start + 32].hex()


class BackgroundHash:
    """sha256 over a sequence of buffers, updated in order on a helper thread.

    The whole-blob digest of a chunked blob is computed while the caller hashes each
    chunk and SQLite reads or writes it (hashlib and SQLite both release the GIL), so a
    large entry is hashed twice -- per chunk and whole -- in about the time of once.
    A buffer handed to :meth:`update` must not change until its future is done.
    """

    def __init__(self, scope: Scope = PLAINTEXT) -> None:
        self._hash = scope.hasher()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptdb-hash")
        # One worker runs the updates in order. A bounded window of futures keeps memory
        # bounded if the hashing falls behind (each queued buffer is held until hashed).
        self._window: deque[Future[None]] = deque()

    def update(self, data: bytes | memoryview) -> Future[None]:
        """Queue ``data``; returns the future to wait on before reusing its buffer."""
        future = self._pool.submit(self._hash.update, data)
        self._window.append(future)
        while len(self._window) > _HASH_WINDOW:
            self._window.popleft().result()
        return future

    def hexdigest(self) -> str:
        """The digest of everything queued (waits for it)."""
        if self._window:
            self._window[-1].result()
            self._window.clear()
        return self._hash.hexdigest()

    def close(self) -> None:
        """Stop the helper thread (after the queued work)."""
        self._pool.shutdown(wait=True)
