"""The public API: :func:`open` and :class:`Database`, the front object.

It validates what a caller passes, takes the handle's lock and delegates: no SQL and no
protocol logic live here (those are in :mod:`ckptdb.ops` over :mod:`ckptdb.store`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from importlib.resources.abc import Traversable
from typing import Any

from . import errors, load_checks, models, references, validation
from .connection import DEFAULT_BUSY_TIMEOUT, Synchronous
from .extension import RecordSealer, Session
from .ops import checkout as checkout_op
from .ops import commit as commit_op
from .ops import deletion as deletion_op
from .ops import diff as diff_op
from .ops import encryption as encryption_op
from .ops import fork as fork_op
from .ops import gc as gc_op
from .ops import graph as graph_op
from .ops import group as group_op
from .ops import load as load_op
from .ops import migrate as migrate_op
from .ops import open as open_op
from .ops import pins as pin_op
from .ops import policies as policy_op
from .ops import query as query_module
from .ops import quota as quota_op
from .ops import read as read_op
from .ops import receipts as receipt_op
from .ops import refs, stats, transfer, verify
from .ops import rollback as rollback_op
from .ops import session as session_op
from .ops.checkpoint import Checkpoint, held_bytes
from .ops.handle import Handle
from .ops.load import LoadResult, Validator
from .ops.open import MigrateMode
from .ops.unit import Clock, system_clock
from .retention import RetentionPolicy, duration_seconds
from .store import pins
from .store.scopes import KeyProvider
from .types import UNSET, _Unset

__all__ = ["Database", "MigrateMode", "open"]


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
    group_commit: bool = True,
    keys: KeyProvider | None = None,
    code_revision: str | None = None,
    clock: Clock | None = None,
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
    application id, migration history and schema are checked through the VFS instead.
    Read-only.
    ``group_commit``: concurrent ``commit()`` calls on this handle (threads) share one
    write transaction and one fsync (see :meth:`Database.commit`); False gives every commit
    its own transaction, as before group commit existed (for comparison and measurement).
    ``keys``: the host's keys for encrypted key scopes (see :meth:`Database.set_encryption`):
    a mapping ``key_id -> 32-byte key`` or a callable ``key_id -> bytes | None`` (e.g. a KMS
    lookup, called once per scope and handle). Never stored; a scope whose key is missing
    raises ``KeyUnavailableError`` on use while every other namespace works.
    ``code_revision``: the revision of the program (e.g. its git commit id; 1-200 printable
    characters) recorded with every checkpoint this handle writes, beside the manifest and
    not in the id; loading a checkpoint written at another revision then says so (a
    ``revision_mismatch`` note and a RuntimeWarning, never a refusal).
    ``clock``: the time every act of this handle is stamped with and that GC's grace period
    and ``keep_within`` are measured against -- a callable returning milliseconds since the
    Unix epoch (the wall clock by default; tests and simulations inject their own).
    """
    if clock is not None and not callable(clock):
        raise errors.InvalidInputError("clock must be a callable returning epoch milliseconds")
    if keys is not None and not (isinstance(keys, Mapping) or callable(keys)):
        raise errors.InvalidKeyError(
            "keys must be a mapping of key id -> 32-byte key, or a callable key_id -> bytes"
        )
    revision = validation.code_revision(code_revision)
    max_metadata_bytes = validation.max_metadata_bytes(max_metadata_bytes)
    url = validation.database_url(path)
    if url is not None:
        return _open_postgresql(
            url,
            readonly=readonly,
            create=create,
            migrate=migrate,
            synchronous=synchronous,
            busy_timeout=busy_timeout,
            chunk_size=chunk_size,
            page_size=page_size,
            vfs=vfs,
            virtual=virtual,
            keys=keys,
            clock=clock or system_clock,
            max_metadata_bytes=max_metadata_bytes,
            code_revision=revision,
        )
    text = validation.open_arguments(
        path,
        migrate,
        synchronous,
        chunk_size,
        page_size,
    )
    if virtual:
        if not (readonly and vfs):
            raise errors.InvalidInputError("virtual=True needs readonly=True and a vfs name")
        handle = open_op.open_virtual(text, vfs, busy_timeout, keys, clock=clock or system_clock)
        return Database(
            handle, max_metadata_bytes=max_metadata_bytes, vfs=vfs, code_revision=revision
        )
    handle = open_op.open_handle(
        os.path.abspath(text),
        readonly=readonly,
        create=create,
        migrate_mode=migrate,
        synchronous=synchronous,
        busy_timeout=busy_timeout,
        chunk_size=chunk_size,
        page_size=page_size,
        vfs=vfs,
        keys=keys,
        clock=clock or system_clock,
    )
    return Database(
        handle,
        max_metadata_bytes=max_metadata_bytes,
        vfs=vfs,
        group_commit=bool(group_commit),
        code_revision=revision,
    )


