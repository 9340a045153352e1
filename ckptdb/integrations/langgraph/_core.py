"""The state every part of the LangGraph checkpointer shares (see :mod:`.saver`).

Storage (see :mod:`._layout`): each ``(thread_id, checkpoint_ns)`` pair is a ckptdb namespace
whose lineage follows LangGraph's parent links; each LangGraph checkpoint is one ckptdb
checkpoint whose channel values are content-addressed blobs, so an unchanged channel is
never stored twice. The integration's own tables (migration set ``langgraph``) map
LangGraph checkpoint ids to ckptdb ids, hold pending writes and when each thread was last
active (:mod:`.activity`, for a TTL); the mapping row is written
in the checkpoint's own commit transaction (``commit(on_publish=...)``), pending writes in
``write_session()`` transactions (``BEGIN IMMEDIATE``), so several processes, each with its
own saver on one file, queue for the write lock instead of failing with "database is
locked".

Reads of core data go through the public API only (``Database.get``, ``Checkpoint.read``,
``pointer``, ``lineage``); SQL runs only on the integration's own tables.

The saver is assembled from one-job parts on top of :class:`SaverCore`: :mod:`.threads`
(which namespace and key scope a thread has), :mod:`.pending` (pending writes, sealed and
checked), :mod:`.content` (verified checkpoint content), :mod:`.publish` (the commit of one
LangGraph checkpoint, with its retries), then the LangGraph methods in :mod:`.reads`,
:mod:`.writes`, :mod:`.delta`, :mod:`.maintenance`, :mod:`.copying` and :mod:`.expiry`.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Callable
from importlib.resources import files
from types import TracebackType
from typing import Any, Self

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol

from ... import Database, errors
from ... import open as open_database
from . import _layout, activity, sealing
from ._cache import SaverCache
from .serialization import checked_serde
from .ttl import Sweeper, ThreadTTL

log = logging.getLogger(__name__)

MIGRATION_SET = "langgraph"
#: Which key encrypts a thread: one key id for every thread, or a function from a thread's
#: config to its key id (None: that thread is not encrypted).
Encryption = str | Callable[[RunnableConfig], "str | None"] | None


#: Whether the integration's tables exist, per engine (a read-only open does not create them).
HAS_TABLES_SQL = {
    "sqlite": "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'lg_checkpoint'",
    "postgresql": "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname ="
    " current_schema() AND tablename = 'lg_checkpoint'",
}


def migrations_dir() -> Any:
    """The integration's migration set, shipped inside the package."""
    return files(__package__) / "migrations"


class SaverCore(BaseCheckpointSaver[str]):
    """What every part of the saver shares: the database, the serializer, the settings,
    the one cache, and what the file's schema version allows."""

    def __init__(
        self,
        db: Database | str | os.PathLike[str],
        *,
        serde: SerializerProtocol | None = None,
        inline_max: int = _layout.DEFAULT_INLINE_MAX,
        busy_timeout: float | None = 30.0,
        page_size: int | None = None,
        gc_grace_seconds: float | None = None,
        encryption: Encryption = None,
        ttl: ThreadTTL | None = None,
    ) -> None:
        super().__init__(serde=checked_serde(serde))
        if ttl is not None and not isinstance(ttl, ThreadTTL):
            raise errors.InvalidInputError(
                f"ttl must be a ThreadTTL or None, got {type(ttl).__name__}"
            )
        self.ttl = ttl
        # How long this saver lets a thread's recorded activity lag (see ThreadTTL).
        self._refresh_ms = activity.UNSET_REFRESH_MS if ttl is None else ttl.refresh_ms
        # Whether the file has lg_thread: not when opened read-only before version 4.
        self._has_activity = True
        self._sweeper: Sweeper | None = None  # the background sweeper, when one runs
        self._sweep_lock = threading.Lock()  # one sweep of this saver at a time
        if not (encryption is None or isinstance(encryption, str) or callable(encryption)):
            raise errors.InvalidInputError(
                "encryption must be a key id (str), a function config -> key id, or None"
            )
        self._encryption = encryption
        if not isinstance(inline_max, int) or isinstance(inline_max, bool) or inline_max < 0:
            raise errors.InvalidInputError("inline_max must be an int >= 0")
        self.inline_max = inline_max
        self.gc_grace_seconds = gc_grace_seconds
        self._cache = SaverCache()
        # Whether a pending write without a digest is accepted: only while rows written
        # before schema version 2 are not sealed yet (see .sealing), i.e. on a file opened
        # read-only before a read-write open sealed them.
        self._unsealed_ok = False
        self._digest_sql = "digest"
        # Whether pairs of a file written before langgraph schema version 3 still share a
        # namespace with another pair (see Maintenance.separate_shared_namespaces).
        self._shared_pending = False
        # Keys of lg_meta when the saver opened read-write: upgrade steps left to finish.
        self._markers: set[str] = set()
        # Which engine the database is on (set by _setup): a few statements differ.
        self._dialect = "sqlite"
        if isinstance(db, Database):
            self.db = db
            self._owns_db = False
        elif isinstance(db, str | os.PathLike):
            self.db = open_database(db, busy_timeout=busy_timeout, page_size=page_size)
            self._owns_db = True
        else:
            raise errors.InvalidInputError(
                f"db must be a path or a ckptdb.Database, got {type(db).__name__}"
            )
        self._clock = self.db.clock  # read on every put: the handle's one clock, held once
        try:
            self._setup()
        except BaseException:
            if self._owns_db:
                self.db.close()
            raise

    def _setup(self) -> None:
        if not self.db.readonly:
            self.db.apply_migration_set(MIGRATION_SET, migrations_dir())
            # The markers of unfinished upgrade steps, read once for every part's _setup.
            with self.db.read_session(snapshot=False) as s:
                self._dialect = s.dialect
                self._markers = {str(r[0]) for r in s.execute("SELECT key FROM lg_meta")}
            if sealing.UNSEALED_MARKER in self._markers:
                with self.db.write_session() as s:
                    sealed = sealing.backfill(s)
                log.info("sealed %d pending writes written before schema version 2", sealed)
            return
        with self.db.read_session() as s:
            self._dialect = s.dialect
            found = s.scalar(HAS_TABLES_SQL[s.dialect])
            version = sealing.set_version(s) if found else 0
            if version >= sealing.SEALED_VERSION:
                self._unsealed_ok = sealing.unsealed_pending(s)
        self._has_activity = version >= activity.ACTIVITY_VERSION
        if not found:
            raise errors.MigrationPendingError(
                f"{self.db.path} has no LangGraph tables yet and was opened read-only; open it "
                "read-write once (CkptdbSaver(path)) to create them"
            )
        if version < sealing.SEALED_VERSION:
            # An older file opened read-only: its writes have no digest column yet.
            self._unsealed_ok = True
            self._digest_sql = "NULL"

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database if the saver opened it (idempotent)."""
        if self._owns_db:
            self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _activity_due(self, thread_id: str) -> int | None:
        """The time to record as the thread's latest activity (the clock's now), or None
        when this saver recorded it less than its refresh interval ago."""
        now = self._clock()
        last = self._cache.touched(thread_id)
        if last is not None and 0 <= now - last < self._refresh_ms:
            return None
        return now

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The next channel version: a zero-padded counter plus a random fraction, the
        format of LangGraph's SQLite and Postgres savers (so imported threads continue)."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"  # noqa: S311 - not security
