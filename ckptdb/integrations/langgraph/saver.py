"""``CkptdbSaver`` / ``AsyncCkptdbSaver``: LangGraph checkpointers on a ckptdb file.

The saver is assembled from parts, one job each (see :mod:`._core` for the list and the
storage layout): the LangGraph methods live in :mod:`.reads` (``get_tuple``, ``list``),
:mod:`.writes` (``put``, ``put_writes``), :mod:`.delta` (``get_delta_channel_history``),
:mod:`.maintenance` (delete, prune), :mod:`.copying` (``copy_thread``), :mod:`.expiry`
(threads that expire: ``sweep_expired``) and :mod:`.aio` (the async twins).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ...database import Database
from ._core import migrations_dir
from .aio import AsyncTwins

__all__ = ["AsyncCkptdbSaver", "CkptdbSaver", "migrations_dir"]


class CkptdbSaver(AsyncTwins):
    """A LangGraph checkpointer storing its checkpoints in a ckptdb database file.

    ``db`` is a path (the file is created 0600 if missing, with ``page_size``, default
    ckptdb's, and closed by :meth:`close`) or an open :class:`ckptdb.Database` (left open). The
    integration's tables are created or upgraded on construction (migration set
    ``langgraph``). ``serde`` must be LangGraph's ``JsonPlusSerializer`` with pickle
    disabled (the default), optionally wrapped in an ``EncryptedSerializer``.

    Channel values whose serialized form is larger than ``inline_max`` bytes are stored as
    content-addressed blobs of their own; smaller ones inline (see :mod:`._layout`).
    ``gc_grace_seconds`` is the grace period passed to ckptdb's GC by :meth:`prune`
    (it only delays freeing staged chunks of values larger than the file's chunk size).

    ``ttl``: a :class:`~.ttl.ThreadTTL` -- threads not used within its ``default_ttl`` are
    deleted or pruned to their newest checkpoint by a background sweeper the saver starts
    (every ``sweep_interval``; stopped by :meth:`close`) and by :meth:`sweep_expired`.
    Whatever the setting, every put records when its thread was last active.

    Every method has an async twin (``aget_tuple``, ``alist``, ...) that runs it in a worker
    thread; a ckptdb handle is safe to share between threads.
    """


class AsyncCkptdbSaver(CkptdbSaver):
    """The async counterpart of :class:`CkptdbSaver`, for code running in an event loop.

    Create it with ``await AsyncCkptdbSaver.open(path)`` (the file is opened and migrated
    in a worker thread, so the loop is never blocked) or ``AsyncCkptdbSaver(db)`` for an
    open database, and close it with ``await saver.aclose()`` or ``async with``. Every
    ``a*`` method runs in a worker thread; the sync methods work too.
    """

    @classmethod
    async def open(cls, db: Database | str | os.PathLike[str], **options: Any) -> AsyncCkptdbSaver:
        """Construct without blocking the event loop (same arguments as the class)."""
        factory: Callable[[], AsyncCkptdbSaver] = lambda: cls(db, **options)  # noqa: E731
        return await asyncio.to_thread(factory)

    async def aclose(self) -> None:
        """Close the database if the saver opened it."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> AsyncCkptdbSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
