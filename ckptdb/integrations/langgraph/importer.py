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
import sqlite3
import stat
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any

import ormsgpack

from ... import errors
from ...database import Database
from ...models import ImportedItem, ImportReport, SkippedItem, from_ms
from . import _layout
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

Progress = Callable[[int, int], None]


def _open_source(path: str) -> sqlite3.Connection:
    # Read-only. With no -wal and no -shm beside it, no connection has the file open and
    # the main file holds everything: open it immutable, so SQLite creates no -wal/-shm
    # beside it either. Otherwise (a writer may be live) read it through its WAL.
    immutable = not os.path.exists(path + "-wal") and not os.path.exists(path + "-shm")
    uri = "file:" + urllib.parse.quote(path) + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        raise NotLangGraphSqliteError(f"{path} cannot be opened as SQLite: {exc}") from exc
    conn.text_factory = str
    return conn


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


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}


def _validate(conn: sqlite3.Connection, path: str) -> bool:
    """Check that the source is a sound SqliteSaver database; returns whether its writes
    table has the ``task_path`` column."""
    try:
        tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
        check = [str(r[0]) for r in conn.execute("PRAGMA quick_check")]
    except sqlite3.DatabaseError as exc:
        raise NotLangGraphSqliteError(
            f"{path} is not a LangGraph SqliteSaver database ({exc}); nothing was imported"
        ) from exc
    if check != ["ok"]:
        raise errors.CorruptionError(
            f"{path} is damaged (PRAGMA quick_check: {'; '.join(check[:3])}); nothing was "
            "imported. Recover it with the sqlite3 shell's .recover first."
        )
    if "checkpoints" not in tables or "writes" not in tables:
        raise NotLangGraphSqliteError(
            f"{path} is an SQLite database but not a LangGraph SqliteSaver one (it has no "
            "'checkpoints' and 'writes' tables); nothing was imported"
        )
    missing = (_CHECKPOINT_COLUMNS - _columns(conn, "checkpoints")) | (
        (_WRITE_COLUMNS | _WRITE_VALUE_COLUMNS) - _columns(conn, "writes")
    )
    if missing:
        raise NotLangGraphSqliteError(
            f"{path}: the SqliteSaver tables lack the columns {sorted(missing)}; this is not "
            "a schema ckptdb knows how to import. Nothing was imported."
        )
    return "task_path" in _columns(conn, "writes")


def _raw_msgpack(data: bytes) -> Any:
    """Decode msgpack without reviving anything: extension types stay opaque."""
    return ormsgpack.unpackb(data, ext_hook=ormsgpack.Ext, option=_MSGPACK_OPTIONS)


