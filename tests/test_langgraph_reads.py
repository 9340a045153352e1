"""The read path: a verified cache of immutable content, a constant number of statements
per call, and collected checkpoints still reading as gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

import ckptdb
from ckptdb import connection
from ckptdb.integrations.langgraph import CkptdbSaver


def cfg(thread: str, checkpoint_id: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _chain(saver: CkptdbSaver, n: int, thread: str = "t") -> list[Any]:
    config, out = cfg(thread), []
    for i in range(n):
        cp = empty_checkpoint()
        cp["id"] = f"1ef2{i:04}-0000-6000-8000-000000000000"
        cp["channel_values"] = {"small": i, "big": "v" * 500 + str(i), "same": "s" * 600}
        config = saver.put(config, cp, {"step": i, "source": "loop"}, {})
        saver.put_writes(config, [("small", i), ("big", "w" * 400)], f"task{i}")
        out.append(config)
    return out


def _count_statements(saver: CkptdbSaver, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the saver's reads run from now on (through Session.execute/one)."""
    seen: list[str] = []
    real = connection.Connection.execute

    def execute(self: Any, sql: str, params: Any = ()) -> Any:
        seen.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(connection.Connection, "execute", execute)
    return seen


def test_the_hot_path_reads_back_what_it_wrote_without_reading_blobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with CkptdbSaver(tmp_path / "hot.ckpt") as saver:
        configs = _chain(saver, 3)

        def no_get(checkpoint_ids: Any) -> Any:
            raise AssertionError("get_tuple re-read a checkpoint this saver just wrote")

        monkeypatch.setattr(saver.db, "get_many", no_get)
        latest = saver.get_tuple(cfg("t"))
        assert latest is not None
        assert latest.config == configs[-1]
        assert latest.checkpoint["channel_values"]["big"] == "v" * 500 + "2"
        assert [w[2] for w in latest.pending_writes or []] == [2, "w" * 400]
        latest.checkpoint["channel_values"]["big"] = "mutated"  # callers own their copy
        again = saver.get_tuple(cfg("t"))
        assert again is not None and again.checkpoint["channel_values"]["big"] != "mutated"


def test_list_and_get_tuple_run_a_constant_number_of_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with CkptdbSaver(tmp_path / "n.ckpt") as saver:
        _chain(saver, 30)
        saver._cache.clear()
        cold = list(saver.list(cfg("t"), limit=10))  # fills the cache (verified reads)
        assert len(cold) == 10
        seen = _count_statements(saver, monkeypatch)
        warm = list(saver.list(cfg("t"), limit=10))
        assert [t.config for t in warm] == [t.config for t in cold]
        assert [t.pending_writes for t in warm] == [t.pending_writes for t in cold]
        ten = len(seen)
        seen.clear()
        assert len(list(saver.list(cfg("t"), limit=3))) == 3
        assert len(seen) == ten  # same statements whatever the page holds
        seen.clear()
        assert saver.get_tuple(cfg("t")) is not None
        assert len(seen) <= 4  # newest id, its row + writes (one join), which exist
        seen.clear()
        assert saver.get_tuple(cfg("t", cold[5].checkpoint["id"])) is not None
        assert len(seen) <= 4
    assert ten <= 6, seen


