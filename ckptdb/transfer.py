"""Copying checkpoints between ckptdb files: export (a new self-contained file holding a
selected lineage) and import (merging another file's checkpoints into this one).

Everything copied is verified on the way (manifests against their ids, blob and chunk bytes
against their digests), so a damaged source is refused rather than propagated. Ids are
content-derived, so copying is idempotent: a checkpoint, blob or chunk that already exists
is reused, never duplicated.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import catalog, errors, export_check, models, validation
from .blobs import BlobStore, verified_inline
from .canonical import chunk_list_digest
from .connection import Connection
from .files import fsync_directory
from .publish import ensure_namespace, move_pointer
from .receipts import store_receipt

if TYPE_CHECKING:
    from .database import Database

Progress = Callable[[int, int], None]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class _Counts:
    checkpoints_copied: int = 0
    checkpoints_present: int = 0
    blobs_copied: int = 0
    chunks_copied: int = 0
    bytes_copied: int = 0
    blob_ids: dict[str, int] = field(default_factory=dict)

    def receipt(
        self,
        kind: str,
        receipt_id: int | None,
        source: str,
        destination: str,
        namespaces: list[str],
        moved: list[str],
        conflicts: list[models.PointerConflict],
    ) -> models.TransferReceipt:
        """The model returned for an export or import that copied these counts."""
        return models.TransferReceipt(
            kind=kind,  # type: ignore[arg-type]
            receipt_id=receipt_id,
            source=source,
            destination=destination,
            namespaces=namespaces,
            checkpoints_copied=self.checkpoints_copied,
            checkpoints_present=self.checkpoints_present,
            blobs_copied=self.blobs_copied,
            chunks_copied=self.chunks_copied,
            bytes_copied=self.bytes_copied,
            pointers_moved=moved,
            conflicts=conflicts,
        )


class _Copier:
    """Copies checkpoints from ``src`` to ``dst``; both are ckptdb connections."""

    def __init__(self, src: Connection, dst: Connection) -> None:
        self.src = src
        self.dst = dst
        self.counts = _Counts()
        self._scratch = bytearray()

    def _copy_chunk(self, chunk_id: int, digest: str, size: int, now_ms: int) -> int:
        """Make sure the chunk exists in dst (own short transaction); returns its dst id."""
        existing = self.dst.scalar("SELECT chunk_id FROM chunk WHERE digest = ?", (digest,))
        if existing is not None:
            with self.dst.write_transaction():
                self.dst.execute(
                    "UPDATE chunk SET last_touched_ms = ? WHERE chunk_id = ?", (now_ms, existing)
                )
            return int(existing)
        got = self.src.read_blob_into("chunk_data", "data", chunk_id, self._scratch)
        data = memoryview(self._scratch)[: got or 0]
        try:
            if got != size or hashlib.sha256(data).hexdigest() != digest:
                raise errors.CorruptionError(
                    f"source chunk {digest[:12]} does not match its digest; nothing of it "
                    "was copied",
                    digest=digest,
                    reason="chunk_digest_mismatch",
                )
            with self.dst.relaxed_sync(), self.dst.write_transaction():
                self.dst.execute(
                    "INSERT INTO chunk (digest, size, last_touched_ms) VALUES (?, ?, ?)",
                    (digest, size, now_ms),
                )
                new_id = self.dst.last_insert_rowid()
                self.dst.execute(
                    "INSERT INTO chunk_data (chunk_id, data) VALUES (?, zeroblob(?))",
                    (new_id, size),
                )
                self.dst.write_blob("chunk_data", "data", new_id, data)
        finally:
            data.release()
        self.counts.chunks_copied += 1
        self.counts.bytes_copied += size
        return new_id

    def stage_chunks(
        self, entries: Iterable[catalog.EntryRow], now_ms: int
    ) -> dict[str, list[str]]:
        """Copy the chunks of chunked blobs missing from dst; returns blob digest -> its
        chunk digests in order (ids are resolved again by digest when the blob row is
        written: a chunk deleted meanwhile may have had its rowid reused)."""
        staged: dict[str, list[str]] = {}
        for entry in entries:
            if entry.chunk_count == 0 or entry.digest in staged:
                continue
            if self.dst.scalar("SELECT 1 FROM blob WHERE digest = ?", (entry.digest,)):
                continue
            list_digest = self.src.scalar(
                "SELECT chunk_list_digest FROM blob WHERE blob_id = ?", (entry.blob_id,)
            )
            chunks = self.src.execute(
                "SELECT c.chunk_id, c.digest, c.size FROM blob_chunk bc"
                " JOIN chunk c ON c.chunk_id = bc.chunk_id WHERE bc.blob_id = ? ORDER BY bc.seq",
                (entry.blob_id,),
            )
            for c in chunks:
                catalog.check_types(c, (int, str, int), "chunk row")
            if (
                len(chunks) != entry.chunk_count
                or chunk_list_digest(c[1] for c in chunks) != list_digest
            ):
                raise errors.CorruptionError(
                    f"source blob {entry.digest[:12]}: its chunk list is damaged",
                    entry=entry.name,
                    reason="chunk_list_mismatch",
                )
            for c in chunks:
                self._copy_chunk(c[0], c[1], c[2], now_ms)
            staged[entry.digest] = [c[1] for c in chunks]
        return staged

    def ensure_blob(
        self, entry: catalog.EntryRow, staged: dict[str, list[str]], now_ms: int
    ) -> int:
        """dst blob id for an entry's blob (inside dst's open write transaction)."""
        cached = self.counts.blob_ids.get(entry.digest)
        if cached is not None:
            return cached
        existing = self.dst.scalar("SELECT blob_id FROM blob WHERE digest = ?", (entry.digest,))
        if existing is not None:
            self.counts.blob_ids[entry.digest] = int(existing)
            return int(existing)
        if entry.chunk_count == 0:
            data = self.src.scalar(
                "SELECT inline_data FROM blob WHERE blob_id = ?", (entry.blob_id,)
            )
            data = verified_inline(data, entry.size, entry.digest)
            if data is None:
                raise errors.CorruptionError(
                    f"source entry {entry.name!r}: stored bytes do not match digest "
                    f"{entry.digest[:12]}; nothing was copied",
                    entry=entry.name,
                    reason="blob_digest_mismatch",
                )
            self.dst.execute(
                "INSERT INTO blob (digest, size, chunk_count, inline_data, created_at_ms)"
                " VALUES (?, ?, 0, ?, ?)",
                (entry.digest, entry.size, data, now_ms),
            )
            blob_id = self.dst.last_insert_rowid()
            self.counts.bytes_copied += len(data)
        else:
            resolved = BlobStore(self.dst, 0).resolve_chunks(staged[entry.digest])
            chunk_ids = [c for c in resolved if c is not None]
            list_digest = self.src.scalar(
                "SELECT chunk_list_digest FROM blob WHERE blob_id = ?", (entry.blob_id,)
            )
            if len(chunk_ids) != len(resolved):
                raise errors.ChunkMissingError(
                    f"{len(resolved) - len(chunk_ids)} copied chunk(s) were garbage-collected "
                    "before the import committed; retry the import"
                )
            self.dst.execute(
                "INSERT INTO blob (digest, size, chunk_count, chunk_list_digest, created_at_ms)"
                " VALUES (?, ?, ?, ?, ?)",
                (entry.digest, entry.size, len(chunk_ids), list_digest, now_ms),
            )
            blob_id = self.dst.last_insert_rowid()
            self.dst.executemany(
                "INSERT INTO blob_chunk (blob_id, seq, chunk_id) VALUES (?, ?, ?)",
                [(blob_id, seq, cid) for seq, cid in enumerate(chunk_ids)],
            )
        self.counts.blobs_copied += 1
        self.counts.blob_ids[entry.digest] = blob_id
        return blob_id

    def copy_checkpoint(
        self,
        row: catalog.CheckpointRow,
        entries: list[catalog.EntryRow],
        staged: dict[str, list[str]],
        now_ms: int,
    ) -> None:
        """Copy one verified checkpoint (inside dst's open write transaction)."""
        if catalog.checkpoint_by_id(self.dst, row.id) is not None:
            self.counts.checkpoints_present += 1
            return
        namespace_id = ensure_namespace(self.dst, row.namespace, now_ms)
        blob_ids = [self.ensure_blob(e, staged, now_ms) for e in entries]
        self.dst.execute(
            "INSERT INTO checkpoint (id, namespace_id, parent_id, generation, created_at_ms,"
            " metadata, entry_count, total_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.id,
                namespace_id,
                row.parent_id,
                row.generation,
                row.created_at_ms,
                row.metadata_json,
                row.entry_count,
                row.total_size,
            ),
        )
        seq = self.dst.last_insert_rowid()
        self.dst.executemany(
            "INSERT INTO entry (checkpoint_seq, name, blob_id, media_type, schema_pin)"
            " VALUES (?, ?, ?, ?, ?)",
            [
                (seq, e.name, b, e.media_type, e.schema_pin)
                for e, b in zip(entries, blob_ids, strict=True)
            ],
        )
        self.counts.checkpoints_copied += 1


