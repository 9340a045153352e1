"""Whole-database verification: every byte, manifest, pointer and history link."""

from __future__ import annotations

import hashlib
import importlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .. import canonical, errors, models, validation
from ..connection import Connection
from ..connection.engine import EngineConnection
from ..store import (
    CORE_TABLES,
    blob_scans,
    checkpoint_scans,
    checkpoints,
    encoding,
    migrations,
    pointers,
    receipts,
    schema,
)
from ..store.crypto import PLAINTEXT, Scope
from ..store.rows import CHECKPOINT_TYPES, ENTRY_TYPES, CheckpointRow, EntryRow, typed
from ..store.scopes import Keyring
from ..types import PhaseProgress
from . import receipts as receipt_op
from .unit import Unit, holds

T = TypeVar("T")
#: An integration's check of its own tables: (read session, quick) -> problems found.
VerifyHook = Callable[[Any, bool], list[models.Problem]]
_hooks: dict[str, VerifyHook] = {}
_hooks_lock = threading.Lock()
#: Where the hook of an integration shipped with ckptdb lives (imported when its migration
#: set is found in a file, so `ckptdb verify` checks it without the caller importing it).
_HOOK_MODULES = {"langgraph": "ckptdb.integrations.langgraph.sealing"}


def register_hook(migration_set: str, hook: VerifyHook) -> None:
    """Make ``verify`` run ``hook`` on every file where ``migration_set`` is applied (see
    :func:`ckptdb.extension.register_verify_hook`)."""
    with _hooks_lock:
        _hooks[migration_set] = hook


def _hook(name: str) -> VerifyHook | None:
    with _hooks_lock:
        found = _hooks.get(name)
    if found is None and name in _HOOK_MODULES:
        importlib.import_module(_HOOK_MODULES[name])  # registers itself on import
        with _hooks_lock:
            found = _hooks.get(name)
    return found


class _Report:
    def __init__(self) -> None:
        self.problems: list[models.Problem] = []
        self.bytes_checked = 0
        #: key ids whose scopes were checked without their key (sealed bytes only)
        self.sealed_only: set[str] = set()

    def add(self, code: models.FindingCode, detail: str, **where: object) -> None:
        # Locations often come from the damaged row itself, where a flipped serial type can
        # turn a text column into any SQLite type; a location that is not text names nothing.
        located = {k: v if isinstance(v, str) else None for k, v in where.items()}
        self.problems.append(models.Problem(code=code, detail=detail, **located))


class _Scopes:
    """The scopes verify can open: without a key, a sealed record is still checked against
    the sha256 of its stored bytes; with it, also decrypted and checked against its
    keyed address."""

    def __init__(self, conn: EngineConnection, keyring: Keyring, report: _Report) -> None:
        self._conn = conn
        self._keyring = keyring
        self._report = report
        self._names = {r.scope_id: r.key_id for r in keyring.rows(conn, reload=True)}

    def get(self, scope_id: object) -> Scope | None:
        """The scope, PLAINTEXT for None, or None when its key is not at hand."""
        if scope_id is None:
            return PLAINTEXT
        try:
            return self._keyring.scope(self._conn, scope_id)
        except (errors.KeyUnavailableError, errors.KeyShreddedError, errors.KeyMismatchError):
            name = self._names.get(scope_id) if isinstance(scope_id, int) else None
            self._report.sealed_only.add(name or f"#{scope_id}")
            return None


def _key_scopes(conn: EngineConnection, keyring: Keyring, report: _Report) -> None:
    """Every key scope: a key the host gave for it opens its stored wrapped data key (else
    no read of the scope can succeed: a wrong key, or an altered row -- the wrap binds key
    id, prefix, generation and scope id); its namespaces lie under its prefix; and every
    namespace under its prefix is in it."""
    for row in keyring.rows(conn, reload=True):
        if not row.shredded:
            try:
                keyring.data_key(row)  # from the stored row, never a cached unlock
            except errors.KeyUnavailableError:
                pass  # no key given: its sealed bytes are checked against sealed digests
            except errors.KeyMismatchError as exc:
                report.add("key_mismatch", f"key scope of key id {row.key_id!r}: {exc}")
        for name in checkpoints.namespaces_of_scope(conn, row.scope_id):
            if not row.covers(name):
                report.add(
                    "scope_mismatch",
                    f"namespace {name!r} is in the key scope of key id {row.key_id!r} but "
                    f"does not lie under its prefix {row.prefix!r}",
                    namespace=name,
                )
        for name, scope_id in checkpoints.namespaces_under_prefix(conn, row.prefix):
            if scope_id != row.scope_id:
                report.add(
                    "scope_mismatch",
                    f"namespace {name!r} lies under the prefix {row.prefix!r} of key id "
                    f"{row.key_id!r} but names key scope {scope_id!r}",
                    namespace=name,
                )


