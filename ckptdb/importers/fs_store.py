"""Import a content-addressed filesystem checkpoint store (the layout of the seed store):

    ROOT/CURRENT                         {"current_checkpoint_id", "fallback_checkpoint_id", ...}
    ROOT/checkpoints/<id>/manifest.json  {"checkpoint_id", "brain_id", "epoch", "generation",
                                          "revision", "schema_versions", "file_inventory": [
                                            {"logical_name", "relative_path", "schema_id",
                                             "schema_version", "content_digest", "byte_len",
                                             "blob_path": "files/<digest>"}, ...],
                                          "created_at_unix_ms", "previous_checkpoint_id", ...}
    ROOT/checkpoints/<id>/files/<digest> the bytes of each file

The lineage of CURRENT is imported oldest first, one ckptdb checkpoint per source
checkpoint: entries named by ``relative_path`` (schema pin ``schema_id/schema_version``),
the manifest's fields kept as metadata. Every file is checked against its digest and size
before it is committed. Complete directories that CURRENT never selected, staging
directories, and damaged or hostile checkpoints are skipped and reported. A CURRENT that
cannot be read is refused: the importer does not guess which checkpoint is current.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import IO, Any

from .. import errors, models, validation
from ..types import Entry, Progress
from .common import (
    MAX_DOCUMENT_BYTES,
    Collector,
    inside,
    namespace_for,
    parse_json,
)
from .source_tree import SourceTree

KIND = "fs-store"
_INLINE_LIMIT = 4 * 1024 * 1024


def _manifest(tree: SourceTree, checkpoint_id: str) -> dict[str, Any]:
    base = f"checkpoints/{checkpoint_id}"
    if not tree.is_dir(base):
        raise errors.SourceError(f"{base} is not a directory (or a symlink)")
    manifest = parse_json(tree.read(f"{base}/manifest.json", MAX_DOCUMENT_BYTES), tree.where(base))
    if not isinstance(manifest, dict) or manifest.get("checkpoint_id") != checkpoint_id:
        raise errors.SourceError(
            f"manifest of {checkpoint_id[:12]} does not name its own directory's id"
        )
    return manifest


def _entries(
    tree: SourceTree, base: str, manifest: dict[str, Any], opened: list[IO[bytes]]
) -> dict[str, Any]:
    """Entries of one checkpoint, every file verified against its digest and size. Every
    file is reached through directory descriptors (never through a symlink); large ones are
    passed to commit as the open file that was verified (appended to ``opened``)."""
    inventory = manifest.get("file_inventory")
    if not isinstance(inventory, list) or not inventory:
        raise errors.SourceError("the manifest has no file_inventory")
    entries: dict[str, Any] = {}
    for item in inventory:
        if not isinstance(item, dict):
            raise errors.SourceError("a file_inventory item is not an object")
        relative = str(item.get("relative_path", ""))
        digest = str(item.get("content_digest", ""))
        if not validation.is_full_id(digest) or item.get("blob_path") != f"files/{digest}":
            raise errors.SourceError(f"{relative!r}: bad content_digest or blob_path")
        inside(Path(base), relative)  # refuses '..', absolute and control characters
        blob = f"{base}/files/{digest}"
        if relative in entries:
            raise errors.SourceError(f"{relative!r} appears twice in the inventory")
        schema = f"{item.get('schema_id')}/{item.get('schema_version')}"
        fh = tree.open_file(blob)
        opened.append(fh)
        h = hashlib.sha256()
        size = 0
        while piece := fh.read(4 * 1024 * 1024):
            h.update(piece)
            size += len(piece)
        if h.hexdigest() != digest or size != item.get("byte_len"):
            raise errors.CorruptionError(
                f"{relative!r}: the stored file does not match its digest/size",
                entry=relative,
                reason="source_digest_mismatch",
            )
        fh.seek(0)
        value: Any = fh.read() if size <= _INLINE_LIMIT else fh
        entries[relative] = Entry(value, schema_pin=schema)
    return entries


def _metadata(manifest: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "brain_id",
        "epoch",
        "generation",
        "revision",
        "created_at_unix_ms",
        "previous_checkpoint_id",
        "schema_versions",
        "external_authority_refs",
    )
    meta = {k: manifest[k] for k in keep if k in manifest}
    meta["logical_names"] = {
        str(i.get("relative_path")): str(i.get("logical_name"))
        for i in manifest.get("file_inventory", [])
        if isinstance(i, dict)
    }
    return meta


def import_fs_store(
    db: Any,
    source: str,
    *,
    namespace: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> models.ImportReport:
    """Import the lineage of CURRENT of an fs-store checkpoint directory."""
    with SourceTree(source) as tree:
        return _import(tree, db, source, namespace, dry_run, progress)


def _import(
    tree: SourceTree,
    db: Any,
    source: str,
    namespace: str | None,
    dry_run: bool,
    progress: Progress | None,
) -> models.ImportReport:
    if not tree.is_dir("checkpoints"):
        raise errors.SourceError(
            f"{tree.where('checkpoints')} is not a directory (symlinks are not followed)"
        )
    try:
        pointer = parse_json(tree.read("CURRENT", 64 * 1024), tree.where("CURRENT"))
    except errors.SourceError as exc:
        raise errors.SourceError(
            f"{exc.message}; refusing to guess which checkpoint is current. Nothing was imported."
        ) from exc
    current = pointer.get("current_checkpoint_id") if isinstance(pointer, dict) else None
    if not isinstance(current, str) or not validation.is_full_id(current):
        raise errors.SourceError(
            f"{tree.where('CURRENT')} does not name a checkpoint (current_checkpoint_id); "
            "refusing to guess which checkpoint is current. Nothing was imported."
        )
    collector = Collector(db, KIND, os.path.abspath(source), dry_run)

    # Walk the lineage from CURRENT; what cannot be read ends the walk.
    lineage: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    walk: str | None = current
    while walk is not None and walk not in seen:
        seen.add(walk)
        try:
            manifest = _manifest(tree, walk)
        except (errors.CkptdbError, OSError) as exc:
            collector.skip(walk, "unreadable", f"{exc}; older ancestors are unreachable")
            break
        lineage.append((walk, manifest))
        parent = manifest.get("previous_checkpoint_id")
        walk = parent if isinstance(parent, str) and validation.is_full_id(parent) else None
    lineage.reverse()

    for name in tree.listdir("checkpoints"):
        if name.startswith("."):
            collector.skip(name, "staging", "an unpublished staging directory")
        elif name not in seen:
            collector.skip(name, "orphan", "a complete directory CURRENT never selected")

    if not lineage:
        return collector.finish()
    ns = namespace_for(str(lineage[-1][1].get("brain_id", "")), namespace)
    for index, (checkpoint_id, manifest) in enumerate(lineage, start=1):
        opened: list[IO[bytes]] = []
        try:
            entries = _entries(tree, f"checkpoints/{checkpoint_id}", manifest, opened)
            collector.commit(ns, checkpoint_id, entries, _metadata(manifest))
        except (
            errors.SourceError,
            errors.CorruptionError,
            errors.InvalidInputError,
            OSError,
        ) as exc:
            code = exc.code if isinstance(exc, errors.CkptdbError) else "io_error"
            collector.skip(checkpoint_id, code, str(exc))
        finally:
            for fh in opened:
                fh.close()
        if progress is not None:
            progress(index, len(lineage))
    return collector.finish()
