"""LangGraph envelope version 2 (issue 25, item 1): a put serializes the checkpoint and
every channel value that rides inline in ONE ``dumps_typed`` call (as SqliteSaver does),
larger values stay content-addressed blobs of their own, and a read takes one
``loads_typed``. Which values are small is learnt from the thread's last put (a channel
whose version did not change keeps its place) and from plain values' lengths -- a hint
that never changes what is stored. Envelope v1 files stay readable, alone and in one
thread with v2 checkpoints: ``tests/fixtures/langgraph-v3.ckpt`` holds v1 envelopes only
(see ``tests/test_langgraph_ttl.py`` for how it was made)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

import ckptdb
from ckptdb import errors
from ckptdb.integrations.langgraph import CkptdbSaver, _layout
from ckptdb.integrations.langgraph.importer import import_langgraph_sqlite

FIXTURE = Path(__file__).parent / "fixtures" / "langgraph-v3.ckpt"
KEY = bytes(range(32))


class CountingSerializer(JsonPlusSerializer):
    """LangGraph's serializer, counting its calls."""

    def __init__(self) -> None:
        super().__init__(pickle_fallback=False)
        self.dumps = 0
        self.loads = 0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.dumps += 1
        return super().dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.loads += 1
        return super().loads_typed(data)


def cfg(thread: str, checkpoint_id: str | None = None, ns: str = "") -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def checkpoint(i: int, values: dict[str, Any], versions: dict[str, Any]) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = f"1ef4{i:04}-0000-6000-8000-000000000000"
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions)
    return cp


def within(env: dict[str, Any]) -> list[str]:
    """The channels whose values ride inside a v2 envelope's checkpoint, sorted."""
    found = _layout.inside((env["checkpoint"][0], env["checkpoint"][1]))
    assert found is not None
    return sorted(found)


