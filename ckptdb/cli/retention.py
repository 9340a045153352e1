"""Commands that decide what is kept and delete the rest: gc, prune, drop-namespace and the
stored retention policies (``ckptdb retention show|set|clear``)."""

from __future__ import annotations

from typing import Any

import click

from .. import errors
from .arguments import keep_options, parse_metadata, parse_retention_policy
from .command import GroupDbLast, command, json_option, open_database, quiet_option
from .progress import progress_bar
from .render import grace as render_grace
from .render import retention as render


@click.command()
@click.argument("db")
@keep_options
@click.option("--namespace", "namespaces", multiple=True, help="Only these (repeatable).")
@click.option(
    "--grace",
    default="1h",
    show_default=True,
    metavar="DURATION",
    help="Keep unreferenced chunks touched within this (commits in flight may be staging "
    "them); the report says what it held back and until when. 0s: only when no commit runs.",
)
@click.option("--dry-run", is_flag=True, help="Show the exact plan; change nothing.")
@click.option(
    "--keep-history",
    type=click.IntRange(min=1),
    metavar="N",
    help="Also trim each namespace's pointer history to its newest N moves.",
)
@quiet_option
@json_option
@command
def gc(
    db: str,
    keep_rules: dict[str, Any],
    namespaces: tuple[str, ...],
    grace: str,
    dry_run: bool,
    keep_history: int | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Delete what retention does not keep and return the space to the OS.

    With --keep-* options that policy applies to every namespace in scope; without them each
    namespace's stored policy (`ckptdb retention`) applies, and a namespace with none keeps
    everything. Every CURRENT, fallback and pin is always kept.
    """
    policy = parse_retention_policy(keep_rules)
    with (
        open_database(db, readonly=dry_run) as handle,
        progress_bar("collecting", as_json or quiet) as progress,
    ):
        report = handle.gc(
            policy,
            namespaces=list(namespaces) or None,
            grace=grace,
            dry_run=dry_run,
            keep_history=keep_history,
            progress=progress,
        )
        policy_unset = policy is None and not handle.retention()
    render.gc_report(report, policy_unset, as_json)
    render_grace.held_back(report, db, as_json)


@click.command()
@click.argument("db")
@click.option(
    "--where",
    "where",
    multiple=True,
    required=True,
    metavar="KEY=VALUE",
    help="Metadata that must match (repeatable; VALUE parsed as JSON if valid).",
)
@click.option("--namespace", "namespaces", multiple=True, help="Only these (repeatable).")
@click.option("--dry-run", is_flag=True, help="Show what would be deleted.")
@json_option
@command
def prune(
    db: str, where: tuple[str, ...], namespaces: tuple[str, ...], dry_run: bool, as_json: bool
) -> None:
    """Delete checkpoints by metadata (e.g. --where run_id=r7); protected ones are kept."""
    with open_database(db) as handle:
        report = handle.prune(
            parse_metadata(where, None), namespaces=list(namespaces) or None, dry_run=dry_run
        )
    render.prune_report(report, as_json)


@click.command(name="drop-namespace")
@click.argument("db")
@click.argument("namespace")
@click.option("--force", is_flag=True, help="Also remove pins of its checkpoints.")
@click.option("--dry-run", is_flag=True, help="Show what would be deleted.")
@json_option
@command
def drop_namespace(db: str, namespace: str, force: bool, dry_run: bool, as_json: bool) -> None:
    """Delete NAMESPACE with its pointer, history and checkpoints."""
    with open_database(db, readonly=dry_run) as handle:
        report = handle.drop_namespace(namespace, force=force, dry_run=dry_run)
    render.dropped(namespace, report, as_json)


@click.group(cls=GroupDbLast)
def retention() -> None:
    """Stored retention policies that `ckptdb gc` applies by default.

    Usage: ckptdb retention show|set|clear DB [OPTIONS].
    """


@retention.command(name="show")
@click.argument("db")
@json_option
@command
def retention_show(db: str, as_json: bool) -> None:
    """Show stored policies ('*' is the database-wide default)."""
    with open_database(db, readonly=True) as handle:
        policies = handle.retention()
    render.policies(policies, as_json)


@retention.command(name="set")
@click.argument("db")
@keep_options
@click.option("--namespace", help="Set the policy of one namespace (default: database-wide).")
@json_option
@command
def retention_set(
    db: str, keep_rules: dict[str, Any], namespace: str | None, as_json: bool
) -> None:
    """Store a retention policy (at least one --keep-* rule)."""
    policy = parse_retention_policy(keep_rules)
    if policy is None:
        raise errors.InvalidInputError("give at least one --keep-* rule")
    with open_database(db) as handle:
        handle.set_retention(policy, namespace=namespace)
    render.policy_stored(namespace, policy, as_json)


@retention.command(name="clear")
@click.argument("db")
@click.option("--namespace", help="Clear one namespace's policy (default: database-wide).")
@json_option
@command
def retention_clear(db: str, namespace: str | None, as_json: bool) -> None:
    """Remove a stored policy."""
    with open_database(db) as handle:
        removed = handle.clear_retention(namespace=namespace)
    render.policy_cleared(namespace, removed, as_json)


COMMANDS = [gc, prune, drop_namespace, retention]
