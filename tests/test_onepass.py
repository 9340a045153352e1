"""One hash pass per byte on a verified read of a chunked entry (issue 25).

A read checks the blob row against the manifest and the chunk list against the row's
``chunk_list_digest`` before the first byte, then each chunk against its own digest before
its bytes come out -- no second pass over the whole content. Every single damage is still
caught before a damaged byte reaches the caller: a chunk's bytes, a chunk row's digest, a
``blob_chunk`` row (redirected to another chunk, or to none), ``chunk_list_digest`` and the
blob row's digest (by the manifest check, and by the read itself for a checkpoint whose
manifest was checked before the damage). The whole-content digest is still checked by the
explicit full check (``Checkpoint.verify``, which ``load`` runs) and by ``verify``, and on
every read in a key scope."""

from __future__ import annotations

import random
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import raw_sql, run_tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import canonical, errors
from ckptdb.store import blob_reader

#: Below the pipelined reader's threshold: read whole in one query (open still streams).
SMALL = 2 * 1024 * 1024
#: Above it: the pipelined reader, with a helper thread verifying chunks.
LARGE = blob_reader.PARALLEL_READ_MIN + 4 * 1024 * 1024
KEY = bytes(range(32))
NS = {False: "ns", True: "tenant/ns"}


def _data(size: int) -> bytes:
    return random.Random(size).randbytes(size)


def _open(path: Path, sealed: bool) -> ckptdb.Database:
    return ckptdb.open(path, keys={"k": KEY}) if sealed else ckptdb.open(path)


def _commit(path: Path, data: bytes, sealed: bool = False) -> None:
    with _open(path, sealed) as db:
        if sealed:
            db.set_encryption("tenant/", key_id="k")
        db.commit(NS[sealed], {"big": data})


def _blob(path: Path) -> tuple[int, str, str]:
    """(blob_id, digest, chunk_list_digest) of the one chunked blob."""
    ((blob_id, digest, list_digest),) = raw_sql(
        path, "SELECT blob_id, digest, chunk_list_digest FROM blob WHERE chunk_count > 0"
    )
    assert isinstance(blob_id, int) and isinstance(digest, str) and isinstance(list_digest, str)
    return blob_id, digest, list_digest


def _chunks(path: Path) -> list[tuple[int, int, str, int]]:
    """(seq, chunk_id, chunk digest, size) of the blob's chunks, in order."""
    rows = raw_sql(
        path,
        "SELECT bc.seq, bc.chunk_id, c.digest, c.size FROM blob_chunk bc"
        " JOIN chunk c ON c.chunk_id = bc.chunk_id ORDER BY bc.seq",
    )
    return [(int(a), int(b), str(c), int(d)) for a, b, c, d in rows]  # type: ignore[call-overload]


def _flip_hex(value: str, at: int) -> str:
    """``value`` with the hex digit at ``at`` replaced by another one."""
    return value[:at] + ("1" if value[at] == "0" else "0") + value[at + 1 :]


# -- the five places, each damaged once (returns where the first damaged byte starts) --


