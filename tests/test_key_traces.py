"""Keys leave no traces: after the operation that retired it, no key material -- a wrapped
data key of an older generation, a shredded scope's records or metadata, a host key passed
in the wrong place -- survives in the file, its -wal or -shm, a free page or cell, or any
message, repr, detail or receipt; and a key file that is not a regular file is refused at
once. Checked on the raw bytes of real files, with a second real process where the claim is
about another process."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import disk_bytes, raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors, keyfile
from ckptdb.connection import open_connection
from ckptdb.store import scopes

KEY_A = bytes(range(32))
SUFFIXES = ("", "-wal", "-shm")


def _all_bytes(path: Path) -> bytes:
    """The file, its WAL and its shared-memory index: everything a copy of it would hold."""
    return b"".join(
        Path(str(path) + s).read_bytes() for s in SUFFIXES if Path(str(path) + s).exists()
    )


def _copy_now(path: Path, dest: Path) -> Path:
    """What an attacker copies while the database is in use: the three files, as they are."""
    for s in SUFFIXES:
        if Path(str(path) + s).exists():
            shutil.copyfile(str(path) + s, str(dest) + s)
    return dest


def _wrapped(path: Path, key_id: str = "a") -> bytes:
    ((wrapped,),) = raw_sql(path, "SELECT wrapped_key FROM key_scope WHERE key_id = ?", (key_id,))
    assert isinstance(wrapped, bytes) and len(wrapped) == 60
    return wrapped


def _in_other_process(code: str) -> None:
    """Run ``code`` in a fresh interpreter (a second process on the same file)."""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _create_scope_elsewhere(path: Path, key: bytes, *, metadata_marker: str | None = None) -> None:
    """Another process creates the file's first key scope ``t/`` (key id ``a``) and commits
    six checkpoints under it, each with a marker in its (plaintext) metadata -- between
    commits to a plaintext namespace, so the scope's rows share pages with rows that stay."""
    _in_other_process(
        f"""
import ckptdb
db = ckptdb.open({str(path)!r}, keys={{"a": bytes.fromhex({key.hex()!r})}})
db.set_encryption("t/", key_id="a")
for i in range(6):
    note = "{metadata_marker}-%d" % i
    db.commit("t/x", {{"v": b"value %d" % i * 500}}, metadata={{"note": note}})
    db.commit("plain/keep", {{"v": b"kept %d" % i}}, metadata={{"pad": "p" * 200}})
db.close()
"""
    )


# -- (a) rotation retires the old wrapped key ------------------------------------------------


@pytest.mark.parametrize("rotator", ["creator", "opened_before_the_scope_existed"])
def test_after_rotation_a_copy_holds_no_older_wrapped_key(tmp_path: Path, rotator: str) -> None:
    """A copy of the file + -wal + -shm taken right after ``rotate_key`` returned, together
    with the old (leaked) host key, must not yield the data key: no wrapped key of any older
    generation is left in it -- whether the rotating handle created the scope or was opened
    before another process created it (then it frees the rewritten cell itself)."""
    path = tmp_path / "db.ckpt"
    new_keys = [os.urandom(32) for _ in range(2)]
    if rotator == "creator":
        db = ckptdb.open(path, keys={"a": KEY_A})
        db.set_encryption("t/", key_id="a")
        for i in range(6):
            db.commit("t/x", {"v": b"value %d" % i * 500}, metadata={"note": f"n-{i}"})
    else:
        db = ckptdb.open(path, keys={"a": KEY_A})
        db.commit("plain/x", {"v": b"1"})
        _create_scope_elsewhere(path, KEY_A, metadata_marker="n")
    retired = [_wrapped(path)]
    try:
        for key in new_keys:
            db.rotate_key("a", key)
            copy = _copy_now(path, tmp_path / f"copy-{len(retired)}.ckpt")
            assert _wrapped(path) not in retired
            seen = _all_bytes(copy)
            for old in retired:
                assert old not in seen, "an older wrapped data key survives the rotation"
            assert _wrapped(path) in seen
            retired.append(_wrapped(path))
        receipts = db.receipts(kind="rotate_key")
        assert [r.body["key_generation"] for r in receipts] == [3, 2]
        assert all(r.body["wal_truncated"] is True for r in receipts)
        assert "wrapped" not in json.dumps([r.body for r in receipts])
    finally:
        db.close()
    # The copy is a working database that opens with the newest key only.
    with ckptdb.open(copy, keys={"a": new_keys[-1]}) as reopened:
        assert reopened.load("t/x").checkpoint.read("v") == b"value 5" * 500
    with ckptdb.open(copy, keys={"a": KEY_A}) as old, pytest.raises(errors.KeyMismatchError):
        old.load("t/x").checkpoint.read("v")


