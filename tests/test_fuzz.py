"""Hostile-input fuzzing (hypothesis): every input a caller controls gets a typed error or
a correct result, and a refused call leaves the database as it was.

Covered: entry names, namespaces, metadata and entry values given to ``commit``; checkout
targets (relative/absolute paths, symlinks in the parent chain or as the target, files
and non-empty directories in the way); import sources of the ``json-dir``, ``fs-store`` and
``state-dir`` importers (garbage and wrong-typed JSON, symlinks, traversal names); and
random command lines of the ``ckptdb`` CLI built from its real commands and options plus
garbage.

Budget: each test runs a modest number of examples so the file stays well under a minute
on 2 cores. ``CKPTDB_FUZZ_EXAMPLES=N`` runs N examples per test instead (e.g. 2000 for a
long soak).

Each bug the fuzzers found has a deterministic reproduction below (``test_*`` after
"minimal reproductions"), kept as a regression test; the generators keep producing its
trigger (NaN, lone surrogates, deep nesting, files in a checkout's parent chain, ...).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import stat
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import raw_sql
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import canonical, errors
from ckptdb.cli import EXIT_IMPORT_SKIPPED, main
from ckptdb.importers import run_import

CHUNK = 64 * 1024


def budget(default: int) -> int:
    """Examples per test: the default, or CKPTDB_FUZZ_EXAMPLES."""
    return int(os.environ.get("CKPTDB_FUZZ_EXAMPLES", default))


def fuzz(default: int) -> Any:
    """Settings of a fuzz test."""
    return settings(
        max_examples=budget(default),
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
        ],
    )


# -- shared checks --------------------------------------------------------------------------


def logical_state(path: str | Path) -> tuple[Any, ...]:
    """Everything a refused call must leave alone (rows of every table that matters, and
    the pointer digests)."""
    return tuple(
        raw_sql(
            path,
            "SELECT (SELECT count(*) FROM checkpoint), (SELECT count(*) FROM blob),"
            " (SELECT count(*) FROM blob_ref), (SELECT count(*) FROM pointer_history),"
            " (SELECT count(*) FROM namespace), (SELECT count(*) FROM pin),"
            " (SELECT count(*) FROM retention),"
            " (SELECT group_concat(digest) FROM (SELECT digest FROM pointer ORDER BY 1))",
        )[0]
    )


def file_bytes(path: str | Path) -> tuple[Any, Any]:
    """The database file's digest and its WAL's size and modification time (any write
    changes them; the WAL of a long-open handle is too big to hash per example). The -shm
    is scratch memory and is left out."""
    main = Path(path)
    wal = Path(f"{path}-wal")
    digest = hashlib.sha256(main.read_bytes()).hexdigest() if main.exists() else None
    wal_state = (wal.stat().st_size, wal.stat().st_mtime_ns) if wal.exists() else None
    return digest, wal_state if wal_state and wal_state[0] else None


def assert_typed(exc: BaseException) -> None:
    assert isinstance(exc, errors.CkptdbError), f"untyped {type(exc).__name__}: {exc}"
    assert exc.code and isinstance(exc.code, str)
    assert exc.message and str(exc)


@contextlib.contextmanager
def expect_typed_or_success() -> Iterator[list[BaseException]]:
    """Collect a CkptdbError; let anything else fail the test."""
    caught: list[BaseException] = []
    try:
        yield caught
    except errors.CkptdbError as exc:
        assert_typed(exc)
        caught.append(exc)


# -- hostile text -------------------------------------------------------------------------

SPECIAL = [
    "/", "\\", ".", "..", "\x00", "\t", "\n", "\r", "\x1b", "\x7f", "\x85", "\u2028",
    "\u2029", "\ud800", "\udfff", "e\u0301", "\u00e9", "\u212b", "\ufeff", " ", "~", ":",
    "*", "?", "\u202e", "\uffff", "\U0001f600", "%2e%2e", "C:", "//", "./", "../",
]  # fmt: skip


def hostile_text(max_pieces: int = 6) -> st.SearchStrategy[str]:
    """Text assembled from arbitrary characters, control characters, separators, traversal
    pieces, decomposed accents and lone surrogates."""
    categories = ["Cc", "Zl", "Zp", "Mn", "Cf", "Cs"]
    pieces = st.one_of(
        st.text(max_size=10),
        st.sampled_from(SPECIAL),
        st.text(st.characters(categories=categories), max_size=3),
    )
    text = st.lists(pieces, max_size=max_pieces).map("".join)
    return st.one_of(
        text,
        st.lists(text, min_size=1, max_size=4).map("/".join),
        text.map(lambda s: unicodedata.normalize("NFD", s)),
        st.integers(1, 1100).map(lambda n: "n" * n),
        st.integers(240, 270).map(lambda n: "dir/" + "é" * (n // 2)),
    )


def plain_name() -> st.SearchStrategy[str]:
    """Names that are valid entry names (so that a test also exercises success)."""
    segment = st.text(
        st.characters(categories=["L", "N"], include_characters="-_. "), min_size=1, max_size=8
    ).filter(lambda s: s not in (".", "..") and unicodedata.normalize("NFC", s) == s)
    return st.lists(segment, min_size=1, max_size=3).map("/".join)


# -- commit: names, namespaces, metadata, values ---------------------------------------------


def _json_roundtrip(value: Any) -> Any:
    return json.loads(canonical.dumps(value))


def _commit_and_check(
    db: ckptdb.Database,
    namespace: Any,
    entries: Any,
    expected: Callable[[], dict[str, bytes]] | None,
    metadata: Any = None,
    *,
    compare_files: bool = True,
    **kw: Any,
) -> errors.CkptdbError | None:
    """Commit; on success the data must round-trip exactly, on a typed error nothing may
    have changed (rows always; the file's bytes when nothing had to be staged)."""
    before_rows = logical_state(db.path)
    before_files = file_bytes(db.path)
    with expect_typed_or_success() as caught:
        ack = db.commit(namespace, entries, metadata=metadata, **kw)
    if caught:
        assert logical_state(db.path) == before_rows
        if compare_files:
            assert file_bytes(db.path) == before_files
        return caught[0]  # type: ignore[return-value]
    cp = db.get(ack.checkpoint_id)
    assert cp.namespace == namespace
    assert db.current(namespace).id == ack.checkpoint_id  # type: ignore[union-attr]
    want = expected() if expected is not None else {}
    assert set(cp.entries) == set(want)
    for name, data in want.items():
        assert cp.read(name) == data
    assert cp.metadata == _json_roundtrip(dict(metadata or {}))
    return None


@fuzz(150)
@given(data=st.data())
def test_fuzz_entry_names_and_namespaces(db: ckptdb.Database, data: st.DataObject) -> None:
    text = hostile_text()
    namespace = data.draw(st.one_of(text, plain_name(), st.integers(), st.none(), st.binary()))
    names = data.draw(
        st.lists(
            st.one_of(text, plain_name(), st.integers(), st.none(), st.binary(max_size=4)),
            max_size=4,
        )
    )
    entries = {name: f"value of {name!r}".encode() for name in names}
    _commit_and_check(db, namespace, entries, lambda: entries)


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)


