"""The root ``ckptdb`` group: the options every command shares (the keys), the help text and
the exit statuses that are not errors (an error's status is its class's ``exit_status``)."""

from __future__ import annotations

import click

from .. import __version__

#: ``ckptdb import-from`` finished, but some source items were skipped (listed in the
#: report, on stderr, in --json and in the receipt).
EXIT_IMPORT_SKIPPED = 11
#: The command succeeded degraded: ``checkout --fallback`` wrote an older, verified
#: checkpoint than the one asked for, ``restore --recover`` an older position than the
#: newest (said on stderr; ``disposition`` / ``skipped`` in --json).
EXIT_DEGRADED = 13
EXIT_HELP = """\
\b
Exit status:
  0  success
  1  unexpected internal error (a bug: please report it)
  2  usage error (bad command line)
  3  not found (checkpoint, entry, namespace)
  4  conflict (compare-and-swap failed; import reported pointer conflicts; pin exists;
     dropping a namespace that has pins)
  5  integrity (verify found problems, corruption, no usable checkpoint)
  6  refused database file or schema (not ckptdb, truncated, too new, edited migration)
  7  invalid input (entry name, metadata, path, reference)
  8  retryable (busy timeout, I/O error, disk full, commit outcome unknown)
  9  refused write (read-only, e.g. a writing statement given to `ckptdb sql`)
  10 replication (Litestream missing or already running, barrier timeout, restore
     destination exists or is open in a process)
  11 import-from finished but skipped some source items (each listed with its reason)
  12 `ckptdb sql` query timed out (--timeout) and was interrupted
  13 succeeded degraded: `checkout --fallback` wrote an older, verified checkpoint;
     `restore --recover` restored an older position than the newest
  14 key (a key scope's key not given, wrong, shredded, or a malformed key file)
  15 refused by your checks: the checkpoint is intact but not of the --expect'ed
     lineage, pinned to a schema newer than --accept-schema, or larger than --max-bytes
  16 quota exceeded: the commit would pass a stored quota (`ckptdb quota`); nothing
     was written
  130 interrupted by Ctrl-C (`ckptdb sql`)
"""


@click.group(epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ckptdb")
@click.option(
    "--keys-file",
    envvar="CKPTDB_KEYS_FILE",
    metavar="PATH",
    help="JSON file {key_id: key as 64 hex digits or base64} of the keys of encrypted key "
    "scopes (mode 600; also $CKPTDB_KEYS_FILE). Keys are never taken on the command line.",
)
@click.option(
    "--keys-env",
    metavar="NAME",
    help="Name of an environment variable holding the same JSON as --keys-file.",
)
@click.pass_context
def main(ctx: click.Context, keys_file: str | None, keys_env: str | None) -> None:
    """ckptdb: a single-file, transactional checkpoint database.

    DB is the path of a ckptdb database file. CHECKPOINT is a full id, a unique prefix of at
    least 8 hex characters, or NS[@current|@fallback][~N]: a bare namespace NS is its
    CURRENT, ~N walks N generations back. A namespace containing ~ or @ (or that looks like
    hex) is written NS@current. Command groups take DB after the subcommand:
    `ckptdb migrate status DB`, `ckptdb retention show DB`.

    Output for people shows any control character it prints (from names, metadata, notes
    of a file that may be hostile) as an escape such as \\x1b, never raw; --json output is
    exact (JSON escapes). A JSON VALUE given to an option nests at most 64 levels.
    """
    ctx.meta["ckptdb.keys_file"] = keys_file
    ctx.meta["ckptdb.keys_env"] = keys_env
