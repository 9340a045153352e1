"""Group commit: concurrent commits on one handle share one write transaction and one fsync.

Every ``Database.commit`` is prepared by its own thread (hashing, staging), then queued
here. Whichever thread finds no leader becomes the leader: it takes the handle, drains the
queue, opens one ``BEGIN IMMEDIATE`` transaction and publishes each queued plan inside its
own ``SAVEPOINT`` (``ops/commit.publish``, the per-commit unit, unchanged), COMMITs once
and only then acknowledges every member.

Forming full batches. Commits that queue while the leader publishes join its transaction
(late joiners, published after the others, in queue order). When the queue is empty but
other threads are still inside ``commit`` -- preparing a commit outside the handle, or just
handed their outcome and, in a loop, about to come back with the next one -- the leader
waits for them to queue before it COMMITs: in all at most a quarter of a COMMIT's recent
duration (a running average) and never more than 1 ms. Without that, the members of a
batch, acknowledged together, come back while the next leader already publishes, and eight
threads settle into two half-full batches taking turns on the fsync; a wait bounded by a
share of the fsync it saves each joiner costs little when fsync is cheap. It never waits
for a thread outside ``commit`` (idle, or reading through the handle) nor for one staging
under the handle (which the leader holds). It runs inside the write transaction: writers in
other processes, and readers of this handle, may wait that much longer for the lock.

A lone caller -- no other thread inside ``commit`` -- waits for nobody: it runs
``ops/commit.commit`` itself, with no queue, no savepoint, no thread handoff and no wait;
group commit costs it one uncontended lock. A caller that finds another thread inside (even
one about to return) goes through the queue instead, so the first member of a batch back
with its next commit does not COMMIT alone ahead of the others.

What each member keeps, exactly as if the commits had been serialized in queue order:

* compare-and-swap and idempotence -- ``publish`` reads CURRENT inside the transaction, so
  a second commit to a namespace sees the first one's pointer move;
* its own error -- a conflict, a missing blob or chunk, a bad reference or an exception
  from its ``on_publish`` hook rolls back only its savepoint and fails only that caller;
* its own acknowledgement, returned only after the shared COMMIT returned;
* its own outcome-unknown resolution when that COMMIT fails (reopen, re-read CURRENT and
  the pointer history, confirm in a transaction that itself commits).

When the whole transaction is lost (an I/O error mid-batch, which SQLite may answer by
rolling everything back; or BEGIN failing), only the member that hit it keeps its error;
the others wrote nothing durable and go back to the queue to be published again.

A commit that waits for a leader is prepared before it queues, in its own thread and
without the handle (hashing small values is pure CPU work, and hashlib releases the GIL),
when that needs nothing of the connection: its values are bytes, text or references no
larger than a chunk (nothing to stage), and the handle already knows the namespace's key
scope. Otherwise it is prepared under the handle, like a lone commit.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .. import errors, models
from ..connection.engine import EngineConnection
from ..store import pointers
from ..store.rows import PointerRow
from ..types import Addressed, BlobRef, Entry
from . import commit as commit_op
from .commit import CommitPlan
from .handle import Handle
from .unit import Unit, holding, writing

__all__ = ["GroupCommit"]

#: The longest a leader waits for committers still preparing (see the module docstring)...
_GATHER_CAP_SECONDS = 0.001
#: ... and that wait as a share of a COMMIT's recent duration: waiting is worth it only
#: while it costs less than the fsync it saves.
_GATHER_SHARE = 0.25
#: Weight of the newest COMMIT in the running estimate of a COMMIT's duration.
_COMMIT_EWMA_WEIGHT = 0.25

#: Errors after which the transaction's state is not trusted even if SQLite kept it open
#: (the storage failed, or the file is damaged): the batch is abandoned and its other
#: members retried in a fresh transaction instead of being committed alongside.
_ABANDONING = (
    errors.StorageError,
    errors.BusyTimeoutError,
    errors.CorruptionError,
    errors.SqlError,
    errors.CommitOutcomeUnknownError,
)


def _in_memory(value: Any, limit: int) -> bool:
    """True for a value whose preparation needs no connection: bytes, text or a reference,
    small enough that it is not staged."""
    kind = type(value)
    if kind is bytes:  # the common case first: this runs for every entry of every commit
        return len(value) <= limit
    if isinstance(value, Entry):
        value = value.value
    if isinstance(value, BlobRef):
        return True
    if isinstance(value, Addressed):
        return len(value.data) <= limit
    if isinstance(value, memoryview):
        return value.nbytes <= limit
    if isinstance(value, bytes | bytearray):
        return len(value) <= limit
    if isinstance(value, str):
        return len(value) * 4 <= limit  # at most 4 bytes per character in UTF-8
    return False


# -- the queue and its leader ---------------------------------------------------------------


@dataclass(eq=False)
class _Request:
    """One queued commit. ``settled``: its outcome is final (set by the leader);
    ``done``: the waiting thread may take it (set under the queue's lock)."""

    plan: CommitPlan
    ack: models.CommitAck | None = None
    error: BaseException | None = None
    settled: bool = False
    done: bool = False

    def succeed(self, ack: models.CommitAck) -> None:
        self.ack, self.error, self.settled = ack, None, True

    def fail(self, error: BaseException) -> None:
        self.ack, self.error, self.settled = None, error, True

    def outcome(self) -> models.CommitAck:
        if self.error is not None:
            raise self.error
        assert self.ack is not None
        return self.ack


class _Abandon(Exception):  # control flow inside the leader
    """Roll the batch's transaction back (nothing of it may commit)."""


def _copy_error(exc: Exception) -> Exception:
    """A separate instance for each caller of a batch-wide failure (each raises its own,
    with its own traceback)."""
    try:
        return copy.copy(exc)
    except Exception:
        return exc  # one that cannot be copied is shared instead


class GroupCommit:
    """The commit queue of one handle (see the module docstring)."""

    def __init__(self, handle: Handle, *, enabled: bool = True) -> None:
        self._handle = handle
        #: False: every commit runs alone, in its own transaction (for comparison)
        self.enabled = enabled
        # Sections that only read or change the queue take the bare lock (cheaper than the
        # condition's Python-level enter); waiting and notifying go through the condition.
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._queue: list[_Request] = []
        self._leading = False
        self._waiters = 0
        # Threads inside ``commit`` (from entry to return, a lone one included), and those
        # of them preparing under the handle (a leader cannot wait for those: it holds it).
        self._inside = 0
        self._staging = 0
        # A leader waiting for committers still preparing sleeps on ``_arrivals``, woken
        # when one queues or leaves; ``_gathering`` says whether anyone needs that wake-up.
        self._arrivals = threading.Condition(self._mutex)
        self._gathering = False
        #: running estimate of a batch's COMMIT duration in seconds (0: none measured yet)
        self.commit_seconds = 0.0
        #: write transactions run by leaders, and the commits they published
        self.batches = 0
        self.commits = 0
        #: how many transactions ran each number of members (1: a commit that ran alone)
        self.batch_sizes: Counter[int] = Counter()
        #: times a leader waited for committers still preparing, before its COMMIT
        self.gather_waits = 0

    @property
    def queued(self) -> int:
        """Commits waiting for a leader (diagnostics and tests)."""
        return len(self._queue)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lead without publishing: commits queue until the block ends, then
        leave as one batch in the order they queued (tests and the fault sweep use it to
        form a batch deterministically)."""
        with self._cond:
            self._waiters += 1
            try:
                while self._leading:
                    self._cond.wait()
            finally:
                self._waiters -= 1
            self._leading = True
        try:
            yield
        finally:
            with self._mutex:
                self._leading = False
                if self._waiters:
                    self._cond.notify_all()

    def commit(self, plan: CommitPlan) -> models.CommitAck:
        """Publish ``plan``: at once when no other thread is committing (the lone committer,
        which pays nothing for the queue), else in a batch -- returning its acknowledgement
        once that batch's COMMIT returned, or raising its own error."""
        handle = self._handle
        if not self.enabled or handle.owner == threading.get_ident():
            # From inside the handle (an on_publish hook, a session), a queued commit would
            # wait for a leader that waits for this very thread.
            return commit_op.commit(handle, plan)
        mutex = self._mutex
        with mutex:
            # Another thread inside (even one about to return with its outcome, which may
            # be back at once with its next commit): this commit goes through the queue,
            # where it can share a transaction.
            alone = not (self._leading or self._queue or self._inside)
            self._inside += 1
            if alone:
                self._leading = True
        try:
            if alone:
                ack = commit_op.commit(handle, plan)
                self.batches += 1
                self.commits += 1
                self.batch_sizes[1] += 1
                return ack
            return self._grouped(plan)
        finally:
            with mutex:
                self._inside -= 1
                if alone:
                    self._leading = False
                if self._waiters:
                    self._cond.notify_all()
                if self._gathering:
                    self._arrivals.notify()

    def _grouped(self, plan: CommitPlan) -> models.CommitAck:
        """A commit that may share a transaction: prepared (outside the handle when it
        needs nothing of the connection), then queued."""
        handle = self._handle
        handle.check_writable()
        scope = handle.keyring.known_scope(plan.namespace)
        values = plan.values
        limit = handle.store.chunk_size
        if (
            scope is not None
            and values is not None
            and all(_in_memory(v, limit) for v in values.values())
        ):
            # Outside the handle, while the leader holds it: this is how a thread joins
            # the leader's next batch instead of waiting for the lock.
            commit_op.prepare(handle.store.blobs, plan, scope, handle.clock())
        else:
            # Staging writes through the connection: under the handle.
            self._count_staging(+1)
            try:
                with holding(handle, write=True, keeps_heads=True) as tx:
                    scope = tx.keyring.scope_for_namespace(tx.conn, plan.namespace)
                    try:
                        commit_op.prepare(tx.blobs, plan, scope, tx.now_ms)
                    except errors.DiskFullError as exc:
                        raise commit_op.discard_staged(tx, [plan], exc) from exc
            finally:
                self._count_staging(-1)
        return self._queued(plan)

    def _count_staging(self, change: int) -> None:
        with self._mutex:
            self._staging += change
            if self._gathering:
                self._arrivals.notify()

    def _queued(self, plan: CommitPlan) -> models.CommitAck:
        req = _Request(plan)
        with self._cond:
            if self._leading or self._queue:
                self._queue.append(req)
                if self._gathering:
                    self._arrivals.notify()
                self._waiters += 1
                try:
                    while not req.done and self._leading:
                        self._cond.wait()
                except BaseException:
                    self._withdraw(req)
                    raise
                finally:
                    self._waiters -= 1
                if req.done:
                    return req.outcome()
            # The leader left before taking this commit: lead.
            self._leading = True
        try:
            # Usually once; again if this commit went back to the queue because another
            # member's I/O error cost the whole transaction.
            while not req.done:
                self._lead(req)
        finally:
            with self._mutex:
                self._withdraw(req)  # only an interrupted leader's commit is still queued
                self._leading = False
                if self._waiters:
                    self._cond.notify_all()
        return req.outcome()

    def _withdraw(self, req: _Request) -> None:
        if not req.done and req in self._queue:
            self._queue.remove(req)

    def _lead(self, own: _Request) -> None:
        batch: list[_Request] = []
        try:
            with holding(self._handle, write=True, keeps_heads=True) as tx:
                # Drained only once the handle is ours: whatever queued while the leader
                # waited for it joins this batch. (An empty queue is read without the lock:
                # whoever queues after this look waits for the next leader.)
                if self._queue:
                    with self._mutex:
                        batch, self._queue = self._queue, []
                if own not in batch:
                    batch.insert(0, own)  # the leader's own commit, if it never queued
                self.batches += 1
                if len(batch) == 1 and not self._queue and self._preparing(batch) <= 0:
                    self._run_one(batch[0])  # alone after all: the lone commit's path
                else:
                    self._run_batch(tx, batch)
                self.batch_sizes[len(batch)] += 1
        except Exception as exc:
            # The handle refused (closed, read-only, reconnect failed) before any batch
            # began: nothing was written for anyone waiting.
            if not batch:
                with self._mutex:
                    batch, self._queue = self._queue, []
                if own not in batch:
                    batch.insert(0, own)
            for req in batch:
                if not req.settled:
                    req.fail(_copy_error(exc))
        finally:
            self._finish(batch)

    def _finish(self, batch: list[_Request]) -> None:
        """Hand settled outcomes to their threads; put unsettled members back at the head
        of the queue (their writes were rolled back with the transaction)."""
        if len(batch) == 1 and batch[0].settled and not self._waiters:
            batch[0].done = True  # a lone leader's own outcome: no other thread reads it
            return
        with self._cond:
            retry = [r for r in batch if not r.settled]
            self._queue[:0] = retry
            for req in batch:
                if req.settled:
                    req.done = True
            if self._waiters:
                self._cond.notify_all()

    def _run_one(self, req: _Request) -> None:
        try:
            ack = commit_op.commit(self._handle, req.plan)
        except Exception as exc:
            req.fail(exc)  # the caller's error, raised in its own thread
        else:
            self.commits += 1
            req.succeed(ack)

    def _preparing(self, batch: list[_Request]) -> int:
        """Threads committing that are neither in ``batch`` nor queued nor staging under the
        handle: preparing their commit, or taking their outcome (and maybe back at once).
        Read without the lock by a leader deciding whether to look again."""
        return self._inside - self._staging - len(self._queue) - len(batch)

    def _gather(self, batch: list[_Request], deadline: float) -> bool:
        """Move into ``batch`` the commits queued since it was drained, first waiting for
        one until ``deadline`` if none has but other threads are still preparing a commit.
        False: nothing joined, the batch is complete."""
        with self._mutex:
            while not self._queue:
                wait = deadline - time.perf_counter()
                if wait <= 0 or self._preparing(batch) <= 0:
                    return False
                self.gather_waits += 1
                self._gathering = True
                try:
                    self._arrivals.wait(wait)
                finally:
                    self._gathering = False
            batch.extend(self._queue)
            self._queue = []
            return True

    def _run_batch(self, tx: Unit, batch: list[_Request]) -> None:
        conn = tx.conn
        published: list[tuple[_Request, models.CommitAck]] = []
        failed: list[tuple[_Request, Exception]] = []
        culprit: tuple[_Request, Exception] | None = None
        try:
            with tx.write_batch():
                # ``batch`` grows while it is published: late joiners (see _gather).
                start = 0
                deadline: float | None = None
                while True:
                    for req in batch[start:]:
                        try:
                            with conn.savepoint():
                                ack = commit_op.publish(tx, req.plan)
                        except Exception as exc:
                            if not conn.in_transaction or isinstance(exc, _ABANDONING):
                                culprit = (req, exc)
                                raise _Abandon from exc
                            failed.append((req, exc))
                        else:
                            published.append((req, ack))
                    start = len(batch)
                    if deadline is None:
                        deadline = time.perf_counter() + min(
                            _GATHER_CAP_SECONDS, _GATHER_SHARE * self.commit_seconds
                        )
                    if not self._gather(batch, deadline):
                        break
                if not published:
                    raise _Abandon  # nothing to COMMIT: roll back instead
                committing = time.perf_counter()
        except _Abandon:
            if culprit is not None:
                # The others were decided against writes that are gone now: they go back to
                # the queue and are decided again; only the culprit's error stands.
                culprit[0].fail(_disk_full_cleaned(tx, [culprit[0]], culprit[1]))
                return
            for req, error in failed:
                req.fail(error)
            return
        except errors.CommitOutcomeUnknownError as exc:
            self._resolve_unknown(published, failed, exc)
            return
        except Exception as exc:
            # BEGIN failed (busy timeout, I/O), or COMMIT found the lock taken or the disk
            # full: nothing was written, every member gets the error and may retry.
            error = _disk_full_cleaned(tx, batch, exc)
            for req in batch:
                req.fail(_copy_error(error))
            return
        # COMMIT returned: every published member is durable; only now is it acknowledged
        # (and its pointer cached, in publication order: the last move of a namespace wins).
        took = time.perf_counter() - committing
        self.commit_seconds += _COMMIT_EWMA_WEIGHT * (took - self.commit_seconds)
        tx.handle.remember_heads(tx.moved)
        self.commits += len(published)
        for req, ack in published:
            req.succeed(ack)
        for req, error in failed:
            req.fail(error)

    def _resolve_unknown(
        self,
        published: list[tuple[_Request, models.CommitAck]],
        failed: list[tuple[_Request, Exception]],
        failure: errors.CommitOutcomeUnknownError,
    ) -> None:
        """The shared COMMIT failed: resolve every published member as a lone commit would
        (``ops/commit._resolve_unknown_outcome``), on one fresh connection and with one
        confirming transaction for the whole batch."""
        touched = {req.plan.namespace for req, _ in published}
        for req, exc in failed:
            # A member that failed after another one moved its namespace was decided against
            # a pointer that may not have landed: decide it again. Any other failure stands.
            if req.plan.namespace not in touched:
                req.fail(exc)
        landed: list[tuple[_Request, models.CommitAck]] = []
        try:
            self._handle.reconnect()
            with writing(self._handle) as tx:
                conn = tx.conn
                confirmed: set[str] = set()
                for req, ack in published:
                    ptr = pointers.pointer(conn, req.plan.namespace)
                    if ptr is None or not _landed(conn, ptr, ack):
                        continue
                    landed.append((req, ack))
                    if ptr.namespace not in confirmed:
                        # The frames holding the batch may be unsynced; this transaction's
                        # COMMIT syncs them before anything is acknowledged.
                        pointers.confirm(conn, ptr, tx.now_ms)
                        confirmed.add(ptr.namespace)
        except errors.CkptdbError as exc:
            self._handle.mark_broken()
            for req, _ in published:
                req.fail(
                    errors.CommitOutcomeUnknownError(
                        f"{failure} Confirming it after reopening failed too ({exc}).",
                        namespace=req.plan.namespace,
                        checkpoint_id=req.plan.attempted_id,
                    )
                )
            return
        self.commits += len(landed)
        for req, ack in landed:
            req.succeed(ack)
        for req, _ in published:
            if req.settled:
                continue
            req.fail(
                errors.CommitOutcomeUnknownError(
                    f"COMMIT of a group of commits failed ({failure.__cause__}); after "
                    f"reopening, {req.plan.namespace!r} shows no move to "
                    f"{str(req.plan.attempted_id)[:12]}. Retry the commit: a retry converges "
                    "on the same checkpoint whether or not this attempt reaches the disk later.",
                    namespace=req.plan.namespace,
                    checkpoint_id=req.plan.attempted_id,
                )
            )


def _disk_full_cleaned(tx: Unit, failed: list[_Request], error: Exception) -> Exception:
    """``error`` as the members that failed with it get it: when the disk is full, after
    their own staged chunks were deleted (``ops/commit.discard_staged``), saying so."""
    if not isinstance(error, errors.DiskFullError):
        return error
    cleaned = commit_op.discard_staged(tx, [req.plan for req in failed], error)
    cleaned.__cause__ = error
    return cleaned


def _landed(conn: EngineConnection, ptr: PointerRow, ack: models.CommitAck) -> bool:
    """Whether the move ``ack`` describes is in the file: CURRENT names it (the rule of a
    lone commit), or -- for a commit that a later member of the same batch superseded --
    the pointer history holds it at the revision it was given."""
    if ptr.current_id == ack.checkpoint_id:
        return True
    return any(
        move.revision == ack.pointer_revision
        for move in pointers.moves_to(conn, ptr.namespace_id, ack.checkpoint_id)
    )