def test_cold_reads_filters_and_deletes_run_a_constant_number_of_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server reads threads it has not touched since it started: a page of history, a
    # metadata search and a delete must not cost a statement per checkpoint.
    path = tmp_path / "cold.ckpt"
    with CkptdbSaver(path) as writer:
        _chain(writer, 3, "short")
        _chain(writer, 30, "long")
    counts: dict[str, list[int]] = {}
    for thread, n in (("short", 3), ("long", 30)):
        with CkptdbSaver(path) as saver:  # nothing cached
            seen = _count_statements(saver, monkeypatch)
            page = list(saver.list(cfg(thread), limit=50))
            assert [t.metadata["step"] for t in page] == list(range(n - 1, -1, -1))
            assert all(t.pending_writes for t in page)
            listed = len(seen)
            seen.clear()
            found = list(saver.list(None, filter={"step": 2, "source": "loop"}))
            alive = ["long", "short"] if thread == "short" else ["long"]  # short went first
            assert sorted(t.config["configurable"]["thread_id"] for t in found) == alive
            searched = len(seen)
            seen.clear()
            saver.delete_thread(thread)
            assert saver.get_tuple(cfg(thread)) is None
            counts[thread] = [listed, searched, len(seen)]
            monkeypatch.undo()
    assert counts["short"][0] == counts["long"][0], counts
    assert counts["short"][2] == counts["long"][2], counts
    assert counts["long"][1] <= 10, counts  # the search ran in SQL, not per checkpoint


@pytest.mark.parametrize(
    "wanted",
    [
        {"step": 1},
        {"step": 1.0},
        {"step": True},
        {"flag": 1},
        {"flag": True},
        {"flag": 0},
        {"flag": None},
        {"name": 'quote " and \\ back'},
        {"name": "é"},
        {"nested": {"a": [1, 2]}},
        {"step": 2, "name": "é"},
        {'odd "key"': 5},
        {"missing": None, "step": 3},
    ],
)
def test_a_metadata_filter_matches_what_python_equality_says(
    tmp_path: Path, wanted: dict[str, Any]
) -> None:
    # SQL narrows the search (instr on the canonical text, json_extract); every answer is
    # still what comparing the metadata in Python gives, for every kind of value.
    values: list[dict[str, Any]] = [
        {"step": 1, "flag": True, "name": "é"},
        {"step": 1.0, "flag": 1, "name": 'quote " and \\ back'},
        {"step": 2, "flag": 0, "name": "é", "nested": {"a": [1, 2]}},
        {"step": 3, "flag": None, 'odd "key"': 5},
        {"step": 10, "flag": False, "name": "e"},
        {"step": 21},
    ]
    with CkptdbSaver(tmp_path / "f.ckpt") as saver:
        for i, meta in enumerate(values):
            cp = empty_checkpoint()
            cp["id"] = f"1ef2{i:04}-0000-6000-8000-000000000000"
            saver.put(cfg(f"t{i}"), cp, meta, {})
        expected = sorted(
            f"t{i}"
            for i, meta in enumerate(values)
            if all(meta.get(k) == v for k, v in wanted.items())
        )
        got = sorted(t.config["configurable"]["thread_id"] for t in saver.list(None, filter=wanted))
        assert got == expected


def test_a_cached_checkpoint_collected_outside_the_saver_reads_as_gone(tmp_path: Path) -> None:
    path = tmp_path / "gone.ckpt"
    with CkptdbSaver(path) as saver:
        configs = _chain(saver, 3)
        assert saver.get_tuple(configs[0]) is not None  # cached now
        saver.db.gc(ckptdb.RetentionPolicy(keep_last=1), namespaces=["langgraph/t"])
        # ckptdb kept CURRENT and its fallback: the oldest is gone, though it was cached
        assert saver.get_tuple(configs[0]) is None
        assert [t.config for t in saver.list(cfg("t"))] == [configs[2], configs[1]]


def test_reads_in_another_process_see_the_same_as_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "two.ckpt"
    with CkptdbSaver(path) as writer:
        configs = _chain(writer, 5)
        with CkptdbSaver(ckptdb.open(path, readonly=True)) as reader:
            for config in configs:
                a, b = writer.get_tuple(config), reader.get_tuple(config)
                assert a is not None and b is not None
                assert (a.checkpoint, a.metadata, a.pending_writes, a.parent_config) == (
                    b.checkpoint,
                    b.metadata,
                    b.pending_writes,
                    b.parent_config,
                )


