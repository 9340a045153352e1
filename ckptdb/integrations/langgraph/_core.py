"""The state and shared machinery of the LangGraph checkpointer (see :mod:`.saver`).

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

import builtins
import hashlib
import json
import logging
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.resources import files
from types import TracebackType
from typing import Any, Self, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ... import errors
from ...database import Database
from ...database import open as open_database
from ...extension import RecordSealer, Row, Session, check_types, metadata_from_json
from ...models import CommitAck
from ...types import BlobRef
from . import _layout, sealing
from ._cache import Loaded, VerifiedCache
from .errors import PickleRefusedError

log = logging.getLogger(__name__)

MIGRATION_SET = "langgraph"
#: Rows fetched per read transaction while listing.
LIST_PAGE = 64
_SQL_VARS = 500  # parameters per IN (...) list, well under SQLite's limit
#: Pointer moves prune keeps per namespace (LangGraph never reads ckptdb's history).
PRUNE_KEEP_HISTORY = 16
#: Name prefix of the pins an older version held during prune (removed when met).
PRUNE_PIN_PREFIX = "langgraph-prune/"

_T = TypeVar("_T")
#: The ``type`` of a pending write whose value is sealed (an encrypted thread): this prefix,
#: then the serializer's own type.
SEALED_TYPE = "ckptdb-sealed/"
#: Which key encrypts a thread: one key id for every thread, or a function from a thread's
#: config to its key id (None: that thread is not encrypted).
Encryption = str | Callable[[RunnableConfig], "str | None"] | None


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
# the lg_write columns _pending reads ({digest}: the column, or NULL on a version 1 file)
_WRITE_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, task_id, channel, type, value, task_path, idx,"
    " {digest}"
)


class _Gone:
    """The row's ckptdb checkpoint was collected (see ``_one_with_writes``)."""


GONE = _Gone()


class _Uncached:
    """Answering would need a read beyond the one statement (see ``_one_with_writes``)."""


UNCACHED = _Uncached()


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


@dataclass(frozen=True)
class _Encoded:
    """A put's content as the read cache keeps it (see :mod:`._cache`)."""

    checkpoint: _layout.Typed
    values: dict[str, _layout.Typed]
    blobs: dict[str, tuple[str, str]]
    blob_bytes: dict[str, bytes]

    def loaded(self, metadata: dict[str, Any]) -> Loaded:
        """The cache record, with the LangGraph metadata as committed."""
        return Loaded(json.dumps(metadata), self.checkpoint, self.values, self.blobs)


def _spliced(
    checkpoint: _layout.Typed,
    values: dict[str, _layout.Typed],
    blobs: dict[str, tuple[str, str]],
    blob_bytes: dict[str, bytes],
) -> bytes | None:
    """Inline values first, then blob channels: the order the per-value decoding used."""
    parts = [*values.items(), *((ch, (t, blob_bytes[d])) for ch, (t, d) in blobs.items())]
    return _layout.splice(checkpoint, parts)


def check_owner(session: Session, namespace: str, thread_id: str, ns: str) -> None:
    """CorruptionError unless ``lg_namespace`` registers ``namespace`` to exactly the pair
    ``(thread_id, ns)``: a commit never lands in a namespace that holds (or is registered
    to) another pair, nor outside the one its own pair registered -- so deleting one thread
    can never drop another's checkpoints. Raised inside the commit transaction, it rolls the
    commit back."""
    owners = session.execute(
        "SELECT thread_id, checkpoint_ns FROM lg_namespace WHERE namespace = ?", (namespace,)
    )
    if [tuple(o) for o in owners] != [(thread_id, ns)]:
        raise errors.CorruptionError(
            f"ckptdb namespace {namespace[:80]!r} is registered to another LangGraph thread "
            f"than {thread_id[:80]!r}/{ns[:80]!r} (or that thread to another namespace); "
            "nothing was committed. The saver's lg_namespace table was altered: run "
            "`ckptdb verify`.",
            reason="lg_namespace_conflict",
            namespace=namespace[:200],
        )


