"""Loading a namespace with verification and explicit, receipted fallback, and the checks
a reader states about what it may be handed (:class:`LoadChecks`).

Order of the checks on each candidate of the walk, cheapest and most decisive first: the
manifest hashes to the id (so its metadata, sizes and pins can be trusted); ``expect`` and
``accept_schemas`` (from the manifest alone: a checkpoint of another lineage, or pinned to a
schema too new, is *skipped* with fallback, like a damaged one); ``max_bytes`` (from the
manifest alone, before any blob byte is read: an oversized checkpoint is *refused*, even with
fallback -- the bound guards the caller's memory, and an older state is not a smaller copy
of the newest); then every byte is verified and the host validator runs.

Past a checkpoint whose manifest is damaged, its parent link cannot be trusted. The walk
then takes what CURRENT was before that checkpoint became CURRENT (the pointer, then the
digest-sealed pointer history), which is its parent only for a commit on CURRENT -- not
after a branch (a commit on another base) or a rollback. So that candidate is accepted
only when it is proven the parent (the damaged checkpoint's id recomputes with it as parent,
one generation later) or has the generation the walk predicts (from a trusted link, else
the damaged row's own generation); otherwise the load stops with ``lineage_unknown``
rather than return a checkpoint of another lineage. The same proof is tried on the stored
link first. What is not a proof -- a stored link to an intact checkpoint one generation
older, a record at the predicted generation -- can be wrong after branch commits
(docs/reliability.md, Known limits).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from .. import canonical, errors, load_checks, models, validation
from ..connection.engine import EngineConnection
from ..store import checkpoints, pointers
from ..store.rows import CheckpointRow, PointerRow
from . import receipts as receipt_op
from .checkpoint import Checkpoint
from .handle import Handle
from .unit import Unit, holds

Validator = Callable[[Checkpoint], object]
Disposition = Literal["exact", "degraded_fallback"]


@dataclass(frozen=True)
class LoadResult:
    """What :meth:`Database.load` returns.

    ``revision_mismatch`` is set when the checkpoint returned was written by another code
    revision than the loading handle's (both known, see ``ckptdb.open(code_revision=...)``);
    the load succeeded all the same, and a RuntimeWarning said so.
    """

    checkpoint: Checkpoint
    disposition: Disposition
    receipt: models.FallbackReceipt | None
    revision_mismatch: models.RevisionMismatch | None = None

    @property
    def degraded(self) -> bool:
        """True when an older checkpoint than CURRENT was returned."""
        return self.disposition == "degraded_fallback"


@dataclass(frozen=True)
class LoadChecks:
    """What a reader requires of the checkpoint it is handed, already validated by the
    front object (:func:`ckptdb.load_checks.expect`, ``accept_schemas``, ``max_bytes``,
    ``code_revision``)."""

    #: metadata field -> canonical JSON text of the value it must have
    expect: Mapping[str, str] = field(default_factory=dict)
    #: schema name -> newest version the reader reads (pins ``NAME/vN``)
    accept_schemas: Mapping[str, int] = field(default_factory=dict)
    #: most bytes (sum of entry sizes) the load may return; None for no bound
    max_bytes: int | None = None
    #: the reading handle's code revision (None: unknown, nothing is compared)
    code_revision: str | None = None


NO_CHECKS = LoadChecks()


def lineage_mismatches(cp: Checkpoint, expect: Mapping[str, str]) -> list[errors.FieldMismatch]:
    """The fields of ``expect`` whose value in ``cp``'s metadata differs (compared as
    canonical JSON text) or is missing, sorted by field."""
    if not expect:
        return []
    metadata = cp.metadata
    out: list[errors.FieldMismatch] = []
    for name in sorted(expect):
        wanted = expect[name]
        if name not in metadata:
            out.append(errors.FieldMismatch(name, wanted, None))
            continue
        found = canonical.dumps(metadata[name])
        if found != wanted:
            out.append(errors.FieldMismatch(name, wanted, found))
    return out


def check_lineage(cp: Checkpoint, expect: Mapping[str, str]) -> None:
    """Raise LineageMismatchError unless ``cp``'s metadata holds every expected value."""
    mismatches = lineage_mismatches(cp, expect)
    if not mismatches:
        return
    listed = "; ".join(m.describe() for m in mismatches[:10])
    more = f" (and {len(mismatches) - 10} more fields)" if len(mismatches) > 10 else ""
    raise errors.LineageMismatchError(
        f"checkpoint {cp.id[:12]} of namespace {cp.namespace!r} is not of the lineage you "
        f"expect: {validation.safe_text(listed)}{more}. It was written for another run, plan "
        "or state than yours: load the checkpoint of your own lineage, pass fallback=True "
        "to take the newest ancestor that matches, or start a new lineage.",
        checkpoint_id=cp.id,
        mismatches=mismatches,
    )


