"""What GC's grace period held back, for people: how much, when it becomes collectable and
the command that collects it now (``--json`` has it as the report's ``grace_held``)."""

from __future__ import annotations

import shlex
from datetime import datetime, timedelta

from ...models import GcReport
from ..output import echo, size

_UNITS = (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60))


def held_back(report: GcReport, db: str, as_json: bool) -> None:
    """``gc``: one line on the unreferenced chunks the grace period kept, if any."""
    held = report.grace_held
    if as_json or not held.chunks or held.first_free_at is None or held.all_free_at is None:
        return
    first = _minute_after(held.first_free_at)
    last = _minute_after(held.all_free_at)
    when = (
        f"free after {_clock(last, report.at)}"
        if first == last
        else f"free from {_clock(first, report.at)} (all after {_clock(last, report.at)})"
    )
    verb = "would be held" if report.dry_run else "held"
    chunks = "1 chunk" if held.chunks == 1 else f"{held.chunks} chunks"
    echo(
        f"{size(held.bytes)} in {chunks} {verb} by the {_duration(report.grace_seconds)} grace "
        f"period; {when}, or run `ckptdb gc {shlex.quote(db)} --grace 0s` when no commit is "
        "running"
    )


def _minute_after(moment: datetime) -> datetime:
    """``moment`` rounded up to the minute: "free after 14:05" holds for all of it."""
    whole = moment.replace(second=0, microsecond=0)
    return whole if whole == moment else whole + timedelta(minutes=1)


def _clock(moment: datetime, now: datetime) -> str:
    """``14:05 UTC``, with the date when it is not ``now``'s."""
    return moment.strftime("%H:%M UTC" if moment.date() == now.date() else "%Y-%m-%d %H:%M UTC")


def _duration(seconds: float) -> str:
    """A grace period as it is written on the command line: ``1h``, ``90m``, ``45s``."""
    for unit, length in _UNITS:
        if seconds >= length and seconds % length == 0:
            return f"{int(seconds // length)}{unit}"
    return f"{seconds:g}s"