def _damage_chunk_bytes(path: Path, index: int) -> int:
    chunks = _chunks(path)
    (stored,) = raw_sql(
        path, "SELECT data FROM chunk_data WHERE chunk_id = ?", (chunks[index][1],)
    )[0]
    assert isinstance(stored, bytes)
    damaged = bytearray(stored)
    damaged[len(damaged) // 2] ^= 0x40
    raw_sql(
        path,
        "UPDATE chunk_data SET data = ? WHERE chunk_id = ?",
        (bytes(damaged), chunks[index][1]),
    )
    return sum(c[3] for c in chunks[:index])


def _damage_chunk_digest(path: Path, index: int) -> int:
    chunks = _chunks(path)
    raw_sql(
        path,
        "UPDATE chunk SET digest = ? WHERE chunk_id = ?",
        (_flip_hex(chunks[index][2], 7), chunks[index][1]),
    )
    return 0


def _redirect_blob_chunk(path: Path, index: int) -> int:
    chunks = _chunks(path)
    other = chunks[(index + 1) % len(chunks)][1]
    raw_sql(path, "UPDATE blob_chunk SET chunk_id = ? WHERE seq = ?", (other, index))
    return 0


def _blob_chunk_to_nowhere(path: Path, index: int) -> int:
    raw_sql(path, "UPDATE blob_chunk SET chunk_id = 999999 WHERE seq = ?", (index,))
    return 0


def _damage_chunk_list_digest(path: Path, index: int) -> int:
    blob_id, _, list_digest = _blob(path)
    raw_sql(
        path,
        "UPDATE blob SET chunk_list_digest = ? WHERE blob_id = ?",
        (_flip_hex(list_digest, index % 64), blob_id),
    )
    return 0


def _damage_blob_digest(path: Path, index: int) -> int:
    blob_id, digest, _ = _blob(path)
    raw_sql(
        path,
        "UPDATE blob SET digest = ? WHERE blob_id = ?",
        (_flip_hex(digest, index % 64), blob_id),
    )
    return 0


DAMAGE: dict[str, tuple[Callable[[Path, int], int], str]] = {
    "chunk_bytes": (_damage_chunk_bytes, "chunk_digest_mismatch"),
    "chunk_digest": (_damage_chunk_digest, "chunk_list_mismatch"),
    "blob_chunk_redirected": (_redirect_blob_chunk, "chunk_list_mismatch"),
    "blob_chunk_to_nowhere": (_blob_chunk_to_nowhere, "chunk_missing"),
    "chunk_list_digest": (_damage_chunk_list_digest, "chunk_list_mismatch"),
    "blob_digest": (_damage_blob_digest, "blob_digest_mismatch"),
}


def _read(cp: ckptdb.Checkpoint, how: str, got: bytearray) -> None:
    if how == "read":
        got += cp.read("big")
    elif how == "open":
        with cp.open("big") as fh:
            while piece := fh.read(100_000):
                got += piece
    else:
        for piece in cp.iter_bytes("big"):
            got += piece


def _assert_refused(
    cp: ckptdb.Checkpoint, how: str, data: bytes, reason: str, clean_prefix: int
) -> None:
    """Reading raises CorruptionError with ``reason``; what came out before is intact and
    ends before the first damaged byte (nothing at all for a read of all bytes)."""
    got = bytearray()
    with pytest.raises(errors.CorruptionError) as caught:
        _read(cp, how, got)
    assert caught.value.details["reason"] == reason, caught.value
    assert len(got) <= clean_prefix
    assert bytes(got) == data[: len(got)]
    if how == "read":
        assert not got


@pytest.mark.parametrize("how", ["read", "open", "iter"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["small", "large"])
def test_each_single_damage_is_refused_before_a_damaged_byte_comes_out(
    db_path: Path, size: int, damage: str, how: str
) -> None:
    """Damage after the checkpoint was loaded (its manifest checked and remembered): the
    read itself has to catch it."""
    data = _data(size)
    _commit(db_path, data)
    index = len(_chunks(db_path)) // 2
    damage_fn, reason = DAMAGE[damage]
    with ckptdb.open(db_path) as db:
        cp = db.current("ns")
        assert cp is not None
        clean_prefix = damage_fn(db_path, index)
        _assert_refused(cp, how, data, reason, clean_prefix)
        again = db.current("ns")  # the same handle, its remembered manifest
        assert again is not None
        _assert_refused(again, how, data, reason, clean_prefix)
    with ckptdb.open(db_path) as db:  # a new handle checks the manifest first
        if damage == "blob_digest":
            with pytest.raises(errors.CorruptionError) as caught:
                db.current("ns")
            assert caught.value.details["reason"] == "manifest_mismatch"
        else:
            cp = db.current("ns")
            assert cp is not None
            _assert_refused(cp, how, data, reason, clean_prefix)


@pytest.mark.parametrize("how", ["read", "open"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_each_single_damage_is_refused_in_a_key_scope(db_path: Path, damage: str, how: str) -> None:
    """Sealed chunks keep their own checks (they open under the key, bound to their
    address) on top of the same chain."""
    data = _data(LARGE)
    _commit(db_path, data, sealed=True)
    index = len(_chunks(db_path)) // 2
    damage_fn, reason = DAMAGE[damage]
    with _open(db_path, sealed=True) as db:
        cp = db.current(NS[True])
        assert cp is not None
        clean_prefix = damage_fn(db_path, index)
        _assert_refused(cp, how, data, reason, clean_prefix)


def _hash_helpers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("ckptdb-hash")}


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
def test_a_plaintext_read_hashes_once_a_sealed_one_checks_the_whole_too(
    db_path: Path, sealed: bool
) -> None:
    data = _data(LARGE)
    _commit(db_path, data, sealed=sealed)
    before = _hash_helpers()
    with _open(db_path, sealed) as db:
        cp = db.current(NS[sealed])
        assert cp is not None
        with cp.open("big") as fh:
            head = fh.read(1 << 20)
            # The whole-content hash runs on its own helper thread, when there is one.
            assert bool(_hash_helpers() - before) is sealed
            assert head + fh.read() == data
        assert cp.read("big") == data


def _forge_chunk_order(path: Path) -> int:
    """Swap two chunks of the blob and recompute the list digest: every chunk and the list
    stay consistent, only the whole-content digest can tell. Returns the last chunk's size."""
    blob_id, _, _ = _blob(path)
    chunks = _chunks(path)
    a, b = 1, len(chunks) // 2
    assert chunks[a][2] != chunks[b][2]
    for seq, chunk_id in ((chunks[a][0], chunks[b][1]), (chunks[b][0], chunks[a][1])):
        raw_sql(path, "UPDATE blob_chunk SET chunk_id = ? WHERE seq = ?", (chunk_id, seq))
    forged = [c[2] for c in chunks]
    forged[a], forged[b] = forged[b], forged[a]
    raw_sql(
        path,
        "UPDATE blob SET chunk_list_digest = ? WHERE blob_id = ?",
        (canonical.chunk_list_digest(forged), blob_id),
    )
    return chunks[-1][3]


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["small", "large"])
def test_the_full_checks_still_recompute_the_whole_content_digest(db_path: Path, size: int) -> None:
    """A forged chunk order in plaintext (which only matters to someone who can forge the
    manifest too) is left to the explicit full checks: ``Checkpoint.verify``, ``load``
    (which runs it) and ``verify`` (the full scan) all hash the whole content."""
    _commit(db_path, _data(size))
    _forge_chunk_order(db_path)
    with ckptdb.open(db_path) as db:
        cp = db.current("ns")
        assert cp is not None
        with pytest.raises(errors.CorruptionError) as caught:
            cp.verify()
        assert caught.value.details["reason"] == "blob_digest_mismatch"
        with pytest.raises(errors.CorruptionError) as caught:
            db.load("ns")
        assert caught.value.details["reason"] == "blob_digest_mismatch"
        report = db.verify()
        assert not report.ok
        assert "blob_corrupt" in {p.code for p in report.problems}


def test_intact_entries_read_back_whole_through_every_path(db_path: Path) -> None:
    small, large = _data(SMALL), _data(LARGE)
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"small": small, "large": large})
        cp = db.current("ns")
        assert cp is not None
        cp.verify()
        assert db.read_many([(cp, "small"), (cp, "large")]) == [small, large]
        for name, data in (("small", small), ("large", large)):
            assert cp.read(name) == data
            assert b"".join(cp.iter_bytes(name)) == data
            with cp.open(name) as fh:
                assert fh.read() == data


