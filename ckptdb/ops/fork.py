"""Copy checkpoints into another namespace by reference, many in one transaction.

A fork (LangGraph's ``copy_thread``, a run cloned to try another branch) used to be one
commit per checkpoint: each with its own manifest read, hashing of references and fsync --
tens of seconds for a long history. Here every source manifest is read and verified in a
few set-based statements, each copy's manifest is rebuilt (the namespace, and so the id,
change; the entries keep naming the same blobs, so no byte is read, hashed or written
again), and all copies plus one pointer move land in one write transaction and one fsync.

Copies by reference stay inside one key scope: a blob sealed for the source's scope could
not be opened through the target's. Across scopes the caller reads the entries and commits
them (what :meth:`ckptdb.Database.commit` does with bytes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import canonical, errors, models, validation
from ..store import checkpoints, pointers
from ..store.crypto import Scope, is_sealed_metadata
from ..store.rows import CheckpointRow
from ..types import _Unset
from . import quota
from .checkpoint import check_scope
from .unit import Unit, writes


def _order(
    sources: dict[str, CheckpointRow], parents: Mapping[str, str | None], wanted: list[str]
) -> list[str]:
    """The source ids with every parent that is itself copied before its child (the
    copy's id depends on its parent's); InvalidInputError on a cycle of overrides."""
    done: set[str] = set()
    out: list[str] = []
    for start in wanted:
        path: list[str] = []
        on_path: set[str] = set()
        node: str | None = start
        while node is not None and node in sources and node not in done:
            if node in on_path:
                raise errors.InvalidInputError(
                    f"parents makes a cycle through {node[:12]}; a copy cannot be its own ancestor"
                )
            on_path.add(node)
            path.append(node)
            node = parents.get(node, sources[node].parent_id)
        for item in reversed(path):
            done.add(item)
            out.append(item)
    return out


def _metadata(
    row: CheckpointRow, scope: Scope, update: Mapping[str, Any] | None, max_bytes: int
) -> str:
    """The copy's stored metadata: the source's text (sealed metadata stays valid inside
    its scope), or the source's opened, updated and sealed again."""
    if not update:
        return row.metadata_json
    value = validation.metadata_from_json(row.metadata_json, row.id)
    if is_sealed_metadata(value):
        value = scope.open_metadata(value)
    value.update(update)  # both parts were validated: the source's by its id, the update
    text = canonical.dumps(value)
    validation.metadata_size(text, max_bytes)
    return scope.seal_metadata(text)


