"""Mappings from caller names to namespaces are injective (issue 23, family 4).

Every place ckptdb turns names it was given into a namespace (or an entry name) must give
different inputs different outputs, by construction: the LangGraph saver's
``(thread_id, checkpoint_ns)`` -> namespace and channel -> entry name, the host store's
``(prefix, key)`` -> namespace (prefixes may nest), the importers' run ids and directories
-> namespace, and the reference grammar (namespace position -> text -> position). Each is
checked by a property test that feeds it inputs built to collide -- one string cut at every
point, separators and the escape character inside the parts -- and, where the mapping can be
read back, by a round trip. Real files then show what a collision cost (one thread's delete
dropping another's checkpoints, one store's put displacing another's CURRENT) is gone, and
that files written with the old mappings keep working.

``tests/fixtures/langgraph-v2-shared.ckpt`` was written by the saver of ``e4e4503``
(langgraph schema version 2, core version 6), whose hashed names collided for ids holding
NUL, by :func:`_fixture_script` below (run with that checkout first on ``PYTHONPATH``); it
must never change.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import time
import urllib.parse
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

import ckptdb
from ckptdb import errors, validation
from ckptdb.host_store import DatabaseHostStore, FileHostStore
from ckptdb.importers import run_import
from ckptdb.importers.common import canonical_digest
from ckptdb.importers.common import namespace_for as common_namespace_for
from ckptdb.importers.json_dir import run_namespace
from ckptdb.importers.state_dir import default_namespace
from ckptdb.integrations.langgraph import CkptdbSaver
from ckptdb.integrations.langgraph._layout import (
    channel_entry,
    escape,
    namespace_for,
    scope_prefix,
)
from ckptdb.integrations.langgraph.importer import import_langgraph_sqlite
from ckptdb.references import (
    MAX_BACK,
    Reference,
    format_reference,
    parse_reference,
)

FIXTURE = Path(__file__).parent / "fixtures" / "langgraph-v2-shared.ckpt"
FIXTURE_SHA256 = "1b6bf86e91297af0e433f23c9aa66c88edd47b2bd1e1a3faf31beaf447dc1630"
PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: Characters that make names collide when a mapping is careless: separators, the escape
#: character, NUL, the hashed-form markers, a combining accent; then anything else.
TRICKY = st.one_of(
    st.sampled_from(["\x00", "/", "%", "%2F", "#", "@", "~", ":", "|", ".", "a", "é", "\u0301"]),
    st.characters(exclude_categories=["Cs"]),
)


def tricky_text(max_size: int = 12) -> st.SearchStrategy[str]:
    return st.lists(TRICKY, max_size=max_size).map("".join)


#: Lengths that put a name below, at and above ckptdb's 256-character limit.
PADDING = st.sampled_from(["", "L" * 120, "L" * 250, "L" * 300])


def cuts(text: str) -> list[tuple[str, str]]:
    """``text`` cut in two at every point: distinct pairs with the same concatenation."""
    return [(text[:i], text[i:]) for i in range(len(text) + 1)]


def assert_injective(mapping: dict[Any, str]) -> None:
    names: dict[str, Any] = {}
    for given_, name in mapping.items():
        assert names.setdefault(name, given_) == given_, (
            f"{given_!r} and {names[name]!r} share {name!r}"
        )


# --- LangGraph: (thread_id, checkpoint_ns[, key scope]) -> namespace ------------------------


def _unescape(part: str) -> str:
    return urllib.parse.unquote(part, errors="strict")


@PROPERTY
@given(pad=PADDING, text=tricky_text(), scopes=st.sampled_from([[""], ["", "k", "k/x", "k%2Fx"]]))
def test_langgraph_namespaces_are_injective(pad: str, text: str, scopes: list[str]) -> None:
    pairs = [(pad + a, b, s) for a, b in cuts(text) for s in scopes]
    pairs += [(pad + text + "\x00", "", s) for s in scopes]
    names = {p: namespace_for(p[0], p[1], scope_prefix(p[2]) if p[2] else "") for p in set(pairs)}
    assert_injective(names)
    for (thread, ns, key), name in names.items():
        assert validation.namespace(name) == name and name.isascii()
        scope = scope_prefix(key) if key else "langgraph/"
        readable = scope + escape(thread, "") + ("/" + escape(ns, "") if ns else "")
        if len(readable) > 256:  # the hash of the (injective) readable name, in its scope
            digest = hashlib.sha256(readable.encode()).hexdigest()
            assert name == (scope + "#" if key else "langgraph#") + digest
            continue
        # Readable: it splits back into exactly the parts it was made of.
        assert name.startswith(scope)
        parts = name[len(scope) :].split("/")
        assert [_unescape(p) for p in parts] == ([thread, ns] if ns else [thread])


@PROPERTY
@given(names=st.lists(st.one_of(tricky_text(), PADDING.map(lambda p: p[:210])), max_size=12))
def test_langgraph_channel_entries_are_injective(names: list[str]) -> None:
    channels = set(names) | {"." + n for n in names} | {"%2E" + n for n in names}
    entries = {c: channel_entry(c) for c in channels}
    assert_injective(entries)
    for entry in entries.values():
        assert validation.entry_name(entry) == entry


def cfg(thread: str, ns: str = "") -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}


def _put(saver: CkptdbSaver, config: Any, tag: str) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"tag": tag, "big": tag + "v" * 400}
    cp["channel_versions"] = {"tag": "1", "big": "1"}
    config = saver.put(config, cp, {"tag": tag}, {"tag": "1"})
    saver.put_writes(config, [("tag", "pending " + tag)], "task-" + tag)
    return config


LONG = "L" * 300
#: Pairs the saver of e4e4503 mapped to one namespace (sha256 of thread NUL ns).
NUL_PAIRS = [(LONG, "\x00\x00"), (LONG + "\x00", "\x00"), (LONG + "\x00\x00", "")]


def test_threads_whose_ids_hold_nul_keep_their_own_checkpoints(tmp_path: Path) -> None:
    with CkptdbSaver(tmp_path / "nul.ckpt") as saver:
        for round_ in range(2):
            for n, (thread, ns) in enumerate(NUL_PAIRS):
                _put(saver, cfg(thread, ns), f"{n}.{round_}")
        for n, (thread, ns) in enumerate(NUL_PAIRS):
            tags = [t.metadata["tag"] for t in saver.list(cfg(thread, ns))]
            assert tags == [f"{n}.1", f"{n}.0"]
        # Deleting one thread leaves the others whole.
        saver.delete_thread(LONG)
        assert saver.get_tuple(cfg(*NUL_PAIRS[0])) is None
        for n, (thread, ns) in enumerate(NUL_PAIRS[1:], start=1):
            tup = saver.get_tuple(cfg(thread, ns))
            assert tup is not None and tup.checkpoint["channel_values"]["tag"] == f"{n}.1"
            assert [w[2] for w in tup.pending_writes] == [f"pending {n}.1"]
        assert saver.db.verify().ok


def test_a_commit_never_lands_in_a_namespace_registered_to_another_thread(
    location: str,
) -> None:
    """The saver's registry is the check of last resort: a namespace registered to one pair
    (here, by an altered row) refuses another pair's commit, and nothing is written -- on
    both engines (PostgreSQL registers and checks in one statement)."""
    with CkptdbSaver(location) as saver:
        _put(saver, cfg("a"), "a")
        with saver.db.write_session() as s:
            s.execute(
                "INSERT INTO lg_namespace (namespace, thread_id, checkpoint_ns) VALUES (?, ?, ?)",
                (namespace_for("b", ""), "someone else", ""),
            )
        before = saver.db.stats().checkpoints
        with pytest.raises(errors.CorruptionError, match="registered to another") as caught:
            _put(saver, cfg("b"), "b")
        assert caught.value.details["reason"] == "lg_namespace_conflict"
        assert saver.db.stats().checkpoints == before
        assert saver.get_tuple(cfg("b")) is None


def test_an_import_continues_a_thread_in_the_namespace_it_registered(tmp_path: Path) -> None:
    """A thread the target already holds in an encrypted scope gets the imported
    checkpoints there too -- not a second, plaintext namespace that deleting the thread
    would leave behind."""
    source = tmp_path / "source.sqlite"
    with closing(sqlite3.connect(source, check_same_thread=False)) as conn:
        lg = SqliteSaver(conn)
        cp = empty_checkpoint()
        cp["channel_values"] = {"secret": "imported " + "s" * 300}
        lg.put(cfg("t"), cp, {"step": 1}, {})
        conn.commit()
    keys = {"k": bytes(range(32))}
    with ckptdb.open(tmp_path / "target.ckpt", keys=keys) as db:
        saver = CkptdbSaver(db, encryption="k")
        _put(saver, cfg("t"), "mine")
        report = import_langgraph_sqlite(db, source)
        assert [(i.namespace, i.created) for i in report.imported] == [("langgraph@k/t", True)]
        assert set(_owners(db)) == {"langgraph@k/t"}
        assert len(list(saver.list(cfg("t")))) == 2
        saver.delete_thread("t")
        assert db.namespaces() == []


# --- LangGraph: a file written with the old mapping ------------------------------------------

FIXTURE_KEYS = {"tenant": bytes(range(100, 132))}
#: The pairs of the fixture: a plain triple and an encrypted pair that shared a namespace,
#: and two that did not (a long id, hashed, and a short one).
SHARED = [(LONG, "\x00\x00"), (LONG + "\x00", "\x00"), (LONG + "\x00\x00", "")]
ENCRYPTED = [("E" * 300 + "\x00", "x"), ("E" * 300, "\x00x")]
ALONE = [("N" * 300, ""), ("s", "")]
ALL_PAIRS = SHARED + ENCRYPTED + ALONE


def _fixture_script(out: Path) -> None:
    """How the fixture was made (kept for the record; not run by the tests)."""
    with ckptdb.open(out, keys=FIXTURE_KEYS) as db:
        plain = CkptdbSaver(db)
        sealed = CkptdbSaver(db, encryption="tenant")
        configs: dict[tuple[str, str], Any] = {}
        for step in range(2):
            for n, pair in enumerate(SHARED + ENCRYPTED + ALONE):
                saver = sealed if pair in ENCRYPTED else plain
                config = configs.get(pair) or cfg(*pair)
                cp = empty_checkpoint()
                cp["id"] = f"1ef2{step:04d}-{n:04d}-6000-8000-000000000000"
                cp["channel_values"] = {"who": f"{n}/{step}", "big": f"{n}:" + "v" * 400}
                cp["channel_versions"] = {"who": str(step + 1), "big": "1"}
                config = saver.put(config, cp, {"step": step, "who": n}, {"who": str(step + 1)})
                saver.put_writes(config, [("who", f"pending {n}/{step}")], f"task-{n}-{step}")
                configs[pair] = config


def _legacy_copy(tmp_path: Path) -> Path:
    assert hashlib.sha256(FIXTURE.read_bytes()).hexdigest() == FIXTURE_SHA256
    path = tmp_path / "legacy.ckpt"
    shutil.copyfile(FIXTURE, path)
    return path


def _owners(db: ckptdb.Database) -> dict[str, set[tuple[str, str]]]:
    """ckptdb namespace -> the (thread, ns) pairs whose checkpoints it holds."""
    with db.read_session() as s:
        rows = s.execute(
            "SELECT namespace, json_extract(metadata, '$.lg_thread_id'),"
            " json_extract(metadata, '$.lg_checkpoint_ns') FROM checkpoints"
        )
    out: dict[str, set[tuple[str, str]]] = {}
    for namespace, thread, ns in rows:
        out.setdefault(namespace, set()).add((thread, ns))
    return out


def _assert_each_pair_reads_its_own(saver: CkptdbSaver, pairs: list[tuple[str, str]]) -> None:
    for pair in pairs:
        n = ALL_PAIRS.index(pair)
        listed = list(saver.list(cfg(*pair)))
        assert [t.metadata["who"] for t in listed] == [n, n]
        latest = listed[0]
        assert latest.checkpoint["channel_values"] == {"who": f"{n}/1", "big": f"{n}:" + "v" * 400}
        assert [w[2] for w in latest.pending_writes] == [f"pending {n}/1"]


def test_a_file_of_the_old_mapping_is_separated_on_open(tmp_path: Path) -> None:
    path = _legacy_copy(tmp_path)
    with ckptdb.open(path, keys=FIXTURE_KEYS) as db:
        before = {name: owners for name, owners in _owners(db).items()}
        assert sorted(len(o) for o in before.values()) == [1, 1, 2, 3]  # the collisions
        saver = CkptdbSaver(db)
        with db.read_session() as s:
            assert s.execute("SELECT key FROM lg_meta") == []  # the marker is gone
            registered = dict(
                ((t, n), ns)
                for ns, t, n in s.execute(
                    "SELECT namespace, thread_id, checkpoint_ns FROM lg_namespace"
                )
            )
        # Every pair has a namespace of its own, in the key scope it was in ...
        owners = _owners(db)
        assert all(len(o) == 1 for o in owners.values())
        assert {next(iter(o)) for o in owners.values()} == set(ALL_PAIRS)
        assert set(registered) == set(ALL_PAIRS)
        assert all(registered[p].startswith("langgraph@tenant/#") for p in ENCRYPTED)
        # ... names that were not shared did not move ...
        for name, held in before.items():
            if len(held) == 1:
                assert registered[next(iter(held))] == name
        # ... and every pair reads its own checkpoints and pending writes, as before.
        _assert_each_pair_reads_its_own(saver, ALL_PAIRS)
        # A thread whose name did not change continues where it was.
        alone = cfg(*ALONE[0])
        _put(saver, saver.get_tuple(alone).config, "more")  # type: ignore[union-attr]
        assert len(db.lineage(registered[ALONE[0]])) == 3
        # Deleting one of the threads that shared a namespace leaves the others whole.
        saver.delete_thread(SHARED[0][0])
        saver.delete_thread(ENCRYPTED[1][0])
        _assert_each_pair_reads_its_own(saver, [SHARED[1], SHARED[2], ENCRYPTED[0]])
        assert db.verify().ok
    with CkptdbSaver(path) as again:  # separation ran once; a reopen finds nothing to do
        assert again.get_tuple(cfg(*SHARED[2])) is not None


def test_separation_waits_for_a_missing_key_and_nothing_is_dropped_meanwhile(
    tmp_path: Path,
) -> None:
    path = _legacy_copy(tmp_path)
    with CkptdbSaver(path) as saver:  # no keys: the encrypted pair cannot move yet
        with saver.db.read_session() as s:
            assert s.execute("SELECT key FROM lg_meta") == [("shared_namespaces",)]
        _assert_each_pair_reads_its_own(saver, SHARED + ALONE)  # the plain ones moved
        # The encrypted namespace still holds both pairs: deleting the one registered to
        # it must not drop the other's checkpoints with it.
        saver.delete_thread(ENCRYPTED[0][0])
        assert saver.db.stats().checkpoints == 2 * len(ALL_PAIRS)
    with ckptdb.open(path, keys=FIXTURE_KEYS) as db:
        saver = CkptdbSaver(db)  # with the key: the rest is separated
        with db.read_session() as s:
            assert s.execute("SELECT key FROM lg_meta") == []
        _assert_each_pair_reads_its_own(saver, [ENCRYPTED[1]])
        assert saver.get_tuple(cfg(*ENCRYPTED[0])) is None
        # The deleted thread's namespace went once nothing else used it.
        assert db.stats().checkpoints == 2 * len(ALL_PAIRS) - 2
        assert all(len(o) == 1 for o in _owners(db).values())
        assert db.verify().ok


# --- host stores: (prefix, key) -> namespace -------------------------------------------------

PREFIX_TEXT = st.lists(
    st.one_of(st.sampled_from(["tenant-7", "/", "engine", "%2F", "~", "a", "é"]), TRICKY),
    min_size=1,
    max_size=8,
).map("".join)


def _store(db: ckptdb.Database, prefix: str) -> DatabaseHostStore | None:
    try:
        return DatabaseHostStore(db, namespace_prefix=prefix)
    except errors.InvalidInputError:
        return None


def _key_of(suffix: str) -> str | None:
    """The key a readable suffix names (None for a hashed one)."""
    if suffix.startswith("~"):
        return None
    return suffix.replace("%2F", "/")


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with ckptdb.open(tmp_path_factory.mktemp("stores") / "stores.ckpt") as db:
        yield db


@PROPERTY
@given(
    head=PREFIX_TEXT,
    tail=st.lists(st.sampled_from(["/", "engine", "turn", "%2F", "~", "x", " ", "☃"]), max_size=6),
    long=st.booleans(),
)
def test_host_store_namespaces_are_injective_over_prefix_and_key(
    shared_db: ckptdb.Database, head: str, tail: list[str], long: bool
) -> None:
    text = head + "".join(tail) + ("k" * 130 if long else "")
    names: dict[tuple[str, str], str] = {}
    for prefix, key in cuts(text):
        store = _store(shared_db, prefix)
        if store is None or not key or "\x00" in key:
            continue
        name = store.namespace_for(key)
        assert validation.namespace(name) == name
        # The store's prefix is a folder; the key's part never holds "/": the name splits
        # at its last "/" into exactly (prefix, suffix), and the suffix names the key.
        folder, _, suffix = name.rpartition("/")
        assert folder + "/" == store.namespace_prefix
        assert store.namespace_prefix in (prefix, prefix + "/")
        assert _key_of(suffix) in (key, None)
        if _key_of(suffix) is None:
            assert suffix == "~" + hashlib.sha256(key.encode()).hexdigest()[:40]
        names[(store.namespace_prefix, key)] = name
    assume(names)
    assert_injective(names)


def test_stores_with_nested_prefixes_never_share_a_namespace(db: ckptdb.Database) -> None:
    outer = DatabaseHostStore(db, namespace_prefix="tenant-7/")
    inner = DatabaseHostStore(db, namespace_prefix="tenant-7/engine/")
    first = inner.put(b"inner 1", key="turn")
    inner.put(b"inner 2", key="turn")  # the fallback once the next one is put
    latest = inner.put(b"inner 3", key="turn")
    outer.put(b"outer", key="engine/turn")  # once the namespace of inner's "turn"
    assert outer.namespace_for("engine/turn") != inner.namespace_for("turn")
    current = db.current(inner.namespace_for("turn"))
    assert current is not None and latest.endswith("@" + current.id)
    db.gc(ckptdb.RetentionPolicy(keep_last=1), namespaces=[inner.namespace_for("turn")])
    assert inner.get(latest) == b"inner 3"
    with pytest.raises(errors.LocationNotFoundError):
        inner.get(first)  # collected by the policy, as it should be
    with pytest.raises(errors.LocationNotFoundError, match="not put there by this store"):
        outer.get(latest)  # under its prefix (a name of its old mapping), but not its own


@settings(PROPERTY, max_examples=15)  # each put fsyncs a file and its directory
@given(
    items=st.lists(
        st.tuples(
            st.sampled_from(["a/b", "a_b", "a b", "a\u2603b", ".a", "_a", "a" * 70, "a" * 71]),
            st.binary(max_size=4),
        ),
        min_size=2,
        max_size=6,
    )
)
def test_file_store_locations_name_their_bytes(
    tmp_path_factory: pytest.TempPathFactory, items: list[tuple[str, bytes]]
) -> None:
    """The file store's label is lossy on purpose (keys are labels, not identities); the
    location is the label and the digest of the bytes, so one location never names two
    different byte strings, whichever keys share a label."""
    with FileHostStore(tmp_path_factory.mktemp("files")) as store:
        seen: dict[str, bytes] = {}
        for key, data in items:
            location = store.put(data, key=key)
            assert seen.setdefault(location, data) == data
        for location, data in seen.items():
            assert store.get(location) == data


def _old_put(db: ckptdb.Database, given_prefix: str, key: str, data: bytes) -> str:
    """A put as ckptdb before issue 23 made it: namespace = prefix + key for a plain label
    ("/" included), prefix + "~" + sha256(key)[:40] otherwise."""
    plain = all(c.isascii() and (c.isalnum() or c in "._+=,:/-") for c in key)
    plain = plain and len(key) <= 128 and (key[0].isalnum() or key[0] == "_")
    suffix = key if plain else "~" + hashlib.sha256(key.encode()).hexdigest()[:40]
    namespace = given_prefix + suffix
    ack = db.commit(
        namespace, {"data": data}, metadata={"host_store_key": key}, reason="host_store.put"
    )
    return f"ckptdb:{namespace}@{ack.checkpoint_id}"


def test_locations_of_the_old_mapping_stay_readable(db: ckptdb.Database) -> None:
    old = {
        ("tenant-7/", "engine/turn"): b"outer",
        ("tenant-7/engine/", "turn"): b"inner",
        ("run-", "5"): b"no slash in the prefix",
        ("tenant-7/", " spaced \u2603 "): b"hashed",
        ("tenant-7/", "k"): b"plain",
    }
    locations = {pk: _old_put(db, *pk, data) for pk, data in old.items()}
    stores = {p: DatabaseHostStore(db, namespace_prefix=p) for p, _ in old}
    for (prefix, key), data in old.items():
        assert stores[prefix].get(locations[(prefix, key)]) == data
    # The key recorded in each checkpoint still decides: no store reads another's.
    with pytest.raises(errors.LocationNotFoundError):
        stores["tenant-7/"].get(locations[("tenant-7/engine/", "turn")])
    # New puts: a key without "/" continues its lineage; one with "/" gets its own name.
    stores["tenant-7/"].put(b"plain 2", key="k")
    assert len(db.lineage("tenant-7/k")) == 2
    moved = stores["tenant-7/"].put(b"outer 2", key="engine/turn")
    assert moved.startswith("ckptdb:tenant-7/engine%2Fturn@")
    assert stores["run-"].put(b"r", key="5").startswith("ckptdb:run-/5@")
    assert stores["run-"].get(locations[("run-", "5")]) == b"no slash in the prefix"


# --- importers: run ids and directories -> namespace -----------------------------------------


@PROPERTY
@given(text=tricky_text(16), prefix=st.sampled_from([None, "imported", "a/b", "%2F"]))
def test_json_dir_run_namespaces_are_injective(text: str, prefix: str | None) -> None:
    names: dict[tuple[str | None, str], str] = {}
    for given_, run in [(prefix, text), *cuts(text)]:
        if not run:
            continue
        try:
            name = run_namespace(run, given_ or None)
        except errors.SourceError:
            continue  # a name ckptdb refuses (control characters, whitespace): skipped
        assert validation.namespace(name) == name
        # Splits back into (prefix, run id): the escaped id never holds "/".
        head, _, part = name.rpartition("/")
        assert _unescape(part) == run and (head or None) == (given_ or None)
        names[(given_ or None, run)] = name
    assert_injective(names)


@PROPERTY
@given(names=st.lists(tricky_text(16), max_size=12))
def test_fs_store_and_given_names_are_taken_as_they_are(names: list[str]) -> None:
    """fs-store names its namespace by the source's own brain id, and --namespace by the
    caller's name: the identity (or a typed refusal), injective by definition."""
    for name in names:
        try:
            validation.namespace(name)
        except errors.InvalidNamespaceError:
            with pytest.raises(errors.SourceError):
                common_namespace_for(name, None)
            continue
        assert common_namespace_for(name, None) == name == common_namespace_for("x", name)


