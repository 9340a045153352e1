"""``ckptdb import-from langgraph-sqlite SOURCE DB``: move a LangGraph SqliteSaver database
into ckptdb without losing history.

Every checkpoint of the source (all threads and checkpoint namespaces, with parent links
and metadata) becomes a checkpoint of the :class:`CkptdbSaver` layout, and every pending
write is copied, so ``CkptdbSaver(DB)`` continues each thread where ``SqliteSaver`` left
it. Channel values are split out of SqliteSaver's one-blob-per-step rows into
content-addressed blobs, so a file that stored the full state at every step shrinks.

Safety:

* The source is opened read-only (``mode=ro``) with Python's ``sqlite3`` and is never
  modified; it must be a regular file (not a symlink) other than DB. Its structure
  (``PRAGMA quick_check``) and schema are checked before anything is written: a file that
  is not a SqliteSaver database raises :class:`NotLangGraphSqliteError` and DB is left as
  it was.
* Nothing is deserialized into Python objects: channel values are split at the msgpack
  (or JSON) level and re-encoded byte for byte, so importing a file never runs code from
  it. Values stored with pickle are refused and reported as skipped.
* Idempotent: a checkpoint that is already there (same thread, namespace and id) is
  reported with ``created=False``; writes are inserted only once. A second run imports
  nothing new.

``namespace``, when given, restricts the import to the thread with that ``thread_id``
(ckptdb namespaces are derived from thread ids, see :mod:`._layout`).
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any

import ormsgpack

from ... import errors
from ...connection import Connection, open_foreign_readonly
from ...database import Database
from ...models import ImportedItem, ImportReport, SkippedItem, from_ms
from ...types import Progress
from . import _layout, sealing
from ._core import HAS_TABLES_SQL
from .errors import NotLangGraphSqliteError
from .saver import CkptdbSaver

KIND = "langgraph-sqlite"
_CHECKPOINT_COLUMNS = {
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "type",
    "checkpoint",
    "metadata",
}
_WRITE_COLUMNS = {"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel"}
_WRITE_VALUE_COLUMNS = {"type", "value"}
_WRITE_BATCH = 500
_MSGPACK_OPTIONS = ormsgpack.OPT_NON_STR_KEYS
#: Seconds of SQLite work any one read of the source may take (a hostile file can make a
#: read endless); past it the read is interrupted with SourceTimeoutError.
READ_TIMEOUT = 60.0
#: What decoding a hostile value can raise (deep nesting, absurd sizes, wrong types).
_DECODE_ERRORS = (ValueError, TypeError, RecursionError, MemoryError, OverflowError)


def _open_source(path: str) -> Connection:
    # Read-only, trusted_schema=OFF, defensive; immutable when no WAL is beside it (no
    # connection has the file open, so SQLite creates no -wal/-shm beside it either).
    try:
        return open_foreign_readonly(path)
    except errors.CkptdbError as exc:
        raise NotLangGraphSqliteError(f"{path} cannot be opened as SQLite: {exc}") from exc


class _Deadline:
    """The time a single read of the source may take (checked by a progress handler)."""

    def __init__(self, path: str, seconds: float) -> None:
        self.path = path
        self.seconds = seconds
        self.until = 0.0

    @contextmanager
    def bound(self, conn: Connection, what: str) -> Iterator[None]:
        self.until = time.monotonic() + self.seconds

        def check() -> None:
            if time.monotonic() > self.until:
                raise errors.SourceTimeoutError(
                    f"{self.path}: {what} took longer than {self.seconds:g} s and was "
                    "interrupted (a hostile source can make a read endless). What was "
                    "imported so far is consistent; nothing more was imported.",
                    timeout=self.seconds,
                )

        with conn.progress_check(check):
            yield


def _check_source(path: str, target: Database) -> str:
    """Absolute path of a source that may be read; typed errors otherwise."""
    full = os.path.abspath(path)
    try:
        st = os.lstat(full)
    except OSError as exc:
        raise errors.InvalidInputError(f"cannot read {full}: {exc.strerror}") from exc
    if stat.S_ISLNK(st.st_mode):
        raise errors.UnsafePathError(
            f"{full} is a symlink; give the path of the SqliteSaver file itself"
        )
    if not stat.S_ISREG(st.st_mode):
        raise errors.InvalidInputError(f"{full} is not a regular file")
    if os.path.exists(target.path) and os.path.samefile(full, target.path):
        raise errors.InvalidInputError("the source and the destination are the same file")
    return full


def _columns(conn: Connection, table: str) -> dict[str, int]:
    """Column name -> hidden flag (0 plain, 1 hidden, 2/3 generated) of a table."""
    return {str(r[1]): int(r[6]) for r in conn.execute(f"PRAGMA table_xinfo({table})")}


def _validate(conn: Connection, path: str, deadline: _Deadline) -> bool:
    """Check that the source is a sound SqliteSaver database; returns whether its writes
    table has the ``task_path`` column. ``checkpoints`` and ``writes`` must be real tables
    (not views, not virtual tables) of plain columns: reading them runs no code of the
    file's choosing."""
    try:
        with deadline.bound(conn, "reading the schema"):
            objects = {
                str(r[0]): (str(r[1]), str(r[2] or ""))
                for r in conn.execute("SELECT name, type, sql FROM sqlite_schema")
            }
        with deadline.bound(conn, "PRAGMA quick_check"):
            check = [str(r[0]) for r in conn.execute("PRAGMA quick_check")]
    except errors.SourceTimeoutError:
        raise
    except errors.CkptdbError as exc:
        raise NotLangGraphSqliteError(
            f"{path} is not a LangGraph SqliteSaver database ({exc}); nothing was imported"
        ) from exc
    if check != ["ok"]:
        raise errors.CorruptionError(
            f"{path} is damaged (PRAGMA quick_check: {'; '.join(check[:3])}); nothing was "
            "imported. Recover it with the sqlite3 shell's .recover first."
        )
    if "checkpoints" not in objects or "writes" not in objects:
        raise NotLangGraphSqliteError(
            f"{path} is an SQLite database but not a LangGraph SqliteSaver one (it has no "
            "'checkpoints' and 'writes' tables); nothing was imported"
        )
    for table in ("checkpoints", "writes"):
        kind, sql = objects[table]
        if kind != "table" or sql.upper().lstrip().startswith("CREATE VIRTUAL"):
            raise NotLangGraphSqliteError(
                f"{path}: {table!r} is a {'virtual table' if kind == 'table' else kind}, not a "
                "table; a SqliteSaver database has plain tables. Nothing was imported."
            )
    checkpoint_columns, write_columns = _columns(conn, "checkpoints"), _columns(conn, "writes")
    missing = (_CHECKPOINT_COLUMNS - checkpoint_columns.keys()) | (
        (_WRITE_COLUMNS | _WRITE_VALUE_COLUMNS) - write_columns.keys()
    )
    if missing:
        raise NotLangGraphSqliteError(
            f"{path}: the SqliteSaver tables lack the columns {sorted(missing)}; this is not "
            "a schema ckptdb knows how to import. Nothing was imported."
        )
    generated = [
        f"{t}.{c}"
        for t, cols in (("checkpoints", checkpoint_columns), ("writes", write_columns))
        for c, hidden in cols.items()
        if hidden
    ]
    if generated:
        raise NotLangGraphSqliteError(
            f"{path}: the columns {generated} are generated or hidden; a SqliteSaver database "
            "has none. Nothing was imported."
        )
    return "task_path" in write_columns


