"""Garbage collection: mark what retention keeps, sweep the rest in short transactions,
then give the space back to the operating system.

Safety rules, in the order they are enforced:

1. Every CURRENT, its fallback and every pinned checkpoint is kept whatever the policy --
   and re-checked inside each sweep transaction, so a pointer moved or a pin added while GC
   runs is honoured (and store/gc_batch's GcBatch.delete_checkpoints refuses a CURRENT or
   fallback; the schema's foreign key does the same for a pin).
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
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from .. import errors, models, validation
from ..connection import Connection
from ..connection.engine import EngineConnection
from ..retention import Candidate, RetentionPolicy, kept_by_policy
from ..store import blob_scans, checkpoint_scans, checkpoints, pins, pointers, settings
from ..store.gc_batch import GcBatch
from ..store.receipts import store_receipt
from ..types import Progress
from .handle import Handle
from .unit import Unit, holding

DEFAULT_GRACE_SECONDS = 3600.0
#: Checkpoints deleted by the first sweep transaction (later ones adapt, see below). Each
#: deletion rewrites a page of every index on a random key (ids, digests), so bigger
#: batches share those pages: at 100,000 checkpoints, 2000 cut the cost per deletion from
#: ~138 to ~92 us against 500 (docs/performance.md).
SWEEP_BATCH = 2000
#: The sweep adapts its batch to hold the write lock about this long (seconds): larger
#: batches share more index pages (the cost per deletion falls), so a batch grows while it
#: stays under the target and shrinks when one took longer (machine load, a bigger file).
SWEEP_TARGET_SECONDS = 0.1
SWEEP_BATCH_MIN = 500
SWEEP_BATCH_MAX = 20_000
#: Page cache while sweeping (KiB). A batch at 100,000 checkpoints dirties ~2,400 pages
#: (most of them in the two random-key indexes), more than the default 8 MiB holds, so
#: SQLite spilled and re-read pages mid-transaction. Memory for the length of a GC only.
SWEEP_CACHE_KIB = 64 * 1024
#: WAL size (bytes) at which the automatic checkpoint runs while sweeping. With the
#: default (1000 pages) every batch was followed by a checkpoint copying its ~2,400 pages
#: into the file, although the next batches dirty most of the same index pages again;
#: letting the WAL grow to this size copies each page once per several batches. The WAL
#: is truncated when GC ends.
SWEEP_WAL_BYTES = 64 * 1024 * 1024
#: Temporary storage while sweeping: 2 = memory (statement journals, GC's temporary
#: tables); see bulk_delete_settings.
SWEEP_TEMP_STORE = 2
VACUUM_STEP_PAGES = 1024
#: A small deletion returns free pages to the OS (and truncates the WAL) only beyond this
#: many: fewer stay on the free list for the next commits to reuse, which costs nothing,
#: where giving them back costs a vacuum step and a WAL checkpoint per deletion.
RECLAIM_MIN_PAGES = 256
MAX_IDS_IN_RECEIPT = 1_000


#: What the grace period keeps: (chunks, bytes, oldest and newest last touch in ms).
Held = tuple[int, int, int | None, int | None]


@dataclass
class Sweep:
    """Counts accumulated while deleting, and what the grace period keeps."""

    deleted_ids: list[str] = field(default_factory=list)
    blobs: int = 0
    chunks: int = 0
    bytes_freed: int = 0
    held: Held = (0, 0, None, None)


def _protected(conn: EngineConnection) -> set[int]:
    """Every CURRENT, fallback and pinned checkpoint: kept whatever the policy."""
    return pointers.protected_seqs(conn) | pins.protected_seqs(conn)


def _unrepaired(conn: EngineConnection) -> set[int]:
    """Namespaces (ids) whose CURRENT names a checkpoint that is not stored (deleted
    outside ckptdb). No retention policy applies to them: depth from CURRENT cannot be
    measured, and their checkpoints are what a repair (set_current) chooses from."""
    return {ns for ns, role, _seq in pointers.dangling(conn) if role == "current"}


def protected_among(conn: EngineConnection, seqs: list[int]) -> set[int]:
    """The CURRENT, fallback and pinned checkpoints among ``seqs``: what a deletion of
    those seqs must keep, read without scanning every pointer of the file."""
    return pointers.protected_among(conn, seqs) | pins.pinned_among(conn, seqs)


def protected_seqs(conn: EngineConnection) -> set[int]:
    """Every CURRENT, fallback and pinned checkpoint (seqs): what no deletion takes. A
    quota's eviction asks this (and :func:`kept_by_stored_policies`) what it must keep."""
    return _protected(conn)