def test_a_replicated_file_keeps_its_wal_and_the_receipt_says_so(db_path: Path) -> None:
    """While Litestream manages a file ckptdb never restarts its WAL; the rotation is still
    done and its receipt tells that old frames may remain until Litestream restarts it."""
    with ckptdb.open(db_path, keys={"a": KEY_A}) as db:
        db.set_encryption("t/", key_id="a")
        db.commit("t/x", {"v": b"x" * 5000})
    # What Litestream creates in a file it replicates (a known companion of the schema).
    raw_sql(db_path, "CREATE TABLE _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER)")
    with ckptdb.open(db_path, keys={"a": KEY_A}) as db:
        db.commit("t/x", {"v": b"y" * 5000})
        new = os.urandom(32)
        db.rotate_key("a", new)
        assert os.path.getsize(str(db_path) + "-wal") > 0
        (receipt,) = db.receipts(kind="rotate_key")
        assert receipt.body["wal_truncated"] is False
        assert db.load("t/x").checkpoint.read("v") == b"y" * 5000


# -- (b) freed pages are zeroed by every handle ----------------------------------------------


@pytest.mark.parametrize("shredder", ["this_handle", "another_process"])
def test_a_handle_opened_before_another_process_created_the_scope_zeroes_what_it_frees(
    tmp_path: Path, shredder: str
) -> None:
    """The first key scope is created by another process after this handle opened; this
    handle then deletes the scope's checkpoints, and the scope is shredded. Their metadata
    must not survive in freed cells or pages of the file, its WAL or its -shm."""
    path = tmp_path / "db.ckpt"
    early = ckptdb.open(path, keys={"a": KEY_A})
    try:
        early.commit("plain/x", {"v": b"1"})
        _create_scope_elsewhere(path, KEY_A, metadata_marker="MARKER-meta")
        assert _all_bytes(path).count(b"MARKER-meta") >= 6
        wrapped = _wrapped(path)
        assert early.prune({"note": "MARKER-meta-1"}).checkpoints_deleted == 1
        assert early.drop_namespace("t/x", force=True).checkpoints_deleted == 5
        assert b"MARKER-meta" not in _all_bytes(path), "deleted metadata survives"
        if shredder == "this_handle":
            assert early.shred_key("a").wal_truncated
        else:
            _in_other_process(
                f"""
import ckptdb
with ckptdb.open({str(path)!r}, keys={{"a": bytes.fromhex({KEY_A.hex()!r})}}) as db:
    assert db.shred_key("a").wal_truncated
"""
            )
        seen = _all_bytes(path)
        assert b"MARKER-meta" not in seen, "metadata of the shredded scope survives"
        assert wrapped not in seen
        assert early.load("plain/keep").checkpoint.read("v") == b"kept 5"
    finally:
        early.close()
    assert b"MARKER-meta" not in _all_bytes(path)


def test_repr_of_scope_rows_and_scopes_holds_no_key_material(db_path: Path) -> None:
    with ckptdb.open(db_path, keys={"a": KEY_A}) as db:
        db.set_encryption("t/", key_id="a", metadata=True)
        db.commit("t/x", {"v": b"1"})
        wrapped = _wrapped(db_path)
        conn = open_connection(str(db_path), readonly=True)
        try:
            (row,) = scopes.all_rows(conn)
            keyring = scopes.Keyring({"a": KEY_A})
            scope = keyring.scope_for_namespace(conn, "t/x")
        finally:
            conn.close()
        texts = [repr(row), str(row), repr(scope), repr(keyring), repr(db.key_scopes())]
        for text in texts:
            for form in _forms(wrapped) + _forms(KEY_A):
                assert form not in text


# -- (c) a key in the wrong place is never echoed -------------------------------------------


def _forms(key: bytes) -> list[str]:
    """Every way the key could show up in a message."""
    return [
        key.hex(),
        key.hex().upper(),
        base64.b64encode(key).decode(),
        base64.b64encode(key).decode().rstrip("="),
        base64.urlsafe_b64encode(key).decode().rstrip("="),
        repr(key),
        repr(key)[2:-1],
        repr(bytearray(key)),
        key.decode("latin-1"),
    ]


_AS = {
    "bytes": lambda k: k,
    "bytearray": bytearray,
    "memoryview": memoryview,
    "hex": lambda k: k.hex(),
    "HEX": lambda k: k.hex().upper(),
    "base64": lambda k: base64.b64encode(k).decode(),
    "base64url": lambda k: base64.urlsafe_b64encode(k).decode().rstrip("="),
}


