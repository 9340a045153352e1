"""Encryption at rest per key scope: sealed bytes, keyed addresses, missing and wrong keys,
tampering, rotation and crypto-shredding -- checked against the raw bytes of the file and
its WAL, never against ckptdb's own account of itself."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import disk_bytes, raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors

KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 132))


def _secret(tag: str, size: int = 40_000) -> bytes:
    """Text-like plaintext that compresses well (so zstd leaves long literal runs only if
    nothing seals it) with a marker that must never reach the disk."""
    line = f"MARKER-{tag}-customer-pii-ssn-123-45-6789;".encode()
    out = bytearray()
    n = 0
    while len(out) < size:
        out += line + str(n).encode() + b"\n"
        n += 1
    return bytes(out[:size])


def _assert_absent(path: Path, secret: bytes, tag: str) -> None:
    disk = disk_bytes(path)
    marker = f"MARKER-{tag}".encode()
    assert marker not in disk, f"plaintext marker of {tag} found on disk"
    digest = hashlib.sha256(secret)
    assert digest.digest() not in disk and digest.hexdigest().encode() not in disk


@pytest.fixture
def enc(db_path: Path) -> ckptdb.Database:
    db = ckptdb.open(db_path, keys={"a": KEY_A, "b": KEY_B})
    db.set_encryption("tenant-a/", key_id="a")
    db.set_encryption("tenant-b/", key_id="b")
    yield db
    db.close()


def test_sealed_round_trip_inline_chunked_and_staged(enc: ckptdb.Database, db_path: Path) -> None:
    small = b"tiny MARKER-small secret"
    medium = _secret("medium", 300_000)  # content-defined chunks, written in the commit
    large = os.urandom(1 << 20) + _secret("large", 5 << 20)  # > 4 MiB: staged as a stream
    ack = enc.commit(
        "tenant-a/t1",
        {"small": small, "medium": medium, "large": io.BytesIO(large)},
        metadata={"turn": 1},
    )
    cp = enc.load("tenant-a/t1").checkpoint
    assert cp.id == ack.checkpoint_id
    assert cp.read("small") == small and cp.read("medium") == medium
    assert b"".join(cp.iter_bytes("large")) == large
    for name, value in (("small", small), ("medium", medium)):
        digest = cp.entries[name].digest
        assert digest != hashlib.sha256(value).hexdigest()  # keyed, not the plain sha256
    for tag, value in (("medium", medium), ("large", large)):
        _assert_absent(db_path, value, tag)
    assert b"MARKER-small" not in disk_bytes(db_path)
    assert enc.verify().ok


def test_plaintext_never_reaches_file_or_wal_across_gc_export_and_reopen(
    enc: ckptdb.Database, db_path: Path, tmp_path: Path
) -> None:
    secrets = [_secret(f"turn{i}", 50_000 + i * 1000) for i in range(6)]
    for i, value in enumerate(secrets):
        enc.commit("tenant-a/chat", {"state.json": value, "n": str(i)})
        _assert_absent(db_path, value, f"turn{i}")  # during: before any WAL checkpoint
    enc.commit("plain/other", {"x": b"plaintext namespace"})
    enc.gc(ckptdb.RetentionPolicy(keep_last=2), grace=0)
    for i, value in enumerate(secrets):
        _assert_absent(db_path, value, f"turn{i}")
    with pytest.raises(errors.EncryptedScopeError):
        enc.export(tmp_path / "out.ckpt", namespaces=["tenant-a/chat"])
    enc.export(tmp_path / "plain.ckpt", namespaces=["plain/other"])
    enc.close()
    with ckptdb.open(db_path, keys={"a": KEY_A}) as again:
        assert again.load("tenant-a/chat").checkpoint.read("state.json") == secrets[-1]
    for i, value in enumerate(secrets):
        _assert_absent(db_path, value, f"turn{i}")


def test_identical_content_in_two_scopes_shares_nothing(enc: ckptdb.Database) -> None:
    value = _secret("shared", 100_000)
    enc.commit("tenant-a/x", {"v": value})
    enc.commit("tenant-b/x", {"v": value})
    enc.commit("plain/x", {"v": value})
    digests = {
        ns: enc.load(ns).checkpoint.entries["v"].digest
        for ns in ("tenant-a/x", "tenant-b/x", "plain/x")
    }
    assert len(set(digests.values())) == 3
    assert digests["plain/x"] == hashlib.sha256(value).hexdigest()
    # no chunk is shared between scopes: every chunk row belongs to exactly one scope
    rows = raw_sql(enc.path, "SELECT scope_id, count(*) FROM chunk GROUP BY scope_id")
    assert len(rows) == 3


def test_without_the_key_that_scope_fails_typed_and_others_work(
    enc: ckptdb.Database, db_path: Path
) -> None:
    enc.commit("tenant-a/t", {"v": _secret("a")})
    enc.commit("tenant-b/t", {"v": _secret("b")})
    enc.commit("plain/t", {"v": b"open"})
    enc.close()
    with ckptdb.open(db_path, keys={"b": KEY_B}) as db:
        with pytest.raises(errors.KeyUnavailableError) as caught:
            db.load("tenant-a/t").checkpoint.read("v")
        assert caught.value.code == "key_unavailable" and "'a'" in str(caught.value)
        before = disk_bytes(db_path)
        with pytest.raises(errors.KeyUnavailableError):
            db.commit("tenant-a/t", {"v": b"new"})
        with pytest.raises(errors.KeyUnavailableError):
            db.commit("tenant-a/new-thread", {"v": b"new"})
        assert disk_bytes(db_path) == before  # nothing written
        assert db.load("tenant-b/t").checkpoint.read("v") == _secret("b")
        assert db.load("plain/t").checkpoint.read("v") == b"open"
        report = db.verify()  # sealed bytes checked without the key
        assert report.ok and report.sealed_only == ["a"]


def test_a_wrong_key_is_refused_before_anything_is_written(
    enc: ckptdb.Database, db_path: Path
) -> None:
    enc.commit("tenant-a/t", {"v": b"secret"})
    enc.close()
    wrong = os.urandom(32)
    with ckptdb.open(db_path, keys={"a": wrong}) as db:
        before = disk_bytes(db_path)
        with pytest.raises(errors.KeyMismatchError) as caught:
            db.commit("tenant-a/t", {"v": b"other"})
        assert disk_bytes(db_path) == before
        with pytest.raises(errors.KeyMismatchError):
            db.load("tenant-a/t").checkpoint.read("v")
        for text in (str(caught.value), repr(caught.value.to_dict())):
            assert wrong.hex() not in text and repr(wrong) not in text


@pytest.mark.parametrize("bad", [b"short", "x" * 32, 32, bytes(33)])
def test_malformed_keys_are_typed_and_never_echoed(db_path: Path, bad: object) -> None:
    with ckptdb.open(db_path, keys={"a": bad}) as db:  # type: ignore[dict-item]
        with pytest.raises(errors.InvalidKeyError) as caught:
            db.set_encryption("t/", key_id="a")
        assert caught.value.code == "invalid_key"
        if isinstance(bad, bytes):
            assert bad.hex() not in str(caught.value) and repr(bad) not in str(caught.value)
        assert db.key_scopes() == []
    with pytest.raises(errors.InvalidKeyError):
        ckptdb.open(db_path, keys=42)  # type: ignore[arg-type]


def test_scope_conflicts(enc: ckptdb.Database) -> None:
    enc.commit("existing/ns", {"v": b"plain"})
    third = ckptdb.open(enc.path, keys={"c": KEY_B})
    with third, pytest.raises(errors.ScopeConflictError, match="already exist"):
        third.set_encryption("existing/", key_id="c")
    with pytest.raises(errors.KeyUnavailableError):
        enc.set_encryption("fresh/", key_id="not-given")
    with pytest.raises(errors.ScopeConflictError, match="overlaps"):
        enc.set_encryption("tenant-a/sub/", key_id="b")
    with pytest.raises(errors.ScopeConflictError, match="overlaps"):
        enc.set_encryption("tenant-", key_id="b")
    with pytest.raises(errors.ScopeConflictError, match="already encrypts"):
        enc.set_encryption("other/", key_id="a")
    again = enc.set_encryption("tenant-a/", key_id="a")  # idempotent
    assert again.key_generation == 1
    with pytest.raises(errors.InvalidKeyError):
        enc.set_encryption("x/", key_id="")
    with pytest.raises(errors.InvalidNamespaceError):
        enc.set_encryption("", key_id="a")
    assert [s.prefix for s in enc.key_scopes()] == ["tenant-a/", "tenant-b/"]


def test_a_key_provider_callable_is_asked_per_scope(db_path: Path) -> None:
    asked: list[str] = []

    def kms(key_id: str) -> bytes | None:
        asked.append(key_id)
        return KEY_A if key_id == "a" else None

    with ckptdb.open(db_path, keys=kms) as db:
        db.set_encryption("t/", key_id="a")
        db.commit("t/1", {"v": b"x"})
        db.commit("t/1", {"v": b"y"})
        assert db.load("t/1").checkpoint.read("v") == b"y"
    assert set(asked) == {"a"}


def _sealed_chunk_ids(path: Path, scope_key_id: str) -> list[int]:
    return [
        int(r[0])  # type: ignore[call-overload]
        for r in raw_sql(
            path,
            "SELECT c.chunk_id FROM chunk c JOIN key_scope s ON s.scope_id = c.scope_id"
            " WHERE s.key_id = ? ORDER BY c.chunk_id",
            (scope_key_id,),
        )
    ]


def test_a_flipped_sealed_byte_is_found_without_the_key_and_refused_with_it(
    enc: ckptdb.Database, db_path: Path
) -> None:
    enc.commit("tenant-a/t", {"v": _secret("v1", 60_000)})
    enc.commit("tenant-a/t", {"v": _secret("v2", 60_000)})
    enc.close()
    target = _sealed_chunk_ids(db_path, "a")[-1]
    raw_sql(
        db_path,
        "UPDATE chunk_data SET data = CAST(substr(data, 1, 20) || CASE WHEN"
        " substr(data, 21, 1) = x'ff' THEN x'00' ELSE x'ff' END || substr(data, 22) AS BLOB)"
        " WHERE chunk_id = ?",
        (target,),
    )
    with ckptdb.open(db_path) as keyless:
        report = keyless.verify()
        assert not report.ok and {p.code for p in report.problems} >= {"chunk_corrupt"}
    with ckptdb.open(db_path, keys={"a": KEY_A}) as db:
        with pytest.raises(errors.CorruptionError):
            db.load("tenant-a/t").checkpoint.read("v")
        result = db.load("tenant-a/t", fallback=True)
        # the damaged chunk belongs to the newest checkpoint only if it is not shared
        assert result.checkpoint.read("v") in (_secret("v1", 60_000), _secret("v2", 60_000))


_FLIP_BYTE_21 = (
    "CAST(substr({col}, 1, 20) || CASE WHEN substr({col}, 21, 1) = x'ff' THEN x'00'"
    " ELSE x'ff' END || substr({col}, 22) AS BLOB)"
)


def test_a_sealed_dedup_hit_stores_nothing_and_a_damaged_or_moved_copy_is_rewritten(
    enc: ckptdb.Database, db_path: Path
) -> None:
    inline = b"inline MARKER-inline secret " * 20
    medium = _secret("medium", 100_000)  # content-defined chunks, written in the commit
    large = os.urandom(1 << 20) + _secret("large", 4 << 20)  # staged as a stream

    def values() -> dict[str, object]:
        return {"inline": inline, "medium": medium, "large": io.BytesIO(large)}

    enc.commit("tenant-a/one", values())
    # Every chunk and the inline blob are dedup hits: each stored copy is checked (it opens
    # under the scope as the record of its address and holds our encoding), none rewritten.
    assert enc.commit("tenant-a/two", values()).bytes_stored == 0
    enc.close()
    x, y, z = _sealed_chunk_ids(db_path, "a")[:3]
    raw_sql(
        db_path,
        f"UPDATE chunk_data SET data = {_FLIP_BYTE_21.format(col='data')} WHERE chunk_id = ?",
        (x,),
    )
    for sql in (  # z gets y's bytes and sealed digest: a keyless check cannot tell
        "UPDATE chunk_data SET data = (SELECT data FROM chunk_data WHERE chunk_id = ?2)"
        " WHERE chunk_id = ?1",
        "UPDATE chunk SET sealed_digest = (SELECT sealed_digest FROM chunk WHERE chunk_id = ?2)"
        " WHERE chunk_id = ?1",
    ):
        raw_sql(db_path, sql, (z, y))
    raw_sql(
        db_path,
        f"UPDATE blob SET inline_data = {_FLIP_BYTE_21.format(col='inline_data')}"
        " WHERE chunk_count = 0 AND size = ? AND scope_id IS NOT NULL",
        (len(inline),),
    )
    with ckptdb.open(db_path, keys={"a": KEY_A, "b": KEY_B}) as db:
        with pytest.raises(errors.CorruptionError):
            db.load("tenant-a/one")
        # The same content committed again rewrites the damaged and the moved copies.
        assert db.commit("tenant-a/three", values()).bytes_stored > 0
        for ns in ("tenant-a/one", "tenant-a/two", "tenant-a/three"):
            cp = db.load(ns).checkpoint
            assert cp.read("inline") == inline and cp.read("medium") == medium
            assert b"".join(cp.iter_bytes("large")) == large
        assert db.verify().ok


def test_sealed_records_moved_between_rows_or_scopes_do_not_open(
    enc: ckptdb.Database, db_path: Path
) -> None:
    enc.commit("tenant-a/t", {"v": _secret("a1", 30_000), "w": _secret("a2", 30_000)})
    enc.commit("tenant-b/t", {"v": _secret("b1", 30_000)})
    enc.close()
    a_chunks = _sealed_chunk_ids(db_path, "a")
    b_chunks = _sealed_chunk_ids(db_path, "b")
    # Swap the bytes (and their sealed digests, so a keyless check cannot tell) of two
    # chunks of scope a, and give scope b's first chunk's bytes to scope a's last.
    x, y = a_chunks[0], a_chunks[-1]
    raw_sql(
        db_path,
        "UPDATE chunk_data SET data = (SELECT data FROM chunk_data WHERE chunk_id = ?2)"
        " WHERE chunk_id = ?1",
        (x, y),
    )
    raw_sql(
        db_path,
        "UPDATE chunk SET sealed_digest = (SELECT sealed_digest FROM chunk WHERE chunk_id = ?2)"
        " WHERE chunk_id = ?1",
        (x, y),
    )
    raw_sql(
        db_path,
        "UPDATE chunk_data SET data = (SELECT data FROM chunk_data WHERE chunk_id = ?2)"
        " WHERE chunk_id = ?1",
        (y, b_chunks[0]),
    )
    with ckptdb.open(db_path, keys={"a": KEY_A, "b": KEY_B}) as db:
        report = db.verify()
        assert not report.ok and "chunk_corrupt" in {p.code for p in report.problems}
        with pytest.raises(errors.CorruptionError):
            db.load("tenant-a/t")  # load verifies every byte it hands out


def test_plaintext_forged_into_an_encrypted_namespace_is_refused(
    enc: ckptdb.Database, db_path: Path
) -> None:
    enc.commit("tenant-a/t", {"v": b"sealed"})
    enc.close()
    # Someone with write access marks the namespace and its blob as plaintext.
    raw_sql(db_path, "PRAGMA foreign_keys=OFF; UPDATE namespace SET scope_id = NULL")
    raw_sql(db_path, "UPDATE blob SET scope_id = NULL")
    with ckptdb.open(db_path, keys={"a": KEY_A}) as db:
        with pytest.raises(errors.CorruptionError) as caught:
            db.load("tenant-a/t")
        assert caught.value.details.get("reason") == "scope_mismatch"


def test_rotation_rewraps_without_rewriting_and_old_wrapped_key_replay_fails(
    enc: ckptdb.Database, db_path: Path
) -> None:
    value = _secret("rot", 80_000)
    enc.commit("tenant-a/t", {"v": value})
    listing = "SELECT chunk_id, length(data), hex(substr(data, 1, 16)) FROM chunk_data ORDER BY 1"
    before_chunks = raw_sql(db_path, listing)
    ((old_wrapped, old_gen),) = raw_sql(
        db_path, "SELECT wrapped_key, key_generation FROM key_scope WHERE key_id = 'a'"
    )
    new_key = os.urandom(32)
    info = enc.rotate_key("a", new_key)
    assert info.key_generation == 2
    assert enc.load("tenant-a/t").checkpoint.read("v") == value  # this handle uses the new key
    assert raw_sql(db_path, listing) == before_chunks  # no data rewritten
    enc.close()
    with ckptdb.open(db_path, keys={"a": KEY_A}) as old, pytest.raises(errors.KeyMismatchError):
        old.load("tenant-a/t").checkpoint.read("v")
    with ckptdb.open(db_path, keys={"a": new_key}) as new:
        assert new.load("tenant-a/t").checkpoint.read("v") == value
    # Replaying the old wrapped key (and its generation) with the new key does not open.
    raw_sql(
        db_path,
        "UPDATE key_scope SET wrapped_key = ?, key_generation = ? WHERE key_id = 'a'",
        (old_wrapped, old_gen),
    )
    replayed = ckptdb.open(db_path, keys={"a": new_key})
    with replayed, pytest.raises(errors.KeyMismatchError):
        replayed.load("tenant-a/t").checkpoint.read("v")


def test_shred_leaves_no_wrapped_key_and_no_sealed_byte_in_file_or_wal(
    enc: ckptdb.Database, db_path: Path
) -> None:
    for i in range(3):
        enc.commit("tenant-a/t", {"v": _secret(f"s{i}", 70_000), "i": str(i)})
    enc.commit("tenant-a/u", {"v": _secret("u", 20_000)})
    enc.commit("tenant-b/t", {"v": _secret("keep", 50_000)})
    enc.pin("tenant-a/t", "keep-me")
    ((wrapped,),) = raw_sql(db_path, "SELECT wrapped_key FROM key_scope WHERE key_id = 'a'")
    samples = [
        bytes(r[0])  # type: ignore[arg-type]
        for r in raw_sql(
            db_path,
            "SELECT substr(d.data, 13, 48) FROM chunk_data d JOIN chunk c USING (chunk_id)"
            " JOIN key_scope s ON s.scope_id = c.scope_id WHERE s.key_id = 'a'",
        )
    ] + [
        bytes(r[0])  # type: ignore[arg-type]
        for r in raw_sql(
            db_path,
            "SELECT substr(b.inline_data, 13, 16) FROM blob b JOIN key_scope s"
            " ON s.scope_id = b.scope_id WHERE s.key_id = 'a' AND b.chunk_count = 0",
        )
    ]
    assert samples and isinstance(wrapped, bytes) and wrapped in disk_bytes(db_path)
    report = enc.shred_key("a")
    assert report.namespaces == ["tenant-a/t", "tenant-a/u"] and report.wal_truncated
    disk = disk_bytes(db_path)
    assert isinstance(wrapped, bytes) and wrapped not in disk
    for sample in samples:
        assert sample not in disk
    assert enc.load("tenant-b/t").checkpoint.read("v") == _secret("keep", 50_000)
    with pytest.raises(errors.KeyShreddedError):
        enc.commit("tenant-a/t", {"v": b"again"})
    with pytest.raises(errors.NamespaceNotFoundError):
        enc.load("tenant-a/t")
    (scope,) = [s for s in enc.key_scopes() if s.key_id == "a"]
    assert scope.shredded and scope.namespaces == 0
    (receipt,) = enc.receipts(kind="shred_key")
    assert receipt.body["key_id"] == "a" and receipt.body["checkpoints_deleted"] == 4
    assert "wrapped" not in str(receipt.body) and KEY_A.hex() not in str(receipt.body)
    assert enc.shred_key("a").namespaces == []  # idempotent
    assert enc.verify().ok


def test_a_scope_created_by_another_handle_is_not_missed(db_path: Path) -> None:
    early = ckptdb.open(db_path, keys={"a": KEY_A})
    early.commit("plain/x", {"v": b"1"})  # caches "no scopes"
    with ckptdb.open(db_path, keys={"a": KEY_A}) as other:
        other.set_encryption("t/", key_id="a")
    with pytest.raises(errors.ScopeChangedError) as caught:
        early.commit("t/1", {"v": b"MARKER-late secret"})
    assert caught.value.retryable
    early.commit("t/1", {"v": b"MARKER-late secret"})  # the retry seals it
    assert early.load("t/1").checkpoint.read("v") == b"MARKER-late secret"
    early.close()
    assert b"MARKER-late" not in disk_bytes(db_path)


def test_concurrent_grouped_commits_into_scopes(enc: ckptdb.Database, db_path: Path) -> None:
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(15):
                ns = f"tenant-{'ab'[n % 2]}/thread-{n}"
                enc.commit(ns, {"state": _secret(f"th{n}-{i}", 3000 + i), "i": str(i)})
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    for n in range(6):
        ns = f"tenant-{'ab'[n % 2]}/thread-{n}"
        assert enc.load(ns).checkpoint.read("state") == _secret(f"th{n}-14", 3014)
        _assert_absent(db_path, _secret(f"th{n}-14", 3014), f"th{n}-14")
    assert enc.verify().ok


def test_a_blob_reference_cannot_cross_scopes(enc: ckptdb.Database) -> None:
    ack = enc.commit("tenant-a/t", {"v": b"sealed value"})
    ref = enc.load("tenant-a/t").checkpoint.ref("v")
    with pytest.raises(errors.BlobMissingError):
        enc.commit("tenant-b/t", {"v": ref})
    with pytest.raises(errors.BlobMissingError):
        enc.commit("plain/t", {"v": ref})
    assert enc.commit("tenant-a/t2", {"v": ref}).checkpoint_id != ack.checkpoint_id


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(st.binary(max_size=70_000), min_size=1, max_size=4))
def test_any_bytes_round_trip_sealed(tmp_path: Path, values: list[bytes]) -> None:
    path = tmp_path / f"h{os.urandom(6).hex()}.ckpt"
    with ckptdb.open(path, keys={"a": KEY_A}) as db:
        db.set_encryption("t/", key_id="a")
        for i, value in enumerate(values):
            db.commit("t/x", {"v": value, "i": str(i)})
            cp = db.load("t/x").checkpoint
            assert cp.read("v") == value
            if value:
                assert cp.entries["v"].digest != hashlib.sha256(value).hexdigest()
        assert db.verify().ok


def _cli(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Any:
    from click.testing import CliRunner

    from ckptdb.cli import main

    result = CliRunner().invoke(main, list(args), catch_exceptions=False, env=env)
    assert result.exit_code == code, (result.exit_code, result.output, result.stderr)
    return result


def test_cli_takes_keys_from_a_file_or_an_environment_variable(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.ckpt")
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"a": KEY_A.hex()}))
    keys.chmod(0o644)
    refused = _cli("--keys-file", str(keys), "keys", "list", db, code=14)
    assert "chmod 600" in refused.stderr and KEY_A.hex() not in refused.output + refused.stderr
    keys.chmod(0o600)
    _cli("init", db)
    _cli("--keys-file", str(keys), "keys", "set", db, "t/", "--key-id", "a")
    src = tmp_path / "state.json"
    src.write_bytes(b'{"MARKER-cli": 1}')
    _cli("--keys-file", str(keys), "commit", db, "t/x", str(src))
    missing = _cli("cat", db, "t/x", "state.json", code=14)
    assert "key_unavailable" in missing.stderr
    env = {"MY_KEYS": json.dumps({"a": base64.b64encode(KEY_A).decode()})}
    shown = _cli("--keys-env", "MY_KEYS", "cat", db, "t/x", "state.json", env=env)
    assert shown.stdout_bytes == b'{"MARKER-cli": 1}'
    wrong = {"MY_KEYS": json.dumps({"a": KEY_B.hex()})}
    mismatch = _cli("--keys-env", "MY_KEYS", "cat", db, "t/x", "state.json", env=wrong, code=14)
    assert "key_mismatch" in mismatch.stderr and KEY_B.hex() not in mismatch.stderr
    listing = json.loads(_cli("keys", "list", db, "--json").stdout)
    assert listing[0]["key_id"] == "a" and "wrapped" not in json.dumps(listing)
    new = tmp_path / "new.json"
    new.write_text(json.dumps({"a": KEY_B.hex()}))
    new.chmod(0o600)
    _cli("--keys-file", str(keys), "keys", "rotate", db, "a", "--new-key-file", str(new))
    _cli("--keys-file", str(new), "cat", db, "t/x", "state.json")
    _cli("--keys-file", str(new), "keys", "shred", db, "a", code=7)  # needs --yes
    _cli("--keys-file", str(new), "keys", "shred", db, "a", "--yes")
    assert b"MARKER-cli" not in disk_bytes(Path(db))
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": "not a key"}')
    bad.chmod(0o600)
    garbled = _cli("--keys-file", str(bad), "keys", "list", db, code=14)
    assert "not a key" not in garbled.stderr


def test_a_host_store_under_an_encrypted_prefix_conforms_and_seals(db_path: Path) -> None:
    from ckptdb.host_store import DatabaseHostStore
    from ckptdb.testing.host_store import run_conformance

    opened: list[ckptdb.Database] = []

    def fresh_store() -> DatabaseHostStore:  # the kit wants a new, empty store each time
        db = ckptdb.open(db_path.with_name(f"kit{len(opened)}.ckpt"), keys={"a": KEY_A})
        opened.append(db)
        db.set_encryption("host/", key_id="a")
        return DatabaseHostStore(db, namespace_prefix="host/")

    try:
        report = run_conformance(fresh_store)
    finally:
        for handle in opened:
            handle.close()
    assert report.ok, report.failures
    with ckptdb.open(db_path, keys={"a": KEY_A}) as db:
        db.set_encryption("host/", key_id="a")
        store = DatabaseHostStore(db, namespace_prefix="host/main/")
        location = store.put(b"MARKER-host " * 100, key="doc-1")
        assert store.get(location) == b"MARKER-host " * 100
    assert b"MARKER-host" not in disk_bytes(db_path)


def test_sealed_metadata_opens_with_the_key_and_shows_sealed_without(db_path: Path) -> None:
    with ckptdb.open(db_path, keys={"a": KEY_A}) as db:
        scope = db.set_encryption("t/", key_id="a", metadata=True)
        assert scope.seal_metadata
        first = db.commit("t/x", {"v": b"1"}, metadata={"note": "MARKER-meta", "step": 1})
        again = db.commit("t/x", {"v": b"1"}, metadata={"note": "MARKER-meta", "step": 1})
        assert not again.created and again.checkpoint_id == first.checkpoint_id  # idempotent
        cp = db.load("t/x").checkpoint
        assert cp.metadata == {"note": "MARKER-meta", "step": 1}
        assert cp.metadata_json == '{"note":"MARKER-meta","step":1}'  # opened, canonical
        assert db.lineage("t/x")[0].metadata == {"note": "MARKER-meta", "step": 1}
        with pytest.raises(errors.InvalidMetadataError):
            db.commit("t/x", {"v": b"2"}, metadata={"ckptdb:sealed": 1})
    assert b"MARKER-meta" not in disk_bytes(db_path)
    (stored,) = raw_sql(db_path, "SELECT metadata FROM checkpoints")[0]
    assert isinstance(stored, str) and json.loads(stored).keys() == {"ckptdb:sealed"}
    with ckptdb.open(db_path) as keyless:
        (info,) = keyless.lineage("t/x")
        assert set(info.metadata) == {"ckptdb:sealed"}
        shown = keyless.get(info.id)
        assert shown.metadata_json == stored and json.loads(stored) == shown.metadata
        assert keyless.verify().ok  # ids are over what is stored: verifiable without the key
    # sealed metadata copied into a plaintext-metadata checkpoint row is caught (the id
    # covers the stored text), and a damaged seal does not open
    raw_sql(
        db_path,
        "UPDATE checkpoint SET metadata = replace(metadata, substr(json_extract(metadata,"
        " '$.\"ckptdb:sealed\".data'), 20, 4), 'AAAA')",
    )
    with ckptdb.open(db_path, keys={"a": KEY_A}) as db, pytest.raises(errors.CorruptionError):
        db.load("t/x")


def test_record_sealer_binds_row_context_and_scope(enc: ckptdb.Database) -> None:
    assert enc.record_sealer("plain/x") is None
    a = enc.record_sealer("tenant-a/x")
    b = enc.record_sealer("tenant-b/x")
    assert a is not None and b is not None and a.key_id == "a"
    sealed = a.seal(b"pending write MARKER", b"thread|ckpt|task|0")
    assert b"MARKER" not in sealed and sealed != a.seal(
        b"pending write MARKER", b"thread|ckpt|task|0"
    )
    assert a.open(sealed, b"thread|ckpt|task|0") == b"pending write MARKER"
    with pytest.raises(errors.CorruptionError):
        a.open(sealed, b"thread|ckpt|task|1")  # another row
    with pytest.raises(errors.CorruptionError):
        b.open(sealed, b"thread|ckpt|task|0")  # another scope
    flipped = bytearray(sealed)
    flipped[-1] ^= 1
    with pytest.raises(errors.CorruptionError):
        a.open(bytes(flipped), b"thread|ckpt|task|0")


def test_holds_same_accepts_only_an_authentic_copy_of_our_encoding() -> None:
    from ckptdb.store import crypto

    scope = crypto.Scope.unlocked(7, "a", KEY_A)
    other = crypto.Scope.unlocked(8, "a", KEY_A)
    raw = _secret("same", 9000)
    digest = scope.address(raw)
    codec_id, ours, _ = scope.encode(raw, digest)
    _, again, _ = scope.encode(raw, digest)  # another nonce: bytes differ, encoding same
    assert again != ours and scope.holds_same(codec_id, again, codec_id, ours, digest, len(raw))
    damaged = again[:20] + bytes([again[20] ^ 1]) + again[21:]
    raw_codec, raw_stored, _ = scope.encode(raw, digest, compress=False)
    _, as_blob, _ = scope.encode(raw, digest, blob=True)
    _, foreign, _ = other.encode(raw, digest)
    for stored_codec, stored, size in (
        (codec_id, damaged, len(raw)),  # does not open
        (codec_id, again, len(raw) - 1),  # bound to another size
        (codec_id, as_blob, len(raw)),  # an inline blob's record, not a chunk's
        (codec_id, foreign, len(raw)),  # another scope's record
        (raw_codec, raw_stored, len(raw)),  # another encoding: the caller decodes instead
        (float(codec_id), again, len(raw)),  # a damaged codec column
        (codec_id, bytearray(again), len(raw)),
    ):
        assert not scope.holds_same(stored_codec, stored, codec_id, ours, digest, size)
    assert not crypto.PLAINTEXT.holds_same(0, raw, 0, raw, hashlib.sha256(raw).hexdigest(), 9000)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=2000), cut=st.integers(min_value=0, max_value=2000))
def test_keyed_addresses_are_hmac_sha256(data: bytes, cut: int) -> None:
    import hmac

    from ckptdb.store import crypto

    scope = crypto.Scope.unlocked(1, "a", KEY_A)
    address_key = crypto._derive(KEY_A, b"ckptdb address key v1")
    expected = hmac.digest(address_key, data, "sha256").hex()
    assert scope.address(data) == expected
    incremental = scope.hasher()
    incremental.update(data[:cut])
    incremental.update(memoryview(data)[cut:])
    assert incremental.hexdigest() == expected
    assert scope.address(data) == expected  # the keyed prototype is never updated


@pytest.mark.parametrize(("column", "value"), [("key_generation", -5), ("scope_id", -3)])
def test_a_key_scope_row_out_of_range_is_corruption_and_other_namespaces_still_read(
    enc: ckptdb.Database, db_path: Path, column: str, value: int
) -> None:
    """A damaged page can hold integers the schema's CHECKs forbid (found by the corruption
    campaign: a key generation too large to bind as unsigned 64-bit was an OverflowError)."""
    import apsw

    enc.commit("tenant-a/t", {"v": _secret("range", 2000)})
    enc.commit("plain/t", {"v": b"plain"})
    enc.close()
    raw = apsw.Connection(str(db_path))
    try:
        raw.pragma("ignore_check_constraints", 1)
        raw.pragma("foreign_keys", 0)
        if column == "scope_id":  # the namespace must still name it
            raw.execute("UPDATE namespace SET scope_id = ? WHERE name = 'tenant-a/t'", (value,))
        raw.execute(f"UPDATE key_scope SET {column} = ? WHERE key_id = 'a'", (value,))
    finally:
        raw.close()
    with ckptdb.open(db_path, keys={"a": KEY_A, "b": KEY_B}) as db:
        assert db.current("plain/t").read("v") == b"plain"  # type: ignore[union-attr]
        with pytest.raises(errors.CorruptionError):
            db.current("tenant-a/t").read("v")  # type: ignore[union-attr]
        assert not db.verify().ok
