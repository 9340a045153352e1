"""Threads that expire: the settings of a saver's per-thread time-to-live
(:class:`ThreadTTL`), the report of a sweep (:class:`TTLSweepReport`) and the background
thread that sweeps at an interval (:class:`Sweeper`).

The model is the one of LangGraph's hosted checkpointer: a default TTL for every thread,
a strategy (``"delete"`` the thread, or ``"keep_latest"``: prune it to its newest
checkpoint) and a sweep interval; durations given as numbers are minutes, as there. What
the sweep does is :mod:`.expiry`'s; when each thread was last active, :mod:`.activity`'s.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ... import errors

log = logging.getLogger(__name__)

#: What a sweep does with an expired thread.
Strategy = Literal["delete", "keep_latest"]
#: The sweep interval when none is given (LangGraph's hosted default).
DEFAULT_SWEEP_INTERVAL = timedelta(minutes=60)
#: The shortest interval between two refreshes of one thread by one saver: a put stays as
#: cheap as without a TTL (one more statement at most once a second per thread).
MIN_REFRESH = timedelta(seconds=1)
#: Refreshes per TTL at most: a thread's recorded activity is late by at most 1% of it.
REFRESHES_PER_TTL = 100
#: The longest TTL or interval accepted (about 100 years, like ckptdb's other durations).
MAX_DURATION = timedelta(days=100 * 365)


def _duration(name: str, value: timedelta | float, *, zero: bool) -> timedelta:
    """``value`` (a timedelta, or a number of minutes) as a timedelta; InvalidInputError
    unless it is finite, positive (or zero when ``zero``) and at most MAX_DURATION."""
    if isinstance(value, timedelta):
        out = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value) or abs(value) > MAX_DURATION / timedelta(minutes=1):
            raise errors.InvalidInputError(f"{name} must be a finite duration, got {value!r}")
        out = timedelta(minutes=value)
    else:
        raise errors.InvalidInputError(
            f"{name} must be a timedelta or a number of minutes, got {type(value).__name__}"
        )
    if out < timedelta(0) or (out == timedelta(0) and not zero) or out > MAX_DURATION:
        raise errors.InvalidInputError(
            f"{name} must be {'at least 0' if zero else 'more than 0'} and at most 100 years,"
            f" got {out}"
        )
    return out


@dataclass(frozen=True, slots=True, init=False)
class ThreadTTL:
    """A time-to-live for every LangGraph thread of a saver
    (``CkptdbSaver(path, ttl=ThreadTTL(timedelta(days=30)))``).

    A thread expires ``default_ttl`` after its last activity: a put or pending write (and,
    with ``refresh_on_read``, a ``get_tuple`` or ``list`` of it). Expired threads are swept
    oldest first, ``batch`` at a time: ``strategy="delete"`` deletes each one as
    ``delete_thread`` does, ``"keep_latest"`` prunes it to its newest checkpoint as
    ``prune`` does (it then expires again only after new activity). Every
    ``sweep_interval`` a background thread of the saver sweeps; None starts none (call
    ``saver.sweep_expired()``, or run ``ckptdb langgraph expire``). Numbers are minutes,
    as in LangGraph's hosted checkpointer settings."""

    default_ttl: timedelta
    strategy: Strategy
    sweep_interval: timedelta | None
    refresh_on_read: bool
    batch: int

    def __init__(
        self,
        default_ttl: timedelta | float,
        strategy: Strategy = "delete",
        sweep_interval: timedelta | float | None = DEFAULT_SWEEP_INTERVAL,
        refresh_on_read: bool = False,
        batch: int = 100,
    ) -> None:
        if strategy not in ("delete", "keep_latest"):
            raise errors.InvalidInputError(
                f"unknown TTL strategy {strategy!r}; use 'delete' or 'keep_latest'"
            )
        if not isinstance(refresh_on_read, bool):
            raise errors.InvalidInputError("refresh_on_read must be True or False")
        if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= 10_000:
            raise errors.InvalidInputError(f"batch must be an int from 1 to 10000, got {batch!r}")
        interval = (
            None
            if sweep_interval is None
            else _duration("sweep_interval", sweep_interval, zero=False)
        )
        # Frozen: the fields are set once, here, already checked and normalized.
        object.__setattr__(self, "default_ttl", _duration("default_ttl", default_ttl, zero=False))
        object.__setattr__(self, "strategy", strategy)
        object.__setattr__(self, "sweep_interval", interval)
        object.__setattr__(self, "refresh_on_read", refresh_on_read)
        object.__setattr__(self, "batch", batch)

    @property
    def ttl_ms(self) -> int:
        """``default_ttl`` in milliseconds."""
        return int(self.default_ttl / timedelta(milliseconds=1))

    @property
    def refresh_ms(self) -> int:
        """How long one saver lets a thread's recorded activity lag behind (milliseconds):
        ``max(1 s, default_ttl / 100)``."""
        return max(int(MIN_REFRESH / timedelta(milliseconds=1)), self.ttl_ms // REFRESHES_PER_TTL)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KeptThread(_Model):
    """An expired thread the sweep could not sweep as its strategy says, and why."""

    thread_id: str
    reason: Literal["pinned", "shared", "refused"] = Field(
        description="pinned: pinned checkpoints keep (part of) its ckptdb data; shared: its"
        " ckptdb namespace still holds another thread's checkpoints (a file written before"
        " langgraph schema version 3, not yet separated); refused: an error stopped it"
        " (tried again at the next sweep)"
    )
    detail: str


class TTLSweepReport(_Model):
    """What one sweep of expired threads did (or, in a dry run, would do)."""

    strategy: Strategy
    dry_run: bool
    idle_before: datetime = Field(
        description="threads last active before this time (now minus the TTL) were expired"
    )
    threads_expired: list[str] = Field(
        description="expired threads swept as the strategy says (deleted, or pruned to their"
        " newest checkpoint), oldest first"
    )
    threads_kept: list[KeptThread] = Field(
        description="expired threads of which something stayed, with the reason"
    )
    checkpoints_deleted: int = Field(
        description="LangGraph checkpoints that are gone (no longer read or listed)"
    )
    complete: bool = Field(
        description="False when the limit, or the saver closing, stopped the sweep before"
        " every expired thread was met"
    )
    took_s: float


class Sweeper:
    """A daemon thread that calls ``sweep`` every ``interval`` seconds, the first time
    right away (a process that lives shorter than the interval still sweeps), until
    :meth:`stop`. An error is logged with its traceback and the next interval tries again:
    the thread never dies of one."""

    def __init__(
        self, sweep: Callable[[threading.Event], TTLSweepReport], interval: float, name: str
    ) -> None:
        self._sweep = sweep
        self._interval = interval
        self._name = name
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"ckptdb-ttl {name}", daemon=True)

    def start(self) -> None:
        """Start sweeping."""
        self._thread.start()

    def stop(self, timeout: float) -> bool:
        """Ask the thread to stop (a sweep in progress stops after the thread it is
        sweeping) and wait up to ``timeout`` seconds; True when it has stopped."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                report = self._sweep(self._stopping)
            except errors.ClosedError:
                log.info("TTL sweeper of %s stops: the database was closed", self._name)
                return
            except Exception:
                # A background thread has no caller to raise to: say it loudly, go on.
                log.exception(
                    "TTL sweep of %s failed; trying again in %g s", self._name, self._interval
                )
            else:
                level = (
                    logging.INFO if report.threads_expired or report.threads_kept else logging.DEBUG
                )
                log.log(
                    level,
                    "TTL sweep of %s: %d threads expired (%s), %d kept, %d checkpoints deleted,"
                    " %.2f s",
                    self._name,
                    len(report.threads_expired),
                    report.strategy,
                    len(report.threads_kept),
                    report.checkpoints_deleted,
                    report.took_s,
                )
            self._stopping.wait(self._interval)
