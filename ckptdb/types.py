"""Public value types a caller passes in: :class:`Entry`, :class:`BlobRef`, :class:`Addressed`
and :data:`UNSET`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from . import errors, validation

#: ``progress(done, total)``: how far an operation that moves bytes or rows has come (commit,
#: checkout, export, import, GC); called from the operation's thread, never printing.
Progress = Callable[[int, int], None]

#: ``progress(phase, done, total)``: the same for an operation in named phases (verify).
PhaseProgress = Callable[[str, int, int], None]


class Entry:
    """An entry value with optional attributes that become part of the manifest.

    ``value`` is bytes, str (stored as UTF-8), a path (``os.PathLike``) or a binary file
    object (streamed). ``media_type`` (e.g. ``application/json``) and ``schema_pin`` (a
    schema pin such as ``graph-snapshot/v3``; the same name as ``EntryInfo.schema_pin`` and
    the ``entry.schema_pin`` column) are recorded in the manifest and the checkpoint id.
    """

    __slots__ = ("media_type", "schema_pin", "value")

    def __init__(self, value: Any, *, media_type: str | None = None, schema_pin: str | None = None):
        self.value = value
        self.media_type = validation.optional_label(
            media_type, "media_type", validation.MAX_MEDIA_TYPE_CHARS
        )
        self.schema_pin = validation.optional_label(
            schema_pin, "schema_pin", validation.MAX_SCHEMA_CHARS
        )

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


class Addressed:
    """Bytes with the content address their caller computed: committed like the bytes, but
    not hashed again (an integration that hashes a value to decide whether it changed hands
    ckptdb the digest, so each value is hashed once per put).

    ``digest`` must be the address of ``data`` in the namespace's key scope --
    ``sha256(data).hexdigest()`` outside any scope (``scope_id=None``), or
    ``Database.content_address(namespace, data)`` inside one, with that scope's id from
    ``Database.record_sealer(namespace).scope_id``. For any other scope than the one named,
    ckptdb computes the address itself. It is trusted as given otherwise: a wrong digest
    stores bytes that no verified read accepts, so only code that computed it from the very
    bytes (an integration, in process) should use this.
    """

    __slots__ = ("data", "digest", "scope_id")

    def __init__(self, data: bytes, digest: str, scope_id: int | None = None) -> None:
        if type(data) is not bytes:
            raise errors.InvalidEntryError("Addressed data must be bytes")
        if type(digest) is not str or not validation.is_full_id(digest):
            raise errors.InvalidEntryError(
                f"Addressed digest {digest!r:.80} is not a sha256 hex digest"
            )
        self.data = data
        self.digest = digest
        self.scope_id = scope_id

    def __repr__(self) -> str:
        return f"Addressed({len(self.data)} bytes, {self.digest[:12]})"
