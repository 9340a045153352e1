"""Faults on PostgreSQL, through the public API: the server crashing mid-commit, clients
killed mid-commit, sessions terminated between COMMIT and its answer. No acknowledged
checkpoint is lost, every unknown outcome resolves by retrying, and no namespace forks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import spawn_script

import ckptdb
from ckptdb.testing.postgres import PostgresServer

#: A writer that commits until its deadline, retrying whatever a fault makes retryable,
#: and prints one JSON line per acknowledgement as it gets it (so a killed writer's acks
#: survive it): [namespace, checkpoint id, n].
_WRITER = textwrap.dedent(
    """
    import json, sys, time
    import ckptdb
    from ckptdb import errors
    url, name, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    RETRY = (errors.CommitOutcomeUnknownError, errors.StorageError, errors.BusyTimeoutError)
    deadline = time.monotonic() + seconds
    db = None
    n = 0
    while time.monotonic() < deadline:
        ns = f"{name}/{n % 2}"
        entries = {"n": f"{name}-{n}".encode(), "big": bytes([n % 251]) * 70_000}
        try:
            if db is None:
                db = ckptdb.open(url, busy_timeout=30)
            ack = db.commit(ns, entries)
        except RETRY:
            time.sleep(0.05)  # the server is away, or the outcome unknown: the same commit again
            continue
        print(json.dumps([ns, ack.checkpoint_id, n]), flush=True)
        n += 1
    """
)


def _writers(url: str, tmp_path: Path, count: int, seconds: float) -> list[subprocess.Popen[str]]:
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    return [
        spawn_script(script, url, f"w{i}", str(seconds), new_session=True) for i in range(count)
    ]


def _acks(outputs: list[str]) -> list[list[Any]]:
    return [json.loads(line) for out in outputs for line in out.splitlines() if line.strip()]


def _check(url: str, acks: list[list[Any]]) -> None:
    """Every acknowledged checkpoint is stored and reads back; each namespace is one line
    holding its acks in order (so no fork, nothing acknowledged and then lost)."""
    by_ns: dict[str, list[str]] = {}
    for ns, cid, _ in acks:
        by_ns.setdefault(ns, []).append(cid)
    with ckptdb.open(url) as db:
        for ns, ids in by_ns.items():
            chain = [c.id for c in reversed(db.lineage(ns))]
            assert [c for c in chain if c in set(ids)] == ids, ns
            assert [m.revision for m in db.history(ns)][-1] == 1
        for ns, cid, n in acks:
            cp = db.get(cid)
            assert cp.read("n") == f"{ns.split('/')[0]}-{n}".encode()
            assert cp.read("big") == bytes([n % 251]) * 70_000


def test_the_server_crashing_mid_commit_loses_no_acknowledged_checkpoint(tmp_path: Path) -> None:
    with PostgresServer() as server:
        url = server.create_database("crashes")
        with ckptdb.open(url):
            pass
        writers = _writers(url, tmp_path, 3, 9.0)
        crashes = 0
        time.sleep(2.0)
        for _ in range(3):
            server.crash()  # pg_ctl stop -m immediate, mid-commit for some writer
            crashes += 1
            time.sleep(0.3)
            server.start()  # crash recovery
            time.sleep(1.2)
        outputs = []
        for proc in writers:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
            outputs.append(out)
        acks = _acks(outputs)
        assert crashes == 3 and len(acks) >= 20
        _check(url, acks)


def test_clients_killed_mid_commit_lose_nothing_acknowledged_and_hold_no_lock(
    pg_url: str, tmp_path: Path
) -> None:
    with ckptdb.open(pg_url):
        pass
    outputs = []
    for _ in range(4):  # each round: writers run, one is SIGKILLed mid-stream
        writers = _writers(pg_url, tmp_path, 2, 2.5)
        time.sleep(1.6)
        os.killpg(writers[0].pid, signal.SIGKILL)
        for proc in writers:
            out, _ = proc.communicate(timeout=300)
            outputs.append(out)
        assert writers[0].returncode == -signal.SIGKILL and writers[1].returncode == 0
    acks = _acks(outputs)
    assert len(acks) >= 20
    _check(pg_url, acks)
    # The killed sessions' namespace locks went with them: a commit to each namespace
    # goes through at once, on top of the last acknowledged checkpoint.
    with ckptdb.open(pg_url, busy_timeout=2) as db:
        for ns in {a[0] for a in acks}:
            last = [a[1] for a in acks if a[0] == ns][-1]
            current = db.current(ns)
            assert current is not None
            on_top = db.commit(ns, {"after": b"kill"})
            assert on_top.parent_id == current.id
            assert last in {c.id for c in db.lineage(ns)}


def test_a_session_terminated_around_commit_resolves_by_retrying(pg_url: str) -> None:
    """The server ends the session (``pg_terminate_backend``) before, during or after the
    COMMIT: the commit either lands once or not at all, and a retry converges on it."""
    with ckptdb.open(pg_url) as admin, ckptdb.open(pg_url) as db:
        acked: list[str] = []
        for n in range(12):
            entries = {"n": str(n).encode()}
            # end this handle's session now and then: its next statement finds it gone
            if n % 3 == 1:
                pid = db._handle.store.conn.backend_pid  # type: ignore[attr-defined]
                admin.commit("admin", {"kill": str(pid).encode()})
                _terminate(pg_url, pid)
            for _ in range(5):
                try:
                    acked.append(db.commit("t", entries).checkpoint_id)
                    break
                except (ckptdb.errors.CommitOutcomeUnknownError, ckptdb.errors.StorageError):
                    continue
        assert len(acked) == 12 and len(set(acked)) == 12
        chain = [c.id for c in reversed(db.lineage("t"))]
        assert chain == acked  # once each, in order: no duplicate, no fork


def _terminate(url: str, pid: int) -> None:
    from ckptdb.connection.postgres import PgConnection

    conn = PgConnection.open(url)
    try:
        conn.execute("SELECT pg_terminate_backend(?)", (pid,))
    finally:
        conn.close()


#: A LangGraph worker: puts a chain of checkpoints on its own thread, each with a pending
#: write, retrying whatever a fault makes retryable (the same put again), and prints one
#: JSON line per acknowledged put: [checkpoint id, n].
_SAVER_WORKER = textwrap.dedent(
    """
    import json, sys, time
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6
    from ckptdb import errors
    from ckptdb.integrations.langgraph import CkptdbSaver
    url, name, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    RETRY = (errors.CommitOutcomeUnknownError, errors.StorageError, errors.BusyTimeoutError)
    deadline = time.monotonic() + seconds
    saver = None
    config = {"configurable": {"thread_id": name, "checkpoint_ns": ""}}
    n = 0
    while time.monotonic() < deadline:
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=n))
        cp["channel_values"] = {"n": n, "body": f"{name}-{n} " * 40}
        versions = {"n": n + 1, "body": n + 1}
        cp["channel_versions"] = dict(versions)
        while True:
            try:
                if saver is None:
                    saver = CkptdbSaver(url, busy_timeout=30)
                stored = saver.put(config, cp, {"step": n}, versions)
                saver.put_writes(stored, [("n", n)], f"task-{n}")
                break
            except RETRY:
                time.sleep(0.05)  # the server is away, or the outcome unknown: again
        print(json.dumps([cp["id"], n]), flush=True)
        config = stored
        n += 1
    """
)


def test_langgraph_workers_lose_no_acknowledged_put_when_the_server_crashes_or_they_die(
    tmp_path: Path,
) -> None:
    from ckptdb.integrations.langgraph import CkptdbSaver

    script = tmp_path / "worker.py"
    script.write_text(_SAVER_WORKER)
    with PostgresServer() as server:
        url = server.create_database("saver_faults")
        CkptdbSaver(url).close()
        names = ["a", "b", "c"]
        workers = [spawn_script(script, url, n, "8", new_session=True) for n in names]
        time.sleep(2.0)
        os.killpg(workers[2].pid, signal.SIGKILL)  # one dies mid-put
        for _ in range(2):
            server.crash()
            time.sleep(0.3)
            server.start()
            time.sleep(1.5)
        acks: dict[str, list[list[Any]]] = {}
        for name, proc in zip(names, workers, strict=True):
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == (-signal.SIGKILL if name == "c" else 0), err[-3000:]
            acks[name] = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert all(len(a) >= 3 for a in acks.values())
        with CkptdbSaver(url) as saver:
            for name, acked in acks.items():
                parent = None
                for cid, n in acked:
                    conf = {
                        "configurable": {
                            "thread_id": name,
                            "checkpoint_ns": "",
                            "checkpoint_id": cid,
                        }
                    }
                    got = saver.get_tuple(conf)  # type: ignore[arg-type]
                    assert got is not None, (name, n)
                    assert got.checkpoint["channel_values"] == {"n": n, "body": f"{name}-{n} " * 40}
                    assert ("task-" + str(n), "n", n) in (got.pending_writes or [])
                    got_parent = (
                        got.parent_config and got.parent_config["configurable"]["checkpoint_id"]
                    )
                    assert got_parent == parent, (name, n)  # one chain, in ack order
                    parent = cid
            assert saver.db.verify().ok


def test_a_full_disk_during_a_publish_takes_its_staged_chunks_back(pg_url: str) -> None:
    """The server reports its disk full (SQLSTATE 53100, raised here by a trigger on the
    checkpoint table, as the server raises it when a file cannot grow) while a commit
    publishes: the commit is a DiskFullError, and the chunks it staged in transactions of
    their own before the publish are deleted again -- nothing of it stays behind."""
    from ckptdb import errors
    from ckptdb.connection.postgres import PgConnection

    def admin(sql: str) -> None:
        conn = PgConnection.open(pg_url)
        try:
            with conn.write_transaction():
                conn.execute_script(sql)
        finally:
            conn.close()

    def chunks() -> int:
        conn = PgConnection.open(pg_url)
        try:
            with conn.read_transaction():
                return int(conn.scalar("SELECT count(*) FROM chunk"))
        finally:
            conn.close()

    big = {"weights.bin": os.urandom(3 * 2**20)}
    with ckptdb.open(pg_url, chunk_size=256 * 1024) as db:
        db.commit("kept", {"a": b"small"})
        admin(
            "CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN"
            " RAISE EXCEPTION 'could not extend file: No space left on device'"
            " USING ERRCODE = 'disk_full'; END $f$;"
            " CREATE TRIGGER full_disk BEFORE INSERT ON checkpoint"
            " FOR EACH ROW EXECUTE FUNCTION full_disk();"
        )
        with pytest.raises(errors.DiskFullError) as exc:
            db.commit("job", big)
        assert "were deleted again" in exc.value.message, exc.value.message
        assert exc.value.details["staged_chunks_deleted"] >= 12
        assert chunks() == 0 and db.current("job") is None
        admin("DROP TRIGGER full_disk ON checkpoint; DROP FUNCTION full_disk();")
        ack = db.commit("job", big)
        assert db.get(ack.checkpoint_id).read("weights.bin") == big["weights.bin"]
        assert chunks() >= 12 and db.verify().ok
