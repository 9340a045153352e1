"""Shell completion: ``ckptdb completion SHELL`` prints the script, and the argument types
below complete what the command line names -- database paths as files, namespaces and
checkpoints from the database named earlier on the line, entry names from the checkpoint.

The types are given to every command's arguments by their documented names (``DB``,
``NAMESPACE``, ``CHECKPOINT``, ``ENTRY``: :func:`complete_arguments`, called by the root
group for each command it holds), so a new command completes them without a line of its own.
A completion reads the database read-only and never creates a file; a path that is not a
ckptdb database, or a reference that names nothing, completes to nothing rather than an
error in the middle of the user's line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import click
from click.shell_completion import CompletionItem, get_completion_class

from .. import Database, errors
from .. import open as open_ckptdb

T = TypeVar("T")

#: How long a completion waits for a lock (a reader in WAL mode normally waits for none).
COMPLETION_BUSY_TIMEOUT = 0.2
#: The suffixes a checkpoint reference may add to a namespace (see ``ckptdb --help``).
_POINTERS = ("@current", "@fallback")


def _from_database(ctx: click.Context, read: Callable[[Database], list[T]]) -> list[T]:
    """``read(db)`` on the database the command line names as DB, opened read-only; nothing
    when there is none or it cannot be read."""
    path = ctx.params.get("db")
    if not isinstance(path, str) or not os.path.isfile(path):
        return []
    try:
        with open_ckptdb(
            path, readonly=True, create=False, busy_timeout=COMPLETION_BUSY_TIMEOUT
        ) as db:
            return read(db)
    except errors.CkptdbError:
        # A completion offers what it can read; a file it cannot (not ckptdb, locked,
        # needing a key or a migration) offers nothing, and the command itself, once run,
        # reports why.
        return []


def _namespaces(ctx: click.Context) -> list[str]:
    return _from_database(ctx, lambda db: [ns.name for ns in db.namespaces()])


class DatabasePath(click.types.StringParamType):
    """``DB``: completes as a file path (the shell lists the files)."""

    name = "database"

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        """The shell's own file completion."""
        return [CompletionItem(incomplete, type="file")]


class NamespaceName(click.types.StringParamType):
    """``NAMESPACE``: completes from the namespaces of DB."""

    name = "namespace"

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        """The namespaces of DB that start with what was typed."""
        return [CompletionItem(n) for n in _namespaces(ctx) if n.startswith(incomplete)]


class CheckpointReference(click.types.StringParamType):
    """``CHECKPOINT``: completes to a namespace of DB (its CURRENT), or ``NS@current`` /
    ``NS@fallback`` once an ``@`` was typed."""

    name = "checkpoint"

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        """Namespaces of DB, with the pointer suffixes when the typed text has an ``@``."""
        names = _namespaces(ctx)
        if "@" in incomplete:
            names = [n + suffix for n in names for suffix in _POINTERS]
        return [CompletionItem(n) for n in names if n.startswith(incomplete)]


class EntryName(click.types.StringParamType):
    """``ENTRY``: completes from the entries of the CHECKPOINT named before it."""

    name = "entry"

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        """The entry names of CHECKPOINT that start with what was typed."""
        ref = ctx.params.get("checkpoint")
        if not isinstance(ref, str) or not ref:
            return []
        names = _from_database(
            ctx, lambda db: [e.name for e in db.get(db.resolve(ref)).info.entries]
        )
        return [CompletionItem(n) for n in names if n.startswith(incomplete)]


#: The completing type of each argument name that means the same thing in every command.
ARGUMENT_TYPES: dict[str, click.types.StringParamType] = {
    "db": DatabasePath(),
    "namespace": NamespaceName(),
    "checkpoint": CheckpointReference(),
    "entry": EntryName(),
}


def complete_arguments(command: click.Command) -> None:
    """Give ``command``'s arguments named DB, NAMESPACE, CHECKPOINT or ENTRY their
    completing type -- those declared as plain text; a command that declares a type of its
    own keeps it."""
    for param in command.params:
        if isinstance(param, click.Argument) and param.type is click.STRING:
            param.type = ARGUMENT_TYPES.get(str(param.name), param.type)


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script for SHELL.

    It completes commands and options, DB as a file path, and NAMESPACE, CHECKPOINT and
    ENTRY from the database named earlier on the line (read-only).

    \b
    bash:  eval "$(ckptdb completion bash)"    (e.g. in ~/.bashrc)
    zsh:   eval "$(ckptdb completion zsh)"     (e.g. in ~/.zshrc)
    fish:  ckptdb completion fish > ~/.config/fish/completions/ckptdb.fish
    """
    cls = get_completion_class(shell)
    assert cls is not None  # the choices are the shells click supports
    root = ctx.find_root().command
    # A script of ckptdb's own (no value from a file), which the shell must get exactly.
    click.echo(cls(root, {}, "ckptdb", "_CKPTDB_COMPLETE").source())


COMMANDS = [completion]
