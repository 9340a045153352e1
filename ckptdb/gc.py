"""Garbage collection: mark what retention keeps, sweep the rest in short transactions,
then give the space back to the operating system.

Safety rules, in the order they are enforced:

1. Every CURRENT, its fallback and every pinned checkpoint is kept whatever the policy --
   and re-checked inside each sweep transaction, so a pointer moved or a pin added while GC
   runs is honoured (the schema's foreign keys make deleting them impossible anyway).
2. A blob is deleted only when no remaining entry references it; a chunk only when no
   remaining blob references it *and* it was last touched before the grace period (a
   publish in flight may have staged or re-used it). A publish that loses a staged chunk
   anyway fails with the retryable ChunkMissingError -- never a checkpoint with missing
   bytes.
3. Each sweep batch is one transaction: a crash or I/O error leaves a consistent database
   and GC can simply be run again.

Cost grows with what is deleted: marking reads each candidate checkpoint once (no
per-checkpoint scans), and sweeping touches only the rows of deleted checkpoints, their
blobs and chunks.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pydantic

from . import catalog, errors, models, validation
from .connection import Connection
from .receipts import store_receipt
from .retention import Candidate, RetentionPolicy, kept_by_policy

DEFAULT_GRACE_SECONDS = 3600.0
#: Checkpoints deleted per sweep transaction. Each deletion rewrites a page of every index
#: on a random key (ids, digests), so bigger batches share those pages: at 100,000
#: checkpoints, 2000 cut the cost per deletion from ~138 to ~92 us against 500, holding the
#: write lock at most ~0.2 s per batch (docs/performance.md).
SWEEP_BATCH = 2000
VACUUM_STEP_PAGES = 1024
MAX_IDS_IN_RECEIPT = 1_000
_CANDIDATE_TYPES: tuple[Any, ...] = (int, int, int, int, (str, type(None)))
Progress = Callable[[int, int], None]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Sweep:
    """Counts accumulated while deleting."""

    deleted_ids: list[str] = field(default_factory=list)
    blobs: int = 0
    chunks: int = 0
    bytes_freed: int = 0


def _protected(conn: Connection) -> set[int]:
    rows = conn.execute(
        "SELECT current_seq FROM pointer UNION SELECT fallback_seq FROM pointer"
        " WHERE fallback_seq IS NOT NULL UNION SELECT checkpoint_seq FROM pin"
    )
    protected: set[int] = set()
    for row in rows:
        catalog.check_types(row, (int,), "pointer or pin row")
        protected.add(row[0])
    return protected


def stored_policies(conn: Connection) -> dict[str, RetentionPolicy]:
    """Stored retention policies by scope ('*' = database-wide)."""
    policies: dict[str, RetentionPolicy] = {}
    for row in conn.execute("SELECT scope, policy FROM retention"):
        catalog.check_types(row, (str, str), "retention row")
        scope, policy = row
        try:
            policies[scope] = RetentionPolicy.model_validate_json(policy)
        except pydantic.ValidationError as exc:
            raise errors.CorruptionError(
                f"the stored retention policy of {scope!r} is damaged ({exc.error_count()} "
                "problem(s)). Set it again (`set_retention`, `ckptdb retention set`) or clear "
                "it (`clear_retention`, `ckptdb retention clear`).",
                reason="retention_damaged",
            ) from exc
    return policies


def _lineage_depths(conn: Connection, namespace_ids: list[int]) -> dict[int, int]:
    """seq -> distance from CURRENT along parent links, for the given namespaces."""
    depths: dict[int, int] = {}
    for start in range(0, len(namespace_ids), 500):
        part = namespace_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            "WITH RECURSIVE walk (seq, parent_id, generation, depth) AS ("
            " SELECT c.seq, c.parent_id, c.generation, 0 FROM pointer p"
            f" JOIN checkpoint c ON c.seq = p.current_seq WHERE p.namespace_id IN ({marks})"
            " UNION ALL"
            " SELECT c.seq, c.parent_id, c.generation, w.depth + 1 FROM walk w"
            " JOIN checkpoint c ON c.id = w.parent_id AND c.generation < w.generation"
            ") SELECT seq, min(depth) FROM walk GROUP BY seq",
            part,
        )
        depths.update({int(s): int(d) for s, d in rows})
    return depths


@dataclass
class Mark:
    """The result of the mark phase."""

    doomed: list[int]
    examined: int
    kept: int
    namespaces: list[str]
    namespace_ids: list[int] = field(default_factory=list)


def mark(
    conn: Connection,
    *,
    policy: RetentionPolicy | None,
    namespaces: list[str] | None,
    now_ms: int,
) -> Mark:
    """Decide which checkpoints to delete (inside the caller's read transaction)."""
    rows = conn.execute("SELECT namespace_id, name FROM namespace ORDER BY name")
    by_name = {str(name): int(ns_id) for ns_id, name in rows}
    if namespaces:
        missing = [n for n in namespaces if n not in by_name]
        if missing:
            raise errors.NamespaceNotFoundError(f"no such namespace(s): {missing}")
        scope = {n: by_name[n] for n in namespaces}
    else:
        scope = by_name
    stored = stored_policies(conn) if policy is None else {}
    chosen: dict[int, RetentionPolicy] = {}
    for name, ns_id in scope.items():
        effective = policy if policy is not None else stored.get(name, stored.get("*"))
        if effective is not None:  # no policy at all: keep everything in that namespace
            chosen[ns_id] = effective
    if not chosen:
        return Mark([], 0, 0, sorted(scope), sorted(scope.values()))
    ns_ids = sorted(chosen)
    depths = _lineage_depths(conn, ns_ids)
    protected = _protected(conn)
    with_meta = any(p.needs_metadata() for p in chosen.values())
    candidates: dict[int, list[Candidate]] = {ns: [] for ns in ns_ids}
    for start in range(0, len(ns_ids), 500):
        part = ns_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        for row in conn.iterate(
            "SELECT seq, namespace_id, generation, created_at_ms,"
            f" {'metadata' if with_meta else 'NULL'} FROM checkpoint"
            f" WHERE namespace_id IN ({marks})",
            part,
        ):
            catalog.check_types(row, _CANDIDATE_TYPES, "checkpoint row")
            seq, ns_id, generation, created, meta = row
            candidates[ns_id].append(
                Candidate(
                    seq=seq,
                    generation=generation,
                    created_at_ms=created,
                    depth=depths.get(seq),
                    metadata=validation.metadata_from_json(meta) if meta is not None else None,
                )
            )
    doomed: list[int] = []
    examined = kept = 0
    for ns_id, items in candidates.items():
        keep = kept_by_policy(chosen[ns_id], items, now_ms) | protected
        examined += len(items)
        for c in items:
            if c.seq in keep:
                kept += 1
            else:
                doomed.append(c.seq)
    return Mark(sorted(doomed), examined, kept, sorted(scope), sorted(scope.values()))


def _temp_seqs(conn: Connection, table: str, seqs: Iterable[int]) -> None:
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} (seq INTEGER PRIMARY KEY)")
    conn.execute(f"DELETE FROM temp.{table}")
    conn.executemany(f"INSERT OR IGNORE INTO temp.{table} (seq) VALUES (?)", [(s,) for s in seqs])


