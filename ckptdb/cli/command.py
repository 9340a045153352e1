"""What every command is made of: the error report, the one way to open DB, the shared
options.

A command body is: parse its arguments, open DB with :func:`open_database`, make one call
of the public API, hand the result to its renderer. :func:`command` turns any ckptdb error
raised on the way into ``error: <code>: <message>`` on stderr (with ``--json``: the error
as one JSON object on stdout) and the error class's ``exit_status``.
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from .. import Database, errors, keyfile, validation
from .. import open as open_ckptdb
from .output import echo, print_json

F = TypeVar("F", bound=Callable[..., Any])

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
create_option = click.option(
    "--create", is_flag=True, help="Create DB when it does not exist (said on stderr)."
)
quiet_option = click.option(
    "-q", "--quiet", is_flag=True, help="No progress bar (there is none when not a terminal)."
)


#: What to do about an error, said with the command's options where the library's message
#: advises a Python caller (``keys=``, ``busy_timeout=``).
_ADVICE: dict[type[errors.AdvisedError], str] = {
    errors.KeyUnavailableError: "give its key with --keys-file PATH (or $CKPTDB_KEYS_FILE), "
    "a JSON file {key_id: key}, or with --keys-env NAME",
    errors.BusyTimeoutError: "retry, or wait longer with --busy-timeout SECONDS (or "
    "$CKPTDB_BUSY_TIMEOUT)",
}


def _message(exc: errors.CkptdbError) -> str:
    """The error's message for the command line."""
    if isinstance(exc, errors.AdvisedError):
        for cls, advice in _ADVICE.items():
            if isinstance(exc, cls):
                return exc.advised(advice)
    return exc.message


def command(fn: F) -> F:
    """Wrap a command: turn ckptdb errors into the documented message and exit status."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except errors.CkptdbError as exc:
            message = _message(exc)
            if kwargs.get("as_json"):
                print_json({**exc.to_dict(), "message": message})
            else:
                echo(f"error: {exc.code}: {message}", err=True)
            sys.exit(exc.exit_status)

    return wrapper  # type: ignore[return-value]


def _global(name: str) -> Any:
    """The value of global option ``name`` (``keys_file``...) on this command line, if any
    (kept by the root group's options: see :mod:`.app`)."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(f"ckptdb.{name}")


def _keys() -> dict[str, bytes] | None:
    """The host keys named by ``--keys-file`` / ``--keys-env`` (read when a command opens a
    database, so a bad key file is reported like any other error)."""
    keys: dict[str, bytes] = {}
    if _global("keys_file"):
        keys.update(keyfile.read_key_file(str(_global("keys_file"))))
    if _global("keys_env"):
        keys.update(keyfile.read_key_env(str(_global("keys_env"))))
    return keys or None


def _missing_database(path: str) -> errors.DatabaseFileError:
    """The refusal of a DB path that does not exist, naming the ways to create it (a typo
    in a path must never become a new, empty database)."""
    quoted = shlex.quote(path)
    ctx = click.get_current_context(silent=True)
    offers_create = ctx is not None and any(p.name == "create" for p in ctx.command.params)
    how = f"`ckptdb init {quoted}`" + (" or add --create" if offers_create else "")
    return errors.DatabaseFileError(
        f"{path} does not exist (check the path); to start a new database there, run {how}",
        path=path,
    )


@contextmanager
def open_database(
    path: str,
    *,
    readonly: bool = False,
    create: bool = False,
    migration: bool = False,
    busy_timeout: float | None = None,
) -> Iterator[Database]:
    """Open DB with the keys given to ``ckptdb`` (closed on exit).

    ``create``: make DB when it does not exist (``init``, ``--create``), saying so on
    stderr; otherwise a missing DB is refused. ``migration``: for ``ckptdb migrate``, which
    must see a file whose schema is behind without migrating it. ``busy_timeout`` (seconds)
    replaces the wait for another writer that ``--busy-timeout`` sets (or the library's
    default)."""
    options: dict[str, Any] = {"readonly": readonly, "create": create, "keys": _keys()}
    if migration:
        options["migrate"] = "check"
    if busy_timeout is None:
        busy_timeout = _global("busy_timeout")
    if busy_timeout is not None:
        options["busy_timeout"] = busy_timeout
    # A PostgreSQL URL names a database that exists or not on the server; its errors (and
    # this command's words) never repeat the URL, which may carry a password.
    existed = validation.database_url(path) is not None or os.path.lexists(path)
    try:
        db = open_ckptdb(path, **options)
    except errors.DatabaseFileError as exc:
        if existed or create:
            raise
        raise _missing_database(path) from exc
    if create and not existed:
        echo(f"created a new database {path}", err=True)
    with db:
        yield db


class GroupDbLast(click.Group):
    """A command group used as ``ckptdb GROUP SUBCOMMAND DB [ARGS]`` (the one documented
    order for every group). ``ckptdb GROUP DB SUBCOMMAND`` is accepted as well."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Put the subcommand first when DB came before it."""
        if len(args) >= 2 and args[0] not in self.commands and args[1] in self.commands:
            args = [args[1], args[0], *args[2:]]
        return super().parse_args(ctx, args)