def _verified_entries(src: Connection, row: catalog.CheckpointRow) -> list[catalog.EntryRow]:
    entries = catalog.entries_of(src, row.seq)
    catalog.check_manifest(row, entries)
    return entries


def _copy_rows(
    copier: _Copier,
    rows: list[catalog.CheckpointRow],
    progress: Progress | None,
    after: Callable[[], None] | None = None,
) -> None:
    """Copy checkpoints oldest first: chunks in their own transactions, then all rows (and
    ``after``, e.g. pointer moves) in one transaction."""
    now_ms = _now_ms()
    ordered = sorted(rows, key=lambda r: (r.namespace, r.generation, r.id))
    prepared = []
    staged: dict[str, list[str]] = {}
    for index, row in enumerate(ordered, start=1):
        entries = _verified_entries(copier.src, row)
        staged.update(copier.stage_chunks(entries, now_ms))
        prepared.append((row, entries))
        if progress is not None:
            progress(index, len(ordered) * 2)
    with copier.dst.write_transaction():
        for index, (row, entries) in enumerate(prepared, start=1):
            copier.copy_checkpoint(row, entries, staged, now_ms)
            if progress is not None:
                progress(len(ordered) + index, len(ordered) * 2)
        if after is not None:
            after()


def export_to(
    db: Database,
    src: Connection,
    dest: str,
    *,
    namespaces: list[str] | None,
    since: str | None,
    progress: Progress | None,
    create: Callable[[str, int], Database],
) -> models.TransferReceipt:
    """See :meth:`ckptdb.Database.export`. ``create(path, page_size)`` makes the new file."""
    dest = os.path.abspath(dest)
    if os.path.lexists(dest):
        raise errors.InvalidInputError(
            f"{dest} already exists; export writes a new file (choose another name)"
        )
    tmp = os.path.join(os.path.dirname(dest), f".{os.path.basename(dest)}.{secrets.token_hex(4)}")
    with src.read_transaction():
        pointers = catalog.all_pointers(src)
        wanted = set(namespaces) if namespaces else {p.namespace for p in pointers}
        unknown = wanted - {p.namespace for p in pointers}
        if unknown:
            raise errors.NamespaceNotFoundError(
                f"no such namespace(s) to export: {sorted(unknown)}"
            )
        since_row = catalog.require_checkpoint(src, since) if since else None
        if since_row is not None and since_row.namespace not in wanted:
            raise errors.InvalidReferenceError(
                f"--since {since_row.id[:12]} belongs to namespace {since_row.namespace!r}, "
                "which is not being exported"
            )
        rows: dict[str, catalog.CheckpointRow] = {}
        selected = [p for p in pointers if p.namespace in wanted]
        for ptr in selected:
            for row in catalog.lineage(src, ptr.current_id):
                rows[row.id] = row
                if since_row is not None and row.id == since_row.id:
                    break
            else:
                if since_row is not None and since_row.namespace == ptr.namespace:
                    raise errors.InvalidReferenceError(
                        f"--since {since_row.id[:12]} is not in the lineage of CURRENT of "
                        f"{ptr.namespace!r}"
                    )
            if ptr.fallback_id is not None:
                fallback = catalog.checkpoint_by_id(src, ptr.fallback_id)
                if fallback is not None:
                    rows[fallback.id] = fallback
        page_size = int(src.pragma("page_size"))
        out = create(tmp, page_size)
        try:
            dst = out._conn
            copier = _Copier(src, dst)

            def copy_pointers() -> None:
                for ptr in selected:
                    _copy_pointer(src, dst, ptr)

            _copy_rows(copier, list(rows.values()), progress, copy_pointers)
            counts = copier.counts
            receipt_body = {
                "source": db.path,
                "namespaces": sorted(wanted),
                "since": since,
                "checkpoints": counts.checkpoints_copied,
                "blobs": counts.blobs_copied,
                "chunks": counts.chunks_copied,
                "bytes": counts.bytes_copied,
            }
            with dst.write_transaction():
                receipt_id = store_receipt(
                    dst,
                    "export",
                    receipt_body,
                    namespace=None,
                    checkpoint_id=None,
                    at_ms=_now_ms(),
                )
            report = out.verify()
            if not report.ok:
                raise errors.CorruptionError(
                    f"the exported file did not verify ({len(report.problems)} problems); it "
                    "was deleted",
                    reason="export_verify_failed",
                )
        except BaseException:
            out.close()
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(tmp + suffix):
                    os.remove(tmp + suffix)
            raise
        out.close()
    os.rename(tmp, dest)
    fsync_directory(os.path.dirname(dest))
    return counts.receipt(
        "export", receipt_id, db.path, dest, sorted(wanted), [p.namespace for p in selected], []
    )