def check_schemas(cp: Checkpoint, accept: Mapping[str, int]) -> None:
    """Raise SchemaPinTooNewError for the first entry (by name) pinned to ``NAME/vN`` with
    ``N`` above the version ``accept`` gives for ``NAME``. Other pins, and names ``accept``
    does not mention, pass."""
    if not accept:
        return
    for entry in cp.entries.values():
        if entry.schema_pin is None:
            continue
        parsed = load_checks.parse_schema_pin(entry.schema_pin)
        if parsed is None or parsed[0] not in accept:
            continue
        schema, version = parsed
        accepted = accept[schema]
        if version <= accepted:
            continue
        raise errors.SchemaPinTooNewError(
            f"checkpoint {cp.id[:12]}: entry {entry.name!r} is pinned to "
            f"{validation.safe_text(entry.schema_pin, 300)!r}, version {version} of schema "
            f"{validation.safe_text(schema, 300)!r}, newer than version {accepted}, the newest "
            "you accept: code that reads an older version must not guess at a newer one. Load "
            "it with code that reads it (and a higher accept_schemas), or pass fallback=True "
            "to take the newest ancestor written with a version you read.",
            checkpoint_id=cp.id,
            entry=entry.name,
            pin=entry.schema_pin,
            schema=schema,
            version=version,
            accepted=accepted,
        )


def check_size(
    cp: Checkpoint, max_bytes: int | None, passed: list[models.Rejection] | None = None
) -> None:
    """Raise LoadTooLargeError when ``cp`` holds more than ``max_bytes`` (its total size,
    checked against the id with the manifest: no blob byte is read). ``passed``: what a
    fallback walk rejected before reaching it, named in the error."""
    if max_bytes is None or cp.total_size <= max_bytes:
        return
    walked = ""
    if passed:
        walked = (
            f" It was reached by falling back past {len(passed)} newer checkpoint(s) ("
            + ", ".join(f"{r.checkpoint_id[:12]}: {r.code}" for r in passed[:10])
            + "); fallback does not skip a checkpoint for its size."
        )
    raise errors.LoadTooLargeError(
        f"checkpoint {cp.id[:12]} of namespace {cp.namespace!r} holds {cp.total_size} bytes, "
        f"more than max_bytes={max_bytes}; none of its bytes was read.{walked} Raise "
        "max_bytes, or read only the entries you need (db.get(id).open(name) streams one).",
        checkpoint_id=cp.id,
        size=cp.total_size,
        max_bytes=max_bytes,
        rejected=[r.checkpoint_id for r in passed or []],
    )


def check(cp: Checkpoint, checks: LoadChecks) -> None:
    """Every check of ``checks`` on one checkpoint (lineage, schemas, size), from its
    manifest only; raises the first that fails."""
    check_lineage(cp, checks.expect)
    check_schemas(cp, checks.accept_schemas)
    check_size(cp, checks.max_bytes)


