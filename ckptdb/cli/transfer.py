"""Commands that move checkpoints between files and stores: export, import, import-from."""

from __future__ import annotations

import sys

import click

from .. import errors
from ..importers import IMPORTERS, run_import
from .app import EXIT_IMPORT_SKIPPED
from .command import command, create_option, json_option, open_database, quiet_option
from .progress import progress_bar
from .render import transfer as render


@click.command(name="export")
@click.argument("db")
@click.argument("dest", type=click.Path())
@click.option("--namespace", "namespaces", multiple=True, help="Export only these (repeatable).")
@click.option("--since", metavar="CHECKPOINT", help="Only from this checkpoint forward.")
@quiet_option
@json_option
@command
def export_cmd(
    db: str, dest: str, namespaces: tuple[str, ...], since: str | None, quiet: bool, as_json: bool
) -> None:
    """Write a new self-contained ckptdb file DEST with the selected lineage."""
    with open_database(db) as handle, progress_bar("exporting", as_json or quiet) as progress:
        receipt = handle.export(
            dest, namespaces=list(namespaces) or None, since=since, progress=progress
        )
    render.transfer_receipt(receipt, as_json)


@click.command(name="import")
@click.argument("db")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.option("--namespace", "namespaces", multiple=True, help="Import only these (repeatable).")
@click.option("--overwrite", is_flag=True, help="Move conflicting CURRENT pointers anyway.")
@create_option
@quiet_option
@json_option
@command
def import_cmd(
    db: str,
    source: str,
    namespaces: tuple[str, ...],
    overwrite: bool,
    create: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Merge the checkpoints of the ckptdb file SOURCE into DB (idempotent).

    DB must exist (`ckptdb init DB`) unless --create is given."""
    with (
        open_database(db, create=create) as handle,
        progress_bar("importing", as_json or quiet) as progress,
    ):
        receipt = handle.import_file(
            source, namespaces=list(namespaces) or None, overwrite=overwrite, progress=progress
        )
    render.transfer_receipt(receipt, as_json)
    if receipt.conflicts:
        sys.exit(errors.ConflictError.exit_status)


@click.command(name="import-from")
@click.argument("kind", type=click.Choice(sorted(IMPORTERS)))
@click.argument("source", type=click.Path(exists=True))
@click.argument("db")
@click.option("--namespace", help="Namespace to import into (default: derived from the source).")
@click.option("--dry-run", is_flag=True, help="Report what would be imported; write nothing.")
@create_option
@quiet_option
@json_option
@command
def import_from(
    kind: str,
    source: str,
    db: str,
    namespace: str | None,
    dry_run: bool,
    create: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Import checkpoints from another store (idempotent: a second run imports nothing new).

    DB must exist (`ckptdb init DB`) unless --create is given.

    \b
    KIND is one of:
      fs-store          a content-addressed checkpoint directory (checkpoints/<id>/manifest.json,
                        files/<digest>, CURRENT)
      json-dir          a directory of one JSON document per checkpoint (one namespace per run)
      state-dir         an engine-state directory with a manifest written last
      langgraph-sqlite  a LangGraph SqliteSaver database (needs ckptdb[langgraph])
    """
    with (
        open_database(db, create=create) as handle,
        progress_bar("importing", as_json or quiet) as progress,
    ):
        report = run_import(
            handle, kind, source, namespace=namespace, dry_run=dry_run, progress=progress
        )
    render.import_report(report, as_json)
    if report.skipped:
        sys.exit(EXIT_IMPORT_SKIPPED)


COMMANDS = [export_cmd, import_cmd, import_from]