def _sealed_intact(data: bytes, sealed_digest: object) -> bool:
    return isinstance(sealed_digest, bytes) and hashlib.sha256(data).digest() == sealed_digest


def _phase(report: _Report, name: str, run: Callable[[], T], default: T) -> T:
    """Run one phase; a damaged file that makes SQLite itself fail is reported, and the
    remaining phases still run."""
    try:
        return run()
    except errors.CkptdbError as exc:
        report.add("unreadable", f"{name}: {exc.code}: {exc}")
        return default


def _sqlite_checks(conn: Connection, quick: bool, report: _Report) -> str:
    pragma = "quick_check" if quick else "integrity_check"
    try:
        lines = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}(100)")]
    except errors.CkptdbError as exc:  # a damaged file is a finding, not a crash
        report.add("sqlite_integrity", f"{pragma} could not run: {exc}")
        return f"error: {exc}"
    if lines != ["ok"]:
        for line in lines:
            report.add("sqlite_integrity", line)
        return "; ".join(lines[:5])
    for row in conn.execute("PRAGMA foreign_key_check"):
        report.add("foreign_key", f"table {row[0]} rowid {row[1]} references missing {row[2]}")
    return "ok"


def _chunks(
    conn: EngineConnection, scopes: _Scopes, report: _Report, progress: PhaseProgress | None
) -> tuple[set[int], int]:
    """Verify every chunk's bytes. Returns (ids of bad chunks, number checked)."""
    bad: set[int] = set()
    # Progress of this phase is in stored bytes (it is the one that reads them).
    total = blob_scans.stored_bytes(conn)[1] if progress is not None else 0
    checked = done = 0
    for row in blob_scans.iter_chunks_with_bytes(conn):
        chunk_id, digest, size, codec_id, stored_size, data, scope_id, sealed_digest = row
        checked += 1
        if not (
            isinstance(digest, str)
            and isinstance(size, int)
            and isinstance(codec_id, int)
            and isinstance(stored_size, int | None)
        ) or not isinstance(data, bytes | None):
            bad.add(chunk_id)
            report.add("chunk_corrupt", f"chunk {chunk_id}: a stored value has the wrong type")
        elif data is None:
            bad.add(chunk_id)
            report.add("chunk_missing", f"chunk {chunk_id} has no bytes", digest=digest)
        elif scope_id is not None and not _sealed_intact(data, sealed_digest):
            bad.add(chunk_id)
            report.add(
                "chunk_corrupt", f"chunk {chunk_id}: its sealed bytes were altered", digest=digest
            )
        elif (scope := scopes.get(scope_id)) is None:
            report.bytes_checked += len(data)  # sealed bytes intact; opening needs the key
        else:
            raw = encoding.decoded(codec_id, data, size, scope, digest)
            report.bytes_checked += len(raw) if raw is not None else 0
            if (
                raw is None
                or (stored_size is not None and stored_size != len(data))
                or scope.address(raw) != digest
            ):
                bad.add(chunk_id)
                report.add(
                    "chunk_corrupt", f"chunk {chunk_id} does not match its digest", digest=digest
                )
        if progress is not None:
            done += len(data) if isinstance(data, bytes) else 0
            progress("chunk bytes", min(done, total), total)
    return bad, checked


