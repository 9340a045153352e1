"""Opening a file: probe it before SQLite may write, initialize or migrate, build a handle."""

from __future__ import annotations

import os
from typing import Literal

from .. import errors, files, limits
from ..connection import (
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
from ..connection.engine import EngineConnection
from ..store import (
    blob_scans,
    checkpoint_scans,
    entry_move,
    migrations,
    schema,
    settings,
)
from ..store.chunking import Chunker
from ..store.scopes import KeyProvider, Keyring
from . import migrate as migrate_op
from .handle import Handle
from .unit import Clock, system_clock

MigrateMode = Literal["auto", "never", "check"]


def _probe_existing(path: str, *, readonly: bool) -> tuple[bool, list[str]]:
    """Check an existing SQLite file through a read-only connection, before SQLite may
    write to it. Returns (whether the file is an uninitialized shell -- created by a ckptdb
    that crashed before its first migration committed -- that may be initialized, the ways
    its schema differs from ckptdb's). A file whose schema differs is refused unless it is
    opened read-only (for inspection)."""
    probe = open_probe(path)
    try:
        app_id = int(probe.pragma("application_id")) & 0xFFFFFFFF
        objects = int(probe.scalar("SELECT count(*) FROM sqlite_schema"))
        if app_id != APPLICATION_ID:
            if app_id == 0 and objects == 0:
                return True, []
            raise errors.NotCkptdbError(
                f"{path} is an SQLite database of another application (application_id "
                f"{app_id:#x}, {objects} schema objects); ckptdb will not touch it. Choose a new "
                "file name for a ckptdb database."
            )
        return False, _check_schema(probe, path, readonly=readonly)[1]
    finally:
        probe.close()


def _check_schema(
    conn: Connection, path: str, *, readonly: bool
) -> tuple[list[migrations.Migration], list[str]]:
    """The probe's checks of a file with ckptdb's application id, reading only: its
    migration history, then its schema (refused unless ``readonly``). Returns the pending
    core migrations and the ways the schema differs from ckptdb's."""
    pending = migrations.check_history(conn, migrations.core_set())
    with conn.read_transaction():  # one snapshot: a migration may be running elsewhere
        if not readonly:
            schema.require_valid(conn, path)
            return pending, []
        return pending, schema.mismatches(conn)


def _needs_probe(path: str, facts: files.HeaderFacts, *, readonly: bool) -> bool:
    """Whether the file must be checked through a separate read-only probe before the
    handle's own connection opens it, or that connection may run the checks itself.

    The handle's connection may, when nothing it does before the checks pass can change a
    byte of the file: it is read-only; or the header is ckptdb's and in WAL mode, with no
    rollback journal beside it (a read-write connection would roll it back) and no WAL
    holding frames (closing after a refusal would copy them into the file). Closing after a
    refusal then checkpoints an empty WAL -- no write -- and removes the -wal and -shm it
    made. Saves a second connection and a second parse of the schema on every open."""
    if facts.application_id != APPLICATION_ID:
        return True
    if readonly:
        return False
    wal = path + "-wal"
    return (
        not facts.wal
        or os.path.exists(path + "-journal")
        or (os.path.exists(wal) and os.path.getsize(wal) > 0)
    )


def _finish_interrupted_creation(conn: Connection, chunk_size: int | None, *, write: bool) -> None:
    """Give the settings it never got to a file whose creation was interrupted.

    Earlier releases created a file in one commit per migration and then recorded the
    chunk size in another: a crash in between left tables, no ``chunk_size`` and nothing
    stored, which reads as a damaged file. Nothing in such a file depends on a chunk size
    yet, so it is finished as if new (``write``; else it is refused, saying how to finish
    it); a file that stores anything without one is left to be refused as damaged."""
    if settings.has_chunk_size(conn):
        return

    def stores_nothing() -> bool:
        stored = (
            checkpoint_scans.count(conn)
            + blob_scans.count_blobs(conn)
            + blob_scans.count_chunks(conn)
        )
        return stored == 0 and not settings.has_chunk_size(conn)

    if not write:
        with conn.read_transaction():
            if stores_nothing():
                raise errors.DatabaseFileError(
                    f"{conn.path} was left unfinished by an interrupted creation (no chunk "
                    "size recorded, nothing stored); open it read-write once to finish it"
                )
        return
    with conn.write_transaction():
        if stores_nothing():
            settings.init_new_file(
                conn, chunk_size or limits.DEFAULT_CHUNK_BYTES, fixed=chunk_size is not None
            )


def _refuse_pending(
    conn: EngineConnection,
    name: str,
    pending: list[migrations.Migration],
    migrate_mode: MigrateMode,
    *,
    readonly: bool,
) -> None:
    """MigrationPendingError when the database ``name`` needs ``pending`` migrations and
    the open may not apply them (``migrate="never"``, or a read-only open)."""
    if not pending or migrate_mode == "check":
        return
    command = "`ckptdb migrate DB up`" if isinstance(conn, Connection) else None
    if migrate_mode == "never":
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
        raise errors.MigrationPendingError(
            f"{name} is at schema version {migrations.user_version(conn)} and needs "
            f"migrations {names}; open it with migrate='auto'"
            + (f" or run {command}" if command else ""),
            pending=[m.version for m in pending],
        )
    if readonly:
        raise errors.MigrationPendingError(
            f"{name} needs schema migrations but was opened read-only; open it read-write "
            "once" + (f" (or run {command})" if command else ""),
            pending=[m.version for m in pending],
        )


def open_handle(
    path: str,
    *,
    readonly: bool,
    create: bool,
    migrate_mode: MigrateMode,
    synchronous: Synchronous,
    busy_timeout: float | None,
    chunk_size: int | None,
    page_size: int | None,
    vfs: str | None,
    keys: KeyProvider | None = None,
    clock: Clock = system_clock,
) -> Handle:
    """Open (creating and initializing when missing or empty) the file at the absolute
    ``path``; arguments were validated by the caller. ``keys`` unlock key scopes."""
    kind, facts = files.inspect_path(path)
    if kind is files.FileKind.MISSING:
        if readonly or not create:
            raise errors.DatabaseFileError(
                f"{path} does not exist; create it with ckptdb.open(path) or `ckptdb init`"
            )
        files.create_private_file(path)
        kind, facts = files.inspect_path(path)
    fresh = kind is files.FileKind.EMPTY
    schema_problems: list[str] = []
    probed = True
    if kind is files.FileKind.SQLITE:
        if facts is None or facts.application_id not in (0, APPLICATION_ID):
            raise errors.NotCkptdbError(
                f"{path} is an SQLite database of another application (application_id "
                f"{facts.application_id if facts else 0:#x}); ckptdb will not touch it"
            )
        probed = _needs_probe(path, facts, readonly=readonly)
        if probed:
            fresh, schema_problems = _probe_existing(path, readonly=readonly)
    if fresh and readonly:
        raise errors.DatabaseFileError(f"{path} is empty; it is not a ckptdb database yet")

    def connect() -> Connection:
        return open_connection(
            path, readonly=readonly, synchronous=synchronous, busy_timeout=busy_timeout, vfs=vfs
        )

    conn = connect()
    try:
        core = migrations.core_set()
        if not probed:  # the checks the probe would have made, on this connection
            pending, schema_problems = _check_schema(conn, path, readonly=readonly)
        if fresh:
            initialize_new_file(conn, page_size or DEFAULT_PAGE_SIZE)
        elif not readonly:
            ensure_wal(conn)
        if probed:
            pending = migrations.check_history(conn, core)
        _refuse_pending(conn, path, pending, migrate_mode, readonly=readonly)
        if pending and migrate_mode == "auto":
            if fresh:
                # A process racing us to create the file may win; then its settings stand.
                with conn.write_transaction():
                    if migrations.create_schema(conn, core, clock()):
                        settings.init_new_file(
                            conn,
                            chunk_size or limits.DEFAULT_CHUNK_BYTES,
                            fixed=chunk_size is not None,
                        )
            else:
                migrate_op.apply_pending(conn, core, clock)
            pending = []
        if migrate_mode == "auto" and not readonly and not fresh and entry_move.has_unmoved(conn):
            # Schema 7's data step, begun by this open or left by an interrupted one.
            migrate_op.move_entries(conn)
        if not pending and not fresh:
            # Read-only and "check" opens write nothing.
            _finish_interrupted_creation(
                conn, chunk_size, write=not readonly and migrate_mode != "check"
            )
        effective_chunk: int = limits.DEFAULT_CHUNK_BYTES
        chunker: Chunker | None = None
        if not pending:
            effective_chunk, chunker = settings.layout(conn, path)
        elif not fresh:  # a new file left unmigrated (migrate="check") has no tables
            settings.require_features(conn, path)
    except BaseException:
        conn.abandon()
        raise
    handle = Handle(
        conn,
        path=path,
        chunk_size=effective_chunk,
        pending=pending,
        reopen=connect,
        chunker=chunker,
        keyring=Keyring(keys),
        clock=clock,
    )
    handle.schema_problems = schema_problems
    return handle


def open_postgresql(
    url: str,
    *,
    readonly: bool,
    create: bool,
    migrate_mode: MigrateMode,
    busy_timeout: float | None,
    chunk_size: int | None,
    keys: KeyProvider | None = None,
    clock: Clock = system_clock,
) -> Handle:
    """Open the PostgreSQL database at ``url`` (docs/postgresql.md): create ckptdb's schema
    in an empty one (``create``), apply pending migrations (``migrate_mode``), build a
    handle. ``busy_timeout`` bounds each wait for a lock (None: wait as long as it takes).
    Every step that writes runs under the schema's advisory lock, so machines opening one
    database at once create or migrate it exactly once."""
    try:
        from ..connection.postgres import PgConnection  # noqa: PLC0415 - optional driver
    except ImportError as exc:
        raise errors.UnsupportedFeatureError(
            "the PostgreSQL engine needs its driver: pip install 'ckptdb[postgresql]'"
        ) from exc

    def connect() -> EngineConnection:
        wait = None if busy_timeout is None else max(busy_timeout, 0.001)
        return PgConnection.open(
            url, readonly=readonly, lock_timeout=wait, writes_in_transactions_only=True
        )

    conn = connect()
    try:
        core = migrations.postgresql_core_set()
        layout: tuple[int, Chunker | None] | None = None
        with conn.read_transaction():
            history = migrations.applied_by_set(conn)
            pending = migrations.check_history(conn, core, rows=history.get(core.name, []))
            if not pending:  # the usual open: the layout in the same snapshot
                layout = settings.layout(conn, conn.path)
        fresh = bool(pending) and pending[0].version == 1
        if fresh and (readonly or not create):
            raise errors.DatabaseFileError(
                f"{conn.path} holds no ckptdb schema yet; open it with create=True (the "
                "default) to create it"
            )
        _refuse_pending(conn, conn.path, pending, migrate_mode, readonly=readonly)
        if pending and migrate_mode == "auto":
            with conn.write_transaction():
                conn.lock(migrations.SCHEMA_LOCK)
                if migrations.create_schema(conn, core, clock()):
                    settings.init_new_file(
                        conn,
                        chunk_size or limits.DEFAULT_CHUNK_BYTES,
                        fixed=chunk_size is not None,
                    )
                else:
                    migrations.apply_pending_together(
                        conn, core, target=core.latest, now_ms=clock()
                    )
            pending = []
        if not pending:
            if layout is None:
                with conn.read_transaction():
                    layout = settings.layout(conn, conn.path)
            effective_chunk, chunker = layout
        else:
            effective_chunk, chunker = limits.DEFAULT_CHUNK_BYTES, None
    except BaseException:
        conn.abandon()
        raise
    handle = Handle(
        conn,
        path=conn.path,
        chunk_size=effective_chunk,
        pending=pending,
        reopen=connect,
        chunker=chunker,
        keyring=Keyring(keys),
        clock=clock,
    )
    # Each statement is a round trip to the server: an integration's set found complete
    # in this history is not read again (a set applied meanwhile is found by the re-read
    # its apply does when this history says it is pending).
    handle.history_at_open = None if pending else history
    return handle


def new_file(path: str, *, chunk_size: int, page_size: int, vfs: str | None) -> Handle:
    """Create a new ckptdb file (export's destination) with these layout settings."""
    return open_handle(
        os.path.abspath(path),
        readonly=False,
        create=True,
        migrate_mode="auto",
        synchronous="full",
        busy_timeout=DEFAULT_BUSY_TIMEOUT,
        chunk_size=chunk_size,
        page_size=page_size,
        vfs=vfs,
    )


def open_virtual(
    name: str,
    vfs: str,
    busy_timeout: float | None,
    keys: KeyProvider | None = None,
    *,
    clock: Clock = system_clock,
) -> Handle:
    """Open, read-only, a name that ``vfs`` serves (a replica read through a VFS): the
    probe runs through the VFS, since there is no local file to inspect."""

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
        pending = migrations.check_history(conn, migrations.core_set())
        if pending:
            raise errors.MigrationPendingError(
                f"{name} (through the {vfs} VFS) needs schema migrations; migrate the "
                "primary (`ckptdb migrate DB up`) and let it replicate",
                pending=[m.version for m in pending],
            )
        with conn.read_transaction():
            problems = schema.mismatches(conn)
        chunk, chunker = settings.layout(conn, name)
    except BaseException:
        conn.abandon()
        raise
    handle = Handle(
        conn,
        path=name,
        chunk_size=chunk,
        pending=[],
        reopen=connect,
        chunker=chunker,
        keyring=Keyring(keys),
        clock=clock,
    )
    handle.schema_problems = problems
    return handle
