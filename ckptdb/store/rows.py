"""Row types of the core tables and the type check every read applies.

A damaged record can hold a value of any SQLite type in any column (STRICT tables check
types on write only); every row is type-checked where it is read, so damage surfaces as a
typed CorruptionError, never as a TypeError far away.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from .. import canonical, errors

T = TypeVar("T")
_N = type(None)
#: the checkpoint columns as read (store/checkpoints.CHECKPOINT_COLUMNS), in order
CHECKPOINT_TYPES: tuple[Any, ...] = (
    *(int, str, str, int, (str, _N), int, int, str, int, int),
    (str, _N),  # code_revision (schema v5)
    (str, _N),  # label (schema v7)
)
ENTRY_TYPES: tuple[Any, ...] = (str, int, str, int, (str, _N), (str, _N), int, (int, _N))
POINTER_TYPES: tuple[Any, ...] = (int, str, int, str, (str, _N), int, str, (str, _N), int)
HISTORY_TYPES: tuple[Any, ...] = (str, int, str, (str, _N), (str, _N), str, str, int)


def check_types(row: tuple[Any, ...], types: tuple[Any, ...], what: str) -> None:
    """Raise CorruptionError unless every value has its column's type: a damaged record
    can hold a value of another type (STRICT tables check types on write only), and that
    must surface as corruption, not as a TypeError far away."""
    # Every read of every row passes here: the common case is checked at C speed.
    if len(row) == len(types) and all(map(isinstance, row, types)):
        return
    for value, expected in zip(row, types, strict=True):
        if not isinstance(value, expected):
            raise errors.CorruptionError(
                f"{what}: a stored value has the wrong type ({type(value).__name__}); the "
                "record is damaged. Run `ckptdb verify`.",
                reason="wrong_type",
            )


def typed(cls: type[T], row: tuple[Any, ...], types: tuple[Any, ...], what: str) -> T:
    """Build ``cls`` from a row after :func:`check_types`."""
    check_types(row, types, what)
    return cls(*row)


@dataclass(frozen=True)
class CheckpointRow:
    """A row of ``checkpoint`` joined with its namespace name."""

    seq: int
    id: str
    namespace: str
    namespace_id: int
    parent_id: str | None
    generation: int
    created_at_ms: int
    metadata_json: str
    entry_count: int
    total_size: int
    #: the code revision of the program that wrote it (``open(code_revision=...)``); not
    #: part of the manifest or the id, so not covered by its digest
    code_revision: str | None
    #: the caller's own name for it, unique in its namespace (schema v7; not in the id)
    label: str | None = None


@dataclass(frozen=True)
class EntryRow:
    """An entry joined with its blob."""

    name: str
    blob_id: int
    digest: str
    size: int
    media_type: str | None
    schema_pin: str | None
    chunk_count: int
    #: the key scope of the blob (None: plaintext)
    scope_id: int | None = None


@dataclass(frozen=True)
class CurrentSummary:
    """What a commit needs to know about the checkpoint CURRENT names (from its row, not
    verified: only used where a mismatch is harmless or re-checked through the id)."""

    parent_id: str | None
    generation: int
    entry_count: int
    total_size: int
    metadata_json: str


def pointer_dangling(namespace: str) -> errors.CorruptionError:
    """The error for a write on top of a CURRENT that names a checkpoint not stored."""
    return errors.CorruptionError(
        f"namespace {namespace!r}: its CURRENT pointer names a checkpoint row that is not "
        "stored, or not of this namespace (deleted or damaged outside ckptdb), so nothing "
        "was written. Run `ckptdb verify` "
        "(finding foreign_key); `ckptdb log --all` lists the namespace's checkpoints and "
        "`ckptdb set-current` to a verified one repairs it, or restore the file from a "
        "backup.",
        namespace=namespace,
        reason="pointer_dangling",
    )


@dataclass(frozen=True)
class PointerRow:
    """The CURRENT pointer of a namespace, plus a summary of the checkpoint it names."""

    namespace_id: int
    namespace: str
    current_seq: int
    current_id: str
    fallback_id: str | None
    revision: int
    digest: str
    previous_digest: str | None
    updated_at_ms: int
    #: None when the row of the current checkpoint is damaged (a value of the wrong type or
    #: text that is not UTF-8): the pointer itself is still readable, so fallback can work.
    summary: CurrentSummary | None
    #: the key scope of the namespace (None: plaintext)
    scope_id: int | None = None
    #: False when the current checkpoint's row is not stored (deleted outside ckptdb): the
    #: ids then come from the pointer history, and ``summary`` is None.
    current_stored: bool = True
    #: The current checkpoint's stored generation when it is an integer, even when other
    #: columns of its row are damaged (fallback's walk predicts generations from it).
    current_generation: int | None = None

    def current_summary(self) -> CurrentSummary:
        """The summary, or CorruptionError when the current checkpoint's row is damaged or
        not stored."""
        if not self.current_stored:
            raise pointer_dangling(self.namespace)
        if self.summary is None:
            raise errors.CorruptionError(
                f"namespace {self.namespace!r}: the row of its CURRENT checkpoint "
                f"{self.current_id[:12]} is damaged. Run `ckptdb verify`, then move CURRENT "
                "to a verified checkpoint with set_current (load with fallback finds one).",
                namespace=self.namespace,
                checkpoint_id=self.current_id,
                reason="wrong_type",
            )
        return self.summary


@dataclass(frozen=True)
class HistoryRow:
    """One pointer move."""

    namespace: str
    revision: int
    current_id: str
    fallback_id: str | None
    previous_digest: str | None
    digest: str
    reason: str
    at_ms: int

    def intact(self) -> bool:
        """True when the row matches its digest (so its ids can be trusted)."""
        return self.digest == canonical.pointer_digest(
            self.namespace, self.revision, self.current_id, self.fallback_id, self.previous_digest
        )