def _mixups(db: ckptdb.Database, path: str, k: Any, raw: bytes) -> list[Callable[[], object]]:
    """Calls that put a key (``k``: in some form) where a key id, a prefix or a flag
    belongs, or give a key of the wrong kind."""

    def opened_with(keys: Any) -> object:
        with ckptdb.open(path, keys=keys) as other:
            return other.load("t/x").checkpoint.read("v")

    def saver_put(encryption: Any) -> object:
        from langgraph.checkpoint.base import empty_checkpoint

        from ckptdb.integrations.langgraph import CkptdbSaver

        config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        saver = CkptdbSaver(db, encryption=encryption)
        return saver.put(config, empty_checkpoint(), {"source": "input", "step": 0}, {})

    return [
        lambda: db.rotate_key(k, "a"),  # arguments swapped
        lambda: db.rotate_key(k, raw),
        lambda: db.rotate_key("a", k if isinstance(k, str) else raw + b"!"),
        lambda: db.shred_key(k),
        lambda: db.set_encryption("p/", key_id=k),
        lambda: db.set_encryption(k, key_id="a"),
        lambda: db.set_encryption("p/", key_id="a", metadata=k),
        lambda: opened_with({"a": k if not isinstance(k, bytes) else k[:31]}),
        lambda: opened_with(lambda _kid: k if not isinstance(k, bytes) else k * 2),
        lambda: keyfile.parse_keys(json.dumps({_text(k, raw): "a"}), "test keys"),
        lambda: keyfile.parse_keys(json.dumps({_text(k, raw): _text(k, raw) + "0"}), "t"),
        lambda: saver_put(lambda _config: k),  # the LangGraph saver's key id per thread
    ]


def _text(k: Any, raw: bytes) -> str:
    return k if isinstance(k, str) else raw.hex()


@pytest.fixture(scope="module")
def mixup_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ckptdb.Database, str]]:
    path = str(tmp_path_factory.mktemp("mixups") / "db.ckpt")
    db = ckptdb.open(path, keys={"a": KEY_A})
    db.set_encryption("t/", key_id="a")
    db.commit("t/x", {"v": b"sealed"})
    yield db, path
    db.close()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    # A key with some entropy (as real keys have), so finding it on disk means it leaked.
    raw=st.binary(min_size=32, max_size=32).filter(lambda b: len(set(b)) >= 16),
    form=st.sampled_from(sorted(_AS)),
    call=st.integers(min_value=0, max_value=11),
)
def test_a_key_in_the_wrong_place_is_refused_typed_and_never_echoed(
    mixup_db: tuple[ckptdb.Database, str], raw: bytes, form: str, call: int
) -> None:
    db, path = mixup_db
    k = _AS[form](raw)
    before = disk_bytes(path)
    with pytest.raises(errors.CkptdbError) as caught:
        _mixups(db, path, k, raw)[call]()
    err = caught.value
    texts = [str(err), repr(err), repr(err.details), json.dumps(err.to_dict())]
    for text in texts:
        for shown in _forms(raw):
            assert shown not in text, (form, call, text)
    # Nothing was written, and no form of the key reached the file.
    after = _all_bytes(Path(path))
    for shown in _forms(raw):
        assert shown.encode("latin-1", "replace") not in after
    assert raw not in after
    if call not in (7, 8, 11):  # (a second handle; the saver's first use sets up its tables)
        assert disk_bytes(path) == before
    assert db.load("t/x").checkpoint.read("v") == b"sealed"


def test_a_key_id_shaped_like_a_key_works_and_is_never_printed(db_path: Path) -> None:
    """A key's sha256 fingerprint is a fair key id: it works through the whole life of a
    scope, and -- since ckptdb cannot tell it from a key written as hex -- no message shows
    it (the file and key_scopes() hold it: it is the host's name)."""
    kid = hashlib.sha256(KEY_A).hexdigest()
    new = os.urandom(32)
    with ckptdb.open(db_path, keys={kid: KEY_A}) as db:
        db.set_encryption("t/", key_id=kid)
        db.commit("t/x", {"v": b"fingerprinted"})
        db.rotate_key(kid, new)
        assert db.load("t/x").checkpoint.read("v") == b"fingerprinted"
    with ckptdb.open(db_path, keys={kid: KEY_A}) as old:
        with pytest.raises(errors.KeyMismatchError) as mismatch:
            old.load("t/x").checkpoint.read("v")
        with ckptdb.open(db_path) as keyless, pytest.raises(errors.KeyUnavailableError) as missing:
            keyless.load("t/x").checkpoint.read("v")
    with ckptdb.open(db_path, keys={kid: new}) as db:
        assert db.load("t/x").checkpoint.read("v") == b"fingerprinted"
        assert [s.key_id for s in db.key_scopes()] == [kid]
        assert db.shred_key(kid).checkpoints_deleted == 1
        with pytest.raises(errors.KeyShreddedError) as shredded:
            db.commit("t/y", {"v": b"1"})
    for err in (mismatch.value, missing.value, shredded.value):
        assert kid not in str(err) + repr(err.details) + json.dumps(err.to_dict())
        assert "shaped like a key" in str(err)


