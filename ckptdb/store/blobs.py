"""The blob tables: ``blob``, ``blob_chunk``, ``chunk`` and ``chunk_data``.

Storage model (migrations 0001 and 0004): a blob below the file's chunker's inline limit is
stored whole in its ``blob`` row; a larger one is a list of chunks (``blob_chunk``) cut by
the file's chunker (``store/chunking.py``). Every stored byte passes through the codec
chain (``store/codec.py``), its codec id stored beside it. Chunk bytes go to ``chunk_data``
(written once, only rewritten to repair damage); a small ``chunk`` row carries digest,
sizes, codec and ``last_touched_ms``. A chunk that already exists is not written again.
Chunks of a value held in memory are written inside the commit transaction; those of a
stream are *staged* before it in short transactions of their own (``ops/prepare.py``).

This module is the write side, :class:`BlobStore`; the rest of the family:

| module | job |
| --- | --- |
| :mod:`.blob_reads` | :class:`~.blob_reads.BlobReads`, the read side BlobStore extends |
| :mod:`.blob_reader` | :class:`~.blob_reader.ChunkedBlobReader`, the verifying stream |
| :mod:`.encoding` | chunks encoded for storage (and the cache of encodings), and decoded |
| :mod:`.digests` | a compact list of chunk digests; the whole-blob hash on a helper thread |
| :mod:`.blob_scans` | scans and counts (verify, stats); orphan chunks, a key scope deleted |
| :mod:`.gc_batch` | a GC batch's deletes, blobs and chunks too (it says why there) |
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import canonical, errors
from ..connection import Connection
from ..connection.engine import EngineConnection
from . import codec, dialect
from .blob_reads import BlobReads
from .chunking import Chunker
from .crypto import PLAINTEXT, Scope
from .encoding import EncodedChunk, EncodingCache, decoded, verified_inline
from .scopes import Keyring

#: How often a PostgreSQL writer looks again for a row that another writer inserted, or a
#: GC deleted, between two of its statements (each time is one such race lost).
_RACES = 8
#: Digests looked up, and chunk-list rows written, per statement batch.
_ID_BATCH = 500
#: Chunk bytes up to this size are bound as a parameter; larger ones are written with
#: incremental blob I/O (no copy into a record first).
_BIND_LIMIT = 256 * 1024

_CHUNK_INSERT = (
    " INTO chunk (digest, size, last_touched_ms, codec, stored_size, scope_id, sealed_digest)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _contended(digest: str) -> errors.BusyTimeoutError:
    """A row that other transactions kept inserting and deleting under this one."""
    return errors.BusyTimeoutError(
        f"content {digest[:12]} was inserted and collected by other transactions "
        f"{_RACES} times while this commit stored it; nothing was published. Retry."
    )


def _chunk_row(chunk: EncodedChunk, now_ms: int) -> tuple[object, ...]:
    return (
        chunk.digest,
        chunk.size,
        now_ms,
        chunk.codec,
        len(chunk.stored),
        chunk.scope_id,
        chunk.sealed_digest,
    )


@dataclass
class PreparedBlob:
    """A blob ready to be referenced by the commit transaction."""

    digest: str
    size: int
    #: the raw bytes of a blob stored whole (inline), and how they are stored
    inline: bytes | None = None
    inline_codec: int = codec.RAW
    inline_stored: bytes | None = None
    #: the key scope the blob was addressed (and its bytes sealed) for
    scope: Scope = PLAINTEXT
    inline_sealed_digest: bytes | None = None
    # The sequences below default to an empty tuple (a commit prepares thousands of inline
    # blobs, which need none of them); whoever fills one passes its own container.
    chunk_ids: Sequence[int] = ()
    chunk_digests: Sequence[str] = ()
    #: chunks still to be written, inside the commit transaction (a value held in memory)
    chunks: Sequence[EncodedChunk] = ()
    bytes_staged: int = 0
    reference: bool = False  # a BlobRef: the blob must already exist
    #: digests of stored chunks whose damaged bytes were rewritten from this value
    repaired: list[str] | tuple[()] = ()

    @property
    def chunk_list_digest(self) -> str | None:
        """Digest over the ordered chunk digests (None for an inline blob)."""
        return None if self.inline is not None else canonical.chunk_list_digest(self.chunk_digests)


class BlobStore(BlobReads):
    """The ``blob``, ``blob_chunk``, ``chunk`` and ``chunk_data`` tables, on one connection:
    the writes here, the reads inherited from :class:`~.blob_reads.BlobReads`.

    The one state kept between calls is the cache of chunk encodings (never of stored
    bytes: what SQLite holds is read each time); a function that repairs damaged bytes says
    so in what it returns.
    """

    def __init__(
        self,
        conn: EngineConnection,
        chunk_size: int,
        chunker: Chunker,
        keyring: Keyring | None = None,
        encodings: EncodingCache | None = None,
    ) -> None:
        super().__init__(conn, keyring)
        self.chunk_size = chunk_size
        self.chunker = chunker
        #: encodings of chunks this handle made recently (shared with its offline store)
        self.encodings = encodings if encodings is not None else EncodingCache()

    # -- chunks (staged before the commit transaction, or written inside it) -------------

    def put_chunks(
        self,
        chunks: list[EncodedChunk],
        now_ms: int,
        *,
        touch: bool,
        inserted: list[int] | None = None,
    ) -> tuple[list[int], int, list[str]]:
        """Make sure every chunk is stored (inside the caller's write transaction). Returns
        (chunk ids in order, stored bytes written, digests whose damaged copies were
        rewritten); ``inserted`` collects the ids of the chunks this call inserted (not
        found stored already).

        A chunk that already exists has its stored bytes compared with ours; if they differ
        and do not decode to bytes with the digest (damage), they are rewritten from ours,
        so a new checkpoint never inherits corrupt bytes through deduplication. ``touch``
        restarts an existing chunk's grace period (staging, where the referencing commit
        comes later); inside the commit transaction the reference itself protects it.
        """
        ids: list[int] = []
        written = 0
        repaired: list[str] = []
        for chunk in chunks:
            if touch:
                # Staging a stream: new chunks are the common case, so try the insert first.
                chunk_id = self._insert_new_chunk(chunk, now_ms)
                if chunk_id is not None:
                    ids.append(chunk_id)
                    if inserted is not None:
                        inserted.append(chunk_id)
                    written += len(chunk.stored)
                    continue
            chunk_id, row = self._stored_or_inserted(chunk, now_ms if touch else 0)
            if row is None:
                ids.append(chunk_id)
                if inserted is not None:
                    inserted.append(chunk_id)
                written += len(chunk.stored)
                continue
            ids.append(chunk_id)
            if touch:
                self.touch_chunk(chunk_id, now_ms)
            if row[1] in (1, True):  # (PostgreSQL's comparison is a boolean)
                continue
            if row[4] == chunk.scope_id:
                scope = self.keyring.scope(self.conn, chunk.scope_id)
                if scope.holds_same(
                    row[2], row[3], chunk.codec, chunk.stored, chunk.digest, chunk.size
                ):
                    continue  # sealed intact: our encoding under another nonce
                raw = decoded(row[2], row[3], chunk.size, scope, chunk.digest)
                if raw is not None and scope.address(raw) == chunk.digest:
                    continue  # stored intact in another encoding
            self.conn.execute("DELETE FROM chunk_data WHERE chunk_id = ?", (chunk_id,))
            self.conn.execute(
                "UPDATE chunk SET codec = ?, stored_size = ?, scope_id = ?, sealed_digest = ?"
                " WHERE chunk_id = ?",
                (chunk.codec, len(chunk.stored), chunk.scope_id, chunk.sealed_digest, chunk_id),
            )
            self._write_chunk_bytes(chunk_id, chunk.stored)
            written += len(chunk.stored)
            repaired.append(chunk.digest)
        return ids, written, repaired

    def _stored_or_inserted(
        self, chunk: EncodedChunk, insert_ms: int
    ) -> tuple[int, tuple[Any, ...] | None]:
        """The id of the stored chunk with this digest and its row -- (id, whether its
        stored bytes equal ours, codec, its bytes when they differ, scope) -- or, when none
        is stored, the id of the chunk inserted now (stamped ``insert_ms``) and None.

        The stored bytes come back only when they differ from ours (rare: another encoding,
        or damage), so a dedup hit copies nothing out of the database. (Sealed bytes never
        compare equal -- a fresh nonce each time -- so a dedup hit in a key scope opens the
        stored copy to check it.)"""
        for _ in range(_RACES):
            row = self.conn.one(
                "SELECT c.chunk_id, d.data = ?1, c.codec,"
                " CASE WHEN d.data = ?1 THEN NULL ELSE d.data END, c.scope_id FROM chunk c"
                " LEFT JOIN chunk_data d ON d.chunk_id = c.chunk_id WHERE c.digest = ?2"
                + dialect.key_share(self.conn, "c"),
                (chunk.stored, chunk.digest),
            )
            if row is not None:
                return int(row[0]), row
            # Written by the commit that references it: only references protect it, so its
            # grace period is over from the start (a later staging touch restarts it).
            if isinstance(self.conn, Connection):
                return self.insert_chunk(chunk, insert_ms), None
            chunk_id = self._insert_new_chunk(chunk, insert_ms)
            if chunk_id is not None:
                return chunk_id, None
            # PostgreSQL: another writer inserted it meanwhile (a GC may take it again
            # before this reads it): look again.
        raise _contended(chunk.digest)

    def _insert_new_chunk(self, chunk: EncodedChunk, now_ms: int) -> int | None:
        """Insert the chunk unless one with its digest is stored; its id when inserted."""
        conn = self.conn
        if isinstance(conn, Connection):
            conn.execute("INSERT OR IGNORE" + _CHUNK_INSERT, _chunk_row(chunk, now_ms))
            if conn.changes() != 1:
                return None
            chunk_id = conn.last_insert_rowid()
        else:
            new = conn.execute(
                "INSERT" + _CHUNK_INSERT + " ON CONFLICT (digest) DO NOTHING RETURNING chunk_id",
                _chunk_row(chunk, now_ms),
            )
            if not new:
                return None
            chunk_id = int(new[0][0])
        self._write_chunk_bytes(chunk_id, chunk.stored)
        return chunk_id

    def find_chunk(self, digest: str) -> int | None:
        """The id of the chunk with this digest, if stored."""
        value = self.conn.scalar("SELECT chunk_id FROM chunk WHERE digest = ?", (digest,))
        return None if value is None else int(value)

    def touch_chunk(self, chunk_id: int, now_ms: int) -> None:
        """Restart a chunk's grace period (a dedup hit touches this small row, never the
        bytes)."""
        self.conn.execute(
            "UPDATE chunk SET last_touched_ms = ? WHERE chunk_id = ?", (now_ms, chunk_id)
        )

    def insert_chunk(self, chunk: EncodedChunk, now_ms: int) -> int:
        """Insert a new chunk whose encoding the caller made or verified (inside a write
        transaction). Returns its id."""
        chunk_id = self.conn.insert_returning(
            "INSERT" + _CHUNK_INSERT, _chunk_row(chunk, now_ms), "chunk_id"
        )
        self._write_chunk_bytes(chunk_id, chunk.stored)
        return chunk_id

    def _write_chunk_bytes(self, chunk_id: int, data: bytes | memoryview) -> None:
        conn = self.conn
        if len(data) <= _BIND_LIMIT or not isinstance(conn, Connection):
            # (PostgreSQL has no incremental blob I/O: its bytes are always bound.)
            conn.execute("INSERT INTO chunk_data (chunk_id, data) VALUES (?, ?)", (chunk_id, data))
            return
        # zeroblob + incremental write: large bytes go straight into the row's pages
        # instead of being copied into a bound parameter and a record first.
        conn.execute(
            "INSERT INTO chunk_data (chunk_id, data) VALUES (?, zeroblob(?))",
            (chunk_id, len(data)),
        )
        conn.write_blob("chunk_data", "data", chunk_id, data)

    # -- blobs (inside the commit transaction) -------------------------------------------

    def insert(self, blob: PreparedBlob, now_ms: int) -> tuple[int, int, bool]:
        """Make sure the blob row exists. Returns (blob_id, new bytes written, repaired).

        For a chunked blob, every staged chunk must still exist: GC may have reclaimed a
        staged chunk whose grace period ran out before this commit. Then the commit fails
        with the retryable ChunkMissingError instead of publishing missing bytes.
        """
        scope_id = blob.scope.scope_id
        if blob.inline is not None:
            return self._insert_inline(blob, now_ms)
        written = blob.bytes_staged
        to_write = list(blob.chunks)  # (a second pass, on PostgreSQL, has none left)
        for _ in range(_RACES):
            existing = self.blob_id(blob.digest, scope_id=scope_id)
            if existing is not None:
                # Chunks staged for it (new or repaired) are still bytes this commit wrote.
                return existing, written, False
            if to_write:
                _, written_now, repaired = self.put_chunks(to_write, now_ms, touch=False)
                written += written_now
                blob.repaired = [*blob.repaired, *repaired]
                to_write = []
            blob_id = self._insert_chunked_row(
                blob.digest, blob.size, blob.chunk_digests, blob.chunk_list_digest, now_ms, scope_id
            )
            if blob_id is not None:
                return blob_id, written, False
            # PostgreSQL: another writer stored the same blob meanwhile: take that one.
        raise _contended(blob.digest)

    def _insert_inline(self, blob: PreparedBlob, now_ms: int) -> tuple[int, int, bool]:
        """:meth:`insert` of a blob stored whole in its row."""
        scope_id = blob.scope.scope_id
        assert blob.inline is not None
        stored = blob.inline if blob.inline_stored is None else blob.inline_stored
        for _ in range(_RACES):
            # New content is the common case: one statement when it is.
            new = self.conn.execute(
                dialect.insert_or_ignore(
                    self.conn,
                    " INTO blob (digest, size, chunk_count, inline_data, created_at_ms, codec,"
                    " scope_id, sealed_digest) VALUES (?, ?, 0, ?, ?, ?, ?, ?)",
                    "digest",
                    " RETURNING blob_id",
                ),
                (
                    blob.digest,
                    blob.size,
                    stored,
                    now_ms,
                    blob.inline_codec,
                    scope_id,
                    blob.inline_sealed_digest,
                ),
            )
            if new:
                return int(new[0][0]), len(stored), False
            # As for chunks: the stored copy comes back only when it differs from ours.
            row = self.conn.one(
                "SELECT blob_id, chunk_count, inline_data = ?1, codec,"
                " CASE WHEN inline_data = ?1 THEN NULL ELSE inline_data END, scope_id FROM blob"
                " WHERE digest = ?2" + dialect.key_share(self.conn),
                (stored, blob.digest),
            )
            if row is not None:
                break
            if isinstance(self.conn, Connection):
                raise errors.CorruptionError(
                    f"blob {blob.digest[:12]} is stored but cannot be found by its digest (a "
                    "damaged index); run `ckptdb verify`",
                    reason="index_damaged",
                )
            # PostgreSQL: a GC deleted it between the two statements: insert it again.
        else:
            raise _contended(blob.digest)
        if (
            row[1] == 0
            and row[2] not in (1, True)
            and (
                row[5] != scope_id
                or not (
                    blob.scope.holds_same(
                        row[3],
                        row[4],
                        blob.inline_codec,
                        stored,
                        blob.digest,
                        blob.size,
                        blob=True,
                    )
                    or verified_inline(row[4], blob.size, blob.digest, row[3], blob.scope)
                )
            )
        ):
            # The stored copy was damaged; the caller's bytes hash to the digest.
            self.conn.execute(
                "UPDATE blob SET inline_data = ?, codec = ?, scope_id = ?, sealed_digest = ?"
                " WHERE blob_id = ?",
                (stored, blob.inline_codec, scope_id, blob.inline_sealed_digest, row[0]),
            )
            return int(row[0]), len(stored), True
        return int(row[0]), 0, False

    def insert_inline(
        self, digest: str, size: int, stored: bytes, codec_id: int, now_ms: int
    ) -> int:
        """Insert a new plaintext inline blob whose stored bytes the caller verified.
        Returns its id."""
        return self.conn.insert_returning(
            "INSERT INTO blob (digest, size, chunk_count, inline_data, created_at_ms, codec)"
            " VALUES (?, ?, 0, ?, ?, ?)",
            (digest, size, stored, now_ms, codec_id),
            "blob_id",
        )

    def insert_chunked(
        self,
        digest: str,
        size: int,
        chunk_digests: Sequence[str],
        list_digest: str | None,
        now_ms: int,
        *,
        scope_id: int | None = None,
    ) -> int:
        """Insert a chunked blob over already written chunks (inside the commit
        transaction), its chunk list in bounded batches. ChunkMissingError (retryable, and
        the caller's transaction rolls back) when GC took a staged chunk meanwhile."""
        blob_id = self._insert_chunked_row(
            digest, size, chunk_digests, list_digest, now_ms, scope_id
        )
        if blob_id is None:
            raise _contended(digest)
        return blob_id

    def _insert_chunked_row(
        self,
        digest: str,
        size: int,
        chunk_digests: Sequence[str],
        list_digest: str | None,
        now_ms: int,
        scope_id: int | None,
    ) -> int | None:
        """:meth:`insert_chunked`, or None on PostgreSQL when another writer stored the
        blob meanwhile (the caller then takes that one)."""
        columns = (
            "INSERT INTO blob (digest, size, chunk_count, chunk_list_digest, created_at_ms,"
            " scope_id) VALUES (?, ?, ?, ?, ?, ?)"
        )
        values = (digest, size, len(chunk_digests), list_digest, now_ms, scope_id)
        if isinstance(self.conn, Connection):
            blob_id = self.conn.insert_returning(columns, values, "blob_id")
        else:
            new = self.conn.execute(
                columns + " ON CONFLICT (digest) DO NOTHING RETURNING blob_id", values
            )
            if not new:
                return None
            blob_id = int(new[0][0])
        for start in range(0, len(chunk_digests), _ID_BATCH):
            part = list(chunk_digests[start : start + _ID_BATCH])
            chunk_ids = self.resolve_chunks(part)
            missing = sum(1 for c in chunk_ids if c is None)
            if missing:
                raise errors.ChunkMissingError(
                    f"{missing} staged chunk(s) of blob {digest[:12]} were garbage-collected "
                    "before the commit; nothing was published. Retry (it re-stages them)."
                )
            self.conn.executemany(
                "INSERT INTO blob_chunk (blob_id, seq, chunk_id) VALUES (?, ?, ?)",
                [(blob_id, start + i, chunk_id) for i, chunk_id in enumerate(chunk_ids)],
            )
        return blob_id

    def find_referenced(self, refs: Sequence[PreparedBlob]) -> dict[str, int]:
        """The blob id of each reference (a BlobRef) of one commit, looked up in one
        statement: BlobMissingError when one is not stored in its key scope, and
        InvalidEntryError when one has another size."""
        rows = self.conn.execute(
            "SELECT digest, blob_id, size, scope_id FROM blob"
            f" WHERE digest IN {dialect.text_list(self.conn)}" + dialect.key_share(self.conn),
            (json.dumps([r.digest for r in refs]),),
        )
        found = {row[0]: row for row in rows}
        ids: dict[str, int] = {}
        for ref in refs:
            row = found.get(ref.digest)
            if row is None or row[3] != ref.scope.scope_id:
                raise errors.BlobMissingError(
                    f"the referenced blob {ref.digest[:12]} is not stored (never was, or it "
                    "was garbage-collected); nothing was published. Commit the bytes instead.",
                    digest=ref.digest,
                )
            if row[2] != ref.size:
                raise errors.InvalidEntryError(
                    f"the referenced blob {ref.digest[:12]} has {row[2]} bytes, not {ref.size}"
                )
            ids[ref.digest] = int(row[1])
        return ids

    def blob_id(self, digest: str, *, scope_id: int | None = None) -> int | None:
        """The id of the blob with this digest in key scope ``scope_id``, if stored."""
        same = dialect.is_null_safe(self.conn)
        value = self.conn.scalar(
            f"SELECT blob_id FROM blob WHERE digest = ? AND scope_id {same} ?"
            + dialect.key_share(self.conn),
            (digest, scope_id),
        )
        return None if value is None else int(value)

    def resolve_chunks(self, digests: Sequence[str]) -> list[int | None]:
        """The chunk id of each digest now (None where the chunk is gone).

        Chunks are looked up by digest inside the commit transaction, never by the id
        staging returned: GC may delete a staged chunk and SQLite may give its rowid to the
        next chunk inserted, so an id alone could silently name other bytes.
        """
        found: dict[str, int] = {}
        unique = sorted(set(digests))
        for start in range(0, len(unique), _ID_BATCH):
            part = unique[start : start + _ID_BATCH]
            marks = ",".join("?" * len(part))
            found.update(
                (str(d), int(c))
                for d, c in self.conn.execute(
                    f"SELECT digest, chunk_id FROM chunk WHERE digest IN ({marks})"
                    + dialect.key_share(self.conn),
                    part,
                )
            )
        return [found.get(d) for d in digests]
