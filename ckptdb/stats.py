"""Sizes and counts of a database (``ckptdb stats``)."""

from __future__ import annotations

import os

from . import models
from .connection import Connection


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def collect(conn: Connection, path: str, chunk_size: int) -> models.Stats:
    """Gather the statistics in one read transaction."""
    with conn.read_transaction():
        counts = conn.one(
            "SELECT (SELECT count(*) FROM pointer), (SELECT count(*) FROM checkpoint),"
            " (SELECT count(*) FROM blob), (SELECT count(*) FROM chunk),"
            " (SELECT coalesce(sum(total_size), 0) FROM checkpoint),"
            " (SELECT coalesce(sum(length(inline_data)), 0) FROM blob WHERE chunk_count = 0),"
            " (SELECT coalesce(sum(size), 0) FROM chunk)"
        )
        assert counts is not None
        page_size = int(conn.pragma("page_size"))
        page_count = int(conn.pragma("page_count"))
        free_pages = int(conn.pragma("freelist_count"))
        version = int(conn.pragma("user_version"))
    namespaces, checkpoints, blobs, chunks, logical, inline, chunked = (int(c) for c in counts)
    stored = inline + chunked
    return models.Stats(
        path=path,
        file_bytes=_size(path),
        wal_bytes=_size(path + "-wal"),
        page_size=page_size,
        page_count=page_count,
        free_pages=free_pages,
        schema_version=version,
        chunk_size=chunk_size,
        namespaces=namespaces,
        checkpoints=checkpoints,
        blobs=blobs,
        chunks=chunks,
        logical_bytes=logical,
        stored_bytes=stored,
        dedup_ratio=round(logical / stored, 3) if stored else 1.0,
    )
