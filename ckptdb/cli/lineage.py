"""Commands on lineage: namespaces, log, diff, history, receipts."""

from __future__ import annotations

import click

from . import suggest
from .command import command, json_option, open_database
from .render import lineage as render


@click.command()
@click.argument("db")
@json_option
@command
def namespaces(db: str, as_json: bool) -> None:
    """List namespaces with their CURRENT checkpoint."""
    with open_database(db, readonly=True) as handle:
        rows = handle.namespaces()
    render.namespaces(rows, as_json)


@click.command()
@click.argument("db")
@click.argument("namespace")
@click.option("--limit", type=click.IntRange(min=1), help="Show at most N checkpoints.")
@click.option("--graph", is_flag=True, help="Draw the lineage like `git log --graph`.")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Also list stored checkpoints no longer on the CURRENT lineage (pinned, retained).",
)
@json_option
@command
def log(
    db: str, namespace: str, limit: int | None, graph: bool, show_all: bool, as_json: bool
) -> None:
    """Show the lineage of NAMESPACE, newest first.

    Markers: * current, ~ fallback, P pinned; with --all, o marks a checkpoint that CURRENT
    does not descend from. --graph draws branches (commits made on an older base of the
    same namespace, e.g. a rollback or LangGraph time travel) like `git log --graph`;
    without --all it shows the lineage of CURRENT and of the fallback. Lanes past the 16th
    share one column with a count, so a line stays short however many branches there are:
    `*+N` is the checkpoint and N other lanes, `|+N` N+1 lanes passing. Metadata is shown
    on one line (nested keys dotted, e.g. langgraph.step=1), cut at 240 characters.
    """
    with open_database(db, readonly=True) as handle, suggest.namespaces(handle, namespace):
        if graph or show_all:
            result = handle.log(namespace, all=show_all, limit=limit)
        else:  # the CURRENT lineage only
            full = handle.log(namespace)
            nodes = [n for n in full.nodes if n.on_lineage][:limit]
            result = full.model_copy(update={"nodes": nodes})
    render.log(result, graph, as_json)


@click.command()
@click.argument("db")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@json_option
@command
def diff(db: str, a: str, b: str, as_json: bool) -> None:
    """Show what changed from checkpoint A to checkpoint B.

    Entries added (+), removed (-) and changed (~) with their sizes and, for changed ones,
    how many bytes B still shares with A by content; metadata keys that differ; and how A
    stands to B in the lineage (ancestor, descendant, siblings, unrelated).
    """
    with open_database(db, readonly=True) as handle, suggest.namespaces(handle, a, b):
        result = handle.diff(a, b)
    render.diff(result, as_json)


@click.command()
@click.argument("db")
@click.argument("namespace")
@click.option("--limit", type=click.IntRange(min=1))
@json_option
@command
def history(db: str, namespace: str, limit: int | None, as_json: bool) -> None:
    """Show every move of NAMESPACE's CURRENT pointer, newest first."""
    with open_database(db, readonly=True) as handle, suggest.namespaces(handle, namespace):
        moves = handle.history(namespace, limit=limit)
    render.history(moves, as_json)


@click.command()
@click.argument("db")
@click.option("--kind", help="Only receipts of this kind (fallback, verify, gc, import, ...).")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@json_option
@command
def receipts(db: str, kind: str | None, limit: int, as_json: bool) -> None:
    """List stored receipts, newest first."""
    with open_database(db, readonly=True) as handle:
        rows = handle.receipts(kind=kind, limit=limit)
    render.receipts(rows, as_json)


COMMANDS = [namespaces, log, diff, history, receipts]