def check_and_note(cp: Checkpoint, checks: LoadChecks) -> models.RevisionMismatch | None:
    """For a path that hands out one checkpoint without a walk (checkout without
    fallback): :func:`check`, then the revision note (warned) if any."""
    check(cp, checks)
    note = revision_note(cp, checks.code_revision)
    if note is not None:
        warn_revision(note)
    return note


def revision_note(cp: Checkpoint, reading: str | None) -> models.RevisionMismatch | None:
    """The note for a checkpoint written at another code revision than ``reading``, when
    both are known and differ; else None."""
    written = cp.code_revision
    if written is None or reading is None or written == reading:
        return None
    return models.RevisionMismatch(checkpoint_id=cp.id, written_by=written, reading=reading)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_revision(note: models.RevisionMismatch) -> None:
    """Emit the RuntimeWarning of a revision mismatch, attributed to the first caller
    outside ckptdb (whichever public method led here)."""
    level = 1
    frame = sys._getframe(0)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    warnings.warn(
        f"checkpoint {note.checkpoint_id[:12]} was written at code revision "
        f"{note.written_by!r}, and this program runs {note.reading!r}: its state may be "
        "stale after the code change. It was loaded all the same; check it, or commit a "
        "fresh state.",
        RuntimeWarning,
        stacklevel=level,
    )


def _row(conn: EngineConnection, checkpoint_id: str) -> CheckpointRow | None:
    """The stored row of a checkpoint, or None when no row has that id. When the lookup
    through the index on ids fails or finds nothing (collected by GC -- or hidden by a
    damaged index), the table itself is searched."""
    try:
        with conn.read_transaction():
            row = checkpoints.checkpoint_by_id(conn, checkpoint_id)
    except errors.CorruptionError:
        row = None  # a damaged index page; the table may still hold the row intact
    if row is None:
        with conn.read_transaction():
            row = checkpoints.checkpoint_by_id(conn, checkpoint_id, scan=True)
    return row


def _real_row(conn: EngineConnection, row: CheckpointRow) -> CheckpointRow | None:
    """After ``row``'s manifest failed: the row the table holds for its id, when the index
    on ids led to another one (SQLite then reads the id itself from the index, so the row
    carries the asked id on another checkpoint's columns); None when ``row`` is the table's."""
    with conn.read_transaction():
        real = checkpoints.checkpoint_by_id(conn, row.id, confirm=True)
    return real if real is not None and real.seq != row.seq else None


def _manifest(
    handle: Handle, conn: EngineConnection, namespace: str, row: CheckpointRow
) -> Checkpoint:
    """The checkpoint with its manifest checked against its id. Raises CorruptionError for
    a damaged manifest, and for a checkpoint of another namespace (reached only through
    damage)."""
    with conn.read_transaction():
        cp = Checkpoint(handle, row, checkpoints.entries_of(conn, row.seq))
    checkpoints.check_namespace(namespace, cp.namespace, cp.id)
    return cp


@dataclass(frozen=True)
class _Next:
    """The next candidate of the walk: its id, the generation it must have (None: not
    known), and -- when it comes from a pointer record rather than a trusted parent link --
    the damaged checkpoint it must be the parent of (``child``: its row, if readable)."""

    checkpoint_id: str | None
    generation: int | None = None
    from_records: bool = False
    child: CheckpointRow | None = None


def _proves_parent(conn: EngineConnection, child: CheckpointRow | None, cp: Checkpoint) -> bool:
    """Whether the damaged checkpoint ``child`` is proven to have ``cp`` as its parent: its
    id recomputes with ``cp`` as parent, one generation later (the id commits to both, so
    this holds when the damage is confined to those two fields)."""
    if child is None:
        return False
    claimed = dataclasses.replace(child, parent_id=cp.id, generation=cp.generation + 1)
    try:
        with conn.read_transaction():
            entries = checkpoints.entries_of(conn, child.seq)
    except errors.CorruptionError:
        return False  # its entries are damaged too: nothing to recompute from
    return checkpoints.recomputed_id(claimed, entries) == child.id


