"""The quota commands: ``ckptdb quota set|list|clear``, what the namespaces under a prefix
may hold."""

from __future__ import annotations

import click

from .command import GroupDbLast, command, json_option, open_database
from .render import quotas as render


@click.group(cls=GroupDbLast)
def quota() -> None:
    """Quotas: what the namespaces under a prefix may hold.

    Usage: ckptdb quota set|list|clear DB [PREFIX] [OPTIONS]. Every commit under PREFIX
    ('' = every namespace) is checked inside its transaction: one that would pass a limit
    is refused (exit 16, nothing written) or, with --on-exceed evict, the oldest
    checkpoints under the quota that nothing protects (CURRENT, fallbacks, pins, stored
    retention policies) are deleted to make room, with a quota_evict receipt.
    """


@quota.command(name="set")
@click.argument("db")
@click.argument("prefix")
@click.option("--max-checkpoints", type=int, help="At most this many stored checkpoints.")
@click.option(
    "--max-bytes", type=int, help="At most this many logical bytes (sum of checkpoint sizes)."
)
@click.option(
    "--applies-to",
    type=click.Choice(["each", "total"]),
    default="each",
    show_default=True,
    help="each: every namespace under PREFIX on its own; total: all of them together.",
)
@click.option(
    "--on-exceed",
    type=click.Choice(["refuse", "evict"]),
    default="refuse",
    show_default=True,
    help="Refuse the commit, or evict the oldest unprotected checkpoints to make room.",
)
@json_option
@command
def quota_set(
    db: str,
    prefix: str,
    max_checkpoints: int | None,
    max_bytes: int | None,
    applies_to: str,
    on_exceed: str,
    as_json: bool,
) -> None:
    """Store or replace the quota of PREFIX ('' = all).

    Give at least one limit. --json: the stored quota (prefix, applies_to, max_checkpoints,
    max_bytes, on_exceed, updated_at)."""
    with open_database(db) as handle:
        stored = handle.set_quota(
            prefix,
            max_checkpoints=max_checkpoints,
            max_bytes=max_bytes,
            applies_to=applies_to,  # type: ignore[arg-type]
            on_exceed=on_exceed,  # type: ignore[arg-type]
        )
    render.quota_stored(stored, as_json)


@quota.command(name="list")
@click.argument("db")
@json_option
@command
def quota_list(db: str, as_json: bool) -> None:
    """Show the stored quotas, by prefix.

    --json: a list of quotas."""
    with open_database(db, readonly=True) as handle:
        stored = handle.quotas()
    render.quotas(stored, as_json)


@quota.command(name="clear")
@click.argument("db")
@click.argument("prefix")
@click.option(
    "--applies-to",
    type=click.Choice(["each", "total"]),
    default="each",
    show_default=True,
    help="Which quota of PREFIX to remove.",
)
@json_option
@command
def quota_clear(db: str, prefix: str, applies_to: str, as_json: bool) -> None:
    """Remove the quota of PREFIX.

    --json: prefix, applies_to, removed."""
    with open_database(db) as handle:
        removed = handle.clear_quota(prefix, applies_to=applies_to)  # type: ignore[arg-type]
    render.quota_cleared(prefix, applies_to, removed, as_json)


COMMANDS = [quota]