def _blobs(
    conn: EngineConnection,
    scopes: _Scopes,
    bad_chunks: set[int],
    quick: bool,
    report: _Report,
    progress: PhaseProgress | None,
) -> tuple[set[int], int]:
    """Verify every blob (inline bytes, or its chunk list and whole digest)."""
    bad: set[int] = set()
    total = blob_scans.count_blobs(conn)
    checked = 0
    for row in blob_scans.iter_blob_rows(conn, with_inline=not quick):
        blob_id, digest, size, chunk_count, list_digest, inline, codec_id, scope_id, sealed = row
        checked += 1
        if progress is not None:
            progress("blobs", checked, total)
        if not (
            isinstance(digest, str)
            and isinstance(size, int)
            and isinstance(chunk_count, int)
            and isinstance(list_digest, str | None)
            and isinstance(inline, bytes | None)
        ):
            bad.add(blob_id)
            report.add("blob_corrupt", f"blob {blob_id}: a stored value has the wrong type")
            continue
        if chunk_count == 0:
            if quick:
                continue
            if scope_id is not None and not (inline is not None and _sealed_intact(inline, sealed)):
                bad.add(blob_id)
                report.add("blob_corrupt", "sealed inline bytes were altered", digest=digest)
                continue
            scope = scopes.get(scope_id)
            if scope is None:
                report.bytes_checked += len(inline or b"")
                continue
            data = (
                encoding.decoded(codec_id, inline, size, scope, digest, blob=True)
                if inline is not None
                else None
            )
            if data is None or scope.address(data) != digest:
                bad.add(blob_id)
                report.add("blob_corrupt", "inline bytes do not match the digest", digest=digest)
            else:
                report.bytes_checked += len(data)
            continue
        chunks = blob_scans.chunk_rows_of(conn, blob_id)
        if (
            len(chunks) != chunk_count
            or [r[0] for r in chunks] != list(range(chunk_count))
            or not all(isinstance(r[2], str) and isinstance(r[3], int) for r in chunks)
            or canonical.chunk_list_digest(str(r[2]) for r in chunks) != list_digest
            or sum(int(r[3]) for r in chunks) != size
        ):
            bad.add(blob_id)
            report.add("blob_chunk_list", "the chunk list is incomplete or altered", digest=digest)
            continue
        if any(r[1] in bad_chunks for r in chunks):
            bad.add(blob_id)
            report.add("blob_corrupt", "a chunk of the blob is corrupt", digest=digest)
            continue
        if quick:
            continue
        scope = scopes.get(scope_id)
        if scope is None:
            continue  # every chunk's sealed bytes were checked; the whole needs the key
        whole = scope.hasher()
        for r in chunks:
            whole.update(blob_scans.chunk_raw(conn, r[1], scope) or b"")
        if whole.hexdigest() != digest:
            bad.add(blob_id)
            report.add("blob_corrupt", "the chunks do not add up to the blob digest", digest=digest)
    return bad, checked


def _checkpoints(
    conn: EngineConnection, bad_blobs: set[int], report: _Report, progress: PhaseProgress | None
) -> int:
    """Recompute every manifest id; name the entries whose blobs are bad."""
    total = checkpoint_scans.count(conn)
    generations: dict[str, int] = checkpoint_scans.generations(conn)
    checked = 0
    row: CheckpointRow | None = None
    current_seq: object = None
    entries: list[EntryRow] = []

    def finish() -> None:
        if row is None:
            return
        if (
            len(entries) != row.entry_count
            or sum(e.size for e in entries) != row.total_size
            or checkpoints.recomputed_id(row, entries) != row.id
        ):
            report.add(
                "manifest_mismatch",
                "the stored manifest does not hash to the id",
                checkpoint_id=row.id,
                namespace=row.namespace,
            )
        try:  # a crafted file can hash metadata that no reader could parse
            validation.metadata_from_json(row.metadata_json, row.id)
        except errors.CorruptionError as exc:
            report.add("unreadable", exc.message, checkpoint_id=row.id, namespace=row.namespace)
        parent_generation = generations.get(row.parent_id or "")
        if parent_generation is not None and parent_generation != row.generation - 1:
            report.add(
                "lineage_generation",
                "parent generation is not generation - 1",
                checkpoint_id=row.id,
                namespace=row.namespace,
            )
        for e in entries:
            if e.blob_id in bad_blobs:
                report.add(
                    "entry_corrupt",
                    f"entry {e.name!r} has corrupt bytes",
                    checkpoint_id=row.id,
                    namespace=row.namespace,
                    entry=e.name,
                    digest=e.digest,
                )

    for r in checkpoint_scans.iter_manifests(conn):
        if r[0] != current_seq:
            current_seq = r[0]
            finish()
            checked += 1
            if progress is not None:
                progress("checkpoints", checked, total)
            try:
                stored = (*r[:10], r[18], r[19])
                row = typed(CheckpointRow, stored, CHECKPOINT_TYPES, "checkpoint row")
            except errors.CorruptionError as exc:
                report.add(
                    "manifest_mismatch",
                    str(exc),
                    checkpoint_id=r[1],
                )
                row = None
            entries = []
        if row is None:
            continue  # the damaged checkpoint row was reported; skip its entries
        if r[10] is not None:
            if r[12] is None:
                report.add(
                    "entry_blob_missing",
                    f"entry {r[10]!r} names a missing blob",
                    checkpoint_id=row.id,
                    namespace=row.namespace,
                    entry=r[10],
                )
                continue
            try:
                entries.append(typed(EntryRow, r[10:18], ENTRY_TYPES, "entry row"))
            except errors.CorruptionError as exc:
                report.add(
                    "entry_corrupt",
                    str(exc),
                    checkpoint_id=row.id,
                    namespace=row.namespace,
                    entry=r[10],
                )
    finish()
    _blob_refs(conn, report)
    return checked


