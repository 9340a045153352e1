"""The saver's part of threads that expire (settings in :mod:`.ttl`, activity records in
:mod:`.activity`): the sweep of expired threads, the background sweeper's life, and the
refresh of a thread's TTL by reads.

A sweep reads the expired threads oldest first, ``ThreadTTL.batch`` at a time, and handles
each one in transactions of its own -- ``delete_thread``'s for ``"delete"``, ``prune``'s
for ``"keep_latest"`` -- so the write lock is never held for more than one thread: the
puts of a running graph interleave (and between two threads the sweep lets the handle go;
the background sweeper rests as long as the thread took). Just before a thread is handled
its record is read again: one touched since the sweep began is left alone (a put landing
while it is being deleted goes with it, as with ``delete_thread``). A pruned thread loses
its record (in a transaction that keeps it if it was touched meanwhile), so it is not
pruned again until it is used again; a deleted one loses it with its rows.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Iterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from ... import errors, models
from ...extension import Session
from . import activity
from ._core import log
from .maintenance import Maintenance
from .reads import Reads
from .ttl import KeptThread, Sweeper, ThreadTTL, TTLSweepReport

#: How long the background sweeper rests after each thread, in units of the time that
#: thread took: it uses at most half of the handle's time. Measured beside a graph putting
#: without pause (tools/bench_ttl.py, 1,000 threads of 100 checkpoints): puts/s 0.51x of
#: their pace without a sweep, where an on-demand sweep (no rest) leaves them 0.11x.
BACKGROUND_REST = 1.0
#: Seconds :meth:`Expiry.close` waits for the background sweeper to finish the thread it
#: is sweeping.
SWEEPER_STOP_TIMEOUT = 30.0
#: Errors that stop the sweep of one thread only (its key is missing, its data damaged):
#: the thread is reported as kept and tried again at the next sweep.
_REFUSALS = (
    errors.KeyUnavailableError,
    errors.KeyMismatchError,
    errors.KeyShreddedError,
    errors.CorruptionError,
)
#: Errors that keep a read's refresh from being written; the read itself succeeds.
_REFRESH_FAILURES = (errors.BusyTimeoutError, errors.StorageError, errors.ReadOnlyError)


class Expiry(Reads, Maintenance):
    """Threads that expire (see the module docstring)."""

    def _setup(self) -> None:
        super()._setup()
        ttl = self.ttl
        if ttl is None:
            return
        if self.db.readonly:
            if ttl.refresh_on_read or ttl.sweep_interval is not None:
                log.info(
                    "%s is open read-only: its LangGraph threads are neither refreshed by "
                    "reads nor swept by this saver",
                    self.db.path,
                )
            return
        if ttl.sweep_interval is not None:
            self._sweeper = Sweeper(
                self._background_sweep, ttl.sweep_interval.total_seconds(), self.db.path
            )
            self._sweeper.start()

    def close(self) -> None:
        """Stop the background sweeper (a sweep in progress stops after the thread it is
        sweeping; waited for up to :data:`SWEEPER_STOP_TIMEOUT` seconds), then close the
        database if the saver opened it (idempotent)."""
        sweeper = self._sweeper
        if sweeper is not None and not sweeper.stop(SWEEPER_STOP_TIMEOUT):
            log.warning(
                "the TTL sweeper of %s did not stop within %g s; closing anyway",
                self.db.path,
                SWEEPER_STOP_TIMEOUT,
            )
        super().close()

    # -- the sweep ------------------------------------------------------------------------

    def sweep_expired(self, *, limit: int | None = None, dry_run: bool = False) -> TTLSweepReport:
        """Sweep the threads whose TTL ran out (``ttl=ThreadTTL(...)`` of the saver): each
        thread not active within ``default_ttl`` is deleted (``"delete"``, as by
        :meth:`delete_thread`) or pruned to its newest checkpoint (``"keep_latest"``, as by
        :meth:`prune`), oldest first, at most ``limit`` of them (None: all). Pinned
        checkpoints stay (their thread is reported as kept); a ``copy_thread`` fork is a
        thread of its own, with its own TTL. ``dry_run`` changes nothing and reports what
        would be done. The space goes back through ckptdb's GC, as for ``delete_thread``.

        The background sweeper (``sweep_interval``) runs this same sweep; two sweeps of one
        saver take turns."""
        return self._sweep(limit, dry_run, None)

    @staticmethod
    def _rest(seconds: float, stopping: threading.Event | None) -> None:
        """Let the handle go between two threads: even a zero rest yields, so that a put
        waiting for the handle's lock in another Python thread can take it now (the lock is
        not fair: without the yield the sweep takes it straight back)."""
        if stopping is not None and seconds > 0:
            stopping.wait(seconds)  # close() need not wait for the rest
        else:
            time.sleep(max(seconds, 0.0))

    def _background_sweep(self, stopping: threading.Event) -> TTLSweepReport:
        return self._sweep(None, False, stopping, BACKGROUND_REST)

    def _sweep(
        self,
        limit: int | None,
        dry_run: bool,
        stopping: threading.Event | None,
        rest: float = 0.0,
    ) -> TTLSweepReport:
        """The sweep (see :meth:`sweep_expired`); ``stopping`` ends it after the current
        thread; after each thread it rests ``rest`` times as long as that thread took."""
        ttl = self.ttl
        if ttl is None:
            raise errors.InvalidInputError(
                "this saver has no TTL: create it with ttl=ThreadTTL(...) to sweep expired threads"
            )
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 1
        ):
            raise errors.InvalidInputError(f"limit must be a positive int or None, got {limit!r}")
        if self.db.readonly and not dry_run:
            raise errors.ReadOnlyError(
                f"{self.db.path} is open read-only: a sweep that deletes needs a read-write "
                "saver (dry_run=True only reports)"
            )
        started = time.perf_counter()
        idle_before = self.db.clock() - ttl.ttl_ms
        expired: builtins.list[str] = []
        kept: builtins.list[KeptThread] = []
        deleted = 0
        complete = True
        with self._sweep_lock:
            after: tuple[int, str] | None = None
            met = 0
            while self._has_activity:
                room = ttl.batch if limit is None else min(ttl.batch, limit - met)
                with self.db.read_session() as s:
                    page = activity.idle(s, idle_before, max(room, 1), after)
                if not page:
                    break
                if room == 0 or (stopping is not None and stopping.is_set()):
                    complete = False  # expired threads remain
                    break
                for at_ms, thread_id in page:
                    if stopping is not None and stopping.is_set():
                        break
                    after = (at_ms, thread_id)
                    met += 1
                    began = time.perf_counter()
                    outcome = self._expire(thread_id, idle_before, ttl, dry_run)
                    self._rest((time.perf_counter() - began) * rest, stopping)
                    if outcome is None:
                        continue  # active again since the sweep began
                    count, why = outcome
                    deleted += count
                    if why is None:
                        expired.append(thread_id)
                    else:
                        kept.append(why)
        return TTLSweepReport(
            strategy=ttl.strategy,
            dry_run=dry_run,
            idle_before=models.from_ms(idle_before),
            threads_expired=expired,
            threads_kept=kept,
            checkpoints_deleted=deleted,
            complete=complete,
            took_s=time.perf_counter() - started,
        )

    def _expire(
        self, thread_id: str, idle_before: int, ttl: ThreadTTL, dry_run: bool
    ) -> tuple[int, KeptThread | None] | None:
        """Sweep one expired thread: (LangGraph checkpoints gone, why something stayed or
        None); None when the thread was active since ``idle_before`` after all."""
        with self.db.read_session() as s:
            at_ms = activity.touched_at(s, thread_id)
            before = self._checkpoint_count(s, thread_id)
        if at_ms is None or at_ms >= idle_before:
            return None
        try:
            if dry_run:
                gone = before if ttl.strategy == "delete" else self._prunable(thread_id)
            else:
                if ttl.strategy == "delete":
                    self.delete_thread(thread_id)
                else:
                    self.prune([thread_id], strategy="keep_latest")
                    with self.db.write_session() as s:
                        activity.forget(s, thread_id, idle_before_ms=idle_before)
                    self._cache.put_touched(thread_id, None)
                with self.db.read_session() as s:
                    gone = max(0, before - self._checkpoint_count(s, thread_id))
        except _REFUSALS as exc:
            log.warning("TTL sweep: LangGraph thread %r stays for now: %s", thread_id[:80], exc)
            return 0, KeptThread(
                thread_id=thread_id, reason="refused", detail=f"{exc.code}: {exc.message}"
            )
        return gone, self._why_kept(thread_id, ttl, dry_run)

    def _checkpoint_count(self, s: Session, thread_id: str) -> int:
        return int(s.scalar("SELECT count(*) FROM lg_checkpoint WHERE thread_id = ?", (thread_id,)))

    def _prunable(self, thread_id: str) -> int:
        """LangGraph checkpoints ``prune(keep_latest)`` would delete from the thread."""
        doomed = 0
        for _namespace, ns in self._namespaces(thread_id):
            rows = self._remaining(thread_id, ns)
            if rows:
                doomed += len(rows) - len(self._needed_ancestors(rows))
        return doomed

    def _why_kept(self, thread_id: str, ttl: ThreadTTL, dry_run: bool) -> KeptThread | None:
        """Why ckptdb data of a swept thread stays: pinned checkpoints, or (deleting) a
        namespace still shared with another thread; None when nothing stays."""
        if ttl.strategy == "delete" and not dry_run:
            # delete_thread unregisters only the namespaces it dropped.
            with self.db.read_session() as s:
                namespaces = [
                    (str(n), str(ns))
                    for n, ns in s.execute(
                        "SELECT namespace, checkpoint_ns FROM lg_namespace WHERE thread_id = ?",
                        (thread_id,),
                    )
                ]
        else:
            namespaces = self._namespaces(thread_id)
        for namespace, _ns in namespaces:
            pins = self.db.pins(namespace)
            if pins:
                names = ", ".join(p.name for p in pins)
                what = (
                    f"ckptdb namespace {namespace} stays with its checkpoints (pinned: {names});"
                    " LangGraph no longer lists the thread"
                    if ttl.strategy == "delete"
                    else f"pinned checkpoints of ckptdb namespace {namespace} stay ({names})"
                )
                return KeptThread(thread_id=thread_id, reason="pinned", detail=what)
        if ttl.strategy == "delete":
            for namespace, ns in namespaces:
                if not dry_run or (
                    self._shared_pending and self._holds_others(namespace, thread_id, ns)
                ):
                    return KeptThread(
                        thread_id=thread_id,
                        reason="shared",
                        detail=f"ckptdb namespace {namespace} also holds another thread's"
                        " checkpoints (a file written before langgraph schema version 3)",
                    )
        return None

    # -- refresh on read ------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """See :meth:`Reads.get_tuple`; with ``ThreadTTL(refresh_on_read=True)`` a thread
        found restarts its TTL."""
        found = super().get_tuple(config)
        if found is not None and self._refreshes_reads:
            self._refresh_read(str(config["configurable"]["thread_id"]))
        return found

    def _pages(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[builtins.list[CheckpointTuple]]:
        pages = super()._pages(config, filter, before, limit)
        if config is None or not self._refreshes_reads:
            return pages
        return self._refreshing(pages, str(config["configurable"]["thread_id"]))

    def _refreshing(
        self, pages: Iterator[builtins.list[CheckpointTuple]], thread_id: str
    ) -> Iterator[builtins.list[CheckpointTuple]]:
        """``pages``, refreshing the thread once it is found (its first page)."""
        first = True
        for page in pages:
            if first:
                first = False
                self._refresh_read(thread_id)
            yield page

    @property
    def _refreshes_reads(self) -> bool:
        ttl = self.ttl
        return ttl is not None and ttl.refresh_on_read and not self.db.readonly

    def _refresh_read(self, thread_id: str) -> None:
        """Restart the thread's TTL after a read (throttled like a put's refresh), in a
        small write of its own. Best effort: a read never fails because this could not be
        written (the lock busy past the timeout, a full disk); that is logged."""
        at_ms = self._activity_due(thread_id)
        if at_ms is None:
            return
        try:
            with self.db.write_session() as s:
                activity.touch(s, thread_id, at_ms)
        except _REFRESH_FAILURES as exc:
            log.warning(
                "the read of LangGraph thread %r did not refresh its TTL: %s", thread_id[:80], exc
            )
            return
        self._cache.put_touched(thread_id, at_ms)
