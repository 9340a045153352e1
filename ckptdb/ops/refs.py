"""Naming checkpoints: CURRENT, ids, references (``NS@current``, ``NS~N``, prefixes) and
the verified lineage walk."""

from __future__ import annotations

from .. import errors, models, validation
from ..connection.engine import EngineConnection
from ..references import format_reference, parse_reference
from ..store import checkpoints, pointers
from ..store.rows import CheckpointRow, EntryRow, PointerRow
from .checkpoint import Checkpoint
from .unit import Unit, holds, reads


def checkpoint(tx: Unit, row: CheckpointRow) -> Checkpoint:
    """A checkpoint handle over a row (its manifest checked against its id).

    Manifests are immutable, so one that verified is remembered per handle: the next
    lookup of the same row (read again, and equal) skips reading and hashing its entries.
    Entry bytes are verified on every read regardless."""
    entries = tx.handle.verified_manifest(row)
    if entries is not None:
        return Checkpoint(tx.handle, row, entries, verified=True)
    entries = checkpoints.entries_of(tx.conn, row.seq)
    cp = Checkpoint(tx.handle, row, entries)
    tx.handle.remember_manifest(row, entries)
    return cp


@holds()
def require_row(tx: Unit, checkpoint_id: str) -> CheckpointRow:
    """The row of a checkpoint by full id, or CheckpointNotFoundError."""
    return checkpoints.require_checkpoint(tx.conn, checkpoint_id)


@reads
def get(tx: Unit, checkpoint_id: str) -> Checkpoint:
    """Any stored checkpoint by full id (its manifest checked against its id)."""
    return checkpoint(tx, checkpoints.require_checkpoint(tx.conn, checkpoint_id))


@reads
def get_labelled(tx: Unit, namespace: str, label: str) -> Checkpoint | None:
    """The checkpoint of ``namespace`` with this label (its manifest checked), or None."""
    row = checkpoints.checkpoint_by_label(tx.conn, namespace, label)
    return None if row is None else checkpoint(tx, row)


@reads
def get_many(
    tx: Unit, checkpoint_ids: list[str], prefetch: tuple[str, ...] = ()
) -> dict[str, Checkpoint]:
    """The stored checkpoints among these full ids, by id (the missing ones left out), each
    manifest checked against its id: one statement for the rows with their entries,
    whatever their number (and one more for rows stored before format 3, not moved yet).
    ``prefetch``: entry names whose bytes, when stored inline, come in the same statement,
    are verified now and held by the checkpoint (see :meth:`Checkpoint.read`)."""
    found: dict[str, Checkpoint] = {}
    manifests = checkpoints.manifests_by_ids(tx.conn, checkpoint_ids, prefetch)
    for cid, (row, entries, stored) in manifests.items():
        verified = tx.handle.verified_manifest(row)
        manifest = entries if verified is None else verified
        # Checked against the digests of ``manifest``, which Checkpoint() proves bound to
        # the id (or raises, and the bytes go with it).
        held = _verified_held(tx, manifest, stored) if stored else None
        found[cid] = Checkpoint(tx.handle, row, manifest, verified=verified is not None, held=held)
        if verified is None:
            tx.handle.remember_manifest(row, entries)
    return {c: found[c] for c in checkpoint_ids if c in found}


def _verified_held(
    tx: Unit, entries: list[EntryRow], stored: dict[str, tuple[object, object, object]]
) -> dict[str, bytes]:
    """The prefetched entries whose stored bytes verify against the manifest's digests.
    One that does not, lies in another key scope than its manifest says, or whose key is
    not at hand is left out: a read of it then goes the one-blob way, which raises the
    precise error."""
    by_name = {e.name: e for e in entries}
    held: dict[str, bytes] = {}
    for name, (data, codec_id, scope_id) in stored.items():
        entry = by_name.get(name)
        if entry is None or scope_id != entry.scope_id:
            continue
        try:
            raw = tx.blobs.inline_bytes(data, codec_id, scope_id, entry.digest, entry.size)
        except (
            errors.KeyUnavailableError,
            errors.KeyShreddedError,
            errors.KeyMismatchError,
            errors.CorruptionError,
        ):
            continue  # deferred, not swallowed: the read raises it (see the docstring)
        if raw is not None:
            held[name] = raw
    return held


@holds()
def existing(tx: Unit, checkpoint_ids: list[str]) -> set[str]:
    """Which of these full checkpoint ids are stored."""
    return checkpoints.existing_ids(tx.conn, checkpoint_ids)


@holds()
def pointer(tx: Unit, namespace: str) -> PointerRow | None:
    """The CURRENT pointer row of a namespace, or None."""
    return pointers.pointer(tx.conn, namespace)


@reads
def current(tx: Unit, namespace: str) -> Checkpoint | None:
    """The CURRENT checkpoint of a namespace, or None (inside a read transaction)."""
    conn = tx.conn
    ptr = pointers.pointer(conn, namespace)
    if ptr is None:
        return None
    pointers.check_pointer(ptr)
    row = checkpoints.checkpoint_by_id(conn, ptr.current_id)
    if row is None:  # not stored (deleted outside ckptdb), or the index on ids is damaged
        raise errors.CorruptionError(
            f"CURRENT of {namespace!r} names {ptr.current_id[:12]}, which cannot be found by "
            "its id (deleted outside ckptdb, or a damaged index). Run `ckptdb verify`; a "
            "load with fallback finds it or an intact ancestor when the records prove "
            "which, else `ckptdb log --all` and `ckptdb set-current` to the one to resume "
            "from.",
            namespace=namespace,
            checkpoint_id=ptr.current_id,
            reason="current_missing",
        )
    return checkpoint(tx, row)


