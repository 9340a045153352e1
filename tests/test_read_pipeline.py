"""Verified reads of a large chunked entry through the pipelined reader: damage is refused
before any of its bytes are handed out, the whole-blob digest is checked before the last
piece, helper threads stop when a stream is closed early, and the handle stays usable (and
consistent) for commits and GC while a large read is in progress."""

from __future__ import annotations

import gc
import os
import threading
import time
from pathlib import Path

import pytest
from conftest import raw_sql

import ckptdb
from ckptdb import canonical, errors
from ckptdb.store import blob_reader

#: Large enough for the pipelined reader (helper threads, read-ahead of several windows).
SIZE = 3 * blob_reader.PARALLEL_READ_MIN
KEY = bytes(range(32))


_BEFORE: set[threading.Thread] = set()


def _all_helpers() -> set[threading.Thread]:
    return {
        t
        for t in threading.enumerate()
        if t.name.startswith(("ckptdb-verify", "ckptdb-hash")) and t.is_alive()
    }


@pytest.fixture(autouse=True)
def _baseline() -> None:
    """Helper threads of readers this test did not start (another test's stream not yet
    collected) are not this test's to count."""
    _BEFORE.clear()
    _BEFORE.update(_all_helpers())


def _helpers() -> set[threading.Thread]:
    """Reader helper threads started by this test and still running."""
    return _all_helpers() - _BEFORE


def _chunks(path: Path, digest: str) -> list[tuple[int, int, str, int, int]]:
    """(seq, chunk_id, chunk digest, size, codec) of a blob's chunks, in order."""
    rows = raw_sql(
        path,
        "SELECT bc.seq, bc.chunk_id, c.digest, c.size, c.codec FROM blob b"
        " JOIN blob_chunk bc ON bc.blob_id = b.blob_id JOIN chunk c ON c.chunk_id = bc.chunk_id"
        " WHERE b.digest = ? ORDER BY bc.seq",
        (digest,),
    )
    return [(int(a), int(b), str(c), int(d), int(e)) for a, b, c, d, e in rows]  # type: ignore[call-overload]


def _commit_big(path: Path, data: bytes, **open_kw: object) -> str:
    with ckptdb.open(path, **open_kw) as db:  # type: ignore[arg-type]
        if "keys" in open_kw:
            db.set_encryption("tenant/", key_id="k")
            ns = "tenant/ns"
        else:
            ns = "ns"
        db.commit(ns, {"big": data})
        return db.current(ns).entries["big"].digest  # type: ignore[union-attr]