class _Bad(Exception):
    """A source row that cannot be imported (reported as skipped)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def split_checkpoint(type_: str, blob: bytes) -> tuple[_layout.Typed, dict[str, _layout.Typed]]:
    """A SqliteSaver checkpoint blob as (serialized checkpoint without channel values,
    serialized channel values), without deserializing any value into an object."""
    if type_ == "pickle":
        raise _Bad("pickle_refused", "stored with pickle; ckptdb never loads pickle")
    try:
        if type_ == "msgpack":
            raw = _raw_msgpack(blob)
        elif type_ == "json":
            raw = json.loads(blob)
        else:
            raise _Bad("unsupported_type", f"serialization type {type_!r} is not supported")
    except (ValueError, TypeError) as exc:
        raise _Bad("malformed_checkpoint", f"cannot decode the {type_} checkpoint: {exc}") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("channel_values", {}), dict):
        raise _Bad("malformed_checkpoint", "the checkpoint is not a map with channel_values")
    values = raw.pop("channel_values", {})

    def encode(value: Any) -> _layout.Typed:
        if type_ == "msgpack":
            return "msgpack", ormsgpack.packb(value, option=_MSGPACK_OPTIONS)
        return "json", json.dumps(value, ensure_ascii=False).encode("utf-8")

    try:
        return encode(raw), {str(k): encode(v) for k, v in values.items()}
    except (TypeError, ValueError) as exc:
        raise _Bad("malformed_checkpoint", f"cannot re-encode the checkpoint: {exc}") from exc


def _metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    try:
        text = value.decode("utf-8") if isinstance(value, bytes) else str(value)
        parsed = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Bad("bad_metadata", f"metadata is not JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise _Bad("bad_metadata", "metadata is not a JSON object")
    return parsed


def _source_id(thread_id: str, ns: str, checkpoint_id: str) -> str:
    return f"thread_id={thread_id!r} checkpoint_ns={ns!r} checkpoint_id={checkpoint_id!r}"


def _rows(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    try:
        yield from conn.execute(sql, params)
    except sqlite3.DatabaseError as exc:
        raise errors.CorruptionError(
            f"reading the source failed ({exc}); what was imported so far is consistent and "
            "a re-run continues (it is idempotent)"
        ) from exc


def import_langgraph_sqlite(
    db: Database,
    source: str | os.PathLike[str],
    *,
    namespace: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Import a LangGraph SqliteSaver database into ``db`` (see the module docstring)."""
    path = _check_source(os.fspath(source), db)
    thread_filter = namespace
    with closing(_open_source(path)) as conn:
        has_task_path = _validate(conn, path)
        where = " WHERE thread_id = ?" if thread_filter is not None else ""
        params: tuple[Any, ...] = (thread_filter,) if thread_filter is not None else ()
        total = int(conn.execute(f"SELECT count(*) FROM checkpoints{where}", params).fetchone()[0])
        saver = _target_saver(db, dry_run)
        imported: list[ImportedItem] = []
        skipped: list[SkippedItem] = []
        touched: set[str] = set()
        present: set[tuple[str, str, str]] = set()
        for done, (thread_id, ns, checkpoint_id, parent_id, type_, blob, meta) in enumerate(
            _rows(
                conn,
                "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,"
                f" checkpoint, metadata FROM checkpoints{where}"
                " ORDER BY thread_id, checkpoint_ns, checkpoint_id",
                params,
            ),
            start=1,
        ):
            tid, cns, cid = str(thread_id), str(ns or ""), str(checkpoint_id)
            item = _import_one(
                saver, tid, cns, cid, parent_id, str(type_ or ""), blob, meta, dry_run
            )
            if isinstance(item, SkippedItem):
                skipped.append(item)
            else:
                imported.append(item)
                present.add((tid, cns, cid))
                touched.add(item.namespace)
            if progress is not None:
                progress(done, total)
        skipped.extend(_import_writes(conn, saver, present, where, params, has_task_path, dry_run))
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
        has_tables = s.scalar(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'lg_checkpoint'"
        )
    return CkptdbSaver(db) if has_tables and not db.readonly else None


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
        namespace = _layout.namespace_for(tid, ns)
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
        body, values = split_checkpoint(type_, blob)
        md = _metadata(meta)
    except _Bad as bad:
        return SkippedItem(source_id=source_id, code=bad.code, detail=bad.detail)
    parent = str(parent_id) if parent_id else None
    if dry_run or saver is None:
        return ImportedItem(
            source_id=source_id, namespace=namespace, checkpoint_id="", created=True
        )
    entries = _layout.build_entries(body, parent, values, saver.inline_max)
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


def _import_writes(
    conn: sqlite3.Connection,
    saver: CkptdbSaver | None,
    present: set[tuple[str, str, str]],
    where: str,
    params: tuple[Any, ...],
    has_task_path: bool,
    dry_run: bool,
) -> list[SkippedItem]:
    """Copy the pending writes of every checkpoint that is (now) in the target."""
    skipped: list[SkippedItem] = []
    orphans: dict[tuple[str, str, str], int] = {}
    batch: list[tuple[Any, ...]] = []
    task_path = "task_path" if has_task_path else "''"

    def flush() -> None:
        if batch and saver is not None and not dry_run:
            with saver.db.write_session() as s:
                s.executemany(
                    "INSERT OR IGNORE INTO lg_write (thread_id, checkpoint_ns, checkpoint_id,"
                    " task_id, idx, channel, type, value, task_path)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    batch,
                )
        batch.clear()

    for tid, ns, cid, task_id, idx, channel, type_, value, path in _rows(
        conn,
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value,"
        f" {task_path} FROM writes{where} ORDER BY thread_id, checkpoint_ns, checkpoint_id",
        params,
    ):
        key = (str(tid), str(ns or ""), str(cid))
        if key not in present:
            orphans[key] = orphans.get(key, 0) + 1
            continue
        if type_ == "pickle":
            skipped.append(
                SkippedItem(
                    source_id=_source_id(*key) + f" write task_id={task_id!r} idx={idx}",
                    code="pickle_refused",
                    detail="a pending write stored with pickle; ckptdb never loads pickle",
                )
            )
            continue
        data = value if isinstance(value, bytes) else b"" if value is None else str(value).encode()
        batch.append(
            (
                *key,
                str(task_id),
                int(idx),
                str(channel),
                str(type_ or "null"),
                data,
                str(path or ""),
            )
        )
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
