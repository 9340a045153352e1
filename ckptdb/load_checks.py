"""Validation of what a reader states at load (:meth:`ckptdb.Database.load`): the metadata
it expects of its lineage (``expect``), the newest schema versions it reads
(``accept_schemas``, against entries' ``NAME/vN`` pins) and a size bound (``max_bytes``).

Like :mod:`.validation`, it runs before any transaction starts: a rejected call reads and
writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from . import canonical, errors
from .validation import (
    DEFAULT_MAX_METADATA_BYTES,
    MAX_SCHEMA_CHARS,
    check_json,
    control_char,
    has_surrogate,
    safe_text,
)

MAX_EXPECT_FIELDS = 1000

#: The schema pin grammar load's ``accept_schemas`` understands: ``NAME/vN`` -- a non-empty
#: schema name, then ``/v`` and a decimal version (ASCII digits) at the very end, e.g.
#: ``graph-snapshot/v3`` or ``tenant/state/v12`` (name ``tenant/state``). Any other pin
#: (``state``, ``state/3``, ``state/v3.1``, ``state/V3``) has no version ckptdb can compare.
_VERSIONED_PIN = re.compile(r"(?P<name>.+)/v(?P<version>[0-9]+)", re.DOTALL)


#: Versions an ``accept_schemas`` value may name; a pin whose version has more digits
#: counts as this (newer than anything a reader can accept).
MAX_SCHEMA_VERSION = 10**18


def parse_schema_pin(pin: str) -> tuple[str, int] | None:
    """(schema name, version) of a pin of the form ``NAME/vN``, else None. Leading zeros
    are allowed (``v03`` is 3); a version above :data:`MAX_SCHEMA_VERSION` counts as it."""
    match = _VERSIONED_PIN.fullmatch(pin)
    if match is None:
        return None
    digits = match["version"].lstrip("0") or "0"
    version = MAX_SCHEMA_VERSION if len(digits) > 18 else int(digits)
    return match["name"], version


def expect(value: object) -> dict[str, str]:
    """Check load's ``expect`` (a mapping of metadata field -> JSON value) and return each
    field with the canonical JSON text of its expected value."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise errors.InvalidLoadCheckError(
            f"expect must be a dict of metadata field -> JSON value, got {type(value).__name__}"
        )
    if len(value) > MAX_EXPECT_FIELDS:
        raise errors.InvalidLoadCheckError(
            f"expect names {len(value)} fields; the limit is {MAX_EXPECT_FIELDS}"
        )
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise errors.InvalidLoadCheckError(
                f"expect key {key!r} is not a str; metadata fields are named by strings"
            )
        if has_surrogate(key):
            raise errors.InvalidLoadCheckError("an expect key is not valid Unicode")
        check_json(item, f"$.{key}", 1, "expect", errors.InvalidLoadCheckError)
        try:
            out[key] = canonical.dumps(item)
        except (TypeError, ValueError, RecursionError) as exc:
            raise errors.InvalidLoadCheckError(
                f"expect[{key!r}] is not JSON-serializable: {exc}"
            ) from exc
    size = sum(len(k.encode()) + len(v.encode()) for k, v in out.items())
    if size > DEFAULT_MAX_METADATA_BYTES:
        raise errors.InvalidLoadCheckError(
            f"expect is {size} bytes as JSON; no metadata can be larger than "
            f"{DEFAULT_MAX_METADATA_BYTES}, so it could never match"
        )
    return out


def accept_schemas(value: object) -> dict[str, int]:
    """Check load's ``accept_schemas`` (schema name -> newest version the reader reads)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise errors.InvalidLoadCheckError(
            "accept_schemas must be a dict of schema name -> newest version you read "
            f"(e.g. {{'state': 3}}), got {type(value).__name__}"
        )
    out: dict[str, int] = {}
    for name, version in value.items():
        if (
            not isinstance(name, str)
            or not name
            or len(name) > MAX_SCHEMA_CHARS
            or control_char(name) is not None
        ):
            raise errors.InvalidLoadCheckError(
                f"accept_schemas key {safe_text(repr(name), 80)} must be a schema name: a "
                f"non-empty printable str of at most {MAX_SCHEMA_CHARS} characters"
            )
        parsed = parse_schema_pin(name)
        if parsed is not None:
            raise errors.InvalidLoadCheckError(
                f"accept_schemas key {name!r} is a whole pin; give the schema name and the "
                f"version apart: {{{parsed[0]!r}: {parsed[1]}}}"
            )
        if (
            not isinstance(version, int)
            or isinstance(version, bool)
            or not 0 <= version < MAX_SCHEMA_VERSION
        ):
            raise errors.InvalidLoadCheckError(
                f"accept_schemas[{name!r}] must be a version number (an int from 0 to "
                f"{MAX_SCHEMA_VERSION - 1}), got {safe_text(repr(version), 80)}"
            )
        out[name] = version
    return out


def max_bytes(value: object) -> int | None:
    """Check load's ``max_bytes``: None (no bound) or a byte count >= 0."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise errors.InvalidLoadCheckError(
            f"max_bytes must be a number of bytes (an int >= 0) or None, got {value!r}"
        )
    return value
