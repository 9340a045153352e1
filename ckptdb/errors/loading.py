"""Errors of the reader's checks at load, and of quotas."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._base import CkptdbError, InvalidInputError

# --- the reader's checks at load (issue 14, section 3) -----------------------------------
# A reader states what it needs of the checkpoint it restores: its lineage (metadata
# fields), the entry schema versions it can read, a size bound. A checkpoint that is intact
# but does not satisfy them is refused with one of these (never with CorruptionError).


class InvalidLoadCheckError(InvalidInputError):
    """A check given to ``load`` / ``checkout`` (``expect``, ``accept_schemas``,
    ``max_bytes``) is malformed; nothing was read."""

    code = "invalid_load_check"


@dataclass(frozen=True)
class FieldMismatch:
    """One metadata field whose value is not the one the reader expected.

    ``expected`` and ``found`` are canonical JSON texts (``'"r7"'``, ``'3'``); ``found`` is
    None when the checkpoint's metadata has no such field."""

    field: str
    expected: str
    found: str | None

    def describe(self, limit: int = 120) -> str:
        """``field 'run_id': expected "r7", found "r6"`` (long values shortened)."""
        found = "missing" if self.found is None else _shorten(self.found, limit)
        return f"field {self.field!r}: expected {_shorten(self.expected, limit)}, found {found}"


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class LoadRefusedError(CkptdbError):
    """An intact checkpoint does not satisfy a check the reader gave (its lineage, the
    schema versions it can read, a size bound). Nothing was returned or written."""

    code = "load_refused"
    exit_status = 15

    def __init__(self, message: str, *, checkpoint_id: str, **kw: Any) -> None:
        super().__init__(message, checkpoint_id=checkpoint_id, **kw)
        self.checkpoint_id = checkpoint_id


class LineageMismatchError(LoadRefusedError):
    """The checkpoint's metadata does not match ``expect``: it belongs to another run,
    plan or state than the caller's. ``mismatches`` names each field, expected and found."""

    code = "lineage_mismatch"

    def __init__(
        self,
        message: str,
        *,
        checkpoint_id: str,
        mismatches: Sequence[FieldMismatch],
        **kw: Any,
    ) -> None:
        super().__init__(
            message, checkpoint_id=checkpoint_id, fields=[m.field for m in mismatches], **kw
        )
        self.mismatches: tuple[FieldMismatch, ...] = tuple(mismatches)

    @property
    def fields(self) -> list[str]:
        """Names of the mismatching fields, sorted."""
        return [m.field for m in self.mismatches]

    def to_dict(self) -> dict[str, Any]:
        """As :meth:`CkptdbError.to_dict`, plus ``mismatches``: ``field``, ``expected``,
        ``found`` (canonical JSON text; None when missing) for each field."""
        out = super().to_dict()
        out["mismatches"] = [
            {"field": m.field, "expected": m.expected, "found": m.found} for m in self.mismatches
        ]
        return out


class SchemaPinTooNewError(LoadRefusedError):
    """An entry is pinned to a newer version of a schema than the reader accepts
    (``accept_schemas``): code that reads version N must not mis-read version N+1."""

    code = "schema_pin_too_new"

    def __init__(
        self,
        message: str,
        *,
        checkpoint_id: str,
        entry: str,
        pin: str,
        schema: str,
        version: int,
        accepted: int,
        **kw: Any,
    ) -> None:
        super().__init__(
            message,
            checkpoint_id=checkpoint_id,
            entry=entry,
            pin=pin,
            schema=schema,
            version=version,
            accepted=accepted,
            **kw,
        )
        self.entry = entry
        self.pin = pin
        self.schema = schema
        self.version = version
        self.accepted = accepted


class LoadTooLargeError(LoadRefusedError):
    """The checkpoint holds more bytes than ``max_bytes`` allows; refused before any of
    its bytes was read."""

    code = "load_too_large"

    def __init__(
        self, message: str, *, checkpoint_id: str, size: int, max_bytes: int, **kw: Any
    ) -> None:
        super().__init__(message, checkpoint_id=checkpoint_id, size=size, max_bytes=max_bytes, **kw)
        self.size = size
        self.max_bytes = max_bytes


# --- quotas (issue 14) -------------------------------------------------------------------


class InvalidQuotaError(InvalidInputError):
    """A quota given to ``set_quota`` / ``clear_quota`` (prefix, limits, ``applies_to``,
    ``on_exceed``) is malformed or out of range. Nothing was written."""

    code = "invalid_quota"


class QuotaExceededError(CkptdbError):
    """A commit would have taken a namespace (or all the namespaces under a prefix) past a
    stored quota: refused, and nothing of that commit was written (for an ``evict`` quota:
    not even an eviction, because evicting every unprotected checkpoint would not have made
    room). The details name the quota, the limit and the usage the commit would have
    reached. Not retryable as it is: raise or clear the quota, or free room first."""

    code = "quota_exceeded"
    exit_status = 16
