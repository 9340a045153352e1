"""Byte progress on stderr for the commands that move bytes (commit, checkout, export,
import, verify, gc, import-from): click's progress bar, with the rate beside it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from .output import size


class _Bar:
    """A click progress bar in bytes on stderr, with the rate beside it; click adds the
    percentage and the ETA. One bar per phase (verify has several)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.phase: str | None = None
        self.bar: Any = None
        self.started = time.monotonic()

    def _rate(self, _item: object) -> str:
        elapsed = time.monotonic() - self.started
        if self.bar is None or elapsed <= 0:
            return ""
        return f"{size(self.bar.pos)} of {size(self.bar.length)}, {size(self.bar.pos / elapsed)}/s"

    def update(self, *args: Any) -> None:
        """The library's callback: ``(done, total)`` or ``(phase, done, total)``."""
        phase = str(args[0]) if len(args) == 3 else None
        done, total = int(args[-2]), int(args[-1])
        if self.bar is None or phase != self.phase:
            self.close()
            self.phase, self.started = phase, time.monotonic()
            label = self.label if phase is None else f"{self.label} {phase}"
            self.bar = click.progressbar(
                length=max(total, 1),
                label=label,
                file=sys.stderr,
                show_eta=True,
                show_percent=True,
                item_show_func=self._rate if phase in (None, "chunk bytes") else None,
            )
            self.bar.__enter__()
        self.bar.length = max(total, 1)
        self.bar.update(max(done - self.bar.pos, 0))

    def close(self) -> None:
        """End the current phase's bar."""
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


@contextmanager
def progress_bar(label: str, quiet: bool) -> Iterator[Callable[..., None] | None]:
    """Byte progress (rate, ETA) on stderr when it is a terminal; nothing when piped, with
    --quiet or with --json."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    bar = _Bar(label)
    try:
        yield bar.update
    finally:
        bar.close()
