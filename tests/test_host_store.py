"""The host store seam (issue 14, section 2): the HostStore contract, DatabaseHostStore over
a real database file, FileHostStore over a real directory, and the conformance kit -- run
against both shipped stores and against stores broken on purpose, to prove it notices."""

from __future__ import annotations

import doctest
import hashlib
import itertools
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from conftest import child_env, raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
import ckptdb.host_store
import ckptdb.testing.host_store as kit
from ckptdb import errors
from ckptdb.host_store import (
    MAX_KEY_CHARS,
    DatabaseHostStore,
    FileHostStore,
    HostStore,
    validate_key,
)

#: Keys a store must accept: any non-empty text without NUL or a lone surrogate, up to the
#: limit; kept short so examples stay fast.
KEYS = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=80
)
TYPED_LOCATION_ERRORS = (errors.LocationNotFoundError, errors.InvalidLocationError)


# --- factories: a new, empty store per call ------------------------------------------------


@pytest.fixture
def make_file_store(tmp_path: Path) -> Iterator[Callable[[], HostStore]]:
    numbers = itertools.count()
    yield lambda: FileHostStore(tmp_path / f"files-{next(numbers)}")


@pytest.fixture
def make_db_store(tmp_path: Path) -> Iterator[Callable[[], HostStore]]:
    numbers = itertools.count()
    with ExitStack() as stack:

        def make() -> HostStore:
            db = stack.enter_context(ckptdb.open(tmp_path / f"db-{next(numbers)}.ckpt"))
            return DatabaseHostStore(db, namespace_prefix="tenant-7/host/")

        yield make


@pytest.fixture
def files(tmp_path: Path) -> Iterator[FileHostStore]:
    with FileHostStore(tmp_path / "store") as store:
        yield store


@pytest.fixture
def dbstore(db: ckptdb.Database) -> DatabaseHostStore:
    return DatabaseHostStore(db, namespace_prefix="tenant-7/host/")


# --- the conformance kit against the shipped stores -------------------------------------


@pytest.mark.parametrize("check", kit.CHECKS, ids=lambda c: c.__name__)
def test_file_store_conforms(check: kit.Check, make_file_store: Callable[[], HostStore]) -> None:
    check(make_file_store)


@pytest.mark.parametrize("check", kit.CHECKS, ids=lambda c: c.__name__)
def test_database_store_conforms(check: kit.Check, make_db_store: Callable[[], HostStore]) -> None:
    check(make_db_store)


def test_both_stores_are_host_stores(files: FileHostStore, dbstore: DatabaseHostStore) -> None:
    assert isinstance(files, HostStore) and isinstance(dbstore, HostStore)
    assert not isinstance(object(), HostStore)


@pytest.mark.parametrize("module", [ckptdb.host_store, kit], ids=lambda m: m.__name__)
def test_docstring_examples_run(module: Any) -> None:
    result = doctest.testmod(module, raise_on_error=False)
    assert result.attempted > 0 and result.failed == 0


def test_the_kit_needs_no_pytest_at_import_time() -> None:
    code = (
        "import sys, ckptdb.testing.host_store\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', 'hypothesis'))\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=child_env()
    )
    assert proc.returncode == 0, proc.stderr


# --- the kit against stores broken on purpose --------------------------------------------