def _blob_refs(conn: EngineConnection, report: _Report) -> None:
    """The ``blob_ref`` rows must match the packed entries (format 3): GC decides from
    them alone whether a blob is still used."""
    for seq, blob_id in checkpoint_scans.blob_refs_missing(conn):
        report.add(
            "blob_ref_missing",
            f"checkpoint seq {seq} uses blob {blob_id} but no blob_ref row says so: a GC "
            "would delete the blob while the checkpoint needs it. Do not run gc on this "
            "file; restore it from a backup (or `ckptdb export` what you need first)",
        )
    for seq, blob_id in checkpoint_scans.blob_refs_stray(conn):
        report.add(
            "blob_ref_stray",
            f"a blob_ref row says checkpoint seq {seq} uses blob {blob_id}, but none of its "
            "entries does: the blob is kept until the row goes (no data is at risk)",
        )


def _pointers(conn: EngineConnection, report: _Report) -> int:
    heads_list = pointers.all_pointers(conn)
    ns_of = {ns_id: name for name, ns_id in checkpoints.namespaces_by_name(conn).items()}
    for p in heads_list:
        expected = canonical.pointer_digest(
            p.namespace, p.revision, p.current_id, p.fallback_id, p.previous_digest
        )
        if expected != p.digest:
            report.add(
                "pointer_mismatch",
                "CURRENT does not match its digest",
                namespace=p.namespace,
                checkpoint_id=p.current_id,
            )
    # What the foreign keys of schema v5 made impossible: a pointer naming a checkpoint row
    # that is gone (all_pointers joins them, so such a pointer is not in heads_list).
    for ns_id, role, seq in pointers.dangling(conn):
        report.add(
            "foreign_key",
            f"the {role} pointer names checkpoint seq {seq!r}, which is not stored",
            namespace=ns_of.get(ns_id, f"#{ns_id!r}"),
        )
    heads = {p.namespace_id: p for p in heads_list}
    floors = _history_floors(conn)
    previous: dict[int, tuple[int, str]] = {}
    for ns_id, revision, current, fallback, prev_digest, digest in pointers.iterate_history(conn):
        ns = ns_of.get(ns_id, f"#{ns_id}")
        if not (
            isinstance(revision, int)
            and isinstance(current, str)
            and isinstance(fallback, str | None)
            and isinstance(prev_digest, str | None)
            and isinstance(digest, str)
        ):
            report.add("history_mismatch", "a pointer history row was altered", namespace=ns)
            continue
        if canonical.pointer_digest(ns, revision, current, fallback, prev_digest) != digest:
            report.add(
                "history_mismatch", f"pointer history revision {revision} was altered", namespace=ns
            )
        before = previous.get(ns_id)
        if before is not None and (before[0] + 1 != revision or before[1] != prev_digest):
            report.add(
                "history_chain", f"pointer history breaks before revision {revision}", namespace=ns
            )
        if before is None and revision > floors.get(ns, 1):
            # The history starts later than anything GC's keep_history trimmed to.
            report.add(
                "history_truncated",
                f"pointer history starts at revision {revision}; older moves are missing",
                namespace=ns,
            )
        previous[ns_id] = (revision, digest)
    for ns_id, p in heads.items():
        last = previous.get(ns_id)
        if last is None or last != (p.revision, p.digest):
            report.add(
                "history_chain",
                "CURRENT is not the last entry of its history",
                namespace=p.namespace,
            )
    for ns_id in previous.keys() - heads.keys():
        report.add(
            "pointer_missing",
            "the namespace has a pointer history but no CURRENT (the pointer row is gone, or a "
            "drop_namespace was interrupted: run it again)",
            namespace=ns_of.get(ns_id, f"#{ns_id}"),
        )
    return len(heads_list)


def _history_floors(conn: EngineConnection) -> dict[str, int]:
    """Per namespace, the first pointer-history revision GC's keep_history kept (from the
    gc receipts; a damaged receipt body is reported by the receipt check)."""
    floors: dict[str, int] = {}
    for body in receipts.gc_bodies(conn):
        try:
            recorded = validation.stored_json(body, "gc receipt body", "receipt_damaged")
        except errors.CorruptionError:
            continue  # the receipt check reports it
        if not isinstance(recorded, dict):
            continue
        recorded = recorded.get("history_floor", {})
        if isinstance(recorded, dict):
            for ns, revision in recorded.items():
                if isinstance(revision, int) and revision > floors.get(ns, 1):
                    floors[ns] = revision
    return floors