def estimate(conn: Connection, doomed: list[int], cutoff_ms: int) -> Sweep:
    """What deleting ``doomed`` would free (dry run; inside a transaction)."""
    out = Sweep()
    _temp_seqs(conn, "gc_doomed", doomed)
    out.deleted_ids = [
        str(r[0])
        for r in conn.execute(
            "SELECT c.id FROM temp.gc_doomed d JOIN checkpoint c ON c.seq = d.seq ORDER BY c.seq"
        )
    ]
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS gc_dead_blob (seq INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM temp.gc_dead_blob")
    # Distinct candidate blobs first, then one survival check per blob (not per entry).
    conn.execute(
        "INSERT INTO temp.gc_dead_blob (seq)"
        " SELECT DISTINCT e.blob_id FROM temp.gc_doomed d JOIN entry e ON e.checkpoint_seq = d.seq"
    )
    conn.execute(
        "DELETE FROM temp.gc_dead_blob WHERE EXISTS (SELECT 1 FROM entry e2"
        " WHERE e2.blob_id = temp.gc_dead_blob.seq"
        " AND e2.checkpoint_seq NOT IN (SELECT seq FROM temp.gc_doomed))"
    )
    row = conn.one(
        "SELECT count(*), coalesce(sum(CASE WHEN chunk_count = 0 THEN size ELSE 0 END), 0)"
        " FROM blob WHERE blob_id IN (SELECT seq FROM temp.gc_dead_blob)"
    )
    assert row is not None
    out.blobs, out.bytes_freed = int(row[0]), int(row[1])
    chunk_row = conn.one(
        "SELECT count(*), coalesce(sum(size), 0) FROM chunk c WHERE c.last_touched_ms < ? AND ("
        "  c.chunk_id IN (SELECT bc.chunk_id FROM blob_chunk bc"
        "   WHERE bc.blob_id IN (SELECT seq FROM temp.gc_dead_blob))"
        "  AND NOT EXISTS (SELECT 1 FROM blob_chunk bc2 WHERE bc2.chunk_id = c.chunk_id"
        "   AND bc2.blob_id NOT IN (SELECT seq FROM temp.gc_dead_blob))"
        "  OR NOT EXISTS (SELECT 1 FROM blob_chunk bc3 WHERE bc3.chunk_id = c.chunk_id))",
        (cutoff_ms,),
    )
    assert chunk_row is not None
    out.chunks = int(chunk_row[0])
    out.bytes_freed += int(chunk_row[1])
    return out


def sweep_batch(conn: Connection, seqs: list[int], cutoff_ms: int, out: Sweep) -> None:
    """Delete one batch of checkpoints and whatever becomes unreferenced (one transaction)."""
    with conn.write_transaction():
        # Re-check protection inside the transaction: CURRENT or a pin may have moved.
        protected = _protected(conn)
        safe = [s for s in seqs if s not in protected]
        _temp_seqs(conn, "gc_batch", safe)
        out.deleted_ids.extend(
            str(r[0])
            for r in conn.execute(
                "SELECT c.id FROM temp.gc_batch b JOIN checkpoint c ON c.seq = b.seq"
            )
        )
        _temp_seqs(
            conn,
            "gc_blob",
            (
                int(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT e.blob_id FROM temp.gc_batch b"
                    " JOIN entry e ON e.checkpoint_seq = b.seq"
                )
            ),
        )
        conn.execute("DELETE FROM checkpoint WHERE seq IN (SELECT seq FROM temp.gc_batch)")
        # Blobs that no remaining entry references.
        conn.execute(
            "DELETE FROM temp.gc_blob WHERE EXISTS"
            " (SELECT 1 FROM entry e WHERE e.blob_id = temp.gc_blob.seq)"
        )
        _delete_blobs(conn, cutoff_ms, out)


def _delete_blobs(conn: Connection, cutoff_ms: int, out: Sweep) -> None:
    """Delete the blobs listed in temp.gc_blob and their chunks that nothing else uses and
    whose grace period is over."""
    row = conn.one(
        "SELECT count(*), coalesce(sum(CASE WHEN chunk_count = 0 THEN size ELSE 0 END), 0)"
        " FROM blob WHERE blob_id IN (SELECT seq FROM temp.gc_blob)"
    )
    assert row is not None
    out.blobs += int(row[0])
    out.bytes_freed += int(row[1])
    _temp_seqs(
        conn,
        "gc_chunk",
        (
            int(r[0])
            for r in conn.execute(
                "SELECT DISTINCT chunk_id FROM blob_chunk"
                " WHERE blob_id IN (SELECT seq FROM temp.gc_blob)"
            )
        ),
    )
    conn.execute("DELETE FROM blob WHERE blob_id IN (SELECT seq FROM temp.gc_blob)")
    _delete_chunks(conn, "SELECT seq FROM temp.gc_chunk", cutoff_ms, out)


def _delete_chunks(conn: Connection, candidates_sql: str, cutoff_ms: int, out: Sweep) -> None:
    """Delete the candidate chunks no blob references whose grace period is over
    (``candidates_sql`` may use the :cutoff parameter)."""
    where = (
        f"chunk_id IN ({candidates_sql}) AND last_touched_ms < :cutoff"
        " AND NOT EXISTS (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = chunk.chunk_id)"
    )
    params = {"cutoff": cutoff_ms}
    row = conn.one(f"SELECT count(*), coalesce(sum(size), 0) FROM chunk WHERE {where}", params)
    assert row is not None
    out.chunks += int(row[0])
    out.bytes_freed += int(row[1])
    conn.execute(f"DELETE FROM chunk WHERE {where}", params)


def sweep_orphan_chunks(conn: Connection, cutoff_ms: int, out: Sweep) -> None:
    """Delete staged chunks no blob references once their grace period is over (e.g. left
    by a publish that crashed or lost a compare-and-swap), in bounded transactions."""
    while True:
        with conn.write_transaction():
            before = out.chunks
            _delete_chunks(
                conn,
                "SELECT c.chunk_id FROM chunk c WHERE c.last_touched_ms < :cutoff AND NOT EXISTS"
                " (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = c.chunk_id)"
                f" LIMIT {SWEEP_BATCH}",
                cutoff_ms,
                out,
            )
            if out.chunks == before:
                return


def trim_history(
    conn: Connection, namespace_ids: list[int], moves: int
) -> tuple[int, dict[str, int]]:
    """Delete pointer moves older than the newest ``moves`` of each namespace. Returns the
    rows deleted and, per namespace trimmed, the first revision kept -- recorded in the GC
    receipt so that verify can tell this trimming from a truncated history."""
    trimmed = 0
    floors: dict[str, int] = {}
    for namespace_id in namespace_ids:
        with conn.write_transaction():
            newest = conn.scalar(
                "SELECT max(revision) FROM pointer_history WHERE namespace_id = ?",
                (namespace_id,),
            )
            if newest is None or int(newest) <= moves:
                continue
            floor = int(newest) - moves + 1
            conn.execute(
                "DELETE FROM pointer_history WHERE namespace_id = ? AND revision < ?",
                (namespace_id, floor),
            )
            if conn.changes():
                trimmed += conn.changes()
                name = conn.scalar(
                    "SELECT name FROM namespace WHERE namespace_id = ?", (namespace_id,)
                )
                floors[str(name)] = floor
    return trimmed, floors


def reclaim(conn: Connection) -> int:
    """Return free pages to the OS in bounded steps, then truncate the WAL. Returns pages."""
    reclaimed = 0
    while int(conn.pragma("freelist_count")) > 0:
        before = int(conn.pragma("freelist_count"))
        with conn.write_transaction():
            conn.execute(f"PRAGMA incremental_vacuum({VACUUM_STEP_PAGES})")
        after = int(conn.pragma("freelist_count"))
        reclaimed += before - after
        if after >= before:
            break
    _truncate_wal(conn)
    return reclaimed


def _truncate_wal(conn: Connection) -> None:
    """Copy the WAL into the file and truncate it -- without holding writers up for more
    than a moment if readers are busy (then the next checkpoint finishes the job)."""
    conn.wal_checkpoint("PASSIVE")
    conn.wal_checkpoint("TRUNCATE", wait=0.2)


def _file_bytes(path: str) -> int:
    """Bytes of the database file plus its WAL (what the disk actually holds)."""
    return sum(
        os.stat(path + suffix).st_size for suffix in ("", "-wal") if os.path.exists(path + suffix)
    )


def receipt_ids(ids: list[str]) -> dict[str, Any]:
    """The deleted ids as stored in a receipt: all of them up to a bound, and always a digest
    over the full sorted list."""
    ordered = sorted(ids)
    return {
        "deleted_ids": ordered[:MAX_IDS_IN_RECEIPT],
        "deleted_ids_truncated": len(ordered) > MAX_IDS_IN_RECEIPT,
        "deleted_ids_sha256": hashlib.sha256("\n".join(ordered).encode()).hexdigest(),
    }


def run(
    conn: Connection,
    path: str,
    *,
    policy: RetentionPolicy | None,
    namespaces: list[str] | None,
    grace_seconds: float,
    dry_run: bool,
    keep_history: int | None = None,
    progress: Progress | None = None,
) -> models.GcReport:
    """Mark, then (unless ``dry_run``) sweep, trim pointer histories to ``keep_history``
    moves per namespace in scope (if given), reclaim space and store a receipt."""
    now_ms = _now_ms()
    cutoff_ms = now_ms - int(grace_seconds * 1000)
    before = _file_bytes(path)
    with conn.read_transaction():
        marked = mark(conn, policy=policy, namespaces=namespaces, now_ms=now_ms)
        if dry_run:
            swept = estimate(conn, marked.doomed, cutoff_ms)
    pages = trimmed = 0
    floors: dict[str, int] = {}
    if not dry_run:
        swept = Sweep()
        total = len(marked.doomed)
        for start in range(0, total, SWEEP_BATCH):
            sweep_batch(conn, marked.doomed[start : start + SWEEP_BATCH], cutoff_ms, swept)
            if progress is not None:
                progress(min(start + SWEEP_BATCH, total), total)
        sweep_orphan_chunks(conn, cutoff_ms, swept)
        if keep_history is not None:
            trimmed, floors = trim_history(conn, marked.namespace_ids, keep_history)
        pages = reclaim(conn)
    body: dict[str, Any] = {
        "policy": None if policy is None else json.loads(policy.model_dump_json()),
        "namespaces": marked.namespaces,
        "grace_seconds": grace_seconds,
        "checkpoints_examined": marked.examined,
        "checkpoints_kept": marked.kept,
        "checkpoints_deleted": len(swept.deleted_ids),
        "blobs_deleted": swept.blobs,
        "chunks_deleted": swept.chunks,
        "bytes_freed": swept.bytes_freed,
        "file_bytes_before": before,
        "file_bytes_after": _file_bytes(path),
        "pages_reclaimed": pages,
        "history_trimmed": trimmed,
    }
    receipt_id = None
    if not dry_run:
        with conn.write_transaction():
            receipt_id = store_receipt(
                conn,
                "gc",
                {**body, **receipt_ids(swept.deleted_ids), "history_floor": floors},
                namespace=None,
                checkpoint_id=None,
                at_ms=now_ms,
            )
        _truncate_wal(conn)  # the receipt itself must not leave a WAL behind
    return models.GcReport(
        dry_run=dry_run,
        receipt_id=receipt_id,
        deleted_ids=sorted(swept.deleted_ids),
        at=models.from_ms(now_ms),
        **body,
    )


def delete_selected(
    conn: Connection,
    *,
    kind: str,
    select: Callable[[], list[tuple[int, str]]],
    namespaces: list[str],
    dry_run: bool,
    grace_seconds: float,
    exempt: Callable[[], set[int]] = set,
    prologue: Callable[[], None] | None = None,
    epilogue: Callable[[], None] | None = None,
) -> models.PruneReport:
    """Delete the checkpoints ``select()`` returns as (seq, id), skipping (and reporting)
    protected ones, with the sweep machinery of GC and a receipt.

    ``exempt()`` names protected seqs the operation itself will unprotect in ``prologue``
    (which runs in its own write transaction before sweeping, e.g. removing a dropped
    namespace's pointer); ``epilogue`` runs in the transaction that stores the receipt.
    """
    now_ms = _now_ms()
    cutoff_ms = now_ms - int(grace_seconds * 1000)
    with conn.read_transaction():
        rows = select()
        protected = _protected(conn) - exempt()
    skipped = [
        models.Rejection(
            checkpoint_id=cid, code="protected", detail="CURRENT, fallback or pinned; kept"
        )
        for seq, cid in rows
        if seq in protected
    ]
    doomed = [seq for seq, _ in rows if seq not in protected]
    receipt_id = None
    if dry_run:
        with conn.read_transaction():
            swept = estimate(conn, doomed, cutoff_ms)
    else:
        if prologue is not None:
            with conn.write_transaction():
                prologue()
        swept = Sweep()
        for start in range(0, len(doomed), SWEEP_BATCH):
            sweep_batch(conn, doomed[start : start + SWEEP_BATCH], cutoff_ms, swept)
        body: dict[str, Any] = {
            "namespaces": namespaces,
            "checkpoints_deleted": len(swept.deleted_ids),
            "skipped": [s.checkpoint_id for s in skipped],
            "blobs_deleted": swept.blobs,
            "chunks_deleted": swept.chunks,
            "bytes_freed": swept.bytes_freed,
            **receipt_ids(swept.deleted_ids),
        }
        with conn.write_transaction():
            if epilogue is not None:
                epilogue()
            receipt_id = store_receipt(
                conn,
                kind,
                body,
                namespace=namespaces[0] if len(namespaces) == 1 else None,
                checkpoint_id=None,
                at_ms=now_ms,
            )
        reclaim(conn)
    return models.PruneReport(
        kind=kind,  # type: ignore[arg-type]
        dry_run=dry_run,
        receipt_id=receipt_id,
        namespaces=namespaces,
        checkpoints_deleted=len(swept.deleted_ids),
        deleted_ids=sorted(swept.deleted_ids),
        skipped=skipped,
        blobs_deleted=swept.blobs,
        chunks_deleted=swept.chunks,
        bytes_freed=swept.bytes_freed,
        at=models.from_ms(now_ms),
    )
