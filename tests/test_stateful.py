"""A hypothesis state machine: random commits, CAS commits, loads, corruptions and
reopens against a real database file, checked against a simple in-memory model."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

import hypothesis.strategies as st
from conftest import raw_sql
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import ckptdb
from ckptdb import errors

CHUNK = 64 * 1024


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Payload(bytes):
    """bytes with a short repr, so failing examples stay readable."""

    def __repr__(self) -> str:
        return f"<{len(self)} bytes {digest(self)[:8]}>"


PAYLOADS = [
    Payload(p)
    for p in [
        b"",
        b"{}",
        b"state-" * 10,
        bytes(range(256)) * 4,
        os.urandom(CHUNK + 1),  # chunked
        os.urandom(2 * CHUNK + 7),  # chunked
    ]
]
NAMES = ["a.json", "b/c.bin", "d"]
NAMESPACES = ["ns-1", "ns-2"]


@dataclass
class ModelCheckpoint:
    id: str
    entries: dict[str, bytes]
    metadata: dict[str, Any]


class CheckpointMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="ckptdb-stateful-")
        self.path = os.path.join(self.dir, "model.ckpt")
        self.db = ckptdb.open(self.path, chunk_size=CHUNK)
        self.lineages: dict[str, list[ModelCheckpoint]] = {}
        self.corrupt: set[str] = set()

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------

    def _is_intact(self, cp: ModelCheckpoint) -> bool:
        return not any(digest(v) in self.corrupt for v in cp.entries.values())

    def _expect_commit(
        self,
        ns: str,
        entries: dict[str, bytes],
        meta: dict[str, Any],
        expect: Any,
        outcome: ckptdb.CommitAck | errors.ConflictError,
    ) -> None:
        """Check one commit against the model's rules of idempotence and CAS."""
        lineage = self.lineages.setdefault(ns, [])
        current = lineage[-1] if lineage else None
        parent_of_current = lineage[-2].id if len(lineage) >= 2 else None
        unset = expect is ckptdb.UNSET
        if (
            current is not None
            and (unset or expect == parent_of_current)
            and current.entries == entries
            and current.metadata == meta
        ):
            # A retry of the commit that produced CURRENT (or an unchanged state).
            assert isinstance(outcome, ckptdb.CommitAck), outcome
            assert not outcome.created and outcome.checkpoint_id == current.id
        elif not unset and expect != (current.id if current else None):
            assert isinstance(outcome, errors.ConflictError), outcome
            assert outcome.expected == expect
            assert outcome.actual == (current.id if current else None)
            # Chunks are staged (and repaired) before the compare-and-swap is decided.
            self.corrupt -= {digest(v) for v in entries.values() if len(v) > CHUNK}
            return
        else:
            assert isinstance(outcome, ckptdb.CommitAck), outcome
            assert outcome.created
            assert outcome.generation == len(lineage) + 1
            assert outcome.parent_id == (current.id if current else None)
            lineage.append(ModelCheckpoint(outcome.checkpoint_id, dict(entries), meta))
        # A commit writes (or repairs) every blob it names.
        self.corrupt -= {digest(v) for v in entries.values()}

    def _commit(
        self, ns: str, entries: dict[str, bytes], meta: dict[str, Any], expect: Any
    ) -> None:
        outcome: ckptdb.CommitAck | errors.ConflictError
        try:
            outcome = self.db.commit(ns, entries, metadata=meta, expect_current=expect)
        except errors.ConflictError as exc:
            outcome = exc
        self._expect_commit(ns, entries, meta, expect, outcome)

    # -- rules -------------------------------------------------------------------------

    @rule(
        ns=st.sampled_from(NAMESPACES),
        entries=st.dictionaries(st.sampled_from(NAMES), st.sampled_from(PAYLOADS), max_size=3),
        turn=st.integers(0, 2),
    )
    def commit(self, ns: str, entries: dict[str, bytes], turn: int) -> None:
        self._commit(ns, entries, {"turn": turn}, ckptdb.UNSET)

    @rule(
        ns=st.sampled_from(NAMESPACES),
        entries=st.dictionaries(st.sampled_from(NAMES), st.sampled_from(PAYLOADS), max_size=2),
        which=st.sampled_from(["current", "parent", "oldest", "none", "unknown"]),
        turn=st.integers(0, 2),
    )
    def commit_compare_and_swap(
        self, ns: str, entries: dict[str, bytes], which: str, turn: int
    ) -> None:
        lineage = self.lineages.get(ns, [])
        expect = {
            "current": lineage[-1].id if lineage else None,
            "parent": lineage[-2].id if len(lineage) >= 2 else None,
            "oldest": lineage[0].id if lineage else None,
            "none": None,
            "unknown": "e" * 64,
        }[which]
        self._commit(ns, entries, {"turn": turn}, expect)

    @precondition(lambda self: any(self.lineages.values()))
    @rule(data=st.data())
    def corrupt_an_entry_of_current(self, data: st.DataObject) -> None:
        ns = data.draw(st.sampled_from([n for n, lin in self.lineages.items() if lin]))
        victims = [v for v in self.lineages[ns][-1].entries.values() if v]
        if not victims:
            return
        value = data.draw(st.sampled_from(victims))
        blob_id, chunk_count = raw_sql(
            self.path, "SELECT blob_id, chunk_count FROM blob WHERE digest = ?", (digest(value),)
        )[0]
        if chunk_count == 0:
            bad = bytearray(value)
            bad[0] ^= 0xFF
            raw_sql(
                self.path,
                "UPDATE blob SET inline_data = ? WHERE blob_id = ?",
                (bytes(bad), blob_id),
            )
        else:
            chunk_id = raw_sql(
                self.path,
                "SELECT chunk_id FROM blob_chunk WHERE blob_id = ? AND seq = 0",
                (blob_id,),
            )[0][0]
            raw_sql(
                self.path,
                "UPDATE chunk_data SET data = zeroblob(length(data)) WHERE chunk_id = ?",
                (chunk_id,),
            )
        self.corrupt.add(digest(value))

    @precondition(lambda self: any(self.lineages.values()))
    @rule(data=st.data(), fallback=st.booleans())
    def load(self, data: st.DataObject, fallback: bool) -> None:
        ns = data.draw(st.sampled_from([n for n, lin in self.lineages.items() if lin]))
        lineage = self.lineages[ns]
        intact = [cp for cp in reversed(lineage) if self._is_intact(cp)]
        head_ok = self._is_intact(lineage[-1])
        if not fallback and not head_ok:
            try:
                self.db.load(ns)
            except errors.CorruptionError:
                return
            raise AssertionError("a damaged CURRENT loaded without fallback")
        if fallback and not intact:
            try:
                self.db.load(ns, fallback=True)
            except errors.NoUsableCheckpointError:
                return
            raise AssertionError("expected no usable checkpoint")
        result = self.db.load(ns, fallback=fallback)
        expected = lineage[-1] if head_ok else intact[0]
        assert result.checkpoint.id == expected.id
        assert result.disposition == ("exact" if head_ok else "degraded_fallback")
        for name, value in expected.entries.items():
            assert result.checkpoint.read(name) == value

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self.db = ckptdb.open(self.path)

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def pointers_match_the_model(self) -> None:
        heads = {n.name: n for n in self.db.namespaces()}
        assert set(heads) == {ns for ns, lin in self.lineages.items() if lin}
        for ns, lineage in self.lineages.items():
            if lineage:
                assert heads[ns].current_id == lineage[-1].id
                assert heads[ns].generation == len(lineage)

    @invariant()
    def verify_agrees_with_the_model(self) -> None:
        report = self.db.verify()
        assert report.ok == (not self.corrupt), report.problems
        bad = {p.digest for p in report.problems if p.code == "entry_corrupt"}
        assert bad == self.corrupt


CheckpointMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("CKPTDB_STATEFUL_EXAMPLES", "40")),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCheckpointMachine = CheckpointMachine.TestCase
