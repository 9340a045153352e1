"""Every kind of bad input: a typed error with a stable code, and nothing written.

- entry name absolute, '..', NUL, control char, too long, not NFC -> invalid_entry_name
- one name used as file and as directory                        -> invalid_entry_name
- namespace empty, control char, padded, too long               -> invalid_namespace
- metadata too big, not JSON, NaN, deep, bad keys                 -> invalid_metadata
- entry value of unknown type, symlink, directory, missing file -> invalid_entry
- expect_current not a checkpoint id                             -> invalid_reference
- file that is not SQLite                                        -> not_a_database
- another application's SQLite database                          -> not_ckptdb
- truncated database                                             -> truncated_database
- database written by a newer ckptdb                             -> schema_too_new
- applied migration edited since                                 -> migration_checksum_mismatch
- directory or missing path                                      -> bad_database_file
- a URL (s3://) where a file path belongs; an unreachable postgresql:// -> invalid_input; io_error
"""

from __future__ import annotations

import io
import os
import sqlite3
import struct
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import all_files_digest, file_digest, raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import cli, errors, validation

BAD_NAMES = [
    "",
    "/etc/passwd",
    "../escape",
    "a/../../b",
    "a/./b",
    "a//b",
    "a/",
    ".",
    "..",
    "nul\x00byte",
    "tab\tname",
    "new\nline",
    "del\x7f",
    "back\\slash",
    "x" * 1025,
    ("s" * 256) + "/ok",
    "e\u0301",  # not NFC
    "line\u2028sep",
]


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _state(db: ckptdb.Database) -> tuple[Any, ...]:
    return raw_sql(
        db.path,
        "SELECT (SELECT count(*) FROM checkpoint), (SELECT count(*) FROM blob),"
        " (SELECT count(*) FROM chunk), (SELECT count(*) FROM pointer_history),"
        " (SELECT count(*) FROM namespace)",
    )[0]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_entry_names_are_refused_and_nothing_is_written(db: ckptdb.Database, name: str) -> None:
    db.commit("ns", {"ok": b"1"})
    before = _state(db)
    with pytest.raises(errors.InvalidNameError) as exc:
        db.commit("ns", {"fine": b"2", name: b"evil"})
    assert exc.value.code == "invalid_entry_name"
    assert exc.value.message
    assert _state(db) == before


def test_name_used_as_file_and_directory_is_refused(db: ckptdb.Database) -> None:
    with pytest.raises(errors.InvalidNameError, match="directory"):
        db.commit("ns", {"a": b"1", "a/b": b"2"})
    assert db.current("ns") is None


def test_non_str_name_is_refused(db: ckptdb.Database) -> None:
    with pytest.raises(errors.InvalidNameError):
        db.commit("ns", {b"bytes-name": b"1"})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    "namespace", ["", " lead", "trail ", "ctl\x01", "x" * 257, "e\u0301", 42, None]
)
def test_bad_namespaces_are_refused(db: ckptdb.Database, namespace: Any) -> None:
    with pytest.raises(errors.InvalidNamespaceError) as exc:
        db.commit(namespace, {"a": b"1"})
    assert exc.value.code == "invalid_namespace"
    assert _state(db) == (0, 0, 0, 0, 0)


@pytest.mark.parametrize(
    "metadata",
    [
        {"blob": "x" * (300 * 1024)},
        {"nan": float("nan")},
        {"inf": float("inf")},
        {"obj": object()},
        {1: "int key"},
        {"set": {1, 2}},
        {"bytes": b"raw"},
        ["not", "a", "dict"],
        {"deep": _nested(70)},
        {"surrogate": "\ud800"},
    ],
)
def test_bad_metadata_is_refused(db: ckptdb.Database, metadata: Any) -> None:
    with pytest.raises(errors.InvalidMetadataError) as exc:
        db.commit("ns", {"a": b"1"}, metadata=metadata)
    assert exc.value.code == "invalid_metadata"
    assert _state(db) == (0, 0, 0, 0, 0)


def test_metadata_limit_is_configurable(db_path: Path) -> None:
    with ckptdb.open(db_path, max_metadata_bytes=100) as db:
        with pytest.raises(errors.InvalidMetadataError, match="limit is 100"):
            db.commit("ns", {"a": b"1"}, metadata={"k": "v" * 200})
        db.commit("ns", {"a": b"1"}, metadata={"k": "v"})


@pytest.mark.parametrize("value", [12, 1.5, None, ["list"], {"dict": 1}, io.StringIO("text")])
def test_bad_entry_values_are_refused(db: ckptdb.Database, value: Any) -> None:
    with pytest.raises(errors.InvalidEntryError) as exc:
        db.commit("ns", {"a": value})
    assert exc.value.code == "invalid_entry"
    assert _state(db) == (0, 0, 0, 0, 0)


