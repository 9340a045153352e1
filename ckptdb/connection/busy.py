"""Waiting for a lock another connection holds: SQLite's busy handler, polling.

SQLite's default back-off hands the lock over in ~29 ms; polling about every millisecond
hands it over in <1 ms, so concurrent writers queue instead of failing. Past the timeout
the statement fails with SQLITE_BUSY, which the caller sees as ``BusyTimeoutError``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

DEFAULT_BUSY_TIMEOUT = 30.0
POLL_SECONDS = 0.001


class LockWaits:
    """How often and how long this connection waited for a lock another one held, and how
    long it is willing to wait (``timeout``; None = forever)."""

    def __init__(self, timeout: float | None = DEFAULT_BUSY_TIMEOUT) -> None:
        self.waits = 0
        self.seconds = 0.0
        self.timeout = timeout


def busy_handler(stats: LockWaits) -> Callable[[int], bool]:
    """The busy handler of one connection: polls until ``stats.timeout``, counting the
    waits into ``stats``."""
    deadline_box: list[float] = [0.0, 0.0]

    def handler(count: int) -> bool:
        now = time.monotonic()
        if count == 0:
            timeout = stats.timeout
            deadline_box[0] = now + (timeout if timeout is not None else float("inf"))
            deadline_box[1] = now
            stats.waits += 1
        if now >= deadline_box[0]:
            stats.seconds += now - deadline_box[1]
            return False
        # Poll every millisecond at first (a commit usually hands the lock over within a
        # few), then back off with jitter up to 20 ms: every retry starts and ends a read
        # transaction, and a crowd of writers retrying at 1 kHz each keeps dirtying the
        # shared-memory index, which on ext4 can stall the lock holder's fsync for seconds.
        delay = POLL_SECONDS if count < 10 else min(0.02, 0.001 * 1.3 ** (count - 10))
        time.sleep(delay * (0.5 + random.random()))  # noqa: S311 - jitter, not crypto
        stats.seconds += time.monotonic() - now
        return True

    return handler
