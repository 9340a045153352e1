"""``CkptdbSaver`` / ``AsyncCkptdbSaver``: LangGraph checkpointers on a ckptdb file.

Storage (see :mod:`._layout`): each ``(thread_id, checkpoint_ns)`` pair is a ckptdb namespace
whose lineage follows LangGraph's parent links; each LangGraph checkpoint is one ckptdb
checkpoint whose channel values are content-addressed blobs, so an unchanged channel is
never stored twice. The integration's own tables (migration set ``langgraph``) map
LangGraph checkpoint ids to ckptdb ids and hold pending writes; the mapping row is written
in the checkpoint's own commit transaction (``commit(on_publish=...)``), pending writes in
``write_session()`` transactions (``BEGIN IMMEDIATE``), so several processes, each with its
own saver on one file, queue for the write lock instead of failing with "database is
locked".

Reads of core data go through the public API only (``Database.get``, ``Checkpoint.read``,
``pointer``, ``lineage``); SQL runs only on the integration's own tables.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import logging
import os
import random
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.resources import files
from types import TracebackType
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ... import catalog, errors
from ...blobs import BlobRef
from ...database import Database
from ...database import open as open_database
from ...extension import Session
from ...models import CommitAck
from ...retention import RetentionPolicy
from . import _layout
from .errors import PickleRefusedError

__all__ = ["AsyncCkptdbSaver", "CkptdbSaver", "migrations_dir"]

log = logging.getLogger(__name__)

MIGRATION_SET = "langgraph"
#: Rows fetched per read transaction while listing.
LIST_PAGE = 64
_SQL_VARS = 500  # parameters per IN (...) list, well under SQLite's limit
#: Pins that hold checkpoints LangGraph still uses while prune's GC runs.
PRUNE_KEEP_HISTORY = 16
PRUNE_PIN_PREFIX = "langgraph-prune/"
#: More live checkpoints than this in a namespace being pruned (a writer racing the prune)
#: and GC is left for the next prune.
MAX_PRUNE_PINS = 64

_T = TypeVar("_T")


def migrations_dir() -> Any:
    """The integration's migration set, shipped inside the package."""
    return files(__package__) / "migrations"


def checked_serde(serde: SerializerProtocol | None) -> SerializerProtocol:
    """LangGraph's JsonPlusSerializer (optionally inside an EncryptedSerializer) with pickle
    disabled; anything else is refused, because no other serializer is known not to pickle."""
    if serde is None:
        return JsonPlusSerializer(pickle_fallback=False)
    inner = serde.serde if isinstance(serde, EncryptedSerializer) else serde
    if not isinstance(inner, JsonPlusSerializer):
        raise errors.InvalidInputError(
            f"CkptdbSaver needs LangGraph's JsonPlusSerializer (optionally wrapped in an "
            f"EncryptedSerializer), got {type(inner).__name__}; other serializers may use pickle"
        )
    if inner.pickle_fallback:
        raise PickleRefusedError(
            "the serializer has pickle_fallback=True; ckptdb never stores pickle. Use "
            "JsonPlusSerializer() (pickle_fallback defaults to False)"
        )
    return serde


