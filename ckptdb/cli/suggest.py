"""Suggestions for a name that names nothing: a namespace or entry name that does not
exist gets the closest names that do in its error message ("did you mean 'brain-1'?"; with
``--json`` also the list ``did_you_mean``).

The library reports what is missing; the names to suggest come from the public API
(``Database.namespaces``, ``Checkpoint.entries``), looked up only once the error happened,
so a command that succeeds pays nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from .. import Checkpoint, Database, errors
from ..references import parse_reference

#: At most this many suggestions; difflib's ratio a name must reach to be one.
_SUGGESTIONS = 3
_CUTOFF = 0.6


def _namespace_of(text: str) -> str | None:
    """The namespace a NAMESPACE argument or a CHECKPOINT reference names (None for an id)."""
    try:
        return parse_reference(text).namespace
    except errors.InvalidReferenceError:
        return None


def _with_suggestions(exc: errors.CkptdbError, matches: list[str]) -> errors.CkptdbError:
    listed = " or ".join(repr(m) for m in matches)
    return type(exc)(f"{exc.message}; did you mean {listed}?", **exc.details, did_you_mean=matches)


def _close(wanted: Iterable[str], existing: list[str]) -> list[str]:
    matches: list[str] = []
    for name in wanted:
        if name in existing:
            continue
        for match in difflib.get_close_matches(name, existing, _SUGGESTIONS, _CUTOFF):
            if match not in matches:
                matches.append(match)
    return matches[:_SUGGESTIONS]


@contextmanager
def namespaces(handle: Database, *given: str) -> Iterator[None]:
    """Add the existing namespaces closest to ``given`` (NAMESPACE arguments or CHECKPOINT
    references) to a NamespaceNotFoundError raised inside."""
    try:
        yield
    except errors.NamespaceNotFoundError as exc:
        wanted = [ns for ns in map(_namespace_of, given) if ns is not None]
        matches = _close(wanted, [info.name for info in handle.namespaces()])
        if not matches:
            raise
        raise _with_suggestions(exc, matches) from exc


@contextmanager
def entry(checkpoint: Checkpoint, name: str) -> Iterator[None]:
    """Add the entries of ``checkpoint`` closest to ``name`` to an EntryNotFoundError raised
    inside."""
    try:
        yield
    except errors.EntryNotFoundError as exc:
        matches = _close([name], list(checkpoint.entries))
        if not matches:
            raise
        raise _with_suggestions(exc, matches) from exc