@dataclass
class Mark:
    """The result of the mark phase."""

    doomed: list[int]
    examined: int
    kept: int
    namespaces: list[str]
    namespace_ids: list[int] = field(default_factory=list)


def mark(
    conn: EngineConnection,
    *,
    policy: RetentionPolicy | None,
    namespaces: list[str] | None,
    now_ms: int,
    keep: set[str] | None = None,
) -> Mark:
    """Decide which checkpoints to delete (inside the caller's read transaction).
    ``keep`` names checkpoint ids to keep besides what the policy keeps."""
    by_name = checkpoints.namespaces_by_name(conn)
    if namespaces:
        missing = [n for n in namespaces if n not in by_name]
        if missing:
            raise errors.NamespaceNotFoundError(f"no such namespace(s): {missing}")
        scope = {n: by_name[n] for n in namespaces}
    else:
        scope = by_name
    stored = settings.stored_policies(conn) if policy is None else {}
    unrepaired = _unrepaired(conn)
    chosen: dict[int, RetentionPolicy] = {}
    for name, ns_id in scope.items():
        effective = policy if policy is not None else stored.get(name, stored.get("*"))
        # No policy at all, or a CURRENT that is not stored: keep everything there.
        if effective is not None and ns_id not in unrepaired:
            chosen[ns_id] = effective
    if not chosen:
        return Mark([], 0, 0, sorted(scope), sorted(scope.values()))
    protected = _protected(conn)
    extra_keep = {
        row.seq
        for cid in sorted(keep or ())
        if (row := checkpoints.checkpoint_by_id(conn, cid)) is not None
    }
    doomed: list[int] = []
    examined = kept = 0
    if all(_reads_only_lineage(p) for p in chosen.values()):
        # The policies keep only checkpoints on the lineage of CURRENT: evaluate them on
        # those (a few per namespace with keep_last) and doom every other stored seq,
        # without building a Candidate per stored checkpoint (100,000 of them: most of
        # the mark phase).
        keep_all = protected | extra_keep
        for ns_id, items in _candidates(conn, chosen, lineage_only=True).items():
            keep_all |= kept_by_policy(chosen[ns_id], items, now_ms)
        in_scope = checkpoint_scans.seqs_in_namespaces(conn, sorted(chosen))
        doomed = [s for s in in_scope if s not in keep_all]
        examined, kept = len(in_scope), len(in_scope) - len(doomed)
    else:
        for ns_id, items in _candidates(conn, chosen).items():
            kept_seqs = kept_by_policy(chosen[ns_id], items, now_ms) | protected | extra_keep
            examined += len(items)
            gone = [c.seq for c in items if c.seq not in kept_seqs]
            kept += len(items) - len(gone)
            doomed.extend(gone)
    return Mark(sorted(doomed), examined, kept, sorted(scope), sorted(scope.values()))


#: The rules of a RetentionPolicy that read only the lineage of CURRENT (see retention.py:
#: kept_by_policy looks at candidates with a depth, and nothing else, for these).
_LINEAGE_RULES = frozenset({"keep_last", "keep_every", "keep_hourly", "keep_daily", "keep_weekly"})
_NO_VALUE_RULES = RetentionPolicy().model_dump(exclude=set(_LINEAGE_RULES))


def _reads_only_lineage(policy: RetentionPolicy) -> bool:
    """True when every rule the policy sets reads only the lineage of CURRENT, so that
    checkpoints off the lineage (or deeper than it looks) can never be kept by it. Any
    other rule -- including one added to RetentionPolicy later -- takes the general path."""
    return policy.model_dump(exclude=set(_LINEAGE_RULES)) == _NO_VALUE_RULES