@writes
def copy_checkpoints(
    tx: Unit,
    source_ids: Sequence[str],
    namespace: str,
    *,
    parents: Mapping[str, str | None],
    metadata_update: Mapping[str, Any] | None,
    expect_current: str | _Unset | None,
    reason: str,
    max_metadata_bytes: int,
    code_revision: str | None,
) -> models.CopyReport:
    """Copy ``source_ids`` into ``namespace`` (inside an open write transaction) and move
    its CURRENT to the copy of the last source; see :meth:`ckptdb.Database.copy_checkpoints`."""
    conn = tx.conn
    pointers.lock_namespace(conn, namespace)
    now_ms = tx.now_ms
    wanted = list(dict.fromkeys(source_ids))
    sources = checkpoints.checkpoints_by_ids(conn, wanted)
    for cid in wanted:
        if cid not in sources:  # not stored, or hidden by a damaged index: decided by a scan
            sources[cid] = checkpoints.require_checkpoint(conn, cid)
    entries = checkpoints.entries_of_many(conn, [r.seq for r in sources.values()])
    scope = tx.keyring.scope_for_namespace(conn, namespace)
    # The entries' canonical JSON does not depend on the namespace: computed once, it
    # checks the source's id and makes the copy's.
    entries_json = {row.seq: canonical.entries_json(entries[row.seq]) for row in sources.values()}
    scope_of: dict[str, int | None] = {}  # source namespace -> its key scope
    for row in sources.values():
        listed = entries[row.seq]
        checkpoints.check_manifest(row, listed, entries_json[row.seq])
        check_scope(tx.handle, row, listed)  # its entries lie in its namespace's scope
        if row.namespace not in scope_of:
            covering = tx.keyring.row_for_namespace(conn, row.namespace)
            scope_of[row.namespace] = None if covering is None else covering.scope_id
        if scope_of[row.namespace] != scope.scope_id:
            raise errors.EncryptedScopeError(
                f"checkpoint {row.id[:12]} of {row.namespace!r} is in another key scope than "
                f"{namespace!r}; copies by reference stay inside one scope. Read its entries "
                "and commit them to the target instead. Nothing was copied.",
                checkpoint_id=row.id,
                namespace=namespace,
            )

    ptr = pointers.pointer(conn, namespace)
    current_id = ptr.current_id if ptr is not None else None
    if not isinstance(expect_current, _Unset) and expect_current != current_id:
        raise errors.ConflictError(
            f"namespace {namespace!r}: expected CURRENT to be {expect_current} but it is "
            f"{current_id}; nothing was copied.",
            expected=expect_current,
            actual=current_id,
            namespace=namespace,
        )
    if ptr is not None:
        namespace_id, stored_scope = ptr.namespace_id, ptr.scope_id
    else:
        namespace_id, stored_scope = checkpoints.ensure_namespace(conn, namespace, now_ms)
    if stored_scope != scope.scope_id:  # another handle created a scope meanwhile
        tx.keyring.forget()
        raise errors.ScopeChangedError(
            f"namespace {namespace!r}: its encryption settings changed meanwhile; nothing "
            "was copied. Copy again.",
            namespace=namespace,
        )

    # Parents named by the caller that are not copied here must already be in the target.
    outside = {p for p in parents.values() if p is not None and p not in sources}
    targets = checkpoints.checkpoints_by_ids(conn, sorted(outside))
    for pid in sorted(outside):
        found = targets.get(pid) or checkpoints.require_checkpoint(conn, pid)
        if found.namespace != namespace:
            raise errors.InvalidReferenceError(
                f"parent {pid[:12]} belongs to namespace {found.namespace!r}, not "
                f"{namespace!r}; a copy's parent is another copy or a checkpoint of the "
                "target namespace",
                checkpoint_id=pid,
            )
        targets[pid] = found

    copies: dict[str, str] = {}
    generation_of: dict[str, int] = {pid: row.generation for pid, row in targets.items()}
    manifests: list[checkpoints.NewCheckpoint] = []
    for cid in _order(sources, parents, wanted):
        row = sources[cid]
        linked = parents.get(cid, row.parent_id)
        parent = copies.get(linked) if linked in sources else linked if linked in targets else None
        generation = 1 if parent is None else generation_of[parent] + 1
        meta = _metadata(row, scope, metadata_update, max_metadata_bytes)
        new_id = canonical.checkpoint_id(namespace, parent, generation, entries_json[row.seq], meta)
        manifests.append(
            checkpoints.NewCheckpoint(
                new_id,
                parent,
                generation,
                meta,
                row.total_size,
                [(e.name, e.blob_id, e.media_type, e.schema_pin) for e in entries[row.seq]],
                row.label,  # a copy keeps its source's name (unique in the new namespace too)
            )
        )
        copies[cid] = new_id
        generation_of[new_id] = generation
    seq_of, created = checkpoints.insert_many(
        conn, namespace_id, manifests, created_at_ms=now_ms, code_revision=code_revision
    )

    head = copies[wanted[-1]] if wanted else None
    revision = ptr.revision if ptr is not None else None
    evicted: list[str] = []
    if head is not None and head != current_id:
        revision = pointers.move(
            conn,
            namespace=namespace,
            namespace_id=namespace_id,
            previous=ptr,
            new_seq=seq_of[head],
            new_id=head,
            reason=reason,
            now_ms=now_ms,
        ).revision
    if created and head is not None:
        evicted = quota.enforce(tx, namespace, namespace_id, head)
    return models.CopyReport(
        namespace=namespace,
        copies=copies,
        created=created,
        current_id=head if head is not None else current_id,
        pointer_revision=revision,
        evicted_ids=evicted,
    )