COMPONENT = st.lists(
    st.one_of(st.sampled_from(["%", "%2F", " ", "é", "e\u0301", "engine_state", "\udcff"]), TRICKY),
    min_size=1,
    max_size=4,
).map("".join)


@PROPERTY
@given(paths=st.lists(st.lists(COMPONENT, max_size=4), min_size=1, max_size=6), long=st.booleans())
def test_state_dir_namespaces_are_injective(paths: list[list[str]], long: bool) -> None:
    tail = ["x" * 260] if long else []
    resolved = {
        "/" + "/".join([*(c.replace("/", "_").replace("\x00", "_") for c in p), *tail])
        for p in paths
    }
    names = {p: default_namespace(p) for p in resolved}
    assert_injective(names)
    for path, name in names.items():
        assert validation.namespace(name) == name
        if name.startswith("state#"):
            assert name == "state#" + hashlib.sha256(os.fsencode(path)).hexdigest()
            continue
        parts = name.removeprefix("state:").split("/")
        assert [urllib.parse.unquote_to_bytes(p) for p in parts] == os.fsencode(path).split(b"/")


def _doc(directory: Path, checkpoint_id: str, run_id: str, created: str) -> bytes:
    body = {"checkpointId": checkpoint_id, "runId": run_id, "createdAt": created}
    body["checkpointDigest"] = canonical_digest(body, exclude="checkpointDigest")
    raw = json.dumps(body).encode()
    (directory / f"{checkpoint_id}.json").write_bytes(raw)
    return raw


