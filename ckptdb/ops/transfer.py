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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .. import errors, models, validation
from ..canonical import chunk_list_digest
from ..connection import DEFAULT_PAGE_SIZE, Connection
from ..connection.engine import EngineConnection, relaxed_sync, sqlite_only
from ..files import fsync_directory
from ..store import checkpoint_scans, checkpoints, pointers
from ..store.encoding import EncodedChunk, decoded, verified_inline
from ..store.receipts import store_receipt
from ..store.rows import CheckpointRow, EntryRow, PointerRow, check_types
from ..types import Progress
from . import export_check
from .handle import Handle
from .unit import Unit, holding, holds
from .verify import verify_database


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
    """Copies checkpoints from ``src`` to ``dst``, two ckptdb stores."""

    def __init__(self, src: Unit, dst: Unit) -> None:
        #: the time of the transfer (the destination's clock)
        self.now_ms = dst.now_ms
        # Either engine on either side: an SQLite file and a PostgreSQL database copy
        # both ways (the statements below are the store's, written for both).
        self.src = src.conn
        self.dst = dst.conn
        self.src_blobs = src.blobs
        self.dst_blobs = dst.blobs
        self.counts = _Counts()
        self._scratch = bytearray()
        #: called with the size of each chunk staged (byte progress)
        self.on_bytes: Callable[[int], None] | None = None

    def _copy_chunk(
        self, chunk_id: int, digest: str, size: int, codec_id: int, stored_size: int, now_ms: int
    ) -> int:
        """Make sure the chunk exists in dst (own short transaction), its stored encoding
        copied as it is once it decodes to bytes with its digest; returns its dst id."""
        existing = self.dst_blobs.find_chunk(digest)
        if existing is not None:
            with self.dst.write_transaction():
                self.dst_blobs.touch_chunk(existing, now_ms)
            return existing
        if len(self._scratch) < stored_size:
            self._scratch = bytearray(stored_size)
        got = self.src_blobs.read_chunk_into(chunk_id, self._scratch)
        stored = bytes(memoryview(self._scratch)[: got or 0])
        raw = decoded(codec_id, stored, size) if got == stored_size else None
        if raw is None or hashlib.sha256(raw).hexdigest() != digest:
            raise errors.CorruptionError(
                f"source chunk {digest[:12]} does not match its digest; nothing of it was copied",
                digest=digest,
                reason="chunk_digest_mismatch",
            )
        with relaxed_sync(self.dst), self.dst.write_transaction():
            new_id = self.dst_blobs.insert_chunk(
                EncodedChunk(digest, size, codec_id, stored), now_ms
            )
        self.counts.chunks_copied += 1
        self.counts.bytes_copied += len(stored)
        return new_id

    def stage_chunks(self, entries: Iterable[EntryRow], now_ms: int) -> dict[str, list[str]]:
        """Copy the chunks of chunked blobs missing from dst; returns blob digest -> its
        chunk digests in order (ids are resolved again by digest when the blob row is
        written: a chunk deleted meanwhile may have had its rowid reused)."""
        staged: dict[str, list[str]] = {}
        for entry in entries:
            if entry.chunk_count == 0 or entry.digest in staged:
                continue
            if self.dst_blobs.blob_id(entry.digest) is not None:
                continue
            list_digest, listed = self.src_blobs.chunk_list(entry.blob_id)
            chunks: list[tuple[int, str, int, int, int]] = []
            for c in listed:
                check_types(c, (int, str, int, int, int), "chunk row")  # missing = damage
                chunks.append((c[0], str(c[1]), int(c[2] or 0), c[3], c[4]))
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
                self._copy_chunk(*c, now_ms)
                if self.on_bytes is not None:
                    self.on_bytes(c[2])
            staged[entry.digest] = [c[1] for c in chunks]
        return staged

    def ensure_blob(self, entry: EntryRow, staged: dict[str, list[str]], now_ms: int) -> int:
        """dst blob id for an entry's blob (inside dst's open write transaction)."""
        cached = self.counts.blob_ids.get(entry.digest)
        if cached is not None:
            return cached
        existing = self.dst_blobs.blob_id(entry.digest)
        if existing is not None:
            self.counts.blob_ids[entry.digest] = existing
            return existing
        if entry.chunk_count == 0:
            codec_id, stored = self.src_blobs.inline_stored(entry.blob_id)
            data = verified_inline(stored, entry.size, entry.digest, codec_id)
            if data is None or not isinstance(stored, bytes) or not isinstance(codec_id, int):
                raise errors.CorruptionError(
                    f"source entry {entry.name!r}: stored bytes do not match digest "
                    f"{entry.digest[:12]}; nothing was copied",
                    entry=entry.name,
                    reason="blob_digest_mismatch",
                )
            blob_id = self.dst_blobs.insert_inline(
                entry.digest, entry.size, stored, codec_id, now_ms
            )
            self.counts.bytes_copied += len(stored)
        else:
            digests = staged[entry.digest]
            # The source's list digest was checked against these digests when staging.
            blob_id = self.dst_blobs.insert_chunked(
                entry.digest, entry.size, digests, chunk_list_digest(digests), now_ms
            )
        self.counts.blobs_copied += 1
        self.counts.blob_ids[entry.digest] = blob_id
        return blob_id

    def copy_checkpoint(
        self,
        row: CheckpointRow,
        entries: list[EntryRow],
        staged: dict[str, list[str]],
        now_ms: int,
    ) -> None:
        """Copy one verified checkpoint (inside dst's open write transaction)."""
        if checkpoints.checkpoint_by_id(self.dst, row.id) is not None:
            self.counts.checkpoints_present += 1
            return
        namespace_id, dst_scope = checkpoints.ensure_namespace(self.dst, row.namespace, now_ms)
        if dst_scope is not None:
            raise errors.EncryptedScopeError(
                f"namespace {row.namespace!r} lies under an encrypted prefix of the "
                "destination; imported plaintext would not be sealed, so it is refused. "
                "Import it under another namespace name."
            )
        blob_ids = [self.ensure_blob(e, staged, now_ms) for e in entries]
        checkpoints.insert(
            self.dst,
            checkpoint_id=row.id,
            namespace_id=namespace_id,
            parent_id=row.parent_id,
            generation=row.generation,
            created_at_ms=row.created_at_ms,
            metadata_json=row.metadata_json,
            total_size=row.total_size,
            entries=[
                (e.name, b, e.media_type, e.schema_pin)
                for e, b in zip(entries, blob_ids, strict=True)
            ],
            code_revision=row.code_revision,  # who wrote it travels with it (not in the id)
            label=row.label,  # and the name its writer gave it
        )
        self.counts.checkpoints_copied += 1