def raw_envelope(saver: CkptdbSaver, config: Any) -> dict[str, Any]:
    """The stored ``checkpoint`` entry of the checkpoint ``config`` names, as msgpack."""
    conf = config["configurable"]
    ckpt_id = saver._lookup(conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"])
    assert ckpt_id is not None
    raw = ormsgpack.unpackb(saver.db.get(ckpt_id).read(_layout.ENVELOPE_ENTRY))
    assert isinstance(raw, dict)
    return raw


def cold(saver: CkptdbSaver, config: Any) -> dict[str, Any]:
    """The channel values read back by another saver on the same handle, with nothing
    cached (the writer keeps its hints)."""
    reader = CkptdbSaver(saver.db, serde=saver.serde)
    got = reader.get_tuple(config)
    assert got is not None
    return dict(got.checkpoint["channel_values"])


def hot(saver: CkptdbSaver, config: Any) -> dict[str, Any]:
    got = saver.get_tuple(config)
    assert got is not None
    return dict(got.checkpoint["channel_values"])


# -- the write side: one serializer call -----------------------------------------------


def test_a_put_serializes_the_checkpoint_once_with_its_small_values(tmp_path: Path) -> None:
    """A 1 KB state of plain strings: one dumps_typed per put, from the first put on (a
    string is sized by its length); values of other kinds are sized once, then ride on
    their unchanged version; a changed one is sized again (one more call)."""
    serde = CountingSerializer()
    with CkptdbSaver(tmp_path / "once.ckpt", serde=serde) as saver:
        values: dict[str, Any] = {f"c{i}": f"{i}" * 100 for i in range(10)}
        versions = dict.fromkeys(values, 1)
        config = cfg("t")
        for step in range(5):
            values[f"c{step}"] = f"step {step} " * 10
            versions[f"c{step}"] += 1
            serde.dumps = 0
            config = saver.put(config, checkpoint(step, values, versions), {"step": step}, {})
            assert serde.dumps == 1
        env = raw_envelope(saver, config)
        assert env["v"] == 2 and within(env) == sorted(values)
        assert env["values"] == {} and env["blobs"] == {}
        assert hot(saver, config) == values == cold(saver, config)

        # Structured values: sized on their own once (one call each), then not again while
        # their version stays; a new version is sized again.
        structured: dict[str, Any] = {"d": {"k": [1, 2, 3]}, "l": ["x", "y"], "s": "plain"}
        versions = dict.fromkeys(structured, "1")
        serde.dumps = 0
        config = saver.put(cfg("u"), checkpoint(10, structured, versions), {}, {})
        assert serde.dumps == 1 + 2
        serde.dumps = 0
        config = saver.put(config, checkpoint(11, structured, versions), {}, {})
        assert serde.dumps == 1
        structured["d"] = {"k": [4]}
        versions["d"] = "2"
        serde.dumps = 0
        config = saver.put(config, checkpoint(12, structured, versions), {}, {})
        assert serde.dumps == 2
        assert cold(saver, config) == structured


def test_large_values_are_blobs_serialized_apart_and_reused_by_content(tmp_path: Path) -> None:
    """A value over the inline limit is a blob of its own: serialized on its own (and
    compared with the blob it had, so an unchanged one adds no bytes), the rest in the
    one call."""
    serde = CountingSerializer()
    path = tmp_path / "blobs.ckpt"
    with CkptdbSaver(path, serde=serde) as saver:
        values: dict[str, Any] = {"a": "A" * 5000, "b": "B" * 5000, "small": 1, "text": "hi"}
        versions = dict.fromkeys(values, 1)
        config = saver.put(cfg("t"), checkpoint(0, values, versions), {}, {})
        env = raw_envelope(saver, config)
        assert env["v"] == 2 and within(env) == ["small", "text"]
        assert sorted(env["blobs"]) == ["a", "b"]
        before = saver.db.stats().stored_bytes
        values["small"] = 2
        versions["small"] = 2
        serde.dumps = 0
        config = saver.put(config, checkpoint(1, values, versions), {}, {})
        assert serde.dumps == 1 + 2  # the checkpoint, and each blob channel to compare
        assert saver.db.stats().stored_bytes - before < 1000  # both blobs referenced
        assert hot(saver, config) == values == cold(saver, config)
        assert saver.db.verify().ok


def test_the_version_hint_never_changes_what_is_stored(tmp_path: Path) -> None:
    """A channel that rode inline keeps riding inline while its version stays, whatever
    its value does -- so a value changed without a version bump is still stored exactly,
    even one that grew past the inline limit; a new version moves it to a blob, and a
    blob that shrank back rides inline again."""
    with CkptdbSaver(tmp_path / "hint.ckpt") as saver:
        values: dict[str, Any] = {"c": {"n": 1}, "other": "x"}
        versions = {"c": "1", "other": "1"}
        config = saver.put(cfg("t"), checkpoint(0, values, versions), {}, {})
        values["c"] = {"n": 2}  # changed, same version
        config = saver.put(config, checkpoint(1, values, versions), {}, {})
        assert hot(saver, config) == values == cold(saver, config)
        values["c"] = {"n": "grown " * 200}  # over the limit, same version: still inline
        config = saver.put(config, checkpoint(2, values, versions), {}, {})
        assert "c" in within(raw_envelope(saver, config))
        assert hot(saver, config) == values == cold(saver, config)
        versions["c"] = "2"
        config = saver.put(config, checkpoint(3, values, versions), {}, {})
        assert "c" in raw_envelope(saver, config)["blobs"]
        assert hot(saver, config) == values == cold(saver, config)
        values["c"] = {"n": 3}  # a blob last time: sized (and compared) again
        config = saver.put(config, checkpoint(4, values, versions), {}, {})
        assert "c" in within(raw_envelope(saver, config))
        assert hot(saver, config) == values == cold(saver, config)
        assert saver.db.verify().ok


def test_values_msgpack_cannot_carry_inside_keep_their_type(tmp_path: Path) -> None:
    """A bytearray comes back from msgpack as bytes: small ones ride in the envelope with
    their own type, large ones are blobs; bytes and None ride inside."""
    with CkptdbSaver(tmp_path / "types.ckpt") as saver:
        values: dict[str, Any] = {
            "array": bytearray(b"ab"),
            "big_array": bytearray(b"z" * 1000),
            "raw": b"\x00\x01",
            "big_raw": b"\x02" * 1000,
            "none": None,
        }
        versions = dict.fromkeys(values, 1)
        config = saver.put(cfg("t"), checkpoint(0, values, versions), {}, {})
        config = saver.put(config, checkpoint(1, values, versions), {}, {})  # hints held
        env = raw_envelope(saver, config)
        assert within(env) == ["none", "raw"]
        assert sorted(env["values"]) == ["array"] and sorted(env["blobs"]) == [
            "big_array",
            "big_raw",
        ]
        for got in (hot(saver, config), cold(saver, config)):
            assert got == values
            assert type(got["array"]) is bytearray and type(got["big_array"]) is bytearray
            assert type(got["raw"]) is bytes and got["none"] is None
        values["raw"] = bytearray(b"\x00\x01")  # rode inside; same version, another type
        config = saver.put(config, checkpoint(2, values, versions), {}, {})
        assert "raw" in raw_envelope(saver, config)["values"]
        for got in (hot(saver, config), cold(saver, config)):
            assert type(got["raw"]) is bytearray and got == values


# -- the read side: one deserializer call --------------------------------------------------


@pytest.mark.parametrize("blob_channels", [0, 2])
def test_a_cold_read_deserializes_once(tmp_path: Path, blob_channels: int) -> None:
    """The inline part and the blob values are joined at the byte level (msgpack), so a
    cold get_tuple calls loads_typed once, with or without blob channels."""
    serde = CountingSerializer()
    with CkptdbSaver(tmp_path / "read.ckpt", serde=serde) as saver:
        values: dict[str, Any] = {f"s{i}": {"i": i} for i in range(20)}  # a map16 header
        values.update({f"b{i}": ["v" * 400, i] for i in range(blob_channels)})
        config = saver.put(cfg("t"), checkpoint(0, values, dict.fromkeys(values, 1)), {}, {})
        saver._cache.clear()
        serde.loads = 0
        got = saver.get_tuple(config)
        assert got is not None and got.checkpoint["channel_values"] == values
        assert serde.loads == 1


def test_merge_decodes_like_each_part_on_its_own() -> None:
    """merge() adds values to a v2 checkpoint's channel values at the byte level: decoding
    the result equals decoding the parts; it declines what it cannot join."""
    serde = JsonPlusSerializer(pickle_fallback=False)
    inside = {f"k{i}": i for i in range(17)}
    doc = serde.dumps_typed({"channel_values": inside, "v": 4, "id": "x", "versions_seen": {}})
    added = {"none": None, "big": "v" * 70_000, "nested": {"a": [1.5, None]}}
    parts = [(ch, serde.dumps_typed(v)) for ch, v in added.items()]
    merged = _layout.merge(doc, parts)
    assert merged is not None
    got = serde.loads_typed(("msgpack", merged))
    assert got["channel_values"] == {**inside, **added}
    assert {k: v for k, v in got.items() if k != "channel_values"} == {
        "v": 4,
        "id": "x",
        "versions_seen": {},
    }
    assert _layout.merge(doc, []) is doc[1]
    assert _layout.merge(doc, [("raw", serde.dumps_typed(b"xy"))]) is None
    assert _layout.merge(("json", b"{}"), []) is None
    assert _layout.merge(serde.dumps_typed({"v": 4, "channel_values": {}}), []) is None


# -- versions: a newer one refused, a malformed one damaged -----------------------------


def test_an_envelope_of_a_newer_version_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with CkptdbSaver(tmp_path / "newer.ckpt") as saver:
        config = saver.put(cfg("t"), checkpoint(0, {"a": 1}, {"a": 1}), {}, {})
        env = raw_envelope(saver, config)
        newer = ormsgpack.packb({**env, "v": 3})
        meta = _layout.checkpoint_metadata({}, "t", "", "1ef49999")[1]
        saver._commit(
            saver._namespace(cfg("t"), "t", ""),
            "t",
            "",
            "1ef49999",
            config["configurable"]["checkpoint_id"],
            None,
            {_layout.ENVELOPE_ENTRY: newer},
            meta,
            "test",
        )
        saver._cache.clear()
        with pytest.raises(errors.InvalidInputError, match=r"envelope version 3.*Upgrade ckptdb"):
            saver.get_tuple(cfg("t", "1ef49999"))
        assert hot(saver, config) == {"a": 1}  # the older checkpoint still reads


@pytest.mark.parametrize("doc", [{"v": 4}, {"channel_values": [1], "v": 4}])
def test_a_v2_checkpoint_without_its_map_of_channel_values_is_damage(
    tmp_path: Path, doc: dict[str, Any]
) -> None:
    serde = JsonPlusSerializer(pickle_fallback=False)
    with pytest.raises(errors.CorruptionError):
        _layout.inside(serde.dumps_typed(doc))
    with CkptdbSaver(tmp_path / "bad.ckpt") as saver:
        envelope = ormsgpack.packb(
            {
                "v": 2,
                "checkpoint": serde.dumps_typed(doc),
                "parent": None,
                "values": {},
                "blobs": {},
            }
        )
        meta = _layout.checkpoint_metadata({}, "t", "", "1ef40001")[1]
        namespace = saver._namespace(cfg("t"), "t", "")
        entries = {_layout.ENVELOPE_ENTRY: envelope}
        saver._commit(namespace, "t", "", "1ef40001", None, None, entries, meta, "test")
        with pytest.raises(errors.CorruptionError):
            saver.get_tuple(cfg("t"))


def test_which_channels_ride_inside_is_read_without_reviving_values() -> None:
    serde = JsonPlusSerializer(pickle_fallback=False)
    doc = serde.dumps_typed({"channel_values": {"a": 1, "m": HumanMessage("hi")}, "v": 4})
    assert _layout.inside(doc) == {"a", "m"}
    assert _layout.inside(("msgpack+aes", b"sealed")) is None  # the saver deserializes it


class _AesGcm:
    """A LangGraph cipher (``CipherProtocol``) over AES-GCM from ``cryptography``."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(12)
        return "aesgcm", nonce + self._aead.encrypt(nonce, plaintext, None)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "aesgcm"
        return self._aead.decrypt(ciphertext[:12], ciphertext[12:], None)


def test_an_encrypting_serializer_takes_the_deserializing_paths(tmp_path: Path) -> None:
    """With LangGraph's EncryptedSerializer nothing is joined at the byte level: reads,
    DeltaChannel seeds and prune deserialize the checkpoint to learn what rides inside."""
    serde = EncryptedSerializer(_AesGcm(KEY), JsonPlusSerializer(pickle_fallback=False))
    with CkptdbSaver(tmp_path / "sealed.ckpt", serde=serde) as saver:
        big = {"big": "B" * 3000}
        zeroth = saver.put(cfg("t"), checkpoint(0, {"msg": "z"}, {"msg": "0"}), {}, {})
        first = saver.put(zeroth, checkpoint(1, {"tiny": 1, **big}, {"tiny": "1"}), {}, {})
        delta = {"counters_since_delta_snapshot": {"tiny": 1}}
        last = saver.put(first, checkpoint(2, {"msg": "a"}, {"msg": "1"}), delta, {})
        env = raw_envelope(saver, first)
        assert env["v"] == 2 and env["checkpoint"][0] == "msgpack+aesgcm"
        assert hot(saver, first) == {"tiny": 1, **big} == cold(saver, first)
        got = saver.get_delta_channel_history(config=last, channels=["tiny", "big"])
        assert got["tiny"].get("seed") == 1 and got["big"].get("seed") == big["big"]
        saver.prune(["t"], strategy="keep_latest")
        kept = [t.checkpoint["channel_values"] for t in saver.list(cfg("t"))]
        assert kept == [{"msg": "a"}, {"tiny": 1, **big}]


# -- mixed versions: v1 history continued with v2 ----------------------------------------


def _fixture(tmp_path: Path) -> Path:
    path = tmp_path / "mixed.ckpt"
    shutil.copyfile(FIXTURE, path)
    return path


def _alpha(i: int) -> dict[str, Any]:
    """What the fixture's thread ``alpha`` stored at step ``i`` (see its script)."""
    return {"msg": f"alpha {i}", "big": "x" * 400 + str(i)}


def test_v1_checkpoints_read_continue_and_seed_beside_v2(tmp_path: Path) -> None:
    """A thread of v1 envelopes continued by v2 puts: every checkpoint reads back, lists in
    order, seeds DeltaChannel history across the boundary (inline and blob values of
    either version) like LangGraph's default walk, and copies by reference."""
    with CkptdbSaver(_fixture(tmp_path)) as saver:
        old = [t.config for t in saver.list(cfg("alpha"))][::-1]
        assert [raw_envelope(saver, c)["v"] for c in old] == [1, 1, 1]
        config = old[-1]
        made = []
        for i in (3, 4):
            values = {**_alpha(i), "tiny": i}
            versions = {"msg": str(i + 1), "big": str(i + 1), "tiny": str(i)}
            config = saver.put(config, checkpoint(i, values, versions), {"step": i}, {})
            saver.put_writes(config, [("msg", f"pending {i}")], f"task-{i}")
            made.append(config)
        assert [raw_envelope(saver, c)["v"] for c in made] == [2, 2]
        for i, c in enumerate(old):
            assert hot(saver, c) == _alpha(i) == cold(saver, c)
        assert cold(saver, made[1]) == {**_alpha(4), "tiny": 4}
        listed = [t.checkpoint["id"] for t in saver.list(cfg("alpha"))]
        assert listed == [c["configurable"]["checkpoint_id"] for c in [*old, *made][::-1]]
        for target in (*made, old[-1]):
            channels = ["msg", "big", "tiny"]
            saver._cache.clear()
            got = saver.get_delta_channel_history(config=target, channels=channels)
            expected = BaseCheckpointSaver.get_delta_channel_history(
                saver, config=target, channels=channels
            )
            assert got == expected
        first = saver.get_delta_channel_history(config=made[0], channels=["msg", "big"])
        assert {ch: h.get("seed") for ch, h in first.items()} == _alpha(2)  # from v1
        second = saver.get_delta_channel_history(config=made[1], channels=["big", "tiny"])
        assert second["big"].get("seed") == _alpha(3)["big"]  # a v2 blob
        assert second["tiny"].get("seed") == 3  # a v2 inline value
        saver.copy_thread("alpha", "alpha-copy")
        copies = [t for t in saver.list(cfg("alpha-copy"))]
        assert [t.checkpoint for t in copies] == [t.checkpoint for t in saver.list(cfg("alpha"))]
        assert saver.db.verify().ok


def test_copy_by_value_into_a_key_scope_keeps_both_versions(tmp_path: Path) -> None:
    path = _fixture(tmp_path)
    with ckptdb.open(path, keys={"k": KEY}) as db:
        saver = CkptdbSaver(
            db, encryption=lambda c: "k" if c["configurable"]["thread_id"] == "sealed" else None
        )
        config = next(t.config for t in saver.list(cfg("alpha"), limit=1))
        config = saver.put(config, checkpoint(3, _alpha(3), {"msg": "4", "big": "4"}), {}, {})
        saver.copy_thread("alpha", "sealed")
        source = [t.checkpoint for t in saver.list(cfg("alpha"))]
        saver._cache.clear()
        assert [t.checkpoint for t in saver.list(cfg("sealed"))] == source
        assert len(source) == 4
        assert db.verify().ok


def test_prune_keeps_delta_ancestors_found_in_either_version(tmp_path: Path) -> None:
    """prune(keep_latest) keeps the ancestors a delta channel is rebuilt from, reading
    which channels each stores from its envelope: a v1 blob, a v2 inline value."""
    with CkptdbSaver(_fixture(tmp_path)) as saver:
        config = next(t.config for t in saver.list(cfg("alpha"), limit=1))
        delta = {"counters_since_delta_snapshot": {"big": 1}}
        config = saver.put(config, checkpoint(3, {"msg": "m3"}, {"msg": "4"}), delta, {})
        saver.prune(["alpha"], strategy="keep_latest")
        kept = [t.checkpoint["channel_values"] for t in saver.list(cfg("alpha"))]
        assert kept == [{"msg": "m3"}, _alpha(2)]  # the v1 parent holds "big"

        zeroth = saver.put(cfg("v2"), checkpoint(9, {"msg": "z"}, {"msg": "0"}), {}, {})
        first = saver.put(zeroth, checkpoint(10, {"tiny": 1}, {"tiny": "1"}), {}, {})
        second = saver.put(first, checkpoint(11, {"msg": "a"}, {"msg": "1"}), {}, {})
        delta = {"counters_since_delta_snapshot": {"tiny": 2}}
        saver.put(second, checkpoint(12, {"msg": "b"}, {"msg": "2"}), delta, {})
        saver.prune(["v2"], strategy="keep_latest")
        kept = [t.checkpoint["channel_values"] for t in saver.list(cfg("v2"))]
        assert kept == [{"msg": "b"}, {"msg": "a"}, {"tiny": 1}]
        assert saver.db.verify().ok


# -- the importer writes v2 ---------------------------------------------------------------


def test_an_imported_checkpoint_is_a_v2_envelope(tmp_path: Path) -> None:
    source = tmp_path / "source.sqlite"
    values = {"big": "B" * 3000, "small": {"k": 1}, "n": None}
    with closing(sqlite3.connect(source)) as conn:
        sqlite_saver = SqliteSaver(conn)
        sqlite_saver.setup()
        config = sqlite_saver.put(
            cfg("t"), checkpoint(0, values, dict.fromkeys(values, 1)), {"step": 0}, {}
        )
    with ckptdb.open(tmp_path / "target.ckpt") as db:
        report = import_langgraph_sqlite(db, source)
        assert not report.skipped and len(report.imported) == 1
        saver = CkptdbSaver(db)
        env = raw_envelope(saver, config)
        assert env["v"] == 2 and within(env) == ["n", "small"]
        assert sorted(env["blobs"]) == ["big"]
        assert cold(saver, config) == values == hot(saver, config)


# -- any values, any version bumps ---------------------------------------------------------

VALUE = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=400),
    st.binary(max_size=400),
    st.binary(max_size=400).map(bytearray),
    st.lists(st.integers(0, 9), max_size=120),
    st.dictionaries(st.text(max_size=5), st.text(max_size=80), max_size=6),
)
STEP = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]), st.tuples(VALUE, st.booleans()), max_size=4
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(STEP, min_size=1, max_size=6), st.sampled_from([0, 64, 256]))
def test_every_put_reads_back_exactly(
    tmp_path: Path, steps: list[dict[str, tuple[Any, bool]]], inline_max: int
) -> None:
    """Whatever the values and whether their versions move, every checkpoint reads back
    as it was put, with its types, hot and cold."""
    path = tmp_path / f"any-{inline_max}.ckpt"
    path.unlink(missing_ok=True)
    with CkptdbSaver(path, inline_max=inline_max) as saver:
        config = cfg("t")
        versions: dict[str, int] = {}
        for i, step in enumerate(steps):
            values = {ch: value for ch, (value, _) in step.items()}
            for ch, (_, bump) in step.items():
                versions[ch] = versions.get(ch, 0) + int(bump)
            config = saver.put(config, checkpoint(i, values, versions), {}, {})
            for got in (hot(saver, config), cold(saver, config)):
                assert got == values
                assert [type(v) for v in got.values()] == [type(values[ch]) for ch in got]
        assert saver.db.verify().ok
