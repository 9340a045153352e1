"""Values given on the command line, parsed before DB is opened (so a bad one changes
nothing): metadata pairs, load checks, retention rules, a new key, backup flags."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from .. import KeepBest, RetentionPolicy, errors, keyfile, keyids, validation

#: The names of the --keep-* options, collected into one ``keep_rules`` argument.
_KEEP_RULES = (
    "keep_last",
    "keep_within",
    "keep_every",
    "keep_hourly",
    "keep_daily",
    "keep_weekly",
    "keep_best",
    "keep_matching",
)


def parse_metadata(pairs: Sequence[str], meta_json: str | None) -> dict[str, Any]:
    """``--meta-json FILE`` then ``--meta KEY=VALUE`` pairs (VALUE parsed as JSON when it is
    JSON, else a string)."""
    meta: dict[str, Any] = {}
    if meta_json:
        try:
            text = Path(meta_json).read_text()
        except (OSError, ValueError) as exc:
            raise errors.InvalidMetadataError(
                f"cannot read --meta-json {meta_json}: {exc}"
            ) from exc
        loaded = validation.parse_json(
            text, f"--meta-json {meta_json}", errors.InvalidMetadataError
        )
        if not isinstance(loaded, dict):
            raise errors.InvalidMetadataError("--meta-json must hold a JSON object")
        meta.update(loaded)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise errors.InvalidMetadataError(f"--meta expects KEY=VALUE, got {pair!r}")
        meta[key] = validation.parse_json_or_text(
            raw, f"the value of {key!r}", errors.InvalidMetadataError
        )
    return meta


def parse_expect(pairs: Sequence[str]) -> dict[str, Any] | None:
    """``--expect KEY=VALUE`` pairs: VALUE parsed as JSON when it is JSON, else a string."""
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise errors.InvalidLoadCheckError(f"--expect takes KEY=VALUE, got {pair!r}")
        out[key] = validation.parse_json_or_text(
            raw, f"--expect {key}=VALUE", errors.InvalidLoadCheckError
        )
    return out


def parse_accept_schemas(pairs: Sequence[str]) -> dict[str, int] | None:
    """``--accept-schema NAME=N`` pairs (N: the newest version of NAME you read)."""
    if not pairs:
        return None
    out: dict[str, int] = {}
    for pair in pairs:
        name, sep, raw = pair.rpartition("=")
        if not sep or not name or not (raw.isascii() and raw.isdigit()):
            raise errors.InvalidLoadCheckError(
                f"--accept-schema takes NAME=N (e.g. state=3), got {pair!r}"
            )
        out[name] = int(raw)
    return out


def keep_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The --keep-* options shared by `gc` and `retention set`, handed to the command as one
    ``keep_rules`` mapping for :func:`parse_retention_policy`."""

    @functools.wraps(fn)  # keeps the click options declared below this decorator
    def collect(*args: Any, **kwargs: Any) -> Any:
        rules = {name: kwargs.pop(name) for name in _KEEP_RULES}
        return fn(*args, keep_rules=rules, **kwargs)

    options = [
        click.option(
            "--keep-last",
            type=click.IntRange(min=1),
            help="Keep CURRENT and its N-1 nearest ancestors.",
        ),
        click.option(
            "--keep-within",
            metavar="DURATION",
            help="Keep everything newer than DURATION (e.g. 36h, 7d, 2w).",
        ),
        click.option(
            "--keep-every",
            type=click.IntRange(min=1),
            help="Keep the newest of every N generations.",
        ),
        click.option(
            "--keep-hourly",
            type=click.IntRange(min=1),
            help="Keep the newest per hour for the last N hours that have one.",
        ),
        click.option(
            "--keep-daily",
            type=click.IntRange(min=1),
            help="Keep the newest per day for the last N days that have one.",
        ),
        click.option(
            "--keep-weekly",
            type=click.IntRange(min=1),
            help="Keep the newest per ISO week for the last N weeks that have one.",
        ),
        click.option(
            "--keep-best",
            multiple=True,
            metavar="KEY:N[:min|max]",
            help="Keep the best N by a numeric metadata key (repeatable).",
        ),
        click.option(
            "--keep-matching",
            multiple=True,
            metavar="KEY=VALUE",
            help="Keep checkpoints whose metadata has KEY=VALUE (repeatable).",
        ),
    ]
    decorated: Callable[..., Any] = collect
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


def parse_retention_policy(keep_rules: dict[str, Any]) -> RetentionPolicy | None:
    """A policy from the --keep-* options, or None when none was given."""
    best = []
    for spec in keep_rules["keep_best"]:
        key, _, rest = spec.partition(":")
        n, _, mode = rest.partition(":")
        if not key or not n.isdigit() or mode not in ("", "min", "max"):
            raise errors.InvalidInputError(
                f"--keep-best expects KEY:N[:min|max] (e.g. loss:3:min), got {spec!r}"
            )
        best.append(KeepBest(key=key, n=int(n), mode=mode or "min"))
    rules = {
        **keep_rules,
        "keep_best": tuple(best),
        "keep_matching": parse_metadata(keep_rules["keep_matching"], None) or None,
    }
    given = {k: v for k, v in rules.items() if v not in (None, ())}
    return RetentionPolicy.build(**given) if given else None


def parse_new_key(key_id: str, new_key_file: str | None, new_key_env: str | None) -> bytes:
    """The new key of KEY_ID for ``keys rotate``, from exactly one of its two sources."""
    if (new_key_file is None) == (new_key_env is None):
        raise errors.InvalidKeyError("give exactly one of --new-key-file or --new-key-env")
    found = (
        keyfile.read_key_file(new_key_file)
        if new_key_file is not None
        else keyfile.read_key_env(str(new_key_env))
    )
    if key_id not in found:
        raise errors.InvalidKeyError(f"the new key source has no key for {keyids.shown(key_id)}")
    return found[key_id]


def parse_backup(backup_path: str | None, no_backup: bool) -> str | bool:
    """``migrate up``'s backup: a path, True (next to DB) or False (--no-backup)."""
    if backup_path and no_backup:
        raise errors.InvalidInputError("--backup and --no-backup exclude each other")
    return False if no_backup else (backup_path or True)
