"""Commands on pins, the named references that protect a checkpoint from GC: pin, unpin,
pins."""

from __future__ import annotations

import click

from . import suggest
from .command import command, json_option, open_database
from .render import pins as render


@click.command()
@click.argument("db")
@click.argument("checkpoint")
@click.argument("name")
@click.option("--note", help="Why it is pinned.")
@click.option("--replace", is_flag=True, help="Move an existing pin of that name here.")
@json_option
@command
def pin(
    db: str, checkpoint: str, name: str, note: str | None, replace: bool, as_json: bool
) -> None:
    """Pin CHECKPOINT as NAME: protected from GC and every retention policy."""
    with open_database(db) as handle, suggest.namespaces(handle, checkpoint):
        result = handle.pin(checkpoint, name, note=note, replace=replace)
    render.pinned(result, as_json)


@click.command()
@click.argument("db")
@click.argument("name")
@json_option
@command
def unpin(db: str, name: str, as_json: bool) -> None:
    """Remove the pin NAME."""
    with open_database(db) as handle:
        result = handle.unpin(name)
    render.unpinned(result, as_json)


@click.command(name="pins")
@click.argument("db")
@click.option("--namespace", help="Only pins of this namespace.")
@json_option
@command
def pins_cmd(db: str, namespace: str | None, as_json: bool) -> None:
    """List pins with their checkpoints."""
    with open_database(db, readonly=True) as handle:
        rows = handle.pins(namespace)
    render.pins(rows, as_json)


COMMANDS = [pin, unpin, pins_cmd]
