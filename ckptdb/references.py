"""The one grammar of checkpoint references (pure text: no database needed).

A reference names one checkpoint. It is, tried in this order:

* ``ID`` -- a full checkpoint id (64 hex characters, any case);
* ``PREFIX`` -- a unique prefix of an id, at least 8 hex characters;
* ``NS[@current|@fallback][~N]`` -- the CURRENT (the default) or the fallback of namespace
  ``NS``, then ``N`` generations back from it along parent links (``~0`` is itself).

So ``brain-1``, ``brain-1@current`` and ``brain-1~0`` name the same checkpoint;
``brain-1~2`` is the grandparent of CURRENT and ``brain-1@fallback~1`` the parent of the
fallback.

The suffixes are read from the right, once each: first ``~N`` (digits only), then
``@current`` or ``@fallback``; everything left of them is the namespace, verbatim. A
namespace that itself contains ``~`` or ``@``, or that looks like a hex prefix, is therefore
written with an explicit ``@current``: namespace ``team@eu`` is ``team@eu@current``,
namespace ``run~3`` is ``run~3@current`` (plain ``run~3`` means three generations back in
namespace ``run``), namespace ``deadbeef`` is ``deadbeef@current``. :func:`format_reference`
writes this form whenever it is needed, so ``parse_reference(format_reference(...))``
always returns what was formatted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from . import errors, validation

Anchor = Literal["current", "fallback"]

_BACK = re.compile(r"~([0-9]{1,9})\Z")
_HEX = re.compile(r"[0-9a-fA-F]{8,64}\Z")
#: The shortest id prefix accepted (shorter ones collide too often to be safe).
MIN_PREFIX = 8
#: The most generations a reference walks back (``~N`` has at most 9 digits).
MAX_BACK = 999_999_999


@dataclass(frozen=True)
class Reference:
    """A parsed reference: either an id (or id prefix) or a namespace position."""

    id_prefix: str | None = None
    namespace: str | None = None
    anchor: Anchor = "current"
    back: int = 0

    @property
    def is_full_id(self) -> bool:
        """True for a complete 64-character id."""
        return self.id_prefix is not None and len(self.id_prefix) == 64


def parse_reference(text: object) -> Reference:
    """Parse a reference (see the module docstring); InvalidReferenceError if malformed."""
    if not isinstance(text, str) or not text:
        raise errors.InvalidReferenceError("empty checkpoint reference")
    if _HEX.match(text):
        return Reference(id_prefix=text.lower())
    rest = text
    back = 0
    match = _BACK.search(rest)
    if match and match.start() > 0:
        back = int(match.group(1))
        rest = rest[: match.start()]
    anchor: Anchor = "current"
    for name in ("current", "fallback"):
        suffix = "@" + name
        if rest.endswith(suffix) and len(rest) > len(suffix):
            anchor = name
            rest = rest[: -len(suffix)]
            break
    try:
        namespace = validation.namespace(rest)
    except errors.InvalidNamespaceError as exc:
        raise errors.InvalidReferenceError(
            f"{text[:80]!r} is not a checkpoint reference ({exc.message}): give a full id, a "
            f"unique prefix of at least {MIN_PREFIX} hex characters, or "
            "NAMESPACE[@current|@fallback][~N]"
        ) from exc
    return Reference(namespace=namespace, anchor=anchor, back=back)


def needs_anchor(namespace: str) -> bool:
    """True when a bare ``namespace`` would be read as something else (an id prefix, a
    ``~N`` walk or an ``@`` anchor), so it must be written with ``@current``."""
    return bool(_HEX.match(namespace) or _BACK.search(namespace) or "@" in namespace)


def format_reference(namespace: str, anchor: Anchor = "current", back: int = 0) -> str:
    """The shortest reference text that :func:`parse_reference` reads back as the given
    namespace position (so different positions never share a text);
    InvalidReferenceError for a position no reference can name."""
    try:
        validation.namespace(namespace)
    except errors.InvalidNamespaceError as exc:
        raise errors.InvalidReferenceError(
            f"no reference names namespace {str(namespace)[:80]!r}: {exc.message}"
        ) from exc
    if anchor not in ("current", "fallback"):
        raise errors.InvalidReferenceError(
            f"anchor must be 'current' or 'fallback', got {anchor!r:.80}"
        )
    if not isinstance(back, int) or isinstance(back, bool) or not 0 <= back <= MAX_BACK:
        raise errors.InvalidReferenceError(
            f"back must be a number of generations from 0 to {MAX_BACK}, got {back!r:.80}"
        )
    text = namespace
    if anchor == "fallback" or needs_anchor(namespace):
        text += "@" + anchor
    if back:
        text += f"~{back}"
    return text