def _is_parent(conn: EngineConnection, step: _Next, cp: Checkpoint) -> bool:
    """Whether ``cp``, reached through a pointer record, is the parent of the damaged
    checkpoint before it: proven (:func:`_proves_parent`), else when ``cp`` has the
    generation the walk predicted (not a proof: see the module docstring)."""
    if _proves_parent(conn, step.child, cp):
        return True
    return step.generation is not None and cp.generation == step.generation


def _intact(
    handle: Handle, conn: EngineConnection, namespace: str, checkpoint_id: str | None
) -> Checkpoint | None:
    """The checkpoint with its manifest checked, or None when it is not stored or damaged."""
    if checkpoint_id is None:
        return None
    try:
        row = _row(conn, checkpoint_id)
        if row is None:
            return None
        try:
            return _manifest(handle, conn, namespace, row)
        except errors.CorruptionError:
            real = _real_row(conn, row)
            if real is None:
                raise
            return _manifest(handle, conn, namespace, real)
    except errors.CorruptionError:
        return None  # not usable as a parent; the caller tries the next source


def _parent_of_damaged(
    handle: Handle,
    conn: EngineConnection,
    ptr: PointerRow,
    checkpoint_id: str,
    row: CheckpointRow | None,
    generation: int | None,
) -> _Next:
    """The next candidate after a checkpoint whose manifest (and so its parent link) cannot
    be trusted; ``generation``: what a trusted link said this checkpoint's generation is.

    Two sources name a parent: the stored link, and what CURRENT named before this
    checkpoint became CURRENT, from records whose digest proves them intact (the pointer,
    then the pointer history) -- its parent for an ordinary commit, but not for a commit on
    another base (a branch) nor after a rollback. First, either is taken when it is proven
    the parent (:func:`_proves_parent`). Then the stored link, when the parent it names is
    an intact checkpoint of the namespace exactly one generation older (damage would have
    to forge both fields to pass). Then the record, which the caller accepts only with the
    generation one below this checkpoint's (``_Next.generation``; None: not known).
    """
    if generation is not None:
        known: int | None = generation
    elif row is not None:
        known = row.generation
    elif checkpoint_id == ptr.current_id:
        known = ptr.current_generation
    else:
        known = None
    if checkpoint_id == ptr.current_id:
        record = ptr.fallback_id  # covered by the pointer digest, checked by the caller
    else:
        try:
            moves = pointers.moves_to(conn, ptr.namespace_id, checkpoint_id)
        except errors.CorruptionError:
            moves = []  # a damaged history row: no trusted record
        record = next((m.fallback_id for m in moves if m.intact()), None)
    stored = row.parent_id if row is not None else None
    candidates = {c: _intact(handle, conn, ptr.namespace, c) for c in (record, stored) if c}
    for cp in candidates.values():
        if cp is not None and _proves_parent(conn, row, cp):
            return _Next(cp.id, cp.generation)
    linked = candidates.get(stored) if stored is not None else None
    if (
        row is not None
        and linked is not None
        and known == row.generation
        and linked.generation == row.generation - 1
    ):
        return _Next(linked.id, linked.generation)
    expected = None if known is None else known - 1
    return _Next(record, expected, from_records=True, child=row)


def _validate(cp: Checkpoint, validator: Validator | None) -> None:
    if validator is None:
        return
    try:
        verdict = validator(cp)
    except errors.CkptdbError:
        raise
    except Exception as exc:
        raise errors.ValidatorRejectedError(
            f"validator rejected checkpoint {cp.id[:12]}: {type(exc).__name__}: "
            + validation.safe_text(str(exc)),
            checkpoint_id=cp.id,
        ) from exc
    if verdict is False:
        raise errors.ValidatorRejectedError(
            f"validator rejected checkpoint {cp.id[:12]}", checkpoint_id=cp.id
        )