def hostile_metadata() -> st.SearchStrategy[Any]:
    bad_scalars = st.one_of(
        st.just(float("nan")),
        st.just(float("inf")),
        st.just(-math.inf),
        st.binary(max_size=4),
        st.builds(set),
        st.builds(object),
        st.integers(4400, 4500).map(lambda n: 10**n),
        st.just(300_000).map("x".__mul__),
        st.complex_numbers(max_magnitude=10),
        st.just("\ud800"),
        st.just({"\udc80": 1}),
    )
    scalars = st.one_of(JSON_SCALARS, bad_scalars)
    keys = st.one_of(st.text(max_size=10), st.integers(), st.none(), st.tuples(st.integers()))
    nested = st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.tuples(inner),
            st.dictionaries(keys, inner, max_size=4),
        ),
        max_leaves=12,
    )

    def deep(n: int) -> Any:
        value: Any = 1
        for _ in range(n):
            value = {"k": value}
        return value

    return st.one_of(
        st.dictionaries(st.text(max_size=10), nested, max_size=5),
        st.dictionaries(keys, nested, max_size=3),
        st.integers(60, 70).map(lambda n: {"deep": deep(n)}),
        st.integers(1, 3).map(lambda n: {"big": "y" * (n * 100_000)}),
        nested,  # not even a mapping, most of the time
    )


@fuzz(150)
@given(data=st.data())
def test_fuzz_metadata(db: ckptdb.Database, data: st.DataObject) -> None:
    metadata = data.draw(hostile_metadata())
    entries = {"state": b"s"}
    _commit_and_check(db, "ns", entries, lambda: entries, metadata=metadata)


class OddStream:
    """A file-like object that returns what the test tells it to."""

    def __init__(self, pieces: list[Any]) -> None:
        self.pieces = list(pieces)

    def read(self, n: int = -1) -> Any:
        return self.pieces.pop(0) if self.pieces else b""


def entry_values(tmp: Path) -> st.SearchStrategy[tuple[Any, bytes | None]]:
    """(value, expected bytes or None when a refusal is expected/allowed)."""
    files = tmp / "values"
    files.mkdir(exist_ok=True)
    (files / "f.bin").write_bytes(b"file bytes")
    (files / "big.bin").write_bytes(b"B" * (CHUNK + 3))
    with contextlib.suppress(FileExistsError):
        (files / "link").symlink_to(files / "f.bin")
    text = hostile_text()
    return st.one_of(
        st.binary(max_size=200).map(lambda b: (b, b)),
        st.binary(max_size=200).map(lambda b: (bytearray(b), b)),
        st.binary(max_size=200).map(lambda b: (memoryview(b), b)),
        text.map(lambda s: (s, s.encode("utf-8", "surrogatepass"))),
        st.binary(max_size=200).map(lambda b: (io.BytesIO(b), b)),
        st.just((Path(files / "f.bin"), b"file bytes")),
        st.just((Path(files / "big.bin"), b"B" * (CHUNK + 3))),
        st.just((Path(files / "link"), None)),
        st.just((Path(files), None)),
        st.just((Path(files / "missing"), None)),
        st.just((str(files / "f.bin"), str(files / "f.bin").encode())),  # a str is content
        st.just((io.StringIO("text mode"), None)),
        st.lists(
            st.one_of(st.binary(max_size=5), st.integers(), st.text(max_size=3)), max_size=3
        ).map(lambda p: (OddStream(p), _stream_result(p))),
        st.one_of(
            st.integers(),
            st.floats(),
            st.none(),
            st.lists(st.integers(), max_size=2),
            st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
            st.builds(object),
        ).map(lambda v: (v, None)),
        st.tuples(
            st.binary(max_size=20),
            st.one_of(st.none(), hostile_text(2)),
            st.one_of(st.none(), hostile_text(2)),
        ).map(lambda t: (_entry_or_error(*t), t[0])),
    )


def _stream_result(pieces: list[Any]) -> bytes | None:
    """What an OddStream must commit as: its bytes up to the first empty read (EOF), or
    None (a refusal) when it hands out something that is not bytes before that."""
    out = b""
    for piece in pieces:
        if not isinstance(piece, bytes):
            return None
        if not piece:
            break
        out += piece
    return out


