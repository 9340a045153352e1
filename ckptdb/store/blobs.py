"""The blob tables: ``blob``, ``blob_chunk``, ``chunk`` and ``chunk_data``.

Storage model (see ``migrations/0001_core.sql``): a blob no larger than the file's chunk size
is stored inline in its ``blob`` row, inside the commit transaction. A larger blob (or a
streamed one that does not fit the in-memory budget) is cut into fixed-size chunks that
are *staged* before the commit, each in its own short transaction: chunk bytes go to
``chunk_data`` (written once, never updated), a small ``chunk`` row carries digest, size
and ``last_touched_ms``. A chunk that already exists is only touched. Memory stays bounded
by a couple of chunks whatever the blob size.

Reads verify everything they hand out: an inline blob against its digest before it is
returned; a chunked blob's chunk list against ``chunk_list_digest`` before the first byte,
every chunk against its own digest before its bytes are returned, and the whole blob
against its digest at the end.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .. import canonical, errors
from ..connection import Connection
from .rows import check_types

DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024
MIN_CHUNK_SIZE = 64 * 1024
MAX_CHUNK_SIZE = 256 * 1024 * 1024


@dataclass
class PreparedBlob:
    """A blob ready to be referenced by the commit transaction."""

    digest: str
    size: int
    inline: bytes | None = None
    chunk_ids: list[int] = field(default_factory=list)
    chunk_digests: list[str] = field(default_factory=list)
    bytes_staged: int = 0
    reference: bool = False  # a BlobRef: the blob must already exist
    #: digests of stored chunks whose damaged bytes staging rewrote from this value
    repaired: list[str] = field(default_factory=list)

    @property
    def chunk_list_digest(self) -> str | None:
        """Digest over the ordered chunk digests (None for an inline blob)."""
        return None if self.inline is not None else canonical.chunk_list_digest(self.chunk_digests)


class BackgroundHash:
    """sha256 over a sequence of buffers, updated in order on a helper thread.

    The whole-blob digest of a chunked blob is computed while the caller hashes each
    chunk and SQLite reads or writes it (hashlib and SQLite both release the GIL), so a
    large entry is hashed twice -- per chunk and whole -- in about the time of once.
    A buffer handed to :meth:`update` must not change until its future is done.
    """

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckptdb-hash")
        self._pending: list[Future[None]] = []

    def update(self, data: bytes | memoryview) -> Future[None]:
        """Queue ``data``; returns the future to wait on before reusing its buffer."""
        future = self._pool.submit(self._hash.update, data)
        self._pending.append(future)
        return future

    def hexdigest(self) -> str:
        """The digest of everything queued (waits for it)."""
        for future in self._pending:
            future.result()
        self._pending.clear()
        return self._hash.hexdigest()

    def close(self) -> None:
        """Stop the helper thread (after the queued work)."""
        self._pool.shutdown(wait=True)


def verified_inline(stored: object, size: int, digest: str) -> bytes | None:
    """The inline bytes of a blob row when they have ``size`` and ``digest``, else None. A
    damaged record can hold a value of any type where the bytes should be."""
    data = b"" if stored is None else stored
    if not isinstance(data, bytes) or len(data) != size:
        return None
    return data if hashlib.sha256(data).hexdigest() == digest else None


class BlobStore:
    """The ``blob``, ``blob_chunk``, ``chunk`` and ``chunk_data`` tables, on one connection.

    The only code that reads or writes them. Nothing here keeps state between calls: a
    function that repairs damaged bytes says so in what it returns.
    """

    def __init__(self, conn: Connection, chunk_size: int) -> None:
        self.conn = conn
        self.chunk_size = chunk_size

    # -- chunks (staged before the commit transaction, each in its own) ------------------

    def stage_chunk(
        self, digest: str, data: bytes | memoryview, now_ms: int
    ) -> tuple[int, int, bool]:
        """Store one chunk in its own short transaction. Returns (chunk_id, bytes written,
        repaired).

        A chunk that already exists is touched (``last_touched_ms``, so GC's grace period
        restarts) and its stored bytes are compared with ``data``: if they were damaged,
        they are rewritten from ``data`` (which hashes to the digest), so a new checkpoint
        never inherits corrupt bytes through deduplication; ``repaired`` says so.
        """
        with self.conn.write_transaction():
            row = self.conn.one(
                "SELECT c.chunk_id, d.data = ? FROM chunk c"
                " LEFT JOIN chunk_data d ON d.chunk_id = c.chunk_id WHERE c.digest = ?",
                (data, digest),
            )
            repaired = False
            if row is not None:
                chunk_id = int(row[0])
                self.touch_chunk(chunk_id, now_ms)
                if row[1] == 1:
                    return chunk_id, 0, False
                self.conn.execute("DELETE FROM chunk_data WHERE chunk_id = ?", (chunk_id,))
                repaired = True
            else:
                chunk_id = self._insert_chunk_row(digest, len(data), now_ms)
            self._write_chunk_bytes(chunk_id, data)
            return chunk_id, len(data), repaired

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

    def insert_chunk(self, digest: str, data: bytes | memoryview, now_ms: int) -> int:
        """Insert a new chunk whose bytes were verified by the caller (inside a write
        transaction). Returns its id."""
        chunk_id = self._insert_chunk_row(digest, len(data), now_ms)
        self._write_chunk_bytes(chunk_id, data)
        return chunk_id

    def _insert_chunk_row(self, digest: str, size: int, now_ms: int) -> int:
        self.conn.execute(
            "INSERT INTO chunk (digest, size, last_touched_ms) VALUES (?, ?, ?)",
            (digest, size, now_ms),
        )
        return self.conn.last_insert_rowid()

    def _write_chunk_bytes(self, chunk_id: int, data: bytes | memoryview) -> None:
        # zeroblob + incremental write: the bytes go straight into the row's pages instead
        # of being copied into a bound parameter and a record first.
        self.conn.execute(
            "INSERT INTO chunk_data (chunk_id, data) VALUES (?, zeroblob(?))",
            (chunk_id, len(data)),
        )
        self.conn.write_blob("chunk_data", "data", chunk_id, data)

    # -- blobs (inside the commit transaction) -------------------------------------------

    def insert(self, blob: PreparedBlob, now_ms: int) -> tuple[int, int, bool]:
        """Make sure the blob row exists. Returns (blob_id, new bytes written, repaired).

        For a chunked blob, every staged chunk must still exist: GC may have reclaimed a
        staged chunk whose grace period ran out before this commit. Then the commit fails
        with the retryable ChunkMissingError instead of publishing missing bytes.
        """
        if blob.reference:
            blob_id, _ = self.find_blob(blob.digest, expect_size=blob.size)
            return blob_id, 0, False
        if blob.inline is not None:
            # New content is the common case: one statement when it is.
            self.conn.execute(
                "INSERT OR IGNORE INTO blob (digest, size, chunk_count, inline_data,"
                " created_at_ms) VALUES (?, ?, 0, ?, ?)",
                (blob.digest, blob.size, blob.inline, now_ms),
            )
            if self.conn.changes() == 1:
                return self.conn.last_insert_rowid(), blob.size, False
        row = self.conn.one(
            "SELECT blob_id, chunk_count, inline_data = ? FROM blob WHERE digest = ?",
            (blob.inline, blob.digest),
        )
        if row is not None:
            if blob.inline is not None and row[1] == 0 and row[2] != 1:
                # The stored copy was damaged; the caller's bytes hash to the digest.
                self.conn.execute(
                    "UPDATE blob SET inline_data = ? WHERE blob_id = ?", (blob.inline, row[0])
                )
                return int(row[0]), blob.size, True
            # Chunks staged for it (new or repaired) are still bytes this commit wrote.
            return int(row[0]), blob.bytes_staged, False
        blob_id = self.insert_chunked(
            blob.digest, blob.size, blob.chunk_digests, blob.chunk_list_digest, now_ms
        )
        return blob_id, blob.bytes_staged, False

    def insert_inline(self, digest: str, data: bytes, now_ms: int) -> int:
        """Insert a new inline blob whose bytes the caller verified. Returns its id."""
        self.conn.execute(
            "INSERT INTO blob (digest, size, chunk_count, inline_data, created_at_ms)"
            " VALUES (?, ?, 0, ?, ?)",
            (digest, len(data), data, now_ms),
        )
        return self.conn.last_insert_rowid()

    def insert_chunked(
        self,
        digest: str,
        size: int,
        chunk_digests: list[str],
        list_digest: str | None,
        now_ms: int,
    ) -> int:
        """Insert a chunked blob over already staged chunks (inside the commit transaction).
        ChunkMissingError (retryable) when GC took a staged chunk meanwhile."""
        chunk_ids = self.resolve_chunks(chunk_digests)
        missing = sum(1 for c in chunk_ids if c is None)
        if missing:
            raise errors.ChunkMissingError(
                f"{missing} staged chunk(s) of blob {digest[:12]} were garbage-collected "
                "before the commit; nothing was published. Retry (it re-stages them)."
            )
        self.conn.execute(
            "INSERT INTO blob (digest, size, chunk_count, chunk_list_digest, created_at_ms)"
            " VALUES (?, ?, ?, ?, ?)",
            (digest, size, len(chunk_ids), list_digest, now_ms),
        )
        blob_id = self.conn.last_insert_rowid()
        self.conn.executemany(
            "INSERT INTO blob_chunk (blob_id, seq, chunk_id) VALUES (?, ?, ?)",
            [(blob_id, seq, chunk_id) for seq, chunk_id in enumerate(chunk_ids)],
        )
        return blob_id

    def find_blob(self, digest: str, *, expect_size: int | None = None) -> tuple[int, int]:
        """(blob_id, size) of a stored blob; BlobMissingError when it is not stored."""
        row = self.conn.one("SELECT blob_id, size FROM blob WHERE digest = ?", (digest,))
        if row is None:
            raise errors.BlobMissingError(
                f"the referenced blob {digest[:12]} is not stored (never was, or it was "
                "garbage-collected); nothing was published. Commit the bytes instead.",
                digest=digest,
            )
        if expect_size is not None and int(row[1]) != expect_size:
            raise errors.InvalidEntryError(
                f"the referenced blob {digest[:12]} has {row[1]} bytes, not {expect_size}"
            )
        return int(row[0]), int(row[1])

    def blob_id(self, digest: str) -> int | None:
        """The id of the blob with this digest, if stored."""
        value = self.conn.scalar("SELECT blob_id FROM blob WHERE digest = ?", (digest,))
        return None if value is None else int(value)

    def inline_bytes(self, blob_id: int) -> object:
        """The stored (unverified) inline bytes of a blob, as stored."""
        return self.conn.scalar("SELECT inline_data FROM blob WHERE blob_id = ?", (blob_id,))

    def chunk_list_digest(self, blob_id: int) -> object:
        """The stored (unverified) chunk list digest of a blob."""
        return self.conn.scalar("SELECT chunk_list_digest FROM blob WHERE blob_id = ?", (blob_id,))

    def resolve_chunks(self, digests: list[str]) -> list[int | None]:
        """The chunk id of each digest now (None where the chunk is gone).

        Chunks are looked up by digest inside the commit transaction, never by the id
        staging returned: GC may delete a staged chunk and SQLite may give its rowid to the
        next chunk inserted, so an id alone could silently name other bytes.
        """
        found: dict[str, int] = {}
        unique = sorted(set(digests))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            found.update(
                (str(d), int(c))
                for d, c in self.conn.execute(
                    f"SELECT digest, chunk_id FROM chunk WHERE digest IN ({marks})", part
                )
            )
        return [found.get(d) for d in digests]

    # -- reading ---------------------------------------------------------------------------

    def read_all(self, blob_id: int, digest: str, size: int, where: dict[str, Any]) -> bytes:
        """All bytes of a blob, verified against ``digest`` before they are returned."""
        row = self.conn.one(
            "SELECT chunk_count, inline_data FROM blob WHERE blob_id = ?", (blob_id,)
        )
        if row is None:
            raise errors.CheckpointNotFoundError(
                f"blob {digest[:12]} is gone (its checkpoint was garbage-collected)", **where
            )
        if row[0] == 0:
            data = verified_inline(row[1], size, digest)
            if data is None:
                raise errors.CorruptionError(
                    f"stored bytes of entry {where.get('entry')!r} do not match digest "
                    f"{digest[:12]}; nothing was returned",
                    reason="blob_digest_mismatch",
                    **where,
                )
            return data
        reader = ChunkedBlobReader(self, blob_id, digest, size, where)
        try:
            return reader.readall()
        finally:
            reader.close()

    def chunk_list(self, blob_id: int) -> tuple[str | None, list[tuple[int, str | None, int]]]:
        """(stored chunk_list_digest, [(chunk_id, chunk digest, size)]) of a chunked blob;
        digest and size are None where the chunk is gone. Values are type-checked."""
        with self.conn.read_transaction():
            list_digest = self.conn.scalar(
                "SELECT chunk_list_digest FROM blob WHERE blob_id = ?", (blob_id,)
            )
            rows = self.conn.execute(
                "SELECT bc.chunk_id, c.digest, c.size FROM blob_chunk bc"
                " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id"
                " WHERE bc.blob_id = ? ORDER BY bc.seq",
                (blob_id,),
            )
        check_types((list_digest,), ((str, type(None)),), "blob row")
        for r in rows:
            check_types(r, (int, (str, type(None)), (int, type(None))), "chunk list row")
        return list_digest, [(r[0], r[1], r[2]) for r in rows]

    def read_chunk_into(self, chunk_id: int, buffer: bytearray) -> int | None:
        """Read one chunk's stored (unverified) bytes into ``buffer``; returns the length,
        or None if the chunk is gone."""
        return self.conn.read_blob_into("chunk_data", "data", chunk_id, buffer)

    def blob_exists(self, blob_id: int) -> bool:
        """True while the blob row exists."""
        return self.conn.one("SELECT 1 FROM blob WHERE blob_id = ?", (blob_id,)) is not None


class ChunkedBlobReader(io.RawIOBase):
    """A read-only binary stream over a chunked blob that verifies before it hands out.

    Memory is bounded by one chunk. Reads take one short read transaction per chunk, so a
    long-lived stream never blocks writers or checkpoints.
    """

    def __init__(
        self, store: BlobStore, blob_id: int, digest: str, size: int, where: dict[str, Any]
    ) -> None:
        super().__init__()
        self._store = store
        self._blob_id = blob_id
        self._digest = digest
        self._size = size
        self._where = where
        list_digest, chunks = store.chunk_list(blob_id)
        if list_digest is None and not chunks and not store.blob_exists(blob_id):
            raise errors.CheckpointNotFoundError(
                f"blob {digest[:12]} is gone (its checkpoint was garbage-collected)", **where
            )
        if any(c[1] is None for c in chunks):
            self._corrupt("a chunk of the blob is missing", "chunk_missing")
        digests = [str(c[1]) for c in chunks]
        if list_digest != canonical.chunk_list_digest(digests):
            self._corrupt("the chunk list does not match its digest", "chunk_list_mismatch")
        if sum(int(c[2]) for c in chunks) != size:
            self._corrupt("chunk sizes do not add up to the entry size", "blob_size_mismatch")
        self._chunks = [(c[0], str(c[1]), int(c[2])) for c in chunks]
        self._next = 0
        largest = max((c[2] for c in self._chunks), default=0)
        # Two buffers in turn: the whole-blob hash of one runs while the next is read.
        self._buffers = [bytearray(largest), bytearray(largest)]
        self._in_flight: list[Future[None] | None] = [None, None]
        self._buffer = memoryview(b"")
        self._whole = BackgroundHash()
        self._position = 0

    def _corrupt(self, what: str, detail_code: str) -> None:
        raise errors.CorruptionError(
            f"entry {self._where.get('entry')!r} (blob {self._digest[:12]}): {what}; "
            "nothing more was returned",
            reason=detail_code,
            **self._where,
        )

    def readable(self) -> bool:
        return True

    def _load_next(self) -> bool:
        if self._next >= len(self._chunks):
            return False
        chunk_id, digest, size = self._chunks[self._next]
        self._buffer = memoryview(b"")  # the caller has taken everything from it
        turn = self._next % 2
        previous = self._in_flight[turn]
        if previous is not None:
            previous.result()  # its whole-blob hashing must be done before it is refilled
        scratch = self._buffers[turn]
        got = self._store.read_chunk_into(chunk_id, scratch)
        data = memoryview(scratch)[: got or 0]
        if got is None or got != size or hashlib.sha256(data).hexdigest() != digest:
            data.release()
            if not self._store.blob_exists(self._blob_id):
                raise errors.CheckpointNotFoundError(
                    f"blob {self._digest[:12]} was garbage-collected while being read",
                    **self._where,
                )
            self._corrupt(f"chunk {self._next} does not match its digest", "chunk_digest_mismatch")
        self._in_flight[turn] = self._whole.update(data)
        self._next += 1
        # The last chunk is only handed out once the whole blob matches its digest.
        if self._next == len(self._chunks) and self._whole.hexdigest() != self._digest:
            self._corrupt("the blob digest does not match", "blob_digest_mismatch")
        self._buffer = data
        return True

    def close(self) -> None:
        """Release the helper thread (also when the stream was not read to the end)."""
        if not self.closed:
            self._whole.close()
        super().close()

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        while not self._buffer:
            if not self._load_next():
                return 0
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        self._position += n
        return n

    def readall(self) -> bytes:
        parts: list[bytes] = []
        if self._buffer:
            parts.append(bytes(self._buffer))
            self._buffer = memoryview(b"")
        while self._load_next():
            parts.append(bytes(self._buffer))
            self._buffer = memoryview(b"")
        data = b"".join(parts)
        self._position += len(data)
        return data

    def tell(self) -> int:
        return self._position

    def iter_chunks(self) -> Iterator[bytes]:
        """Yield the remaining bytes as verified chunk-sized pieces."""
        if self._buffer:
            yield bytes(self._buffer)
            self._buffer = memoryview(b"")
        while self._load_next():
            piece = bytes(self._buffer)
            self._buffer = memoryview(b"")
            self._position += len(piece)
            yield piece


# -- scans and deletion (GC and verify) ---------------------------------------------------
# GC passes the names of its temporary tables of candidate ids (one ``seq`` column).


def listed_blob_totals(conn: Connection, blob_table: str) -> tuple[int, int]:
    """(count, inline bytes) of the blobs a temporary table lists."""
    row = conn.one(
        "SELECT count(*), coalesce(sum(CASE WHEN chunk_count = 0 THEN size ELSE 0 END), 0)"
        f" FROM blob WHERE blob_id IN (SELECT seq FROM temp.{blob_table})"
    )
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def chunks_freed_with(conn: Connection, blob_table: str, cutoff_ms: int) -> tuple[int, int]:
    """(count, bytes) of the chunks that deleting the listed blobs would free, with the
    orphans past their grace period (a dry run's estimate)."""
    row = conn.one(
        "SELECT count(*), coalesce(sum(size), 0) FROM chunk c WHERE c.last_touched_ms < ? AND ("
        "  c.chunk_id IN (SELECT bc.chunk_id FROM blob_chunk bc"
        f"   WHERE bc.blob_id IN (SELECT seq FROM temp.{blob_table}))"
        "  AND NOT EXISTS (SELECT 1 FROM blob_chunk bc2 WHERE bc2.chunk_id = c.chunk_id"
        f"   AND bc2.blob_id NOT IN (SELECT seq FROM temp.{blob_table}))"
        "  OR NOT EXISTS (SELECT 1 FROM blob_chunk bc3 WHERE bc3.chunk_id = c.chunk_id))",
        (cutoff_ms,),
    )
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def list_chunks_of(conn: Connection, blob_table: str, chunk_table: str) -> None:
    """Add to a temporary table (one ``seq`` column) the distinct chunk ids the listed
    blobs use, without a round trip through Python."""
    conn.execute(
        f"INSERT OR IGNORE INTO temp.{chunk_table} (seq) SELECT DISTINCT chunk_id"
        f" FROM blob_chunk WHERE blob_id IN (SELECT seq FROM temp.{blob_table})"
    )


def delete_listed(conn: Connection, blob_table: str) -> tuple[int, int]:
    """Delete the listed blobs and their chunk lists. Returns (count, inline bytes)."""
    listed = f"(SELECT seq FROM temp.{blob_table})"
    # Chunk lists first, in one statement: the ON DELETE CASCADE would run a sub-program
    # per blob row (kept as the schema's safety net; it then finds nothing).
    conn.execute(f"DELETE FROM blob_chunk WHERE blob_id IN {listed}")
    # RETURNING counts what was deleted in the same pass (no separate totals query).
    rows = conn.execute(f"DELETE FROM blob WHERE blob_id IN {listed} RETURNING size, chunk_count")
    # A damaged size counts as 0, as SQL's sum() of a non-numeric text would.
    return len(rows), sum(size for size, chunks in rows if chunks == 0 and type(size) is int)


def delete_unused_chunks(conn: Connection, candidates_sql: str, cutoff_ms: int) -> tuple[int, int]:
    """Delete the candidate chunks no blob references whose grace period is over
    (``candidates_sql`` may use the :cutoff parameter). Returns (count, bytes)."""
    rows = conn.execute(
        f"DELETE FROM chunk WHERE chunk_id IN ({candidates_sql}) AND last_touched_ms < :cutoff"
        " AND NOT EXISTS (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = chunk.chunk_id)"
        " RETURNING size",
        {"cutoff": cutoff_ms},
    )
    return len(rows), sum(r[0] for r in rows if type(r[0]) is int)


def delete_orphan_chunks(conn: Connection, cutoff_ms: int, limit: int) -> tuple[int, int]:
    """Delete up to ``limit`` staged chunks no blob references whose grace period is over."""
    return delete_unused_chunks(
        conn,
        "SELECT c.chunk_id FROM chunk c WHERE c.last_touched_ms < :cutoff AND NOT EXISTS"
        f" (SELECT 1 FROM blob_chunk bc WHERE bc.chunk_id = c.chunk_id) LIMIT {int(limit)}",
        cutoff_ms,
    )


def count_chunks(conn: Connection) -> int:
    """Number of stored chunks."""
    return int(conn.scalar("SELECT count(*) FROM chunk") or 0)


def count_blobs(conn: Connection) -> int:
    """Number of stored blobs."""
    return int(conn.scalar("SELECT count(*) FROM blob") or 0)


def iter_chunks_with_bytes(conn: Connection) -> Iterator[tuple[Any, ...]]:
    """(chunk_id, digest, size, data) of every chunk, values as stored (for verify)."""
    return conn.iterate(
        "SELECT c.chunk_id, c.digest, c.size, d.data FROM chunk c"
        " LEFT JOIN chunk_data d ON d.chunk_id = c.chunk_id"
    )


def iter_blob_rows(conn: Connection, *, with_inline: bool) -> Iterator[tuple[Any, ...]]:
    """(blob_id, digest, size, chunk_count, chunk_list_digest, inline bytes or None) of
    every blob, values as stored (for verify)."""
    return conn.iterate(
        "SELECT blob_id, digest, size, chunk_count, chunk_list_digest,"
        f" {'inline_data' if with_inline else 'NULL'} FROM blob"
    )


def chunk_rows_of(conn: Connection, blob_id: int) -> list[tuple[Any, ...]]:
    """(seq, chunk_id, digest, size) of a blob's chunk list in order, values as stored
    (digest and size None where the chunk is gone)."""
    return conn.execute(
        "SELECT bc.seq, bc.chunk_id, c.digest, c.size FROM blob_chunk bc"
        " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id WHERE bc.blob_id = ? ORDER BY bc.seq",
        (blob_id,),
    )


def chunk_bytes(conn: Connection, chunk_id: int) -> object:
    """The stored (unverified) bytes of one chunk, as stored."""
    return conn.scalar("SELECT data FROM chunk_data WHERE chunk_id = ?", (chunk_id,))


def stored_bytes(conn: Connection) -> tuple[int, int]:
    """(inline bytes, chunk bytes) stored."""
    row = conn.one(
        "SELECT (SELECT coalesce(sum(length(inline_data)), 0) FROM blob WHERE chunk_count = 0),"
        " (SELECT coalesce(sum(size), 0) FROM chunk)"
    )
    return (0, 0) if row is None else (int(row[0]), int(row[1]))