def _copy_pointer(src: Connection, dst: Connection, ptr: catalog.PointerRow) -> None:
    """Copy a pointer and its whole history verbatim, so its digest chain verifies."""
    namespace_id = catalog.namespace_id(dst, ptr.namespace)
    assert namespace_id is not None
    current = catalog.checkpoint_by_id(dst, ptr.current_id)
    fallback = catalog.checkpoint_by_id(dst, ptr.fallback_id) if ptr.fallback_id else None
    assert current is not None
    dst.execute(
        "INSERT INTO pointer (namespace_id, current_seq, fallback_seq, revision, digest,"
        " previous_digest, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            namespace_id,
            current.seq,
            fallback.seq if fallback else None,
            ptr.revision,
            ptr.digest,
            ptr.previous_digest,
            ptr.updated_at_ms,
        ),
    )
    history = src.execute(
        "SELECT revision, current_id, fallback_id, previous_digest, digest, reason, at_ms"
        " FROM pointer_history WHERE namespace_id = ? ORDER BY revision",
        (ptr.namespace_id,),
    )
    dst.executemany(
        "INSERT INTO pointer_history (namespace_id, revision, current_id, fallback_id,"
        " previous_digest, digest, reason, at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(namespace_id, *h) for h in history],
    )


def import_from(
    db: Database,
    dst: Connection,
    source: str,
    *,
    namespaces: list[str] | None,
    overwrite: bool,
    progress: Progress | None,
    open_source: Callable[[str], Database],
) -> models.TransferReceipt:
    """See :meth:`ckptdb.Database.import_file`. ``open_source`` opens the file read-only."""
    src_db = open_source(source)
    try:
        src = src_db._conn
        with src.read_transaction():
            pointers = catalog.all_pointers(src)
            wanted = set(namespaces) if namespaces else {p.namespace for p in pointers}
            for name in wanted:
                validation.namespace(name)
            unknown = wanted - {p.namespace for p in pointers}
            if unknown:
                raise errors.NamespaceNotFoundError(
                    f"{source} has no namespace(s) {sorted(unknown)}"
                )
            rows = [
                catalog.CheckpointRow(*r)
                for r in src.execute(
                    "SELECT c.seq, c.id, n.name, c.namespace_id, c.parent_id, c.generation,"
                    " c.created_at_ms, c.metadata, c.entry_count, c.total_size"
                    " FROM checkpoint c JOIN namespace n ON n.namespace_id = c.namespace_id"
                )
                if r[2] in wanted
            ]
            selected = [p for p in pointers if p.namespace in wanted]
            export_check.validate(src, os.path.abspath(source), selected, rows)  # issue 12
            copier = _Copier(src, dst)
            moved: list[str] = []
            conflicts: list[dict[str, str | None]] = []

            def move_pointers() -> None:
                now_ms = _now_ms()
                for ptr in selected:
                    here = catalog.pointer(dst, ptr.namespace)
                    if here is not None and here.current_id == ptr.current_id:
                        continue
                    lineage_ids = {r.id for r in catalog.lineage(dst, ptr.current_id)}
                    fast_forward = here is None or here.current_id in lineage_ids
                    if not fast_forward and not overwrite:
                        conflicts.append(
                            {
                                "namespace": ptr.namespace,
                                "current": here.current_id if here else None,
                                "incoming": ptr.current_id,
                            }
                        )
                        continue
                    target = catalog.checkpoint_by_id(dst, ptr.current_id)
                    if target is None or target.namespace != ptr.namespace:  # issue 12
                        raise errors.InvalidExportError(
                            f"{source}: CURRENT of {ptr.namespace!r} names a checkpoint that "
                            "was not imported into that namespace; nothing was imported"
                        )
                    move_pointer(
                        dst,
                        namespace=ptr.namespace,
                        namespace_id=target.namespace_id,
                        previous=here,
                        new_seq=target.seq,
                        new_id=target.id,
                        reason=f"import from {os.path.basename(source)}"
                        + ("" if fast_forward else " (overwrite)"),
                        now_ms=now_ms,
                    )
                    moved.append(ptr.namespace)
                counts = copier.counts
                body = {
                    "source": os.path.abspath(source),
                    "namespaces": sorted(wanted),
                    "checkpoints_copied": counts.checkpoints_copied,
                    "checkpoints_present": counts.checkpoints_present,
                    "blobs": counts.blobs_copied,
                    "chunks": counts.chunks_copied,
                    "bytes": counts.bytes_copied,
                    "pointers_moved": moved,
                    "conflicts": conflicts,
                }
                receipt_ids.append(
                    store_receipt(
                        dst, "import", body, namespace=None, checkpoint_id=None, at_ms=now_ms
                    )
                )

            receipt_ids: list[int] = []
            _copy_rows(copier, rows, progress, move_pointers)
    finally:
        src_db.close()
    counts = copier.counts
    return counts.receipt(
        "import",
        receipt_ids[0] if receipt_ids else None,
        os.path.abspath(source),
        db.path,
        sorted(wanted),
        moved,
        [models.PointerConflict(**c) for c in conflicts],  # type: ignore[arg-type]
    )
