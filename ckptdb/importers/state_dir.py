"""Import an engine-state directory: several state files written one by one (temp file +
fsync + rename) and ``manifest.json`` written last as the commit marker:

    DIR/manifest.json                 {"schema_version": 1|2, "turn_count": N,
                                       "written_at_revision": "...", ...}
    DIR/recognizers.jsonl, DIR/discovery_candidates.jsonl, DIR/session_state.json, ...

The whole directory becomes *one* checkpoint (all or nothing), the manifest's schema
version, turn count, code revision and identities kept as metadata. A manifest newer than
this importer understands is refused, as is a directory whose files were written after
its manifest (an unfinished checkpoint) or that holds symlinks. Importing an unchanged
directory again changes nothing.

The namespace (unless ``--namespace`` names one) is ``state:`` and the directory's resolved
absolute path, each component percent-encoded outside printable ASCII and for ``%``: two
directories never share a namespace, whatever their names (a path longer than a namespace
holds becomes ``state#<sha256 of the path>``). Files imported by ckptdb before issue 23
named it ``state/<last component>``, which every directory of that name shared: a directory
whose own import is CURRENT there continues in it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import string
from pathlib import Path
from typing import Any

from .. import errors, models
from ..types import Progress
from .common import (
    Collector,
    namespace_for,
    parse_json,
)
from .source_tree import SourceTree

KIND = "state-dir"
SUPPORTED_SCHEMA_VERSION = 2
_MANIFEST = "manifest.json"
#: Path characters kept as they are in a namespace: printable ASCII but "%" (the escape),
#: space and "/" (the separator). Anything else is percent-encoded, byte by byte, so the
#: name is valid (NFC, no control characters, no surrounding whitespace) for every path.
_PATH_SAFE = frozenset(string.ascii_letters + string.digits + string.punctuation) - {"%", "/"}
NAMESPACE_PREFIX = "state:"
HASHED_PREFIX = "state#"
_MAX_NAMESPACE_CHARS = 256


def default_namespace(resolved: str) -> str:
    """The namespace of the state directory at the absolute path ``resolved``."""
    parts = [
        "".join(
            ch if ch in _PATH_SAFE else "".join(f"%{b:02X}" for b in os.fsencode(ch))
            for ch in component
        )
        for component in resolved.split("/")
    ]
    name = NAMESPACE_PREFIX + "/".join(parts)
    if len(name) <= _MAX_NAMESPACE_CHARS:
        return name
    return HASHED_PREFIX + hashlib.sha256(os.fsencode(resolved)).hexdigest()


def _namespace(db: Any, root: Path, source_dir: str) -> str:
    """:func:`default_namespace`, or the name ckptdb before issue 23 gave this directory
    when its own import is CURRENT there (so its lineage continues)."""
    resolved = root.resolve()
    ns = default_namespace(str(resolved))
    if db.pointer(ns) is not None:
        return ns
    legacy = f"state/{resolved.name}"
    try:
        current = db.current(legacy)
    except errors.InvalidNamespaceError:
        return ns
    if (
        current is not None
        and current.metadata.get("source") == KIND
        and current.metadata.get("source_dir") == source_dir
    ):
        return legacy
    return ns


def import_state_dir(
    db: Any,
    source: str,
    *,
    namespace: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> models.ImportReport:
    """Import the committed state of an engine-state directory as one checkpoint."""
    root = Path(source)
    with SourceTree(source) as tree:
        manifest_stat = tree.lstat(_MANIFEST)
        try:
            manifest = parse_json(tree.read(_MANIFEST, 1024 * 1024), tree.where(_MANIFEST))
        except errors.SourceError as exc:
            raise errors.SourceError(f"{exc.message}: the state was never committed") from exc
        if not isinstance(manifest, dict):
            raise errors.SourceError(f"{root / _MANIFEST} is not a JSON object")
        version = manifest.get("schema_version", 0)
        if not isinstance(version, int) or isinstance(version, bool):
            raise errors.SourceError(f"schema_version {version!r} is not an integer")
        if version > SUPPORTED_SCHEMA_VERSION:
            raise errors.SourceTooNewError(
                f"{root} has engine-state schema_version {version}; this importer understands "
                f"up to {SUPPORTED_SCHEMA_VERSION}. Import it with a newer ckptdb. Nothing was "
                "imported."
            )
        collector = Collector(db, KIND, os.path.abspath(source), dry_run)
        entries: dict[str, bytes] = {}
        for name in tree.listdir():
            st = tree.lstat(name)
            if stat.S_ISLNK(st.st_mode):
                raise errors.SourceError(
                    f"{root / name} is a symlink; refusing to import a state directory with "
                    "symlinks"
                )
            if name.startswith("."):
                collector.skip(name, "temporary", "the temporary file of an unfinished write")
                continue
            if not stat.S_ISREG(st.st_mode):
                collector.skip(name, "not_a_file", "not part of the layout (only files are)")
                continue
            if name != _MANIFEST and st.st_mtime_ns > manifest_stat.st_mtime_ns:
                raise errors.SourceError(
                    f"{name} was written after {_MANIFEST}: the directory holds an unfinished "
                    "checkpoint. Let the writer finish (or restore it) and import again."
                )
            entries[name] = tree.read(name, 1 << 30)
    metadata = {
        "schema_version": version,
        "turn_count": manifest.get("turn_count"),
        "written_at_revision": manifest.get("written_at_revision"),
        "engine_identity": manifest.get("engine_identity"),
        "parent_engine_identity": manifest.get("parent_engine_identity"),
        "source_dir": os.path.abspath(source),
    }
    # The derived name is looked up (an older import may continue) only when it is used.
    derived = _namespace(db, root, os.path.abspath(source)) if namespace is None else ""
    ns = namespace_for(derived, namespace)
    source_id = f"turn {manifest.get('turn_count')} at {manifest.get('written_at_revision')}"
    full_metadata = {"source": KIND, "source_id": source_id, **metadata}
    collector.namespaces.add(ns)
    if dry_run:
        # ckptdb's own idempotence decides: the same content as CURRENT is not new.
        current = db.current(ns)
        unchanged = (
            current is not None
            and current.metadata == full_metadata
            and {n: e.digest for n, e in current.entries.items()}
            == {n: hashlib.sha256(v).hexdigest() for n, v in entries.items()}
        )
        collector.imported.append(
            models.ImportedItem(
                source_id=source_id,
                namespace=ns,
                checkpoint_id=current.id if unchanged and current else None,
                created=not unchanged,
            )
        )
    else:
        ack = db.commit(ns, entries, metadata=full_metadata, reason=f"import-from {KIND}")
        collector.imported.append(
            models.ImportedItem(
                source_id=source_id,
                namespace=ns,
                checkpoint_id=ack.checkpoint_id,
                created=ack.created,
            )
        )
    if progress is not None:
        progress(1, 1)
    return collector.finish()
