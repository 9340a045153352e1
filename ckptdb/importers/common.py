"""What every importer shares: safe reading of a source tree, idempotence, the report."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import canonical, errors, models, validation

if TYPE_CHECKING:
    from ..database import Database

#: Largest single JSON document an importer reads into memory.
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024


def _lstat(path: Path) -> os.stat_result:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        raise errors.SourceError(f"{path} does not exist") from None
    except OSError as exc:  # a name too long, a file in the parent chain, no permission
        raise errors.SourceError(f"cannot read {path}: {exc.strerror}") from exc


def lstat_regular(path: Path) -> os.stat_result:
    """lstat ``path``; refuse a symlink or anything but a regular file (SourceError)."""
    st = _lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise errors.SourceError(f"{path} is a symlink; importers never follow symlinks")
    if not stat.S_ISREG(st.st_mode):
        raise errors.SourceError(f"{path} is not a regular file")
    return st


def read_no_follow(path: Path, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """Read a regular file without following a symlink, refusing more than ``limit`` bytes."""
    lstat_regular(path)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise errors.SourceError(f"{path} is larger than {limit} bytes")
    return data


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_json(path: Path, limit: int = MAX_DOCUMENT_BYTES) -> Any:
    """Read and parse a JSON document strictly, or raise SourceError: it must be UTF-8,
    hold no NaN/Infinity, no text with lone surrogates (escaped ``\\ud800``), and nest no
    deeper than the parser allows."""
    return parse_json(read_no_follow(path, limit), str(path))


def parse_json(data: bytes, path: str) -> Any:
    """Parse a JSON document strictly (see :func:`load_json`); ``path`` names it in errors."""
    try:
        document = json.loads(data, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        reason = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise errors.SourceError(f"{path} is not valid JSON: {reason}") from exc
    stack = [document]
    while stack:  # iterative: the document may be as deep as the parser allowed
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and validation.has_surrogate(value):
            raise errors.SourceError(
                f"{path} holds text with a lone surrogate escape, which is not valid Unicode"
            )
    return document


def inside(root: Path, relative: str) -> Path:
    """``root / relative`` after checking ``relative`` is a safe relative path (no '..',
    not absolute) -- the same rule as ckptdb entry names."""
    try:
        validation.entry_name(relative)
    except errors.InvalidNameError as exc:
        raise errors.SourceError(f"unsafe path {relative!r} in the source: {exc}") from exc
    return root / relative


def canonical_digest(document: Mapping[str, Any], exclude: str) -> str:
    """sha256 of the canonical JSON of ``document`` without the key ``exclude``."""
    body = {k: v for k, v in document.items() if k != exclude}
    return canonical.sha256_hex(canonical.dumps(body).encode("utf-8"))


@dataclass
class Collector:
    """Accumulates the report of one import run."""

    db: Database
    kind: str
    source: str
    dry_run: bool
    imported: list[models.ImportedItem] = field(default_factory=list)
    skipped: list[models.SkippedItem] = field(default_factory=list)
    namespaces: set[str] = field(default_factory=set)
    # namespace -> (source_id, checkpoint id, metadata) of what earlier runs of this kind
    # imported there, newest first
    _imports: dict[str, list[tuple[str, str, dict[str, Any]]]] = field(default_factory=dict)

    def skip(self, source_id: str, code: str, detail: str) -> None:
        """Record something not imported and why."""
        self.skipped.append(models.SkippedItem(source_id=source_id, code=code, detail=detail))

    def _imported_into(self, namespace: str) -> list[tuple[str, str, dict[str, Any]]]:
        if namespace not in self._imports:
            self._imports[namespace] = [
                (sid, info.id, info.metadata)
                for info in self.db.lineage(namespace)
                if isinstance(sid := info.metadata.get("source_id"), str)
                and info.metadata.get("source") == self.kind
            ]
        return self._imports[namespace]

    def known(self, namespace: str, match: Mapping[str, Any] | None = None) -> dict[str, str]:
        """source_id -> checkpoint id of what an earlier run imported into ``namespace``
        (only checkpoints whose metadata holds every pair of ``match``, when given)."""
        found: dict[str, str] = {}
        for sid, cid, meta in self._imported_into(namespace):
            if match is None or all(meta.get(k) == v for k, v in match.items()):
                found.setdefault(sid, cid)
        return found

    def commit(
        self,
        namespace: str,
        source_id: str,
        entries: dict[str, Any],
        metadata: dict[str, Any],
        *,
        owner: tuple[str, Any] | None = None,
        legacy: str | None = None,
    ) -> str | None:
        """Commit one source checkpoint (unless already imported, or in a dry run).

        ``owner`` = (metadata key, value): what the namespace belongs to (a run); the
        checkpoint is refused (SourceError, nothing written) when ``namespace`` holds an
        earlier import of this kind with another value -- a name an older mapping gave
        another source. ``legacy``: the namespace an older mapping gave this checkpoint's
        owner; an import already there (of the same owner) counts as already imported."""
        if owner is not None:
            others = {
                repr(meta.get(owner[0]))
                for _, _, meta in self._imported_into(namespace)
                if meta.get(owner[0]) != owner[1]
            }
            if others:
                raise errors.SourceError(
                    f"namespace {namespace!r} already holds an import of another "
                    f"{owner[0]} ({', '.join(sorted(others)[:3])}), written by an older ckptdb "
                    "whose names let one source reach another's namespace; nothing of this "
                    "one was imported. Import it with --namespace."
                )
        self.namespaces.add(namespace)
        known = self.known(namespace)
        where = namespace
        if source_id not in known and legacy is not None and legacy != namespace:
            known = self.known(legacy, None if owner is None else {owner[0]: owner[1]})
            where = legacy
        if source_id in known:
            self.imported.append(
                models.ImportedItem(
                    source_id=source_id,
                    namespace=where,
                    checkpoint_id=known[source_id],
                    created=False,
                )
            )
            return known[source_id]
        checkpoint_id = None
        if not self.dry_run:
            ack = self.db.commit(
                namespace,
                entries,
                metadata={"source": self.kind, "source_id": source_id, **metadata},
                reason=f"import-from {self.kind}",
            )
            checkpoint_id = ack.checkpoint_id
            self._imported_into(namespace).insert(
                0, (source_id, checkpoint_id, {"source": self.kind, **metadata})
            )
        self.imported.append(
            models.ImportedItem(
                source_id=source_id, namespace=namespace, checkpoint_id=checkpoint_id, created=True
            )
        )
        return checkpoint_id

    def finish(self) -> models.ImportReport:
        """Store a receipt (unless a dry run) and return the report."""
        now_ms = self.db.clock()
        receipt_id = None
        if not self.dry_run:
            receipt_id = self.db.record_receipt(
                "import-from",
                {
                    "kind": self.kind,
                    "source": self.source,
                    "namespaces": sorted(self.namespaces),
                    "imported": sum(1 for i in self.imported if i.created),
                    "already_present": sum(1 for i in self.imported if not i.created),
                    "skipped": [s.model_dump() for s in self.skipped],
                },
            )
        return models.ImportReport(
            kind=self.kind,
            source=self.source,
            dry_run=self.dry_run,
            receipt_id=receipt_id,
            namespaces=sorted(self.namespaces),
            imported=self.imported,
            skipped=self.skipped,
            at=models.from_ms(now_ms),
        )


def escape_component(text: str) -> str:
    """``text`` with ``%`` and ``/`` percent-encoded (``%25``, ``%2F``): it never holds
    ``/``, so a name joined from such parts with ``/`` splits back in exactly one way, and
    ``urllib.parse.unquote`` returns ``text``."""
    return text.replace("%", "%25").replace("/", "%2F")


def namespace_for(default: str, given: str | None, sub: str | None = None) -> str:
    """The target namespace: ``given`` (with ``/sub`` when the source has several) or the
    name derived from the source, validated. ``given`` is the caller's own name, used as
    it is; ``sub`` and ``default`` come from the source and must already be escaped so
    that no two sources share a name (:func:`escape_component`)."""
    name = default if given is None else (given if sub is None else f"{given}/{sub}")
    try:
        return validation.namespace(name)
    except errors.InvalidNamespaceError as exc:
        raise errors.SourceError(
            f"{name!r} cannot be a namespace ({exc}); pass --namespace"
        ) from exc