def test_json_dir_runs_never_share_a_namespace(db: ckptdb.Database, tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    _doc(tmp_path / "one", "c1", "a/b", "2026-01-01T00:00:00Z")
    _doc(tmp_path / "two", "c2", "b", "2026-01-01T00:00:01Z")
    first = run_import(db, "json-dir", str(tmp_path / "one"))
    second = run_import(db, "json-dir", str(tmp_path / "two"), namespace="a")
    assert first.namespaces == ["a%2Fb"] and second.namespaces == ["a/b"]
    assert [c.metadata["run_id"] for c in db.lineage("a%2Fb")] == ["a/b"]
    assert [c.metadata["run_id"] for c in db.lineage("a/b")] == ["b"]


def test_json_dir_runs_imported_with_the_old_mapping(db: ckptdb.Database, tmp_path: Path) -> None:
    source = tmp_path / "docs"
    source.mkdir()
    raw = _doc(source, "c1", "x/y", "2026-01-01T00:00:00Z")
    doc = json.loads(raw)
    # As the importer before issue 23 wrote it: the run id verbatim as the namespace.
    db.commit(
        "x/y",
        {"checkpoint.json": raw},
        metadata={
            "source": "json-dir",
            "source_id": "c1",
            "run_id": "x/y",
            "created_at": doc["createdAt"],
            "digest": doc["checkpointDigest"],
            "schema_version": None,
        },
        reason="import-from json-dir",
    )
    again = run_import(db, "json-dir", str(source))
    assert [(i.namespace, i.created) for i in again.imported] == [("x/y", False)]
    assert [n.name for n in db.namespaces()] == ["x/y"]  # nothing imported twice
    # Run "y" under --namespace x is named "x/y" now, which holds run "x/y": refused.
    other = tmp_path / "other"
    other.mkdir()
    _doc(other, "c2", "y", "2026-01-01T00:00:01Z")
    refused = run_import(db, "json-dir", str(other), namespace="x")
    assert refused.imported == [] and [s.code for s in refused.skipped] == ["invalid_source"]
    assert "another run_id" in refused.skipped[0].detail
    assert [c.metadata["run_id"] for c in db.lineage("x/y")] == ["x/y"]


def _state(directory: Path, turn: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "session_state.json").write_text(json.dumps({"turn": turn}))
    time.sleep(0.01)
    (directory / "manifest.json").write_text(
        json.dumps({"schema_version": 2, "turn_count": turn, "written_at_revision": "r"})
    )


def test_state_dirs_of_one_name_never_share_a_namespace(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    a, b = tmp_path / "a" / "engine_state", tmp_path / "b" / "engine_state"
    _state(a, 1)
    _state(b, 7)
    first = run_import(db, "state-dir", str(a))
    second = run_import(db, "state-dir", str(b))
    assert first.namespaces != second.namespaces
    _state(a, 2)
    run_import(db, "state-dir", str(a))
    assert [c.metadata["turn_count"] for c in db.lineage(first.namespaces[0])] == [2, 1]
    assert [c.metadata["turn_count"] for c in db.lineage(second.namespaces[0])] == [7]


def test_a_state_dir_imported_with_the_old_mapping_continues(
    db: ckptdb.Database, tmp_path: Path
) -> None:
    mine, other = tmp_path / "a" / "engine_state", tmp_path / "b" / "engine_state"
    _state(mine, 1)
    _state(other, 5)
    # As the importer before issue 23 wrote it: "state/" + the directory's name.
    db.commit(
        "state/engine_state",
        {"session_state.json": (mine / "session_state.json").read_bytes()},
        metadata={"source": "state-dir", "source_id": "turn 1 at r", "source_dir": str(mine)},
        reason="import-from state-dir",
    )
    _state(mine, 2)
    assert run_import(db, "state-dir", str(mine)).namespaces == ["state/engine_state"]
    # Another directory of that name is not the one recorded there: a name of its own.
    assert run_import(db, "state-dir", str(other)).namespaces == [default_namespace(str(other))]
    assert [c.metadata.get("turn_count") for c in db.lineage("state/engine_state")] == [2, None]


# --- references: namespace position -> text -> position --------------------------------------

NAMESPACE_TEXT = st.lists(
    st.one_of(
        st.sampled_from(["@current", "@fallback", "~", "~7", "@", "deadbeef", "0123456789", "x"]),
        st.sampled_from("0123456789abcdefABCDEF~@ "),
        TRICKY,
    ),
    min_size=1,
    max_size=8,
).map("".join)


@PROPERTY
@given(
    namespaces=st.lists(NAMESPACE_TEXT, min_size=1, max_size=6),
    backs=st.lists(st.sampled_from([0, 1, 7, 10, 123456789, MAX_BACK]), min_size=1, max_size=3),
)
def test_references_round_trip(namespaces: list[str], backs: list[int]) -> None:
    texts: dict[tuple[str, str, int], str] = {}
    for ns in namespaces:
        try:
            validation.namespace(ns)
        except errors.InvalidNamespaceError:
            continue
        for anchor in ("current", "fallback"):
            for back in backs:
                text = format_reference(ns, anchor, back)  # type: ignore[arg-type]
                assert parse_reference(text) == Reference(namespace=ns, anchor=anchor, back=back)  # type: ignore[arg-type]
                texts[(ns, anchor, back)] = text
    assert_injective(texts)


@pytest.mark.parametrize(
    ("namespace", "anchor", "back"),
    [
        ("run", "current", -1),
        ("run", "current", MAX_BACK + 1),
        ("run", "head", 0),
        ("", "current", 0),
    ],
)
def test_a_position_no_reference_can_name_is_refused(
    namespace: str, anchor: str, back: int
) -> None:
    with pytest.raises(errors.InvalidReferenceError):
        format_reference(namespace, anchor, back)  # type: ignore[arg-type]