def _open_postgresql(
    url: str,
    *,
    readonly: bool,
    create: bool,
    migrate: MigrateMode,
    synchronous: Synchronous,
    busy_timeout: float | None,
    chunk_size: int | None,
    page_size: int | None,
    vfs: str | None,
    virtual: bool,
    keys: KeyProvider | None,
    clock: Clock,
    max_metadata_bytes: int,
    code_revision: str | None,
) -> Database:
    """:func:`open` of a PostgreSQL URL: the options that are SQLite's own are refused
    (the server decides durability and page layout), the rest checked as for a file."""
    for name, value in (("page_size", page_size), ("vfs", vfs)):
        if value is not None:
            raise errors.InvalidInputError(
                f"{name} is an SQLite setting; a PostgreSQL URL takes none"
            )
    if virtual:
        raise errors.InvalidInputError("virtual=True is for an SQLite replica read through a VFS")
    if synchronous != "full":
        raise errors.InvalidInputError(
            "synchronous is an SQLite setting; on PostgreSQL durability is the server's "
            "(synchronous_commit): leave it at 'full'"
        )
    validation.open_arguments(url, migrate, synchronous, chunk_size, None, url=url)
    handle = open_op.open_postgresql(
        url,
        readonly=readonly,
        create=create,
        migrate_mode=migrate,
        busy_timeout=busy_timeout,
        chunk_size=chunk_size,
        keys=keys,
        clock=clock,
    )
    # Group commit shares one SQLite transaction among threads to share its fsync; on
    # PostgreSQL writers run at once and a failed statement would abort the shared
    # transaction, so every commit has its own.
    return Database(
        handle,
        max_metadata_bytes=max_metadata_bytes,
        vfs=None,
        group_commit=False,
        code_revision=code_revision,
    )


