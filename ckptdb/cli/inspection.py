"""Commands that look at the whole file: verify, stats, sql."""

from __future__ import annotations

import sys

import click

from .. import errors
from ..ops.query import DEFAULT_TIMEOUT as DEFAULT_QUERY_TIMEOUT
from .command import command, json_option, open_database, quiet_option
from .progress import progress_bar
from .render import inspection as render
from .sql_output import emit, interrupted, parse_params


@click.command()
@click.argument("db")
@click.option("--quick", is_flag=True, help="Structure, manifests and pointers; skip bytes.")
@quiet_option
@json_option
@command
def verify(db: str, quick: bool, quiet: bool, as_json: bool) -> None:
    """Verify the whole database; exit status 0 only when everything verifies."""
    with open_database(db) as handle, progress_bar("verifying", as_json or quiet) as progress:
        report = handle.verify(quick=quick, progress=progress)
    render.verify_report(report, as_json)
    if not report.ok:
        sys.exit(errors.CorruptionError.exit_status)


@click.command()
@click.argument("db")
@json_option
@command
def stats(db: str, as_json: bool) -> None:
    """File size, WAL size, free pages, counts and deduplication ratio.

    Then what each namespace holds: checkpoints, logical bytes (what quotas count) and
    stored bytes (of the distinct blobs and chunks it references; shared content counts in
    each namespace). The largest namespaces are shown; --json lists every one under
    `usage`."""
    with open_database(db, readonly=True) as handle:
        st = handle.stats()
    render.stats(st, as_json)


@click.command()
@click.argument("db")
@click.argument("query")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="Bind :NAME in QUERY to the text VALUE (repeatable).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_QUERY_TIMEOUT,
    show_default=True,
    help="Interrupt the query after SECONDS of work (0: no limit).",
)
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV.")
@command
def sql(
    db: str, query: str, params: tuple[str, ...], timeout: float, as_json: bool, as_csv: bool
) -> None:
    """Run one read-only SQL QUERY (writing statements are refused); rows are streamed.

    The file is opened read-only and anything that would write (INSERT/UPDATE/DELETE, DDL,
    ATTACH, VACUUM, transactions, pragmas that set a value) is refused before it runs (exit
    9). QUERY holds exactly one statement (exit 7 otherwise). --param NAME=VALUE binds :NAME
    (or $NAME, @NAME) to the text VALUE, e.g.
    `ckptdb sql DB "SELECT * FROM lineage WHERE namespace = :ns" --param ns=brain`; write
    CAST(:n AS INTEGER) where a number is needed. --timeout bounds SQLite's time on the
    query (exit 12); Ctrl-C interrupts it cleanly (exit 130). BLOBs print as x'..' (table,
    CSV) or {"hex": ".."} (JSON); JSON is always valid (a repeated column gets a suffix
    x:2; non-finite floats are the strings "Infinity", "-Infinity", "NaN"). An empty result
    still prints the header. The table shows at most 1,000 characters of a value (the rest
    is cut, marked with …, and said on stderr); --json and --csv print every value whole,
    streamed in pieces (memory stays about the size of the largest value). CSV writes
    values exactly as stored, control characters included; the table escapes them.
    """
    bound = parse_params(params)
    with open_database(db, readonly=True) as handle:
        try:
            with handle.query_stream(query, bound, timeout=timeout or None) as result:
                emit(result, as_json=as_json, as_csv=as_csv)
        except KeyboardInterrupt:
            raise interrupted() from None


COMMANDS = [verify, stats, sql]
