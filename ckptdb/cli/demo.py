"""``ckptdb demo``: the Quickstart tour, run on a file of the user's choosing."""

from __future__ import annotations

import click

from ..demo import run as run_demo
from .command import command
from .output import echo


@click.command()
@click.argument("db", default="demo.ckpt")
@command
def demo(db: str) -> None:
    """Run the Quickstart tour on DB (default demo.ckpt); your data is never damaged."""
    for line in run_demo(db):
        echo(line)


COMMANDS = [demo]
