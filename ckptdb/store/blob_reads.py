"""The read side of the blob tables: :class:`BlobReads`, which :class:`~.blobs.BlobStore`
extends with the write side.

Reads verify everything they hand out, after decoding: an inline blob against its digest;
a chunked blob's row against the manifest and its chunk list against ``chunk_list_digest``
before the first byte, then every chunk against its own digest before its bytes are
returned -- one hash pass per byte; a full check, and any read in a key scope, also the
whole blob against its digest (a large blob through
:class:`~.blob_reader.ChunkedBlobReader`, which says why plaintext reads need not).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import canonical, errors
from ..connection import Connection
from ..connection.engine import EngineConnection
from .blob_reader import READ_AT_ONCE, ChunkedBlobReader, corruption, gone
from .checkpoints import existing_ids
from .crypto import Scope
from .encoding import decoded, verified_inline
from .rows import check_types
from .scopes import Keyring


class BlobReads:
    """Reads of the ``blob``, ``blob_chunk``, ``chunk`` and ``chunk_data`` tables, on one
    connection. Nothing is cached: what SQLite holds is read (and verified) each time."""

    def __init__(self, conn: EngineConnection, keyring: Keyring | None = None) -> None:
        self.conn = conn
        #: the handle's keys: which scope a stored record's ``scope_id`` names
        self.keyring = keyring if keyring is not None else Keyring()

    def inline_stored(self, blob_id: int) -> tuple[object, object]:
        """(codec, stored bytes) of an inline blob, as stored (unverified)."""
        row = self.conn.one("SELECT codec, inline_data FROM blob WHERE blob_id = ?", (blob_id,))
        return (None, None) if row is None else (row[0], row[1])

    def missing(self, where: dict[str, Any], digest: str) -> errors.CkptdbError:
        """The error for a blob row that is not there: its checkpoint was collected
        (CheckpointNotFoundError), or -- the checkpoint still stored -- the blob was
        deleted under it (CorruptionError: only damage, an edit outside ckptdb or a
        deletion that trusted damaged ``blob_ref`` rows does that)."""
        checkpoint_id = where.get("checkpoint_id")
        if isinstance(checkpoint_id, str) and existing_ids(self.conn, [checkpoint_id]):
            return errors.CorruptionError(
                f"checkpoint {checkpoint_id[:12]} is stored but its entry "
                f"{where.get('entry')!r} names blob {digest[:12]}, which no longer exists: "
                "the file was damaged or changed outside ckptdb. Nothing was returned. Run "
                "`ckptdb verify`; a load with fallback finds an intact ancestor.",
                reason="blob_missing",
                **where,
            )
        return gone(where, digest)

    def chunked_head(
        self, blob_id: int, digest: str, size: int, scope_id: int | None, where: dict[str, Any]
    ) -> tuple[object, Scope]:
        """(stored, not yet verified, chunk list digest; key scope) of a chunked blob whose
        row names exactly the digest, size and key scope ``scope_id`` the manifest does:
        CorruptionError otherwise (the chunk list digest only vouches for the content if
        it is the one stored beside that digest), CheckpointNotFoundError when it is gone."""
        row = self.conn.one(
            "SELECT digest, size, scope_id, chunk_list_digest FROM blob WHERE blob_id = ?",
            (blob_id,),
        )
        if row is None:
            raise self.missing(where, digest)
        if row[0] != digest:
            raise corruption(
                where, digest, "the blob row names another digest", "blob_digest_mismatch"
            )
        if row[1] != size:
            raise corruption(where, digest, "the blob row names another size", "blob_size_mismatch")
        if row[2] != scope_id:
            raise corruption(
                where, digest, "the blob row names another key scope", "scope_mismatch"
            )
        return row[3], self.keyring.scope(self.conn, scope_id)

    # -- reading ---------------------------------------------------------------------------

    def read_all(
        self,
        blob_id: int,
        digest: str,
        size: int,
        where: dict[str, Any],
        *,
        scope_id: int | None,
        full: bool = False,
    ) -> bytes:
        """All bytes of a blob, verified before they are returned (``scope_id``: the key
        scope the manifest puts the blob in; ``full``: the whole blob is hashed against
        ``digest`` too, see :class:`~.blob_reader.ChunkedBlobReader`)."""
        row = self.conn.one(
            "SELECT chunk_count, inline_data, codec, scope_id FROM blob WHERE blob_id = ?",
            (blob_id,),
        )
        if row is None:
            raise self.missing(where, digest)
        if row[0] == 0:
            scope = self.keyring.scope(self.conn, row[3])
            data = verified_inline(row[1], size, digest, row[2], scope)
            if data is None:
                raise errors.CorruptionError(
                    f"stored bytes of entry {where.get('entry')!r} do not match digest "
                    f"{digest[:12]}; nothing was returned",
                    reason="blob_digest_mismatch",
                    **where,
                )
            return data
        if size < READ_AT_ONCE:
            return self._read_small_chunked(blob_id, digest, size, where, scope_id, full)
        reader = ChunkedBlobReader(self, blob_id, digest, size, where, scope_id=scope_id, full=full)
        try:
            return reader.readall()
        finally:
            reader.close()

    def inline_bytes(
        self, stored: object, codec_id: object, scope_id: object, digest: str, size: int
    ) -> bytes | None:
        """The raw bytes of an inline blob row (its stored bytes, codec and key scope) when
        they decode to ``size`` bytes with ``digest``, else None (the caller's one-blob
        read then says what is wrong)."""
        scope = self.keyring.scope(self.conn, scope_id)
        return verified_inline(stored, size, digest, codec_id, scope)

    def read_many(
        self, wanted: Sequence[tuple[int, str, int, int | None, dict[str, Any]]]
    ) -> list[bytes]:
        """The bytes of many blobs -- (blob_id, digest, size, scope_id, where) each --
        verified as :meth:`read_all` does, in order: the inline ones (a checkpoint's small
        entries) in one statement per 500, any other one on its own."""
        ids = list({w[0] for w in wanted})
        stored: dict[int, tuple[Any, ...]] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            for row in self.conn.execute(
                "SELECT blob_id, chunk_count, inline_data, codec, scope_id FROM blob"
                f" WHERE blob_id IN ({marks})",
                part,
            ):
                stored[row[0]] = row
        out: list[bytes] = []
        for blob_id, digest, size, scope_id, where in wanted:
            found = stored.get(blob_id)
            data = None
            if found is not None and found[1] == 0:
                data = self.inline_bytes(found[2], found[3], found[4], digest, size)
            if data is None:
                # Chunked, gone or damaged: the one-blob path reads it or says what is wrong.
                data = self.read_all(blob_id, digest, size, where, scope_id=scope_id)
            out.append(data)
        return out

    def _read_small_chunked(
        self,
        blob_id: int,
        digest: str,
        size: int,
        where: dict[str, Any],
        scope_id: int | None,
        full: bool,
    ) -> bytes:
        """A chunked blob small enough to hold whole: every chunk in one query, each
        verified (and the whole, when ``full`` or in a key scope), inside the caller's read
        transaction."""
        list_digest, scope = self.chunked_head(blob_id, digest, size, scope_id, where)
        rows = self.conn.execute(
            "SELECT c.digest, c.size, coalesce(c.codec, 0), d.data FROM blob_chunk bc"
            " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id"
            " LEFT JOIN chunk_data d ON d.chunk_id = bc.chunk_id"
            " WHERE bc.blob_id = ? ORDER BY bc.seq",
            (blob_id,),
        )
        if any(not isinstance(r[0], str) or not isinstance(r[1], int) for r in rows):
            raise corruption(where, digest, "a chunk of the blob is missing", "chunk_missing")
        if list_digest != canonical.chunk_list_digest(str(r[0]) for r in rows):
            raise corruption(
                where, digest, "the chunk list does not match its digest", "chunk_list_mismatch"
            )
        if sum(int(r[1]) for r in rows) != size:
            raise corruption(
                where, digest, "chunk sizes do not add up to the entry size", "blob_size_mismatch"
            )
        parts: list[bytes] = []
        for index, (chunk_digest, chunk_size, codec_id, stored) in enumerate(rows):
            raw = decoded(codec_id, stored, chunk_size, scope, chunk_digest)
            if raw is None or scope.address(raw) != chunk_digest:
                raise corruption(
                    where,
                    digest,
                    f"chunk {index} does not match its digest",
                    "chunk_digest_mismatch",
                )
            parts.append(raw)
        data = b"".join(parts)
        if (full or scope.sealed) and scope.address(data) != digest:
            raise corruption(
                where, digest, "the blob digest does not match", "blob_digest_mismatch"
            )
        return data

    def chunk_list(
        self, blob_id: int
    ) -> tuple[str | None, list[tuple[int, str | None, int, int, int]]]:
        """(stored chunk_list_digest, [(chunk_id, chunk digest, size, codec, stored size)])
        of a chunked blob; digest and size are None where the chunk is gone. Values are
        type-checked."""
        # One statement, so one snapshot without a transaction around it.
        found = self.conn.execute(
            "SELECT b.chunk_list_digest, bc.chunk_id, c.digest, c.size, coalesce(c.codec, 0),"
            " coalesce(c.stored_size, c.size, 0) FROM blob b"
            " LEFT JOIN blob_chunk bc ON bc.blob_id = b.blob_id"
            " LEFT JOIN chunk c ON c.chunk_id = bc.chunk_id"
            " WHERE b.blob_id = ? ORDER BY bc.seq",
            (blob_id,),
        )
        list_digest = found[0][0] if found else None
        rows = [r[1:] for r in found if r[1] is not None]
        check_types((list_digest,), ((str, type(None)),), "blob row")
        for r in rows:
            check_types(r, (int, (str, type(None)), (int, type(None)), int, int), "chunk list row")
        return list_digest, [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def read_chunk(self, chunk_id: int) -> bytes | None:
        """One chunk's stored (unverified) bytes, copied once out of SQLite's pages; None
        if the chunk's bytes are gone (or are no BLOB)."""
        if isinstance(self.conn, Connection):
            return self.conn.read_blob("chunk_data", "data", chunk_id)
        value = self.conn.scalar("SELECT data FROM chunk_data WHERE chunk_id = ?", (chunk_id,))
        return bytes(value) if isinstance(value, (bytes, memoryview)) else None

    def read_chunk_into(self, chunk_id: int, buffer: bytearray) -> int | None:
        """Read one chunk's stored (unverified) bytes into ``buffer``; returns the length,
        or None if the chunk is gone."""
        if isinstance(self.conn, Connection):
            return self.conn.read_blob_into("chunk_data", "data", chunk_id, buffer)
        data = self.read_chunk(chunk_id)
        if data is None:
            return None
        buffer[: len(data)] = data
        return len(data)

    def blob_exists(self, blob_id: int) -> bool:
        """True while the blob row exists."""
        return self.conn.one("SELECT 1 FROM blob WHERE blob_id = ?", (blob_id,)) is not None
