"""Validation of everything a caller names: entry names, namespaces, metadata, ids.

Validation runs before any transaction starts, so a rejected call writes nothing.
"""

from __future__ import annotations

import json
import math
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from . import canonical, errors

MAX_NAME_CHARS = 1024
MAX_NAME_SEGMENT_BYTES = 255
MAX_NAMESPACE_CHARS = 256
MAX_ENTRIES = 100_000
DEFAULT_MAX_METADATA_BYTES = 256 * 1024
MAX_MEDIA_TYPE_CHARS = 255
MAX_SCHEMA_CHARS = 255
_HEX_ID = re.compile(r"[0-9a-f]{64}")
# Plain ASCII names (the common case) need none of the Unicode checks below.
_PLAIN_NAME = re.compile(
    r"(?:[A-Za-z0-9_+=,@%~:-][A-Za-z0-9._+=,@%~: -]{0,254}/)*"
    r"[A-Za-z0-9_+=,@%~:-][A-Za-z0-9._+=,@%~: -]{0,254}"
)


def _control_char(text: str) -> str | None:
    for ch in text:
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cs") or ch in ("\u2028", "\u2029"):
            return ch
    return None


def entry_name(name: object) -> str:
    """Return ``name`` if it is a safe POSIX relative path, else raise InvalidNameError.

    Rules: a non-empty str of at most 1024 characters, NFC-normalized; segments separated
    by '/', each non-empty, at most 255 UTF-8 bytes, not '.' or '..'; no leading '/', no
    backslash, no NUL or other control character. These make every name safe to
    materialize under a directory on any POSIX filesystem.
    """
    if not isinstance(name, str):
        raise errors.InvalidNameError(
            f"entry name must be a str, got {type(name).__name__}", name=repr(name)
        )
    if len(name) <= MAX_NAME_CHARS and _PLAIN_NAME.fullmatch(name) and not name.endswith(" "):
        return name  # every segment starts with a safe non-dot character: no '.', '..', ''
    shown = repr(name[:80])
    if not name:
        raise errors.InvalidNameError("entry name is empty; give a relative path like 'a/b.json'")
    if len(name) > MAX_NAME_CHARS:
        raise errors.InvalidNameError(
            f"entry name {shown}... is {len(name)} characters; the limit is {MAX_NAME_CHARS}",
            name=name[:80],
        )
    bad = _control_char(name)
    if bad is not None:
        raise errors.InvalidNameError(
            f"entry name {shown} contains the control character {bad!r}; names must be printable",
            name=name,
        )
    if "\\" in name:
        raise errors.InvalidNameError(
            f"entry name {shown} contains a backslash; use '/' to separate directories",
            name=name,
        )
    if name.startswith("/"):
        raise errors.InvalidNameError(
            f"entry name {shown} is absolute; names are relative paths like 'a/b.json'",
            name=name,
        )
    if unicodedata.normalize("NFC", name) != name:
        raise errors.InvalidNameError(
            f"entry name {shown} is not NFC-normalized; normalize it with "
            "unicodedata.normalize('NFC', name) so it names one file on every filesystem",
            name=name,
        )
    for segment in name.split("/"):
        if segment in ("", ".", ".."):
            raise errors.InvalidNameError(
                f"entry name {shown} has an empty, '.' or '..' segment; names may not "
                "traverse directories",
                name=name,
            )
        if len(segment.encode("utf-8")) > MAX_NAME_SEGMENT_BYTES:
            raise errors.InvalidNameError(
                f"entry name {shown} has a segment longer than {MAX_NAME_SEGMENT_BYTES} bytes",
                name=name,
            )
    return name


def entry_names_consistent(names: Iterable[str]) -> None:
    """Refuse a set of names in which one name is also a directory of another ('a', 'a/b'),
    which could not be materialized as files."""
    ordered = sorted(names)
    present = set(ordered)
    for name in ordered:
        parts = name.split("/")
        for i in range(1, len(parts)):
            prefix = "/".join(parts[:i])
            if prefix in present:
                raise errors.InvalidNameError(
                    f"entry {prefix!r} is a file but {name!r} uses it as a directory; "
                    "rename one of them",
                    name=name,
                )


def namespace(name: object) -> str:
    """Return ``name`` if it is a valid namespace, else raise InvalidNamespaceError.

    A namespace is a non-empty, NFC-normalized str of at most 256 characters with no
    control characters and no leading or trailing whitespace.
    """
    if not isinstance(name, str):
        raise errors.InvalidNamespaceError(
            f"namespace must be a str, got {type(name).__name__}", namespace=repr(name)
        )
    if not name:
        raise errors.InvalidNamespaceError("namespace is empty; give a name like 'brain-1'")
    if len(name) > MAX_NAMESPACE_CHARS:
        raise errors.InvalidNamespaceError(
            f"namespace is {len(name)} characters; the limit is {MAX_NAMESPACE_CHARS}",
            namespace=name[:80],
        )
    bad = _control_char(name)
    if bad is not None:
        raise errors.InvalidNamespaceError(
            f"namespace {name[:80]!r} contains the control character {bad!r}",
            namespace=name[:80],
        )
    if name != name.strip():
        raise errors.InvalidNamespaceError(
            f"namespace {name!r} has leading or trailing whitespace", namespace=name
        )
    if unicodedata.normalize("NFC", name) != name:
        raise errors.InvalidNamespaceError(
            f"namespace {name!r} is not NFC-normalized", namespace=name
        )
    return name