class MemoryStore:
    """A correct in-memory store whose locations look like nothing a parser would expect
    (slashes, '..', '@', Unicode): a kit that parsed locations would trip on them."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._counter = itertools.count()

    def _new_location(self, key: str) -> str:
        with self._lock:
            return f"\u2603/../@{next(self._counter)}:{len(key)}"

    def put(self, data: bytes, *, key: str) -> str:
        validate_key(key)
        data = ckptdb.host_store.validate_data(data)
        location = self._new_location(key)
        with self._lock:
            self._data[location] = data
        return location

    def get(self, location: str) -> bytes:
        ckptdb.host_store.validate_location(location)
        with self._lock:
            if location not in self._data:
                raise errors.LocationNotFoundError(f"nothing at {location!r}")
            return self._data[location]


class WrongBytes(MemoryStore):
    def get(self, location: str) -> bytes:
        data = super().get(location)
        return data[:-1] + bytes([data[-1] ^ 1]) if data else data


class KeyErrorOnMissing(MemoryStore):
    def get(self, location: str) -> bytes:
        return self._data[location]


class EmptyOnMissing(MemoryStore):
    def get(self, location: str) -> bytes:
        return self._data.get(location, b"")


class GenericNotFound(MemoryStore):
    """Raises a ckptdb error, but not the one the contract names (code not_found)."""

    def get(self, location: str) -> bytes:
        if location not in self._data:
            raise errors.NotFoundError("not here")
        return self._data[location]


class KeyIsIdentity(MemoryStore):
    def _new_location(self, key: str) -> str:
        return f"key:{key}"


class LaxKeys(MemoryStore):
    def put(self, data: bytes, *, key: str) -> str:
        location = self._new_location(key)
        self._data[location] = ckptdb.host_store.validate_data(data)
        return location


class RacyCounter(MemoryStore):
    """Reads and increments a counter without a lock, yielding in between."""

    def __init__(self) -> None:
        super().__init__()
        self._n = 0

    def _new_location(self, key: str) -> str:
        n = self._n
        time.sleep(0.002)  # another thread runs here and reads the same n
        self._n = n + 1
        return f"n{n}"


class MovesDuplicates(MemoryStore):
    """Deduplicates by content, but a duplicate put moves the bytes to a new location, so
    the first location stops working."""

    def put(self, data: bytes, *, key: str) -> str:
        with self._lock:
            for old, stored in list(self._data.items()):
                if stored == data:
                    del self._data[old]
        return super().put(data, key=key)


class Crashes(MemoryStore):
    def put(self, data: bytes, *, key: str) -> str:
        raise RuntimeError("backend exploded")


def test_a_correct_store_with_strange_locations_passes_every_check() -> None:
    report = kit.run_conformance(MemoryStore)
    assert report.ok, str(report)
    assert [r.name for r in report.results] == [c.__name__ for c in kit.CHECKS]
    report.raise_for_failures()  # nothing to raise


@pytest.mark.parametrize(
    ("store", "failing", "words"),
    [
        (WrongBytes, {"check_round_trip"}, "differ"),
        (KeyErrorOnMissing, {"check_missing_location"}, "KeyError"),
        (EmptyOnMissing, {"check_missing_location"}, "instead of raising"),
        (GenericNotFound, {"check_missing_location"}, "'not_found'"),
        (KeyIsIdentity, {"check_locations_are_opaque"}, "same location"),
        (LaxKeys, {"check_bad_input_rejected"}, "instead of raising InvalidStoreKeyError"),
        (RacyCounter, {"check_concurrent_puts"}, "same location"),
        (MovesDuplicates, {"check_same_bytes_twice"}, "'location_not_found'"),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_the_kit_detects_a_broken_store(
    store: Callable[[], HostStore], failing: set[str], words: str
) -> None:
    report = kit.run_conformance(store)
    assert not report.ok
    failed = {r.name for r in report.failures}
    assert failing <= failed, str(report)
    details = " ".join(r.detail for r in report.failures if r.name in failing)
    assert words in details, details
    with pytest.raises(kit.ConformanceFailure) as exc:
        report.raise_for_failures()
    assert all(name in str(exc.value) for name in failing)


def test_the_kit_detects_a_broken_store_under_pytest_too() -> None:
    with pytest.raises(kit.ConformanceFailure, match="KeyError"):
        kit.check_missing_location(KeyErrorOnMissing)


def test_a_crashing_store_fails_every_check_with_the_exception_named() -> None:
    report = kit.run_conformance(Crashes)
    assert len(report.failures) == len(kit.CHECKS)
    assert all("RuntimeError" in r.detail for r in report.failures), str(report)


def test_the_kit_reports_a_factory_that_makes_no_store() -> None:
    report = kit.run_conformance(object)  # type: ignore[arg-type]
    assert len(report.failures) == len(kit.CHECKS)
    assert "no put/get methods" in report.failures[0].detail


# --- the shared input rules ----------------------------------------------------------------


@given(KEYS)
def test_every_non_empty_key_without_nul_is_valid(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize(
    "key", ["", "a\x00", "k" * (MAX_KEY_CHARS + 1), "\udcff", None, b"k", 3, ["k"]]
)
def test_bad_keys_raise_invalid_store_key_saying_what_to_do(key: object) -> None:
    with pytest.raises(errors.InvalidStoreKeyError) as exc:
        validate_key(key)
    assert exc.value.code == "invalid_store_key" and isinstance(exc.value, errors.InvalidInputError)
    assert any(w in str(exc.value) for w in ("pass", "remove", "shorten", "decode", "must be"))


def test_error_classes_codes_and_exit_statuses() -> None:
    cases = [
        (errors.LocationNotFoundError, "location_not_found", errors.NotFoundError, 3),
        (errors.InvalidLocationError, "invalid_location", errors.InvalidInputError, 7),
        (errors.InvalidStoreKeyError, "invalid_store_key", errors.InvalidInputError, 7),
        (errors.LocationCorruptError, "location_corrupt", errors.CorruptionError, 5),
    ]
    for cls, code, base, status in cases:
        assert cls.code == code and issubclass(cls, base)
        assert cls("x").exit_status == status
        assert cls.__doc__


# --- DatabaseHostStore ---------------------------------------------------------------------


def test_database_store_commits_each_put_as_a_checkpoint(
    db: ckptdb.Database, dbstore: DatabaseHostStore
) -> None:
    location = dbstore.put(b"state", key="turn-12.json")
    assert location.startswith("ckptdb:tenant-7/host/turn-12.json@")
    current = db.current("tenant-7/host/turn-12.json")
    assert current is not None and location.endswith("@" + current.id)
    assert current.metadata == {"host_store_key": "turn-12.json"}
    assert current.read("data") == b"state"
    # A key that is not a plain label is hashed into the namespace; the key is kept.
    odd = dbstore.put(b"odd", key=" spaces and \u2603 ")
    namespace = dbstore.namespace_for(" spaces and \u2603 ")
    assert namespace.startswith("tenant-7/host/~") and odd.startswith(f"ckptdb:{namespace}@")
    odd_current = db.current(namespace)
    assert odd_current is not None and odd.endswith("@" + odd_current.id)
    assert odd_current.metadata["host_store_key"] == " spaces and \u2603 "


def test_database_store_duplicate_puts(db: ckptdb.Database, dbstore: DatabaseHostStore) -> None:
    first = dbstore.put(b"same", key="k")
    assert dbstore.put(b"same", key="k") == first  # idempotent commit on CURRENT
    other = dbstore.put(b"other", key="k")
    again = dbstore.put(b"same", key="k")  # a put came in between: a new checkpoint
    assert len({first, other, again}) == 3
    assert [dbstore.get(x) for x in (first, other, again)] == [b"same", b"other", b"same"]
    assert len(db.lineage(dbstore.namespace_for("k"))) == 3


def test_database_store_refuses_other_prefixes_and_forged_locations(
    db: ckptdb.Database,
) -> None:
    a = DatabaseHostStore(db, namespace_prefix="tenant-a/")
    b = DatabaseHostStore(db, namespace_prefix="tenant-b/")
    in_a = a.put(b"secret of a", key="k")
    with pytest.raises(errors.InvalidLocationError, match="outside this store's prefix"):
        b.get(in_a)
    # A's checkpoint id under B's prefix: the checkpoint exists, but not there.
    forged = in_a.replace("tenant-a/", "tenant-b/")
    with pytest.raises(errors.LocationNotFoundError):
        b.get(forged)
    # A checkpoint under the prefix that no put wrote is not a host store object either.
    other = db.commit("tenant-b/k", {"data": b"not from put"})
    with pytest.raises(errors.LocationNotFoundError, match="not put there"):
        b.get(f"ckptdb:tenant-b/k@{other.checkpoint_id}")
    assert a.get(in_a) == b"secret of a"


@pytest.mark.parametrize(
    "location",
    [
        "file:tenant-7/host/k@" + "0" * 64,
        "ckptdb:tenant-7/host/k",
        "ckptdb:tenant-7/host/k@" + "0" * 63,
        "ckptdb:tenant-7/host/k@" + "A" * 64,
        "ckptdb:tenant-7/host/@" + "0" * 64,
        "ckptdb:tenant-7/host/ k@" + "0" * 64,
        "ckptdb:tenant-7/host/~abc@" + "0" * 64,
        "ckptdb:tenant-7/hos@" + "0" * 64,
        "ckptdb:tenant-7/host/k@" + "0" * 64 + " ",
    ],
)
def test_database_store_parses_locations_strictly(
    dbstore: DatabaseHostStore, location: str
) -> None:
    with pytest.raises(errors.InvalidLocationError):
        dbstore.get(location)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=4096), key=KEYS)
def test_database_store_round_trips_any_bytes_under_any_key(
    dbstore: DatabaseHostStore, data: bytes, key: str
) -> None:
    location = dbstore.put(data, key=key)
    assert dbstore.get(location) == data
    assert dbstore.put(data, key=key) == location


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=300))
def test_database_store_answers_any_string_with_a_typed_error(
    dbstore: DatabaseHostStore, text: str
) -> None:
    with pytest.raises(TYPED_LOCATION_ERRORS):
        dbstore.get(text)
    with pytest.raises(TYPED_LOCATION_ERRORS):
        dbstore.get("ckptdb:tenant-7/host/" + text)


def test_database_store_damaged_bytes_raise_corruption(
    db: ckptdb.Database, db_path: Path, dbstore: DatabaseHostStore
) -> None:
    data = os.urandom(3000)  # incompressible: stored raw, so a flipped byte is a wrong byte
    location = dbstore.put(data, key="k")
    current = db.current("tenant-7/host/k")
    assert current is not None
    digest = current.entries["data"].digest
    (blob_id, inline) = raw_sql(
        db_path, "SELECT blob_id, inline_data FROM blob WHERE digest = ?", (digest,)
    )[0]
    assert isinstance(inline, bytes)
    damaged = bytearray(inline)
    damaged[len(damaged) // 2] ^= 0x01
    raw_sql(db_path, "UPDATE blob SET inline_data = ? WHERE blob_id = ?", (bytes(damaged), blob_id))
    with pytest.raises(errors.CorruptionError):
        dbstore.get(location)


def test_database_store_location_dies_only_when_the_checkpoint_is_deleted(
    db: ckptdb.Database, dbstore: DatabaseHostStore
) -> None:
    old, fallback, current = (dbstore.put(v, key="k") for v in (b"v1", b"v2", b"v3"))
    report = db.gc(ckptdb.RetentionPolicy(keep_last=1), namespaces=["tenant-7/host/k"])
    assert report.checkpoints_deleted == 1
    with pytest.raises(errors.LocationNotFoundError, match="not in this database"):
        dbstore.get(old)
    # CURRENT and its fallback are never collected: the latest put under a key survives.
    assert [dbstore.get(x) for x in (fallback, current)] == [b"v2", b"v3"]


@pytest.mark.parametrize("prefix", ["", " lead", "tab\there", "x" * 129, "e\u0301", None, 7])
def test_database_store_refuses_a_bad_prefix(db: ckptdb.Database, prefix: object) -> None:
    with pytest.raises(errors.InvalidInputError):
        DatabaseHostStore(db, namespace_prefix=prefix)  # type: ignore[arg-type]


def test_database_store_needs_a_database() -> None:
    with pytest.raises(errors.InvalidInputError, match=r"ckptdb\.Database"):
        DatabaseHostStore("x.ckpt", namespace_prefix="p/")  # type: ignore[arg-type]


# --- FileHostStore -------------------------------------------------------------------------


def test_file_store_writes_owner_only_files_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        with FileHostStore(tmp_path / "new") as store:
            location = store.put(b"x", key="k")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new" / location).stat().st_mode) == 0o600


def test_file_store_names_files_by_label_and_digest_and_leaves_no_temporaries(
    files: FileHostStore,
) -> None:
    location = files.put(b"abc", key="../../etc/passwd")
    assert location == "_._.._etc_passwd." + hashlib.sha256(b"abc").hexdigest()
    assert sorted(os.listdir(files.directory)) == [location]
    assert (Path(files.directory) / location).read_bytes() == b"abc"


def test_file_store_duplicate_puts(files: FileHostStore) -> None:
    first = files.put(b"same", key="turn 1")
    assert files.put(b"same", key="turn 1") == first
    assert files.put(b"same", key="turn?1") == first  # same label: same file, same bytes
    other = files.put(b"same", key="turn-2")
    assert other != first and files.get(other) == files.get(first) == b"same"


def test_file_store_fsyncs_the_file_before_the_rename_and_the_directory_after(
    files: FileHostStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        events.append("fsync dir" if target == os.path.realpath(files.directory) else "fsync file")
        real_fsync(fd)

    def rename(*args: Any, **kw: Any) -> None:
        events.append("rename")
        real_rename(*args, **kw)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    files.put(b"durable", key="k")
    assert events == ["fsync file", "rename", "fsync dir"]
    events.clear()
    files.put(b"durable", key="k")  # already there: no rewrite, but still made durable
    assert events == ["fsync file", "fsync dir"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "append"])
def test_file_store_damaged_bytes_raise_corruption_and_a_put_repairs(
    files: FileHostStore, damage: str
) -> None:
    data = bytes(range(256)) * 4
    location = files.put(data, key="k")
    path = Path(files.directory) / location
    stored = bytearray(path.read_bytes())
    if damage == "flip":
        stored[100] ^= 0x10
    elif damage == "truncate":
        del stored[-1]
    else:
        stored += b"!"
    path.write_bytes(bytes(stored))
    with pytest.raises(errors.LocationCorruptError) as exc:
        files.get(location)
    assert isinstance(exc.value, errors.CorruptionError) and exc.value.code == "location_corrupt"
    assert files.put(data, key="k") == location  # the damaged file is rewritten
    assert files.get(location) == data


@pytest.mark.parametrize(
    "location",
    [
        "../x",
        "/etc/passwd",
        "sub/k." + "0" * 64,
        "../k." + "0" * 64,
        "k." + "A" * 64,
        "k." + "0" * 63,
        ".tmp-0011223344556677",
        ".k." + "0" * 64,
        "-k." + "0" * 64,
        "k" * 65 + "." + "0" * 64,
        "k." + "0" * 64 + "\n",
    ],
)
def test_file_store_refuses_locations_it_never_returns(files: FileHostStore, location: str) -> None:
    with pytest.raises(errors.InvalidLocationError):
        files.get(location)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=300))
def test_file_store_answers_any_string_with_a_typed_error(files: FileHostStore, text: str) -> None:
    with pytest.raises(TYPED_LOCATION_ERRORS):
        files.get(text)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=4096), key=KEYS)
def test_file_store_round_trips_any_bytes_under_any_key(
    files: FileHostStore, data: bytes, key: str
) -> None:
    location = files.put(data, key=key)
    assert files.get(location) == data
    assert os.path.dirname(os.path.join(files.directory, location)) == files.directory


def test_file_store_refuses_a_symlinked_or_non_directory_store(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(errors.UnsafePathError, match="symlink"):
        FileHostStore(tmp_path / "link")
    (tmp_path / "plain").write_bytes(b"")
    with pytest.raises(errors.UnsafePathError, match="not a directory"):
        FileHostStore(tmp_path / "plain")
    with pytest.raises(errors.InvalidInputError, match="does not exist"):
        FileHostStore(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()


def test_file_store_never_follows_a_symlink_at_a_location(
    files: FileHostStore, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"outside the store")
    name = "k." + hashlib.sha256(b"outside the store").hexdigest()
    (Path(files.directory) / name).symlink_to(secret)
    with pytest.raises(errors.UnsafePathError, match="symlink"):
        files.get(name)
    with pytest.raises(errors.UnsafePathError, match="symlink"):
        files.put(b"outside the store", key="k")
    assert secret.read_bytes() == b"outside the store"


def test_file_store_refuses_a_fifo_at_a_location_without_hanging(files: FileHostStore) -> None:
    name = "k." + hashlib.sha256(b"x").hexdigest()
    os.mkfifo(Path(files.directory) / name)
    with pytest.raises(errors.UnsafePathError, match="not a regular file"):
        files.get(name)


def test_file_store_keeps_writing_where_it_was_opened(tmp_path: Path) -> None:
    with FileHostStore(tmp_path / "store") as store:
        # Swap the path for a symlink to elsewhere: the store holds the directory itself.
        (tmp_path / "store").rename(tmp_path / "moved")
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "store").symlink_to(tmp_path / "elsewhere")
        location = store.put(b"x", key="k")
        assert store.get(location) == b"x"
    assert (tmp_path / "moved" / location).exists()
    assert os.listdir(tmp_path / "elsewhere") == []


def test_file_store_missing_file_and_closed_store(files: FileHostStore) -> None:
    location = files.put(b"x", key="k")
    (Path(files.directory) / location).unlink()
    with pytest.raises(errors.LocationNotFoundError):
        files.get(location)
    files.close()
    files.close()
    with pytest.raises(errors.ClosedError):
        files.put(b"x", key="k")
    with pytest.raises(errors.ClosedError):
        files.get(location)


# --- locations outlive the process -----------------------------------------------------------


def test_locations_resolve_in_another_process(tmp_path: Path) -> None:
    with ckptdb.open(tmp_path / "db.ckpt") as db, FileHostStore(tmp_path / "files") as fs:
        in_db = DatabaseHostStore(db, namespace_prefix="p/").put(b"from the db", key="k")
        in_files = fs.put(b"from a file", key="k")
    code = (
        "import sys, ckptdb\n"
        "from ckptdb.host_store import DatabaseHostStore, FileHostStore\n"
        "db_path, dir_path, in_db, in_files = sys.argv[1:]\n"
        "with ckptdb.open(db_path) as db, FileHostStore(dir_path, create=False) as fs:\n"
        "    assert DatabaseHostStore(db, namespace_prefix='p/').get(in_db) == b'from the db'\n"
        "    assert fs.get(in_files) == b'from a file'\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(tmp_path / "db.ckpt"),
            str(tmp_path / "files"),
            in_db,
            in_files,
        ],
        capture_output=True,
        text=True,
        check=False,
        env=child_env(),
    )
    assert proc.returncode == 0, proc.stderr
