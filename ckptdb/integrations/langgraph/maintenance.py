"""Maintenance: deleting threads and runs, pruning, and separating the threads an older
file let share a namespace."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

from ... import RetentionPolicy, errors
from ...extension import Session
from . import _layout, activity
from ._core import log
from .content import channels_inside
from .rows import CHECKPOINT_COLUMNS, CheckpointRow, batches, checkpoint_row
from .threads import Threads, register, unregister

#: Pointer moves prune keeps per namespace (LangGraph never reads ckptdb's history).
PRUNE_KEEP_HISTORY = 16
#: Name prefix of the pins an older version held during prune (removed when met).
PRUNE_PIN_PREFIX = "langgraph-prune/"

#: ``lg_meta`` key present while pairs of a file written before langgraph schema version 3
#: share a namespace with another pair (set by migration 0003).
SHARED_MARKER = "shared_namespaces"
#: What may stop one pair's separation now but not at a later open (the pair keeps working
#: where it is until then; the marker stays).
_DEFERRED = (
    errors.KeyUnavailableError,
    errors.KeyShreddedError,
    errors.QuotaExceededError,
    errors.CorruptionError,
)


class Maintenance(Threads):
    """Maintenance: deleting threads and runs, pruning, and separating the threads an older
    file let share a namespace."""

    def _setup(self) -> None:
        super()._setup()
        if self.db.readonly:
            return
        if SHARED_MARKER in self._markers:
            self.separate_shared_namespaces()

    def separate_shared_namespaces(self) -> int:
        """Give every ``(thread_id, checkpoint_ns)`` pair that shares a ckptdb namespace with
        another one (written before langgraph schema version 3, whose hashed names collided
        for ids holding NUL) a namespace of its own; returns how many pairs were moved.

        Such a pair has checkpoints but no ``lg_namespace`` row (the other pair registered
        the name first). Its checkpoints are copied by reference (one core
        ``copy_checkpoints``: no byte is read or stored again) into the namespace the
        injective mapping names, in the same key scope; its rows are re-pointed at the
        copies and the namespace registered, in one transaction; then the shared namespace's
        CURRENT is moved back onto its owner's newest checkpoint and the old copies are
        pruned. Idempotent: interrupted anywhere, the next read-write open finishes it. Runs
        by itself on open while migration 0003's marker is present; a pair that cannot be
        moved now (a key not supplied, a quota, damage) stays readable where it is, is
        logged, and keeps the marker -- and meanwhile no delete drops a namespace that still
        holds another pair's checkpoints."""
        with self.db.read_session() as s:
            pairs = sorted(
                (t, n)
                for t, n in s.execute(
                    "SELECT DISTINCT c.thread_id, c.checkpoint_ns FROM lg_checkpoint c"
                    " WHERE NOT EXISTS (SELECT 1 FROM lg_namespace n WHERE n.thread_id ="
                    " c.thread_id AND n.checkpoint_ns = c.checkpoint_ns)"
                )
                if isinstance(t, str) and isinstance(n, str)  # damaged rows: verify reports
            )
        moved = 0
        deferred = False
        # While pairs still share, no drop may take a namespace another pair's rows use
        # (a third pair in the same namespace, or an owner left without rows).
        self._shared_pending = True
        for thread_id, ns in pairs:
            try:
                moved += self._separate(thread_id, ns)
            except _DEFERRED as exc:
                deferred = True
                log.warning(
                    "LangGraph thread %r / %r still shares a ckptdb namespace with another "
                    "thread: %s (retried at the next read-write open)",
                    thread_id[:80],
                    ns[:80],
                    exc,
                )
        self._shared_pending = deferred
        if not deferred:
            with self.db.write_session() as s:
                s.execute("DELETE FROM lg_meta WHERE key = ?", (SHARED_MARKER,))
        return moved

    def _separate(self, thread_id: str, ns: str) -> int:
        """Move one unregistered pair into a namespace of its own (see
        :meth:`separate_shared_namespaces`); 1 when it was moved, 0 when nothing of it is
        left to move."""
        rows = self._remaining(thread_id, ns)
        live_ids = self.db.existing({r.ckpt_id for r in rows})
        live = sorted((r for r in rows if r.ckpt_id in live_ids), key=lambda r: r.checkpoint_id)
        if not live:
            return 0  # every checkpoint of it was collected: LangGraph reads it as gone
        with self.db.read_session() as s:
            shared = s.scalar(
                "SELECT namespace FROM checkpoints WHERE checkpoint_id = ?", (live[-1].ckpt_id,)
            )
            owner = s.execute(
                "SELECT thread_id, checkpoint_ns FROM lg_namespace WHERE namespace = ?",
                (shared,),
            )
        if not isinstance(shared, str):
            return 0  # collected since: gone
        # The same key scope as where it lies: the scope prefix of an encrypted name.
        scope = ""
        if shared.startswith(_layout.ENCRYPTED_PREFIX):
            scope = shared[: shared.index("/") + 1]
        target = _layout.namespace_for(thread_id, ns, scope)
        by_lg = {r.checkpoint_id: r for r in live}
        parents = {
            r.ckpt_id: by_lg[r.parent_id].ckpt_id if r.parent_id in by_lg else None for r in live
        }
        report = self.db.copy_checkpoints(
            list(dict.fromkeys(r.ckpt_id for r in live)),
            target,
            parents=parents,
            reason="lg.separate",
        )
        with self.db.write_session() as s:
            register(s, target, thread_id, ns)
            s.executemany(
                "UPDATE lg_checkpoint SET ckpt_id = ? WHERE thread_id = ? AND checkpoint_ns = ?"
                " AND checkpoint_id = ? AND ckpt_id = ?",
                [
                    (report.copies[r.ckpt_id], thread_id, ns, r.checkpoint_id, r.ckpt_id)
                    for r in live
                ],
            )
        self._cache.forget_thread(thread_id, ns)
        if shared != target and len(owner) == 1:
            self._tidy_shared(shared, str(owner[0][0]), str(owner[0][1]), thread_id, ns)
        return 1

    def _tidy_shared(
        self, shared: str, owner_thread: str, owner_ns: str, thread_id: str, ns: str
    ) -> None:
        """Give a namespace back to its owner once ``(thread_id, ns)`` moved out: CURRENT
        and fallback onto the owner's checkpoints (the namespace dropped if it has none
        left), then the moved pair's old copies pruned. Nothing of any pair depends on it
        (the moved pair reads its copies), so what stops it now is only logged: the old
        copies are collected with the owner's next prune or delete."""
        try:
            if self._settle(shared, owner_thread, owner_ns) is not None:
                self.db.prune(
                    {"lg_thread_id": thread_id, "lg_checkpoint_ns": ns}, namespaces=[shared]
                )
        except _DEFERRED as exc:
            log.warning(
                "the old copies of LangGraph thread %r / %r stay in ckptdb namespace %s "
                "until its owner is pruned: %s",
                thread_id[:80],
                ns[:80],
                shared,
                exc,
            )

    def _holds_others(self, namespace: str, thread_id: str, ns: str) -> bool:
        """Whether ``namespace`` holds a checkpoint that another pair's rows still use."""
        with self.db.read_session() as s:
            found = s.scalar(
                "SELECT 1 FROM lg_checkpoint l JOIN checkpoints k ON k.checkpoint_id = l.ckpt_id"
                " WHERE k.namespace = ? AND NOT (l.thread_id = ? AND l.checkpoint_ns = ?)"
                " LIMIT 1",
                (namespace, thread_id, ns),
            )
        return found is not None

    def _drop(self, namespace: str, thread_id: str, ns: str) -> None:
        """Drop a ckptdb namespace whose LangGraph rows are gone and unregister it, in one
        transaction."""
        self._drop_checkpoints(
            namespace, thread_id, ns, on_drop=lambda s: unregister(s, namespace, thread_id, ns)
        )

    def _drop_checkpoints(
        self,
        namespace: str,
        thread_id: str,
        ns: str,
        on_drop: Callable[[Session], None] | None = None,
    ) -> bool:
        """Drop the ckptdb namespace of a pair (one ckptdb transaction, which ``on_drop``
        joins); False when it must stay (it holds another pair's checkpoints, or pinned
        ones), True when it is gone."""
        if self._shared_pending and self._holds_others(namespace, thread_id, ns):
            log.warning(
                "kept ckptdb namespace %s: it still holds checkpoints of another LangGraph "
                "thread (a file written before langgraph schema version 3 whose threads are "
                "not separated yet; reopen the saver read-write with the keys it needs)",
                namespace,
            )
            return False
        self._cache.forget_thread(thread_id, ns)
        try:
            self.db.drop_namespace(namespace, on_drop=on_drop)
        except errors.ProtectedError as exc:
            log.warning("kept ckptdb namespace %s: %s", namespace, exc)
            return False
        return True

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of the thread (all checkpoint namespaces) and
        give the space back. Pinned checkpoints (pinned by an operator with ``ckptdb pin``)
        stay in ckptdb, but LangGraph no longer sees them.

        One write transaction for a thread of one checkpoint namespace: ckptdb drops the
        namespace (its checkpoints, pointer and the blobs only it used) and, in the same
        commit, the saver's rows, registration and activity record (``lg_thread``) go. A
        thread of several namespaces takes one per namespace; interrupted between them, the
        next ``delete_thread`` finishes the job (the rows left name namespaces still
        there)."""
        tid = str(thread_id)
        namespaces = self._namespaces(tid)
        finished = False

        def forget_thread(s: Session) -> None:
            """Every row of the thread, kept namespaces' too, and its activity."""
            s.execute("DELETE FROM lg_checkpoint WHERE thread_id = ?", (tid,))
            s.execute("DELETE FROM lg_write WHERE thread_id = ?", (tid,))
            activity.forget(s, tid)

        def forget(namespace: str, ns: str, last: bool) -> Callable[[Session], None]:
            def hook(s: Session) -> None:
                nonlocal finished
                if last:
                    forget_thread(s)
                else:
                    where = " WHERE thread_id = ? AND checkpoint_ns = ?"
                    s.execute("DELETE FROM lg_checkpoint" + where, (tid, ns))
                    s.execute("DELETE FROM lg_write" + where, (tid, ns))
                s.execute("DELETE FROM lg_namespace WHERE namespace = ?", (namespace,))
                finished = last

            return hook

        for i, (namespace, ns) in enumerate(namespaces):
            self._drop_checkpoints(
                namespace, tid, ns, on_drop=forget(namespace, ns, i == len(namespaces) - 1)
            )
        if not finished:  # no namespace, or the last one was kept
            with self.db.write_session() as s:
                forget_thread(s)
        self._cache.put_touched(tid, None)
        for _, ns in namespaces:
            self._cache.forget_thread(tid, ns)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint (and its writes) whose metadata ``run_id`` is one of
        ``run_ids``, then the ckptdb checkpoints and blobs only they used."""
        ids = sorted({str(r) for r in run_ids})
        if not ids:
            return
        doomed: builtins.list[CheckpointRow] = []
        with self.db.write_session() as s:
            for part in batches(ids):
                marks = ",".join("?" * len(part))
                doomed.extend(
                    checkpoint_row(r)
                    for r in s.execute(
                        f"SELECT {CHECKPOINT_COLUMNS} FROM lg_checkpoint WHERE run_id IN ({marks})",
                        tuple(part),
                    )
                )
            self._delete_rows(s, doomed)
        scope: builtins.list[str] = []
        for thread_id, ns in sorted({(r.thread_id, r.checkpoint_ns) for r in doomed}):
            self._cache.forget_thread(thread_id, ns)
            namespace = self._registered_namespace(thread_id, ns) or _layout.namespace_for(
                thread_id, ns
            )
            if self._settle(namespace, thread_id, ns) is not None:
                scope.append(namespace)
        for run in ids:
            if scope:
                self.db.prune({"lg_run_id": run}, namespaces=scope)

    def _delete_rows(self, s: Session, rows: Sequence[CheckpointRow]) -> None:
        keys = [(r.thread_id, r.checkpoint_ns, r.checkpoint_id) for r in rows]
        where = " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        s.executemany("DELETE FROM lg_checkpoint" + where, keys)
        s.executemany("DELETE FROM lg_write" + where, keys)

    def _remaining(self, thread_id: str, ns: str) -> builtins.list[CheckpointRow]:
        with self.db.read_session() as s:
            return [
                checkpoint_row(r)
                for r in s.execute(
                    f"SELECT {CHECKPOINT_COLUMNS} FROM lg_checkpoint WHERE thread_id = ?"
                    " AND checkpoint_ns = ? ORDER BY checkpoint_id DESC",
                    (thread_id, ns),
                )
            ]

    def _settle(self, namespace: str, thread_id: str, ns: str) -> set[str] | None:
        """Make ckptdb's CURRENT and fallback of the namespace name checkpoints LangGraph
        still has (ckptdb never deletes those two): CURRENT moves to the newest remaining
        one (compare-and-swap, so a concurrent put wins) and becomes its own fallback when
        the fallback is gone; a namespace left without checkpoints is dropped. Returns the
        ckptdb ids LangGraph still uses, or None when nothing may be collected now."""
        remaining = self._remaining(thread_id, ns)
        if not remaining:
            self._drop(namespace, thread_id, ns)
            return None
        alive = {r.ckpt_id for r in remaining}
        ptr = self.db.pointer(namespace)
        if ptr is None:
            return None
        try:
            if ptr.current_id not in alive:
                ptr = self.db.set_current(
                    namespace,
                    remaining[0].ckpt_id,
                    expect_current=ptr.current_id,
                    reason="lg.prune",
                )
            if ptr.fallback_id is not None and ptr.fallback_id not in alive:
                # set_current to the current checkpoint makes it its own fallback.
                self.db.set_current(
                    namespace, ptr.current_id, expect_current=ptr.current_id, reason="lg.prune"
                )
        except (errors.ConflictError, errors.CheckpointNotFoundError):
            log.info(
                "ckptdb namespace %s moved during a prune; space is reclaimed later", namespace
            )
            return None
        return alive

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune the given threads. ``"keep_latest"`` keeps the newest checkpoint of each
        checkpoint namespace with its pending writes -- and, for channels that LangGraph
        rebuilds from history (``DeltaChannel``), the ancestors back to the checkpoint that
        stores their value -- and deletes the rest; ``"delete"`` deletes everything. The
        ckptdb checkpoints and blobs nothing kept uses are garbage-collected, and the space
        is given back to the operating system."""
        if strategy not in ("keep_latest", "delete"):
            raise errors.InvalidInputError(
                f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'"
            )
        for thread_id in thread_ids:
            tid = str(thread_id)
            if strategy == "delete":
                self.delete_thread(tid)
                continue
            for namespace, ns in self._namespaces(tid):
                self._keep_latest(namespace, tid, ns)

    def _needed_ancestors(self, rows: builtins.list[CheckpointRow]) -> builtins.list[CheckpointRow]:
        """The newest row plus the ancestors its delta channels are rebuilt from."""
        by_id = {r.checkpoint_id: r for r in rows}
        latest = rows[0]
        keep = [latest]
        try:
            cp = self.db.get(latest.ckpt_id)
        except errors.CheckpointNotFoundError:
            return keep
        md = cp.metadata.get("langgraph")
        counters = md.get("counters_since_delta_snapshot") if isinstance(md, dict) else None
        if not isinstance(counters, dict) or not counters:
            return keep
        env = _layout.decode_envelope(cp.read(_layout.ENVELOPE_ENTRY), cp.id)
        missing = {str(ch) for ch in counters} - self._stored_channels(env)
        row = latest
        seen = {latest.checkpoint_id}
        while missing and row.parent_id and row.parent_id in by_id:
            row = by_id[row.parent_id]
            if row.checkpoint_id in seen:
                break
            seen.add(row.checkpoint_id)
            keep.append(row)
            try:
                parent_cp = self.db.get(row.ckpt_id)
            except errors.CheckpointNotFoundError:
                break
            parent_env = _layout.decode_envelope(
                parent_cp.read(_layout.ENVELOPE_ENTRY), parent_cp.id
            )
            missing -= self._stored_channels(parent_env)
        return keep

    def _stored_channels(self, env: _layout.Envelope) -> set[str]:
        """Every channel that has a stored value at the checkpoint of ``env``."""
        stored = set(env.values) | set(env.blobs)
        if env.version >= 2:
            stored |= channels_inside(self.serde, env.checkpoint)
        return stored

    def _keep_latest(self, namespace: str, thread_id: str, ns: str) -> None:
        rows = self._remaining(thread_id, ns)
        if not rows:
            self._drop(namespace, thread_id, ns)
            return
        kept = {r.checkpoint_id for r in self._needed_ancestors(rows)}
        doomed = [r for r in rows if r.checkpoint_id not in kept]
        if doomed:
            with self.db.write_session() as s:
                self._delete_rows(s, doomed)
        alive = self._settle(namespace, thread_id, ns)  # re-read: concurrent puts count
        if alive is None:
            return
        # GC keeps CURRENT, its fallback and pins; ``keep`` adds every other checkpoint
        # LangGraph still uses (ancestors a delta channel needs, puts that raced this
        # prune) while GC collects the rest of the namespace and the blobs only it used.
        try:
            for pin in self.db.pins(namespace):
                if pin.name.startswith(PRUNE_PIN_PREFIX):
                    self.db.unpin(pin.name)  # left by a prune of an older version
            grace: dict[str, Any] = {}
            if self.gc_grace_seconds is not None:
                grace["grace"] = self.gc_grace_seconds
            # LangGraph never reads ckptdb's pointer history: keep only a short audit tail.
            self.db.gc(
                RetentionPolicy(),
                namespaces=[namespace],
                keep_history=PRUNE_KEEP_HISTORY,
                keep=sorted(alive),
                **grace,
            )
        except (errors.NamespaceNotFoundError, errors.CheckpointNotFoundError):
            pass  # the thread was deleted while pruning: nothing is left to collect