_PLACES = ("chunk_bytes", "chunk_digest", "blob_chunk", "chunk_size", "chunk_list_digest")


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    place=st.sampled_from(_PLACES),
    which=st.integers(min_value=0, max_value=10**6),
    offset=st.integers(min_value=0, max_value=10**6),
    piece=st.integers(min_value=1, max_value=3 * 1024 * 1024),
)
def test_any_single_damage_is_caught_and_only_intact_bytes_come_out(
    tmp_path: Path, place: str, which: int, offset: int, piece: int
) -> None:
    """One random damage in one of the places a read relies on, read through a stream in
    pieces of random size: a CorruptionError, and every byte handed out before it intact."""
    template = tmp_path / "template.ckpt"
    data = _data(LARGE)
    if not template.exists():
        _commit(template, data)
    path = tmp_path / "damaged.ckpt"
    shutil.copyfile(template, path)
    chunks = _chunks(path)
    seq, chunk_id, digest, size = chunks[which % len(chunks)]
    if place == "chunk_bytes":
        (stored,) = raw_sql(path, "SELECT data FROM chunk_data WHERE chunk_id = ?", (chunk_id,))[0]
        assert isinstance(stored, bytes)
        damaged = bytearray(stored)
        damaged[offset % len(damaged)] ^= 1 << (offset % 8)
        raw_sql(
            path, "UPDATE chunk_data SET data = ? WHERE chunk_id = ?", (bytes(damaged), chunk_id)
        )
    elif place == "chunk_digest":
        raw_sql(
            path,
            "UPDATE chunk SET digest = ? WHERE chunk_id = ?",
            (_flip_hex(digest, offset % 64), chunk_id),
        )
    elif place == "blob_chunk":
        other = chunks[(which + 1 + offset % (len(chunks) - 1)) % len(chunks)][1]
        raw_sql(path, "UPDATE blob_chunk SET chunk_id = ? WHERE seq = ?", (other, seq))
    elif place == "chunk_size":
        raw_sql(
            path,
            "UPDATE chunk SET size = ? WHERE chunk_id = ?",
            (size + 1 + offset % size, chunk_id),
        )
    else:
        _damage_chunk_list_digest(path, offset)
    with ckptdb.open(path) as db:
        cp = db.current("ns")
        assert cp is not None
        got = bytearray()
        with pytest.raises(errors.CorruptionError), cp.open("big") as fh:
            while chunk := fh.read(piece):
                got += chunk
        assert bytes(got) == data[: len(got)]
        assert len(got) < len(data)


def test_bench_large_quick(tmp_path: Path) -> None:
    """tools/bench_large.py runs in its quick mode and reports the ratios it exists for
    (the figures are its business, docs/performance.md holds them)."""
    report = run_tool(
        "bench_large", "--quick", "--size", "16M", "--dir", str(tmp_path), tmp=tmp_path
    )
    assert report["bytes"] == 16 * 1024 * 1024
    side = report["ckptdb"]
    assert isinstance(side, dict)
    for key in ("write_ratio", "read_verify_ratio", "read_verify_caller_sha256_ratio"):
        assert isinstance(side[key], float) and side[key] > 0