class SaverCore(BaseCheckpointSaver[str]):
    """What every part of the saver shares: the database, the serializer, the per-process
    hints, and the commit of one LangGraph checkpoint."""

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
    ) -> None:
        super().__init__(serde=checked_serde(serde))
        if not (encryption is None or isinstance(encryption, str) or callable(encryption)):
            raise errors.InvalidInputError(
                "encryption must be a key id (str), a function config -> key id, or None"
            )
        self._encryption = encryption
        # key ids whose scope this saver made sure exists; sealers and namespaces by thread
        self._scopes_ready: set[str] = set()
        self._sealers: dict[str, RecordSealer | None] = {}
        self._thread_namespaces: dict[tuple[str, str], str] = {}
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
        self._cache = VerifiedCache()
        # Whether a pending write without a digest is accepted: only while rows written
        # before schema version 2 are not sealed yet (see .sealing), i.e. on a file opened
        # read-only before a read-write open sealed them.
        self._unsealed_ok = False
        self._digest_sql = "digest"
        # Whether pairs of a file written before langgraph schema version 3 still share a
        # namespace with another pair (see Maintenance.separate_shared_namespaces).
        self._shared_pending = False
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
            with self.db.read_session() as s:
                pending = sealing.unsealed_pending(s)
            if pending:
                with self.db.write_session() as s:
                    sealed = sealing.backfill(s)
                log.info("sealed %d pending writes written before schema version 2", sealed)
            return
        with self.db.read_session() as s:
            found = s.scalar(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'lg_checkpoint'"
            )
            version = sealing.set_version(s) if found else 0
            if version >= sealing.SEALED_VERSION:
                self._unsealed_ok = sealing.unsealed_pending(s)
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

    # -- (de)serialization ------------------------------------------------------------------

    # -- encryption ---------------------------------------------------------------------

    def _key_id(self, config: RunnableConfig) -> str | None:
        if self._encryption is None or isinstance(self._encryption, str):
            return self._encryption
        key_id = self._encryption(config)
        if key_id is not None and not isinstance(key_id, str):
            raise errors.InvalidInputError(
                f"the encryption function returned {type(key_id).__name__}, not a key id (str)"
            )
        return key_id

    def _namespace(self, config: RunnableConfig, thread_id: str, ns: str) -> str:
        """The ckptdb namespace of a thread: where its first put placed it (an encrypted
        thread stays encrypted), or where the encryption setting says a new one goes."""
        known = self._registered_namespace(thread_id, ns)
        if known is not None:
            return known
        key_id = self._key_id(config)
        if key_id is None:
            return _layout.namespace_for(thread_id, ns)
        prefix = _layout.scope_prefix(key_id)
        if key_id not in self._scopes_ready:
            self.db.set_encryption(prefix, key_id=key_id)  # idempotent
            self._scopes_ready.add(key_id)
        return _layout.namespace_for(thread_id, ns, prefix)

    def _registered_namespace(self, thread_id: str, ns: str) -> str | None:
        found = self._thread_namespaces.get((thread_id, ns))
        if found is not None:
            return found
        with self.db.read_session() as s:
            value = s.scalar(
                "SELECT namespace FROM lg_namespace WHERE thread_id = ? AND checkpoint_ns = ?",
                (thread_id, ns),
            )
        if isinstance(value, str):
            self._thread_namespaces[(thread_id, ns)] = value
            return value
        return None

    def _sealer(self, namespace: str) -> RecordSealer | None:
        if namespace not in self._sealers:
            self._sealers[namespace] = self.db.record_sealer(namespace)
        return self._sealers[namespace]

    def _address(self, namespace: str, data: bytes) -> str:
        if self._sealer(namespace) is None:
            return hashlib.sha256(data).hexdigest()
        return self.db.content_address(namespace, data)

    @staticmethod
    def _write_context(row: Sequence[Any]) -> bytes:
        """What a sealed pending write is bound to: (thread, namespace, checkpoint, task,
        idx, channel, type, task path) -- a sealed value moved to another row does not open."""
        return json.dumps(list(row), ensure_ascii=True, separators=(",", ":")).encode()

    def _seal_write(
        self, namespace: str, row: tuple[str, str, str, str, int, str, str, bytes, str]
    ) -> tuple[str, str, str, str, int, str, str, bytes, str]:
        """A pending-write row (thread, ns, checkpoint, task, idx, channel, type, value,
        task path) as stored: its value sealed when the thread is encrypted."""
        sealer = self._sealer(namespace)
        if sealer is None:
            return row
        tid, ns, cid, task, idx, channel, type_, value, path = row
        context = self._write_context((tid, ns, cid, task, idx, channel, type_, path))
        return (
            tid,
            ns,
            cid,
            task,
            idx,
            channel,
            SEALED_TYPE + type_,
            sealer.seal(value, context),
            path,
        )

    def _scope_key(self, namespace: str) -> str | None:
        """The key id encrypting ``namespace`` (None: plaintext)."""
        sealer = self._sealer(namespace)
        return None if sealer is None else sealer.key_id

    def _write_value(self, key: tuple[str, str, str], r: Sequence[Any]) -> Any:
        """The value of a stored pending write ``r`` = (task, channel, type, value, task
        path, idx) of checkpoint ``key``, opened first when it is sealed."""
        task, channel, type_, value, path, idx = r[:6]
        if not type_.startswith(SEALED_TYPE):
            return self._loads(type_, value)
        return self._loads(*self._opened_write(key, task, idx, channel, type_, value, path))

    def _opened_write(
        self,
        key: tuple[str, str, str],
        task: str,
        idx: int,
        channel: str,
        type_: str,
        value: bytes,
        path: str,
    ) -> tuple[str, bytes]:
        """(serializer type, plaintext) of a sealed pending write of checkpoint ``key``."""
        thread_id, ns, cid = key
        namespace = self._registered_namespace(thread_id, ns)
        sealer = None if namespace is None else self._sealer(namespace)
        if sealer is None:
            raise errors.CorruptionError(
                f"pending write {cid!r} task {task!r} is sealed but its thread is not "
                "encrypted; the row was altered",
                reason="record_sealed",
            )
        inner = type_[len(SEALED_TYPE) :]
        context = self._write_context((thread_id, ns, cid, task, idx, channel, inner, path))
        return inner, sealer.open(value, context)

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

    def _writes_of(
        self, s: Session, rows: Sequence[_Row]
    ) -> dict[tuple[str, str, str], builtins.list[PendingWrite]]:
        """The pending writes of every row, each list in ``writes_sort_key`` order, read in
        one statement per 150 rows and each checked against its digest."""
        found: builtins.list[Row] = []
        for part in _chunks(rows, 150):
            marks = ", ".join("(?, ?, ?)" for _ in part)
            args: builtins.list[Any] = []
            for r in part:
                args.extend((r.thread_id, r.checkpoint_ns, r.checkpoint_id))
            found.extend(
                s.execute(
                    f"SELECT {_WRITE_COLUMNS.format(digest=self._digest_sql)} FROM lg_write"
                    f" WHERE (thread_id, checkpoint_ns, checkpoint_id) IN (VALUES {marks})",
                    args,
                )
            )
        return self._pending(found)

    def _check_write(self, row: tuple[Any, ...], digest: Any, where: str) -> None:
        """:func:`.sealing.check_write`, skipped for a row equal to one whose seal held
        before (or that this saver sealed itself)."""
        if isinstance(digest, str) and self._cache.sealed(digest, row):
            return
        sealing.check_write(row, digest, self._unsealed_ok, where)
        if isinstance(digest, str):
            self._cache.put_sealed(digest, row)

    def _pending(
        self, found: Sequence[Row]
    ) -> dict[tuple[str, str, str], builtins.list[PendingWrite]]:
        """Check and decode ``lg_write`` rows of :data:`_WRITE_COLUMNS`, grouped by
        checkpoint in ``writes_sort_key`` order."""
        grouped: dict[tuple[str, str, str], builtins.list[Row]] = {}
        for w in found:
            check_types(w[:3], (str, str, str), "pending write")
            check_types(w[3:9], _WRITE_TYPES, "pending write")
            self._check_write(
                (w[0], w[1], w[2], w[3], w[8], w[4], w[5], w[6], w[7]),
                w[9],
                f"{w[2]!r} task {w[3]!r} idx {w[8]}",
            )
            grouped.setdefault((w[0], w[1], w[2]), []).append(w[3:9])
        out: dict[tuple[str, str, str], builtins.list[PendingWrite]] = {}
        for key, ws in grouped.items():
            ws.sort(key=lambda r: writes_sort_key(r[4], r[0], r[5]))
            out[key] = [(r[0], r[1], self._write_value(key, r)) for r in ws]
        return out

    def _one_with_writes(
        self, s: Session, where: str, params: Sequence[Any], thread_value: Any
    ) -> CheckpointTuple | _Gone | None:
        """The newest ``lg_checkpoint`` row matching ``where`` and its pending writes, in
        one statement (a join), built into a tuple; None when no row matches, :data:`GONE`
        when the row's ckptdb checkpoint was collected. Inside the caller's read snapshot:
        the content may be read and verified after the statement."""
        found = self._one(s, where, params, thread_value, cached_only=False)
        if isinstance(found, _Uncached):  # pragma: no cover - only cached_only returns it
            raise AssertionError("unreachable")
        return found

    def _one_from_cache(
        self, s: Session, where: str, params: Sequence[Any], thread_value: Any
    ) -> CheckpointTuple | _Gone | _Uncached | None:
        """:meth:`_one_with_writes` for a caller outside a read snapshot: the one statement
        and nothing more -- :data:`UNCACHED` when the answer would need another read (the
        checkpoint's content, or the thread's key scope for a sealed write), since a second
        read could see a later state than the statement did (a prune or GC in between);
        the caller then asks again inside a snapshot."""
        return self._one(s, where, params, thread_value, cached_only=True)

    def _one(
        self,
        s: Session,
        where: str,
        params: Sequence[Any],
        thread_value: Any,
        *,
        cached_only: bool,
    ) -> CheckpointTuple | _Gone | _Uncached | None:
        digest = "w.digest" if self._digest_sql == "digest" else "NULL"
        # Whether ckptdb still holds the checkpoint is asked in the same statement, through
        # the public ``checkpoints`` view (an indexed lookup by id).
        found = s.execute(
            "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,"
            " c.ckpt_id, w.task_id, w.channel, w.type, w.value, w.task_path, w.idx,"
            f" {digest}, w.write_id,"
            " EXISTS (SELECT 1 FROM checkpoints k WHERE k.checkpoint_id = c.ckpt_id)"
            f" FROM (SELECT {_ROW_COLUMNS} FROM lg_checkpoint WHERE {where}"
            " ORDER BY checkpoint_id DESC LIMIT 1) c LEFT JOIN lg_write w"
            " ON w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns"
            " AND w.checkpoint_id = c.checkpoint_id",
            params,
        )
        if not found:
            return None
        row = _row(found[0])
        if found[0][13] != 1:
            return GONE  # collected outside the saver (e.g. `ckptdb gc`)
        hot = self._cache.spliced(row.ckpt_id)
        if cached_only and (hot is None or not self._scope_known(row, found)):
            return UNCACHED
        writes = self._pending([(*f[:3], *f[5:12]) for f in found if f[12] is not None])
        tuples = self._tuples(
            s, [row], thread_value, writes=writes, present={row.ckpt_id}, hot={row.ckpt_id: hot}
        )
        return tuples[0] if tuples else GONE

    def _scope_known(self, row: _Row, found: Sequence[Row]) -> bool:
        """Whether the writes of ``row`` (``found``) open without another read: none is
        sealed, or the thread's namespace and its key scope are already known."""
        if any(isinstance(f[7], str) and f[7].startswith(SEALED_TYPE) for f in found):
            namespace = self._thread_namespaces.get((row.thread_id, row.checkpoint_ns))
            return namespace is not None and namespace in self._sealers
        return True

    def _load(self, checkpoint_id: str) -> tuple[Loaded, dict[str, bytes]] | None:
        """Read (and verify, through ckptdb) one checkpoint's content and cache it; None
        when it no longer exists."""
        try:
            cp = self.db.get(checkpoint_id)
        except errors.CheckpointNotFoundError:
            return None  # collected outside the saver (e.g. `ckptdb gc`): treat as gone
        stored_meta = cp.metadata.get("langgraph")
        env = _layout.decode_envelope(cp.read(_layout.ENVELOPE_ENTRY), cp.id)
        blobs: dict[str, bytes] = {}
        refs: dict[str, tuple[str, str]] = {}
        for ch, (entry, type_) in env.blobs.items():
            digest = cp.ref(entry).digest
            blobs[digest] = cp.read(entry)
            refs[ch] = (type_, digest)
        loaded = Loaded(
            json.dumps(stored_meta if isinstance(stored_meta, dict) else {}),
            env.checkpoint,
            env.values,
            refs,
        )
        self._cache.put(cp.id, loaded, blobs)
        return loaded, blobs

    def _content(
        self, ckpt_id: str, hot: tuple[Loaded, bytes] | None = None
    ) -> tuple[Loaded, Callable[[], Checkpoint]] | None:
        """The verified content of a ckptdb checkpoint (cached, or read and verified once)
        and how to build a fresh LangGraph checkpoint of it (deserialized on every call, so
        callers never share objects); None when the checkpoint no longer exists. ``hot``:
        its spliced cache entry if the caller already took it."""
        if hot is None:
            hot = self._cache.spliced(ckpt_id)
        if hot is not None:
            return hot[0], lambda: self._checkpoint_of(hot[1])
        hit = self._cache.get(ckpt_id) or self._load(ckpt_id)
        if hit is None:
            return None
        loaded, blobs = hit
        spliced = _spliced(loaded.checkpoint, loaded.values, loaded.blobs, blobs)
        if spliced is not None:
            self._cache.put_spliced(ckpt_id, spliced)
            return loaded, lambda: self._checkpoint_of(spliced)

        def build() -> Checkpoint:
            checkpoint = cast(Checkpoint, self._loads(*loaded.checkpoint))
            values = {ch: self._loads(t, d) for ch, (t, d) in loaded.values.items()}
            for ch, (type_, digest) in loaded.blobs.items():
                values[ch] = self._loads(type_, blobs[digest])
            checkpoint["channel_values"] = values
            return checkpoint

        return loaded, build

    def _checkpoint_of(self, spliced: bytes) -> Checkpoint:
        checkpoint = self._loads("msgpack", spliced)
        if not isinstance(checkpoint, dict):  # pragma: no cover - splice checks the map
            raise errors.CorruptionError("a stored LangGraph checkpoint is not a map")
        return cast(Checkpoint, checkpoint)

    def _tuples(
        self,
        s: Session,
        rows: Sequence[_Row],
        thread_value: Any,
        wanted: dict[str, Any] | None = None,
        *,
        writes: dict[tuple[str, str, str], builtins.list[PendingWrite]] | None = None,
        present: set[str] | None = None,
        hot: dict[str, tuple[Loaded, bytes] | None] | None = None,
    ) -> builtins.list[CheckpointTuple]:
        """The checkpoints of ``rows`` that still exist and whose metadata contains
        ``wanted``, in order. Within the caller's read snapshot: one statement asks which
        ckptdb checkpoints exist, one reads every pending write; content comes from the
        verified cache, or is read and verified once (then cached). ``present``: the
        ckptdb ids the caller already knows exist in this snapshot; ``hot``: spliced cache
        entries the caller already took (so one that another thread evicts meanwhile is
        not read again)."""
        if present is None:
            present = self.db.existing({r.ckpt_id for r in rows}) if rows else set()
        kept: builtins.list[tuple[_Row, Checkpoint, dict[str, Any]]] = []
        for row in rows:
            if row.ckpt_id not in present:
                continue
            content = self._content(row.ckpt_id, None if hot is None else hot.get(row.ckpt_id))
            if content is None:
                continue
            loaded, build = content
            metadata = metadata_from_json(loaded.metadata, row.ckpt_id)
            if wanted and not all(metadata.get(k) == v for k, v in wanted.items()):
                continue
            kept.append((row, build(), metadata))
        if writes is None:
            writes = self._writes_of(s, [k[0] for k in kept]) if kept else {}
        out: builtins.list[CheckpointTuple] = []
        for row, checkpoint, metadata in kept:
            config: RunnableConfig = {
                "configurable": {
                    "thread_id": thread_value if thread_value is not None else row.thread_id,
                    "checkpoint_ns": row.checkpoint_ns,
                    "checkpoint_id": row.checkpoint_id,
                }
            }
            parent: RunnableConfig | None = None
            if row.parent_id:
                parent = {
                    "configurable": {
                        "thread_id": config["configurable"]["thread_id"],
                        "checkpoint_ns": row.checkpoint_ns,
                        "checkpoint_id": row.parent_id,
                    }
                }
            key = (row.thread_id, row.checkpoint_ns, row.checkpoint_id)
            out.append(
                CheckpointTuple(
                    config,
                    checkpoint,
                    cast(CheckpointMetadata, metadata),
                    parent,
                    writes.get(key, []),
                )
            )
        return out

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
        self,
        checkpoint: Checkpoint,
        parent: str | None,
        key: tuple[str, str],
        namespace: str,
    ) -> tuple[dict[str, bytes | BlobRef], dict[str, BlobRef], _Encoded]:
        """The entries of a ckptdb checkpoint holding ``checkpoint``, the blob of each
        channel stored as its own entry (remembered for the next put on the thread), and
        the same content as the read cache keeps it.

        A channel value whose bytes are those this saver last stored for the channel on the
        same thread is sent as a BlobRef: ckptdb re-uses the stored blob without receiving,
        hashing or comparing the bytes again. The decision is by content, never by
        LangGraph's channel versions, so a caller that changes a value without bumping its
        version is still stored exactly: equal to the bytes of that blob held in the verified
        cache (which hash to its digest), or else by sha256.
        """
        body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        previous = self._channels.get(key, {})
        values: dict[str, tuple[str, bytes | BlobRef]] = {}
        remembered: dict[str, BlobRef] = {}
        inline: dict[str, _layout.Typed] = {}
        refs: dict[str, tuple[str, str]] = {}
        blob_bytes: dict[str, bytes] = {}
        for channel, value in checkpoint.get("channel_values", {}).items():
            type_, data = self._dumps(value)
            if len(data) <= self.inline_max:
                values[channel] = (type_, data)
                inline[channel] = (type_, data)
                continue
            before = previous.get(channel)
            if before is not None and before.size == len(data):
                known = self._cache.blob(before.digest)
                if known is not None and known == data:
                    # The very bytes of a verified blob (so of its digest): no hashing.
                    remembered[channel] = before
                    refs[channel] = (type_, before.digest)
                    blob_bytes[before.digest] = known
                    values[channel] = (type_, before)
                    continue
            ref = BlobRef(self._address(namespace, data), len(data))
            remembered[channel] = ref
            refs[channel] = (type_, ref.digest)
            blob_bytes[ref.digest] = data
            values[channel] = (type_, ref if before == ref else data)
        typed_body = self._dumps(body)
        entries = _layout.build_entries(typed_body, parent, values, self.inline_max)
        return entries, remembered, _Encoded(typed_body, inline, refs, blob_bytes)

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
                check_owner(session, namespace, thread_id, ns)
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

    def _holds_others(self, namespace: str, thread_id: str, ns: str) -> bool:
        """Whether ``namespace`` holds a checkpoint that another pair's rows still use."""
        with self.db.read_session() as s:
            found = s.scalar(
                "SELECT 1 FROM lg_checkpoint l JOIN checkpoints k ON k.checkpoint_id = l.ckpt_id"
                " WHERE k.namespace = ? AND NOT (l.thread_id = ? AND l.checkpoint_ns = ?)"
                " LIMIT 1",
                (namespace, thread_id, ns),
            )
        return found is not None

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
        if self._shared_pending and self._holds_others(namespace, thread_id, ns):
            log.warning(
                "kept ckptdb namespace %s: it still holds checkpoints of another LangGraph "
                "thread (a file written before langgraph schema version 3 whose threads are "
                "not separated yet; reopen the saver read-write with the keys it needs)",
                namespace,
            )
            return
        self._registered.discard(namespace)
        self._thread_namespaces.pop((thread_id, ns), None)
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