def _entry_or_error(value: bytes, media_type: str | None, schema: str | None) -> Any:
    try:
        return ckptdb.Entry(value, media_type=media_type, schema_pin=schema)
    except errors.CkptdbError as exc:
        assert_typed(exc)
        return exc  # committing the error object itself is another bad value


def fuzz_entry_values(db: ckptdb.Database, tmp_path: Path, data: st.DataObject) -> None:
    drawn = data.draw(st.lists(entry_values(tmp_path), min_size=1, max_size=3))
    entries = {f"e{i}": value for i, (value, _) in enumerate(drawn)}
    expected = {f"e{i}": want for i, (_, want) in enumerate(drawn)}
    # Staging a large entry before a later one is refused writes harmless orphan chunks
    # (the design allows it); then only the rows are compared.
    stages = any(isinstance(v, Path) and v.name == "big.bin" for v in entries.values())
    refused = _commit_and_check(
        db,
        "values",
        entries,
        lambda: {k: v for k, v in expected.items() if v is not None},
        compare_files=not stages,
    )
    if refused is None:
        assert all(v is not None for v in expected.values()), (entries, "accepted")


@fuzz(120)
@given(data=st.data())
def test_fuzz_entry_values(db: ckptdb.Database, tmp_path: Path, data: st.DataObject) -> None:
    fuzz_entry_values(db, tmp_path, data=data)


# -- checkout targets ---------------------------------------------------------------------


