"""Import a directory of one-JSON-document-per-checkpoint files (the context-checkpoint
layout): ``<checkpointId>.json`` documents with at least

    {"checkpointId": "...", "runId": "...", "createdAt": "<ISO 8601>",
     "checkpointDigest": "<sha256 hex of the canonical JSON of the document without this key>"}

One namespace per run (``runId``, or ``NS/runId`` with ``--namespace NS``; in ``runId``,
``%`` and ``/`` are written ``%25`` and ``%2F``, so no two runs -- nor a run and a
prefixed run -- share a namespace), lineage by ``createdAt`` (then id). Each document
becomes a checkpoint holding its exact bytes as ``checkpoint.json``, with id, run, time and
digest as metadata. A document whose digest does not verify, whose name does not match
its id, that is a symlink, too large or not valid JSON, whose ids are not single short
lines, or that ckptdb's own validation refuses (metadata too deep or too large, ...) is
skipped and reported -- with its reason, in the report, its ``--json`` and the receipt --
and the run goes on with the other documents (``ckptdb import-from`` then exits with
status 11). Every file is read through the held directory descriptor, never through a
symlink.

Files imported by ckptdb before issue 23 named a run by its id verbatim: a document
already imported there (same run) is reported as present, not imported again, and a run
never joins a namespace that holds another run's imports (the document is skipped).
"""

from __future__ import annotations

import os
import unicodedata
from datetime import datetime
from typing import Any

from .. import errors, models, validation
from ..types import Progress
from .common import (
    MAX_DOCUMENT_BYTES,
    Collector,
    canonical_digest,
    escape_component,
    namespace_for,
    parse_json,
)
from .source_tree import SourceTree

KIND = "json-dir"
_REQUIRED = ("checkpointId", "runId", "createdAt", "checkpointDigest")
_MAX_ID_CHARS = 200


def _single_line(value: str, what: str) -> None:
    if len(value) > _MAX_ID_CHARS:
        raise errors.SourceError(
            f"{what} is {len(value)} characters long (at most {_MAX_ID_CHARS})"
        )
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        raise errors.SourceError(f"{what} {value[:40]!r} holds the control character {bad!r}")


def _document(tree: SourceTree, name: str) -> tuple[dict[str, Any], bytes]:
    raw = tree.read(name, MAX_DOCUMENT_BYTES)
    doc = parse_json(raw, tree.where(name))
    if not isinstance(doc, dict):
        raise errors.SourceError("not a JSON object")
    missing = [k for k in _REQUIRED if not isinstance(doc.get(k), str) or not doc.get(k)]
    if missing:
        raise errors.SourceError(f"missing or empty fields: {', '.join(missing)}")
    checkpoint_id = doc["checkpointId"]
    for key in _REQUIRED:
        _single_line(doc[key], key)
    if (
        "/" in checkpoint_id
        or "\\" in checkpoint_id
        or checkpoint_id in (".", "..")
        or ("\x00" in checkpoint_id)
    ):
        raise errors.SourceError(f"checkpointId {checkpoint_id!r} is not a single file name")
    if name != f"{checkpoint_id}.json":
        raise errors.SourceError(f"the file name does not match checkpointId {checkpoint_id!r}")
    try:
        datetime.fromisoformat(doc["createdAt"].replace("Z", "+00:00"))
    except ValueError as exc:
        raise errors.SourceError(f"createdAt is not an ISO 8601 time: {exc}") from exc
    stated = doc["checkpointDigest"].removeprefix("sha256:")
    try:
        actual = canonical_digest(doc, exclude="checkpointDigest")
    except (TypeError, ValueError, RecursionError) as exc:
        raise errors.SourceError(f"the document cannot be put in canonical form: {exc}") from exc
    if actual != stated:
        raise errors.CorruptionError(
            "checkpointDigest does not match the document", reason="source_digest_mismatch"
        )
    return doc, raw


def _metadata(doc: dict[str, Any]) -> dict[str, Any]:
    metadata = {
        "run_id": doc["runId"],
        "created_at": doc["createdAt"],
        "digest": doc["checkpointDigest"],
        "schema_version": doc.get("schemaVersion"),
    }
    try:
        validation.metadata(metadata)  # depth, size, NaN: refused here, per document
    except RecursionError as exc:
        raise errors.SourceError("schemaVersion nests too deeply") from exc
    return metadata


def run_namespace(run_id: str, given: str | None) -> str:
    """The namespace of run ``run_id``: the escaped id, under ``given`` when one is given.
    An escaped id never holds ``/``: the name splits back into (``given``, ``run_id``) in
    one way, and without ``given`` it holds no ``/`` at all."""
    part = escape_component(run_id)
    return namespace_for(part, given, part if given else None)


def _legacy_run_namespace(run_id: str, given: str | None) -> str | None:
    """The namespace ckptdb before issue 23 gave the run (the id verbatim), if valid."""
    name = run_id if not given else f"{given}/{run_id}"
    try:
        return validation.namespace(name)
    except errors.InvalidNamespaceError:
        return None


def import_json_dir(
    db: Any,
    source: str,
    *,
    namespace: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> models.ImportReport:
    """Import every verified document, one namespace per run, in created-at order. A
    document that cannot be imported (unreadable, hostile, inconsistent, refused by
    ckptdb's own validation) is skipped and reported with its reason; the others are
    imported."""
    with SourceTree(source) as tree:
        collector = Collector(db, KIND, os.path.abspath(source), dry_run)
        documents: list[tuple[str, dict[str, Any], bytes, str, dict[str, Any]]] = []
        for name in tree.listdir():
            if name.startswith("."):
                collector.skip(name, "temporary", "a hidden or temporary file")
                continue
            if not name.endswith(".json"):
                collector.skip(name, "not_json", "not a .json document")
                continue
            try:
                doc, raw = _document(tree, name)
                ns = run_namespace(doc["runId"], namespace)
                documents.append((name, doc, raw, ns, _metadata(doc)))
            except (errors.SourceError, errors.CorruptionError, errors.InvalidInputError) as exc:
                collector.skip(name, exc.code, exc.message)
            except OSError as exc:
                collector.skip(name, "io_error", str(exc))
    documents.sort(key=lambda d: (d[1]["createdAt"], d[1]["checkpointId"]))
    for index, (name, doc, raw, ns, metadata) in enumerate(documents, start=1):
        try:
            collector.commit(
                ns,
                doc["checkpointId"],
                {"checkpoint.json": raw},
                metadata,
                owner=("run_id", doc["runId"]),
                legacy=_legacy_run_namespace(doc["runId"], namespace),
            )
        except (errors.InvalidInputError, errors.ConflictError) as exc:
            # Refused by ckptdb's own validation: nothing of this document was written.
            collector.skip(name, exc.code, exc.message)
        if progress is not None:
            progress(index, len(documents))
    return collector.finish()