def _raw_msgpack(data: bytes) -> Any:
    """Decode msgpack without reviving anything: extension types stay opaque."""
    return ormsgpack.unpackb(data, ext_hook=ormsgpack.Ext, option=_MSGPACK_OPTIONS)


class _Bad(Exception):
    """A source row that cannot be imported (reported as skipped)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def split_checkpoint(
    type_: str, blob: bytes, inline_max: int
) -> tuple[_layout.Typed, frozenset[str], dict[str, _layout.Typed]]:
    """A SqliteSaver checkpoint blob as envelope v2 parts -- the checkpoint serialized with
    its channel values of up to ``inline_max`` bytes (``channel_values`` first), the names
    of those channels, and each larger value serialized on its own -- without
    deserializing any value into an object."""
    if type_ == "pickle":
        raise _Bad("pickle_refused", "stored with pickle; ckptdb never loads pickle")
    try:
        if type_ == "msgpack":
            raw = _raw_msgpack(blob)
        elif type_ == "json":
            raw = json.loads(blob)
        else:
            raise _Bad("unsupported_type", f"serialization type {type_!r} is not supported")
    except _DECODE_ERRORS as exc:
        raise _Bad(
            "malformed_checkpoint", f"cannot decode the {type_} checkpoint: {_why(exc)}"
        ) from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("channel_values", {}), dict):
        raise _Bad("malformed_checkpoint", "the checkpoint is not a map with channel_values")
    values = raw.pop("channel_values", {})

    def encode(value: Any) -> _layout.Typed:
        if type_ == "msgpack":
            return "msgpack", ormsgpack.packb(value, option=_MSGPACK_OPTIONS)
        return "json", json.dumps(value, ensure_ascii=False).encode("utf-8")

    try:
        within: dict[str, Any] = {}
        apart: dict[str, _layout.Typed] = {}
        for key, value in values.items():
            typed = encode(value)
            if len(typed[1]) <= inline_max:
                within[str(key)] = value
            else:
                apart[str(key)] = typed
        return encode({"channel_values": within, **raw}), frozenset(within), apart
    except _DECODE_ERRORS as exc:
        raise _Bad("malformed_checkpoint", f"cannot re-encode the checkpoint: {_why(exc)}") from exc


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "it nests too deeply"
    if isinstance(exc, MemoryError):
        return "it claims more memory than is available"
    return str(exc)[:300]


def _text(value: Any, what: str) -> str | None:
    """A text column read as bytes (CAST AS BLOB), decoded here so one damaged value spoils
    only its own record."""
    if value is None:
        return None
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Bad("bad_text", f"{what} is not valid UTF-8") from exc


def _metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    try:
        text = value.decode("utf-8") if isinstance(value, bytes) else str(value)
        parsed = json.loads(text)
    except _DECODE_ERRORS as exc:
        raise _Bad("bad_metadata", f"metadata is not JSON: {_why(exc)}") from exc
    if not isinstance(parsed, dict):
        raise _Bad("bad_metadata", "metadata is not a JSON object")
    return parsed


def _source_id(thread_id: str, ns: str, checkpoint_id: str) -> str:
    return f"thread_id={thread_id!r} checkpoint_ns={ns!r} checkpoint_id={checkpoint_id!r}"


def _rows(
    conn: Connection, sql: str, params: tuple[Any, ...], deadline: _Deadline, what: str
) -> Iterator[tuple[Any, ...]]:
    """Stream the rows of one statement, each step bounded by the deadline (restarted for
    every row: the time ckptdb spends importing a row is not the source's)."""
    deadline.until = time.monotonic() + deadline.seconds
    try:
        with conn.progress_check(lambda: _deadline_check(deadline, what)):
            for row in conn.iterate(sql, params):
                yield row
                deadline.until = time.monotonic() + deadline.seconds
    except errors.SourceTimeoutError:
        raise
    except errors.CkptdbError as exc:
        raise errors.CorruptionError(
            f"reading the source failed ({exc}); what was imported so far is consistent and "
            "a re-run continues (it is idempotent)"
        ) from exc


def _deadline_check(deadline: _Deadline, what: str) -> None:
    if time.monotonic() > deadline.until:
        raise errors.SourceTimeoutError(
            f"{deadline.path}: {what} took longer than {deadline.seconds:g} s and was "
            "interrupted (a hostile source can make a read endless). What was imported so far "
            "is consistent; nothing more was imported.",
            timeout=deadline.seconds,
        )


def import_langgraph_sqlite(
    db: Database,
    source: str | os.PathLike[str],
    *,
    namespace: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    read_timeout: float = READ_TIMEOUT,
) -> ImportReport:
    """Import a LangGraph SqliteSaver database into ``db`` (see the module docstring)."""
    path = _check_source(os.fspath(source), db)
    thread_filter = namespace
    deadline = _Deadline(path, read_timeout)
    with closing(_open_source(path)) as conn:
        has_task_path = _validate(conn, path, deadline)
        where = " WHERE thread_id = ?" if thread_filter is not None else ""
        params: tuple[Any, ...] = (thread_filter,) if thread_filter is not None else ()
        with deadline.bound(conn, "counting checkpoints"):
            total = int(conn.scalar(f"SELECT count(*) FROM checkpoints{where}", params) or 0)
        saver = _target_saver(db, dry_run)
        imported: list[ImportedItem] = []
        skipped: list[SkippedItem] = []
        touched: set[str] = set()
        present: set[tuple[str, str, str]] = set()
        for done, (thread_id, ns, checkpoint_id, parent_id, type_, blob, meta) in enumerate(
            _rows(
                conn,
                "SELECT CAST(thread_id AS BLOB), CAST(checkpoint_ns AS BLOB),"
                " CAST(checkpoint_id AS BLOB), CAST(parent_checkpoint_id AS BLOB),"
                " CAST(type AS BLOB), checkpoint, CAST(metadata AS BLOB)"
                f" FROM checkpoints{where} ORDER BY thread_id, checkpoint_ns, checkpoint_id",
                params,
                deadline,
                "reading checkpoints",
            ),
            start=1,
        ):
            item = _import_row(
                saver, thread_id, ns, checkpoint_id, parent_id, type_, blob, meta, dry_run
            )
            if isinstance(item, SkippedItem):
                skipped.append(item)
            else:
                imported.append(item)
                present.add(_key(thread_id, ns, checkpoint_id))
                touched.add(item.namespace)
            if progress is not None:
                progress(done, total)
        skipped.extend(
            _import_writes(conn, saver, present, where, params, has_task_path, dry_run, deadline)
        )
    receipt_id = None
    if not dry_run:
        receipt_id = db.record_receipt(
            "import-from",
            {
                "kind": KIND,
                "source": path,
                "namespaces": sorted(touched),
                "imported": sum(1 for i in imported if i.created),
                "already_present": sum(1 for i in imported if not i.created),
                "skipped": [s.model_dump() for s in skipped],
            },
        )
    return ImportReport(
        kind=KIND,
        source=path,
        dry_run=dry_run,
        receipt_id=receipt_id,
        namespaces=sorted(touched),
        imported=imported,
        skipped=skipped,
        at=from_ms(time.time_ns() // 1_000_000),
    )


def _target_saver(db: Database, dry_run: bool) -> CkptdbSaver | None:
    """The saver that writes into ``db``; None for a dry run on a file without the
    integration's tables (everything would be new, and a dry run writes nothing)."""
    if not dry_run:
        return CkptdbSaver(db)
    with db.read_session() as s:
        has_tables = s.scalar(HAS_TABLES_SQL[s.dialect])
    return CkptdbSaver(db) if has_tables and not db.readonly else None


def _key(thread_id: Any, ns: Any, checkpoint_id: Any) -> tuple[str, str, str]:
    """The (thread, namespace, id) of a row read as bytes (lossy only for text that is not
    UTF-8, whose record is skipped anyway)."""

    def text(v: Any) -> str:
        return "" if v is None else bytes(v).decode("utf-8", "replace")

    return text(thread_id), text(ns), text(checkpoint_id)


def _import_row(
    saver: CkptdbSaver | None,
    thread_id: Any,
    ns: Any,
    checkpoint_id: Any,
    parent_id: Any,
    type_: Any,
    blob: Any,
    meta: Any,
    dry_run: bool,
) -> ImportedItem | SkippedItem:
    """One source row: any failure to decode or accept it is a typed, per-record skip."""
    tid, cns, cid = _key(thread_id, ns, checkpoint_id)
    try:
        tid = _text(thread_id, "thread_id") or ""
        cns = _text(ns, "checkpoint_ns") or ""
        cid = _text(checkpoint_id, "checkpoint_id") or ""
        parent = _text(parent_id, "parent_checkpoint_id")
        kind = _text(type_, "type") or ""
        metadata = _text(meta, "metadata")
        return _import_one(saver, tid, cns, cid, parent, kind, blob, metadata, dry_run)
    except _Bad as bad:
        return SkippedItem(source_id=_source_id(tid, cns, cid), code=bad.code, detail=bad.detail)
    except _DECODE_ERRORS as exc:
        return SkippedItem(
            source_id=_source_id(tid, cns, cid), code="malformed_checkpoint", detail=_why(exc)
        )
    except (errors.InvalidInputError, errors.CorruptionError) as exc:
        return SkippedItem(source_id=_source_id(tid, cns, cid), code=exc.code, detail=exc.message)


def _existing(saver: CkptdbSaver | None, tid: str, ns: str, cid: str) -> str | None:
    return None if saver is None else saver._lookup(tid, ns, cid)


def _import_one(
    saver: CkptdbSaver | None,
    tid: str,
    ns: str,
    cid: str,
    parent_id: Any,
    type_: str,
    blob: Any,
    meta: Any,
    dry_run: bool,
) -> ImportedItem | SkippedItem:
    source_id = _source_id(tid, ns, cid)
    try:
        # A thread the target already has continues in the namespace it registered (an
        # encrypted scope, or a name of an older layout); a new one gets the mapping's.
        registered = None if saver is None else saver._registered_namespace(tid, ns)
        namespace = registered or _layout.namespace_for(tid, ns)
    except errors.InvalidInputError as exc:
        return SkippedItem(source_id=source_id, code="invalid_name", detail=exc.message)
    found = _existing(saver, tid, ns, cid)
    if found is not None:
        return ImportedItem(
            source_id=source_id, namespace=namespace, checkpoint_id=found, created=False
        )
    try:
        if not isinstance(blob, bytes):
            raise _Bad("malformed_checkpoint", "the checkpoint column is not a BLOB")
        inline_max = _layout.DEFAULT_INLINE_MAX if saver is None else saver.inline_max
        doc, within, apart = split_checkpoint(type_, blob, inline_max)
        md = _metadata(meta)
    except _Bad as bad:
        return SkippedItem(source_id=source_id, code=bad.code, detail=bad.detail)
    parent = str(parent_id) if parent_id else None
    if dry_run or saver is None:
        return ImportedItem(
            source_id=source_id, namespace=namespace, checkpoint_id="", created=True
        )
    entries = saver._entries(doc, parent, within, apart, namespace, {}, {}).entries
    run, ck_meta = _layout.checkpoint_metadata(md, tid, ns, cid)
    try:
        ack = saver._commit(  # the importer is part of the integration
            namespace, tid, ns, cid, parent, run, entries, ck_meta, "lg.import"
        )
    except errors.InvalidMetadataError as exc:
        return SkippedItem(source_id=source_id, code="bad_metadata", detail=exc.message)
    return ImportedItem(
        source_id=source_id, namespace=namespace, checkpoint_id=ack.checkpoint_id, created=True
    )


def _write_index(idx: Any) -> int:
    if isinstance(idx, bool) or not isinstance(idx, int) or not -(2**63) <= idx < 2**63:
        raise _Bad("bad_write", f"idx {idx!r} is not an integer")
    return idx


def _import_writes(
    conn: Connection,
    saver: CkptdbSaver | None,
    present: set[tuple[str, str, str]],
    where: str,
    params: tuple[Any, ...],
    has_task_path: bool,
    dry_run: bool,
    deadline: _Deadline,
) -> list[SkippedItem]:
    """Copy the pending writes of every checkpoint that is (now) in the target."""
    skipped: list[SkippedItem] = []
    orphans: dict[tuple[str, str, str], int] = {}
    batch: list[tuple[Any, ...]] = []
    task_path = "CAST(task_path AS BLOB)" if has_task_path else "''"

    def flush() -> None:
        if batch and saver is not None and not dry_run:
            with saver.db.write_session() as s:
                s.executemany(
                    "INSERT INTO lg_write (thread_id, checkpoint_ns, checkpoint_id,"
                    " task_id, idx, channel, type, value, task_path, digest)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    [sealing.sealed_row(r) for r in batch],
                )
        batch.clear()

    for tid, ns, cid, task_id, idx, channel, type_, value, path in _rows(
        conn,
        "SELECT CAST(thread_id AS BLOB), CAST(checkpoint_ns AS BLOB), CAST(checkpoint_id AS"
        " BLOB), CAST(task_id AS BLOB), idx, CAST(channel AS BLOB), CAST(type AS BLOB), value,"
        f" {task_path} FROM writes{where} ORDER BY thread_id, checkpoint_ns, checkpoint_id",
        params,
        deadline,
        "reading pending writes",
    ):
        key = _key(tid, ns, cid)
        if key not in present:
            orphans[key] = orphans.get(key, 0) + 1
            continue
        where_id = _source_id(*key) + f" write task_id={_key(task_id, None, None)[0]!r} idx={idx!r}"
        try:
            kind = _text(type_, "type")
            row = (
                *key,
                _text(task_id, "task_id") or "",
                _write_index(idx),
                _text(channel, "channel") or "",
                kind or "null",
                value
                if isinstance(value, bytes)
                else b""
                if value is None
                else str(value).encode(),
                (_text(path, "task_path") or "") if isinstance(path, bytes) else str(path or ""),
            )
        except _Bad as bad:
            skipped.append(SkippedItem(source_id=where_id, code=bad.code, detail=bad.detail))
            continue
        if kind == "pickle":
            skipped.append(
                SkippedItem(
                    source_id=where_id,
                    code="pickle_refused",
                    detail="a pending write stored with pickle; ckptdb never loads pickle",
                )
            )
            continue
        batch.append(row)
        if len(batch) >= _WRITE_BATCH:
            flush()
    flush()
    for key, count in sorted(orphans.items()):
        skipped.append(
            SkippedItem(
                source_id=_source_id(*key),
                code="orphan_writes",
                detail=f"{count} pending write(s) of a checkpoint that was not imported",
            )
        )
    return skipped
