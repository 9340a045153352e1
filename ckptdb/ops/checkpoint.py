"""The :class:`Checkpoint` handle: an immutable manifest plus verified access to its bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import IO, Any

from .. import canonical, errors, models, validation
from ..store import crypto
from ..store.checkpoints import check_manifest
from ..store.rows import CheckpointRow, EntryRow
from ..types import BlobRef
from . import read
from .handle import Handle


def check_scope(handle: Handle, row: CheckpointRow, entries: list[EntryRow]) -> None:
    """CorruptionError unless every entry's blob lies in the key scope of the namespace
    (decided by its name): a namespace under an encrypted prefix never hands out plaintext
    records, which anyone with write access to the file could have forged."""
    keyring = handle.keyring
    conn = handle.store.conn
    for reload in (False, True):  # a scope another handle created since: read them again
        scope = keyring.row_for_namespace(conn, row.namespace, reload=reload)
        expected = None if scope is None else scope.scope_id
        if all(e.scope_id == expected for e in entries):
            return
    raise errors.CorruptionError(
        f"checkpoint {row.id[:12]} of namespace {row.namespace!r}: its entries are not "
        "sealed in the namespace's key scope (records were moved or forged); nothing was "
        "returned. Run `ckptdb verify`.",
        checkpoint_id=row.id,
        reason="scope_mismatch",
    )


#: How stored metadata sealed in a key scope begins (``{"ckptdb:sealed": ...}``).
_SEALED_PREFIX = canonical.dumps({crypto.SEALED_METADATA: None})[:-5]


class Checkpoint:
    """One checkpoint of a namespace.

    The manifest was checked against the id when this handle was made (the stored rows hash
    to it), so every entry digest is bound to the id. Reading an entry verifies its bytes
    against that digest before returning them.
    """

    __slots__ = ("_entries", "_handle", "_held", "_info", "_metadata", "_row")

    def __init__(
        self,
        handle: Handle,
        row: CheckpointRow,
        entries: list[EntryRow],
        *,
        verified: bool = False,
        held: dict[str, bytes] | None = None,
    ) -> None:
        if not verified:  # ``verified``: these very rows were checked before (cache)
            check_manifest(row, entries)
            check_scope(handle, row, entries)
        self._handle = handle
        self._row = row
        self._entries = {e.name: e for e in entries}
        # Entries read with the manifest (``get_many(prefetch=...)``), verified against
        # their digests in the same read: a read of them reads nothing more.
        self._held = held or {}
        # The manifest model (metadata parsed and opened, entries as models) is built on
        # first use: a reader that only wants bytes -- a LangGraph page -- never pays for it.
        self._info: models.CheckpointInfo | None = None
        self._metadata: dict[str, Any] | None = None
        if not verified:
            # Unreadable metadata is damage found now, not at first use: a fallback walk
            # must see it as such.
            self._opened_metadata()

    # -- manifest ------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The checkpoint id (sha256 of the canonical manifest, hex)."""
        return self._row.id

    @property
    def namespace(self) -> str:
        """The namespace this checkpoint belongs to."""
        return self._row.namespace

    @property
    def parent_id(self) -> str | None:
        """Id of the checkpoint this one was committed on top of (None for the first)."""
        return self._row.parent_id

    @property
    def generation(self) -> int:
        """1 for the first checkpoint of a lineage, parent's generation + 1 after that."""
        return self._row.generation

    @property
    def created_at(self) -> datetime:
        """When it was first committed (UTC). Not part of the id."""
        return self._model().created_at

    @property
    def metadata(self) -> dict[str, Any]:
        """A copy of the metadata given at commit (still sealed, ``{"ckptdb:sealed": ...}``,
        in a scope that seals metadata when this handle lacks its key)."""
        return json.loads(json.dumps(self._opened_metadata()))  # type: ignore[no-any-return]

    @property
    def metadata_json(self) -> str:
        """The metadata as canonical JSON text (opened, like :attr:`metadata`): for a caller
        that stores or forwards it, without building the copy :attr:`metadata` makes."""
        text = self._row.metadata_json
        if text.startswith(_SEALED_PREFIX):  # sealed: the opened value, written out
            return canonical.dumps(self._opened_metadata())
        return text  # ckptdb stores canonical JSON, and __init__ proved this parses

    @property
    def code_revision(self) -> str | None:
        """The code revision of the program that wrote it (``open(code_revision=...)``),
        or None. Recorded beside the manifest, not part of the id."""
        return self._row.code_revision

    @property
    def label(self) -> str | None:
        """Its label (``commit(label=...)``): the caller's own name for it, unique in its
        namespace, or None. Recorded beside the manifest, not part of the id."""
        return self._row.label

    @property
    def entries(self) -> Mapping[str, models.EntryInfo]:
        """Entries by name, in name order."""
        return MappingProxyType({e.name: e for e in self._model().entries})

    @property
    def total_size(self) -> int:
        """Sum of entry sizes in bytes."""
        return self._row.total_size

    @property
    def info(self) -> models.CheckpointInfo:
        """The manifest as a pydantic model (JSON-serializable)."""
        return self._model()

    def _model(self) -> models.CheckpointInfo:
        if self._info is None:
            entries = list(self._entries.values())
            self._info = checkpoint_info(self._row, entries, self._opened_metadata())
        return self._info

    def _opened_metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            self._metadata = metadata_of(self._handle, self._row)
        return self._metadata

    def __repr__(self) -> str:
        return (
            f"<Checkpoint {self.id[:12]} ns={self.namespace!r} gen={self.generation} "
            f"entries={len(self._entries)}>"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    # -- bytes -----------------------------------------------------------------------------

    def entry_row(self, name: str) -> EntryRow:
        """The stored row of an entry (for reads batched across checkpoints), or
        EntryNotFoundError."""
        try:
            return self._entries[name]
        except KeyError:
            raise errors.EntryNotFoundError(
                f"checkpoint {self.id[:12]} has no entry {name!r}; it has "
                f"{len(self._entries)} entr{'y' if len(self._entries) == 1 else 'ies'}",
                checkpoint_id=self.id,
                entry=name,
            ) from None

    def read(self, name: str) -> bytes:
        """All bytes of an entry, verified against its digest. Raises CorruptionError (never
        returns wrong bytes) and EntryNotFoundError. An entry prefetched with the manifest
        (``Database.get_many(prefetch=...)``) comes from that read."""
        held = self._held.get(name)
        if held is not None:
            return held
        return read.read_entry(self._handle, self.id, self.entry_row(name))

    def open(self, name: str) -> IO[bytes]:
        """A binary stream over an entry that verifies each piece before returning it.

        Memory stays bounded by one chunk whatever the entry size.
        """
        return read.open_entry(self._handle, self.id, self.entry_row(name))

    def ref(self, name: str) -> BlobRef:
        """A reference to an entry's stored content, to commit it again without its bytes."""
        entry = self.entry_row(name)
        return BlobRef(entry.digest, entry.size)

    def iter_bytes(self, name: str) -> Iterator[bytes]:
        """The entry's bytes as verified pieces (at most one chunk each)."""
        return read.iter_entry(self._handle, self.id, self.entry_row(name))

    def verify(self) -> None:
        """Read and verify every entry, each whole-content digest included (the explicit
        full check); raise CorruptionError for the first bad one."""
        for entry in self._entries.values():
            read.verify_entry(self._handle, self.id, entry)


def held_bytes(cp: Checkpoint, name: str) -> bytes | None:
    """The bytes of an entry of ``cp`` prefetched with its manifest and verified then
    (``Database.get_many(prefetch=...)``), or None: not asked for, not stored inline, or
    not verified (a read then says why)."""
    return cp._held.get(name)


def metadata_of(handle: Handle, row: CheckpointRow) -> dict[str, Any]:
    """A checkpoint's metadata, opened when it is sealed and the handle has the key."""
    value = validation.metadata_from_json(row.metadata_json, row.id)
    if not crypto.is_sealed_metadata(value):
        return value
    try:
        scope = handle.keyring.scope_for_namespace(handle.store.conn, row.namespace)
    except (errors.KeyUnavailableError, errors.KeyShreddedError, errors.KeyMismatchError):
        return value  # shown sealed: reading its entries will say what is missing
    return scope.open_metadata(value)


def checkpoint_info(
    row: CheckpointRow, entries: list[EntryRow], metadata: dict[str, Any] | None = None
) -> models.CheckpointInfo:
    """The manifest model of a stored checkpoint (``metadata``: as opened, when it was
    sealed)."""
    return models.CheckpointInfo(
        id=row.id,
        namespace=row.namespace,
        parent_id=row.parent_id,
        generation=row.generation,
        created_at=models.from_ms(row.created_at_ms),
        metadata=(
            validation.metadata_from_json(row.metadata_json, row.id)
            if metadata is None
            else metadata
        ),
        entries=[
            models.EntryInfo(
                name=e.name,
                digest=e.digest,
                size=e.size,
                media_type=e.media_type,
                schema_pin=e.schema_pin,
            )
            for e in entries
        ],
        code_revision=row.code_revision,
        label=row.label,
    )