def test_the_cli_never_echoes_a_key_given_as_a_key_id(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ckptdb.cli import main

    path = str(tmp_path / "db.ckpt")
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"a": KEY_A.hex()}))
    keys.chmod(0o600)
    with ckptdb.open(path, keys={"a": KEY_A}) as db:
        db.set_encryption("t/", key_id="a")
    runner = CliRunner()
    for args in (
        ["keys", "shred", path, KEY_A.hex()],
        ["keys", "shred", path, KEY_A.hex(), "--yes"],
        ["keys", "rotate", path, KEY_A.hex(), "--new-key-file", str(keys)],
        ["keys", "set", path, "u/", "--key-id", base64.b64encode(KEY_A).decode()],
    ):
        result = runner.invoke(main, ["--keys-file", str(keys), *args])
        assert result.exit_code != 0
        out = result.output + result.stderr
        for shown in _forms(KEY_A):
            assert shown not in out, (args, out)


# -- (d) a key file that is not a regular file is refused at once ----------------------------


def _special(tmp_path: Path, kind: str) -> str:
    target = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(target, 0o600)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(target))
        server.close()  # the socket file stays
    elif kind == "directory":
        target.mkdir(mode=0o700)
    elif kind == "symlink_to_fifo":
        os.mkfifo(tmp_path / "real-fifo", 0o600)
        target.symlink_to(tmp_path / "real-fifo")
    else:
        return {"char_device": "/dev/null", "zero_device": "/dev/zero"}[kind]
    return str(target)


SPECIAL = ["fifo", "socket", "directory", "symlink_to_fifo", "char_device", "zero_device"]


@pytest.mark.parametrize(
    ("kind", "via"),
    [("fifo", "option"), ("fifo", "environment"), ("symlink_to_fifo", "option")],
)
def test_a_fifo_key_file_is_refused_at_once_by_a_cli_process(
    tmp_path: Path, kind: str, via: str
) -> None:
    """A real CLI process (a hang must not hang the test): opening a FIFO used to wait for a
    writer forever."""
    target = _special(tmp_path, kind)
    cli = [sys.executable, "-c", "from ckptdb.cli import main; main()"]
    args = ["keys", "list", str(tmp_path / "db.ckpt")]
    env = dict(os.environ)
    if via == "option":
        args = ["--keys-file", target, *args]
    else:
        env["CKPTDB_KEYS_FILE"] = target
    started = time.monotonic()
    result = subprocess.run(
        [*cli, *args], check=False, capture_output=True, text=True, env=env, timeout=60
    )
    assert time.monotonic() - started < 30
    assert result.returncode == 14, result.stderr
    assert "invalid_key" in result.stderr and target in result.stderr


@pytest.mark.parametrize("kind", [k for k in SPECIAL if "fifo" not in k])
@pytest.mark.parametrize("via", ["option", "environment"])
def test_every_special_key_file_is_refused_by_the_cli(tmp_path: Path, kind: str, via: str) -> None:
    from click.testing import CliRunner

    from ckptdb.cli import main

    target = _special(tmp_path, kind)
    args = ["keys", "list", str(tmp_path / "db.ckpt")]
    env = {}
    if via == "option":
        args = ["--keys-file", target, *args]
    else:
        env["CKPTDB_KEYS_FILE"] = target
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 14, result.output
    assert "invalid_key" in result.stderr and target in result.stderr


@pytest.mark.parametrize("kind", [k for k in SPECIAL if "fifo" not in k])
def test_read_key_file_refuses_special_files_typed(tmp_path: Path, kind: str) -> None:
    with pytest.raises(errors.InvalidKeyError) as caught:
        keyfile.read_key_file(_special(tmp_path, kind))
    assert "regular file" in str(caught.value) or "socket" in str(caught.value)


def test_read_key_file_reads_a_regular_owner_only_file(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"a": KEY_A.hex(), "b": base64.b64encode(KEY_A).decode()}))
    path.chmod(0o600)
    assert keyfile.read_key_file(str(path)) == {"a": KEY_A, "b": KEY_A}


def test_a_deeply_nested_key_file_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    path.chmod(0o600)
    with pytest.raises(errors.InvalidKeyError):
        keyfile.read_key_file(str(path))
