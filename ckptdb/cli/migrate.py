"""The migration commands: ``ckptdb migrate status|plan|up|history``. They open DB without
migrating it (and never create one), so a file that is behind can be inspected first."""

from __future__ import annotations

import click

from .arguments import parse_backup
from .command import GroupDbLast, command, json_option, open_database
from .render import migrate as render


@click.group(cls=GroupDbLast)
def migrate() -> None:
    """Inspect and apply schema migrations: status, plan, up, history.

    Usage: ckptdb migrate status|plan|up|history DB [OPTIONS].
    """


@migrate.command(name="status")
@click.argument("db")
@json_option
@command
def migrate_status(db: str, as_json: bool) -> None:
    """The file's version, this ckptdb's version and what is pending."""
    with open_database(db, readonly=True, migration=True) as handle:
        status = handle.migration_status()
    render.status(status, as_json)


@migrate.command(name="plan")
@click.argument("db")
@click.option("--to", type=click.IntRange(min=1), help="Stop at this version.")
@json_option
@command
def migrate_plan(db: str, to: int | None, as_json: bool) -> None:
    """Print the SQL that `up` would run."""
    with open_database(db, readonly=True, migration=True) as handle:
        plan = handle.migration_plan(to=to)
    render.plan(plan, as_json)


@migrate.command(name="up")
@click.argument("db")
@click.option("--to", type=click.IntRange(min=1), help="Stop at this version.")
@click.option("--backup", "backup_path", type=click.Path(), help="Where to write the backup.")
@click.option("--no-backup", is_flag=True, help="Do not take a backup first.")
@click.option(
    "--timeout",
    default=None,
    type=click.FloatRange(min=0),
    help="Seconds to wait for another writer before refusing (default: --busy-timeout, else 30).",
)
@json_option
@command
def migrate_up(
    db: str,
    to: int | None,
    backup_path: str | None,
    no_backup: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Back up (verified), then apply pending migrations, each in its own transaction.

    With a PostgreSQL URL as DB: every pending migration in one transaction, no backup file
    (--backup is refused; copy the database with pg_dump)."""
    backup = parse_backup(backup_path, no_backup)
    with open_database(db, migration=True, busy_timeout=timeout) as handle:
        result = handle.migrate(to=to, backup=backup)
    render.applied(result, as_json)


@migrate.command(name="history")
@click.argument("db")
@json_option
@command
def migrate_history(db: str, as_json: bool) -> None:
    """Applied migrations with checksum, time and the ckptdb version that applied them."""
    with open_database(db, readonly=True, migration=True) as handle:
        rows = handle.migration_history()
    render.history(rows, as_json)


COMMANDS = [migrate]