def _candidates(
    conn: EngineConnection, chosen: dict[int, RetentionPolicy], *, lineage_only: bool = False
) -> dict[int, list[Candidate]]:
    """Every stored checkpoint of the namespaces (ids) ``chosen`` gives a policy, with what
    those policies read: the distance from CURRENT, the metadata. ``lineage_only``: only
    those the lineage walk reached (within the depth the policies look)."""
    ns_ids = sorted(chosen)
    # Walk the lineages only as deep as some policy looks (keep_last alone: its N steps).
    wanted = [p.lineage_depth() for p in chosen.values()]
    depth_limit = None if None in wanted else max(d for d in wanted if d is not None)
    depths = (
        checkpoints.depths_from_current(conn, ns_ids, limit=depth_limit) if depth_limit != 0 else {}
    )
    with_meta = any(p.needs_metadata() for p in chosen.values())
    candidates: dict[int, list[Candidate]] = {ns: [] for ns in ns_ids}
    # One pass, positional arguments, no JSON unless a rule reads metadata: this loop runs
    # once per stored checkpoint of the namespaces in scope.
    for seq, ns_id, generation, created, meta in checkpoint_scans.iter_retention_candidates(
        conn, ns_ids, with_metadata=with_meta, seqs=sorted(depths) if lineage_only else None
    ):
        candidates[ns_id].append(
            Candidate(
                seq,
                generation,
                created,
                depths.get(seq),
                None if meta is None else _stored_metadata(conn, ns_id, seq, meta),
            )
        )
    return candidates


def _stored_metadata(conn: EngineConnection, ns_id: int, seq: int, text: str) -> dict[str, Any]:
    """The metadata a retention rule reads; CorruptionError naming the checkpoint when the
    file holds metadata ckptdb could not have written (a rule cannot judge it, and GC
    deletes nothing on a guess)."""
    try:
        return validation.metadata_from_json(text)
    except errors.CorruptionError:
        checkpoint_id = dict(checkpoints.seqs_of_namespace(conn, ns_id)).get(seq)
        return validation.metadata_from_json(text, checkpoint_id)  # raises, naming it


def kept_by_stored_policies(
    conn: EngineConnection, namespaces: dict[str, int], now_ms: int
) -> set[int]:
    """Seqs the stored retention policies keep in these namespaces (name -> id): each
    namespace's own policy, else the database-wide one. A namespace with neither adds
    nothing -- unlike :func:`mark`, where no policy means "keep it all" (a quota's eviction
    asks this, together with :func:`protected_seqs`, what it must not take). A namespace
    whose CURRENT is not stored keeps everything (:func:`_unrepaired`)."""
    stored = settings.stored_policies(conn)
    unrepaired = sorted(_unrepaired(conn) & set(namespaces.values()))
    kept: set[int] = set(checkpoint_scans.seqs_in_namespaces(conn, unrepaired))
    chosen: dict[int, RetentionPolicy] = {}
    for name, ns_id in namespaces.items():
        effective = stored.get(name, stored.get("*"))
        if effective is not None and ns_id not in unrepaired:
            chosen[ns_id] = effective
    if not chosen:
        return kept
    lineage_only = all(_reads_only_lineage(p) for p in chosen.values())
    for ns_id, items in _candidates(conn, chosen, lineage_only=lineage_only).items():
        kept |= kept_by_policy(chosen[ns_id], items, now_ms)
    return kept


