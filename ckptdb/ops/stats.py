"""Sizes and counts of a database (``ckptdb stats``)."""

from __future__ import annotations

import os

from .. import models
from ..connection import Connection
from ..store import blob_scans, checkpoint_scans, migrations, pointers, quotas
from .unit import Unit, reads


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


@reads
def collect(tx: Unit, path: str) -> models.Stats:
    """Gather the statistics in one read transaction."""
    conn = tx.conn
    chunk_size = tx.chunk_size
    counts = (
        pointers.count(conn),
        checkpoint_scans.count(conn),
        blob_scans.count_blobs(conn),
        blob_scans.count_chunks(conn),
        checkpoint_scans.logical_bytes(conn),
        *blob_scans.stored_bytes(conn),
    )
    if isinstance(conn, Connection):
        page_size = int(conn.pragma("page_size"))
        page_count = int(conn.pragma("page_count"))
        free_pages = int(conn.pragma("freelist_count"))
        file_bytes, wal_bytes = _size(path), _size(path + "-wal")
        version = int(conn.pragma("user_version"))
    else:
        # The database as its server counts it: its size, in blocks of the server's size
        # (free space inside them is VACUUM's to reuse and not counted here: 0).
        row = conn.one(
            "SELECT pg_database_size(current_database()), current_setting('block_size')::int"
        )
        assert row is not None
        file_bytes, page_size = int(row[0]), int(row[1])
        page_count, free_pages, wal_bytes = file_bytes // page_size, 0, 0
        version = migrations.user_version(conn)
    usage = quotas.usage_by_namespace(conn)
    n_namespaces, n_checkpoints, n_blobs, n_chunks, logical, inline, chunked = counts
    stored = inline + chunked
    return models.Stats(
        path=path,
        file_bytes=file_bytes,
        wal_bytes=wal_bytes,
        page_size=page_size,
        page_count=page_count,
        free_pages=free_pages,
        schema_version=version,
        chunk_size=chunk_size,
        namespaces=n_namespaces,
        checkpoints=n_checkpoints,
        blobs=n_blobs,
        chunks=n_chunks,
        logical_bytes=logical,
        stored_bytes=stored,
        dedup_ratio=round(logical / stored, 3) if stored else 1.0,
        usage=usage,
    )
