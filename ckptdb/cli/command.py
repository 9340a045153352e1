"""What every command is made of: the error report, the one way to open DB, the shared
options.

A command body is: parse its arguments, open DB with :func:`open_database`, make one call
of the public API, hand the result to its renderer. :func:`command` turns any ckptdb error
raised on the way into ``error: <code>: <message>`` on stderr (with ``--json``: the error
as one JSON object on stdout) and the error class's ``exit_status``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from .. import Database, errors, keyfile
from .. import open as open_ckptdb
from .output import echo, print_json

F = TypeVar("F", bound=Callable[..., Any])

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
quiet_option = click.option(
    "-q", "--quiet", is_flag=True, help="No progress bar (there is none when not a terminal)."
)


def command(fn: F) -> F:
    """Wrap a command: turn ckptdb errors into the documented message and exit status."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except errors.CkptdbError as exc:
            if kwargs.get("as_json"):
                print_json(exc.to_dict())
            else:
                echo(f"error: {exc.code}: {exc.message}", err=True)
            sys.exit(exc.exit_status)

    return wrapper  # type: ignore[return-value]


def _keys() -> dict[str, bytes] | None:
    """The host keys named by ``--keys-file`` / ``--keys-env`` (read when a command opens a
    database, so a bad key file is reported like any other error)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    meta = ctx.find_root().meta
    keys: dict[str, bytes] = {}
    if meta.get("ckptdb.keys_file"):
        keys.update(keyfile.read_key_file(str(meta["ckptdb.keys_file"])))
    if meta.get("ckptdb.keys_env"):
        keys.update(keyfile.read_key_env(str(meta["ckptdb.keys_env"])))
    return keys or None


@contextmanager
def open_database(
    path: str,
    *,
    readonly: bool = False,
    migration: bool = False,
    busy_timeout: float | None = None,
) -> Iterator[Database]:
    """Open DB with the keys given to ``ckptdb`` (closed on exit).

    ``migration``: for ``ckptdb migrate``, which must see a file whose schema is behind
    without migrating it, and never creates one. ``busy_timeout`` (seconds) replaces the
    library's default wait for another writer."""
    options: dict[str, Any] = {"readonly": readonly, "keys": _keys()}
    if migration:
        options.update(migrate="check", create=False)
    if busy_timeout is not None:
        options["busy_timeout"] = busy_timeout
    with open_ckptdb(path, **options) as db:
        yield db


class GroupDbLast(click.Group):
    """A command group used as ``ckptdb GROUP SUBCOMMAND DB [ARGS]`` (the one documented
    order for every group). ``ckptdb GROUP DB SUBCOMMAND`` is accepted as well."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Put the subcommand first when DB came before it."""
        if len(args) >= 2 and args[0] not in self.commands and args[1] in self.commands:
            args = [args[1], args[0], *args[2:]]
        return super().parse_args(ctx, args)