def _snapshot(root: Path, skip: Path | None = None) -> dict[str, Any]:
    """Type, mode, content or link target of everything under root (links not followed)."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if skip is not None and (p == skip or skip in p.parents):
                continue
            st_ = os.lstat(p)
            if stat.S_ISLNK(st_.st_mode):
                out[str(p)] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st_.st_mode):
                out[str(p)] = ("dir", stat.S_IMODE(st_.st_mode))
            elif stat.S_ISREG(st_.st_mode):
                out[str(p)] = ("file", p.read_bytes(), stat.S_IMODE(st_.st_mode))
            else:
                out[str(p)] = ("other", stat.S_IFMT(st_.st_mode))
    return out


@pytest.fixture
def source_db(tmp_path: Path) -> Iterator[tuple[ckptdb.Database, dict[str, dict[str, bytes]]]]:
    """A database with two generations of nested entries (one chunked)."""
    db = ckptdb.open(tmp_path / "src.ckpt", chunk_size=CHUNK)
    first = {"a.txt": b"alpha", "sub/b.bin": bytes(range(256)), "sub/deep/c": b"c" * 70000}
    second = {"a.txt": b"alpha 2", "z": b""}
    ids = {
        db.commit("ns", first).checkpoint_id: first,
        db.commit("ns", second).checkpoint_id: second,
    }
    try:
        yield db, ids
    finally:
        db.close()


SEGMENT_KINDS = ["dir", "dir", "dir", "missing", "symlink_dir", "file"]
LEAF_KINDS = [
    "missing", "empty_dir", "nonempty_dir", "file", "symlink_dir", "symlink_file",
    "dangling_symlink", "fifo",
]  # fmt: skip


def segment_name() -> st.SearchStrategy[str]:
    """A path segment, sometimes longer than a file name may be."""
    names = st.one_of(
        st.sampled_from(["a", "b", "é", "e\u0301", " sp ", "-x", ".hidden", "..", "."]),
        st.text(
            st.characters(exclude_characters="/\x00", exclude_categories=["Cs"]),
            min_size=1,
            max_size=12,
        ),
    )
    return st.one_of(names, st.integers(200, 300).map("L".__mul__))


def fuzz_checkout_targets(
    source_db: tuple[ckptdb.Database, dict[str, dict[str, bytes]]],
    tmp_path: Path,
    data: st.DataObject,
) -> None:
    db, by_id = source_db
    chain = data.draw(
        st.lists(st.tuples(segment_name(), st.sampled_from(SEGMENT_KINDS)), max_size=3)
    )
    leaf_name = data.draw(segment_name())
    leaf_kind = data.draw(st.sampled_from(LEAF_KINDS))
    relative = data.draw(st.booleans())
    force = data.draw(st.booleans())
    fallback = data.draw(st.booleans())
    ref = data.draw(
        st.sampled_from(["ns@current", "ns@fallback", "ns~1", *by_id, "nope@current", "zz"])
    )

    box = Path(os.path.realpath(tmp_path)) / f"box-{os.urandom(4).hex()}"
    outside, work = box / "outside", box / "work"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(b"secret")
    work.mkdir()
    here = work
    with contextlib.suppress(OSError):  # names the filesystem refuses end the chain early
        for name, kind in chain:
            if name in (".", ".."):
                here = here / name
                continue
            p = here / name
            if kind == "dir":
                p.mkdir(exist_ok=True)
            elif kind == "symlink_dir" and not p.exists():
                p.symlink_to(outside / "dir")
            elif kind == "file" and not p.exists():
                p.write_bytes(b"in the way")
            here = p
        target = here / leaf_name
        if leaf_name not in (".", "..") and not os.path.lexists(target):
            if leaf_kind == "empty_dir":
                target.mkdir()
            elif leaf_kind == "nonempty_dir":
                target.mkdir()
                (target / "keep.txt").write_bytes(b"keep")
            elif leaf_kind == "file":
                target.write_bytes(b"a file")
            elif leaf_kind == "symlink_dir":
                target.symlink_to(outside / "dir")
            elif leaf_kind == "symlink_file":
                target.symlink_to(outside / "secret.txt")
            elif leaf_kind == "dangling_symlink":
                target.symlink_to(outside / "nowhere")
            elif leaf_kind == "fifo":
                os.mkfifo(target)
    target = here / leaf_name
    resolved = Path(os.path.abspath(target))  # ckptdb's own (lexical) reading of the path
    assume(resolved == work or work in resolved.parents)
    outside_before = _snapshot(outside)
    rest_before = _snapshot(box, skip=resolved)
    target_before = _snapshot(resolved) if os.path.isdir(resolved) else None
    lexists_before = os.path.lexists(resolved)

    cwd = os.getcwd()
    try:
        if relative:
            os.chdir(work)
            given_target: Any = os.path.relpath(target, work)
        else:
            given_target = target
        with expect_typed_or_success() as caught:
            result = db.checkout(ref, given_target, force=force, fallback=fallback)
    finally:
        os.chdir(cwd)

    assert _snapshot(outside) == outside_before, "wrote outside the target"
    assert _snapshot(box, skip=resolved) == rest_before, "changed something beside the target"
    leftovers = [p for p in _snapshot(box) if ".ckptdb-" in p]
    assert not leftovers, leftovers
    if caught:
        assert os.path.lexists(resolved) == lexists_before
        if target_before is not None and not os.path.islink(resolved):
            assert _snapshot(resolved) == target_before
        return
    # Success: the target is a real directory holding exactly the checkpoint, privately.
    chain_links = [p for p in [resolved, *resolved.parents] if p.is_symlink()]
    assert not chain_links, f"wrote through a symlink: {chain_links}"
    assert not (lexists_before and not resolved.is_dir()), "replaced a non-directory"
    assert result.checkpoint_id in by_id
    want = by_id[result.checkpoint_id]
    got = {str(p.relative_to(resolved)): p for p in resolved.rglob("*") if not p.is_dir()}
    assert {k: v.read_bytes() for k, v in got.items()} == want
    for p in got.values():
        assert stat.S_IMODE(os.lstat(p).st_mode) == 0o600 and not p.is_symlink()


@fuzz(100)
@given(data=st.data())
def test_fuzz_checkout_targets(
    source_db: tuple[ckptdb.Database, dict[str, dict[str, bytes]]],
    tmp_path: Path,
    data: st.DataObject,
) -> None:
    fuzz_checkout_targets(source_db, tmp_path, data=data)


# -- import sources -------------------------------------------------------------------------


def json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        JSON_SCALARS,
        st.text(st.characters(), max_size=8),
        st.just(float("nan")),
        st.just(float("inf")),
        st.just("\ud800"),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=10,
    )


def document_bytes(required: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[bytes]:
    """Garbage, arbitrary JSON, or an object with the required fields (each present,
    missing or of the wrong type) plus arbitrary extra fields; deeply nested a third of
    the time."""
    value = json_values()
    fields = st.fixed_dictionaries(
        {},
        optional={k: st.one_of(s, value) for k, s in required.items()},
    )
    obj = st.tuples(fields, st.dictionaries(st.text(max_size=6), value, max_size=3)).map(
        lambda t: {**t[1], **t[0]}
    )
    encoded = st.one_of(obj, value).map(lambda v: json.dumps(v).encode())
    out = st.one_of(encoded, st.binary(max_size=60), st.just(b""), st.just(b"\xff\xfe{}"))
    deep = st.integers(1000, 5000).map(lambda n: b"[" * n + b"]" * n)
    return st.integers(0, 2).flatmap(lambda k: deep if k == 0 else out)


def _import_and_check(db: ckptdb.Database, kind: str, source: Path) -> None:
    before = logical_state(db.path)
    with expect_typed_or_success() as caught:
        report = run_import(db, kind, str(source))
    if caught:
        assert logical_state(db.path) == before or kind == "json-dir"
    else:
        for item in report.skipped:
            assert item.code and item.detail
        for item in report.imported:
            if item.checkpoint_id is not None:
                db.get(item.checkpoint_id).verify()
    assert db.verify().ok


ID = st.text("0123456789abcdef", min_size=64, max_size=64)
FILE_NAME = st.one_of(
    st.sampled_from(["a.json", "b.json", ".tmp.json", "x.txt", "..json", "CURRENT"]),
    st.text(st.characters(exclude_characters="/\x00", exclude_categories=["Cs"]), min_size=1,
            max_size=10).map(lambda s: s + ".json"),
)  # fmt: skip


def _plant(root: Path, name: str, data: bytes, link_to: Path | None) -> None:
    with contextlib.suppress(OSError):
        path = root / name
        if link_to is not None:
            path.symlink_to(link_to)
        else:
            path.write_bytes(data)


def fuzz_json_dir_sources(db: ckptdb.Database, tmp_path: Path, data: st.DataObject) -> None:
    src = tmp_path / f"docs-{os.urandom(4).hex()}"
    src.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text('{"checkpointId": "secret"}')
    required = {
        "checkpointId": st.one_of(st.sampled_from(["a", "b", "../x", "a/b", ""]), st.text()),
        "runId": st.one_of(st.sampled_from(["run", " run", "r\x00"]), st.text()),
        "createdAt": st.sampled_from(["2026-01-01T00:00:00Z", "yesterday", "", "2026-13-01"]),
        "checkpointDigest": st.one_of(ID, st.just("sha256:" + "0" * 64)),
    }
    for _ in range(data.draw(st.integers(0, 4))):
        name = data.draw(FILE_NAME)
        body = data.draw(document_bytes(required))
        if data.draw(st.booleans()) and body.startswith(b"{"):
            # make the digest right about half the time, so documents get imported
            with contextlib.suppress(ValueError):
                doc = json.loads(body)
                doc.pop("checkpointDigest", None)
                doc["checkpointDigest"] = hashlib.sha256(canonical.dumps(doc).encode()).hexdigest()
                body = json.dumps(doc).encode()
                name = f"{doc.get('checkpointId')}.json" if data.draw(st.booleans()) else name
        link = secret if data.draw(st.integers(0, 9)) == 0 else None
        _plant(src, name, body, link)
    _import_and_check(db, "json-dir", src)


@fuzz(60)
@given(data=st.data())
def test_fuzz_json_dir_sources(db: ckptdb.Database, tmp_path: Path, data: st.DataObject) -> None:
    fuzz_json_dir_sources(db, tmp_path, data=data)


def _fs_store(root: Path, data: st.DataObject) -> None:
    (root / "checkpoints").mkdir(parents=True)
    ids = data.draw(st.lists(ID, min_size=1, max_size=3, unique=True))
    value = json_values()
    for index, cid in enumerate(ids):
        directory = root / "checkpoints" / cid
        (directory / "files").mkdir(parents=True)
        inventory = []
        for _ in range(data.draw(st.integers(0, 3))):
            content = data.draw(st.binary(max_size=30))
            digest = hashlib.sha256(content).hexdigest()
            if data.draw(st.integers(0, 4)) == 0:
                digest = data.draw(ID)  # a file that does not match its digest
            (directory / "files" / digest).write_bytes(content)
            item = {
                "logical_name": data.draw(st.one_of(st.text(max_size=5), value)),
                "relative_path": data.draw(st.one_of(plain_name(), hostile_text(3), value)),
                "schema_id": data.draw(st.one_of(st.just("state"), value)),
                "schema_version": data.draw(st.one_of(st.just("1"), value)),
                "content_digest": digest,
                "byte_len": data.draw(st.one_of(st.just(len(content)), value)),
                "blob_path": data.draw(st.sampled_from([f"files/{digest}", "../../x", None])),
            }
            inventory.append(item)
        manifest = {
            "checkpoint_id": cid if data.draw(st.integers(0, 5)) else data.draw(ID),
            "brain_id": data.draw(st.one_of(st.just("brain"), hostile_text(2))),
            "epoch": data.draw(value),
            "generation": index + 1,
            "file_inventory": data.draw(st.one_of(st.just(inventory), value)),
            "previous_checkpoint_id": ids[index - 1] if index else None,
            **data.draw(st.dictionaries(st.text(max_size=5), value, max_size=2)),
        }
        body = json.dumps(manifest).encode()
        if data.draw(st.integers(0, 3)) == 0:
            body = data.draw(document_bytes({}))
        (directory / "manifest.json").write_bytes(body)
    current: Any = {"current_checkpoint_id": ids[-1]}
    if data.draw(st.integers(0, 5)) == 0:
        current = data.draw(value)
    (root / "CURRENT").write_bytes(json.dumps(current).encode())
    if data.draw(st.integers(0, 5)) == 0:
        (root / "CURRENT").write_bytes(data.draw(document_bytes({})))
    if data.draw(st.integers(0, 6)) == 0:
        (root / "checkpoints" / ".staging").mkdir()
    if data.draw(st.integers(0, 6)) == 0:
        victim = root / "checkpoints" / ids[0] / "manifest.json"
        victim.unlink()
        victim.symlink_to(root / "CURRENT")


def fuzz_fs_store_sources(db: ckptdb.Database, tmp_path: Path, data: st.DataObject) -> None:
    root = tmp_path / f"store-{os.urandom(4).hex()}"
    _fs_store(root, data)
    _import_and_check(db, "fs-store", root)


@fuzz(60)
@given(data=st.data())
def test_fuzz_fs_store_sources(db: ckptdb.Database, tmp_path: Path, data: st.DataObject) -> None:
    fuzz_fs_store_sources(db, tmp_path, data=data)


def fuzz_state_dir_sources(db: ckptdb.Database, tmp_path: Path, data: st.DataObject) -> None:
    root = tmp_path / f"state-{os.urandom(4).hex()}"
    root.mkdir()
    value = json_values()
    for _ in range(data.draw(st.integers(0, 3))):
        name = data.draw(
            st.one_of(
                st.sampled_from(["session_state.json", ".tmp", "sub", "x\ny", "e\u0301"]),
                st.text(
                    st.characters(exclude_characters="/\x00", exclude_categories=["Cs"]),
                    min_size=1,
                    max_size=10,
                ),
            )
        )
        assume(name not in (".", "..", "manifest.json"))
        kind = data.draw(st.sampled_from(["file", "file", "dir", "symlink"]))
        with contextlib.suppress(OSError):
            if kind == "file":
                (root / name).write_bytes(data.draw(st.binary(max_size=40)))
            elif kind == "dir":
                (root / name).mkdir()
            else:
                (root / name).symlink_to(tmp_path)
    manifest = {
        "schema_version": data.draw(st.one_of(st.integers(-2, 4), value)),
        "turn_count": data.draw(value),
        "written_at_revision": data.draw(value),
    }
    body = json.dumps(manifest).encode()
    if data.draw(st.booleans()):
        body = data.draw(document_bytes({"schema_version": st.integers(0, 3)}))
    if data.draw(st.integers(0, 9)):
        os.utime(root, None)
        (root / "manifest.json").write_bytes(body)
        # the manifest is written last: make sure no state file is newer than it
        newest = max(os.lstat(p).st_mtime_ns for p in root.iterdir())
        os.utime(root / "manifest.json", ns=(newest, newest), follow_symlinks=False)
    _import_and_check(db, "state-dir", root)


@fuzz(60)
@given(data=st.data())
def test_fuzz_state_dir_sources(db: ckptdb.Database, tmp_path: Path, data: st.DataObject) -> None:
    fuzz_state_dir_sources(db, tmp_path, data=data)


# -- the command line -----------------------------------------------------------------------

DOCUMENTED = {0} | set(errors.exit_statuses().values()) | {2, EXIT_IMPORT_SKIPPED}


@pytest.fixture
def cli_box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A sandbox (the working directory) with a populated database and import sources."""
    monkeypatch.chdir(tmp_path)
    db_path = tmp_path / "cli.ckpt"
    with ckptdb.open(db_path) as db:
        first = db.commit("brain", {"a.txt": b"1", "d/b": b"2"}, metadata={"run": "r1"})
        second = db.commit("brain", {"a.txt": b"2"}, metadata={"run": "r2", "loss": 0.5})
        db.commit("other/ns", {"x": b"x"})
        db.pin(first.checkpoint_id, "keep")
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "f.txt").write_bytes(b"file")
    (tmp_path / "meta.json").write_text('{"k": [1, 2]}')
    (tmp_path / "notdb.txt").write_text("not a database")
    (tmp_path / "docs").mkdir()
    return {
        "db": str(db_path),
        "ids": [first.checkpoint_id, second.checkpoint_id],
        "root": tmp_path,
    }


