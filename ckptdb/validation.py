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
from itertools import accumulate
from typing import Any

from . import canonical, errors, limits

MAX_NAME_CHARS = 1024
MAX_NAME_SEGMENT_BYTES = 255
MAX_NAMESPACE_CHARS = 256
MAX_ENTRIES = 100_000
DEFAULT_MAX_METADATA_BYTES = 256 * 1024
MAX_MEDIA_TYPE_CHARS = 255
MAX_SCHEMA_CHARS = 255
#: How deep JSON may nest, for every JSON a caller gives (metadata, metadata filters,
#: ``expect``, ``keep_matching``, the CLI's JSON options) and every JSON read back from a
#: file: a value is at depth 0, what it holds at depth 1, ... and nothing may sit deeper
#: than this. Python's json module recurses once per level, so text is checked by a linear
#: scan (:func:`json_nesting`) before it is parsed.
MAX_JSON_DEPTH = 64
_HEX_ID = re.compile(r"[0-9a-f]{64}")
# A printable-ASCII namespace without surrounding spaces (the common case) is NFC and has
# no control character: none of the Unicode checks below apply.
_PLAIN_NAMESPACE = re.compile(rf"[!-~](?:[ -~]{{0,{MAX_NAMESPACE_CHARS - 2}}}[!-~])?")
# Plain ASCII names (the common case) need none of the Unicode checks below.
_PLAIN_NAME = re.compile(
    r"(?:[A-Za-z0-9_+=,@%~:-][A-Za-z0-9._+=,@%~: -]{0,254}/)*"
    r"[A-Za-z0-9_+=,@%~:-][A-Za-z0-9._+=,@%~: -]{0,254}"
)


def control_char(text: str) -> str | None:
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
    bad = control_char(name)
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


def entry_names(entries: object) -> list[str]:
    """The names of a commit's ``entries`` mapping, validated (:func:`entry_name`, at most
    :data:`MAX_ENTRIES`, :func:`entry_names_consistent`) and sorted -- the order a
    checkpoint's identity is computed in."""
    if not isinstance(entries, Mapping):
        raise errors.InvalidEntryError(
            f"entries must be a mapping of name -> value, got {type(entries).__name__}"
        )
    if len(entries) > MAX_ENTRIES:
        raise errors.InvalidEntryError(
            f"{len(entries)} entries; a checkpoint holds at most {MAX_ENTRIES}"
        )
    nested = False
    for name in entries:
        if not (
            type(name) is str
            and len(name) <= MAX_NAME_CHARS
            and _PLAIN_NAME.fullmatch(name)
            and name[-1] != " "
        ):
            entry_name(name)  # the slow path: Unicode names, or the error that says why not
        nested = nested or "/" in name
    names = sorted(entries)
    if nested:
        entry_names_consistent(names)
    return names


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
    if type(name) is str and _PLAIN_NAMESPACE.fullmatch(name):
        return name
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
    bad = control_char(name)
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


