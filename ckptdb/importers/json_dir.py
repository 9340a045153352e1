"""Import a directory of one-JSON-document-per-checkpoint files (the context-checkpoint
layout): ``<checkpointId>.json`` documents with at least

    {"checkpointId": "...", "runId": "...", "createdAt": "<ISO 8601>",
     "checkpointDigest": "<sha256 hex of the canonical JSON of the document without this key>"}

One namespace per run (``runId``, or ``NS/runId`` with ``--namespace NS``), lineage by
``createdAt`` (then id). Each document becomes a checkpoint holding its exact bytes as
``checkpoint.json``, with id, run, time and digest as metadata. A document whose digest
does not verify, whose name does not match its id, that is a symlink, too large or not
valid JSON is skipped and reported.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import errors, models
from .common import (
    Collector,
    Progress,
    canonical_digest,
    load_json,
    namespace_for,
    read_no_follow,
    require_directory,
)

KIND = "json-dir"
_REQUIRED = ("checkpointId", "runId", "createdAt", "checkpointDigest")


def _document(path: Path) -> dict[str, Any]:
    doc = load_json(path)
    if not isinstance(doc, dict):
        raise errors.SourceError("not a JSON object")
    missing = [k for k in _REQUIRED if not isinstance(doc.get(k), str) or not doc.get(k)]
    if missing:
        raise errors.SourceError(f"missing or empty fields: {', '.join(missing)}")
    checkpoint_id = doc["checkpointId"]
    if (
        "/" in checkpoint_id
        or "\\" in checkpoint_id
        or checkpoint_id in (".", "..")
        or ("\x00" in checkpoint_id)
    ):
        raise errors.SourceError(f"checkpointId {checkpoint_id!r} is not a single file name")
    if path.name != f"{checkpoint_id}.json":
        raise errors.SourceError(f"the file name does not match checkpointId {checkpoint_id!r}")
    try:
        datetime.fromisoformat(doc["createdAt"].replace("Z", "+00:00"))
    except ValueError as exc:
        raise errors.SourceError(f"createdAt is not an ISO 8601 time: {exc}") from exc
    stated = doc["checkpointDigest"].removeprefix("sha256:")
    if canonical_digest(doc, exclude="checkpointDigest") != stated:
        raise errors.CorruptionError(
            "checkpointDigest does not match the document", reason="source_digest_mismatch"
        )
    return doc


def import_json_dir(
    db: Any,
    source: str,
    *,
    namespace: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> models.ImportReport:
    """Import every verified document, one namespace per run, in created-at order."""
    root = Path(source)
    require_directory(root)
    collector = Collector(db, KIND, os.path.abspath(source), dry_run)
    documents: list[tuple[dict[str, Any], bytes]] = []
    for name in sorted(os.listdir(root)):
        path = root / name
        if name.startswith("."):
            collector.skip(name, "temporary", "a hidden or temporary file")
            continue
        if not name.endswith(".json"):
            collector.skip(name, "not_json", "not a .json document")
            continue
        try:
            doc = _document(path)
            documents.append((doc, read_no_follow(path)))
        except (errors.SourceError, errors.CorruptionError, OSError) as exc:
            code = exc.code if isinstance(exc, errors.CkptdbError) else "io_error"
            collector.skip(name, code, str(exc))
    documents.sort(key=lambda d: (d[0]["createdAt"], d[0]["checkpointId"]))
    for index, (doc, raw) in enumerate(documents, start=1):
        ns = namespace_for(doc["runId"], namespace, doc["runId"] if namespace else None)
        collector.commit(
            ns,
            doc["checkpointId"],
            {"checkpoint.json": raw},
            {
                "run_id": doc["runId"],
                "created_at": doc["createdAt"],
                "digest": doc["checkpointDigest"],
                "schema_version": doc.get("schemaVersion"),
            },
        )
        if progress is not None:
            progress(index, len(documents))
    return collector.finish()