COMMANDS: dict[tuple[str, ...], tuple[list[str], list[str], list[str]]] = {
    # command: (positional argument kinds, flag options, value options)
    ("init",): (["newdb"], [], []),
    ("commit",): (
        ["db", "ns", "path"], [], ["--meta", "--meta-json", "--expect-current", "--reason"]
    ),
    ("current",): (["db", "ns"], [], []),
    ("namespaces",): (["db"], [], []),
    ("log",): (["db", "ns"], [], ["--limit"]),
    ("show",): (["db", "ref"], [], []),
    ("cat",): (["db", "ref", "entry"], [], []),
    ("checkout",): (["db", "ref", "newdir"], ["--fallback", "--force"], []),
    ("verify",): (["db"], ["--quick"], []),
    ("sql",): (["db", "query"], ["--csv"], ["--param", "--timeout"]),
    ("stats",): (["db"], [], []),
    ("export",): (["db", "newdb"], [], ["--namespace", "--since"]),
    ("import",): (["db", "dbfile"], ["--overwrite"], ["--namespace"]),
    ("history",): (["db", "ns"], [], ["--limit"]),
    ("set-current",): (["db", "ns", "ref"], [], ["--reason"]),
    ("receipts",): (["db"], [], ["--kind", "--limit"]),
    ("gc",): (["db"], ["--dry-run"], ["--keep-last", "--keep-within", "--keep-every",
              "--keep-best", "--keep-matching", "--namespace", "--grace"]),
    ("retention", "show"): (["db"], [], []),
    ("retention", "set"): (["db"], [], ["--keep-last", "--keep-within", "--keep-daily",
                           "--keep-best", "--keep-matching", "--namespace"]),
    ("retention", "clear"): (["db"], [], ["--namespace"]),
    ("pin",): (["db", "ref", "pin"], ["--replace"], ["--note"]),
    ("unpin",): (["db", "pin"], [], []),
    ("pins",): (["db"], [], ["--namespace"]),
    ("drop-namespace",): (["db", "ns"], ["--force", "--dry-run"], []),
    ("prune",): (["db"], ["--dry-run"], ["--where", "--namespace"]),
    ("migrate", "DB", "status"): ([], [], []),
    ("migrate", "DB", "plan"): ([], [], ["--to"]),
    ("migrate", "DB", "up"): ([], ["--no-backup"], ["--to", "--backup", "--timeout"]),
    ("migrate", "DB", "history"): ([], [], []),
    ("import-from",): (["kind", "src", "db"], ["--dry-run"], ["--namespace"]),
}  # fmt: skip