def check_json(
    value: Any,
    path: str,
    depth: int,
    what: str = "metadata",
    error: type[errors.InvalidInputError] = errors.InvalidMetadataError,
) -> None:
    if depth > MAX_JSON_DEPTH:
        raise error(f"{what} nests deeper than {MAX_JSON_DEPTH} levels at {path}")
    if value is None or isinstance(value, bool | int | str):
        if isinstance(value, str) and has_surrogate(value):
            raise error(f"{what} string at {path} is not valid Unicode")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise error(f"{what} value at {path} is {value}; JSON has no NaN or infinity")
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_json(item, f"{path}[{i}]", depth + 1, what, error)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise error(
                    f"{what} key {key!r} at {path} is not a str; JSON object keys are strings"
                )
            if has_surrogate(key):
                raise error(f"{what} key at {path} is not valid Unicode")
            check_json(item, f"{path}.{key}", depth + 1, what, error)
        return
    raise error(
        f"{what} value at {path} has type {type(value).__name__}, which is not JSON "
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
    # Every commit passes here: plain JSON values are checked by a quick walk and the one
    # UTF-8 encoding of the text; anything else gets the full walk, which names the path.
    if not _plain_json(value, 0):
        check_json(value, "$", 0)
    if "ckptdb:sealed" in value:
        raise errors.InvalidMetadataError(
            "the metadata key 'ckptdb:sealed' is reserved (it marks sealed metadata); rename it"
        )
    try:
        text = canonical.dumps(dict(value))
    except (TypeError, ValueError, RecursionError) as exc:
        raise errors.InvalidMetadataError(f"metadata is not JSON-serializable: {exc}") from exc
    try:
        if len(text) * 4 > max_bytes:  # else it fits whatever its characters' widths
            metadata_size(text, max_bytes)
        else:
            text.encode("utf-8")  # a lone surrogate raises here
    except UnicodeEncodeError:
        check_json(value, "$", 0)  # a lone surrogate somewhere: say where
        raise errors.InvalidMetadataError("metadata is not valid Unicode") from None
    return text


def _plain_json(value: Any, depth: int) -> bool:
    """True when ``value`` is built only of dict (str keys), list, str, int, bool, None and
    finite floats, at most :data:`MAX_JSON_DEPTH` levels deep (lone surrogates are caught
    by encoding)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth >= MAX_JSON_DEPTH:
        return False
    if kind is dict:
        items: Any = value.values()
        for key in value:
            if type(key) is not str:
                return False
    elif kind is list:
        items = value
    else:
        return False
    # Scalars are checked here, without a call each: metadata is mostly flat.
    for item in items:
        inner = type(item)
        if inner is str or inner is int or inner is bool or item is None:
            continue
        if inner is float:
            if not math.isfinite(item):
                return False
            continue
        if not _plain_json(item, depth + 1):
            return False
    return True


def metadata_size(text: str, max_bytes: int) -> None:
    """InvalidMetadataError when canonical metadata ``text`` is over ``max_bytes``."""
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise errors.InvalidMetadataError(
            f"metadata is {size} bytes as canonical JSON; the limit is {max_bytes}. Store large "
            "data as an entry instead of metadata.",
            size=size,
            limit=max_bytes,
        )


def metadata_update(value: Mapping[str, Any]) -> dict[str, Any]:
    """Validate keys to set in stored metadata (the rules of :func:`metadata`; the size
    limit applies to the metadata they end up in)."""
    parsed: dict[str, Any] = json.loads(metadata(value, max_bytes=2**31))
    return parsed


def stored_json(text: object, what: str, reason: str, **details: Any) -> Any:
    """Parse JSON that ckptdb itself wrote into a file (metadata, settings, receipt bodies)
    and read back from it.

    A file is not trusted to hold what ckptdb writes: text that nests deeper than
    :data:`MAX_JSON_DEPTH` or cannot be parsed (an integer of more digits than Python
    converts, a NaN) raises CorruptionError naming ``what`` with ``reason``, never a
    RecursionError or ValueError. The caller checks the value's shape."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            text = "\ufffd"  # reported below as not valid JSON
    if not isinstance(text, str):  # a damaged row: a number where text belongs
        text = "\ufffd"
    # Counting brackets is cheap (C); only text with that many brackets gets the scan. At
    # exactly MAX_JSON_DEPTH + 1 open brackets the innermost container is at the limit and
    # must be empty, which only the parsed value shows (parsing that deep is safe).
    nesting = json_nesting(text) if text.count("[") + text.count("{") > MAX_JSON_DEPTH else 0
    problem = f"nests deeper than {MAX_JSON_DEPTH} levels"
    if nesting <= MAX_JSON_DEPTH + 1:
        try:
            value = _STORED_JSON.decode(text)
        except (ValueError, RecursionError) as exc:
            problem = f"is not valid JSON ({safe_text(str(exc), 200)})"
        else:
            if nesting <= MAX_JSON_DEPTH or _within_depth(value):
                return value
    raise errors.CorruptionError(
        f"the stored {what} {problem}: ckptdb never writes that, so the file is damaged or "
        "was crafted. Run `ckptdb verify`; nothing was changed.",
        reason=reason,
        **details,
    )


def _within_depth(value: Any) -> bool:
    """Whether nothing in a parsed JSON value sits deeper than :data:`MAX_JSON_DEPTH`
    (the rule :func:`metadata` holds a writer to), without recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: The decoder of stored JSON, made once: ``json.loads`` with a keyword argument builds a
#: new decoder on every call: half the cost of parsing a LangGraph checkpoint's metadata.
_STORED_JSON = json.JSONDecoder(parse_constant=_refuse_constant)


def metadata_from_json(text: str | bytes, checkpoint_id: str | None = None) -> dict[str, Any]:
    """Parse stored canonical metadata (of ``checkpoint_id``, named in the error): a JSON
    object, or CorruptionError (``metadata_unreadable``) -- see :func:`stored_json`."""
    shown = "a checkpoint" if checkpoint_id is None else f"checkpoint {checkpoint_id[:12]}"
    value = stored_json(
        text, f"metadata of {shown}", "metadata_unreadable", checkpoint_id=checkpoint_id
    )
    if not isinstance(value, dict):
        raise errors.CorruptionError(
            f"the stored metadata of {shown} is not a JSON object: ckptdb never writes that, "
            "so the file is damaged or was crafted. Run `ckptdb verify`; nothing was changed.",
            checkpoint_id=checkpoint_id,
            reason="metadata_unreadable",
        )
    return value


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = [
    {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}.get(b, 0) for b in range(256)
]


def json_nesting(text: str) -> int:
    """How many ``[``/``{`` of JSON text are open at once at most, outside its strings:
    a linear scan without recursion (safe at any depth, unlike parsing), done in C.

    Never less than the depth a parser descends to before it stops: without a backslash
    in the text every other '"' opens a string; otherwise whole strings are matched, and an
    unterminated one counts its brackets too. A closing bracket that matches nothing
    makes a parser stop there, so the running count is not held at zero."""
    outside = _JSON_STRING.sub("", text) if "\\" in text else "".join(text.split('"')[::2])
    brackets = outside.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_BRACKET_STEP.__getitem__, brackets), initial=0))


def parse_json(
    text: str, what: str, error: type[errors.InvalidInputError] = errors.InvalidInputError
) -> Any:
    """Caller-supplied JSON text as a value; ``error`` (typed, naming ``what``) for text
    that is not JSON or nests deeper than :data:`MAX_JSON_DEPTH`, checked before parsing.
    The value's own rules (finite numbers, the depth where it lands, ...) are checked by
    whoever uses it (:func:`metadata`, :func:`expect`)."""
    if json_nesting(text) > MAX_JSON_DEPTH + 1:
        raise error(
            f"{what} nests deeper than {MAX_JSON_DEPTH} levels; JSON given to ckptdb nests "
            f"at most {MAX_JSON_DEPTH} levels"
        )
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise error(f"{what} is not valid JSON: {safe_text(str(exc), 200)}") from exc


def parse_json_or_text(
    text: str, what: str, error: type[errors.InvalidInputError] = errors.InvalidInputError
) -> Any:
    """A command-line VALUE: the JSON value when ``text`` is valid JSON, else ``text``
    itself as a string. Text that opens more than :data:`MAX_JSON_DEPTH` nested brackets
    is refused with ``error`` whether or not it parses (a string that looks like that is
    given as a JSON string, quoted)."""
    if json_nesting(text) > MAX_JSON_DEPTH + 1:
        raise error(
            f"{what} opens more than {MAX_JSON_DEPTH + 1} nested brackets; JSON given to "
            f"ckptdb nests at most {MAX_JSON_DEPTH} levels (to give such text as a string, "
            "quote it as a JSON string)"
        )
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def optional_label(value: object, what: str, limit: int) -> str | None:
    """Validate an optional short label (media type, schema pin)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise errors.InvalidEntryError(
            f"{what} must be a non-empty str of at most {limit} characters, got {value!r}"
        )
    if control_char(value) is not None:
        raise errors.InvalidEntryError(f"{what} {value!r} contains a control character")
    return value


MAX_LABEL_CHARS = 256


def checkpoint_label(value: object) -> str:
    """A checkpoint label (the caller's own name for a checkpoint, unique in its
    namespace): 1 to 256 characters of valid Unicode, no control character."""
    if not isinstance(value, str) or not value or len(value) > MAX_LABEL_CHARS:
        raise errors.InvalidInputError(
            f"label must be a non-empty str of at most {MAX_LABEL_CHARS} characters, "
            f"got {value!r:.80}"
        )
    if control_char(value) is not None:
        raise errors.InvalidInputError(f"label {value!r:.80} contains a control character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise errors.InvalidInputError(
            f"label {value!r:.80} is not valid Unicode ({exc.reason})"
        ) from exc
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


def database_url(path: object) -> str | None:
    """The PostgreSQL URL ``ckptdb.open`` was given (``postgresql://`` or ``postgres://``),
    or None when ``path`` is no such URL (a file path, checked by :func:`database_path`)."""
    if not isinstance(path, str):
        return None
    scheme = _URL_SCHEME.match(path)
    if scheme is None or scheme.group(1).lower() not in _POSTGRES_SCHEMES:
        return None
    if has_surrogate(path) or "\x00" in path:
        raise errors.InvalidInputError(
            "the PostgreSQL URL holds bytes that are not UTF-8 or a NUL character"
        )
    return path


_POSTGRES_SCHEMES = ("postgres", "postgresql")


def database_path(path: object, what: str) -> str:
    """A path SQLite will open (a database, an export's destination, an import's source),
    as text: SQLite names files in UTF-8, so a path holding bytes that are not UTF-8 is
    refused here, before anything is created, rather than failing inside the driver."""
    text = os.fspath(path) if isinstance(path, str | os.PathLike) else path
    if not isinstance(text, str):
        raise errors.InvalidInputError(
            f"{what} must be a str or os.PathLike[str], not {type(text).__name__}"
        )
    if has_surrogate(text):
        raise errors.InvalidInputError(
            f"{what} {safe_text(text, 200)!r} holds bytes that are not UTF-8; SQLite names "
            "files in UTF-8. Rename the file or directory, or choose another path."
        )
    if scheme := _URL_SCHEME.match(text):
        # A URL would otherwise be a relative path ("postgresql:" / "" / "host" / ...)
        # and fail, if at all, as a missing directory. The text is not echoed: a URL may
        # carry a password.
        engine = (
            " ckptdb.open() takes a PostgreSQL URL; this command or argument takes a file."
            if scheme.group(1).lower() in _POSTGRES_SCHEMES
            else " ckptdb.open() also takes a postgresql:// URL."
        )
        raise errors.InvalidInputError(
            f"{what} is a URL ({scheme.group(1)}://...), not a file path; pass the path "
            f"of a local SQLite file.{engine}"
        )
    return text


#: The start of a URL (``scheme://``), which a file path never is in practice.
_URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def open_arguments(
    path: object,
    migrate: object,
    synchronous: object,
    chunk_size: object,
    page_size: object,
    *,
    url: str | None = None,
) -> str:
    """Check the arguments of ``ckptdb.open``; returns the path as text (``url``: the
    PostgreSQL URL :func:`database_url` found in ``path``, returned as it is). The bounds
    are those of :mod:`ckptdb.limits`, which the file's readers hold to as well."""
    min_chunk, max_chunk = limits.MIN_CHUNK_BYTES, limits.MAX_CHUNK_BYTES
    if migrate not in ("auto", "never", "check"):
        raise errors.InvalidInputError(
            f"migrate must be 'auto', 'never' or 'check', not {migrate!r}"
        )
    if synchronous not in ("off", "normal", "full", "extra"):
        raise errors.InvalidInputError(
            f"synchronous must be 'full', 'normal', 'extra' or 'off', not {synchronous!r}"
        )
    text = url if url is not None else database_path(path, "the database path")
    if chunk_size is not None and not (
        type(chunk_size) is int and min_chunk <= chunk_size <= max_chunk
    ):
        raise errors.InvalidInputError(
            f"chunk_size must be a whole number of bytes from {min_chunk} to {max_chunk}, "
            f"got {chunk_size!r}; nothing was created"
        )
    if page_size is not None and (
        type(page_size) is not int
        or page_size < limits.MIN_PAGE_SIZE
        or page_size > limits.MAX_PAGE_SIZE
        or page_size & (page_size - 1)
    ):
        raise errors.InvalidInputError(
            f"page_size must be a power of two from {limits.MIN_PAGE_SIZE} to "
            f"{limits.MAX_PAGE_SIZE}, got {page_size!r}; nothing was created"
        )
    return text


def max_metadata_bytes(value: object) -> int:
    """The ``max_metadata_bytes`` of ``ckptdb.open``: a whole number of bytes up to the
    format's :data:`ckptdb.limits.MAX_METADATA_BYTES`, the bound that importing an export
    holds metadata to (a larger per-handle limit would let a commit write metadata that no
    import of the same version reads back)."""
    if type(value) is not int or not (
        limits.MIN_METADATA_BYTES <= value <= limits.MAX_METADATA_BYTES
    ):
        raise errors.InvalidInputError(
            f"max_metadata_bytes must be a whole number of bytes from "
            f"{limits.MIN_METADATA_BYTES} to {limits.MAX_METADATA_BYTES}, got {value!r}"
        )
    return value


MAX_CODE_REVISION_CHARS = 200


def code_revision(value: object) -> str | None:
    """The code revision a handle records in what it writes (``open(code_revision=...)``):
    None, or a str of 1-200 printable characters (no NUL, newline or other control
    character) with no leading or trailing space."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise errors.InvalidInputError(
            f"code_revision must be a str (e.g. a git commit id) or None, not "
            f"{type(value).__name__}"
        )
    if not value or len(value) > MAX_CODE_REVISION_CHARS:
        raise errors.InvalidInputError(
            f"code_revision must be 1 to {MAX_CODE_REVISION_CHARS} characters, got {len(value)}"
        )
    if not value.isprintable():
        raise errors.InvalidInputError(
            f"code_revision {safe_text(value, 80)!r} contains a non-printable character (a "
            "trailing newline from `git rev-parse`?); strip it"
        )
    if value != value.strip():
        raise errors.InvalidInputError(
            f"code_revision {value!r} has leading or trailing whitespace; strip it"
        )
    return value
