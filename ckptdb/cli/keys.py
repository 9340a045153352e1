"""The key scope commands: ``ckptdb keys list|set|rotate|shred``. Keys come from
--keys-file / --keys-env (never the command line); nothing prints key material."""

from __future__ import annotations

import click

from .. import errors, keyids
from .arguments import parse_new_key
from .command import GroupDbLast, command, json_option, open_database
from .render import keys as render


@click.group(cls=GroupDbLast)
def keys() -> None:
    """Manage encryption key scopes.

    Create, list, rotate and shred them. Keys come from --keys-file or --keys-env, given
    before the command: `ckptdb --keys-file k.json keys set DB tenant-a/ --key-id a`.
    """


@keys.command(name="list")
@click.argument("db")
@json_option
@command
def keys_list(db: str, as_json: bool) -> None:
    """List the key scopes (never any key material)."""
    with open_database(db, readonly=True) as handle:
        rows = handle.key_scopes()
    render.scopes(rows, as_json)


@keys.command(name="set")
@click.argument("db")
@click.argument("prefix")
@click.option("--key-id", required=True, help="The key (from --keys-file/--keys-env) to use.")
@json_option
@command
def keys_set(db: str, prefix: str, key_id: str, as_json: bool) -> None:
    """Encrypt every namespace under PREFIX from its first commit on."""
    with open_database(db) as handle:
        scope = handle.set_encryption(prefix, key_id=key_id)
    render.scope_created(scope, as_json)


@keys.command(name="rotate")
@click.argument("db")
@click.argument("key_id")
@click.option("--new-key-file", metavar="PATH", help="Key file holding the new key under KEY_ID.")
@click.option("--new-key-env", metavar="NAME", help="Environment variable holding it.")
@json_option
@command
def keys_rotate(
    db: str, key_id: str, new_key_file: str | None, new_key_env: str | None, as_json: bool
) -> None:
    """Re-wrap KEY_ID's data key under a new key (O(1): no data is rewritten)."""
    new_key = parse_new_key(key_id, new_key_file, new_key_env)
    with open_database(db) as handle:
        scope = handle.rotate_key(key_id, new_key)
    render.key_rotated(key_id, scope, as_json)


@keys.command(name="shred")
@click.argument("db")
@click.argument("key_id")
@click.option("--yes", is_flag=True, help="Confirm: the scope's data is destroyed for good.")
@json_option
@command
def keys_shred(db: str, key_id: str, yes: bool, as_json: bool) -> None:
    """Crypto-shred KEY_ID: delete every namespace of its scope and its wrapped key."""
    if not yes:
        raise errors.InvalidInputError(
            f"shredding {keyids.shown(key_id)} destroys its data for good; add --yes to confirm"
        )
    with open_database(db) as handle:
        report = handle.shred_key(key_id)
    render.shredded(key_id, report, as_json)


COMMANDS = [keys]
