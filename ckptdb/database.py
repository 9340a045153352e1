"""The public API: :func:`open` and :class:`Database`."""

from __future__ import annotations

import io
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import IO, Any, Literal

from . import blobs, catalog, errors, files, gc, migrate, models, pins, stats, transfer, validation
from . import checkout as checkout_module
from .blobs import BlobStore, Entry, PreparedEntry
from .checkpoint import Checkpoint
from .connection import (
    APPLICATION_ID,
    DEFAULT_BUSY_TIMEOUT,
    DEFAULT_PAGE_SIZE,
    Connection,
    Synchronous,
    ensure_wal,
    initialize_new_file,
    open_connection,
    open_probe,
)
from .extension import Session
from .fallback import LoadResult, Validator, load_with_fallback
from .publish import UNSET, CommitPlan, _Unset, build_ack, confirm, move_pointer, publish
from .receipts import list_receipts, store_receipt
from .retention import RetentionPolicy, duration_seconds
from .verify import verify_database

MigrateMode = Literal["auto", "never", "check"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def open(
    path: str | os.PathLike[str],
    *,
    readonly: bool = False,
    create: bool = True,
    migrate: MigrateMode = "auto",
    synchronous: Synchronous = "full",
    busy_timeout: float | None = DEFAULT_BUSY_TIMEOUT,
    chunk_size: int | None = None,
    page_size: int | None = None,
    max_metadata_bytes: int = validation.DEFAULT_MAX_METADATA_BYTES,
    vfs: str | None = None,
    virtual: bool = False,
) -> Database:
    """Open (or create) a ckptdb database file.

    A missing or empty file is created owner-only (0600) and initialized. An existing file
    is checked before SQLite may write to it: a non-SQLite, truncated, foreign or newer
    file, or one whose applied migrations were edited, raises a
    :class:`~ckptdb.errors.DatabaseFileError` or :class:`~ckptdb.errors.SchemaError` and is
    left byte-for-byte unchanged.

    ``migrate``: ``"auto"`` applies pending schema migrations (default); ``"never"`` refuses
    a file that needs them (MigrationPendingError listing them); ``"check"`` opens without
    applying them, for inspection (``migration_status``) only.
    ``synchronous``: ``"full"`` (default) makes every acknowledged commit durable across
    power loss; ``"normal"`` is faster but may lose the last commits on power loss.
    ``busy_timeout``: seconds to wait for another writer (None waits forever).
    ``chunk_size`` and ``page_size`` apply only when the file is created.
    ``virtual``: ``path`` is a name that ``vfs`` resolves (e.g. a Litestream replica read
    through litestream-vfs), not a local file: the local-file checks are skipped and the
    application id and migration history are checked through the VFS instead. Read-only.
    """
    return Database._open(
        os.fspath(path),
        readonly=readonly,
        create=create,
        migrate_mode=migrate,
        synchronous=synchronous,
        busy_timeout=busy_timeout,
        chunk_size=chunk_size,
        page_size=page_size,
        max_metadata_bytes=max_metadata_bytes,
        vfs=vfs,
        virtual=virtual,
    )


def _probe_existing(path: str, facts: files.HeaderFacts) -> bool:
    """Check an existing SQLite file through a read-only connection. Returns True when the
    file is an uninitialized shell (created by a ckptdb that crashed before its first
    migration committed) that may be initialized."""
    probe = open_probe(path)
    try:
        app_id = int(probe.pragma("application_id")) & 0xFFFFFFFF
        objects = int(probe.scalar("SELECT count(*) FROM sqlite_schema"))
        if app_id != APPLICATION_ID:
            if app_id == 0 and objects == 0:
                return True
            raise errors.NotCkptdbError(
                f"{path} is an SQLite database of another application (application_id "
                f"{app_id:#x}, {objects} schema objects); ckptdb will not touch it. Choose a new "
                "file name for a ckptdb database."
            )
        migrate.check_history(probe, migrate.core_set())
        return False
    finally:
        probe.close()


class Database:
    """A ckptdb database file. Obtain one with :func:`ckptdb.open`; use as a context manager.

    A handle may be shared between threads (operations are serialized); separate processes
    each open their own handle on the same file.
    """

    def __init__(
        self,
        conn: Connection,
        *,
        path: str,
        chunk_size: int,
        max_metadata_bytes: int,
        pending: list[migrate.Migration],
        reopen: Callable[[], Connection],
        vfs: str | None = None,
    ) -> None:
        self._conn = conn
        self._path = path
        self._chunk_size = chunk_size
        self._max_metadata_bytes = max_metadata_bytes
        self._pending = pending
        self._reopen = reopen
        self._vfs = vfs
        self._lock = threading.RLock()
        self._closed = False
        self._broken = False
        self._blobs = BlobStore(conn, chunk_size)

    # -- opening and closing -----------------------------------------------------------

    @classmethod
    def _open(
        cls,
        path: str,
        *,
        readonly: bool,
        create: bool,
        migrate_mode: MigrateMode,
        synchronous: Synchronous,
        busy_timeout: float | None,
        chunk_size: int | None,
        page_size: int | None,
        max_metadata_bytes: int,
        vfs: str | None,
        virtual: bool = False,
    ) -> Database:
        if migrate_mode not in ("auto", "never", "check"):
            raise errors.InvalidInputError(
                f"migrate must be 'auto', 'never' or 'check', not {migrate_mode!r}"
            )
        if synchronous not in ("off", "normal", "full", "extra"):
            raise errors.InvalidInputError(
                f"synchronous must be 'full', 'normal', 'extra' or 'off', not {synchronous!r}"
            )
        if not isinstance(path, str):
            raise errors.InvalidInputError(
                f"the database path must be a str or os.PathLike[str], not {type(path).__name__}"
            )
        if validation.has_surrogate(path):
            raise errors.InvalidInputError(
                f"the database path {path!r} holds bytes that are not UTF-8; SQLite names "
                "files in UTF-8. Rename the file or directory, or choose another path."
            )
        if chunk_size is not None and not (
            isinstance(chunk_size, int)
            and blobs.MIN_CHUNK_SIZE <= chunk_size <= blobs.MAX_CHUNK_SIZE
        ):
            raise errors.InvalidInputError(
                f"chunk_size must be between {blobs.MIN_CHUNK_SIZE} and {blobs.MAX_CHUNK_SIZE}"
            )
        if page_size is not None and (
            not isinstance(page_size, int)
            or page_size < 4096
            or page_size > 65536
            or page_size & (page_size - 1)
        ):
            raise errors.InvalidInputError("page_size must be a power of two from 4096 to 65536")

        if virtual and not (readonly and vfs):
            raise errors.InvalidInputError("virtual=True needs readonly=True and a vfs name")
        if virtual:
            return cls._open_virtual(path, vfs or "", busy_timeout, max_metadata_bytes)
        path = os.path.abspath(path)
        kind, facts = files.inspect_path(path)
        if kind is files.FileKind.MISSING:
            if readonly or not create:
                raise errors.DatabaseFileError(
                    f"{path} does not exist; create it with ckptdb.open(path) or `ckptdb init`"
                )
            files.create_private_file(path)
            kind, facts = files.inspect_path(path)
        fresh = kind is files.FileKind.EMPTY
        if kind is files.FileKind.SQLITE:
            assert facts is not None
            if facts.application_id not in (0, APPLICATION_ID):
                raise errors.NotCkptdbError(
                    f"{path} is an SQLite database of another application (application_id "
                    f"{facts.application_id:#x}); ckptdb will not touch it"
                )
            fresh = _probe_existing(path, facts)
        if fresh and readonly:
            raise errors.DatabaseFileError(f"{path} is empty; it is not a ckptdb database yet")

        def connect() -> Connection:
            return open_connection(
                path,
                readonly=readonly,
                synchronous=synchronous,
                busy_timeout=busy_timeout,
                vfs=vfs,
            )

        conn = connect()
        try:
            core = migrate.core_set()
            if fresh:
                initialize_new_file(conn, page_size or DEFAULT_PAGE_SIZE)
            elif not readonly:
                ensure_wal(conn)
            pending = migrate.check_history(conn, core)
            if pending and migrate_mode == "never":
                names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
                raise errors.MigrationPendingError(
                    f"{path} is at schema version {migrate.user_version(conn)} and needs "
                    f"migrations {names}; open it with migrate='auto' or run "
                    "`ckptdb migrate DB up`",
                    pending=[m.version for m in pending],
                )
            if pending and migrate_mode == "auto":
                if readonly:
                    raise errors.MigrationPendingError(
                        f"{path} needs schema migrations but was opened read-only; open it "
                        "read-write once (or run `ckptdb migrate DB up`)",
                        pending=[m.version for m in pending],
                    )
                migrate.apply_pending(conn, core)
                pending = []
            if fresh:
                size = chunk_size or blobs.DEFAULT_CHUNK_SIZE
                with conn.write_transaction():
                    conn.execute(
                        "INSERT OR IGNORE INTO setting (key, value) VALUES ('chunk_size', ?)",
                        (str(size),),
                    )
            effective_chunk = (
                blobs.DEFAULT_CHUNK_SIZE
                if pending
                else catalog.chunk_size(conn, blobs.MIN_CHUNK_SIZE, blobs.MAX_CHUNK_SIZE)
            )
        except BaseException:
            conn.abandon()
            raise
        return cls(
            conn,
            path=path,
            chunk_size=effective_chunk,
            max_metadata_bytes=max_metadata_bytes,
            pending=pending,
            reopen=connect,
            vfs=vfs,
        )

    @classmethod
    def _open_virtual(
        cls, name: str, vfs: str, busy_timeout: float | None, max_metadata_bytes: int
    ) -> Database:
        """Open a name that ``vfs`` serves, read-only: the probe runs through the VFS."""

        def connect() -> Connection:
            return open_connection(name, readonly=True, busy_timeout=busy_timeout, vfs=vfs)

        conn = connect()
        try:
            app_id = int(conn.pragma("application_id")) & 0xFFFFFFFF
            if app_id != APPLICATION_ID:
                raise errors.NotCkptdbError(
                    f"{name} (through the {vfs} VFS) is not a ckptdb database (application_id "
                    f"{app_id:#x})"
                )
            pending = migrate.check_history(conn, migrate.core_set())
            if pending:
                raise errors.MigrationPendingError(
                    f"{name} (through the {vfs} VFS) needs schema migrations; migrate the "
                    "primary (`ckptdb migrate DB up`) and let it replicate",
                    pending=[m.version for m in pending],
                )
            chunk = catalog.chunk_size(conn, blobs.MIN_CHUNK_SIZE, blobs.MAX_CHUNK_SIZE)
        except BaseException:
            conn.abandon()
            raise
        return cls(
            conn,
            path=name,
            chunk_size=chunk,
            max_metadata_bytes=max_metadata_bytes,
            pending=[],
            reopen=connect,
            vfs=vfs,
        )

    def close(self) -> None:
        """Close the database. Further calls raise ClosedError; closing twice is fine."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
            return
        # An error is already propagating: closing must not replace it.
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.abandon()

    @property
    def path(self) -> str:
        """The database file path."""
        return self._path

    @property
    def chunk_size(self) -> int:
        """Chunk size of this file in bytes (fixed at creation)."""
        return self._chunk_size

    @property
    def lock_waits(self) -> tuple[int, float]:
        """Diagnostics: how many times this handle waited for another connection's lock,
        and for how many seconds in all (WAL readers should show zero)."""
        waits = self._conn.lock_waits
        return waits.waits, waits.seconds

    @property
    def readonly(self) -> bool:
        """True when opened read-only."""
        return self._conn.readonly

    @contextmanager
    def _use(self, *, write: bool = False, schema_work: bool = False) -> Iterator[Connection]:
        with self._lock:
            if self._closed:
                raise errors.ClosedError("the database handle is closed; open it again")
            if self._pending and not schema_work:
                raise errors.MigrationPendingError(
                    f"{self._path} needs schema migrations "
                    f"{[m.version for m in self._pending]} before it can be used; open it with "
                    "migrate='auto' or run `ckptdb migrate DB up`"
                )
            if self._broken:
                # A failed COMMIT could not be resolved on a fresh connection; try again now.
                self._conn = self._reopen()
                self._blobs = BlobStore(self._conn, self._chunk_size)
                self._broken = False
            if write and self._conn.readonly:
                raise errors.ReadOnlyError(f"{self._path} was opened read-only")
            yield self._conn

    # -- committing ------------------------------------------------------------------------

    def commit(
        self,
        namespace: str,
        entries: Mapping[str, Any],
        *,
        metadata: Mapping[str, Any] | None = None,
        expect_current: str | _Unset | None = UNSET,
        reason: str = "commit",
        base: str | None = None,
        on_publish: Callable[[Session, models.CommitAck], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> models.CommitAck:
        """Publish a checkpoint atomically and move the namespace's CURRENT to it.

        ``entries`` maps names (POSIX relative paths) to bytes, str, a path, a binary file
        object or :class:`ckptdb.Entry`. ``expect_current`` turns the commit into a
        compare-and-swap: pass the id you expect CURRENT to be (or None for "the namespace
        must be empty"); on mismatch ConflictError names both ids and nothing is written.

        Idempotent: committing content identical to CURRENT's (on the same parent) returns
        CURRENT's id with ``created=False``; a retry after CommitOutcomeUnknownError
        therefore converges whether or not the first attempt landed.

        ``base`` commits on top of an older checkpoint of the namespace instead of CURRENT
        (a branch, e.g. resuming from an earlier state); CURRENT still moves to the new
        checkpoint. ``on_publish(session, ack)`` runs inside the commit transaction, after
        the pointer moved and before COMMIT, so an integration can write its own rows
        atomically with the checkpoint (see :meth:`write_session`). ``progress(done, total)``
        is called as entries are hashed and staged.
        """
        ns = validation.namespace(namespace)
        metadata_json = validation.metadata(metadata, self._max_metadata_bytes)
        if not isinstance(expect_current, _Unset) and expect_current is not None:
            validation.checkpoint_id(expect_current)
        if base is not None:
            validation.checkpoint_id(base)
        if not isinstance(reason, str) or not reason or len(reason) > 200:
            raise errors.InvalidInputError("reason must be a non-empty str of at most 200 chars")
        if not isinstance(entries, Mapping):
            raise errors.InvalidEntryError(
                f"entries must be a mapping of name -> value, got {type(entries).__name__}"
            )
        if len(entries) > validation.MAX_ENTRIES:
            raise errors.InvalidEntryError(
                f"{len(entries)} entries; a checkpoint holds at most {validation.MAX_ENTRIES}"
            )
        names = sorted(validation.entry_name(n) for n in entries)
        validation.entry_names_consistent(names)
        with self._use(write=True) as conn:
            now = _now_ms()
            budget = [blobs.INLINE_BUDGET]
            prepared: list[PreparedEntry] = []
            for name in names:
                value = entries[name]
                media_type = schema = None
                if isinstance(value, Entry):
                    media_type, schema, value = value.media_type, value.schema, value.value
                blob = self._blobs.prepare(value, budget, now)
                prepared.append(PreparedEntry(name, blob, media_type, schema))
                if progress is not None:
                    progress(len(prepared), len(names))
            plan = CommitPlan(
                ns,
                prepared,
                metadata_json,
                expect_current,
                reason,
                base=base,
                on_publish=on_publish,
            )
            try:
                with conn.write_transaction():
                    return publish(conn, self._blobs, plan, _now_ms())
            except errors.CommitOutcomeUnknownError as exc:
                return self._resolve_unknown_outcome(plan, exc)

    def _resolve_unknown_outcome(
        self, plan: CommitPlan, failure: errors.CommitOutcomeUnknownError
    ) -> models.CommitAck:
        """COMMIT failed: reopen, read CURRENT, and acknowledge only what a successful
        commit has since made durable."""
        try:
            self._conn.close()
            self._conn = self._reopen()
            self._blobs = BlobStore(self._conn, self._chunk_size)
            conn = self._conn
            with conn.write_transaction():
                ptr = catalog.pointer(conn, plan.namespace)
                landed = ptr is not None and ptr.current_id == plan.attempted_id
                if landed:
                    assert ptr is not None
                    confirm(conn, ptr, _now_ms())
        except errors.CkptdbError as exc:
            self._broken = True
            raise errors.CommitOutcomeUnknownError(
                f"{failure} Confirming it after reopening failed too ({exc}).",
                namespace=plan.namespace,
                checkpoint_id=plan.attempted_id,
            ) from exc
        if not landed:
            raise errors.CommitOutcomeUnknownError(
                f"COMMIT failed ({failure.__cause__}); after reopening, CURRENT of "
                f"{plan.namespace!r} does not name {str(plan.attempted_id)[:12]}. Retry the "
                "commit: a retry converges on the same checkpoint whether or not this attempt "
                "reaches the disk later.",
                namespace=plan.namespace,
                checkpoint_id=plan.attempted_id,
            ) from failure
        assert ptr is not None
        summary = ptr.current_summary()
        return build_ack(
            plan,
            ptr.current_id,
            summary.parent_id,
            summary.generation,
            ptr.revision,
            created=True,
            stored=0,
            now_ms=ptr.updated_at_ms,
        )

    def set_current(
        self,
        namespace: str,
        checkpoint_id: str,
        *,
        expect_current: str | _Unset | None = UNSET,
        reason: str = "set_current",
    ) -> models.Pointer:
        """Explicitly move CURRENT to an existing checkpoint of the namespace (e.g. roll back
        to a verified ancestor). The move is recorded in the pointer history."""
        ns = validation.namespace(namespace)
        validation.checkpoint_id(checkpoint_id)
        with self._use(write=True) as conn, conn.write_transaction():
            target = catalog.require_checkpoint(conn, checkpoint_id)
            if target.namespace != ns:
                raise errors.InvalidReferenceError(
                    f"checkpoint {checkpoint_id[:12]} belongs to namespace "
                    f"{target.namespace!r}, not {ns!r}"
                )
            ptr = catalog.pointer(conn, ns)
            current = ptr.current_id if ptr else None
            if not isinstance(expect_current, _Unset) and expect_current != current:
                raise errors.ConflictError(
                    f"namespace {ns!r}: expected CURRENT {expect_current} but it is {current}",
                    expected=expect_current,
                    actual=current,
                )
            move_pointer(
                conn,
                namespace=ns,
                namespace_id=target.namespace_id,
                previous=ptr,
                new_seq=target.seq,
                new_id=target.id,
                reason=reason,
                now_ms=_now_ms(),
            )
            new = catalog.pointer(conn, ns)
            assert new is not None
            return _pointer_model(new)

    # -- reading -----------------------------------------------------------------------------

    def _handle(self, conn: Connection, row: catalog.CheckpointRow) -> Checkpoint:
        return Checkpoint(self, row, catalog.entries_of(conn, row.seq))

    def current(self, namespace: str) -> Checkpoint | None:
        """The CURRENT checkpoint of a namespace, or None when it has none.

        Raises CorruptionError if its manifest no longer matches its id."""
        ns = validation.namespace(namespace)
        with self._use() as conn, conn.read_transaction():
            ptr = catalog.pointer(conn, ns)
            if ptr is None:
                return None
            catalog.check_pointer(ptr)
            row = catalog.checkpoint_by_id(conn, ptr.current_id)
            if row is None:  # the pointer joined it by seq: the index on ids is damaged
                raise errors.CorruptionError(
                    f"CURRENT of {ns!r} names {ptr.current_id[:12]}, which cannot be found by "
                    "its id (a damaged index). Run `ckptdb verify`; load with fallback=True "
                    "still finds it or an intact ancestor.",
                    namespace=ns,
                    checkpoint_id=ptr.current_id,
                    reason="current_missing",
                )
            return self._handle(conn, row)

    def get(self, checkpoint_id: str) -> Checkpoint:
        """Any stored checkpoint by full id (see :meth:`resolve` for short forms)."""
        with self._use() as conn, conn.read_transaction():
            return self._handle(conn, catalog.require_checkpoint(conn, checkpoint_id))

    def pointer(self, namespace: str) -> models.Pointer | None:
        """The CURRENT pointer of a namespace (ids, revision, digest), or None."""
        ns = validation.namespace(namespace)
        with self._use() as conn:
            ptr = catalog.pointer(conn, ns)
            return None if ptr is None else _pointer_model(ptr)

    def history(self, namespace: str, *, limit: int | None = None) -> list[models.PointerMove]:
        """Every move of the namespace's CURRENT pointer, newest first."""
        ns = validation.namespace(namespace)
        with self._use() as conn:
            return [
                models.PointerMove(
                    namespace=h.namespace,
                    revision=h.revision,
                    current_id=h.current_id,
                    fallback_id=h.fallback_id,
                    previous_digest=h.previous_digest,
                    digest=h.digest,
                    reason=h.reason,
                    at=models.from_ms(h.at_ms),
                )
                for h in catalog.history(conn, ns, limit)
            ]

    def lineage(self, namespace: str, *, limit: int | None = None) -> list[models.CheckpointInfo]:
        """CURRENT and its stored ancestors, newest first, following parent links."""
        ns = validation.namespace(namespace)
        with self._use() as conn, conn.read_transaction():
            return [cp.info for cp in self._lineage(conn, ns, limit)]

    def _lineage(self, conn: Connection, ns: str, limit: int | None) -> list[Checkpoint]:
        """CURRENT and its stored ancestors, each manifest checked against its id, so every
        parent link followed is one an id vouches for. Damage anywhere along the way raises
        CorruptionError rather than ending the lineage early or leaving the namespace."""
        ptr = catalog.pointer(conn, ns)
        if ptr is None:
            return []
        catalog.check_pointer(ptr)
        out: list[Checkpoint] = []
        for row in catalog.lineage(conn, ptr.current_id, limit):
            cp = self._handle(conn, row)
            catalog.check_namespace(ns, cp.namespace, cp.id)
            out.append(cp)
        if not out:
            raise errors.CorruptionError(
                f"CURRENT of {ns!r} names {ptr.current_id[:12]}, which cannot be read; run "
                "`ckptdb verify`",
                checkpoint_id=ptr.current_id,
                reason="current_missing",
            )
        last = out[-1].parent_id
        cut_short = limit is None or len(out) < limit
        # Stored, yet not reached: the walk stopped at a damaged row.
        if cut_short and last is not None and catalog.checkpoint_by_id(conn, last) is not None:
            raise errors.CorruptionError(
                f"the lineage of {ns!r} stops at {out[-1].id[:12]} although its parent "
                f"{last[:12]} is stored; the parent's row is damaged. Run `ckptdb verify`.",
                checkpoint_id=last,
                reason="lineage_broken",
            )
        return out

    def namespaces(self) -> list[models.NamespaceInfo]:
        """Every namespace that has a CURRENT pointer, by name."""
        with self._use() as conn, conn.read_transaction():
            counts = catalog.checkpoint_counts(conn)
            return [
                models.NamespaceInfo(
                    name=p.namespace,
                    current_id=p.current_id,
                    fallback_id=p.fallback_id,
                    generation=p.current_summary().generation,
                    revision=p.revision,
                    checkpoint_count=counts.get(p.namespace_id, 0),
                    updated_at=models.from_ms(p.updated_at_ms),
                )
                for p in catalog.all_pointers(conn)
            ]

    def resolve(self, ref: str) -> str:
        """Turn a reference into a full checkpoint id.

        Accepts a full id, a unique hex prefix of at least 8 characters, ``NS@current``,
        ``NS@fallback`` or ``NS~N`` (N generations back from CURRENT along the lineage).
        """
        if not isinstance(ref, str) or not ref:
            raise errors.InvalidReferenceError("empty checkpoint reference")
        with self._use() as conn, conn.read_transaction():
            for suffix in ("@current", "@fallback"):
                if ref.endswith(suffix) and len(ref) > len(suffix):
                    ns = validation.namespace(ref[: -len(suffix)])
                    ptr = catalog.pointer(conn, ns)
                    if ptr is None:
                        raise errors.NamespaceNotFoundError(f"namespace {ns!r} has no CURRENT")
                    catalog.check_pointer(ptr)  # both ids are sealed by the pointer digest
                    target = ptr.current_id if suffix == "@current" else ptr.fallback_id
                    if target is None:
                        raise errors.NotFoundError(f"namespace {ns!r} has no fallback yet")
                    return target
            head, sep, tail = ref.rpartition("~")
            if sep and head and tail.isdigit():
                ns = validation.namespace(head)
                back = int(tail)
                if catalog.pointer(conn, ns) is None:
                    raise errors.NamespaceNotFoundError(f"namespace {ns!r} has no CURRENT")
                walk = self._lineage(conn, ns, back + 1)
                if len(walk) <= back:
                    raise errors.CheckpointNotFoundError(
                        f"{ref}: the stored lineage of {ns!r} is only {len(walk)} deep"
                    )
                return walk[back].id
            lowered = ref.lower()
            if validation.is_full_id(lowered):
                catalog.require_checkpoint(conn, lowered)
                return lowered
            if len(lowered) >= 8 and all(c in "0123456789abcdef" for c in lowered):
                found = catalog.checkpoint_ids_by_prefix(conn, lowered)
                if not found:
                    raise errors.CheckpointNotFoundError(f"no checkpoint id starts with {ref!r}")
                if len(found) > 1:
                    raise errors.InvalidReferenceError(
                        f"{ref!r} matches several checkpoints; give more characters"
                    )
                return found[0]
        raise errors.InvalidReferenceError(
            f"{ref!r} is not a checkpoint reference: give a full id, a unique prefix of at "
            "least 8 hex characters, NS@current, NS@fallback or NS~N"
        )

    # -- entry bytes (used by Checkpoint) ----------------------------------------------------

    def _read_entry(self, cp: Checkpoint, entry: catalog.EntryRow) -> bytes:
        where = {"checkpoint_id": cp.id, "entry": entry.name}
        with self._use() as conn, conn.read_transaction():
            return self._blobs.read_all(entry.blob_id, entry.digest, entry.size, where)

    def _open_entry(self, cp: Checkpoint, entry: catalog.EntryRow) -> IO[bytes]:
        if entry.chunk_count == 0:
            return io.BytesIO(self._read_entry(cp, entry))
        where = {"checkpoint_id": cp.id, "entry": entry.name}
        return io.BufferedReader(_LockedReader(self, entry, where), buffer_size=256 * 1024)

    def _iter_entry(self, cp: Checkpoint, entry: catalog.EntryRow) -> Iterator[bytes]:
        if entry.chunk_count == 0:
            yield self._read_entry(cp, entry)
            return
        where = {"checkpoint_id": cp.id, "entry": entry.name}
        reader = _LockedReader(self, entry, where)
        try:
            yield from reader.iter_chunks()
        finally:
            reader.close()

    # -- load with fallback ---------------------------------------------------------------

    def load(
        self,
        namespace: str,
        *,
        fallback: bool = False,
        validator: Validator | None = None,
    ) -> LoadResult:
        """Load CURRENT after verifying its manifest and every byte of every entry.

        Without ``fallback`` any corruption (or a rejection by ``validator``) raises. With
        ``fallback=True`` the lineage is walked from CURRENT along parent links and the first
        checkpoint that verifies and that the validator accepts is returned with
        ``disposition="degraded_fallback"`` and a stored receipt naming what was rejected
        and why. CURRENT itself is never moved (use :meth:`set_current` for that). When
        nothing is usable, NoUsableCheckpointError says so.

        ``validator(checkpoint)`` accepts by returning (anything but False); it rejects by
        returning False or raising an exception, whose message goes into the receipt.
        """
        ns = validation.namespace(namespace)
        with self._use() as conn:
            return load_with_fallback(self, conn, ns, fallback=fallback, validator=validator)

    def load_checkpoint(
        self,
        checkpoint_id: str,
        *,
        fallback: bool = False,
        validator: Validator | None = None,
    ) -> LoadResult:
        """Like :meth:`load`, starting from a given checkpoint instead of CURRENT: with
        ``fallback`` the newest verified ancestor along its lineage is returned."""
        with self._use() as conn:
            row = catalog.require_checkpoint(conn, checkpoint_id)
            return load_with_fallback(
                self,
                conn,
                row.namespace,
                fallback=fallback,
                validator=validator,
                start_id=row.id,
            )

    # -- verification --------------------------------------------------------------------

    def verify(
        self, *, quick: bool = False, progress: Callable[[str, int, int], None] | None = None
    ) -> models.VerifyReport:
        """Check the whole file: SQLite integrity, every chunk and blob digest, every
        manifest id, every pointer and its history chain. ``quick`` skips reading blob
        bytes (structure and manifests only). The report lists each problem found, with
        the checkpoint and entry affected; a receipt is stored.

        ``progress(phase, done, total)`` is called as the check advances."""
        with self._use() as conn:
            return verify_database(self, conn, quick=quick, progress=progress)

    # -- schema migrations ----------------------------------------------------------

    def migration_status(self) -> models.MigrationStatus:
        """The file's schema version, this code's, and the pending migrations."""
        with self._use(schema_work=True) as conn, conn.read_transaction():
            core = migrate.core_set()
            pending = migrate.check_history(conn, core)
            version = migrate.user_version(conn)
            sets = (
                {
                    str(name): int(v)
                    for name, v in conn.execute(
                        "SELECT migration_set, max(version) FROM ckptdb_migration"
                        " GROUP BY migration_set ORDER BY migration_set"
                    )
                }
                if version
                else {}
            )
        return models.MigrationStatus(
            path=self._path,
            file_version=version,
            code_version=core.latest,
            up_to_date=not pending,
            pending=[_migration_info(m, with_sql=False) for m in pending],
            sets=sets,
        )

    def migration_plan(self, *, to: int | None = None) -> list[models.MigrationInfo]:
        """The pending migrations (up to version ``to``) with the SQL each would run."""
        with self._use(schema_work=True) as conn, conn.read_transaction():
            pending = migrate.check_history(conn, migrate.core_set())
        return [_migration_info(m, with_sql=True) for m in pending if to is None or m.version <= to]

    def migration_history(self) -> list[models.MigrationInfo]:
        """Every applied migration of every set, oldest first."""
        with self._use(schema_work=True) as conn, conn.read_transaction():
            if not migrate.user_version(conn):
                return []
            rows = conn.execute(
                "SELECT migration_set, version, name, checksum, applied_at_ms, ckptdb_version"
                " FROM ckptdb_migration ORDER BY applied_at_ms, migration_set, version"
            )
        return [
            models.MigrationInfo(
                migration_set=r[0],
                version=r[1],
                name=r[2],
                checksum=r[3],
                applied_at=models.from_ms(r[4]),
                ckptdb_version=r[5],
            )
            for r in rows
        ]

    def migrate(
        self, *, to: int | None = None, backup: str | os.PathLike[str] | bool = True
    ) -> models.MigrationResult:
        """Apply pending core migrations (up to ``to``), each in its own transaction.

        Before anything changes, a consistent copy is taken with SQLite's online backup API
        (``backup=True``: beside the file, named with the version; a path: there; False: no
        backup) and verified. A migration that fails leaves the file at the last completed
        version and the error says how to restore the backup. Waits up to the busy timeout
        for another writer, then refuses with BusyTimeoutError."""
        with self._use(write=True, schema_work=True) as conn:
            core = migrate.core_set()
            pending = migrate.check_history(conn, core)
            start = migrate.user_version(conn)
            goal = core.latest if to is None else to
            if goal < start:
                raise errors.InvalidInputError(
                    f"cannot migrate down from version {start} to {goal}: migrations only go "
                    "forward (restore a backup instead)"
                )
            todo = [m for m in pending if m.version <= goal]
            if todo:
                # Wait for (or refuse because of) another writer before writing a backup.
                with conn.write_transaction():
                    pass
            backup_path: str | None = None
            if todo and backup is not False:
                backup_path = (
                    os.path.abspath(os.fspath(backup))
                    if not isinstance(backup, bool)
                    else f"{self._path}.v{start}.{time.strftime('%Y%m%dT%H%M%S')}.bak"
                )
                if os.path.lexists(backup_path):
                    raise errors.InvalidInputError(f"the backup path {backup_path} exists")
                files.create_private_file(backup_path)
                with conn.read_transaction():
                    conn.backup_to(backup_path)
                    migrate.verify_backup(conn, backup_path)
            applied: list[migrate.Migration] = []
            try:
                applied = migrate.apply_pending(conn, core, target=goal)
            except errors.CkptdbError as exc:
                done = migrate.user_version(conn)
                restore = (
                    f" To go back to version {start}, stop every process using the file, "
                    f"delete {self._path}-wal and {self._path}-shm if present, and copy "
                    f"{backup_path} over {self._path}."
                    if backup_path
                    else ""
                )
                raise errors.MigrationFailedError(
                    f"{exc} The database is at version {done}, complete and consistent.{restore}",
                    backup=backup_path,
                    version=done,
                ) from exc
            self._pending = migrate.check_history(conn, core)
            end = migrate.user_version(conn)
            receipt_id = None
            if applied:
                with conn.write_transaction():
                    receipt_id = store_receipt(
                        conn,
                        "migration",
                        {
                            "from_version": start,
                            "to_version": end,
                            "backup": backup_path,
                            "applied": [f"{m.version:04d}_{m.name}" for m in applied],
                        },
                        namespace=None,
                        checkpoint_id=None,
                        at_ms=_now_ms(),
                    )
            if not self._pending:
                self._chunk_size = catalog.chunk_size(
                    conn, blobs.MIN_CHUNK_SIZE, blobs.MAX_CHUNK_SIZE
                )
                self._blobs = BlobStore(conn, self._chunk_size)
        return models.MigrationResult(
            path=self._path,
            from_version=start,
            to_version=end,
            applied=[_migration_info(m, with_sql=False) for m in applied],
            backup_path=backup_path,
            backup_verified=backup_path is not None,
            receipt_id=receipt_id,
        )

    # -- extension points for integrations ----------------------------------------------

    def apply_migration_set(self, name: str, directory: Traversable | str) -> list[int]:
        """Create or upgrade an integration's own tables: apply the pending migrations of
        the set ``name`` found in ``directory`` (``NNNN_slug.sql`` files), each in its own
        transaction, recorded with checksums beside the core's but versioned independently.
        An edited or unknown migration is refused like the core's. Returns the versions
        applied."""
        if (
            not isinstance(name, str)
            or not re.fullmatch(r"[a-z][a-z0-9_]{0,62}", name)
            or (name == migrate.CORE)
        ):
            raise errors.InvalidInputError(
                f"migration set name must match [a-z][a-z0-9_]* and not be 'core', got {name!r}"
            )
        folder = Path(directory) if isinstance(directory, str) else directory
        mset = migrate.load_set(name, folder)
        with self._use(write=True) as conn:
            return [m.version for m in migrate.apply_pending(conn, mset)]

    @contextmanager
    def write_session(self) -> Iterator[Session]:
        """A ``BEGIN IMMEDIATE`` transaction for an integration's own tables: statements run
        through the yielded session, COMMIT happens when the block ends (ROLLBACK if it
        raises). Only for tables of an integration's migration set: the core tables change
        only through this API."""
        with self._use(write=True) as conn, conn.write_transaction():
            yield conn

    @contextmanager
    def read_session(self) -> Iterator[Session]:
        """A consistent read snapshot for several queries."""
        with self._use() as conn, conn.read_transaction():
            yield conn

    # -- pins, retention and garbage collection ---------------------------------------

    def pin(
        self, ref: str, name: str, *, note: str | None = None, replace: bool = False
    ) -> models.Pin:
        """Protect a checkpoint from GC and every retention policy under ``name``.

        Names are write-once: pinning the same checkpoint again is a no-op, pinning another
        one under the same name is a ConflictError unless ``replace`` (which moves it)."""
        pins.validate_name(name)
        if note is not None and (not isinstance(note, str) or len(note) > 1000):
            raise errors.InvalidInputError("note must be a str of at most 1000 characters")
        checkpoint_id = self.resolve(ref)
        with self._use(write=True) as conn, conn.write_transaction():
            target = catalog.require_checkpoint(conn, checkpoint_id)
            return pins.pin(conn, name, target, note=note, replace=replace, now_ms=_now_ms())

    def unpin(self, name: str) -> models.Pin:
        """Remove a pin; returns what it protected."""
        pins.validate_name(name)
        with self._use(write=True) as conn, conn.write_transaction():
            return pins.unpin(conn, name)

    def pins(self, namespace: str | None = None) -> list[models.Pin]:
        """Pins with their checkpoints (of one namespace, or all), by name."""
        ns = validation.namespace(namespace) if namespace is not None else None
        with self._use() as conn:
            return pins.list_pins(conn, ns)

    def set_retention(self, policy: RetentionPolicy, *, namespace: str | None = None) -> None:
        """Store the retention policy GC applies to ``namespace`` (or, with None, to every
        namespace without a policy of its own) when it is run without an explicit policy."""
        if not isinstance(policy, RetentionPolicy):
            raise errors.InvalidInputError("policy must be a ckptdb.RetentionPolicy")
        scope = "*" if namespace is None else validation.namespace(namespace)
        with self._use(write=True) as conn, conn.write_transaction():
            conn.execute(
                "INSERT INTO retention (scope, policy, updated_at_ms) VALUES (?, ?, ?)"
                " ON CONFLICT (scope) DO UPDATE SET policy = excluded.policy,"
                " updated_at_ms = excluded.updated_at_ms",
                (scope, policy.model_dump_json(), _now_ms()),
            )

    def clear_retention(self, *, namespace: str | None = None) -> bool:
        """Remove a stored policy; True if there was one."""
        scope = "*" if namespace is None else validation.namespace(namespace)
        with self._use(write=True) as conn, conn.write_transaction():
            conn.execute("DELETE FROM retention WHERE scope = ?", (scope,))
            return conn.changes() > 0

    def retention(self) -> dict[str, RetentionPolicy]:
        """Stored retention policies by scope ('*' = the database-wide default)."""
        with self._use() as conn:
            return gc.stored_policies(conn)

    def gc(
        self,
        policy: RetentionPolicy | None = None,
        *,
        namespaces: list[str] | None = None,
        grace: float | str = gc.DEFAULT_GRACE_SECONDS,
        dry_run: bool = False,
        keep_history: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> models.GcReport:
        """Delete the checkpoints no retention rule keeps, then the blobs and chunks nothing
        uses any more, and give the space back (incremental vacuum + WAL truncate).

        ``policy`` applies to every namespace in scope; without it each namespace's stored
        policy (or the database-wide one) applies, and a namespace with none keeps
        everything. Every CURRENT, fallback and pin is always kept. Unreferenced chunks
        younger than ``grace`` (seconds or "1h"; default 1 hour) are kept: a publish in
        flight may be staging them. ``dry_run`` returns the exact plan and changes nothing.
        A receipt is stored and returned.

        ``keep_history=N`` also trims each namespace's pointer history (one row per commit,
        kept in full by default as an audit trail) to its newest N moves."""
        if keep_history is not None and (
            not isinstance(keep_history, int) or isinstance(keep_history, bool) or keep_history < 1
        ):
            raise errors.InvalidInputError("keep_history must be a positive number of moves")
        if policy is not None and not isinstance(policy, RetentionPolicy):
            raise errors.InvalidInputError("policy must be a ckptdb.RetentionPolicy or None")
        grace_seconds = duration_seconds(grace)
        scope = [validation.namespace(n) for n in namespaces] if namespaces else None
        with self._use(write=True) as conn:
            return gc.run(
                conn,
                self._path,
                policy=policy,
                namespaces=scope,
                grace_seconds=grace_seconds,
                dry_run=dry_run,
                keep_history=keep_history,
                progress=progress,
            )

    def drop_namespace(
        self, namespace: str, *, force: bool = False, dry_run: bool = False
    ) -> models.PruneReport:
        """Delete a namespace: its CURRENT pointer, its history and every checkpoint of it
        (then the blobs nothing else uses). A namespace with pinned checkpoints is refused
        with ProtectedError unless ``force`` (which removes those pins). Interrupted, it can
        simply be run again. A receipt is stored."""
        ns = validation.namespace(namespace)
        with self._use(write=True) as conn:
            ns_id = catalog.namespace_id(conn, ns)
            if ns_id is None:
                raise errors.NamespaceNotFoundError(f"no namespace {ns!r}")
            held = pins.list_pins(conn, ns)
            if held and not force:
                raise errors.ProtectedError(
                    f"namespace {ns!r} has pinned checkpoints ({', '.join(p.name for p in held)})"
                    "; unpin them first or pass force=True (--force) to remove the pins too",
                    pins=[p.name for p in held],
                )

            def select() -> list[tuple[int, str]]:
                return [
                    (int(s), str(i))
                    for s, i in conn.execute(
                        "SELECT seq, id FROM checkpoint WHERE namespace_id = ?", (ns_id,)
                    )
                ]

            def exempt() -> set[int]:
                rows = conn.execute(
                    "SELECT current_seq, fallback_seq FROM pointer WHERE namespace_id = ?"
                    " UNION ALL SELECT p.checkpoint_seq, NULL FROM pin p JOIN checkpoint c"
                    " ON c.seq = p.checkpoint_seq WHERE c.namespace_id = ?",
                    (ns_id, ns_id),
                )
                return {int(v) for r in rows for v in r if v is not None}

            def prologue() -> None:
                conn.execute(
                    "DELETE FROM pin WHERE checkpoint_seq IN"
                    " (SELECT seq FROM checkpoint WHERE namespace_id = ?)",
                    (ns_id,),
                )
                conn.execute("DELETE FROM pointer WHERE namespace_id = ?", (ns_id,))

            def epilogue() -> None:
                conn.execute(
                    "DELETE FROM namespace WHERE namespace_id = ? AND NOT EXISTS"
                    " (SELECT 1 FROM checkpoint WHERE namespace_id = ?)",
                    (ns_id, ns_id),
                )
                conn.execute("DELETE FROM retention WHERE scope = ?", (ns,))

            return gc.delete_selected(
                conn,
                kind="drop_namespace",
                select=select,
                namespaces=[ns],
                dry_run=dry_run,
                grace_seconds=0.0,
                exempt=exempt,
                prologue=prologue,
                epilogue=epilogue,
            )

    def prune(
        self,
        where: Mapping[str, Any],
        *,
        namespaces: list[str] | None = None,
        dry_run: bool = False,
    ) -> models.PruneReport:
        """Delete every checkpoint whose metadata contains all of ``where``'s key/value pairs
        (e.g. ``{"run_id": "r7"}``), in the given namespaces or all. CURRENT, fallbacks and
        pinned checkpoints are kept and listed as skipped. A receipt is stored."""
        if not isinstance(where, Mapping) or not where:
            raise errors.InvalidInputError("prune needs a non-empty metadata filter")
        validation.metadata(where)
        wanted = dict(where)
        scope = [validation.namespace(n) for n in namespaces] if namespaces else None
        with self._use(write=True) as conn:

            def select() -> list[tuple[int, str]]:
                rows = conn.execute(
                    "SELECT c.seq, c.id, n.name, c.metadata FROM checkpoint c"
                    " JOIN namespace n ON n.namespace_id = c.namespace_id"
                )
                out = []
                for seq, cid, ns, meta in rows:
                    if scope is not None and ns not in scope:
                        continue
                    values = validation.metadata_from_json(meta)
                    if all(k in values and values[k] == v for k, v in wanted.items()):
                        out.append((int(seq), str(cid)))
                return out

            return gc.delete_selected(
                conn,
                kind="prune",
                select=select,
                namespaces=scope or ["*"],
                dry_run=dry_run,
                grace_seconds=0.0,
            )

    # -- inspection, checkout, export and import --------------------------------------

    def stats(self) -> models.Stats:
        """File size, WAL size, free pages, row counts and deduplication ratio."""
        with self._use() as conn:
            return stats.collect(conn, self._path, self._chunk_size)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> models.QueryResult:
        """Run one read-only SQL statement (SELECT, WITH, read-only PRAGMA) and return its
        columns and rows. Anything that would write is refused with ReadOnlyError before it
        runs -- on any handle, whatever its mode."""
        if not isinstance(sql, str) or not sql.strip():
            raise errors.InvalidInputError("the query is empty")
        with self._use() as conn:
            columns, rows = conn.query_readonly(sql, params)
        return models.QueryResult(columns=columns, rows=[list(r) for r in rows])

    def checkout(
        self,
        ref: str,
        target: str | os.PathLike[str],
        *,
        force: bool = False,
        fallback: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> models.CheckoutResult:
        """Materialize a checkpoint (any reference :meth:`resolve` accepts) into a
        directory: written to a temporary sibling, fsynced, then renamed into place. Files
        are 0600, directories 0700; symlinks are never followed. With ``fallback``, the
        newest verified ancestor is used when the checkpoint itself does not verify."""
        checkpoint_id = self.resolve(ref)
        if fallback:
            cp = self.load_checkpoint(checkpoint_id, fallback=True).checkpoint
        else:
            cp = self.get(checkpoint_id)
        return checkout_module.checkout(cp, target, force=force, progress=progress)

    def export(
        self,
        dest: str | os.PathLike[str],
        *,
        namespaces: list[str] | None = None,
        since: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> models.TransferReceipt:
        """Write a new, self-contained ckptdb file holding the lineage of the selected
        namespaces (all by default) -- from CURRENT back to ``since`` if given -- plus each
        fallback, and only the blobs they need. The new file is verified before it is
        renamed into place."""
        since_id = self.resolve(since) if since else None
        with self._use() as conn:
            return transfer.export_to(
                self,
                conn,
                os.fspath(dest),
                namespaces=namespaces,
                since=since_id,
                progress=progress,
                create=lambda path, page_size: open(
                    path, chunk_size=self._chunk_size, page_size=page_size, vfs=self._vfs
                ),
            )

    def import_file(
        self,
        source: str | os.PathLike[str],
        *,
        namespaces: list[str] | None = None,
        overwrite: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> models.TransferReceipt:
        """Merge the checkpoints of another ckptdb file into this one (idempotent: content
        addressing skips what is already here). A CURRENT pointer is moved when this file has
        none for the namespace or when the move is a fast-forward; otherwise the conflict is
        reported and nothing is overwritten unless ``overwrite`` is true."""
        with self._use(write=True) as conn:
            return transfer.import_from(
                self,
                conn,
                os.fspath(source),
                namespaces=namespaces,
                overwrite=overwrite,
                progress=progress,
                open_source=lambda path: open(path, readonly=True, vfs=self._vfs),
            )

    def receipts(
        self, *, kind: str | None = None, limit: int | None = None
    ) -> list[models.Receipt]:
        """Stored receipts, newest first, optionally of one kind."""
        with self._use() as conn:
            return list_receipts(conn, kind=kind, limit=limit)

    def record_receipt(
        self,
        kind: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        checkpoint_id: str | None = None,
    ) -> int | None:
        """Store a receipt -- the durable, digest-bound record of an act -- for an
        integration or tool built on ckptdb. ``body`` must be a JSON object. Returns the
        receipt id (None on a read-only handle)."""
        if not isinstance(kind, str) or not re.fullmatch(r"[a-z][a-z0-9_.-]{0,62}", kind):
            raise errors.InvalidInputError(f"receipt kind must match [a-z][a-z0-9_.-]*: {kind!r}")
        validation.metadata(body, validation.DEFAULT_MAX_METADATA_BYTES)
        return self._record_receipt(
            kind, dict(body), namespace=namespace, checkpoint_id=checkpoint_id
        )

    def _record_receipt(
        self,
        kind: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        checkpoint_id: str | None = None,
    ) -> int | None:
        """Store a receipt; returns its id (None on a read-only handle)."""
        if self._conn.readonly:
            return None
        with self._use(write=True) as conn, conn.write_transaction():
            return store_receipt(
                conn, kind, body, namespace=namespace, checkpoint_id=checkpoint_id, at_ms=_now_ms()
            )


class _LockedReader(io.RawIOBase):
    """A chunked-entry stream that takes the database lock for each chunk it reads."""

    def __init__(self, db: Database, entry: catalog.EntryRow, where: dict[str, Any]) -> None:
        super().__init__()
        self._db = db
        with db._use():
            self._inner = blobs.ChunkedBlobReader(
                db._blobs, entry.blob_id, entry.digest, entry.size, where
            )

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        with self._db._use():
            return self._inner.readinto(buffer)

    def readall(self) -> bytes:
        with self._db._use():
            return self._inner.readall()

    def tell(self) -> int:
        return self._inner.tell()

    def close(self) -> None:
        if not self.closed:
            self._inner.close()
        super().close()

    def iter_chunks(self) -> Iterator[bytes]:
        """Verified chunk-sized pieces."""
        pieces = self._inner.iter_chunks()
        while True:
            with self._db._use():
                piece = next(pieces, None)
            if piece is None:
                return
            yield piece


def _migration_info(m: migrate.Migration, *, with_sql: bool) -> models.MigrationInfo:
    return models.MigrationInfo(
        migration_set=m.migration_set,
        version=m.version,
        name=m.name,
        checksum=m.checksum,
        sql=m.sql if with_sql else None,
    )


def _pointer_model(ptr: catalog.PointerRow) -> models.Pointer:
    return models.Pointer(
        namespace=ptr.namespace,
        current_id=ptr.current_id,
        fallback_id=ptr.fallback_id,
        revision=ptr.revision,
        digest=ptr.digest,
        previous_digest=ptr.previous_digest,
        updated_at=models.from_ms(ptr.updated_at_ms),
    )