def _verified_entries(src: EngineConnection, row: CheckpointRow) -> list[EntryRow]:
    entries = checkpoints.entries_of(src, row.seq)
    checkpoints.check_manifest(row, entries)
    if any(e.scope_id is not None for e in entries):
        raise errors.EncryptedScopeError(
            f"namespace {row.namespace!r} is encrypted (a key scope); copying it to another "
            "file would carry its content out of the scope, so it is refused. Leave it out "
            "(select other namespaces), or copy the whole file (e.g. a backup)."
        )
    return entries


def _copy_rows(
    copier: _Copier,
    rows: list[CheckpointRow],
    progress: Progress | None,
    after: Callable[[], None] | None = None,
) -> None:
    """Copy checkpoints oldest first: chunks in their own transactions, then all rows (and
    ``after``, e.g. pointer moves) in one transaction."""
    now_ms = copier.now_ms
    ordered = sorted(rows, key=lambda r: (r.namespace, r.generation, r.id))
    prepared = []
    staged: dict[str, list[str]] = {}
    # Progress counts the entry bytes of the checkpoints copied (chunk by chunk while a
    # large one is staged); writing the rows afterwards is quick.
    total = sum(r.total_size for r in ordered)
    done = [0, 0]  # bytes of the checkpoints staged, bytes staged of the current one

    def tick(n: int) -> None:
        done[1] += n
        if progress is not None:
            progress(min(done[0] + done[1], total), total)

    copier.on_bytes = tick if progress is not None else None
    for row in ordered:
        entries = _verified_entries(copier.src, row)
        done[1] = 0
        staged.update(copier.stage_chunks(entries, now_ms))
        prepared.append((row, entries))
        done[0] += row.total_size
        if progress is not None:
            progress(done[0], total)
    copier.on_bytes = None
    with copier.dst.write_transaction():
        for row, entries in prepared:
            copier.copy_checkpoint(row, entries, staged, now_ms)
        if after is not None:
            after()