def _rejection(checkpoint_id: str, exc: errors.CkptdbError) -> models.Rejection:
    reason = exc.details.get("reason")
    code = exc.code if reason is None else f"{exc.code}:{reason}"
    entry = exc.details.get("entry")
    fields = exc.fields if isinstance(exc, errors.LineageMismatchError) else None
    return models.Rejection(
        checkpoint_id=checkpoint_id,
        code=code,
        detail=validation.safe_text(exc.message),
        entry=entry if isinstance(entry, str) else None,
        fields=fields,
    )


@holds()
def load_with_fallback(
    tx: Unit,
    namespace: str,
    *,
    fallback: bool,
    validator: Validator | None,
    start_id: str | None = None,
    checks: LoadChecks = NO_CHECKS,
) -> LoadResult:
    """See :meth:`ckptdb.Database.load` (``start_id``: walk from that checkpoint of the
    namespace instead of from CURRENT; ``checks``: what the reader requires, see the
    module docstring for the order and what fallback skips)."""
    conn = tx.conn
    ptr = pointers.pointer(conn, namespace)
    if ptr is None:
        raise errors.NamespaceNotFoundError(
            f"namespace {namespace!r} has no checkpoint yet; commit one first",
            namespace=namespace,
        )
    pointers.check_pointer(ptr)  # a damaged pointer fails closed: we do not guess what is current
    requested = start_id or ptr.current_id
    rejected: list[models.Rejection] = []
    step = _Next(requested)
    seen: set[str] = set()
    selected: Checkpoint | None = None
    unfollowable: str | None = None  # the damaged checkpoint past which no link is trusted
    # Parent links are followed only out of a manifest that hashed to its id; past a
    # damaged manifest the walk continues from what CURRENT named before it (digest-sealed
    # pointer records) when that checkpoint has the generation its child predicts, so
    # damage can neither skip an intact ancestor, nor leave the namespace, nor turn onto
    # another branch.
    while (next_id := step.checkpoint_id) is not None and next_id not in seen:
        seen.add(next_id)
        row: CheckpointRow | None = None
        cp: Checkpoint | None = None
        try:
            row = _row(conn, next_id)
            if row is None:
                if next_id != ptr.current_id:
                    break  # the stored lineage ends here (older ancestors were collected)
                raise errors.CorruptionError(
                    f"CURRENT of {namespace!r} names {next_id[:12]}, which cannot be read",
                    checkpoint_id=next_id,
                    reason="current_missing",
                )
            try:
                cp = _manifest(tx.handle, conn, namespace, row)
            except errors.CorruptionError:
                real = _real_row(conn, row)
                if real is None:
                    raise
                row = real  # a damaged index entry led elsewhere; the table has the row
                cp = _manifest(tx.handle, conn, namespace, row)
            if step.from_records and not _is_parent(conn, step, cp):
                # Not provably the parent of the damaged checkpoint before it (a branch, a
                # rollback, or a generation nobody vouches for): stop rather than guess.
                unfollowable = rejected[-1].checkpoint_id if rejected else next_id
                break
            check_lineage(cp, checks.expect)
            check_schemas(cp, checks.accept_schemas)
            check_size(cp, checks.max_bytes, rejected)  # refused, never skipped
            cp.verify()
            _validate(cp, validator)
        except (
            errors.CorruptionError,
            errors.ValidatorRejectedError,
            errors.CheckpointNotFoundError,
            errors.LineageMismatchError,
            errors.SchemaPinTooNewError,
        ) as exc:
            if not fallback:
                raise
            rejected.append(_rejection(next_id, exc))
            if cp is None and step.from_records:
                # An unproven candidate that is itself damaged: nothing it links to is
                # known to be on CURRENT's lineage -- only a prediction can carry on.
                if step.generation is None:
                    unfollowable = next_id
                    break
                after = _parent_of_damaged(tx.handle, conn, ptr, next_id, row, step.generation)
                step = _Next(after.checkpoint_id, step.generation - 1, from_records=True)
                continue
            step = (
                _Next(cp.parent_id, cp.generation - 1)
                if cp is not None
                else _parent_of_damaged(tx.handle, conn, ptr, next_id, row, step.generation)
            )
            continue
        selected = cp
        break

    note = revision_note(selected, checks.code_revision) if selected is not None else None
    if selected is not None and not rejected:
        return _result(LoadResult(selected, "exact", None, note))

    now_ms = tx.now_ms
    disposition = "degraded_fallback" if selected is not None else "none_usable"
    body = {
        "disposition": disposition,
        "pointer_digest": ptr.digest,
        "rejected": [r.model_dump() for r in rejected],
        "requested_id": requested,
        "selected_id": selected.id if selected is not None else None,
    }
    receipt_id = receipt_op.record(
        tx,
        "fallback",
        body,
        namespace=namespace,
        checkpoint_id=selected.id if selected is not None else requested,
    )
    receipt = models.FallbackReceipt(
        receipt_id=receipt_id,
        namespace=namespace,
        requested_id=requested,
        selected_id=selected.id if selected is not None else None,
        disposition=disposition,  # type: ignore[arg-type]
        rejected=rejected,
        pointer_digest=ptr.digest,
        at=models.from_ms(now_ms),
    )
    if unfollowable is not None:
        raise errors.CorruptionError(
            f"namespace {namespace!r}: past the damaged checkpoint {unfollowable[:12]} no "
            "intact record says which checkpoint is its parent (the pointer history names "
            "the previous CURRENT, which is not its parent after a branch or a rollback), so "
            f"fallback does not guess. Nothing was returned; receipt {receipt_id} records "
            "what was rejected. Run `ckptdb log --all` and `ckptdb set-current` to the "
            "checkpoint to resume from, or restore from a backup or export.",
            namespace=namespace,
            checkpoint_id=unfollowable,
            receipt_id=receipt_id,
            reason="lineage_unknown",
        )
    if selected is None:
        summary = "; ".join(f"{r.checkpoint_id[:12]}: {r.code}" for r in rejected)
        refused = any(r.code in _CHECK_CODES for r in rejected)
        failed = "failed verification" + (" or the checks you gave" if refused else "")
        advice = (
            "Check what you pass as expect / accept_schemas, or restore from a backup or export."
            if refused
            else "Restore from a backup or export."
        )
        raise errors.NoUsableCheckpointError(
            f"namespace {namespace!r}: no usable checkpoint — {requested[:12]} and every stored "
            f"ancestor {failed} ({summary}). Nothing was returned; receipt "
            f"{receipt_id} records the details. {advice}",
            namespace=namespace,
            receipt_id=receipt_id,
            rejected=[r.checkpoint_id for r in rejected],
        )
    return _result(LoadResult(selected, "degraded_fallback", receipt, note))


def _result(result: LoadResult) -> LoadResult:
    """``result``, after the warning of its revision mismatch, if any (last, so a warning
    filter that raises cannot leave a fallback unrecorded)."""
    if result.revision_mismatch is not None:
        warn_revision(result.revision_mismatch)
    return result


#: Rejection codes of the reader's checks (the checkpoint is intact, not what was asked).
_CHECK_CODES = frozenset({errors.LineageMismatchError.code, errors.SchemaPinTooNewError.code})


@holds()
def load_checkpoint(
    tx: Unit,
    checkpoint_id: str,
    *,
    fallback: bool,
    validator: Validator | None,
    checks: LoadChecks = NO_CHECKS,
) -> LoadResult:
    """See :meth:`ckptdb.Database.load_checkpoint`: :func:`load_with_fallback` from a given
    checkpoint of its namespace."""
    row = checkpoints.require_checkpoint(tx.conn, checkpoint_id)
    return load_with_fallback(
        tx, row.namespace, fallback=fallback, validator=validator, start_id=row.id, checks=checks
    )