def garbage() -> st.SearchStrategy[str]:
    """Arbitrary argument text that cannot name a path outside the sandbox, including what
    a shell can really pass: bytes that are not UTF-8, which Python turns into lone
    surrogates (surrogateescape, e.g. ``--reason $'\\xff'``), and names longer than a file
    name may be."""
    argv_bytes = st.binary(min_size=1, max_size=12).map(
        lambda b: b.decode("utf-8", "surrogateescape")
    )
    text = st.one_of(
        hostile_text(4), argv_bytes, argv_bytes, st.integers(256, 400).map("n".__mul__)
    )
    return text.filter(
        lambda s: (
            "\x00" not in s
            and not s.startswith(("/", "~"))
            and ".." not in s
            and all(_argv_char(c) for c in s)
        )
    )


def _argv_char(c: str) -> bool:
    """Whether argv can hold ``c``: of the surrogates, only surrogateescape's (U+DC80 to
    U+DCFF, one per byte that is not UTF-8) reach a program."""
    return not "\ud800" <= c <= "\udfff" or "\udc80" <= c <= "\udcff"


def cli_argv(box: dict[str, Any], data: st.DataObject) -> list[str]:
    command = data.draw(st.sampled_from(sorted(COMMANDS)))
    positionals, flags, options = COMMANDS[command]
    ids: list[str] = box["ids"]
    kinds: dict[str, st.SearchStrategy[str]] = {
        "db": st.sampled_from([box["db"], "cli.ckpt", "notdb.txt", "missing.ckpt", "files"]),
        "newdb": st.sampled_from(["new.ckpt", "files/new.ckpt", "notdb.txt", box["db"]]),
        "dbfile": st.sampled_from([box["db"], "notdb.txt", "files/f.txt"]),
        "ns": st.sampled_from(["brain", "other/ns", "nope", " brain", "", "b\u2028"]),
        "ref": st.sampled_from(
            [
                *ids,
                ids[0][:8],
                ids[0][:7],
                "brain@current",
                "brain@fallback",
                "brain~1",
                "brain~9",
                "other/ns@current",
                "@current",
                "nope@current",
                "x" * 64,
            ]
        ),
        "entry": st.sampled_from(["a.txt", "d/b", "missing", "../a.txt", ""]),
        "path": st.sampled_from(["files", "files/f.txt", "missing", "notdb.txt", "."]),
        "newdir": st.sampled_from(["out", "files", "files/f.txt", "out/nested", "."]),
        "query": st.sampled_from(
            [
                "SELECT namespace FROM heads",
                "SELECT 1",
                "DELETE FROM pin",
                "PRAGMA user_version",
                "SELECT 1; SELECT 2",
                "SELECT :a, 1e999, 1 AS x, 2 AS x",
                "SELECT * FROM heads WHERE namespace = :namespace",
            ]
        ),
        "pin": st.sampled_from(["keep", "new-pin", "", " pad", "p\x07"]),
        "kind": st.sampled_from(["json-dir", "fs-store", "state-dir", "nope"]),
        "src": st.sampled_from(["docs", "files", "missing", "notdb.txt"]),
    }
    values = {
        "--meta": st.sampled_from(["k=1", "k=NaN", "k", "=v", "k=[1", "k=\ud800"]),
        "--meta-json": st.sampled_from(["meta.json", "notdb.txt", "missing.json", "files"]),
        "--expect-current": st.sampled_from(["none", ids[1], ids[0], "zz"]),
        "--reason": st.sampled_from(["why", "", "x" * 300]),
        "--limit": st.sampled_from(["1", "0", "-1", "x", "99999999999999999999"]),
        "--namespace": st.sampled_from(["brain", "nope", "", "other/ns"]),
        "--since": st.sampled_from([ids[0], "brain~1", "zz"]),
        "--kind": st.sampled_from(["verify", "gc", "x"]),
        "--keep-last": st.sampled_from(["1", "2", "0", "x"]),
        "--keep-within": st.sampled_from(["1d", "36h", "x", "-1d", "99999999999w"]),
        "--keep-every": st.sampled_from(["1", "3", "0"]),
        "--keep-daily": st.sampled_from(["1", "0"]),
        "--keep-best": st.sampled_from(["loss:1:min", "loss:x", "loss:1:sideways", ":1"]),
        "--keep-matching": st.sampled_from(["run=r1", "run", "run=NaN"]),
        "--grace": st.sampled_from(["0s", "1h", "x", "-1h"]),
        "--where": st.sampled_from(["run=r1", "run=NaN", "x", "=1"]),
        "--note": st.sampled_from(["n", "x" * 2000]),
        "--to": st.sampled_from(["1", "2", "99", "0"]),
        "--backup": st.sampled_from(["bk.ckpt", "files", "notdb.txt"]),
        "--timeout": st.sampled_from(["0", "1", "-1", "x"]),
        "--param": st.sampled_from(["a=1", "a", "=1", ":a=x", "namespace=brain"]),
    }
    argv: list[str] = []
    if command[0] == "migrate":
        argv = ["migrate", data.draw(kinds["db"]), command[2]]
    else:
        argv = list(command)
        argv += [data.draw(st.one_of(kinds[k], garbage())) for k in positionals]
    for flag in flags:
        if data.draw(st.booleans()):
            argv.append(flag)
    for option in options:
        if data.draw(st.integers(0, 2)) == 0:
            argv += [option, data.draw(st.one_of(values[option], garbage()))]
    if data.draw(st.booleans()):
        argv.append("--json")
    if data.draw(st.integers(0, 5)) == 0:  # garbage anywhere: extra args, unknown options
        extra = data.draw(st.one_of(garbage(), st.sampled_from(["--nope", "-x", "--", "-h"])))
        argv.insert(data.draw(st.integers(0, len(argv))), extra)
    return argv


