"""Validating a ckptdb file before ``import`` copies anything out of it.

An export may have been crafted: its manifests can hash consistently and still lie in every
column the id does not cover. Before a single row or chunk reaches the destination,
:func:`validate` proves, inside the source's read snapshot:

* **pointers** -- each selected CURRENT pointer matches its digest; its current and
  fallback checkpoints belong to *its* namespace (a pointer of namespace A naming a
  checkpoint of B is refused);
* **pointer history** -- every row of the namespace's history matches its digest, the
  revisions are consecutive, each row chains to the one before it, the last row is the
  pointer itself, and every checkpoint a row names that the file holds is of the same
  namespace;
* **checkpoint rows** -- the types of every column, an id of the right shape that the
  stored manifest hashes to, a valid namespace name, ``generation >= 1`` and one more than
  the parent's (same namespace) when the parent is in the file, ``created_at_ms`` a time
  that can be represented, ``metadata`` canonical JSON of a bounded size and depth,
  ``entry_count`` equal to the entries and ``total_size`` equal to the sum of their sizes
  (the columns a reader trusts without re-hashing), and a ``code_revision`` (not hashed)
  that ``open(code_revision=...)`` would accept, or none;
* **entries** -- valid names (the same rule as ``commit``), sizes in range, media types and
  schema pins of the allowed shape.

Any finding raises :class:`~ckptdb.errors.InvalidExportError` naming up to ten problems; the
destination has not been touched at that point. (Bytes are verified later, as they are
copied: a damaged chunk is refused then, leaving at most unreferenced staged chunks that
GC reclaims.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import astuple

from .. import canonical, errors, limits, validation
from ..connection import Connection
from ..store import checkpoint_scans, checkpoints, pointers
from ..store.rows import CHECKPOINT_TYPES, CheckpointRow, EntryRow, PointerRow, check_types

#: Largest stored metadata text considered at all: the most any handle may be opened to
#: accept (the source's own limit is not known here; this also bounds memory and parse time).
MAX_METADATA_TEXT = limits.MAX_METADATA_BYTES
#: The latest time a datetime can hold (9999-12-31T23:59:59.999Z), in milliseconds.
MAX_TIME_MS = 253_402_300_799_999
MAX_SIZE = 2**53  # bytes; anything larger cannot be a real entry (and overflows readers)
_MAX_REPORTED = 10


class _Findings:
    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []

    def add(self, problem: str) -> None:
        self.problems.append(problem)

    def raise_if_any(self) -> None:
        if not self.problems:
            return
        shown = "; ".join(self.problems[:_MAX_REPORTED])
        more = len(self.problems) - _MAX_REPORTED
        raise errors.InvalidExportError(
            f"{self.source} is not a sound ckptdb export ({len(self.problems)} problem(s): "
            f"{shown}{f'; and {more} more' if more > 0 else ''}). Nothing was imported; the "
            "destination is unchanged. Re-export the source from a database that passes "
            "`ckptdb verify`.",
            problems=self.problems[:100],
        )


def _short(checkpoint_id: object) -> str:
    return str(checkpoint_id)[:12]


def _metadata_ok(text: str) -> str | None:
    """None when ``text`` is canonical JSON metadata, else what is wrong."""
    if len(text) > MAX_METADATA_TEXT:
        return f"metadata is {len(text)} characters long"
    try:
        parsed = json.loads(text)
    except RecursionError:
        return "metadata nests too deeply"
    except ValueError as exc:
        return f"metadata is not JSON ({exc})"
    if not isinstance(parsed, dict):
        return "metadata is not a JSON object"
    try:
        canonical_text = validation.metadata(parsed, MAX_METADATA_TEXT * 4)
    except errors.InvalidMetadataError as exc:
        return exc.message
    except RecursionError:
        return "metadata nests too deeply"
    if canonical_text != text:
        return "metadata is not in canonical form"
    return None


def _check_row(row: CheckpointRow, entries: list[EntryRow], found: _Findings) -> None:
    where = f"checkpoint {_short(row.id)} ({row.namespace!r})"
    if not validation.is_full_id(row.id):
        found.add(f"{where}: its id is not 64 lowercase hex characters")
    if row.parent_id is not None and not validation.is_full_id(row.parent_id):
        found.add(f"{where}: its parent id is not a checkpoint id")
    if not 1 <= row.generation <= 2**62:
        found.add(f"{where}: generation {row.generation} is out of range")
    if not 0 <= row.created_at_ms <= MAX_TIME_MS:
        found.add(f"{where}: created_at_ms {row.created_at_ms} is not a representable time")
    problem = _metadata_ok(row.metadata_json)
    if problem is not None:
        found.add(f"{where}: {problem}")
    if row.entry_count != len(entries):
        found.add(f"{where}: entry_count {row.entry_count} but {len(entries)} entry row(s)")
    total = 0
    for e in entries:
        if not 0 <= e.size <= MAX_SIZE:
            found.add(f"{where}: entry {e.name!r} has size {e.size}, out of range")
            continue
        total += e.size
        try:
            validation.entry_name(e.name)
            validation.optional_label(e.media_type, "media type", validation.MAX_MEDIA_TYPE_CHARS)
            validation.optional_label(e.schema_pin, "schema pin", validation.MAX_SCHEMA_CHARS)
        except errors.InvalidInputError as exc:
            found.add(f"{where}: {exc.message}")
        if e.chunk_count < 0:
            found.add(f"{where}: entry {e.name!r} has a negative chunk count")
    try:
        validation.entry_names_consistent([e.name for e in entries])
    except errors.InvalidInputError as exc:
        found.add(f"{where}: {exc.message}")
    if row.total_size != total:
        found.add(
            f"{where}: total_size {row.total_size} is not the sum of its entry sizes ({total})"
        )
    try:
        checkpoints.check_manifest(row, entries)
    except errors.CorruptionError:
        found.add(f"{where}: its stored manifest does not hash to its id")


def _check_history(
    src: Connection,
    ptr: PointerRow,
    namespace_of: dict[str, str],
    found: _Findings,
) -> None:
    ns = ptr.namespace
    rows = [h[:5] for h in pointers.history_of(src, ptr.namespace_id)]
    before: tuple[int, str] | None = None
    for row in rows:
        revision, current, fallback, previous, digest = row
        if not (
            isinstance(revision, int)
            and isinstance(current, str)
            and isinstance(fallback, str | None)
            and isinstance(previous, str | None)
            and isinstance(digest, str)
        ):
            found.add(f"namespace {ns!r}: a pointer history row has values of the wrong type")
            return
        if canonical.pointer_digest(ns, revision, current, fallback, previous) != digest:
            found.add(
                f"namespace {ns!r}: pointer history revision {revision} does not match its digest"
            )
        if before is not None and (before[0] + 1 != revision or before[1] != previous):
            found.add(
                f"namespace {ns!r}: the pointer history chain breaks before revision {revision}"
            )
        for named in (current, fallback):
            other = namespace_of.get(named) if named is not None else None
            if other is not None and other != ns:
                found.add(
                    f"namespace {ns!r}: pointer history revision {revision} names checkpoint "
                    f"{_short(named)} of namespace {other!r}"
                )
        before = (revision, digest)
    if before != (ptr.revision, ptr.digest):
        found.add(f"namespace {ns!r}: CURRENT is not the last entry of its pointer history")


def validate(
    src: Connection,
    source: str,
    heads: Iterable[PointerRow],
    rows: Iterable[CheckpointRow],
) -> None:
    """Refuse (InvalidExportError) a source whose selected pointers, their histories, or
    the checkpoint rows about to be copied are not sound. Call inside ``src``'s read
    transaction, before anything is written to the destination."""
    found = _Findings(source)
    rows = list(rows)
    namespace_of: dict[str, str] = {}
    for r in checkpoint_scans.ids_with_namespaces(src):
        if isinstance(r[0], str) and isinstance(r[1], str):
            namespace_of[r[0]] = r[1]
    generation_of = {r.id: (r.namespace, r.generation) for r in rows if isinstance(r.id, str)}
    for row in rows:
        try:
            check_types(astuple(row), CHECKPOINT_TYPES, "checkpoint row")
        except errors.CorruptionError:
            found.add(f"checkpoint {_short(row.id)}: a column holds a value of the wrong type")
            continue
        try:
            validation.namespace(row.namespace)
        except errors.InvalidInputError as exc:
            found.add(f"checkpoint {_short(row.id)}: {exc.message}")
        try:
            validation.code_revision(row.code_revision)
            if row.label is not None:
                validation.checkpoint_label(row.label)
        except errors.InvalidInputError as exc:
            found.add(f"checkpoint {_short(row.id)}: {exc.message}")
        try:
            entries = checkpoints.entries_of(src, row.seq)
        except errors.CorruptionError as exc:
            found.add(f"checkpoint {_short(row.id)}: {exc.message}")
            continue
        _check_row(row, entries, found)
        parent = generation_of.get(row.parent_id or "")
        if parent is not None and parent != (row.namespace, row.generation - 1):
            found.add(
                f"checkpoint {_short(row.id)} ({row.namespace!r}): its parent is not the "
                "previous generation of the same namespace"
            )
    for ptr in heads:
        try:
            pointers.check_pointer(ptr)
        except errors.CorruptionError:
            found.add(f"namespace {ptr.namespace!r}: CURRENT does not match its digest")
        for what, named in (("current", ptr.current_id), ("fallback", ptr.fallback_id)):
            if named is None:
                continue
            owner = namespace_of.get(named)
            if owner != ptr.namespace:
                found.add(
                    f"namespace {ptr.namespace!r}: its {what} checkpoint {_short(named)} "
                    f"belongs to namespace {owner!r}"
                )
        _check_history(src, ptr, namespace_of, found)
    found.raise_if_any()