def _check_json(value: Any, path: str, depth: int) -> None:
    if depth > 64:
        raise errors.InvalidMetadataError(f"metadata nests deeper than 64 levels at {path}")
    if value is None or isinstance(value, bool | int | str):
        if isinstance(value, str) and has_surrogate(value):
            raise errors.InvalidMetadataError(f"metadata string at {path} is not valid Unicode")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise errors.InvalidMetadataError(
                f"metadata value at {path} is {value}; JSON has no NaN or infinity"
            )
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise errors.InvalidMetadataError(
                    f"metadata key {key!r} at {path} is not a str; JSON object keys are strings"
                )
            if has_surrogate(key):
                raise errors.InvalidMetadataError(f"metadata key at {path} is not valid Unicode")
            _check_json(item, f"{path}.{key}", depth + 1)
        return
    raise errors.InvalidMetadataError(
        f"metadata value at {path} has type {type(value).__name__}, which is not JSON "
        "(use str, int, float, bool, None, list or dict)"
    )


def safe_text(text: str, limit: int = 2000) -> str:
    """Caller-supplied text made safe to store and print: lone surrogates (bytes that were
    not UTF-8) escaped, and bounded in length."""
    safe = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return safe if len(safe) <= limit else safe[: limit - 3] + "..."


def has_surrogate(text: str) -> bool:
    """True when ``text`` cannot be encoded as UTF-8 (it holds a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def metadata(value: Mapping[str, Any] | None, max_bytes: int = DEFAULT_MAX_METADATA_BYTES) -> str:
    """Validate metadata and return its canonical JSON text."""
    if value is None:
        return "{}"
    if not isinstance(value, Mapping):
        raise errors.InvalidMetadataError(
            f"metadata must be a dict of JSON values, got {type(value).__name__}"
        )
    _check_json(value, "$", 0)
    if "ckptdb:sealed" in value:
        raise errors.InvalidMetadataError(
            "the metadata key 'ckptdb:sealed' is reserved (it marks sealed metadata); rename it"
        )
    try:
        text = canonical.dumps(dict(value))
    except (TypeError, ValueError, RecursionError) as exc:
        raise errors.InvalidMetadataError(f"metadata is not JSON-serializable: {exc}") from exc
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise errors.InvalidMetadataError(
            f"metadata is {size} bytes as canonical JSON; the limit is {max_bytes}. Store large "
            "data as an entry instead of metadata.",
            size=size,
            limit=max_bytes,
        )
    return text


def metadata_from_json(text: str) -> dict[str, Any]:
    """Parse stored canonical metadata."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("stored metadata is not a JSON object")
    return value


def optional_label(value: object, what: str, limit: int) -> str | None:
    """Validate an optional short label (media type, schema pin)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise errors.InvalidEntryError(
            f"{what} must be a non-empty str of at most {limit} characters, got {value!r}"
        )
    if _control_char(value) is not None:
        raise errors.InvalidEntryError(f"{what} {value!r} contains a control character")
    return value


def checkpoint_id(value: object) -> str:
    """A full checkpoint id: 64 lowercase hex characters."""
    if not isinstance(value, str) or not _HEX_ID.fullmatch(value):
        raise errors.InvalidReferenceError(
            f"{value!r} is not a checkpoint id (64 lowercase hex characters)"
        )
    return value


def is_full_id(value: str) -> bool:
    """True when ``value`` has the shape of a full checkpoint id."""
    return bool(_HEX_ID.fullmatch(value))


def open_arguments(
    path: object,
    migrate: object,
    synchronous: object,
    chunk_size: object,
    page_size: object,
    chunk_limits: tuple[int, int],
) -> str:
    """Check the arguments of ``ckptdb.open``; returns the path as text."""
    min_chunk, max_chunk = chunk_limits
    if migrate not in ("auto", "never", "check"):
        raise errors.InvalidInputError(
            f"migrate must be 'auto', 'never' or 'check', not {migrate!r}"
        )
    if synchronous not in ("off", "normal", "full", "extra"):
        raise errors.InvalidInputError(
            f"synchronous must be 'full', 'normal', 'extra' or 'off', not {synchronous!r}"
        )
    if not isinstance(path, str | os.PathLike):
        raise errors.InvalidInputError(
            f"the database path must be a str or os.PathLike[str], not {type(path).__name__}"
        )
    text = os.fspath(path)
    if not isinstance(text, str):
        raise errors.InvalidInputError(
            f"the database path must be a str or os.PathLike[str], not {type(text).__name__}"
        )
    if has_surrogate(text):
        raise errors.InvalidInputError(
            f"the database path {text!r} holds bytes that are not UTF-8; SQLite names "
            "files in UTF-8. Rename the file or directory, or choose another path."
        )
    if chunk_size is not None and not (
        isinstance(chunk_size, int) and min_chunk <= chunk_size <= max_chunk
    ):
        raise errors.InvalidInputError(f"chunk_size must be between {min_chunk} and {max_chunk}")
    if page_size is not None and (
        not isinstance(page_size, int)
        or page_size < 4096
        or page_size > 65536
        or page_size & (page_size - 1)
    ):
        raise errors.InvalidInputError("page_size must be a power of two from 4096 to 65536")
    return text