def _refuse_dangling(src: EngineConnection, wanted: set[str] | None) -> None:
    """A namespace (of ``wanted``; None: every one) whose pointer names a checkpoint that
    is not stored cannot be exported as it is, and leaving it out would make a backup that
    silently lacks it."""
    for namespace_id, role, _seq in pointers.dangling(src):
        name = (
            checkpoints.namespace_name(src, namespace_id) if isinstance(namespace_id, int) else None
        )
        if wanted is None or name is None or name in wanted:
            raise errors.CorruptionError(
                f"namespace {name!r}: its {role} pointer names a checkpoint that is not stored "
                "(deleted outside ckptdb), so nothing was exported. Repair it first: "
                "`ckptdb set-current` to a verified checkpoint (`ckptdb log --all` lists "
                "them), or a new commit when only the fallback is missing; or name the "
                "other namespaces.",
                namespace=name,
                reason="pointer_dangling",
            )


@holds()
def export_to(
    src_tx: Unit,
    source_path: str,
    dest: str,
    *,
    namespaces: list[str] | None,
    since: str | None,
    progress: Progress | None,
    create: Callable[[str, int], Handle],
) -> models.TransferReceipt:
    """See :meth:`ckptdb.Database.export`. ``create(path, page_size)`` makes the new file."""
    src = src_tx.conn  # a file or a PostgreSQL database; the destination is a new file
    dest = os.path.abspath(dest)
    if os.path.lexists(dest):
        raise errors.InvalidInputError(
            f"{dest} already exists; export writes a new file (choose another name)"
        )
    tmp = os.path.join(os.path.dirname(dest), f".{os.path.basename(dest)}.{secrets.token_hex(4)}")
    with src.read_transaction():
        heads = pointers.all_pointers(src)
        _refuse_dangling(src, set(namespaces) if namespaces else None)
        wanted = set(namespaces) if namespaces else {p.namespace for p in heads}
        unknown = wanted - {p.namespace for p in heads}
        if unknown:
            raise errors.NamespaceNotFoundError(
                f"no such namespace(s) to export: {sorted(unknown)}"
            )
        since_row = checkpoints.require_checkpoint(src, since) if since else None
        if since_row is not None and since_row.namespace not in wanted:
            raise errors.InvalidReferenceError(
                f"--since {since_row.id[:12]} belongs to namespace {since_row.namespace!r}, "
                "which is not being exported"
            )
        rows: dict[str, CheckpointRow] = {}
        selected = [p for p in heads if p.namespace in wanted]
        for ptr in selected:
            for row in checkpoints.lineage(src, ptr.current_id):
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
                fallback = checkpoints.checkpoint_by_id(src, ptr.fallback_id)
                if fallback is not None:
                    rows[fallback.id] = fallback
        page_size = (
            int(src.pragma("page_size")) if isinstance(src, Connection) else DEFAULT_PAGE_SIZE
        )
        out = create(tmp, page_size)
        try:
            with holding(out, write=True) as dst_tx:
                dst = dst_tx.conn
                copier = _Copier(src_tx, dst_tx)

                def copy_pointers() -> None:
                    for ptr in selected:
                        _copy_pointer(src, dst, ptr)

                _copy_rows(copier, list(rows.values()), progress, copy_pointers)
                counts = copier.counts
                receipt_body = {
                    "source": source_path,
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
                        at_ms=src_tx.clock(),
                    )
                report = verify_database(dst_tx, quick=False)
            if not report.ok:
                raise errors.CorruptionError(
                    f"the exported file did not verify ({len(report.problems)} problem(s)); it "
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
        "export",
        receipt_id,
        source_path,
        dest,
        sorted(wanted),
        [p.namespace for p in selected],
        [],
    )


