"""Benchmark: what a leaner storage layout would buy a small commit (issue 13 item 3).

    python tools/bench_layout.py                  # 25 rounds x 80 commits per contender (~1-2 min)
    python tools/bench_layout.py --quick          # seconds, a smoke check
    python tools/bench_layout.py --json out.json

Nothing here is library code: the tool replays, with plain apsw, the *row writes* of small
ckptdb commits (3 entries of 1 KiB, fresh random content -- what zstd leaves of
incompressible bytes: ckptdb stores them raw, codec 0) on candidate schemas, to measure a
layout before anyone writes its migration. Every file is fresh, on the disk of ``--dir``,
with ckptdb's settings: page_size 4096, auto_vacuum=INCREMENTAL, WAL, synchronous=FULL,
foreign_keys=ON, cache_size 8 MiB, journal_size_limit 64 MiB, DEFENSIVE, trusted_schema
off, the default WAL auto-checkpoint (1000 frames).

Contenders (each transaction: ``BEGIN IMMEDIATE``, the pointer read, the writes, ``COMMIT``):

* ``current`` -- the real schema (v6 since the pointer lost its foreign keys to
  ``checkpoint``; the figures in docs/performance.md named ``v5`` were taken before):
  ``ckptdb.open`` on a fresh file applies the migrations,
  then the statements and values of ``ops/commit.py publish()``: 3 ``INSERT OR IGNORE INTO
  blob`` (hex digest, inline bytes), ``INSERT OR IGNORE INTO checkpoint`` (hex id, parent,
  canonical metadata ``{}``), 3 ``entry`` rows, the pointer upsert, the history row.
* ``binary``  -- the same tables and indexes with 32-byte BLOB digests/ids instead of 64-char
  hex text (what binary keys alone buy).
* ``packed``  -- ``binary`` with the entries stored inside the checkpoint row (their
  canonical JSON, the text the id is computed over): no ``entry`` table, no
  ``entry_by_blob``.
* ``packed-nofk`` -- ``packed`` without the pointer's foreign keys to ``checkpoint`` and
  their two indexes (GC would protect CURRENT/fallback by reading the pointers, which it
  does anyway to compute reachability).
* ``hashed``  -- ``packed-nofk`` with ``blob`` keyed by the first 8 bytes of the digest as
  its rowid (the full digest in a column, no digest index): a digest-keyed table holding
  the inline bytes without WITHOUT ROWID's ~1 KB local-payload limit.
* ``lean``    -- digest-keyed WITHOUT ROWID tables: ``blob`` keyed by digest holding the
  inline bytes, ``checkpoint`` keyed by id with the entries as a packed binary list
  (name, digest32, size, media type, schema), ``checkpoint_by_namespace`` kept, ``pointer``
  naming checkpoints by id with its foreign keys and their two indexes.
* ``floor``   -- one table, no index, one INSERT of the three byte strings per transaction
  (same file settings).

Two scenarios, each on its own files, all interleaved in the same rounds (order rotated
every round): ``1ns`` -- every commit in one namespace; ``1000ns`` -- namespaces in
round-robin order (LangGraph threads). Before measuring, ``--warmup`` commits (written
with synchronous=OFF, 100 per transaction: the b-trees get the same shape) give the trees
depth. Reported per contender: WAL frames per commit by b-tree and by page type (frames
counted in the -wal file after ``--frame-commits`` commits with auto-checkpoint off, pages
attributed to their owner with ``dbstat``, as ``tools/profile_commit.py`` does), median and
p90 COMMIT latency, median whole-transaction latency, CPU per transaction
(``time.thread_time``), and each as a ratio to the floor *measured in the same round*
(the median of the per-round ratios): this disk's fsync cost drifts 10x within minutes,
so only interleaved ratios mean anything.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import shutil
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

import ckptdb

PAGE_SIZE = 4096
ENTRY_NAMES = ("graph/snapshot.json", "ingest_roots.json", "notes.bin")  # sorted
ENTRY_SIZE = 1024
METADATA = "{}"  # canonical metadata of a commit without metadata
WAL_HEADER = 32
FRAME_HEADER = 24


# -- one commit's values, computed before the transaction (hashing is not measured) ------


@dataclass
class Commit:
    payloads: list[bytes]
    digests: list[bytes]  # sha256 of each payload
    digests_hex: list[str]
    ckpt_id: bytes
    ckpt_id_hex: str
    ptr_digest: bytes
    ptr_digest_hex: str
    namespace: int
    entries_json: str = ""
    entries_packed: bytes = b""


def _entries_json(digests_hex: list[str]) -> str:
    # canonical.entries_json: keys sorted, no spaces, entries by name.
    return (
        "["
        + ",".join(
            f'{{"digest":"{d}","name":"{n}","size":{ENTRY_SIZE}}}'
            for n, d in zip(ENTRY_NAMES, digests_hex, strict=True)
        )
        + "]"
    )


_NONE = 0xFFFF


def pack_entries(entries: list[tuple[str, bytes, int, str | None, str | None]]) -> bytes:
    """A compact binary entry list: per entry u16 name length, name, 32-byte digest, u64
    size, then media type and schema as u16 length (0xFFFF = absent) + UTF-8."""
    out = bytearray()
    for name, digest, size, media, schema in entries:
        raw = name.encode()
        out += struct.pack(">H", len(raw)) + raw + digest + struct.pack(">Q", size)
        for text in (media, schema):
            if text is None:
                out += struct.pack(">H", _NONE)
            else:
                b = text.encode()
                out += struct.pack(">H", len(b)) + b
    return bytes(out)


def make_commit(namespace: int) -> Commit:
    payloads = [os.urandom(ENTRY_SIZE) for _ in ENTRY_NAMES]
    digests = [hashlib.sha256(p).digest() for p in payloads]
    ckpt = hashlib.sha256(os.urandom(32)).digest()
    ptr = hashlib.sha256(os.urandom(32)).digest()
    c = Commit(
        payloads, digests, [d.hex() for d in digests], ckpt, ckpt.hex(), ptr, ptr.hex(), namespace
    )
    c.entries_json = _entries_json(c.digests_hex)
    c.entries_packed = pack_entries(
        [(n, d, ENTRY_SIZE, None, None) for n, d in zip(ENTRY_NAMES, digests, strict=True)]
    )
    return c


@dataclass
class NsState:
    """What the pointer read gives publish (kept here so that the writes use it)."""

    ns_id: int
    name: str
    seq: int | None = None
    id_hex: str | None = None
    id_bin: bytes | None = None
    revision: int = 0
    digest_hex: str | None = None
    digest_bin: bytes | None = None
    generation: int = 0


# -- schemas ---------------------------------------------------------------------------

_NAMESPACE_DDL = (
    "CREATE TABLE namespace (namespace_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
    " created_at_ms INTEGER NOT NULL, scope_id INTEGER) STRICT"
)
_HISTORY_BIN_DDL = (
    "CREATE TABLE pointer_history ("
    " namespace_id INTEGER NOT NULL REFERENCES namespace (namespace_id) ON DELETE CASCADE,"
    " revision INTEGER NOT NULL, current_id BLOB NOT NULL, fallback_id BLOB,"
    " previous_digest BLOB, digest BLOB NOT NULL, reason TEXT NOT NULL, at_ms INTEGER NOT NULL,"
    " PRIMARY KEY (namespace_id, revision)) STRICT, WITHOUT ROWID"
)
#: The columns of a blob row after its key (v5's, with binary digests).
_BLOB_COLUMNS = (
    " size INTEGER NOT NULL CHECK (size >= 0),"
    " chunk_count INTEGER NOT NULL CHECK (chunk_count >= 0),"
    " chunk_list_digest BLOB, inline_data BLOB, created_at_ms INTEGER NOT NULL,"
    " codec INTEGER NOT NULL DEFAULT 0, scope_id INTEGER, sealed_digest BLOB,"
    " CHECK ((chunk_count = 0 AND inline_data IS NOT NULL AND chunk_list_digest IS NULL)"
    " OR (chunk_count > 0 AND inline_data IS NULL AND length(chunk_list_digest) = 32))"
)
_BLOB_BIN_DDL = (
    "CREATE TABLE blob (blob_id INTEGER PRIMARY KEY,"
    " digest BLOB NOT NULL UNIQUE CHECK (length(digest) = 32)," + _BLOB_COLUMNS + ") STRICT"
)


def _pointer_bin_ddl(fk: bool, by: str = "seq") -> tuple[str, ...]:
    """The pointer table with binary digests, naming checkpoints by ``by`` (``seq`` or
    ``id``); with ``fk`` the foreign keys and the two indexes their checks need."""
    sql_type = "INTEGER" if by == "seq" else "BLOB"
    ref = f" REFERENCES checkpoint ({by})" if fk else ""
    table = (
        "CREATE TABLE pointer ("
        " namespace_id INTEGER PRIMARY KEY REFERENCES namespace (namespace_id),"
        f" current_{by} {sql_type} NOT NULL{ref}, fallback_{by} {sql_type}{ref},"
        " revision INTEGER NOT NULL CHECK (revision >= 1),"
        " digest BLOB NOT NULL CHECK (length(digest) = 32), previous_digest BLOB,"
        " updated_at_ms INTEGER NOT NULL, confirmed_at_ms INTEGER) STRICT"
    )
    if not fk:
        return (table,)
    return (
        table,
        f"CREATE INDEX pointer_by_current ON pointer (current_{by})",
        f"CREATE INDEX pointer_by_fallback ON pointer (fallback_{by})",
    )


_POINTER_SEQ_BIN_DDL = _pointer_bin_ddl(True)
#: Blobs keyed by the first 8 bytes of their digest as the rowid: no separate digest index.
_HASHED_BLOB_DDL = (
    "CREATE TABLE blob (blob_id INTEGER PRIMARY KEY,"
    " digest BLOB NOT NULL CHECK (length(digest) = 32)," + _BLOB_COLUMNS + ") STRICT"
)


def _checkpoint_seq_bin_ddl(extra: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE checkpoint (seq INTEGER PRIMARY KEY,"
        " id BLOB NOT NULL UNIQUE CHECK (length(id) = 32),"
        " namespace_id INTEGER NOT NULL REFERENCES namespace (namespace_id),"
        " parent_id BLOB CHECK (parent_id IS NULL OR length(parent_id) = 32),"
        " generation INTEGER NOT NULL CHECK (generation >= 1), created_at_ms INTEGER NOT NULL,"
        " metadata TEXT NOT NULL, entry_count INTEGER NOT NULL CHECK (entry_count >= 0),"
        " total_size INTEGER NOT NULL CHECK (total_size >= 0),"
        f" format INTEGER NOT NULL DEFAULT 1, code_revision TEXT{extra}) STRICT",
        "CREATE INDEX checkpoint_by_namespace ON checkpoint (namespace_id, generation)",
    )


_LEAN_BLOB_DDL = (
    "CREATE TABLE blob (digest BLOB PRIMARY KEY CHECK (length(digest) = 32),"
    + _BLOB_COLUMNS
    + ") STRICT, WITHOUT ROWID"
)
_LEAN_CHECKPOINT_DDL = (
    "CREATE TABLE checkpoint (id BLOB PRIMARY KEY CHECK (length(id) = 32),"
    " namespace_id INTEGER NOT NULL REFERENCES namespace (namespace_id),"
    " parent_id BLOB CHECK (parent_id IS NULL OR length(parent_id) = 32),"
    " generation INTEGER NOT NULL CHECK (generation >= 1), created_at_ms INTEGER NOT NULL,"
    " metadata TEXT NOT NULL, entry_count INTEGER NOT NULL CHECK (entry_count >= 0),"
    " total_size INTEGER NOT NULL CHECK (total_size >= 0), format INTEGER NOT NULL DEFAULT 1,"
    " code_revision TEXT, entries BLOB NOT NULL) STRICT, WITHOUT ROWID",
    "CREATE INDEX checkpoint_by_namespace ON checkpoint (namespace_id, generation)",
)


# -- connections -----------------------------------------------------------------------


def _configure(conn: apsw.Connection) -> None:
    """ckptdb's per-connection settings (connection.open_connection)."""
    conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
    conn.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
    for pragma, value in (
        ("foreign_keys", "ON"),
        ("synchronous", "FULL"),
        ("cache_size", -8192),
        ("journal_size_limit", 64 * 1024 * 1024),
    ):
        conn.pragma(pragma, value)