class Database:
    """A ckptdb database file. Obtain one with :func:`ckptdb.open`; use as a context manager.

    A handle may be shared between threads (operations are serialized); separate processes
    each open their own handle on the same file.
    """

    def __init__(
        self,
        handle: Handle,
        *,
        max_metadata_bytes: int,
        vfs: str | None,
        group_commit: bool = True,
        code_revision: str | None = None,
    ) -> None:
        self._handle = handle
        self._max_metadata_bytes = max_metadata_bytes
        self._vfs = vfs
        self._group = group_op.GroupCommit(handle, enabled=group_commit)
        self._code_revision = code_revision

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database. Further calls raise ClosedError; closing twice is fine."""
        self._handle.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        # An error already propagating must not be replaced by one from closing.
        self._handle.close(abandon=exc_type is not None)

    @property
    def path(self) -> str:
        """The database file path."""
        return self._handle.path

    @property
    def chunk_size(self) -> int:
        """Chunk size of this file in bytes (fixed at creation)."""
        return self._handle.store.chunk_size

    @property
    def lock_waits(self) -> tuple[int, float]:
        """Diagnostics: how many times this handle waited for another connection's lock,
        and for how many seconds in all (WAL readers should show zero). On PostgreSQL: the
        waits for ckptdb's own locks (a namespace's, a quota prefix's, the schema's)."""
        waits = self._handle.store.conn.lock_waits
        return waits.waits, waits.seconds

    @property
    def commit_batches(self) -> tuple[int, int]:
        """Diagnostics of group commit: (write transactions its leaders ran, commits they
        published). Their ratio is the mean batch size; (0, 0) when it is off."""
        if not self._group.enabled:
            return (0, 0)
        return (self._group.batches, self._group.commits)

    @property
    def schema_problems(self) -> list[str]:
        """How the file's schema differs from ckptdb's (empty for a valid file). Only a
        read-only handle opens a file whose schema differs, for inspection; any other
        open refuses it with SchemaMismatchError."""
        return list(self._handle.schema_problems)

    @property
    def readonly(self) -> bool:
        """True when opened read-only."""
        return self._handle.store.readonly

    @property
    def clock(self) -> Clock:
        """The clock this handle stamps every act with (see :func:`open`): integrations
        and tools built on the handle read it too, so one injected clock rules them all."""
        return self._handle.clock

    @property
    def code_revision(self) -> str | None:
        """The code revision given to :func:`ckptdb.open` (recorded in what this handle
        writes, compared with what it loads), or None."""
        return self._code_revision

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
        label: str | None = None,
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
        is called in bytes as entries are read, hashed and staged (``total`` grows when an
        entry given as a stream turns out larger than known).

        Threads committing through one handle at the same time are grouped: one of them
        publishes every queued commit in a single write transaction (each in its own
        savepoint, with its own compare-and-swap, error and hooks) and one fsync, and each
        caller gets its acknowledgement only after that COMMIT returned. A lone caller
        waits for nobody.

        ``label`` is your own name for the checkpoint (e.g. your framework's id for it),
        unique in the namespace and recorded beside the manifest (not part of its id):
        :meth:`get_labelled` finds it by that name in one index lookup. A label that names
        another checkpoint of the namespace raises LabelTakenError and writes nothing.
        """
        if not isinstance(expect_current, _Unset) and expect_current is not None:
            validation.checkpoint_id(expect_current)
        if base is not None:
            validation.checkpoint_id(base)
        if type(reason) is not str or not 0 < len(reason) <= 200:
            _reason(reason)  # the error
        plan = commit_op.CommitPlan(
            validation.namespace(namespace),
            validation.entry_names(entries),
            entries,
            metadata_json="{}"
            if metadata is None
            else validation.metadata(metadata, self._max_metadata_bytes),
            expect_current=expect_current,
            reason=reason,
            base=base,
            on_publish=on_publish,
            progress=progress,
            code_revision=self._code_revision,
            label=None if label is None else validation.checkpoint_label(label),
        )
        return self._group.commit(plan)

    def set_current(
        self,
        namespace: str,
        checkpoint_id: str,
        *,
        expect_current: str | _Unset | None = UNSET,
        reason: str = "set_current",
        verify: bool = True,
    ) -> models.Pointer:
        """Explicitly move CURRENT to an existing checkpoint of the namespace (e.g. roll back
        to a verified ancestor). The move is recorded in the pointer history.

        ``verify`` (default True) first checks the target's manifest and every byte and
        refuses a damaged one with CorruptionError (nothing moves). The checkpoint CURRENT
        named becomes the fallback -- unless it is known to be damaged: then the previous
        fallback is kept (when intact and not the target) or there is none, and a
        ``set_current`` receipt records why. With ``verify`` the current checkpoint is
        verified to decide that; without it, a stored fallback receipt that rejected it as
        corrupt decides (see :mod:`ckptdb.ops.rollback`)."""
        ns = validation.namespace(namespace)
        validation.checkpoint_id(checkpoint_id)
        _reason(reason)
        if not isinstance(verify, bool):
            raise errors.InvalidInputError("verify must be True or False")
        ptr, _damage = rollback_op.set_current(
            self._handle,
            ns,
            checkpoint_id,
            expect_current=expect_current,
            reason=reason,
            verify=verify,
        )
        return refs.pointer_model(ptr)

    def copy_checkpoints(
        self,
        checkpoint_ids: Iterable[str],
        namespace: str,
        *,
        parents: Mapping[str, str | None] | None = None,
        metadata: Mapping[str, Any] | None = None,
        expect_current: str | _Unset | None = UNSET,
        reason: str = "copy",
    ) -> models.CopyReport:
        """Copy checkpoints into ``namespace`` by reference, all in one transaction, and move
        its CURRENT to the copy of the last id given (a fork: a thread cloned to try another
        branch).

        Each copy keeps its source's entries -- they name the same stored blobs, so no byte
        is read, hashed or written again -- and its metadata, updated with the keys of
        ``metadata``. A copy's parent is the copy of its source's parent when that is copied
        too, else the copy starts a lineage of its own; ``parents`` overrides it per source
        id: another source of the same call, a checkpoint already in ``namespace`` (e.g. a
        copy an earlier call made), or None. Copies get their own ids (the namespace is part
        of the identity); copying what is there already is a no-op.

        Every source manifest is verified against its id first, and all of them must lie in
        the target's key scope (EncryptedScopeError otherwise: across scopes, read the
        entries and :meth:`commit` them). ``expect_current`` is a compare-and-swap on the
        target's CURRENT. On any error nothing is written. Quotas of the target apply."""
        ns = validation.namespace(namespace)
        if isinstance(checkpoint_ids, str) or not isinstance(checkpoint_ids, Iterable):
            raise errors.InvalidInputError("checkpoint_ids must be a list of checkpoint ids")
        ids = [validation.checkpoint_id(c) for c in checkpoint_ids]
        if not ids:
            raise errors.InvalidInputError("checkpoint_ids is empty: name what to copy")
        overrides: dict[str, str | None] = {}
        if parents is not None:
            if not isinstance(parents, Mapping):
                raise errors.InvalidInputError("parents must map source id -> parent id or None")
            listed = set(ids)
            for source, parent in parents.items():
                if validation.checkpoint_id(source) not in listed:
                    raise errors.InvalidInputError(
                        f"parents names {source[:12]}, which is not among the ids to copy"
                    )
                overrides[source] = None if parent is None else validation.checkpoint_id(parent)
        update = None if metadata is None else validation.metadata_update(metadata)
        if not isinstance(expect_current, _Unset) and expect_current is not None:
            validation.checkpoint_id(expect_current)
        _reason(reason)
        return fork_op.copy_checkpoints(
            self._handle,
            ids,
            ns,
            parents=overrides,
            metadata_update=update,
            expect_current=expect_current,
            reason=reason,
            max_metadata_bytes=self._max_metadata_bytes,
            code_revision=self._code_revision,
        )

    # -- reading -----------------------------------------------------------------------------

    def current(self, namespace: str) -> Checkpoint | None:
        """The CURRENT checkpoint of a namespace, or None when it has none.

        Raises CorruptionError if its manifest no longer matches its id."""
        return refs.current(self._handle, validation.namespace(namespace))

    def get(self, checkpoint_id: str) -> Checkpoint:
        """Any stored checkpoint by full id (see :meth:`resolve` for short forms)."""
        return refs.get(self._handle, validation.checkpoint_id(checkpoint_id))

    def get_labelled(self, namespace: str, label: str) -> Checkpoint | None:
        """The checkpoint of ``namespace`` committed with this ``label``
        (``commit(label=...)``), or None: one index lookup, its manifest checked against its
        id as :meth:`get` does."""
        return refs.get_labelled(
            self._handle, validation.namespace(namespace), validation.checkpoint_label(label)
        )

    def get_many(
        self, checkpoint_ids: Iterable[str], *, prefetch: Iterable[str] = ()
    ) -> dict[str, Checkpoint]:
        """The stored checkpoints among these full ids, by id, in the order given (the
        missing ones -- never stored, or collected -- left out); one read for all of them,
        each manifest checked against its id as :meth:`get` does.

        ``prefetch``: names of entries to read in that same statement, for those stored
        whole (small ones, below the chunker's inline limit): their bytes are verified
        against their digests now and :meth:`Checkpoint.read` and :meth:`read_many` hand
        them out without another read. A checkpoint without such an entry, or whose entry
        is chunked, reads it as usual."""
        if isinstance(prefetch, str | bytes) or not isinstance(prefetch, Iterable):
            raise errors.InvalidInputError(
                "prefetch must be a list of entry names (e.g. prefetch=['state.json']), "
                f"got {type(prefetch).__name__}"
            )
        names = tuple(dict.fromkeys(validation.entry_name(n) for n in prefetch))
        ids = list(dict.fromkeys(validation.checkpoint_id(c) for c in checkpoint_ids))
        return refs.get_many(self._handle, ids, names) if ids else {}

    def read_many(self, wanted: Iterable[tuple[Checkpoint, str]]) -> list[bytes]:
        """The bytes of many entries, each a (checkpoint, entry name) pair, verified as
        :meth:`Checkpoint.read` does, in order; one read for all of them (the small ones in
        one statement; none for entries prefetched by :meth:`get_many`). Raises
        EntryNotFoundError for a name a checkpoint lacks."""
        located = [(cp.id, cp.entry_row(name), held_bytes(cp, name)) for cp, name in wanted]
        return read_op.read_entries(self._handle, located) if located else []

    def existing(self, checkpoint_ids: Iterable[str]) -> set[str]:
        """Which of these full checkpoint ids are stored, in one read (for a caller that
        caches immutable checkpoints and must know whether they were collected since)."""
        return refs.existing(self._handle, [validation.checkpoint_id(c) for c in checkpoint_ids])

    def pointer(self, namespace: str) -> models.Pointer | None:
        """The CURRENT pointer of a namespace (ids, revision, digest), or None."""
        ptr = refs.pointer(self._handle, validation.namespace(namespace))
        return None if ptr is None else refs.pointer_model(ptr)

    def history(self, namespace: str, *, limit: int | None = None) -> list[models.PointerMove]:
        """Every move of the namespace's CURRENT pointer, newest first."""
        return refs.history(self._handle, validation.namespace(namespace), _limit(limit))

    def lineage(self, namespace: str, *, limit: int | None = None) -> list[models.CheckpointInfo]:
        """CURRENT and its stored ancestors, newest first, following parent links."""
        ns = validation.namespace(namespace)
        return [cp.info for cp in refs.verified_lineage(self._handle, ns, _limit(limit))]

    def log(
        self, namespace: str, *, all: bool = False, limit: int | None = None
    ) -> models.LineageLog:
        """The checkpoints of a namespace, newest first, each with its markers (current,
        fallback, pinned), its pins, whether CURRENT descends from it, and a git-log-like
        graph drawing. By default the lineage of CURRENT and of the fallback (so a branch made
        with ``base=`` shows); ``all=True`` adds every other stored checkpoint of the
        namespace (kept by a pin or a retention rule, no longer on the CURRENT lineage)."""
        ns = validation.namespace(namespace)
        if not isinstance(all, bool):
            raise errors.InvalidInputError("all must be True or False")
        return graph_op.log(self._handle, ns, all=all, limit=_limit(limit))

    def diff(self, a: str, b: str) -> models.CheckpointDiff:
        """What changed from checkpoint ``a`` to checkpoint ``b`` (any references
        :meth:`resolve` accepts): entries added, removed and changed -- with sizes and, for
        changed ones, how many bytes are shared by content (same chunk digests) --, the
        metadata keys that differ, and how ``a`` stands to ``b`` in the lineage (same,
        ancestor, descendant, siblings with their common ancestor, unrelated).
        ``diff(a, a)`` is empty; ``diff(b, a)`` mirrors ``diff(a, b)``."""
        first, second = self.resolve(a), self.resolve(b)
        return diff_op.diff(self._handle, first, second)

    def namespaces(self) -> list[models.NamespaceInfo]:
        """Every namespace that has a CURRENT pointer, by name."""
        return refs.namespaces(self._handle)

    def resolve(self, ref: str) -> str:
        """Turn a reference into a full checkpoint id.

        Accepts a full id, a unique hex prefix of at least 8 characters, or a namespace
        position ``NS[@current|@fallback][~N]`` (a bare ``NS`` is its CURRENT; ``~N`` walks
        N generations back along the lineage). The grammar, including how to name a
        namespace that contains ``~`` or ``@``, is in :mod:`ckptdb.references`.
        """
        references.parse_reference(ref)  # malformed input is refused before any I/O
        return refs.resolve(self._handle, ref)

    # -- load with fallback ---------------------------------------------------------------

    def load(
        self,
        namespace: str,
        *,
        fallback: bool = False,
        validator: Validator | None = None,
        expect: Mapping[str, Any] | None = None,
        accept_schemas: Mapping[str, int] | None = None,
        max_bytes: int | None = None,
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

        The reader's checks, all decided from the manifest before any blob byte is read:

        - ``expect={"run_id": r, ...}``: the checkpoint's metadata must hold each field with
          that value (compared as canonical JSON); otherwise LineageMismatchError names
          every differing field, expected and found. With ``fallback`` such a checkpoint
          is skipped, like a damaged one, and the receipt says why.
        - ``accept_schemas={"state": 3}``: an entry pinned to ``state/vN`` with N > 3 is
          refused with SchemaPinTooNewError (skipped with ``fallback``); other pins pass.
        - ``max_bytes``: a checkpoint holding more bytes is refused with
          LoadTooLargeError -- even with ``fallback``, which never skips for size.

        A checkpoint written at another ``code_revision`` than this handle's loads normally;
        ``LoadResult.revision_mismatch`` and a RuntimeWarning say so.
        """
        ns = validation.namespace(namespace)
        checks = self._load_checks(expect, accept_schemas, max_bytes)
        return load_op.load_with_fallback(
            self._handle, ns, fallback=fallback, validator=validator, checks=checks
        )

    def load_checkpoint(
        self,
        checkpoint_id: str,
        *,
        fallback: bool = False,
        validator: Validator | None = None,
        expect: Mapping[str, Any] | None = None,
        accept_schemas: Mapping[str, int] | None = None,
        max_bytes: int | None = None,
    ) -> LoadResult:
        """Like :meth:`load`, starting from a given checkpoint instead of CURRENT: with
        ``fallback`` the newest verified ancestor along its lineage (that passes the same
        checks) is returned."""
        validation.checkpoint_id(checkpoint_id)
        checks = self._load_checks(expect, accept_schemas, max_bytes)
        return load_op.load_checkpoint(
            self._handle, checkpoint_id, fallback=fallback, validator=validator, checks=checks
        )

    def _load_checks(
        self, expect: object, accept_schemas: object, max_bytes: object
    ) -> load_op.LoadChecks:
        """The reader's checks of a load, validated (InvalidLoadCheckError; nothing read)."""
        return load_op.LoadChecks(
            expect=load_checks.expect(expect),
            accept_schemas=load_checks.accept_schemas(accept_schemas),
            max_bytes=load_checks.max_bytes(max_bytes),
            code_revision=self._code_revision,
        )

    # -- verification --------------------------------------------------------------------

    def verify(
        self, *, quick: bool = False, progress: Callable[[str, int, int], None] | None = None
    ) -> models.VerifyReport:
        """Check the whole file: SQLite integrity, every chunk and blob digest, every
        manifest id, every pointer and its history chain. ``quick`` skips reading blob
        bytes (structure and manifests only). The report lists each problem found, with
        the checkpoint and entry affected; a receipt is stored.

        ``progress(phase, done, total)`` is called as the check advances: in bytes for the
        phase that reads chunk bytes (``"chunk bytes"``), in rows for the others."""
        return verify.verify_database(self._handle, quick=quick, progress=progress)

    # -- schema migrations ----------------------------------------------------------

    def migration_status(self) -> models.MigrationStatus:
        """The file's schema version, this code's, and the pending migrations."""
        return migrate_op.status(self._handle, self.path)

    def migration_plan(self, *, to: int | None = None) -> list[models.MigrationInfo]:
        """The pending migrations (up to version ``to``) with the SQL each would run."""
        return migrate_op.plan(self._handle, to)

    def migration_history(self) -> list[models.MigrationInfo]:
        """Every applied migration of every set, oldest first."""
        return migrate_op.history(self._handle)

    def migrate(
        self, *, to: int | None = None, backup: str | os.PathLike[str] | bool = True
    ) -> models.MigrationResult:
        """Apply pending core migrations (up to ``to``), each in its own transaction.

        Before anything changes, a consistent copy is taken with SQLite's online backup API
        (``backup=True``: beside the file, named with the version; a path: there; False: no
        backup) and verified. A migration that fails leaves the file at the last completed
        version and the error says how to restore the backup. Waits up to the busy timeout
        for another writer, then refuses with BusyTimeoutError.

        On PostgreSQL every pending migration runs in one transaction under the schema's
        lock (a failure leaves the version the run began at; machines migrating at once
        apply each once): no backup file is written, and a ``backup`` path is refused with
        EngineUnsupportedError (a copy of a server's database is ``pg_dump``'s)."""
        return migrate_op.up(self._handle, to=to, backup=backup)

    # -- extension points for integrations ----------------------------------------------

    def apply_migration_set(self, name: str, directory: Traversable | str) -> list[int]:
        """Create or upgrade an integration's own tables: apply the pending migrations of
        the set ``name`` found in ``directory`` (``NNNN_slug.sql`` files), each in its own
        transaction, recorded with checksums beside the core's but versioned independently.
        An edited or unknown migration is refused like the core's. Returns the versions
        applied."""
        return migrate_op.apply_set(self._handle, name, directory)

    @contextmanager
    def write_session(self) -> Iterator[Session]:
        """A ``BEGIN IMMEDIATE`` transaction for an integration's own tables: statements run
        through the yielded session, COMMIT happens when the block ends (ROLLBACK if it
        raises). Only for tables of an integration's migration set: the core tables change
        only through this API."""
        with session_op.write_session(self._handle) as session:
            yield session

    @contextmanager
    def read_session(self, *, snapshot: bool = True) -> Iterator[Session]:
        """A consistent read snapshot for several queries (``BEGIN`` ... ``COMMIT``).

        ``snapshot=False`` skips the explicit transaction: each statement then reads its own
        snapshot, which is all a block of *one* statement needs, for two fewer round trips
        through SQLite (an integration's hot single-query reads)."""
        with session_op.read_session(self._handle, snapshot=snapshot) as session:
            yield session

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
        return pin_op.pin(self._handle, name, checkpoint_id, note=note, replace=replace)

    def unpin(self, name: str) -> models.Pin:
        """Remove a pin; returns what it protected."""
        pins.validate_name(name)
        return pin_op.unpin(self._handle, name)

    def pins(self, namespace: str | None = None) -> list[models.Pin]:
        """Pins with their checkpoints (of one namespace, or all), by name."""
        ns = validation.namespace(namespace) if namespace is not None else None
        return pin_op.list_pins(self._handle, ns)

    def set_retention(self, policy: RetentionPolicy, *, namespace: str | None = None) -> None:
        """Store the retention policy GC applies to ``namespace`` (or, with None, to every
        namespace without a policy of its own) when it is run without an explicit policy."""
        if not isinstance(policy, RetentionPolicy):
            raise errors.InvalidInputError("policy must be a ckptdb.RetentionPolicy")
        scope = "*" if namespace is None else validation.namespace(namespace)
        policy_op.set_policy(self._handle, scope, policy)

    def clear_retention(self, *, namespace: str | None = None) -> bool:
        """Remove a stored policy; True if there was one."""
        scope = "*" if namespace is None else validation.namespace(namespace)
        return policy_op.clear_policy(self._handle, scope)

    def retention(self) -> dict[str, RetentionPolicy]:
        """Stored retention policies by scope ('*' = the database-wide default)."""
        return policy_op.stored_policies(self._handle)

    def gc(
        self,
        policy: RetentionPolicy | None = None,
        *,
        namespaces: list[str] | None = None,
        grace: float | str = gc_op.DEFAULT_GRACE_SECONDS,
        dry_run: bool = False,
        keep_history: int | None = None,
        keep: list[str] | None = None,
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
        kept in full by default as an audit trail) to its newest N moves.

        ``keep``: checkpoint ids to keep as well, whatever the policy (an integration's own
        live references, for instance)."""
        if keep_history is not None and (
            not isinstance(keep_history, int) or isinstance(keep_history, bool) or keep_history < 1
        ):
            raise errors.InvalidInputError("keep_history must be a positive number of moves")
        if policy is not None and not isinstance(policy, RetentionPolicy):
            raise errors.InvalidInputError("policy must be a ckptdb.RetentionPolicy or None")
        kept = {validation.checkpoint_id(c) for c in keep} if keep else None
        grace_seconds = duration_seconds(grace)
        scope = [validation.namespace(n) for n in namespaces] if namespaces else None
        return gc_op.run(
            self._handle,
            self.path,
            policy=policy,
            namespaces=scope,
            grace_seconds=grace_seconds,
            dry_run=dry_run,
            keep_history=keep_history,
            keep=kept,
            progress=progress,
        )

    # -- encryption at rest (key scopes) ------------------------------------------------

    def set_encryption(
        self, prefix: str, *, key_id: str, metadata: bool = False
    ) -> models.KeyScope:
        """Encrypt every namespace whose name starts with ``prefix`` under the host key
        ``key_id`` (given to :func:`ckptdb.open` as ``keys=``), from its first commit on.

        ckptdb generates a random data key for the scope and stores it only wrapped by the
        host's key. Entry bytes of the scope are compressed, then sealed (AES-256-GCM, a fresh
        nonce per chunk, bound to the scope and the chunk's address); their content
        addresses are keyed (HMAC-SHA256), so the file holds neither the plaintext nor its
        sha256, and dedup works within the scope only. Namespace names, entry names,
        metadata and sizes stay plaintext (docs/security.md says why and what that shows),
        unless ``metadata=True``: then metadata is sealed too (deterministically, so ids stay
        content-derived), handles with the key see it as given, the views and handles
        without the key see ``{"ckptdb:sealed": ...}``, and retention rules that read
        metadata (``keep_best``, ``prune``) find none of its fields.

        Must come before the first commit under ``prefix`` (ScopeConflictError if a
        namespace exists there, or if the prefix overlaps another scope's); calling it again
        with the same arguments returns the existing scope.
        """
        return encryption_op.set_encryption(self._handle, prefix, key_id, metadata)

    def rotate_key(self, key_id: str, new_key: bytes) -> models.KeyScope:
        """Re-wrap the scope's data key under ``new_key``: O(1), no data rewritten. This
        handle then uses the new key; other handles and processes must be given it (the old
        one no longer opens the scope: KeyMismatchError). Needs the current key.

        The old wrapped key is then gone from the file and its WAL (checkpointed and
        truncated, as after :meth:`shred_key`), so a copy taken afterwards plus the old host
        key opens nothing. The ``rotate_key`` receipt's ``wal_truncated`` is False when
        that could not be done: a reader held the WAL past the busy timeout (a later GC, or
        the close of the file's last connection, finishes it), or Litestream manages the
        WAL (it restarts it; its replica keeps older generations until its retention drops
        them)."""
        return encryption_op.rotate_key(self._handle, key_id, new_key)

    def shred_key(self, key_id: str) -> models.ShredReport:
        """Crypto-shred a key scope: forget its wrapped data key (first, in one transaction,
        so from then on no copy of its bytes anywhere -- backups, replicas -- can be opened
        once the host discards its key), then delete every namespace of the scope and its
        chunks, overwrite the freed pages and truncate the WAL. The prefix then takes no new
        namespace (KeyShreddedError). A receipt records it. Idempotent: a shred interrupted by
        a crash is finished by calling it again."""
        return encryption_op.shred_key(self._handle, key_id)

    def record_sealer(self, namespace: str) -> RecordSealer | None:
        """For integrations: a :class:`~ckptdb.extension.RecordSealer` for ``namespace``'s
        key scope, or None when the namespace is not encrypted. KeyUnavailableError /
        KeyMismatchError when its key is missing or wrong."""
        scope = encryption_op.scope_of(self._handle, validation.namespace(namespace), fresh=True)
        return RecordSealer(scope) if scope.sealed else None

    def content_address(self, namespace: str, data: bytes) -> str:
        """The digest ``data`` is stored under in ``namespace`` -- its sha256, or inside a
        key scope the scope's keyed HMAC -- so an integration can name a blob it stored
        (``BlobRef(db.content_address(ns, data), len(data))``) without reading it back."""
        scope = encryption_op.scope_of(self._handle, validation.namespace(namespace))
        return scope.address(bytes(data))

    def key_scopes(self) -> list[models.KeyScope]:
        """Every key scope of the file (shredded ones too); never any key material."""
        return encryption_op.list_scopes(self._handle)

    def drop_namespace(
        self,
        namespace: str,
        *,
        force: bool = False,
        dry_run: bool = False,
        on_drop: Callable[[Session], None] | None = None,
    ) -> models.PruneReport:
        """Delete a namespace: its CURRENT pointer, its history and every checkpoint of it
        (then the blobs nothing else uses). A namespace with pinned checkpoints is refused
        with ProtectedError unless ``force`` (which removes those pins). Interrupted, it can
        simply be run again. A receipt is stored.

        ``on_drop``: an integration's hook, called with a session confined to its own
        tables inside the transaction that completes the drop, so that its rows about the
        namespace go in the same commit (a namespace already gone: in a transaction of its
        own). Not called on a dry run, nor when the drop is refused."""
        ns = validation.namespace(namespace)
        if on_drop is not None and not callable(on_drop):
            raise errors.InvalidInputError("on_drop must be a callable taking a session")
        return deletion_op.drop_namespace(
            self._handle, ns, force=force, dry_run=dry_run, on_drop=on_drop
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
        scope = [validation.namespace(n) for n in namespaces] if namespaces else None
        return deletion_op.prune(self._handle, dict(where), namespaces=scope, dry_run=dry_run)

    # -- quotas -------------------------------------------------------------------------

    def set_quota(
        self,
        prefix: str,
        *,
        max_checkpoints: int | None = None,
        max_bytes: int | None = None,
        applies_to: quota_op.AppliesTo = "each",
        on_exceed: quota_op.OnExceed = "refuse",
    ) -> models.Quota:
        """Limit what the namespaces whose names start with ``prefix`` ('' = all) may hold:
        at most ``max_checkpoints`` stored checkpoints and/or ``max_bytes`` logical bytes
        (the sum of their total sizes), for ``each`` namespace on its own or their
        ``total``. Replaces the quota of the same (prefix, applies_to).

        Every commit under the prefix is checked inside its own transaction. One that would
        pass the limit is refused with QuotaExceededError (``on_exceed="refuse"``, nothing
        written), or makes room by deleting the oldest checkpoints under the quota that
        nothing protects -- CURRENT, fallbacks, pins and what stored retention policies keep
        -- in the same transaction, with a ``quota_evict`` receipt (``"evict"``); if that
        cannot make room it is refused too. A limit below the present usage applies from
        the next commit. Bad arguments raise InvalidQuotaError; see :mod:`ckptdb.ops.quota`.
        """
        row = quota_op.quota_row(
            prefix,
            max_checkpoints=max_checkpoints,
            max_bytes=max_bytes,
            applies_to=applies_to,
            on_exceed=on_exceed,
        )
        return quota_op.set_quota(self._handle, row)

    def clear_quota(self, prefix: str, *, applies_to: quota_op.AppliesTo = "each") -> bool:
        """Remove the quota of (prefix, applies_to); True if there was one."""
        text = quota_op.check_prefix(prefix)
        scope = quota_op.check_applies_to(applies_to)
        return quota_op.clear_quota(self._handle, text, scope)

    def quotas(self) -> list[models.Quota]:
        """Stored quotas, by prefix then applies_to."""
        return quota_op.list_quotas(self._handle)

    # -- inspection, checkout, export and import --------------------------------------

    def stats(self) -> models.Stats:
        """File size, WAL size, free pages, row counts, deduplication ratio, and what each
        namespace holds (checkpoints, logical and stored bytes: ``usage``)."""
        return stats.collect(self._handle, self.path)

    def query(
        self,
        sql: str,
        params: query_module.QueryParams = (),
        *,
        timeout: float | None = query_module.DEFAULT_TIMEOUT,
    ) -> models.QueryResult:
        """Run one read-only SQL statement (SELECT, WITH, read-only PRAGMA) and return its
        columns (in order, repeats kept) and rows. Anything that would write is refused with
        ReadOnlyError before it runs -- on any handle, whatever its mode; more than one
        statement with MultipleStatementsError. ``params``: a mapping for ``:name``
        parameters or a sequence for ``?``. ``timeout`` (seconds, None for none) interrupts
        a runaway query with QueryTimeoutError. See :mod:`ckptdb.ops.query`."""
        return query_module.run(self._handle, sql, params, timeout=timeout)

    @contextmanager
    def query_stream(
        self,
        sql: str,
        params: query_module.QueryParams = (),
        *,
        timeout: float | None = query_module.DEFAULT_TIMEOUT,
    ) -> Iterator[query_module.QueryStream]:
        """:meth:`query`, streaming: yields the columns and an iterator that reads one row
        at a time (the handle is held until the block ends)."""
        with query_module.stream(self._handle, sql, params, timeout=timeout) as qs:
            yield qs

    def checkout(
        self,
        ref: str,
        target: str | os.PathLike[str],
        *,
        force: bool = False,
        fallback: bool = False,
        progress: Callable[[int, int], None] | None = None,
        expect: Mapping[str, Any] | None = None,
        accept_schemas: Mapping[str, int] | None = None,
        max_bytes: int | None = None,
    ) -> models.CheckoutResult:
        """Materialize a checkpoint (any reference :meth:`resolve` accepts) into a
        directory: written to a temporary sibling, fsynced, then renamed into place. Files
        are 0600, directories 0700; symlinks are never followed. With ``fallback``, the
        newest verified ancestor is used when the checkpoint itself does not verify: the
        result then has ``disposition="degraded_fallback"``, the ``requested_id`` and the
        ``receipt_id`` of the fallback receipt. ``progress(done, total)`` counts bytes.
        ``expect``, ``accept_schemas`` and ``max_bytes`` are checked as by :meth:`load`
        before anything is written (with ``fallback``, skipping as it does); a revision
        mismatch is noted in ``revision_mismatch``."""
        checks = self._load_checks(expect, accept_schemas, max_bytes)
        checkpoint_id = self.resolve(ref)
        loaded = None
        if fallback:
            loaded = self.load_checkpoint(
                checkpoint_id,
                fallback=True,
                expect=expect,
                accept_schemas=accept_schemas,
                max_bytes=max_bytes,
            )
            cp = loaded.checkpoint
            note = loaded.revision_mismatch
        else:
            cp = self.get(checkpoint_id)
            note = load_op.check_and_note(cp, checks)
        result = checkout_op.checkout(cp, target, force=force, progress=progress)
        result = result.model_copy(update={"revision_mismatch": note})
        if loaded is None or loaded.receipt is None:
            return result.model_copy(update={"requested_id": checkpoint_id})
        return result.model_copy(
            update={
                "requested_id": checkpoint_id,
                "disposition": loaded.disposition,
                "receipt_id": loaded.receipt.receipt_id,
                "rejected": list(loaded.receipt.rejected),
            }
        )

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
        renamed into place. ``progress(done, total)`` counts entry bytes copied."""
        dest_path = validation.database_path(dest, "the export's destination")
        since_id = self.resolve(since) if since else None
        return transfer.export_to(
            self._handle,
            self.path,
            dest_path,
            namespaces=namespaces,
            since=since_id,
            progress=progress,
            create=lambda path, page_size: open_op.new_file(
                path, chunk_size=self.chunk_size, page_size=page_size, vfs=self._vfs
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
        source_path = validation.database_path(source, "the import's source")
        return transfer.import_from(
            self._handle,
            self.path,
            source_path,
            namespaces=namespaces,
            overwrite=overwrite,
            progress=progress,
            open_source=lambda path: open(path, readonly=True, vfs=self._vfs)._handle,
        )

    def receipts(
        self, *, kind: str | None = None, limit: int | None = None
    ) -> list[models.Receipt]:
        """Stored receipts, newest first, optionally of one kind."""
        return receipt_op.list_receipts(self._handle, kind, _limit(limit))

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
        return receipt_op.record(
            self._handle, kind, dict(body), namespace=namespace, checkpoint_id=checkpoint_id
        )


def _reason(reason: object) -> None:
    if not isinstance(reason, str) or not reason or len(reason) > 200:
        raise errors.InvalidInputError("reason must be a non-empty str of at most 200 chars")


def _limit(limit: object) -> int | None:
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise errors.InvalidInputError("limit must be a non-negative whole number or None")
    return limit