@reads
def verified_lineage(tx: Unit, namespace: str, limit: int | None) -> list[Checkpoint]:
    """CURRENT and its stored ancestors, each manifest checked against its id, so every
    parent link followed is one an id vouches for. Damage anywhere along the way raises
    CorruptionError rather than ending the lineage early or leaving the namespace."""
    conn = tx.conn
    ptr = pointers.pointer(conn, namespace)
    if ptr is None:
        return []
    pointers.check_pointer(ptr)
    out: list[Checkpoint] = []
    for row in checkpoints.lineage(conn, ptr.current_id, limit):
        cp = checkpoint(tx, row)
        checkpoints.check_namespace(namespace, cp.namespace, cp.id)
        out.append(cp)
    if not out:
        raise errors.CorruptionError(
            f"CURRENT of {namespace!r} names {ptr.current_id[:12]}, which cannot be read; run "
            "`ckptdb verify`",
            checkpoint_id=ptr.current_id,
            reason="current_missing",
        )
    last = out[-1].parent_id
    cut_short = limit is None or len(out) < limit
    # Stored, yet not reached: the walk stopped at a damaged row.
    if cut_short and last is not None and checkpoints.checkpoint_by_id(conn, last) is not None:
        raise errors.CorruptionError(
            f"the lineage of {namespace!r} stops at {out[-1].id[:12]} although its parent "
            f"{last[:12]} is stored; the parent's row is damaged. Run `ckptdb verify`.",
            checkpoint_id=last,
            reason="lineage_broken",
        )
    return out


@reads
def resolve(tx: Unit, ref: str) -> str:
    """See :meth:`ckptdb.Database.resolve` and :mod:`ckptdb.references` (inside a read
    transaction)."""
    conn = tx.conn
    parsed = parse_reference(ref)
    if parsed.id_prefix is not None:
        return _resolve_id(conn, ref, parsed.id_prefix)
    assert parsed.namespace is not None
    ns = parsed.namespace
    ptr = pointers.pointer(conn, ns)
    if ptr is None:
        raise errors.NamespaceNotFoundError(
            f"{ref[:80]!r} names namespace {ns!r}, which has no CURRENT"
        )
    pointers.check_pointer(ptr)  # both ids are sealed by the pointer digest
    if parsed.anchor == "current":
        if parsed.back == 0:
            return ptr.current_id
        walk = [cp.id for cp in verified_lineage(tx, ns, parsed.back + 1)]
    else:
        if ptr.fallback_id is None:
            raise errors.NotFoundError(f"namespace {ns!r} has no fallback yet")
        if parsed.back == 0:
            return ptr.fallback_id
        walk = [
            checkpoint(tx, row).id
            for row in checkpoints.lineage(conn, ptr.fallback_id, parsed.back + 1)
        ]
    if len(walk) <= parsed.back:
        raise errors.CheckpointNotFoundError(
            f"{ref}: the stored lineage of {ns!r} from its {parsed.anchor} is only {len(walk)} deep"
        )
    return walk[parsed.back]


def _resolve_id(conn: EngineConnection, ref: str, lowered: str) -> str:
    if validation.is_full_id(lowered):
        checkpoints.require_checkpoint(conn, lowered)
        return lowered
    found = checkpoints.checkpoint_ids_by_prefix(conn, lowered)
    if not found:
        hint = ""
        if pointers.pointer(conn, ref) is not None:
            hint = f"; for the namespace of that name write {format_reference(ref)!r}"
        raise errors.CheckpointNotFoundError(f"no checkpoint id starts with {ref!r}{hint}")
    if len(found) > 1:
        raise errors.InvalidReferenceError(
            f"{ref!r} matches several checkpoints; give more characters"
        )
    return found[0]


@reads
def namespaces(tx: Unit) -> list[models.NamespaceInfo]:
    """Every namespace that has a CURRENT pointer, by name (inside a read transaction)."""
    counts = checkpoints.checkpoint_counts(tx.conn)
    return [
        models.NamespaceInfo(
            name=p.namespace,
            current_id=p.current_id,
            fallback_id=p.fallback_id,
            generation=p.current_summary().generation,
            revision=p.revision,
            checkpoint_count=counts.get(p.namespace_id, 0),
            updated_at=models.from_ms(p.updated_at_ms),
        )
        for p in pointers.all_pointers(tx.conn)
    ]


@holds()
def history(tx: Unit, namespace: str, limit: int | None) -> list[models.PointerMove]:
    """Every move of a namespace's CURRENT pointer, newest first."""
    return [
        models.PointerMove(
            namespace=h.namespace,
            revision=h.revision,
            current_id=h.current_id,
            fallback_id=h.fallback_id,
            previous_digest=h.previous_digest,
            digest=h.digest,
            reason=h.reason,
            at=models.from_ms(h.at_ms),
        )
        for h in pointers.history(tx.conn, namespace, limit)
    ]


def pointer_model(ptr: PointerRow) -> models.Pointer:
    """The public model of a pointer row."""
    return models.Pointer(
        namespace=ptr.namespace,
        current_id=ptr.current_id,
        fallback_id=ptr.fallback_id,
        revision=ptr.revision,
        digest=ptr.digest,
        previous_digest=ptr.previous_digest,
        updated_at=models.from_ms(ptr.updated_at_ms),
    )