def _new_file(path: Path, ddl: tuple[str, ...]) -> apsw.Connection:
    """A fresh file with ckptdb's file settings (connection.initialize_new_file)."""
    conn = apsw.Connection(str(path))
    conn.pragma("page_size", PAGE_SIZE)
    conn.pragma("auto_vacuum", "INCREMENTAL")
    conn.pragma("cache_size", -8192)
    if str(conn.pragma("journal_mode", "WAL")).lower() != "wal":
        raise SystemExit(f"{path}: could not switch to WAL")
    _configure(conn)
    conn.execute("BEGIN IMMEDIATE")
    for statement in ddl:
        conn.execute(statement)
    conn.execute("COMMIT")
    return conn


# -- contenders ------------------------------------------------------------------------

_NOW_MS = int(time.time() * 1000)

# The pointer read publish starts with (store/pointers.py pointer(), _POINTER_COLUMNS).
_V5_POINTER_READ = (
    "SELECT p.namespace_id, (SELECT name FROM namespace WHERE namespace_id = p.namespace_id),"
    " p.current_seq, c.id, f.id, p.revision, p.digest,"
    " p.previous_digest, p.updated_at_ms, CAST(c.parent_id AS BLOB), c.generation,"
    " c.entry_count, c.total_size, CAST(c.metadata AS BLOB),"
    " (SELECT scope_id FROM namespace WHERE namespace_id = p.namespace_id)"
    " FROM pointer p JOIN checkpoint c ON c.seq = p.current_seq"
    " LEFT JOIN checkpoint f ON f.seq = p.fallback_seq"
    " WHERE p.namespace_id = (SELECT namespace_id FROM namespace WHERE name = ?)"
)
_LEAN_POINTER_READ = (
    "SELECT p.namespace_id, (SELECT name FROM namespace WHERE namespace_id = p.namespace_id),"
    " p.current_id, p.fallback_id, p.revision, p.digest,"
    " p.previous_digest, p.updated_at_ms, c.parent_id, c.generation,"
    " c.entry_count, c.total_size, CAST(c.metadata AS BLOB),"
    " (SELECT scope_id FROM namespace WHERE namespace_id = p.namespace_id)"
    " FROM pointer p JOIN checkpoint c ON c.id = p.current_id"
    " WHERE p.namespace_id = (SELECT namespace_id FROM namespace WHERE name = ?)"
)
_BLOB_INSERT = (
    "INSERT OR IGNORE INTO blob (digest, size, chunk_count, inline_data,"
    " created_at_ms, codec, scope_id, sealed_digest) VALUES (?, ?, 0, ?, ?, ?, ?, ?)"
)
_HASHED_BLOB_INSERT = (
    "INSERT OR IGNORE INTO blob (blob_id, digest, size, chunk_count, inline_data,"
    " created_at_ms, codec, scope_id, sealed_digest) VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?)"
)
_CHECKPOINT_INSERT = (
    "INSERT OR IGNORE INTO checkpoint (id, namespace_id, parent_id, generation,"
    " created_at_ms, metadata, entry_count, total_size, format, code_revision{cols})"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?{marks})"
)
_ENTRY_INSERT = (
    "INSERT INTO entry (checkpoint_seq, name, blob_id, media_type, schema_pin)"
    " VALUES (?, ?, ?, ?, ?)"
)
_POINTER_UPSERT = (
    "INSERT INTO pointer (namespace_id, {cur}, {fb}, revision, digest,"
    " previous_digest, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (namespace_id) DO UPDATE SET {cur} = excluded.{cur},"
    " {fb} = excluded.{fb}, revision = excluded.revision,"
    " digest = excluded.digest, previous_digest = excluded.previous_digest,"
    " updated_at_ms = excluded.updated_at_ms, confirmed_at_ms = NULL"
)
_HISTORY_INSERT = (
    "INSERT INTO pointer_history (namespace_id, revision, current_id, fallback_id,"
    " previous_digest, digest, reason, at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


class Contender:
    """One layout on one file: its schema, and the statements of one commit."""

    name = ""
    ddl: tuple[str, ...] = ()

    def __init__(self, path: Path, namespaces: int) -> None:
        self.path = path
        self.conn = self.create(path)
        self.states: dict[int, NsState] = {}
        self.namespaces = namespaces

    def create(self, path: Path) -> apsw.Connection:
        return _new_file(path, (_NAMESPACE_DDL, *self.ddl))

    def state(self, ns: int) -> NsState:
        st = self.states.get(ns)
        if st is None:
            name = f"thread-{ns:05d}"
            self.conn.execute(
                "INSERT INTO namespace (name, created_at_ms, scope_id) VALUES (?, ?, NULL)",
                (name, _NOW_MS),
            )
            st = self.states[ns] = NsState(self.conn.last_insert_rowid(), name)
        return st

    def write(self, c: Commit) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.conn.close()


class V5(Contender):
    """The real schema (migrations applied by ckptdb.open) and publish()'s statements."""

    name = "current"
    binary = False
    pointer_read = _V5_POINTER_READ

    def create(self, path: Path) -> apsw.Connection:
        ckptdb.open(path).close()
        conn = apsw.Connection(str(path))
        _configure(conn)
        return conn

    def _key(self, hex_value: str | None, bin_value: bytes | None) -> Any:
        return bin_value if self.binary else hex_value

    def write(self, c: Commit) -> None:
        conn = self.conn
        st = self.state(c.namespace)
        if st.seq is not None:
            conn.execute(self.pointer_read, (st.name,)).fetchall()
        blob_ids = self.insert_blobs(c)
        cid = self._key(c.ckpt_id_hex, c.ckpt_id)
        parent = self._key(st.id_hex, st.id_bin)
        seq = self.insert_checkpoint(c, st, cid, parent, blob_ids)
        digest = self._key(c.ptr_digest_hex, c.ptr_digest)
        previous = self._key(st.digest_hex, st.digest_bin)
        revision = st.revision + 1
        conn.execute(
            _POINTER_UPSERT.format(cur="current_seq", fb="fallback_seq"),
            (st.ns_id, seq, st.seq, revision, digest, previous, _NOW_MS),
        )
        conn.execute(
            _HISTORY_INSERT,
            (st.ns_id, revision, cid, parent, previous, digest, "commit", _NOW_MS),
        )
        st.seq, st.id_hex, st.id_bin, st.revision = seq, c.ckpt_id_hex, c.ckpt_id, revision
        st.digest_hex, st.digest_bin = c.ptr_digest_hex, c.ptr_digest
        st.generation += 1

    def insert_blobs(self, c: Commit) -> list[int]:
        conn = self.conn
        blob_ids = []
        for payload, d_hex, d_bin in zip(c.payloads, c.digests_hex, c.digests, strict=True):
            conn.execute(
                _BLOB_INSERT,
                (self._key(d_hex, d_bin), ENTRY_SIZE, payload, _NOW_MS, 0, None, None),
            )
            assert conn.changes() == 1
            blob_ids.append(conn.last_insert_rowid())
        return blob_ids

    def insert_checkpoint(
        self, c: Commit, st: NsState, cid: Any, parent: Any, blob_ids: list[int]
    ) -> int:
        conn = self.conn
        conn.execute(
            _CHECKPOINT_INSERT.format(cols="", marks=""),
            (cid, st.ns_id, parent, st.generation + 1, _NOW_MS, METADATA, 3, 3 * ENTRY_SIZE, 1,
             None),
        )  # fmt: skip
        assert conn.changes() == 1
        seq = conn.last_insert_rowid()
        conn.executemany(
            _ENTRY_INSERT,
            [(seq, n, b, None, None) for n, b in zip(ENTRY_NAMES, blob_ids, strict=True)],
        )
        return seq


class Binary(V5):
    name = "binary"
    binary = True
    ddl = (
        _BLOB_BIN_DDL,
        *_checkpoint_seq_bin_ddl(""),
        "CREATE TABLE entry ("
        " checkpoint_seq INTEGER NOT NULL REFERENCES checkpoint (seq) ON DELETE CASCADE,"
        " name TEXT NOT NULL, blob_id INTEGER NOT NULL REFERENCES blob (blob_id),"
        " media_type TEXT, schema_pin TEXT, PRIMARY KEY (checkpoint_seq, name))"
        " STRICT, WITHOUT ROWID",
        "CREATE INDEX entry_by_blob ON entry (blob_id)",
        *_POINTER_SEQ_BIN_DDL,
        _HISTORY_BIN_DDL,
    )

    def create(self, path: Path) -> apsw.Connection:
        return Contender.create(self, path)


class Packed(Binary):
    name = "packed"
    ddl = (
        _BLOB_BIN_DDL,
        *_checkpoint_seq_bin_ddl(", entries TEXT NOT NULL"),
        *_POINTER_SEQ_BIN_DDL,
        _HISTORY_BIN_DDL,
    )

    def insert_checkpoint(
        self, c: Commit, st: NsState, cid: Any, parent: Any, blob_ids: list[int]
    ) -> int:
        conn = self.conn
        conn.execute(
            _CHECKPOINT_INSERT.format(cols=", entries", marks=", ?"),
            (cid, st.ns_id, parent, st.generation + 1, _NOW_MS, METADATA, 3, 3 * ENTRY_SIZE, 1,
             None, c.entries_json),
        )  # fmt: skip
        assert conn.changes() == 1
        return conn.last_insert_rowid()


class PackedNoFk(Packed):
    name = "packed-nofk"
    ddl = (
        _BLOB_BIN_DDL,
        *_checkpoint_seq_bin_ddl(", entries TEXT NOT NULL"),
        *_pointer_bin_ddl(False),
        _HISTORY_BIN_DDL,
    )


class Hashed(PackedNoFk):
    """``packed-nofk`` with blobs keyed by their digest's first 8 bytes as the rowid."""

    name = "hashed"
    ddl = (
        _HASHED_BLOB_DDL,
        *_checkpoint_seq_bin_ddl(", entries TEXT NOT NULL"),
        *_pointer_bin_ddl(False),
        _HISTORY_BIN_DDL,
    )

    def insert_blobs(self, c: Commit) -> list[int]:
        conn = self.conn
        for payload, digest in zip(c.payloads, c.digests, strict=True):
            conn.execute(
                _HASHED_BLOB_INSERT,
                (int.from_bytes(digest[:8], "big", signed=True), digest, ENTRY_SIZE, payload,
                 _NOW_MS, 0, None, None),
            )  # fmt: skip
            # changes() == 0 would be a dedup hit or a prefix collision: publish would read
            # the row and compare the whole digest (then probe the next rowid).
            assert conn.changes() == 1
        return []


class Lean(Contender):
    name = "lean"
    ddl = (
        _LEAN_BLOB_DDL,
        *_LEAN_CHECKPOINT_DDL,
        *_pointer_bin_ddl(True, by="id"),
        _HISTORY_BIN_DDL,
    )

    def write(self, c: Commit) -> None:
        conn = self.conn
        st = self.state(c.namespace)
        if st.id_bin is not None:
            conn.execute(_LEAN_POINTER_READ, (st.name,)).fetchall()
        for payload, digest in zip(c.payloads, c.digests, strict=True):
            conn.execute(_BLOB_INSERT, (digest, ENTRY_SIZE, payload, _NOW_MS, 0, None, None))
            assert conn.changes() == 1
        conn.execute(
            _CHECKPOINT_INSERT.format(cols=", entries", marks=", ?"),
            (c.ckpt_id, st.ns_id, st.id_bin, st.generation + 1, _NOW_MS, METADATA, 3,
             3 * ENTRY_SIZE, 1, None, c.entries_packed),
        )  # fmt: skip
        assert conn.changes() == 1
        revision = st.revision + 1
        conn.execute(
            _POINTER_UPSERT.format(cur="current_id", fb="fallback_id"),
            (st.ns_id, c.ckpt_id, st.id_bin, revision, c.ptr_digest, st.digest_bin, _NOW_MS),
        )
        conn.execute(
            _HISTORY_INSERT,
            (st.ns_id, revision, c.ckpt_id, st.id_bin, st.digest_bin, c.ptr_digest, "commit",
             _NOW_MS),
        )  # fmt: skip
        st.id_bin, st.revision, st.digest_bin = c.ckpt_id, revision, c.ptr_digest
        st.generation += 1


class Floor(Contender):
    name = "floor"
    ddl = ("CREATE TABLE blob (name TEXT, data BLOB)",)

    def create(self, path: Path) -> apsw.Connection:
        return _new_file(path, self.ddl)

    def write(self, c: Commit) -> None:
        for name, data in zip(ENTRY_NAMES, c.payloads, strict=True):
            self.conn.execute("INSERT INTO blob (name, data) VALUES (?, ?)", (name, data))


LAYOUTS: tuple[type[Contender], ...] = (V5, Binary, Packed, PackedNoFk, Hashed, Lean)


# -- measuring -------------------------------------------------------------------------


@dataclass
class Runner:
    contender: Contender
    scenario: str
    namespaces: int
    counter: int = 0
    commit_s: list[list[float]] = field(default_factory=list)  # per round
    txn_s: list[list[float]] = field(default_factory=list)
    cpu_s: list[list[float]] = field(default_factory=list)

    @property
    def key(self) -> str:
        name = self.contender.name
        return name if name == "floor" else f"{name}/{self.scenario}"

    def batch(self, n: int) -> list[Commit]:
        out = [make_commit((self.counter + k) % self.namespaces) for k in range(n)]
        self.counter += n
        return out

    def warm_up(self, commits: int) -> None:
        conn = self.contender.conn
        conn.pragma("synchronous", "OFF")
        done = 0
        while done < commits:
            work = self.batch(min(100, commits - done))
            conn.execute("BEGIN IMMEDIATE")
            for c in work:
                self.contender.write(c)
            conn.execute("COMMIT")
            done += len(work)
        conn.pragma("synchronous", "FULL")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def timed_round(self, n: int) -> None:
        conn = self.contender.conn
        write = self.contender.write
        commit_s, txn_s, cpu_s = [], [], []
        perf, cpu = time.perf_counter, time.thread_time
        for c in self.batch(n):
            c0 = cpu()
            t0 = perf()
            conn.execute("BEGIN IMMEDIATE")
            write(c)
            t1 = perf()
            conn.execute("COMMIT")
            t2 = perf()
            cpu_s.append(cpu() - c0)
            commit_s.append(t2 - t1)
            txn_s.append(t2 - t0)
        self.commit_s.append(commit_s)
        self.txn_s.append(txn_s)
        self.cpu_s.append(cpu_s)

    def count_frames(self, n: int) -> dict[str, Any]:
        """WAL frames per commit over ``n`` commits, by owning b-tree and by page type."""
        conn = self.contender.conn
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        conn.pragma("wal_autocheckpoint", 0)
        try:
            for c in self.batch(n):
                conn.execute("BEGIN IMMEDIATE")
                self.contender.write(c)
                conn.execute("COMMIT")
            wal = Path(f"{self.contender.path}-wal").read_bytes()
            owner = {
                int(page): (str(name), str(kind))
                for name, page, kind in conn.execute("SELECT name, pageno, pagetype FROM dbstat")
            }
        finally:
            conn.pragma("wal_autocheckpoint", 1000)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        by_tree: collections.Counter[str] = collections.Counter()
        by_kind: collections.Counter[str] = collections.Counter()
        page_size = struct.unpack(">I", wal[8:12])[0]
        at = WAL_HEADER
        while at + FRAME_HEADER + page_size <= len(wal):
            page = struct.unpack(">I", wal[at : at + 4])[0]
            name, kind = owner.get(page, ("pointer map / free", "other"))
            if page == 1:
                name, kind = "page 1 (header, sqlite_schema)", "other"
            by_tree[name] += 1
            by_kind[kind] += 1
            at += FRAME_HEADER + page_size
        total = sum(by_tree.values())
        return {
            "frames_per_commit": round(total / n, 2),
            "frames_by_btree": {k: round(v / n, 2) for k, v in by_tree.most_common()},
            "frames_by_page_type": {k: round(v / n, 2) for k, v in by_kind.most_common()},
            "file_bytes": os.path.getsize(self.contender.path),
        }


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    runners: list[Runner] = [Runner(Floor(workdir / "floor.db", 1), "-", 1)]
    for scenario, namespaces in (("1ns", 1), (f"{args.namespaces}ns", args.namespaces)):
        for layout in LAYOUTS:
            path = workdir / f"{layout.name}-{scenario}.db"
            runners.append(Runner(layout(path, namespaces), scenario, namespaces))
    for r in runners:
        r.warm_up(args.warmup)
    for r in runners:  # settle caches and the WAL's size
        r.timed_round(min(args.per_round, 20))
        r.commit_s.clear()
        r.txn_s.clear()
        r.cpu_s.clear()
    for i in range(args.rounds):
        order = runners[i % len(runners) :] + runners[: i % len(runners)]
        for r in order:
            r.timed_round(args.per_round)
    floor = runners[0]
    measures: dict[str, Callable[[list[float]], float]] = {
        "commit_median": statistics.median,
        "commit_p90": _p90,
        "txn_median": statistics.median,
        "cpu_mean": statistics.fmean,
    }
    sources = {"commit_median": "commit_s", "commit_p90": "commit_s", "txn_median": "txn_s",
               "cpu_mean": "cpu_s"}  # fmt: skip
    contenders: dict[str, Any] = {}
    for r in runners:
        out: dict[str, Any] = {"layout": r.contender.name, "scenario": r.scenario}
        ratios: dict[str, float] = {}
        for measure, fn in measures.items():
            rounds = getattr(r, sources[measure])
            floor_rounds = getattr(floor, sources[measure])
            pooled = [v for values in rounds for v in values]
            out[f"{measure}_us"] = round(fn(pooled) * 1e6, 1)
            ratios[measure] = round(
                statistics.median(
                    fn(mine) / fn(base) for mine, base in zip(rounds, floor_rounds, strict=True)
                ),
                2,
            )
        out["ratio_to_floor"] = ratios
        contenders[r.key] = out
    for r in runners:
        contenders[r.key].update(r.count_frames(args.frame_commits))
    for r in runners:
        r.contender.close()
    return {
        "contenders": contenders,
        "rounds": args.rounds,
        "commits_per_round": args.per_round,
        "warmup_commits": args.warmup,
        "namespaces": args.namespaces,
        "frame_commits": args.frame_commits,
        "sqlite": apsw.sqlite_lib_version(),
    }


def _table(report: dict[str, Any]) -> str:
    lines = [
        f"{'contender':<22} {'frames':>6} {'COMMIT':>8} {'p90':>8} {'txn':>8} {'cpu':>7}"
        f" | ratio to floor: {'COMMIT':>6} {'p90':>5} {'txn':>5} {'cpu':>5}"
    ]
    for key, c in report["contenders"].items():
        r = c["ratio_to_floor"]
        lines.append(
            f"{key:<22} {c['frames_per_commit']:>6} {c['commit_median_us']:>8}"
            f" {c['commit_p90_us']:>8} {c['txn_median_us']:>8} {c['cpu_mean_us']:>7}"
            f" | {'':>15} {r['commit_median']:>6} {r['commit_p90']:>5} {r['txn_median']:>5}"
            f" {r['cpu_mean']:>5}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--per-round", type=int, default=80, help="commits per contender")
    parser.add_argument("--warmup", type=int, default=5000, help="commits before measuring")
    parser.add_argument("--namespaces", type=int, default=1000, help="of the round-robin files")
    parser.add_argument("--frame-commits", type=int, default=300, help="commits whose frames count")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temp dir)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.per_round, args.warmup = 2, 10, 200
        args.namespaces, args.frame_commits = 50, 20
    if args.warmup < args.namespaces:
        parser.error("--warmup must be at least --namespaces (every namespace gets a pointer)")
    workdir = Path(tempfile.mkdtemp(prefix="ckptdb-layout-", dir=args.dir))
    try:
        report = run(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(_table(report))
    for key, c in report["contenders"].items():
        print(f"\n{key}: {c['frames_per_commit']} frames/commit", json.dumps(c["frames_by_btree"]))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
