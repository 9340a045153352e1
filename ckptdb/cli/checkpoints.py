"""Commands on checkpoints: init, commit, current, show, cat, checkout, set-current, fork."""

from __future__ import annotations

import sys
from typing import Any

import click

from .. import UNSET, errors
from ..paths import entries_from_paths
from . import suggest
from .app import EXIT_DEGRADED
from .arguments import parse_accept_schemas, parse_expect, parse_metadata
from .command import command, create_option, json_option, open_database, quiet_option
from .progress import progress_bar
from .render import checkpoints as render


@click.command()
@click.argument("db")
@json_option
@command
def init(db: str, as_json: bool) -> None:
    """Create an empty database (an existing ckptdb file is left as it is).

    The one command that always creates DB (saying so on stderr); every other command
    refuses a DB that does not exist (commit, import and import-from create it with
    --create)."""
    with open_database(db, create=True) as handle:
        stats = handle.stats()
    render.initialized(stats, as_json)


@click.command()
@click.argument("db")
@click.argument("namespace")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--meta",
    "meta_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Metadata; VALUE is parsed as JSON when it is valid JSON, else a string.",
)
@click.option("--meta-json", type=click.Path(), help="A file holding a JSON object of metadata.")
@click.option(
    "--expect-current",
    metavar="ID|none",
    help="Compare-and-swap: commit only if CURRENT is this id ('none': empty).",
)
@click.option("--reason", default="commit", show_default=True, help="Recorded in the history.")
@create_option
@quiet_option
@json_option
@command
def commit(
    db: str,
    namespace: str,
    paths: tuple[str, ...],
    meta_pairs: tuple[str, ...],
    meta_json: str | None,
    expect_current: str | None,
    reason: str,
    create: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Commit files and directories as one checkpoint of NAMESPACE.

    A file becomes an entry named by its base name; a directory contributes every regular
    file beneath it, named by its relative path. Symlinks are refused, never followed; a
    directory walk skips DB and its -wal/-shm/-journal files. --meta values are JSON when
    they parse as JSON (turn=12 is a number), else strings. --expect-current makes it a
    compare-and-swap (exit 4 on mismatch). A stored quota can refuse it (exit 16) or evict
    older checkpoints to make room (listed). DB must exist (`ckptdb init DB`) unless
    --create is given, so a mistyped path is an error, not a new database. --json keys:
    checkpoint_id, namespace, parent_id, generation, pointer_revision, created,
    entry_count, logical_bytes, bytes_stored, bytes_deduplicated, created_at, evicted_ids.
    """
    entries = entries_from_paths(paths, database=db)
    metadata = parse_metadata(meta_pairs, meta_json)
    with open_database(db, create=create) as handle:
        if expect_current is None:
            expect: Any = UNSET
        elif expect_current.lower() == "none":
            expect = None
        else:
            expect = handle.resolve(expect_current)
        with progress_bar("committing", as_json or quiet) as progress:
            ack = handle.commit(
                namespace,
                entries,
                metadata=metadata,
                expect_current=expect,
                reason=reason,
                progress=progress,
            )
    render.commit_ack(ack, as_json)


@click.command()
@click.argument("db")
@click.argument("namespace")
@json_option
@command
def current(db: str, namespace: str, as_json: bool) -> None:
    """Show the CURRENT checkpoint of NAMESPACE."""
    with open_database(db, readonly=True) as handle, suggest.namespaces(handle, namespace):
        cp = handle.current(namespace)
        if cp is None:
            raise errors.NamespaceNotFoundError(f"namespace {namespace!r} has no checkpoint")
        pointer = handle.pointer(namespace)
    render.current(cp, pointer, as_json)


@click.command()
@click.argument("db")
@click.argument("checkpoint")
@json_option
@command
def show(db: str, checkpoint: str, as_json: bool) -> None:
    """Show the manifest of CHECKPOINT: entries, metadata, parent, counters."""
    with open_database(db, readonly=True) as handle, suggest.namespaces(handle, checkpoint):
        cp = handle.get(handle.resolve(checkpoint))
    render.manifest(cp.info, as_json)


@click.command()
@click.argument("db")
@click.argument("checkpoint")
@click.argument("entry")
@command
def cat(db: str, checkpoint: str, entry: str) -> None:
    """Write the verified bytes of ENTRY of CHECKPOINT to stdout (binary-safe)."""
    with open_database(db, readonly=True) as handle:
        with suggest.namespaces(handle, checkpoint):
            cp = handle.get(handle.resolve(checkpoint))
        # The entry's exact bytes are the output: the one place nothing is escaped.
        out = sys.stdout.buffer
        with suggest.entry(cp, entry):
            for piece in cp.iter_bytes(entry):
                out.write(piece)
        out.flush()


@click.command()
@click.argument("db")
@click.argument("checkpoint")
@click.argument("directory", type=click.Path())
@click.option(
    "--fallback",
    is_flag=True,
    help="If CHECKPOINT does not verify, use its newest verified ancestor.",
)
@click.option("--force", is_flag=True, help="Replace a non-empty DIRECTORY atomically.")
@click.option(
    "--expect",
    "expect_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="The checkpoint's metadata must hold KEY=VALUE (VALUE parsed as JSON, else a "
    "string; repeatable).",
)
@click.option(
    "--accept-schema",
    "accept_pairs",
    multiple=True,
    metavar="NAME=N",
    help="Refuse an entry pinned to NAME/vM with M > N (repeatable).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=0),
    help="Refuse a checkpoint holding more bytes (checked before any is read).",
)
@quiet_option
@json_option
@command
def checkout(
    db: str,
    checkpoint: str,
    directory: str,
    fallback: bool,
    force: bool,
    expect_pairs: tuple[str, ...],
    accept_pairs: tuple[str, ...],
    max_bytes: int | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Materialize CHECKPOINT into DIRECTORY (files 0600, directories 0700).

    With --fallback, a CHECKPOINT that does not verify is replaced by its newest verified
    ancestor: that is said on stderr, --json has "disposition": "degraded_fallback" and the
    receipt id, and the exit status is 13 (succeeded degraded).

    --expect and --accept-schema refuse an intact checkpoint of another lineage or written
    with a newer schema (exit 15); with --fallback such checkpoints are skipped like damaged
    ones. --max-bytes refuses one that is too large (exit 15), with or without --fallback.
    """
    expect = parse_expect(expect_pairs)
    accept = parse_accept_schemas(accept_pairs)
    with (
        open_database(db) as handle,
        suggest.namespaces(handle, checkpoint),
        progress_bar("checking out", as_json or quiet) as progress,
    ):
        result = handle.checkout(
            checkpoint,
            directory,
            force=force,
            fallback=fallback,
            progress=progress,
            expect=expect,
            accept_schemas=accept,
            max_bytes=max_bytes,
        )
    render.checkout_result(result, as_json)
    if result.disposition == "degraded_fallback":
        sys.exit(EXIT_DEGRADED)


@click.command(name="set-current")
@click.argument("db")
@click.argument("namespace")
@click.argument("checkpoint")
@click.option("--reason", default="set-current (cli)", show_default=True)
@click.option(
    "--no-verify",
    is_flag=True,
    help="Do not verify CHECKPOINT (and CURRENT) first; move anyway.",
)
@json_option
@command
def set_current(
    db: str, namespace: str, checkpoint: str, reason: str, no_verify: bool, as_json: bool
) -> None:
    """Move NAMESPACE's CURRENT to CHECKPOINT explicitly (e.g. roll back).

    CHECKPOINT is verified first (manifest and bytes) and refused if damaged. The old
    CURRENT becomes the fallback unless it is damaged: then the previous fallback is kept
    (or there is none), so a damaged checkpoint is never protected as the fallback.
    """
    with open_database(db) as handle, suggest.namespaces(handle, namespace, checkpoint):
        before = handle.pointer(namespace)
        pointer = handle.set_current(
            namespace, handle.resolve(checkpoint), reason=reason, verify=not no_verify
        )
    render.pointer_moved(namespace, before, pointer, as_json)


@click.command()
@click.argument("db")
@click.argument("source")
@click.argument("target")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Copy only the newest N checkpoints of SOURCE's lineage (the oldest becomes a root).",
)
@click.option("--reason", default="fork (cli)", show_default=True)
@json_option
@command
def fork(db: str, source: str, target: str, limit: int | None, reason: str, as_json: bool) -> None:
    """Copy the lineage of SOURCE's CURRENT into namespace TARGET (a fork).

    The copies share every blob with their sources (no byte is copied), keep their
    metadata and parent links, and land in one transaction; TARGET's CURRENT moves once, to
    the copy of SOURCE's CURRENT. Running it again copies nothing new.
    """
    with open_database(db) as handle, suggest.namespaces(handle, source):
        lineage = handle.lineage(source, limit=limit)
        if not lineage:
            raise errors.NamespaceNotFoundError(
                f"namespace {source!r} has no CURRENT checkpoint to fork; see `ckptdb "
                "namespaces DB`",
                namespace=source,
            )
        report = handle.copy_checkpoints([c.id for c in reversed(lineage)], target, reason=reason)
    render.fork_report(report, source, target, as_json)


COMMANDS = [init, commit, current, show, cat, checkout, set_current, fork]
