"""The store: one module per table family, the only code that reads or writes each table.

| module | tables |
| --- | --- |
| :mod:`.blobs` | ``blob``, ``blob_chunk``, ``chunk``, ``chunk_data`` (with the modules it lists) |
| :mod:`.checkpoints` | ``namespace``, ``checkpoint``, ``blob_ref``, ``seq_high_water``, ``entry`` |
| | (the one lineage walk; scans in :mod:`.checkpoint_scans`, moves in :mod:`.entry_move`) |
| :mod:`.pointers` | ``pointer``, ``pointer_history`` |
| :mod:`.receipts` | ``receipt`` |
| :mod:`.pins` | ``pin`` |
| :mod:`.settings` | ``setting``, ``retention`` |
| :mod:`.quotas` | ``quota`` (and the usage reads a quota is checked against) |
| :mod:`.migrations` | ``ckptdb_migration`` (and ``PRAGMA user_version``) |
| :mod:`.scopes` | ``key_scope`` (and the keyring that unlocks scopes) |
| :mod:`.gc_batch` | GC's temporary lists (and the deletes of the rows they list) |

Writes to a table happen only in its module -- but for the set-based deletes of a GC
batch, which :mod:`.gc_batch` runs over its lists (its docstring says why). A query may
join a neighbouring table to read its key columns (a pointer names its checkpoint by
``seq``; reading the id joins ``checkpoint``) -- the query lives with the table it is about.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..connection.engine import EngineConnection
from .blobs import BlobStore
from .chunking import Chunker, FixedChunker
from .encoding import EncodingCache
from .quotas import QuotaCache
from .scopes import Keyring

#: Every table of the core schema (the modules above own them): what an integration's
#: session may not write (``Connection.integration_session``). A test holds it equal to the
#: tables the core migrations create.
CORE_TABLES = frozenset(
    {
        "blob", "blob_chunk", "chunk", "chunk_data", "namespace", "checkpoint", "entry",
        "pointer", "pointer_history", "receipt", "pin", "setting", "retention", "quota",
        "ckptdb_migration", "key_scope", "blob_ref", "seq_high_water",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Store:
    """The tables of one open connection: what every operation works on."""

    conn: EngineConnection
    chunk_size: int
    blobs: BlobStore
    #: this connection's copy of the quota rows (see :mod:`.quotas`): a store lives as
    #: long as its connection, and a reconnect builds a new store, so the copy is never
    #: checked against another connection's data version
    quotas: QuotaCache = field(default_factory=QuotaCache, compare=False, repr=False)

    @classmethod
    def on(
        cls,
        conn: EngineConnection,
        chunk_size: int,
        chunker: Chunker | None = None,
        keyring: Keyring | None = None,
        encodings: EncodingCache | None = None,
    ) -> Store:
        """The store over ``conn`` for a file with this chunk size and chunker (fixed-size
        cutting at ``chunk_size`` when none is given), unlocking key scopes with
        ``keyring`` (``encodings``: a cache of chunk encodings to share)."""
        return cls(
            conn,
            chunk_size,
            BlobStore(conn, chunk_size, chunker or FixedChunker(chunk_size), keyring, encodings),
        )

    @property
    def keyring(self) -> Keyring:
        """The handle's keys and key scopes."""
        return self.blobs.keyring

    @property
    def chunker(self) -> Chunker:
        """How this file cuts blobs into chunks."""
        return self.blobs.chunker

    @property
    def readonly(self) -> bool:
        """True when the connection cannot write."""
        return self.conn.readonly