def fuzz_cli_arguments(cli_box: dict[str, Any], data: st.DataObject) -> None:
    argv = cli_argv(cli_box, data)
    db = cli_box["db"]
    before_files = file_bytes(db)
    before_rows = logical_state(db)
    result = CliRunner().invoke(main, argv)
    detail = (argv, result.exit_code, result.output[-500:], result.stderr[-500:])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(("traceback", type(result.exception).__name__, *detail))
    assert result.exit_code in DOCUMENTED, detail
    if result.exit_code != 0:
        if (
            argv[0] == "verify"
            or (argv[0] == "import" and result.exit_code == 4)
            or (argv[0] == "import-from" and result.exit_code == EXIT_IMPORT_SKIPPED)
        ):
            return  # a verify receipt / partial imports (conflicts, skips) are documented
        assert logical_state(db) == before_rows, detail
        assert file_bytes(db) == before_files, detail


@fuzz(150)
@given(data=st.data())
def test_fuzz_cli_arguments(cli_box: dict[str, Any], data: st.DataObject) -> None:
    fuzz_cli_arguments(cli_box, data=data)


# -- the bugs the fuzzers found: minimal reproductions, kept as regression tests ------------


@pytest.mark.parametrize("where", ["value", "reason"])
def test_lone_surrogate_in_str_value_or_reason_is_a_typed_error(
    db: ckptdb.Database, where: str
) -> None:
    before = logical_state(db.path)
    with pytest.raises(errors.InvalidInputError):
        if where == "value":
            db.commit("ns", {"a": "text \ud800"})
        else:
            db.commit("ns", {"a": b"1"}, reason="why \ud800")
    assert logical_state(db.path) == before