def test_symlink_and_special_file_entries_are_refused(db: ckptdb.Database, tmp_path: Path) -> None:
    target = tmp_path / "secret"
    target.write_bytes(b"secret")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(errors.InvalidEntryError, match="symlink"):
        db.commit("ns", {"a": link})
    with pytest.raises(errors.InvalidEntryError, match="regular file"):
        db.commit("ns", {"a": tmp_path})
    with pytest.raises(errors.InvalidEntryError):
        db.commit("ns", {"a": tmp_path / "missing"})
    with pytest.raises(errors.InvalidEntryError):
        ckptdb.Entry(b"x", media_type="bad\ntype")
    assert _state(db) == (0, 0, 0, 0, 0)


def test_a_file_that_changes_while_read_is_refused(tmp_path: Path) -> None:
    """A file is stored as it was at one moment. The database's own WAL is a file that
    deterministically changes while a commit reads it (staging its chunks appends to it):
    refused, and reading is bounded by the size at open, so it cannot run forever."""
    with ckptdb.open(tmp_path / "c.ckpt", chunk_size=64 * 1024) as db:
        db.commit("ns", {"big": os.urandom(1024 * 1024)})
        wal = Path(db.path + "-wal")
        assert wal.stat().st_size > 64 * 1024
        before = _state(db)
        with pytest.raises(errors.InvalidEntryError, match="changed while it was being read"):
            db.commit("ns", {"wal": wal})
        assert _state(db)[:2] == before[:2]  # no checkpoint, no pointer move
        assert db.verify().ok


def test_expect_current_must_be_an_id(db: ckptdb.Database) -> None:
    with pytest.raises(errors.InvalidReferenceError):
        db.commit("ns", {"a": b"1"}, expect_current="abc")


@given(st.text(max_size=40))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_name_validation_accepts_only_safe_relative_paths(name: str) -> None:
    try:
        ok = validation.entry_name(name)
    except errors.InvalidNameError:
        return
    assert ok == name
    assert not name.startswith("/")
    assert all(seg not in ("", ".", "..") for seg in name.split("/"))
    assert "\x00" not in name and "\\" not in name
    assert all(ord(c) >= 0x20 and c != "\x7f" for c in name)


# -- files that are not (usable) ckptdb databases ------------------------------------------


def _assert_refused_unchanged(path: Path, error: type[errors.CkptdbError], code: str) -> None:
    before = all_files_digest(path)
    with pytest.raises(error) as exc:
        ckptdb.open(path)
    assert exc.value.code == code
    assert all_files_digest(path) == before


def test_not_sqlite_file_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"just some text, definitely not a database\n" * 10)
    _assert_refused_unchanged(path, errors.NotADatabaseError, "not_a_database")


def test_foreign_sqlite_database_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.execute("INSERT INTO users VALUES ('ada')")
    conn.commit()
    conn.close()
    _assert_refused_unchanged(path, errors.NotCkptdbError, "not_ckptdb")


def test_foreign_database_with_application_id_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    _assert_refused_unchanged(path, errors.NotCkptdbError, "not_ckptdb")


def test_truncated_database_is_refused_unchanged(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        for i in range(30):
            db.commit("ns", {"blob": os.urandom(20_000)}, metadata={"i": i})
    data = db_path.read_bytes()
    db_path.write_bytes(data[: len(data) // 2])
    _assert_refused_unchanged(db_path, errors.TruncatedDatabaseError, "truncated_database")
    db_path.write_bytes(data[:60])
    _assert_refused_unchanged(db_path, errors.TruncatedDatabaseError, "truncated_database")


def test_newer_schema_is_refused_before_any_ddl(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"a": b"1"})
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    before = all_files_digest(db_path)
    with pytest.raises(errors.SchemaTooNewError) as exc:
        ckptdb.open(db_path)
    assert "99" in str(exc.value) and "Upgrade ckptdb" in str(exc.value)
    assert all_files_digest(db_path) == before


def test_a_newer_schema_names_the_release_that_wrote_it(db_path: Path) -> None:
    # The file records which release applied each migration: the error says which one
    # the user needs, for the core set and for an integration's set alike.
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"a": b"1"})
    conn = sqlite3.connect(db_path)
    conn.execute(
        "INSERT INTO ckptdb_migration VALUES ('core', 99, 'future', ?, 0, '9.1.0')", ("ab" * 32,)
    )
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(errors.SchemaTooNewError) as exc:
        ckptdb.open(db_path)
    assert "Upgrade ckptdb to 9.1.0 (the release that wrote it)" in str(exc.value)
    assert exc.value.details["required_version"] == "9.1.0"


