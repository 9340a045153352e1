"""A real LangGraph graph on CkptdbSaver: interrupt in one process, resume in another --
each test on an SQLite file and on a PostgreSQL database.

The graph plans, asks a human through ``interrupt()`` and acts on the answer. The first
process runs it until the interrupt; a second Python process (this file run as a script)
opens the same ckptdb file with its own saver and resumes the thread with
``Command(resume=...)``. Also covered: the async saver, time travel (a fork from an older
checkpoint), subgraph namespaces, and a DeltaChannel thread pruned with ``keep_latest``
that still rebuilds the same state.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import operator
import subprocess
import sys
from typing import Annotated, Any, TypedDict

from conftest import child_env
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from ckptdb.integrations.langgraph import AsyncCkptdbSaver, CkptdbSaver


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    answer: str


def plan(state: State) -> dict[str, Any]:
    return {"items": ["planned"]}


def review(state: State) -> dict[str, Any]:
    answer = interrupt({"question": "approve the plan?", "items": state["items"]})
    return {"answer": str(answer), "items": [f"reviewed:{answer}"]}


def act(state: State) -> dict[str, Any]:
    return {"items": [f"acted:{state['answer']}"]}


def build(saver: Any) -> Any:
    """The graph under test, compiled with ``saver``."""
    g = StateGraph(State)
    g.add_node("plan", plan)
    g.add_node("review", review)
    g.add_node("act", act)
    g.add_edge(START, "plan")
    g.add_edge("plan", "review")
    g.add_edge("review", "act")
    g.add_edge("act", END)
    return g.compile(checkpointer=saver)


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def resume_in_child(db_path: str, thread: str, answer: str) -> dict[str, Any]:
    """Resume ``thread`` in a separate Python process; returns what it printed."""
    proc = subprocess.run(
        [sys.executable, __file__, "resume", str(db_path), thread, answer],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_interrupt_then_resume_in_a_second_process(location: str) -> None:
    db_path = location
    with CkptdbSaver(db_path) as saver:
        graph = build(saver)
        first = graph.invoke({"items": ["start"]}, config("t1"))
        assert "__interrupt__" in first
        assert first["__interrupt__"][0].value["question"] == "approve the plan?"
        snapshot = graph.get_state(config("t1"))
        assert snapshot.next == ("review",)
        assert snapshot.values["items"] == ["start", "planned"]
        # The interrupt lives in the pending writes of the newest checkpoint.
        latest = saver.get_tuple(config("t1"))
        assert latest is not None and latest.pending_writes
        assert any(w[1] == "__interrupt__" for w in latest.pending_writes)

    child = resume_in_child(db_path, "t1", "yes")
    assert child["items"] == ["start", "planned", "reviewed:yes", "acted:yes"]
    assert child["next"] == []

    with CkptdbSaver(db_path) as saver:
        graph = build(saver)
        final = graph.get_state(config("t1"))
        assert final.next == ()
        assert final.values["items"] == ["start", "planned", "reviewed:yes", "acted:yes"]
        history = list(graph.get_state_history(config("t1")))
        assert len(history) >= 5
        ids = [h.config["configurable"]["checkpoint_id"] for h in history]
        assert ids == sorted(ids, reverse=True)
        # Parent links form one chain back to the input checkpoint.
        for newer, older in itertools.pairwise(history):
            assert newer.parent_config is not None
            assert (
                newer.parent_config["configurable"]["checkpoint_id"]
                == (older.config["configurable"]["checkpoint_id"])
            )


def test_async_saver_interrupt_then_sync_resume_elsewhere(location: str) -> None:
    db_path = location

    async def first_half() -> None:
        async with await AsyncCkptdbSaver.open(db_path) as saver:
            graph = build(saver)
            out = await graph.ainvoke({"items": ["a"]}, config("t2"))
            assert "__interrupt__" in out
            snap = await graph.aget_state(config("t2"))
            assert snap.next == ("review",)

    asyncio.run(first_half())
    child = resume_in_child(db_path, "t2", "later")
    assert child["items"] == ["a", "planned", "reviewed:later", "acted:later"]


def test_time_travel_fork_from_an_older_checkpoint(location: str) -> None:
    with CkptdbSaver(location) as saver:
        graph = build(saver)
        graph.invoke({"items": ["x"]}, config("t3"))
        graph.invoke(Command(resume="no"), config("t3"))
        history = list(graph.get_state_history(config("t3")))
        at_review = next(h for h in history if h.next == ("review",))
        # Fork from the older checkpoint: answer the review differently on a new branch
        # (a put whose parent is not the newest checkpoint), then run the branch on.
        branch = graph.update_state(
            at_review.config, {"answer": "yes", "items": ["reviewed:yes"]}, as_node="review"
        )
        forked = graph.invoke(None, branch)
        assert forked["items"] == ["x", "planned", "reviewed:yes", "acted:yes"]
        assert graph.get_state(config("t3")).values["answer"] == "yes"
        # Both branches stay readable; the fork's parent is the old checkpoint.
        answers = {h.values.get("answer") for h in graph.get_state_history(config("t3"))}
        assert {"yes", "no"} <= answers
        fork_tuple = saver.get_tuple(branch)
        assert fork_tuple is not None and fork_tuple.parent_config is not None
        assert (
            fork_tuple.parent_config["configurable"]["checkpoint_id"]
            == (at_review.config["configurable"]["checkpoint_id"])
        )


def test_subgraph_checkpoints_live_in_their_own_namespace(location: str) -> None:
    class Inner(TypedDict):
        items: Annotated[list[str], operator.add]

    inner = StateGraph(Inner)
    inner.add_node("ask", lambda s: {"items": [f"inner:{interrupt('go?')}"]})
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    outer = StateGraph(Inner)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    with CkptdbSaver(location) as saver:
        graph = outer.compile(checkpointer=saver)
        graph.invoke({"items": ["o"]}, config("t4"))
        namespaces = {
            t.config["configurable"]["checkpoint_ns"] for t in saver.list(config("t4") | {})
        }
        assert "" in namespaces and any(ns.startswith("sub:") for ns in namespaces)
        result = graph.invoke(Command(resume="ok"), config("t4"))
        assert result["items"] == ["o", "o", "inner:ok"] or result["items"][-1] == "inner:ok"
        saver.prune(["t4"], strategy="keep_latest")
        per_ns: dict[str, int] = {}
        for t in saver.list({"configurable": {"thread_id": "t4"}}):
            ns = t.config["configurable"]["checkpoint_ns"]
            per_ns[ns] = per_ns.get(ns, 0) + 1
        assert per_ns and all(n == 1 for n in per_ns.values())
        assert graph.get_state(config("t4")).values["items"][-1] == "inner:ok"


def _concat(state: Any, writes: Any) -> list[str]:
    out = list(state) if isinstance(state, list) else []
    for w in writes:
        out.extend(w)
    return out


class DeltaState(TypedDict):
    log: Annotated[list[str], DeltaChannel(_concat, snapshot_frequency=4)]
    n: int


def test_prune_keeps_the_history_a_delta_channel_is_rebuilt_from(location: str) -> None:
    g = StateGraph(DeltaState)
    g.add_node("step", lambda s: {"log": [f"s{s['n']}"], "n": s["n"] + 1})
    g.add_conditional_edges("step", lambda s: END if s["n"] >= 10 else "step")
    g.add_edge(START, "step")
    db_path = location
    with CkptdbSaver(db_path) as saver:
        graph = g.compile(checkpointer=saver)
        graph.invoke({"log": ["in"], "n": 0}, config("d"))
        before = graph.get_state(config("d")).values
        assert before["log"] == ["in"] + [f"s{i}" for i in range(10)]
        total = len(list(saver.list(config("d"))))
        saver.prune(["d"], strategy="keep_latest")
        kept = len(list(saver.list(config("d"))))
        assert 1 < kept < total  # the ancestors back to the last snapshot survive
        assert graph.get_state(config("d")).values == before
    # and in a fresh process too
    proc = subprocess.run(
        [sys.executable, __file__, "delta", str(db_path)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == before


def _child(argv: list[str]) -> None:
    if argv[0] == "resume":
        db_path, thread, answer = argv[1:4]
        with CkptdbSaver(db_path) as saver:
            graph = build(saver)
            state = graph.invoke(Command(resume=answer), config(thread))
            snap = graph.get_state(config(thread))
            print(json.dumps({"items": state["items"], "next": list(snap.next)}))
    elif argv[0] == "delta":
        g = StateGraph(DeltaState)
        g.add_node("step", lambda s: {"log": [f"s{s['n']}"], "n": s["n"] + 1})
        g.add_conditional_edges("step", lambda s: END if s["n"] >= 10 else "step")
        g.add_edge(START, "step")
        with CkptdbSaver(argv[1]) as saver:
            print(json.dumps(g.compile(checkpointer=saver).get_state(config("d")).values))


if __name__ == "__main__":
    _child(sys.argv[1:])