@contextmanager
def bulk_delete_settings(conn: Connection) -> Iterator[None]:
    """Connection settings for sweeping (a bigger page cache, a later automatic WAL
    checkpoint: see SWEEP_CACHE_KIB and SWEEP_WAL_BYTES), restored afterwards. Only this
    connection changes; the caller holds the handle, so nothing else uses it meanwhile."""
    cache = conn.pragma("cache_size")
    auto = int(conn.pragma("wal_autocheckpoint"))
    page_size = int(conn.pragma("page_size"))
    temp_store = int(conn.pragma("temp_store"))
    conn.pragma("cache_size", -SWEEP_CACHE_KIB)
    if auto > 0:  # 0: someone (Litestream's setup) turned them off; leave it so
        conn.pragma("wal_autocheckpoint", max(auto, SWEEP_WAL_BYTES // page_size))
    # Each sweep DELETE may abort (foreign keys), so SQLite keeps a statement journal: a
    # copy of every page the statement touches. With temporary files on disk (this
    # build's default) that was ~130,000 write() calls to a temporary file at 100,000
    # checkpoints; in memory it is a copy. Changing it drops every temporary table (a GC
    # batch creates its own again as needed) and is refused inside a transaction (GC holds
    # none here).
    conn.pragma("temp_store", SWEEP_TEMP_STORE)
    try:
        yield
    finally:
        conn.pragma("cache_size", cache)
        if auto > 0:
            conn.pragma("wal_autocheckpoint", auto)
        conn.pragma("temp_store", temp_store)


def estimate(conn: EngineConnection, doomed: list[int], cutoff_ms: int) -> Sweep:
    """What deleting ``doomed`` would free (dry run; inside a transaction, with no
    statement of it running: the batch's tables are dropped at the end)."""
    out = Sweep()
    with GcBatch.open(conn, doomed) as batch:
        out.deleted_ids = batch.checkpoint_ids()
        # Distinct candidate blobs first, then one survival check per blob (not per entry).
        batch.list_blobs()
        batch.unlist_blobs_in_use(ignore_listed=True)
        out.blobs, out.bytes_freed = batch.blob_totals()
        chunk_count, chunk_bytes = batch.chunks_freed(cutoff_ms)
        out.held = batch.chunks_held(cutoff_ms)
    GcBatch.drop_tables(conn)
    out.chunks = chunk_count
    out.bytes_freed += chunk_bytes
    return out


def delete_batch(conn: EngineConnection, seqs: list[int], cutoff_ms: int) -> Sweep:
    """Delete the listed checkpoints that nothing protects, and whatever becomes
    unreferenced, inside the caller's open write transaction (GC's sweep and a quota's
    eviction inside a commit both go through here). Returns what was deleted.

    Set-based: a :class:`~ckptdb.store.gc_batch.GcBatch` lists the batch's seqs, then its
    candidate blobs and chunks, and each step is one statement over those lists. Chunks
    last touched after ``cutoff_ms`` are kept (a publish in flight may be staging them); a
    later GC collects them once they are orphans."""
    # Hold the batch's namespaces first where other writers run meanwhile (PostgreSQL), so
    # that no pointer moves to, and no pin takes, a checkpoint this batch deletes; then
    # re-check protection inside the transaction: CURRENT or a pin may have moved.
    pointers.lock_namespaces_of(conn, seqs)
    protected = protected_among(conn, seqs)
    with GcBatch.open(conn, [s for s in seqs if s not in protected]) as batch:
        # Candidate blobs must be listed before their entries go.
        batch.list_blobs()
        deleted_ids = batch.delete_checkpoints()
        # Blobs that no remaining entry references, then their chunks.
        batch.unlist_blobs_in_use()
        batch.list_chunks()
        blob_count, blob_bytes = batch.delete_blobs()
        chunk_count, chunk_bytes = batch.delete_chunks(cutoff_ms)
    return Sweep(deleted_ids, blob_count, chunk_count, blob_bytes + chunk_bytes)


def sweep_batch(conn: EngineConnection, seqs: list[int], cutoff_ms: int, out: Sweep) -> None:
    """Delete one batch of checkpoints and whatever becomes unreferenced, in one
    transaction of its own (:func:`delete_batch_retrying`). ``out`` is updated only once
    the transaction committed."""
    done = delete_batch_retrying(conn, seqs, cutoff_ms, conn.write_transaction)
    out.deleted_ids.extend(done.deleted_ids)
    out.blobs += done.blobs
    out.chunks += done.chunks
    out.bytes_freed += done.bytes_freed


def delete_batch_retrying(
    conn: EngineConnection,
    seqs: list[int],
    cutoff_ms: int,
    scope: Callable[[], AbstractContextManager[None]],
) -> Sweep:
    """:func:`delete_batch` inside ``scope`` (a transaction of its own, or a savepoint of
    the caller's), tried again when it lost a race.

    On PostgreSQL a publish running at once may, in a rare interleaving, make a reference
    that the batch's delete would leave dangling: the foreign key then fails the delete and
    the scope rolls back, nothing deleted; the batch is tried again (it then sees the
    reference)."""
    for attempt in range(_RACE_RETRIES):
        try:
            with scope():
                return delete_batch(conn, seqs, cutoff_ms)
        except errors.ConstraintViolationError:
            if conn.dialect == "sqlite" or attempt == _RACE_RETRIES - 1:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def sweep(
    conn: EngineConnection,
    doomed: list[int],
    cutoff_ms: int,
    out: Sweep,
    progress: Progress | None = None,
) -> None:
    """Delete ``doomed`` (seqs, in seq order so consecutive batches touch neighbouring
    pages of the tables keyed by seq) in batches sized to :data:`SWEEP_TARGET_SECONDS`."""
    size, done, total = SWEEP_BATCH, 0, len(doomed)
    while done < total:
        started = time.perf_counter()
        sweep_batch(conn, doomed[done : done + size], cutoff_ms, out)
        took = time.perf_counter() - started
        done += size
        if progress is not None:
            progress(min(done, total), total)
        # Proportional step, at most doubling or halving: the batch's time includes COMMIT
        # (and sometimes the automatic WAL checkpoint after it), an upper bound on the
        # time other writers waited.
        factor = min(2.0, max(0.5, SWEEP_TARGET_SECONDS / max(took, 1e-6)))
        size = int(min(SWEEP_BATCH_MAX, max(SWEEP_BATCH_MIN, size * factor)))


#: How often a PostgreSQL batch that lost a race with a publish is tried again.
_RACE_RETRIES = 5


def sweep_orphan_chunks(conn: EngineConnection, cutoff_ms: int, out: Sweep) -> None:
    """Delete staged chunks no blob references once their grace period is over (e.g. left
    by a publish that crashed or lost a compare-and-swap), in bounded transactions."""
    while True:
        with conn.write_transaction():
            count, freed = blob_scans.delete_orphan_chunks(conn, cutoff_ms, SWEEP_BATCH)
            out.chunks += count
            out.bytes_freed += freed
            if not count:
                return


def trim_history(
    conn: EngineConnection, namespace_ids: list[int], moves: int
) -> tuple[int, dict[str, int]]:
    """Delete pointer moves older than the newest ``moves`` of each namespace. Returns the
    rows deleted and, per namespace trimmed, the first revision kept -- recorded in the GC
    receipt so that verify can tell this trimming from a truncated history."""
    trimmed = 0
    floors: dict[str, int] = {}
    for namespace_id in namespace_ids:
        with conn.write_transaction():
            deleted, floor = pointers.trim_history(conn, namespace_id, moves)
            if floor is not None:
                trimmed += deleted
                floors[str(checkpoints.namespace_name(conn, namespace_id))] = floor
    return trimmed, floors


def free_pages(conn: Connection) -> int:
    """Pages on the file's freelist (what :func:`release_pages` counts from)."""
    return int(conn.pragma("freelist_count"))


def release_pages(conn: Connection, free_before: int) -> None:
    """Inside the caller's write transaction: hand the pages freed since the freelist held
    ``free_before`` back, so that the next WAL checkpoint shrinks the file instead of first
    writing them into it (on a full disk, growing the file is what fails)."""
    freed = free_pages(conn) - free_before
    if freed > 0:
        conn.execute(f"PRAGMA incremental_vacuum({freed})")


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


def _stored_bytes(conn: EngineConnection, path: str) -> int:
    """Bytes the database takes: an SQLite file plus its WAL (what the disk actually holds),
    or the PostgreSQL database's size as its server counts it."""
    if not isinstance(conn, Connection):
        return int(conn.scalar("SELECT pg_database_size(current_database())") or 0)
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
    handle: Handle,
    path: str,
    *,
    policy: RetentionPolicy | None,
    namespaces: list[str] | None,
    grace_seconds: float,
    dry_run: bool,
    keep_history: int | None = None,
    keep: set[str] | None = None,
    progress: Progress | None = None,
) -> models.GcReport:
    """Mark, then (unless ``dry_run``) sweep, trim pointer histories to ``keep_history``
    moves per namespace in scope (if given), reclaim space and store a receipt. ``keep``:
    checkpoint ids kept whatever the policy says (besides CURRENT, fallbacks and pins). A
    dry run changes nothing, so it works on a read-only handle too."""
    with holding(handle, write=not dry_run) as tx:
        try:
            return _run(
                tx,
                path,
                policy=policy,
                namespaces=namespaces,
                grace_seconds=grace_seconds,
                dry_run=dry_run,
                keep_history=keep_history,
                keep=keep,
                progress=progress,
            )
        except errors.DiskFullError as exc:
            raise _out_of_space(path, grace_seconds, exc) from exc


def _out_of_space(
    path: str, grace_seconds: float, failure: errors.DiskFullError
) -> errors.DiskFullError:
    """What a GC that found the disk full says: why GC needs room itself, and what to do."""
    held = (
        f" Chunks that failed or killed commits staged are kept for the grace period "
        f"({grace_seconds:g} s), and their pages are what the file cannot take back: "
        f"`ckptdb gc {path} --grace 0s` (db.gc(grace=0)) deletes them at once -- run it only "
        "while no commit runs."
        if grace_seconds > 0
        else ""
    )
    return errors.DiskFullError(
        "GC found the disk full: it needs a little room itself, as SQLite writes every "
        f"deletion to the write-ahead log ({path}-wal) and copies that log into {path} before "
        "the file can shrink. Free a few MiB on that filesystem, then run GC again (what it "
        f"deleted so far stays deleted).{held}",
        **failure.details,
    )


def refuse_missing_blob_refs(conn: EngineConnection) -> None:
    """CorruptionError (nothing deleted) when a packed entry of a stored checkpoint has no
    ``blob_ref`` row: a sweep decides from those rows alone whether a blob is still used,
    so it would free bytes that checkpoint needs. Two aggregates on an intact file; the
    exact scan of every packed entry only when they disagree."""
    if not checkpoint_scans.blob_refs_possibly_missing(conn):
        return
    missing = checkpoint_scans.blob_refs_missing(conn)
    if missing:
        seq, blob_id = missing[0]
        raise errors.CorruptionError(
            f"GC refused: checkpoint seq {seq} uses blob {blob_id} but no blob_ref row says "
            f"so ({len(missing)} such entr{'y' if len(missing) == 1 else 'ies'}), and a "
            "sweep would free bytes that checkpoint needs. Nothing was deleted. Run "
            "`ckptdb verify` (finding blob_ref_missing), then restore the file from a backup "
            "or `ckptdb export` what you need.",
            reason="blob_ref_missing",
            seq=seq,
            blob_id=blob_id,
        )


def _run(
    tx: Unit,
    path: str,
    *,
    policy: RetentionPolicy | None,
    namespaces: list[str] | None,
    grace_seconds: float,
    dry_run: bool,
    keep_history: int | None,
    keep: set[str] | None,
    progress: Progress | None,
) -> models.GcReport:
    conn = tx.conn
    # What only an SQLite file has: its page cache and WAL settings for a sweep, free pages
    # to hand back, a WAL to truncate (PostgreSQL's space is VACUUM's, the server's job).
    file = conn if isinstance(conn, Connection) else None
    now_ms = tx.now_ms
    cutoff_ms = now_ms - int(grace_seconds * 1000)
    before = _stored_bytes(conn, path)
    with conn.read_transaction():
        marked = mark(conn, policy=policy, namespaces=namespaces, now_ms=now_ms, keep=keep)
        if dry_run:
            swept = estimate(conn, marked.doomed, cutoff_ms)
        else:
            refuse_missing_blob_refs(conn)
    pages = trimmed = 0
    floors: dict[str, int] = {}
    if not dry_run:
        swept = Sweep()
        with bulk_delete_settings(file) if file is not None else nullcontext():
            sweep(conn, marked.doomed, cutoff_ms, swept, progress)
            sweep_orphan_chunks(conn, cutoff_ms, swept)
            with conn.read_transaction():
                swept.held = blob_scans.held_orphan_chunks(conn, cutoff_ms)
            if keep_history is not None:
                trimmed, floors = trim_history(conn, marked.namespace_ids, keep_history)
            pages = reclaim(file) if file is not None else 0
        swept.deleted_ids.sort()  # once: the receipt and the report sort again (now O(n))
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
        "file_bytes_after": _stored_bytes(conn, path),
        "pages_reclaimed": pages,
        "history_trimmed": trimmed,
        "grace_held": _grace_hold(swept.held, grace_seconds),
    }
    receipt_id = None
    if not dry_run:
        with conn.write_transaction():
            GcBatch.drop_tables(conn)
            receipt_id = store_receipt(
                conn,
                "gc",
                {**body, **receipt_ids(swept.deleted_ids), "history_floor": floors},
                namespace=None,
                checkpoint_id=None,
                at_ms=now_ms,
            )
        if file is not None:
            _truncate_wal(file)  # the receipt itself must not leave a WAL behind
    return models.GcReport(
        dry_run=dry_run,
        receipt_id=receipt_id,
        deleted_ids=sorted(swept.deleted_ids),
        at=models.from_ms(now_ms),
        **body,
    )


def _grace_hold(held: Held, grace_seconds: float) -> dict[str, Any]:
    """The report's (and receipt's) account of what the grace period keeps, with the times
    the oldest and the newest of it become collectable."""
    chunks, size, oldest_ms, newest_ms = held
    grace_ms = int(grace_seconds * 1000)

    def free_at(touched_ms: int | None) -> str | None:
        return None if touched_ms is None else models.from_ms(touched_ms + grace_ms).isoformat()

    return {
        "chunks": chunks,
        "bytes": size,
        "first_free_at": free_at(oldest_ms),
        "all_free_at": free_at(newest_ms),
    }
