"""The root ``ckptdb`` group: the global options (keys, busy timeout), which every command
takes before or after its name, the help text and the exit statuses that are not errors (an
error's status is its class's ``exit_status``)."""

from __future__ import annotations

from typing import Any

import click

from .. import __version__
from ..connection import DEFAULT_BUSY_TIMEOUT
from .completion import complete_arguments

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


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """Keep a global option's value for the whole command line (``ctx.meta`` is shared by
    every context of it): given after the subcommand, it replaces the value given before
    it or taken from the environment."""
    if value is not None:
        ctx.meta[f"ckptdb.{param.name}"] = value


def global_options(*, root: bool) -> list[click.Option]:
    """The options every command takes, before or after its name: the root group's
    (``root``; documented, and read from the environment too) or a command's own copy
    (hidden from its help, which would repeat them for every command)."""
    return [
        click.Option(
            ["--keys-file"],
            envvar="CKPTDB_KEYS_FILE" if root else None,
            metavar="PATH",
            help="JSON file {key_id: key as 64 hex digits or base64} of the keys of encrypted "
            "key scopes (mode 600; also $CKPTDB_KEYS_FILE). Keys are never taken on the "
            "command line.",
            expose_value=False,
            callback=_remember,
            hidden=not root,
        ),
        click.Option(
            ["--keys-env"],
            metavar="NAME",
            help="Name of an environment variable holding the same JSON as --keys-file.",
            expose_value=False,
            callback=_remember,
            hidden=not root,
        ),
        click.Option(
            ["--busy-timeout"],
            envvar="CKPTDB_BUSY_TIMEOUT" if root else None,
            type=click.FloatRange(min=0),
            metavar="SECONDS",
            help="Wait up to SECONDS for another process's write lock before giving up "
            f"(default {DEFAULT_BUSY_TIMEOUT:g}; also $CKPTDB_BUSY_TIMEOUT).",
            expose_value=False,
            callback=_remember,
            hidden=not root,
        ),
    ]


class RootGroup(click.Group):
    """The ``ckptdb`` group: every command added to it (and every subcommand of a group
    added) gets its own copy of the global options and completing argument types
    (:func:`~.completion.complete_arguments`), so neither is declared command by command."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Add ``cmd`` with the global options and completion of its arguments."""
        _share(cmd)
        super().add_command(cmd, name)


#: Said at the end of every command's help, where its copies of the global options hide.
GLOBAL_OPTIONS_NOTE = (
    "\b\nGlobal options, before or after the command (see `ckptdb --help`):\n"
    "  --keys-file PATH, --keys-env NAME, --busy-timeout SECONDS"
)


def _share(cmd: click.Command) -> None:
    """Give ``cmd`` and its subcommands the global options and completing argument types."""
    cmd.params.extend(global_options(root=False))
    cmd.epilog = (
        GLOBAL_OPTIONS_NOTE if cmd.epilog is None else f"{cmd.epilog}\n\n{GLOBAL_OPTIONS_NOTE}"
    )
    complete_arguments(cmd)
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _share(sub)


@click.group(
    cls=RootGroup,
    epilog=EXIT_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
    params=global_options(root=True),
)
@click.version_option(__version__, prog_name="ckptdb")
def main() -> None:
    """ckptdb: a single-file, transactional checkpoint database.

    DB is the path of a ckptdb database file. CHECKPOINT is a full id, a unique prefix of at
    least 8 hex characters, or NS[@current|@fallback][~N]: a bare namespace NS is its
    CURRENT, ~N walks N generations back. A namespace containing ~ or @ (or that looks like
    hex) is written NS@current. Command groups take DB after the subcommand:
    `ckptdb migrate status DB`, `ckptdb retention show DB`.

    The options below (--keys-file, --keys-env, --busy-timeout) go before or after the
    command: `ckptdb --keys-file K namespaces DB` and `ckptdb namespaces DB --keys-file K`
    are the same.

    Output for people shows any control character it prints (from names, metadata, notes
    of a file that may be hostile) as an escape such as \\x1b, never raw; --json output is
    exact (JSON escapes). A JSON VALUE given to an option nests at most 64 levels.
    """