def test_a_newer_integration_set_is_too_new_not_a_changed_schema(tmp_path: Path) -> None:
    from ckptdb.integrations.langgraph import CkptdbSaver

    path = tmp_path / "lg.ckpt"
    CkptdbSaver(path).close()
    conn = sqlite3.connect(path)
    latest = conn.execute(
        "SELECT max(version) FROM ckptdb_migration WHERE migration_set = 'langgraph'"
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO ckptdb_migration VALUES ('langgraph', ?, 'future', ?, 0, '9.2.0')",
        (latest + 1, "cd" * 32),
    )
    conn.commit()
    conn.close()
    before = all_files_digest(path)
    with pytest.raises(errors.SchemaTooNewError) as exc:
        ckptdb.open(path)
    assert "langgraph schema version" in str(exc.value) and "9.2.0" in str(exc.value)
    assert all_files_digest(path) == before


def test_edited_migration_is_detected(db_path: Path) -> None:
    with ckptdb.open(db_path) as db:
        db.commit("ns", {"a": b"1"})
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE ckptdb_migration SET checksum = ? WHERE version = 1", ("ab" * 32,))
    conn.commit()
    conn.close()
    before = file_digest(db_path)
    with pytest.raises(errors.MigrationChecksumError) as exc:
        ckptdb.open(db_path)
    assert exc.value.code == "migration_checksum_mismatch"
    assert file_digest(db_path) == before


def test_directory_and_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(errors.DatabaseFileError) as exc:
        ckptdb.open(tmp_path)
    assert exc.value.code == "bad_database_file"
    with pytest.raises(errors.DatabaseFileError):
        ckptdb.open(tmp_path / "missing.ckpt", create=False)
    assert not (tmp_path / "missing.ckpt").exists()
    with pytest.raises(errors.DatabaseFileError):
        ckptdb.open(tmp_path / "missing.ckpt", readonly=True)


@pytest.mark.parametrize(
    ("url", "code", "status"),
    [
        # A PostgreSQL URL is a database to connect to (none listens here): refused as
        # storage that cannot be reached, never as a relative path, the password unsaid.
        ("postgresql://app@db.invalid/ckpt", "io_error", 8),
        ("postgres://app:secret@localhost:1/ckpt", "io_error", 8),
        ("s3://bucket/agents.ckpt", "invalid_input", 7),
    ],
)
def test_a_url_is_not_taken_for_a_file_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, code: str, status: int
) -> None:
    # Before, a URL was a relative path: "cannot create .../postgresql:/app@db.internal/ckpt:
    # its directory does not exist", which sends a user looking for a directory.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "postgresql:").mkdir()  # even where the URL would name a creatable path
    with pytest.raises(errors.CkptdbError) as exc:
        ckptdb.open(url)
    assert exc.value.code == code
    assert "secret" not in str(exc.value)
    assert ("PostgreSQL" if url.startswith("postgres") else "URL") in str(exc.value)
    assert [p.name for p in tmp_path.rglob("*")] == ["postgresql:"]  # nothing created
    result = CliRunner().invoke(cli.main, ["log", url, "ns"])
    assert result.exit_code == status, result.output
    assert "secret" not in result.output


def test_empty_file_left_by_a_crash_is_initialized(tmp_path: Path) -> None:
    path = tmp_path / "empty.ckpt"
    path.write_bytes(b"")
    with ckptdb.open(path) as db:
        db.commit("ns", {"a": b"1"})
    header = path.read_bytes()[:100]
    assert struct.unpack(">I", header[68:72])[0] == 0x636B7074


def test_bad_open_options_are_refused(db_path: Path) -> None:
    with pytest.raises(errors.InvalidInputError):
        ckptdb.open(db_path, migrate="sometimes")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputError):
        ckptdb.open(db_path, synchronous="fast")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputError):
        ckptdb.open(db_path, chunk_size=10)
    with pytest.raises(errors.InvalidInputError):
        ckptdb.open(db_path, page_size=1000)
    assert not db_path.exists()


@pytest.mark.parametrize("call", ["export", "import_file"])
def test_a_path_sqlite_cannot_name_is_refused_before_anything_is_written(
    db: ckptdb.Database, tmp_path: Path, call: str
) -> None:
    # SQLite names files in UTF-8: a path with a byte that is not UTF-8 (a lone surrogate in
    # Python's str) escaped from the driver as an untyped UnicodeEncodeError (found by
    # test_fuzz's CLI fuzzer: `ckptdb export DB $'\xff'`).
    db.commit("ns", {"a": b"x"})
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ckptdb.errors.InvalidInputError, match="not UTF-8"):
        getattr(db, call)(str(tmp_path / "out\udcff.ckpt"))
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    result = CliRunner().invoke(cli.main, ["export", str(db.path), "\udcff"])
    assert result.exit_code == 7, result.output