def test_the_spliced_checkpoint_decodes_like_each_value_on_its_own(tmp_path: Path) -> None:
    """One msgpack document of body + channel values decodes to what the per-value decoding
    gives, for every kind of value the serializer writes; values it cannot splice (bytes,
    bytearray) take the per-value path, and a cold read gives what the hot one gave."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from ckptdb.integrations.langgraph import _layout

    serde = JsonPlusSerializer()
    values: dict[str, Any] = {
        "none": None,
        "int": 7,
        "text": "x" * 300,
        "nested": {"a": [1, 2.5, {"b": None}], "c": (1, 2)},
        "many": list(range(40)),
        **{f"k{i}": i for i in range(20)},  # more than 15 keys: a map16 header
    }
    body = {"v": 4, "id": "1ef2", "channel_versions": {"int": "1"}, "versions_seen": {}}
    typed = [(ch, serde.dumps_typed(v)) for ch, v in values.items()]
    spliced = _layout.splice(serde.dumps_typed(body), typed)
    assert spliced is not None
    expected = serde.loads_typed(serde.dumps_typed(body))
    expected["channel_values"] = {ch: serde.loads_typed(t) for ch, t in typed}
    assert serde.loads_typed(("msgpack", spliced)) == expected
    assert _layout.splice(serde.dumps_typed(body), [("raw", serde.dumps_typed(b"xy"))]) is None
    assert _layout.splice(("json", b"{}"), []) is None

    with CkptdbSaver(tmp_path / "splice.ckpt") as saver:
        cp = empty_checkpoint()
        cp["id"] = "1ef20000-0000-6000-8000-000000000000"
        cp["channel_values"] = {**values, "raw": b"\x00\x01", "array": bytearray(b"ab")}
        config = saver.put(cfg("t"), cp, {"source": "loop", "step": 0}, {})
        hot = saver.get_tuple(config)
        saver._cache.clear()
        cold = saver.get_tuple(config)
        assert hot is not None and cold is not None
        assert hot.checkpoint == cold.checkpoint
        got = hot.checkpoint["channel_values"]
        assert got["raw"] == b"\x00\x01" and isinstance(got["array"], bytearray)
        assert got["nested"] == serde.loads_typed(serde.dumps_typed(values["nested"]))
        assert got["k19"] == 19 and got["none"] is None


def test_the_newest_is_read_even_when_another_saver_wrote_it(tmp_path: Path) -> None:
    """get_tuple of the newest tries this saver's own last put first, and takes it only if
    no newer checkpoint exists: one written since by another saver (another process) wins,
    and so does an older one when the last put was deleted."""
    path = tmp_path / "two-writers.ckpt"
    with CkptdbSaver(path) as a, CkptdbSaver(ckptdb.open(path)) as b:
        mine = _chain(a, 2)
        hot = a.get_tuple(cfg("t"))
        assert hot is not None and hot.config == mine[-1]
        cp = empty_checkpoint()
        cp["id"] = "1ef29999-0000-6000-8000-000000000000"  # sorts after a's ids
        cp["channel_values"] = {"small": 99}
        theirs = b.put(mine[-1], cp, {"step": 99, "source": "loop"}, {})
        newest = a.get_tuple(cfg("t"))
        assert newest is not None and newest.config == theirs
        assert newest.checkpoint["channel_values"] == {"small": 99}
        with b.db.write_session() as s:
            s.execute("DELETE FROM lg_checkpoint WHERE checkpoint_id = ?", (cp["id"],))
            s.execute(
                "DELETE FROM lg_checkpoint WHERE checkpoint_id = ?",
                (mine[-1]["configurable"]["checkpoint_id"],),
            )
        older = a.get_tuple(cfg("t"))
        assert older is not None and older.config == mine[0]


def test_get_tuple_by_id_is_consistent_when_a_gc_runs_between_its_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader whose cache is cold must read the checkpoint after finding its row; a GC in
    # another handle (standing in for another process) lands right between the two. The
    # answer must be the one of a single snapshot: the checkpoint as it was when found.
    path = tmp_path / "race.ckpt"
    with CkptdbSaver(path) as writer:
        configs = _chain(writer, 5)
        with CkptdbSaver(ckptdb.open(path)) as reader:
            real_get = reader.db.get_many
            collected: list[int] = []

            def get_then_gc(checkpoint_ids: Any, **kwargs: Any) -> Any:
                found = real_get(checkpoint_ids, **kwargs)
                report = writer.db.gc(
                    ckptdb.RetentionPolicy(keep_last=1), namespaces=["langgraph/t"], grace=0
                )
                collected.append(report.checkpoints_deleted)
                return found

            monkeypatch.setattr(reader.db, "get_many", get_then_gc)
            first = reader.get_tuple(configs[0])
            assert collected and collected[0] >= 1  # the oldest really went meanwhile
            assert first is not None
            assert (
                first.config["configurable"]["checkpoint_id"]
                == configs[0]["configurable"]["checkpoint_id"]
            )
            assert first.checkpoint["channel_values"]["small"] == 0
            monkeypatch.undo()
            assert reader.get_tuple(configs[0]) is None  # and afterwards it reads as gone


def test_get_tuple_of_a_sealed_thread_is_consistent_when_it_is_deleted_between_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = bytes(range(32))
    path = tmp_path / "sealed-race.ckpt"
    with CkptdbSaver(ckptdb.open(path, keys={"lg": key}), encryption="lg") as writer:
        config = cfg("t")
        for i in range(3):
            cp = empty_checkpoint()
            cp["id"] = f"1ef2{i:04}-0000-6000-8000-000000000000"
            cp["channel_values"] = {"x": i}
            config = writer.put(config, cp, {"step": i}, {})
            writer.put_writes(config, [("x", i)], f"task{i}")
        with CkptdbSaver(ckptdb.open(path, keys={"lg": key}), encryption="lg") as reader:
            real = reader._registered_namespace
            deleted: list[str] = []

            def look_up_then_delete(thread_id: str, ns: str) -> Any:
                if not deleted:
                    writer.delete_thread("t")  # lands between the row and its key scope
                    deleted.append(thread_id)
                return real(thread_id, ns)

            monkeypatch.setattr(reader, "_registered_namespace", look_up_then_delete)
            found = reader.get_tuple(config)
            assert deleted == ["t"]
            assert found is not None  # what one snapshot held, its sealed write opened
            assert found.checkpoint["channel_values"]["x"] == 2
            assert [w[2] for w in found.pending_writes or []] == [2]


def test_delete_thread_is_one_transaction_with_the_ckptdb_drop(tmp_path: Path) -> None:
    # The saver's rows, registration and activity go in the commit that drops the
    # namespace: never a moment where one is gone and the other not.
    path = tmp_path / "del.ckpt"
    with CkptdbSaver(path) as saver:
        _chain(saver, 5, "doomed")
        _chain(saver, 2, "kept")
        raw = saver.db._handle.store.conn._raw
        began: list[str] = []

        def trace(_cursor: Any, sql: str, _bindings: Any) -> bool:
            if sql.lstrip().upper().startswith("BEGIN IMMEDIATE"):
                began.append(sql)
            return True

        raw.exec_trace = trace
        saver.delete_thread("doomed")
        raw.exec_trace = None
        assert len(began) == 1, began
        assert saver.get_tuple(cfg("doomed")) is None
        assert saver.get_tuple(cfg("kept")) is not None
        with saver.db.read_session() as s:
            for table in ("lg_checkpoint", "lg_write", "lg_thread"):
                assert s.scalar(f"SELECT count(*) FROM {table} WHERE thread_id = 'doomed'") == 0
            assert s.scalar("SELECT count(*) FROM lg_namespace WHERE thread_id = 'doomed'") == 0
        assert saver.db.verify().ok