def _copy_pointer(src: EngineConnection, dst: EngineConnection, ptr: PointerRow) -> None:
    """Copy a pointer and its whole history verbatim, so its digest chain verifies."""
    namespace_id = checkpoints.namespace_id(dst, ptr.namespace)
    current = checkpoints.checkpoint_by_id(dst, ptr.current_id)
    fallback = checkpoints.checkpoint_by_id(dst, ptr.fallback_id) if ptr.fallback_id else None
    if namespace_id is None or current is None:
        raise errors.CorruptionError(
            f"namespace {ptr.namespace!r}: its CURRENT {ptr.current_id[:12]} was not copied "
            "(the source's lineage is damaged); nothing was written. Run `ckptdb verify` on "
            "the source.",
            namespace=ptr.namespace,
            reason="pointer_target_missing",
        )
    pointers.insert_verbatim(
        dst,
        ptr,
        namespace_id=namespace_id,
        current_seq=current.seq,
        fallback_seq=fallback.seq if fallback else None,
        history=pointers.history_of(src, ptr.namespace_id),
    )


@holds(write=True)
def import_from(
    dst_tx: Unit,
    dest_path: str,
    source: str,
    *,
    namespaces: list[str] | None,
    overwrite: bool,
    progress: Progress | None,
    open_source: Callable[[str], Handle],
) -> models.TransferReceipt:
    """See :meth:`ckptdb.Database.import_file`. ``open_source`` opens the file read-only."""
    dst = dst_tx.conn  # a file or a PostgreSQL database; the source is a file
    src_handle = open_source(source)
    try:
        with holding(src_handle) as src_tx:
            src = sqlite_only(src_tx.conn, "import")
            with src_tx.read_batch():
                # A source's pointer naming a checkpoint it does not hold (or one of another
                # namespace) is among what export_check.validate refuses.
                heads = pointers.all_pointers(src, unstored=True)
                wanted = set(namespaces) if namespaces else {p.namespace for p in heads}
                for name in wanted:
                    validation.namespace(name)
                unknown = wanted - {p.namespace for p in heads}
                if unknown:
                    raise errors.NamespaceNotFoundError(
                        f"{source} has no namespace(s) {sorted(unknown)}"
                    )
                rows = [r for r in checkpoint_scans.all_rows(src) if r.namespace in wanted]
                selected = [p for p in heads if p.namespace in wanted]
                export_check.validate(src, os.path.abspath(source), selected, rows)
                copier = _Copier(src_tx, dst_tx)
                moved: list[str] = []
                conflicts: list[dict[str, str | None]] = []
                receipt_ids: list[int] = []

                def move_pointers() -> None:
                    now_ms = dst_tx.clock()
                    for ptr in selected:
                        # No commit to it meanwhile (PostgreSQL; SQLite's writer is alone).
                        pointers.lock_namespace(dst, ptr.namespace)
                        here = pointers.pointer(dst, ptr.namespace)
                        if here is not None and here.current_id == ptr.current_id:
                            continue
                        lineage_ids = {r.id for r in checkpoints.lineage(dst, ptr.current_id)}
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
                        target = checkpoints.checkpoint_by_id(dst, ptr.current_id)
                        if target is None or target.namespace != ptr.namespace:
                            raise errors.InvalidExportError(
                                f"{source}: CURRENT of {ptr.namespace!r} names a checkpoint "
                                "that was not imported into that namespace; nothing was "
                                "imported"
                            )
                        pointers.move(
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

                _copy_rows(copier, rows, progress, move_pointers)
    finally:
        src_handle.close()
    counts = copier.counts
    return counts.receipt(
        "import",
        receipt_ids[0] if receipt_ids else None,
        os.path.abspath(source),
        dest_path,
        sorted(wanted),
        moved,
        [models.PointerConflict(**c) for c in conflicts],  # type: ignore[arg-type]
    )
