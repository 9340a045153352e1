"""Key ids, and how anything given as one may appear in a message.

A key id is the host's *name* for a key (``keys={"tenant-a": key}``); the key is 32 secret
bytes. The two are easy to swap -- ``rotate_key(key, key_id)``, ``shred_key(key)``,
``set_encryption(prefix, key_id=key)``, a key file written the wrong way round -- and an
error that echoed what it was given would then print the key into a log, a terminal or a
bug report. So no message or error detail shows a key id directly: it goes through
:func:`shown`, which never shows bytes, nor a str that is not a valid key id, nor one that
has the shape of key material (64 hex digits, or base64 of 32 bytes: the encodings ckptdb's
own key files take). Such a str is still accepted as a key id -- a key's sha256 fingerprint is
a fair name for it -- it is just never printed back.

This module sits beside ``validation`` (it imports only ``errors``), so every layer that
names a key id -- the store, the operations, the key-file reader -- uses the same rule.
"""

from __future__ import annotations

import re

from . import errors

#: A key id is a str of 1 to this many characters.
MAX_KEY_ID_CHARS = 200
#: Host keys are this many bytes (AES-256).
KEY_BYTES = 32

# 64 hex digits, or base64 (standard or URL-safe alphabet) of 32 bytes: 43 characters, plus
# one "=" when padded. Surrounding whitespace is ignored, as the key-file reader ignores it.
_KEY_SHAPES = re.compile(r"\s*(?:[0-9A-Fa-f]{64}|[A-Za-z0-9+/_-]{43}=?)\s*")


def looks_like_key(text: str) -> bool:
    """True when ``text`` has the shape of a 32-byte key written as text."""
    return _KEY_SHAPES.fullmatch(text) is not None


def _valid_text(text: str) -> bool:
    if not 1 <= len(text) <= MAX_KEY_ID_CHARS or not text.isprintable():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _hidden(value: object) -> str | None:
    """None when ``value`` may be shown; else a description holding none of its characters."""
    if isinstance(value, str):
        if not _valid_text(value):
            return f"<an invalid key id of {len(value)} characters, not shown>"
        if looks_like_key(value):
            return f"<a key id of {len(value)} characters shaped like a key, not shown>"
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        size = value.nbytes if isinstance(value, memoryview) else len(value)
        return f"<a {type(value).__name__} value of {size} bytes, not shown>"
    return f"<{type(value).__name__}, not shown>"


def shown(value: object) -> str:
    """How a key id -- or whatever was given in its place -- appears in a message: its
    ``repr`` when it is a valid key id that does not look like key material, otherwise a
    description that holds none of its characters."""
    hidden = _hidden(value)
    return repr(value) if hidden is None else hidden


def detail(value: object) -> str:
    """The same for an error detail or a JSON field: the key id itself, or the description."""
    hidden = _hidden(value)
    return str(value) if hidden is None else hidden


def check(value: object) -> str:
    """A validated key id: printable text without NUL or lone surrogates, 1-200 characters.
    InvalidKeyError otherwise, whose message never contains the value."""
    if isinstance(value, bytes | bytearray | memoryview):
        raise errors.InvalidKeyError(
            f"a key id must be a str (the name of a key), got {shown(value)}; a key goes in "
            "keys= (or the new_key argument of rotate_key), never where a key id belongs"
        )
    if not isinstance(value, str):
        raise errors.InvalidKeyError(
            f"a key id must be a str of 1-{MAX_KEY_ID_CHARS} characters, got {type(value).__name__}"
        )
    if not _valid_text(value):
        raise errors.InvalidKeyError(
            f"a key id must be 1-{MAX_KEY_ID_CHARS} printable characters without NUL or "
            f"unpaired surrogates, got {shown(value)}"
        )
    return value