def test_database_path_that_is_not_utf8_is_refused_cleanly(tmp_path: Path) -> None:
    path = os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9.ckpt")
    with pytest.raises(errors.CkptdbError):
        ckptdb.open(path).close()
    assert not os.path.exists(path)


@pytest.mark.parametrize("argv", [["commit", "DB", "ns", "files", "--reason", "why\udcff"],
                                  ["sql", "DB", "SELECT '\udcff'"]])  # fmt: skip
def test_cli_non_utf8_argument_is_a_typed_error(cli_box: dict[str, Any], argv: list[str]) -> None:
    argv = [cli_box["db"] if a == "DB" else a for a in argv]
    result = CliRunner().invoke(main, argv)
    assert isinstance(result.exception, SystemExit | None), result.exception
    assert result.exit_code == 7


def test_fifo_entry_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code = (
        "import pathlib, ckptdb\n"
        f"db = ckptdb.open({str(tmp_path / 'f.ckpt')!r})\n"
        "try:\n"
        f"    db.commit('ns', {{'a': pathlib.Path({str(fifo)!r})}})\n"
        "except ckptdb.errors.InvalidEntryError:\n"
        "    print('refused')\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=6, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("commit of a FIFO path blocked")
    assert done.stdout.strip() == "refused", done.stderr


@pytest.mark.parametrize("grace", [float("nan"), 1e300, float("inf")])
def test_gc_grace_out_of_range_is_a_typed_error(db: ckptdb.Database, grace: float) -> None:
    with pytest.raises(errors.InvalidInputError):
        db.gc(grace=grace, dry_run=True)


@pytest.mark.parametrize("target", ["afile/target", "afile/x/y", "L" * 300])
def test_checkout_target_errors_are_typed(db: ckptdb.Database, tmp_path: Path, target: str) -> None:
    db.commit("ns", {"a/b": b"1"})
    (tmp_path / "afile").write_bytes(b"in the way")

    def snapshot() -> dict[str, Any]:
        return {k: v for k, v in _snapshot(tmp_path).items() if not k.startswith(db.path)}

    before = snapshot()
    with pytest.raises(errors.CkptdbError):
        db.checkout("ns@current", tmp_path / target)
    assert snapshot() == before


def test_checkout_to_a_long_target_name_that_fits_the_file_system(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    """The staging directory's name does not grow with the target's: a 250-byte name (the
    limit is 255) is a fine target."""
    db.commit("ns", {"a/b": b"1"})
    result = db.checkout("ns@current", tmp_path / ("L" * 250))
    assert (tmp_path / ("L" * 250) / "a" / "b").read_bytes() == b"1"
    assert result.files == 1
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("test.ckpt")] == ["L" * 250]


def _json_dir_doc(directory: Path, extra: str) -> None:
    """A json-dir document whose text carries ``extra`` (raw JSON) as a field."""
    (directory / "c1.json").write_text(
        '{"checkpointId": "c1", "runId": "r", "createdAt": "2026-01-01T00:00:00Z",'
        f' "checkpointDigest": "{"0" * 64}", "x": {extra}}}'
    )


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("kind", "trigger"),
    [
        ("json-dir", "NaN"),
        ("json-dir", "Infinity"),
        ("json-dir", '"\\ud800"'),
        ("json-dir", "DEEP"),
        ("state-dir", "DEEP"),
        ("fs-store", "DEEP"),
        ("fs-store", "DEEP_CURRENT"),
    ],
)
def test_importers_refuse_hostile_json_with_a_typed_error(
    db: ckptdb.Database, tmp_path: Path, kind: str, trigger: str
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    deep_current = trigger == "DEEP_CURRENT"
    trigger = DEEP if trigger.startswith("DEEP") else trigger
    if kind == "json-dir":
        _json_dir_doc(src, trigger)
    elif kind == "state-dir":
        (src / "manifest.json").write_text(
            f'{{"schema_version": 1, "turn_count": {trigger}, "written_at_revision": "r"}}'
        )
    else:
        cid = "a" * 64
        (src / "checkpoints" / cid / "files").mkdir(parents=True)
        (src / "CURRENT").write_text(
            "[" * 30_000 + "]" * 30_000
            if deep_current
            else json.dumps({"current_checkpoint_id": cid})
        )
        data = b"bytes"
        digest = hashlib.sha256(data).hexdigest()
        (src / "checkpoints" / cid / "files" / digest).write_bytes(data)
        inventory = [
            {"relative_path": "f", "content_digest": digest, "byte_len": 5,
             "blob_path": f"files/{digest}", "schema_id": "s", "schema_version": "1"}
        ]  # fmt: skip
        (src / "checkpoints" / cid / "manifest.json").write_text(
            f'{{"checkpoint_id": "{cid}", "brain_id": "b", "file_inventory":'
            f' {json.dumps(inventory)}, "epoch": {"1" if deep_current else trigger}}}'
        )
    before = logical_state(db.path)
    try:
        report = run_import(db, kind, str(src))
    except errors.CkptdbError:
        assert logical_state(db.path) == before
    else:
        assert report.skipped or report.imported
    assert db.verify().ok


def test_cli_sql_syntax_error_is_not_exit_1(cli_box: dict[str, Any]) -> None:
    result = CliRunner().invoke(main, ["sql", cli_box["db"], "SELEC nonsense", "--json"])
    assert result.exit_code == 7


def test_keep_matching_nan_is_refused(cli_box: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        main, ["retention", "set", cli_box["db"], "--keep-matching", "run=NaN"]
    )
    assert result.exit_code == 7
