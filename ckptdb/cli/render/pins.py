"""Renderers of the pin commands: pin, unpin, pins."""

from __future__ import annotations

from ...models import Pin
from ..output import echo, print_json, table, when


def pinned(pin: Pin, as_json: bool) -> None:
    """``pin``: the pin now protecting a checkpoint."""
    if as_json:
        print_json(pin)
    else:
        echo(f"pinned {pin.checkpoint_id[:12]} ({pin.namespace}) as {pin.name}")


def unpinned(pin: Pin, as_json: bool) -> None:
    """``unpin``: the pin that was removed."""
    if as_json:
        print_json(pin)
    else:
        echo(f"unpinned {pin.name} ({pin.checkpoint_id[:12]})")


def pins(rows: list[Pin], as_json: bool) -> None:
    """``pins``: one row per pin."""
    if as_json:
        print_json(rows)
        return
    table(
        ["pin", "checkpoint", "namespace", "created", "note"],
        [[p.name, p.checkpoint_id[:12], p.namespace, when(p.created_at), p.note] for p in rows],
    )