def _flip_stored_byte(path: Path, chunk_id: int) -> None:
    (stored,) = raw_sql(path, "SELECT data FROM chunk_data WHERE chunk_id = ?", (chunk_id,))[0]
    assert isinstance(stored, bytes)
    damaged = bytearray(stored)
    damaged[len(damaged) // 2] ^= 0x01
    raw_sql(path, "UPDATE chunk_data SET data = ? WHERE chunk_id = ?", (bytes(damaged), chunk_id))


def _read(cp: ckptdb.Checkpoint, how: str, got: bytearray) -> None:
    if how == "open":
        with cp.open("big") as fh:
            while piece := fh.read(100_000):
                got += piece
    elif how == "iter":
        for piece in cp.iter_bytes("big"):
            got += piece
    else:
        got += cp.read("big")


@pytest.mark.parametrize("how", ["open", "iter", "read"])
@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
def test_a_damaged_chunk_in_the_middle_is_refused_before_any_of_its_bytes(
    db_path: Path, how: str, sealed: bool
) -> None:
    data = os.urandom(SIZE)
    keys = {"keys": {"k": KEY}} if sealed else {}
    digest = _commit_big(db_path, data, **keys)
    chunks = _chunks(db_path, digest)
    assert len(chunks) > 20
    bad = len(chunks) // 2
    start = sum(c[3] for c in chunks[:bad])
    _flip_stored_byte(db_path, chunks[bad][1])
    with ckptdb.open(db_path, **keys) as db:  # type: ignore[arg-type]
        cp = db.current("tenant/ns" if sealed else "ns")
        assert cp is not None
        got = bytearray()
        with pytest.raises(errors.CorruptionError) as caught:
            _read(cp, how, got)
        assert caught.value.details["reason"] == "chunk_digest_mismatch"
        assert f"chunk {bad} " in caught.value.message
        # Only verified bytes, all before the damaged chunk; none of it, nothing after it.
        assert len(got) <= start
        assert bytes(got) == data[: len(got)]
        if how == "iter":
            assert len(got) == start  # every intact chunk before it was handed out
        assert not _helpers()


def test_the_error_stays_reported_on_the_same_stream(db_path: Path) -> None:
    data = os.urandom(SIZE)
    digest = _commit_big(db_path, data)
    chunks = _chunks(db_path, digest)
    bad = len(chunks) // 3
    start = sum(c[3] for c in chunks[:bad])
    _flip_stored_byte(db_path, chunks[bad][1])
    with ckptdb.open(db_path) as db:
        cp = db.current("ns")
        assert cp is not None
        with cp.open("big") as fh:
            got = fh.read(start)
            assert got == data[:start]
            for _ in range(3):  # reading on never skips past the damaged chunk
                with pytest.raises(errors.CorruptionError):
                    fh.read(1)


@pytest.mark.parametrize(
    ("sealed", "how"),
    [(False, "verify"), (True, "open"), (True, "iter"), (True, "read"), (True, "verify")],
)
def test_a_forged_chunk_list_fails_the_whole_digest_before_the_last_piece(
    db_path: Path, how: str, sealed: bool
) -> None:
    """Every chunk intact and the chunk list consistent with its own digest, but in another
    order: only the whole-blob digest can tell. The explicit full check (``Checkpoint.verify``)
    and every read in a key scope -- where a list digest anyone can recompute must not stand
    in for addresses only the key makes -- hash the whole and never hand out the last chunk.
    (A plaintext read hashes each byte once and leaves such a forgery, which needs the
    manifest forged too to matter, to ``verify``: tests/test_onepass.py.)"""
    data = os.urandom(SIZE)
    keys = {"keys": {"k": KEY}} if sealed else {}
    digest = _commit_big(db_path, data, **keys)
    chunks = _chunks(db_path, digest)
    (blob_id,) = raw_sql(db_path, "SELECT blob_id FROM blob WHERE digest = ?", (digest,))[0]
    a, b = 1, len(chunks) // 2
    assert chunks[a][2] != chunks[b][2]
    for seq, chunk_id in ((chunks[a][0], chunks[b][1]), (chunks[b][0], chunks[a][1])):
        raw_sql(
            db_path,
            "UPDATE blob_chunk SET chunk_id = ? WHERE blob_id = ? AND seq = ?",
            (chunk_id, blob_id, seq),
        )
    forged = [c[2] for c in chunks]
    forged[a], forged[b] = forged[b], forged[a]
    raw_sql(
        db_path,
        "UPDATE blob SET chunk_list_digest = ? WHERE blob_id = ?",
        (canonical.chunk_list_digest(forged), blob_id),
    )
    with ckptdb.open(db_path, **keys) as db:  # type: ignore[arg-type]
        cp = db.current("tenant/ns" if sealed else "ns")
        assert cp is not None
        got = bytearray()
        with pytest.raises(errors.CorruptionError) as caught:
            if how == "verify":
                cp.verify()
            else:
                _read(cp, how, got)
        assert caught.value.details["reason"] == "blob_digest_mismatch"
        assert len(got) <= SIZE - chunks[-1][3]  # the last chunk never came out
        if how == "iter":
            assert len(got) == SIZE - chunks[-1][3]
        assert not _helpers()


def test_closing_a_stream_early_stops_its_helper_threads(db_path: Path) -> None:
    data = os.urandom(SIZE)
    _commit_big(db_path, data)
    with ckptdb.open(db_path) as db:
        cp = db.current("ns")
        assert cp is not None
        assert not _helpers()
        with cp.open("big") as fh:
            assert fh.read(1 << 20) == data[: 1 << 20]
            assert _helpers()  # the pipeline is running: the test would see a leak
        assert not _helpers()
        pieces = cp.iter_bytes("big")
        first = next(pieces)
        assert first == data[: len(first)]
        assert _helpers()
        pieces.close()
        assert not _helpers()
        # A stream dropped without close is closed by its finalizer.
        fh = cp.open("big")
        fh.read(3 << 20)
        del fh
        gc.collect()
        assert not _helpers()
        # Read to the end: same bytes, and nothing left running.
        with cp.open("big") as fh:
            assert fh.read() == data
        assert not _helpers()


def test_commits_and_gc_on_the_same_handle_during_a_large_read(db_path: Path) -> None:
    data = os.urandom(SIZE)
    _commit_big(db_path, data)
    with ckptdb.open(db_path) as db:
        cp = db.current("ns")
        assert cp is not None
        got = bytearray()
        failures: list[BaseException] = []

        def reader() -> None:
            try:
                with cp.open("big") as fh:
                    while piece := fh.read(256 * 1024):
                        got.extend(piece)
                        time.sleep(0.002)  # slow: commits and GC interleave with it
            except BaseException as exc:  # pragma: no cover - reported below
                failures.append(exc)

        thread = threading.Thread(target=reader)
        thread.start()
        commits = 0
        while thread.is_alive() or commits < 5:
            db.commit("churn", {"x": os.urandom(2048), "y": os.urandom(300_000)})
            commits += 1
            if commits % 5 == 0:
                db.gc(ckptdb.RetentionPolicy(keep_last=1), namespaces=["churn"], grace=0)
        thread.join()
        assert not failures, failures
        assert bytes(got) == data
        assert db.verify().ok
        assert not _helpers()


@pytest.mark.parametrize("how", ["open", "iter"])
def test_gc_of_the_entry_being_read_is_reported_never_wrong_bytes(db_path: Path, how: str) -> None:
    data = os.urandom(SIZE)
    _commit_big(db_path, data)
    with ckptdb.open(db_path) as db:
        cp = db.current("ns")
        assert cp is not None
        got = bytearray()
        with pytest.raises(errors.CheckpointNotFoundError):
            if how == "open":
                with cp.open("big") as fh:
                    got += fh.read(1 << 20)
                    db.drop_namespace("ns")
                    db.gc(grace=0)
                    while piece := fh.read(1 << 20):
                        got += piece
            else:
                pieces = cp.iter_bytes("big")
                got += next(pieces)
                db.drop_namespace("ns")
                db.gc(grace=0)
                for piece in pieces:
                    got += piece
        assert len(got) < SIZE
        assert bytes(got) == data[: len(got)]
        assert not _helpers()
