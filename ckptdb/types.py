"""Public value types a caller passes in: :class:`Entry`, :class:`BlobRef` and :data:`UNSET`."""

from __future__ import annotations

from typing import Any, Final

from . import errors, validation


class Entry:
    """An entry value with optional attributes that become part of the manifest.

    ``value`` is bytes, str (stored as UTF-8), a path (``os.PathLike``) or a binary file
    object (streamed). ``media_type`` (e.g. ``application/json``) and ``schema_pin`` (a
    schema pin such as ``graph-snapshot/v3``; the same name as ``EntryInfo.schema_pin`` and
    the ``entry.schema_pin`` column) are recorded in the manifest and the checkpoint id.
    ``schema=`` is the deprecated old name of ``schema_pin=``.
    """

    __slots__ = ("media_type", "schema_pin", "value")

    def __init__(
        self,
        value: Any,
        *,
        media_type: str | None = None,
        schema_pin: str | None = None,
        schema: str | None = None,
    ):
        if schema is not None and schema_pin is not None:
            raise errors.InvalidEntryError(
                "give schema_pin only (schema is its deprecated old name)"
            )
        self.value = value
        self.media_type = validation.optional_label(
            media_type, "media_type", validation.MAX_MEDIA_TYPE_CHARS
        )
        self.schema_pin = validation.optional_label(
            schema_pin if schema is None else schema, "schema_pin", validation.MAX_SCHEMA_CHARS
        )

    @property
    def schema(self) -> str | None:
        """Deprecated alias of :attr:`schema_pin`."""
        return self.schema_pin

    def __repr__(self) -> str:
        kind = type(self.value).__name__
        return f"Entry({kind}, media_type={self.media_type!r}, schema_pin={self.schema_pin!r})"


class BlobRef:
    """Content already stored in this database, named by its digest and size.

    Committing a ``BlobRef`` re-uses the stored blob without sending, hashing or comparing
    its bytes again -- what an integration does for the parts of a state that did not
    change (``Checkpoint.ref(name)`` gives the reference of an entry). The commit checks,
    inside its transaction, that the blob still exists with that size; if GC removed it
    meanwhile the commit fails with the retryable BlobMissingError (commit the bytes).
    """

    __slots__ = ("digest", "size")

    def __init__(self, digest: str, size: int) -> None:
        if not isinstance(digest, str) or not validation.is_full_id(digest):
            raise errors.InvalidEntryError(f"BlobRef digest {digest!r} is not a sha256 hex digest")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise errors.InvalidEntryError(f"BlobRef size {size!r} is not a byte count")
        self.digest = digest
        self.size = size

    def __repr__(self) -> str:
        return f"BlobRef({self.digest[:12]}, {self.size})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BlobRef) and (other.digest, other.size) == (
            self.digest,
            self.size,
        )

    def __hash__(self) -> int:
        return hash((self.digest, self.size))


class _Unset:
    """Type of :data:`UNSET`."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


#: "No compare-and-swap": the caller did not state which checkpoint it expects as CURRENT.
UNSET: Final = _Unset()
