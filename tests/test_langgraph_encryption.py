"""The LangGraph saver encrypts: every thread under one key, or one key per tenant chosen
from the thread's config. Checked on a real compiled graph (messages with add_messages, an
interrupt so pending writes exist) against the raw bytes of the file and its WAL -- or, on
PostgreSQL, every value stored in the database's tables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from conftest import disk_bytes, raw_sql
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

import ckptdb
from ckptdb import errors
from ckptdb.integrations.langgraph import CkptdbSaver

KEY_A = bytes(range(32))
KEY_B = bytes(range(50, 82))


class Chat(TypedDict):
    messages: Annotated[list[Any], add_messages]


def _reply(state: Chat) -> dict[str, Any]:
    last = state["messages"][-1].content
    return {"messages": [AIMessage(content=f"MARKER-reply to {last} " + "x" * 600)]}


def _approve(state: Chat) -> dict[str, Any]:
    answer = interrupt({"question": "MARKER-question send it?"})
    return {"messages": [AIMessage(content=f"MARKER-approved {answer}")]}


def _graph(saver: CkptdbSaver) -> Any:
    g = StateGraph(Chat)
    g.add_node("reply", _reply)
    g.add_node("approve", _approve)
    g.add_edge(START, "reply")
    g.add_edge("reply", "approve")
    g.add_edge("approve", END)
    return g.compile(checkpointer=saver)


def _chat(graph: Any, thread: str, turns: int, **configurable: Any) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread, **configurable}}
    for turn in range(turns):
        graph.invoke({"messages": [HumanMessage(content=f"MARKER-user {thread} {turn}")]}, config)
        graph.invoke(Command(resume=f"yes {turn}"), config)
    return config


def test_one_key_for_every_thread_seals_checkpoints_and_pending_writes(location: str) -> None:
    path = location
    db = ckptdb.open(path, keys={"lg": KEY_A})
    saver = CkptdbSaver(db, encryption="lg")
    graph = _graph(saver)
    config = _chat(graph, "t1", 4)
    graph.invoke({"messages": [HumanMessage(content="MARKER-user pending")]}, config)
    state = graph.get_state(config)  # paused at the interrupt: pending writes stored
    assert state.next == ("approve",)
    assert [m.content for m in state.values["messages"]][-1].startswith("MARKER-reply")
    history = list(graph.get_state_history(config))
    assert len(history) > 8
    types = [str(r[0]) for r in raw_sql(path, "SELECT type FROM lg_write")]
    assert types and all(t.startswith("ckptdb-sealed/") for t in types)
    assert b"MARKER" not in disk_bytes(path)
    assert db.verify().ok
    assert [s.prefix for s in db.key_scopes()] == ["langgraph@lg/"]
    saver.close()
    db.close()
    # Another process's view: without the key nothing of the thread opens; with it, the
    # interrupted run resumes.
    with ckptdb.open(path) as keyless:
        with pytest.raises(errors.KeyUnavailableError):
            CkptdbSaver(keyless).get_tuple(config)
        assert keyless.verify().sealed_only == ["lg"]
    with ckptdb.open(path, keys={"lg": KEY_A}) as again:
        resumed = _graph(CkptdbSaver(again, encryption="lg")).invoke(Command(resume="ok"), config)
        assert resumed["messages"][-1].content == "MARKER-approved ok"
    assert b"MARKER" not in disk_bytes(path)


def _tenant(config: Any) -> str | None:
    return config["configurable"].get("tenant")


def test_a_key_per_tenant_from_the_config(location: str) -> None:
    path = location
    with ckptdb.open(path, keys={"tenant-a": KEY_A, "tenant-b": KEY_B}) as db:
        saver = CkptdbSaver(db, encryption=_tenant)
        graph = _graph(saver)
        a = _chat(graph, "a1", 2, tenant="tenant-a")
        b = _chat(graph, "b1", 2, tenant="tenant-b")
        plain = _chat(graph, "p1", 1)  # no tenant: not encrypted
        assert {s.key_id for s in db.key_scopes()} == {"tenant-a", "tenant-b"}
        assert db.namespaces()  # three threads
    disk = disk_bytes(path)
    assert b"MARKER-user a1" not in disk and b"MARKER-user b1" not in disk
    assert b"MARKER-user p1" in disk  # the plaintext thread is plaintext, as configured
    # Only tenant-a's key at hand: tenant-a works, tenant-b fails typed, plaintext works.
    with ckptdb.open(path, keys={"tenant-a": KEY_A}) as db:
        saver = CkptdbSaver(db, encryption=_tenant)
        assert saver.get_tuple(a) is not None
        assert saver.get_tuple(plain) is not None
        with pytest.raises(errors.KeyUnavailableError):
            saver.get_tuple(b)
        with pytest.raises(errors.KeyUnavailableError):
            _chat(_graph(saver), "b2", 1, tenant="tenant-b")


def test_copy_thread_within_and_across_key_scopes(location: str) -> None:
    path = location
    with ckptdb.open(path, keys={"tenant-a": KEY_A, "tenant-b": KEY_B}) as db:
        routes = {"a1": "tenant-a", "a2": "tenant-a", "b9": "tenant-b"}
        saver = CkptdbSaver(db, encryption=lambda c: routes.get(c["configurable"]["thread_id"]))
        graph = _graph(saver)
        config = _chat(graph, "a1", 2)
        graph.invoke({"messages": [HumanMessage(content="MARKER-user pending")]}, config)
        original = saver.get_tuple(config)
        assert original is not None and original.pending_writes
        for dst in ("a2", "b9"):
            saver.copy_thread("a1", dst)
            copy = saver.get_tuple({"configurable": {"thread_id": dst, "checkpoint_ns": ""}})
            assert copy is not None
            assert copy.checkpoint["channel_values"] == original.checkpoint["channel_values"]
            assert copy.pending_writes == original.pending_writes
        assert db.verify().ok
    assert b"MARKER" not in disk_bytes(path)


def test_a_sealed_pending_write_moved_to_another_row_does_not_open(tmp_path: Path) -> None:
    path = tmp_path / "moved.ckpt"
    with ckptdb.open(path, keys={"lg": KEY_A}) as db:
        saver = CkptdbSaver(db, encryption="lg")
        graph = _graph(saver)
        config = _chat(graph, "t1", 1)
        graph.invoke({"messages": [HumanMessage(content="MARKER-user pending")]}, config)
        assert saver.get_tuple(config) is not None
    rows = raw_sql(path, "SELECT write_id, value FROM lg_write ORDER BY checkpoint_id, write_id")
    assert len(rows) >= 2
    # Give a pending write of the newest checkpoint (what get_tuple returns) the sealed
    # value of an older row, and re-seal the digests as an attacker with write access could
    # (the digest is a plain checksum): the seal binds each value to its row.
    (_older, value), (newest, _) = rows[0], rows[-1]
    raw_sql(path, "UPDATE lg_write SET value = ? WHERE write_id = ?", (value, newest))
    from ckptdb.integrations.langgraph import sealing

    for write_id, *row in raw_sql(
        path,
        "SELECT write_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type,"
        " value, task_path FROM lg_write",
    ):
        raw_sql(
            path,
            "UPDATE lg_write SET digest = ? WHERE write_id = ?",
            (sealing.sealed_row(tuple(row))[9], write_id),
        )
    with ckptdb.open(path, keys={"lg": KEY_A}) as db, pytest.raises(errors.CorruptionError):
        CkptdbSaver(db, encryption="lg").get_tuple(config)


def test_shredding_a_tenant_removes_its_threads(tmp_path: Path) -> None:
    path = tmp_path / "shred.ckpt"
    with ckptdb.open(path, keys={"tenant-a": KEY_A, "tenant-b": KEY_B}) as db:
        saver = CkptdbSaver(db, encryption=_tenant)
        graph = _graph(saver)
        a = _chat(graph, "a1", 2, tenant="tenant-a")
        b = _chat(graph, "b1", 2, tenant="tenant-b")
        report = db.shred_key("tenant-a")
        assert report.namespaces and report.wal_truncated
        saver.delete_thread("a1")  # the saver's own rows of the thread
        assert saver.get_tuple(a) is None
        assert saver.get_tuple(b) is not None
        assert db.verify().ok
    assert b"MARKER-user a1" not in disk_bytes(path)


def test_a_bad_encryption_setting_is_refused(tmp_path: Path) -> None:
    with ckptdb.open(tmp_path / "x.ckpt", keys={"k": os.urandom(32)}) as db:
        with pytest.raises(errors.InvalidInputError):
            CkptdbSaver(db, encryption=42)  # type: ignore[arg-type]
        saver = CkptdbSaver(db, encryption=lambda c: 7)  # type: ignore[arg-type,return-value]
        with pytest.raises(errors.InvalidInputError):
            _chat(_graph(saver), "t", 1)
        with pytest.raises(errors.KeyUnavailableError):
            _chat(_graph(CkptdbSaver(db, encryption="missing")), "t2", 1)