@dataclass(frozen=True)
class _Row:
    """A row of ``lg_checkpoint``."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    ckpt_id: str


# task_id, channel, type, value, task_path, idx of an lg_write row
_WRITE_TYPES = (str, str, str, bytes, str, int)
_ROW_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, ckpt_id"


def _row(values: Sequence[Any]) -> _Row:
    return _Row(str(values[0]), str(values[1]), str(values[2]), values[3], str(values[4]))


def _configurable(config: RunnableConfig) -> dict[str, Any]:
    conf = config.get("configurable")
    if not isinstance(conf, dict) or "thread_id" not in conf:
        raise errors.InvalidInputError(
            "the config needs configurable.thread_id, e.g. {'configurable': {'thread_id': '1'}}"
        )
    return conf


def _thread(config: RunnableConfig) -> tuple[str, str]:
    conf = _configurable(config)
    ns = conf.get("checkpoint_ns") or ""
    if not isinstance(ns, str):
        raise errors.InvalidInputError(f"checkpoint_ns must be a str, got {type(ns).__name__}")
    return str(conf["thread_id"]), ns


def _chunks(items: Sequence[_T], size: int = _SQL_VARS) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class CkptdbSaver(BaseCheckpointSaver[str]):
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

    Every method has an async twin (``aget_tuple``, ``alist``, ...) that runs it in a worker
    thread; a ckptdb handle is safe to share between threads.
    """

    def __init__(
        self,
        db: Database | str | os.PathLike[str],
        *,
        serde: SerializerProtocol | None = None,
        inline_max: int = _layout.DEFAULT_INLINE_MAX,
        busy_timeout: float | None = 30.0,
        page_size: int | None = None,
        gc_grace_seconds: float | None = None,
    ) -> None:
        super().__init__(serde=checked_serde(serde))
        if not isinstance(inline_max, int) or isinstance(inline_max, bool) or inline_max < 0:
            raise errors.InvalidInputError("inline_max must be an int >= 0")
        self.inline_max = inline_max
        self.gc_grace_seconds = gc_grace_seconds
        # Per-process hints that spare a read before each put; both are re-validated by
        # the database (a stale base fails the commit, which then looks it up again).
        self._last_put: dict[tuple[str, str], tuple[str, str]] = {}
        # (thread_id, checkpoint_ns) -> the blob of each channel this saver's last put there
        # stored: the next put references unchanged ones instead of sending them again.
        self._channels: dict[tuple[str, str], dict[str, BlobRef]] = {}
        self._registered: set[str] = set()
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
        try:
            self._setup()
        except BaseException:
            if self._owns_db:
                self.db.close()
            raise

    def _setup(self) -> None:
        if not self.db.readonly:
            self.db.apply_migration_set(MIGRATION_SET, migrations_dir())
            return
        with self.db.read_session() as s:
            found = s.scalar(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'lg_checkpoint'"
            )
        if not found:
            raise errors.MigrationPendingError(
                f"{self.db.path} has no LangGraph tables yet and was opened read-only; open it "
                "read-write once (CkptdbSaver(path)) to create them"
            )

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database if the saver opened it (idempotent)."""
        if self._owns_db:
            self.db.close()

    def __enter__(self) -> CkptdbSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- (de)serialization ------------------------------------------------------------------

    def _dumps(self, value: Any) -> tuple[str, bytes]:
        type_, data = self.serde.dumps_typed(value)
        if type_ == "pickle":
            raise PickleRefusedError("the serializer produced pickle; ckptdb never stores pickle")
        return type_, bytes(data)

    def _loads(self, type_: str, data: bytes) -> Any:
        if type_ == "pickle":
            raise PickleRefusedError(
                "a stored value is tagged 'pickle'; ckptdb never loads pickle (the file was "
                "written by something else)"
            )
        try:
            return self.serde.loads_typed((type_, data))
        except Exception as exc:  # the serializer's own errors vary by format and library
            raise errors.CorruptionError(
                f"a stored value tagged {type_!r} could not be decoded ({type(exc).__name__}: "
                f"{exc}); it is damaged or was written with another serializer",
                reason="undecodable_value",
            ) from exc

    # -- reading --------------------------------------------------------------------------

    def _writes(self, s: Session, row: _Row) -> builtins.list[PendingWrite]:
        rows = s.execute(
            "SELECT task_id, channel, type, value, task_path, idx FROM lg_write"
            " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (row.thread_id, row.checkpoint_ns, row.checkpoint_id),
        )
        for r in rows:
            catalog.check_types(r, _WRITE_TYPES, "pending write")
        rows.sort(key=lambda r: writes_sort_key(r[4], r[0], r[5]))
        return [(r[0], r[1], self._loads(r[2], r[3])) for r in rows]

    def _tuple(
        self,
        s: Session,
        row: _Row,
        thread_value: Any,
        wanted: dict[str, Any] | None = None,
    ) -> CheckpointTuple | None:
        """Load one checkpoint (None when its ckptdb checkpoint no longer exists, or when
        its metadata does not contain ``wanted``)."""
        try:
            cp = self.db.get(row.ckpt_id)
        except errors.CheckpointNotFoundError:
            return None  # collected outside the saver (e.g. `ckptdb gc`): treat as gone
        stored_meta = cp.metadata.get("langgraph")
        metadata = cast(CheckpointMetadata, stored_meta if isinstance(stored_meta, dict) else {})
        if wanted and not all(metadata.get(k) == v for k, v in wanted.items()):
            return None
        env = _layout.decode_envelope(cp.read(_layout.ENVELOPE_ENTRY), cp.id)
        checkpoint = cast(Checkpoint, self._loads(*env.checkpoint))
        values: dict[str, Any] = {ch: self._loads(t, d) for ch, (t, d) in env.values.items()}
        for ch, (entry, type_) in env.blobs.items():
            values[ch] = self._loads(type_, cp.read(entry))
        checkpoint["channel_values"] = values
        config: RunnableConfig = {
            "configurable": {
                "thread_id": thread_value,
                "checkpoint_ns": row.checkpoint_ns,
                "checkpoint_id": row.checkpoint_id,
            }
        }
        parent: RunnableConfig | None = None
        if row.parent_id:
            parent = {
                "configurable": {
                    "thread_id": thread_value,
                    "checkpoint_ns": row.checkpoint_ns,
                    "checkpoint_id": row.parent_id,
                }
            }
        return CheckpointTuple(config, checkpoint, metadata, parent, self._writes(s, row))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (``checkpoint_id``), or the newest one of the
        thread and checkpoint namespace; None when there is none. Pending writes come in
        ``writes_sort_key`` order."""
        thread_id, ns = _thread(config)
        thread_value = _configurable(config)["thread_id"]
        checkpoint_id = get_checkpoint_id(config)
        with self.db.read_session() as s:
            if checkpoint_id:
                found = s.one(
                    f"SELECT {_ROW_COLUMNS} FROM lg_checkpoint"
                    " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    (thread_id, ns, str(checkpoint_id)),
                )
                return None if found is None else self._tuple(s, _row(found), thread_value)
            rows = s.execute(
                f"SELECT {_ROW_COLUMNS} FROM lg_checkpoint WHERE thread_id = ?"
                " AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 8",
                (thread_id, ns),
            )
            for values in rows:
                tup = self._tuple(s, _row(values), thread_value)
                if tup is not None:
                    return tup
            if len(rows) < 8:
                return None
        # Unusual: the newest rows point at collected checkpoints; walk the rest.
        return next(self.list(config, limit=1), None)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by LangGraph checkpoint id): of one thread (and, when
        ``checkpoint_ns`` is given, one checkpoint namespace) or of every thread when
        ``config`` is None; only those whose metadata contains every ``filter`` pair,
        created before ``before``'s checkpoint, at most ``limit``.

        No lock or transaction is held between the tuples it yields."""
        for page in self._pages(config, filter, before, limit):
            yield from page

    def _pages(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[builtins.list[CheckpointTuple]]:
        if limit is not None and limit <= 0:
            return
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        thread_value: Any = None
        if config is not None:
            conf = _configurable(config)
            thread_value = conf["thread_id"]
            where.append("thread_id = ?")
            params.append(str(thread_value))
            if conf.get("checkpoint_ns") is not None:
                where.append("checkpoint_ns = ?")
                params.append(str(conf["checkpoint_ns"]))
            if cid := get_checkpoint_id(config):
                where.append("checkpoint_id = ?")
                params.append(str(cid))
        if before is not None and (before_id := get_checkpoint_id(before)):
            where.append("checkpoint_id < ?")
            params.append(str(before_id))
        wanted = dict(filter) if filter else None
        if wanted and isinstance(wanted.get("run_id"), str):
            where.append("run_id = ?")
            params.append(wanted["run_id"])
        remaining = limit
        cursor: tuple[str, str, str] | None = None
        while True:
            clause = list(where)
            args = list(params)
            if cursor is not None:
                clause.append("(checkpoint_id, thread_id, checkpoint_ns) < (?, ?, ?)")
                args.extend(cursor)
            sql = (
                f"SELECT {_ROW_COLUMNS} FROM lg_checkpoint"
                + (" WHERE " + " AND ".join(clause) if clause else "")
                + " ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC LIMIT ?"
            )
            page: builtins.list[CheckpointTuple] = []
            with self.db.read_session() as s:
                rows = [_row(r) for r in s.execute(sql, (*args, LIST_PAGE))]
                for row in rows:
                    value = thread_value if thread_value is not None else row.thread_id
                    tup = self._tuple(s, row, value, wanted)
                    if tup is not None:
                        page.append(tup)
                        if remaining is not None:
                            remaining -= 1
                            if remaining == 0:
                                break
            if page:
                yield page
            if len(rows) < LIST_PAGE or remaining == 0:
                return
            last = rows[-1]
            cursor = (last.checkpoint_id, last.thread_id, last.checkpoint_ns)

    # -- writing --------------------------------------------------------------------------

    def _mapped(self, thread_id: str, ns: str, checkpoint_id: str) -> str | None:
        hint = self._last_put.get((thread_id, ns))
        if hint is not None and hint[0] == checkpoint_id:
            return hint[1]
        return self._lookup(thread_id, ns, checkpoint_id)

    def _lookup(self, thread_id: str, ns: str, checkpoint_id: str) -> str | None:
        with self.db.read_session() as s:
            found = s.scalar(
                "SELECT ckpt_id FROM lg_checkpoint"
                " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (thread_id, ns, checkpoint_id),
            )
        return None if found is None else str(found)

    def _encode(
        self, checkpoint: Checkpoint, parent: str | None, key: tuple[str, str]
    ) -> tuple[dict[str, bytes | BlobRef], dict[str, BlobRef]]:
        """The entries of a ckptdb checkpoint holding ``checkpoint``, and the blob of each
        channel stored as its own entry (remembered for the next put on the thread).

        A channel value whose bytes are those this saver last stored for the channel on the
        same thread is sent as a BlobRef: ckptdb re-uses the stored blob without receiving,
        hashing or comparing the bytes again. The decision is by content (sha256), never by
        LangGraph's channel versions, so a caller that changes a value without bumping its
        version is still stored exactly.
        """
        body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        previous = self._channels.get(key, {})
        values: dict[str, tuple[str, bytes | BlobRef]] = {}
        remembered: dict[str, BlobRef] = {}
        for channel, value in checkpoint.get("channel_values", {}).items():
            type_, data = self._dumps(value)
            if len(data) <= self.inline_max:
                values[channel] = (type_, data)
                continue
            ref = BlobRef(hashlib.sha256(data).hexdigest(), len(data))
            remembered[channel] = ref
            values[channel] = (type_, ref if previous.get(channel) == ref else data)
        entries = _layout.build_entries(self._dumps(body), parent, values, self.inline_max)
        return entries, remembered

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint durably, as one ckptdb commit; its parent is the
        ``checkpoint_id`` of ``config`` (a fork when that is not the newest checkpoint).
        Channel values already stored (by content) are not stored again."""
        thread_id, ns = _thread(config)
        conf = _configurable(config)
        parent = conf.get("checkpoint_id") or None
        checkpoint_id = checkpoint.get("id")
        if not isinstance(checkpoint_id, str) or not checkpoint_id:
            raise errors.InvalidInputError("checkpoint['id'] must be a non-empty str")
        namespace = _layout.namespace_for(thread_id, ns)
        key = (thread_id, ns)
        parent_id = None if parent is None else str(parent)
        entries, remembered = self._encode(checkpoint, parent_id, key)
        md = dict(get_checkpoint_metadata(config, metadata))
        run, ck_meta = _layout.checkpoint_metadata(md, thread_id, ns, checkpoint_id)
        try:
            self._commit(
                namespace, thread_id, ns, checkpoint_id, parent_id, run, entries, ck_meta, "lg.put"
            )
        except errors.BlobMissingError:
            # A blob this put re-used was collected meanwhile (prune, maybe in another
            # process): send every value again.
            self._channels.pop(key, None)
            entries, remembered = self._encode(checkpoint, parent_id, key)
            self._commit(
                namespace, thread_id, ns, checkpoint_id, parent_id, run, entries, ck_meta, "lg.put"
            )
        if len(self._channels) > 10_000:
            self._channels.clear()
        self._channels[key] = remembered
        return {
            "configurable": {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _commit(
        self,
        namespace: str,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        run_id: str | None,
        entries: dict[str, bytes | BlobRef],
        ck_meta: dict[str, Any],
        reason: str,
        *,
        visible: bool = True,
    ) -> CommitAck:
        """One ckptdb commit; with ``visible`` the mapping row is written in the same
        transaction (on_publish), so LangGraph sees the checkpoint exactly when it lands."""

        def record(session: Session, ack: CommitAck) -> None:
            if namespace not in self._registered:
                session.execute(
                    "INSERT OR IGNORE INTO lg_namespace (namespace, thread_id, checkpoint_ns)"
                    " VALUES (?, ?, ?)",
                    (namespace, thread_id, ns),
                )
            if visible:
                session.execute(
                    "INSERT OR REPLACE INTO lg_checkpoint (thread_id, checkpoint_ns,"
                    " checkpoint_id, parent_checkpoint_id, ckpt_id, run_id)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (thread_id, ns, checkpoint_id, parent_id, ack.checkpoint_id, run_id),
                )

        base = self._mapped(thread_id, ns, parent_id) if parent_id else None
        for attempt in range(3):
            try:
                ack = self.db.commit(
                    namespace,
                    entries,
                    metadata=ck_meta,
                    base=base,
                    reason=reason,
                    on_publish=record,
                )
            except errors.CheckpointNotFoundError:
                # The parent was deleted (prune/delete, maybe in another process) after we
                # looked it up: look again, and commit on CURRENT if it is gone.
                if base is None or attempt == 2:
                    raise
                self._last_put.pop((thread_id, ns), None)
                self._channels.pop((thread_id, ns), None)
                fresh = self._lookup(thread_id, ns, parent_id) if parent_id else None
                base = fresh if fresh != base else None
                continue
            except errors.ChunkMissingError:
                # GC reclaimed a chunk this commit staged (a very large value and a
                # concurrent GC with a zero grace period): ckptdb says a retry is safe.
                if attempt == 2:
                    raise
                continue
            self._registered.add(namespace)
            if visible:
                if len(self._last_put) > 10_000:
                    self._last_put.clear()
                self._last_put[(thread_id, ns)] = (checkpoint_id, ack.checkpoint_id)
            return ack
        raise AssertionError("unreachable")  # pragma: no cover

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store pending writes of a task against the checkpoint named by ``config``, in one
        ``BEGIN IMMEDIATE`` transaction. A write already stored for ``(task_id, idx)`` is
        kept, except the special channels (error, interrupt, ...), which are replaced."""
        thread_id, ns = _thread(config)
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            raise errors.InvalidInputError("put_writes needs configurable.checkpoint_id")
        keep: builtins.list[tuple[Any, ...]] = []
        replace: builtins.list[tuple[Any, ...]] = []
        for idx, (channel, value) in enumerate(writes):
            type_, data = self._dumps(value)
            index = WRITES_IDX_MAP.get(channel, idx)
            row = (thread_id, ns, str(checkpoint_id), str(task_id), index, channel, type_, data)
            (replace if index < 0 else keep).append((*row, task_path or ""))
        columns = (
            " INTO lg_write (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            " type, value, task_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        with self.db.write_session() as s:
            if keep:
                s.executemany("INSERT OR IGNORE" + columns, keep)
            if replace:
                s.executemany("INSERT OR REPLACE" + columns, replace)

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

    # -- deleting and pruning ---------------------------------------------------------------

    def _namespaces(self, thread_id: str) -> builtins.list[tuple[str, str]]:
        """(ckptdb namespace, checkpoint_ns) of every namespace the thread has used."""
        with self.db.read_session() as s:
            registered = {
                str(ns): str(namespace)
                for namespace, ns in s.execute(
                    "SELECT namespace, checkpoint_ns FROM lg_namespace WHERE thread_id = ?",
                    (thread_id,),
                )
            }
            for (ns,) in s.execute(
                "SELECT DISTINCT checkpoint_ns FROM lg_checkpoint WHERE thread_id = ?",
                (thread_id,),
            ):
                registered.setdefault(str(ns), _layout.namespace_for(thread_id, str(ns)))
        return sorted((namespace, ns) for ns, namespace in registered.items())

    def _drop(self, namespace: str, thread_id: str, ns: str) -> None:
        """Drop a ckptdb namespace whose LangGraph rows are gone, then unregister it."""
        self._registered.discard(namespace)
        self._last_put.pop((thread_id, ns), None)
        self._channels.pop((thread_id, ns), None)
        try:
            self.db.drop_namespace(namespace)
        except errors.NamespaceNotFoundError:
            pass  # already dropped (an earlier, interrupted delete): only unregister it
        except errors.ProtectedError as exc:
            log.warning("kept ckptdb namespace %s: %s", namespace, exc)
            return
        with self.db.write_session() as s:
            s.execute(
                "DELETE FROM lg_namespace WHERE namespace = ? AND NOT EXISTS (SELECT 1 FROM"
                " lg_checkpoint WHERE thread_id = ? AND checkpoint_ns = ?)",
                (namespace, thread_id, ns),
            )

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of the thread (all checkpoint namespaces) and
        give the space back. Pinned checkpoints (pinned by an operator with ``ckptdb pin``)
        stay in ckptdb, but LangGraph no longer sees them."""
        tid = str(thread_id)
        namespaces = self._namespaces(tid)
        with self.db.write_session() as s:
            s.execute("DELETE FROM lg_checkpoint WHERE thread_id = ?", (tid,))
            s.execute("DELETE FROM lg_write WHERE thread_id = ?", (tid,))
        for namespace, ns in namespaces:
            self._drop(namespace, tid, ns)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint (and its writes) whose metadata ``run_id`` is one of
        ``run_ids``, then the ckptdb checkpoints and blobs only they used."""
        ids = sorted({str(r) for r in run_ids})
        if not ids:
            return
        doomed: builtins.list[_Row] = []
        with self.db.write_session() as s:
            for part in _chunks(ids):
                marks = ",".join("?" * len(part))
                doomed.extend(
                    _row(r)
                    for r in s.execute(
                        f"SELECT {_ROW_COLUMNS} FROM lg_checkpoint WHERE run_id IN ({marks})",
                        tuple(part),
                    )
                )
            self._delete_rows(s, doomed)
        scope: builtins.list[str] = []
        for thread_id, ns in sorted({(r.thread_id, r.checkpoint_ns) for r in doomed}):
            self._last_put.pop((thread_id, ns), None)
            self._channels.pop((thread_id, ns), None)
            namespace = _layout.namespace_for(thread_id, ns)
            if self._settle(namespace, thread_id, ns) is not None:
                scope.append(namespace)
        for run in ids:
            if scope:
                self.db.prune({"lg_run_id": run}, namespaces=scope)

    def _delete_rows(self, s: Session, rows: Sequence[_Row]) -> None:
        keys = [(r.thread_id, r.checkpoint_ns, r.checkpoint_id) for r in rows]
        where = " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        s.executemany("DELETE FROM lg_checkpoint" + where, keys)
        s.executemany("DELETE FROM lg_write" + where, keys)

    def _remaining(self, thread_id: str, ns: str) -> builtins.list[_Row]:
        with self.db.read_session() as s:
            return [
                _row(r)
                for r in s.execute(
                    f"SELECT {_ROW_COLUMNS} FROM lg_checkpoint WHERE thread_id = ?"
                    " AND checkpoint_ns = ? ORDER BY checkpoint_id DESC",
                    (thread_id, ns),
                )
            ]

    def _settle(self, namespace: str, thread_id: str, ns: str) -> set[str] | None:
        """Make ckptdb's CURRENT and fallback of the namespace name checkpoints LangGraph
        still has (ckptdb never deletes those two): CURRENT moves to the newest remaining
        one (compare-and-swap, so a concurrent put wins) and becomes its own fallback when
        the fallback is gone; a namespace left without checkpoints is dropped. Returns the
        ckptdb ids LangGraph still uses, or None when nothing may be collected now."""
        remaining = self._remaining(thread_id, ns)
        if not remaining:
            self._drop(namespace, thread_id, ns)
            return None
        alive = {r.ckpt_id for r in remaining}
        ptr = self.db.pointer(namespace)
        if ptr is None:
            return None
        try:
            if ptr.current_id not in alive:
                ptr = self.db.set_current(
                    namespace,
                    remaining[0].ckpt_id,
                    expect_current=ptr.current_id,
                    reason="lg.prune",
                )
            if ptr.fallback_id is not None and ptr.fallback_id not in alive:
                # set_current to the current checkpoint makes it its own fallback.
                self.db.set_current(
                    namespace, ptr.current_id, expect_current=ptr.current_id, reason="lg.prune"
                )
        except (errors.ConflictError, errors.CheckpointNotFoundError):
            log.info(
                "ckptdb namespace %s moved during a prune; space is reclaimed later", namespace
            )
            return None
        return alive

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune the given threads. ``"keep_latest"`` keeps the newest checkpoint of each
        checkpoint namespace with its pending writes -- and, for channels that LangGraph
        rebuilds from history (``DeltaChannel``), the ancestors back to the checkpoint that
        stores their value -- and deletes the rest; ``"delete"`` deletes everything. The
        ckptdb checkpoints and blobs nothing kept uses are garbage-collected, and the space
        is given back to the operating system."""
        if strategy not in ("keep_latest", "delete"):
            raise errors.InvalidInputError(
                f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'"
            )
        for thread_id in thread_ids:
            tid = str(thread_id)
            if strategy == "delete":
                self.delete_thread(tid)
                continue
            for namespace, ns in self._namespaces(tid):
                self._keep_latest(namespace, tid, ns)

    def _needed_ancestors(self, rows: builtins.list[_Row]) -> builtins.list[_Row]:
        """The newest row plus the ancestors its delta channels are rebuilt from."""
        by_id = {r.checkpoint_id: r for r in rows}
        latest = rows[0]
        keep = [latest]
        try:
            cp = self.db.get(latest.ckpt_id)
        except errors.CheckpointNotFoundError:
            return keep
        md = cp.metadata.get("langgraph")
        counters = md.get("counters_since_delta_snapshot") if isinstance(md, dict) else None
        if not isinstance(counters, dict) or not counters:
            return keep
        env = _layout.decode_envelope(cp.read(_layout.ENVELOPE_ENTRY), cp.id)
        missing = {str(ch) for ch in counters} - env.channels
        row = latest
        seen = {latest.checkpoint_id}
        while missing and row.parent_id and row.parent_id in by_id:
            row = by_id[row.parent_id]
            if row.checkpoint_id in seen:
                break
            seen.add(row.checkpoint_id)
            keep.append(row)
            try:
                parent_cp = self.db.get(row.ckpt_id)
            except errors.CheckpointNotFoundError:
                break
            parent_env = _layout.decode_envelope(
                parent_cp.read(_layout.ENVELOPE_ENTRY), parent_cp.id
            )
            missing -= parent_env.channels
        return keep

    def _keep_latest(self, namespace: str, thread_id: str, ns: str) -> None:
        rows = self._remaining(thread_id, ns)
        if not rows:
            self._drop(namespace, thread_id, ns)
            return
        kept = {r.checkpoint_id for r in self._needed_ancestors(rows)}
        doomed = [r for r in rows if r.checkpoint_id not in kept]
        if doomed:
            with self.db.write_session() as s:
                self._delete_rows(s, doomed)
        alive = self._settle(namespace, thread_id, ns)  # re-read: concurrent puts count
        if alive is None or len(alive) > MAX_PRUNE_PINS:
            return
        # GC keeps CURRENT, its fallback and pins: pin every other checkpoint LangGraph
        # still uses (ancestors a delta channel needs, puts that raced this prune) while
        # GC collects the rest of the namespace and the blobs only it used.
        pins: builtins.list[str] = []
        try:
            ptr = self.db.pointer(namespace)
            protected = set() if ptr is None else {ptr.current_id, ptr.fallback_id}
            for pin in self.db.pins(namespace):
                if pin.name.startswith(PRUNE_PIN_PREFIX) and pin.checkpoint_id not in alive:
                    self.db.unpin(pin.name)  # left by an interrupted prune
            for ckpt in sorted(alive - protected):
                name = PRUNE_PIN_PREFIX + ckpt
                self.db.pin(ckpt, name, note="held by CkptdbSaver.prune during GC", replace=True)
                pins.append(name)
            grace: dict[str, Any] = {}
            if self.gc_grace_seconds is not None:
                grace["grace"] = self.gc_grace_seconds
            # LangGraph never reads ckptdb's pointer history: keep only a short audit tail.
            self.db.gc(
                RetentionPolicy(),
                namespaces=[namespace],
                keep_history=PRUNE_KEEP_HISTORY,
                **grace,
            )
        except (errors.NamespaceNotFoundError, errors.CheckpointNotFoundError):
            pass  # the thread was deleted while pruning: nothing is left to collect
        finally:
            for name in pins:
                with contextlib.suppress(errors.NotFoundError):
                    self.db.unpin(name)

    # -- copying ----------------------------------------------------------------------------

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint (all checkpoint namespaces, with parent links, metadata
        and pending writes) of one thread to another. The copies share every blob with the
        source (content addressing): no channel value is stored twice. The copied
        checkpoints become visible to LangGraph together, in one transaction, at the end;
        checkpoints the target already has (same ids) are left as they are."""
        src, dst = str(source_thread_id), str(target_thread_id)
        if src == dst:
            return
        with self.db.read_session() as s:
            rows = [
                _row(r)
                for r in s.execute(
                    f"SELECT {_ROW_COLUMNS} FROM lg_checkpoint WHERE thread_id = ?"
                    " ORDER BY checkpoint_ns, checkpoint_id",
                    (src,),
                )
            ]
            existing = {
                (str(ns), str(cid)): str(ck)
                for ns, cid, ck in s.execute(
                    "SELECT checkpoint_ns, checkpoint_id, ckpt_id FROM lg_checkpoint"
                    " WHERE thread_id = ?",
                    (dst,),
                )
            }
        if not rows:
            return
        namespaces = sorted({r.checkpoint_ns for r in rows})
        with self.db.write_session() as s:
            s.executemany(
                "INSERT OR IGNORE INTO lg_namespace (namespace, thread_id, checkpoint_ns)"
                " VALUES (?, ?, ?)",
                [(_layout.namespace_for(dst, ns), dst, ns) for ns in namespaces],
            )
        copied: builtins.list[tuple[str, str, str, str | None, str, str | None]] = []
        for row in rows:
            key = (row.checkpoint_ns, row.checkpoint_id)
            if key in existing:
                continue
            try:
                cp = self.db.get(row.ckpt_id)
            except errors.CheckpointNotFoundError:
                continue
            entries = {name: cp.read(name) for name in cp.entries}
            meta = cp.metadata
            meta["lg_thread_id"] = dst
            parent_ck = existing.get((row.checkpoint_ns, row.parent_id or ""))
            namespace = _layout.namespace_for(dst, row.checkpoint_ns)
            run = meta.get("lg_run_id")
            run_id = run if isinstance(run, str) else None
            ack = self._copy_commit(namespace, entries, meta, parent_ck)
            existing[key] = ack
            copied.append((dst, row.checkpoint_ns, row.checkpoint_id, row.parent_id, ack, run_id))
        if not copied:
            return
        with self.db.write_session() as s:
            s.executemany(
                "INSERT OR IGNORE INTO lg_checkpoint (thread_id, checkpoint_ns, checkpoint_id,"
                " parent_checkpoint_id, ckpt_id, run_id) VALUES (?, ?, ?, ?, ?, ?)",
                copied,
            )
            s.executemany(
                "INSERT OR IGNORE INTO lg_write (thread_id, checkpoint_ns, checkpoint_id,"
                " task_id, idx, channel, type, value, task_path) SELECT ?, checkpoint_ns,"
                " checkpoint_id, task_id, idx, channel, type, value, task_path FROM lg_write"
                " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                [(dst, src, c[1], c[2]) for c in copied],
            )

    def _copy_commit(
        self, namespace: str, entries: dict[str, bytes], meta: dict[str, Any], base: str | None
    ) -> str:
        try:
            ack = self.db.commit(
                namespace, entries, metadata=meta, base=base, reason="lg.copy_thread"
            )
        except errors.CheckpointNotFoundError:
            ack = self.db.commit(namespace, entries, metadata=meta, reason="lg.copy_thread")
        return ack.checkpoint_id

    # -- async twins ------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple` (runs in a worker thread)."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`: each page of results is read in a worker thread."""
        pages = self._pages(config, filter, before, limit)
        while True:
            page = await asyncio.to_thread(next, pages, None)
            if page is None:
                return
            for item in page:
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put` (runs in a worker thread)."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes` (runs in a worker thread)."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread` (runs in a worker thread)."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs` (runs in a worker thread)."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread` (runs in a worker thread)."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune` (runs in a worker thread)."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


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