def _receipts(conn: EngineConnection, report: _Report) -> None:
    for rid, kind, ns, cid, at_ms, body, digest in receipts.iter_raw(conn):
        typed_ok = (
            isinstance(kind, str)
            and isinstance(ns, str | None)
            and isinstance(cid, str | None)
            and isinstance(at_ms, int)
            and isinstance(body, str)
            and isinstance(digest, str)
        )
        if not typed_ok or not receipts.digest_matches(kind, ns, cid, at_ms, body, digest):
            report.add(
                "receipt_mismatch",
                f"receipt {rid} ({kind}) was altered",
                namespace=ns,
                checkpoint_id=cid,
            )


def _integrations(conn: EngineConnection, quick: bool, report: _Report) -> None:
    """Run the verify hook of every integration migration set applied in the file."""
    for name in migrations.applied_sets(conn):
        if name == migrations.CORE:
            continue
        hook = _hook(name)
        if hook is not None:
            with conn.integration_session(CORE_TABLES) as session:
                report.problems.extend(hook(session, quick))


#: ``VerifyReport.sqlite_integrity`` of a PostgreSQL database: SQLite's page check does not
#: apply there.
PG_INTEGRITY = "not applicable: PostgreSQL checks its own pages"


@holds()
def verify_database(
    tx: Unit, *, quick: bool, progress: PhaseProgress | None = None
) -> models.VerifyReport:
    """See :meth:`ckptdb.Database.verify`."""
    conn = tx.conn
    file = conn if isinstance(conn, Connection) else None
    report = _Report()
    no_ids: tuple[set[int], int] = (set(), 0)
    with tx.read_batch():
        scopes = _Scopes(conn, tx.keyring, report)
        # SQLite's own checks of its pages and schema; PostgreSQL checks its pages itself
        # (data checksums, amcheck), and its schema is proven by the migration history.
        integrity = _sqlite_checks(file, quick, report) if file is not None else PG_INTEGRITY
        no_problems: list[str] = []
        for problem in (
            _phase(report, "schema", lambda: schema.mismatches(file), no_problems)
            if file is not None
            else no_problems
        ):
            report.add("schema_mismatch", problem)
        bad_chunks, chunks_checked = (
            no_ids
            if quick
            else _phase(report, "chunks", lambda: _chunks(conn, scopes, report, progress), no_ids)
        )
        bad_blobs, blobs_checked = _phase(
            report,
            "blobs",
            lambda: _blobs(conn, scopes, bad_chunks, quick, report, progress),
            no_ids,
        )
        checkpoints_checked = _phase(
            report, "checkpoints", lambda: _checkpoints(conn, bad_blobs, report, progress), 0
        )
        pointers_checked = _phase(report, "pointers", lambda: _pointers(conn, report), 0)
        _phase(report, "key scopes", lambda: _key_scopes(conn, tx.keyring, report), None)
        _phase(report, "receipts", lambda: _receipts(conn, report), None)
        _phase(report, "integrations", lambda: _integrations(conn, quick, report), None)
    now_ms = tx.now_ms
    ok = not report.problems
    body = {
        "ok": ok,
        "quick": quick,
        "problems": len(report.problems),
        "codes": sorted({p.code for p in report.problems}),
        "checkpoints_checked": checkpoints_checked,
        "bytes_checked": report.bytes_checked,
        "sealed_only": sorted(report.sealed_only),
    }
    # The receipt is best-effort: a full disk (or a read-only file) must not cost the
    # caller the report itself.
    receipt_id: int | None = None
    receipt_error: str | None = None
    try:
        receipt_id = receipt_op.record(tx, "verify", body)
    except (errors.StorageError, errors.BusyTimeoutError, errors.CommitOutcomeUnknownError) as exc:
        receipt_error = f"{exc.code}: {exc}"
    return models.VerifyReport(
        ok=ok,
        quick=quick,
        sqlite_integrity=integrity,
        checkpoints_checked=checkpoints_checked,
        blobs_checked=blobs_checked,
        chunks_checked=chunks_checked,
        bytes_checked=report.bytes_checked,
        pointers_checked=pointers_checked,
        problems=report.problems,
        receipt_id=receipt_id,
        receipt_error=receipt_error,
        sealed_only=sorted(report.sealed_only),
        at=models.from_ms(now_ms),
    )
