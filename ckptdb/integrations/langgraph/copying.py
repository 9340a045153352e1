"""Copying a thread: ``copy_thread``, by reference within one key scope (no byte read or
stored again), by value into another."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from ... import BlobRef, errors
from ...extension import check_types
from . import activity, sealing
from .pending import SEALED_TYPE, PendingWrites
from .rows import CHECKPOINT_COLUMNS, WRITE_TYPES, CheckpointRow, checkpoint_row
from .threads import register


class Copying(PendingWrites):
    """Copying a thread (see the module docstring)."""

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint (all checkpoint namespaces, with parent links, metadata
        and pending writes) of one thread to another. Within one key scope the copies share
        every blob with the source: each checkpoint namespace is copied by one core
        ``copy_checkpoints`` (one transaction), so no channel value is read, hashed or stored
        again; into another scope the values are read and sealed for the target. The copied
        checkpoints become visible to LangGraph together, in one transaction, at the end;
        checkpoints the target already has (same ids) are left as they are."""
        src, dst = str(source_thread_id), str(target_thread_id)
        if src == dst:
            return
        with self.db.read_session() as s:
            rows: builtins.list[CheckpointRow] = []
            run_ids: dict[tuple[str, str], str | None] = {}
            for r in s.execute(
                f"SELECT {CHECKPOINT_COLUMNS}, run_id FROM lg_checkpoint WHERE thread_id = ?"
                " ORDER BY checkpoint_ns, checkpoint_id",
                (src,),
            ):
                row = checkpoint_row(r[:5])
                rows.append(row)
                run_ids[(row.checkpoint_ns, row.checkpoint_id)] = (
                    r[5] if isinstance(r[5], str) else None
                )
            existing = {
                (str(ns), str(cid)): str(ck)
                for ns, cid, ck in s.execute(
                    "SELECT checkpoint_ns, checkpoint_id, ckpt_id FROM lg_checkpoint"
                    " WHERE thread_id = ?",
                    (dst,),
                )
            }
        if not rows:
            return
        namespaces = sorted({r.checkpoint_ns for r in rows})
        # The copy goes where a new thread ``dst`` goes (its key scope, if encrypted);
        # blobs are referenced when source and copy share a scope, else copied as bytes.
        target = {
            ns: self._namespace({"configurable": {"thread_id": dst, "checkpoint_ns": ns}}, dst, ns)
            for ns in namespaces
        }
        origin = dict((ns, namespace) for namespace, ns in self._namespaces(src))
        with self.db.write_session() as s:
            for ns in namespaces:
                register(s, target[ns], dst, ns)
        copied: builtins.list[tuple[str, str, str, str | None, str, str | None]] = []
        for ns in namespaces:
            todo = [
                r for r in rows if r.checkpoint_ns == ns and (ns, r.checkpoint_id) not in existing
            ]
            if not todo:
                continue
            source = origin.get(ns)
            if source is not None and self._scope_key(source) == self._scope_key(target[ns]):
                made = self._copy_by_reference(target[ns], dst, todo, existing)
            else:
                made = self._copy_by_value(target[ns], dst, todo, existing)
            copied.extend(
                (dst, ns, r.checkpoint_id, r.parent_id, ck, run_ids[(ns, r.checkpoint_id)])
                for r, ck in made
            )
        if not copied:
            return
        wanted = {(c[1], c[2]) for c in copied}
        # The copy is a thread of its own: its TTL starts now, whatever the source's.
        touch_at = self.db.clock()
        with self.db.write_session() as s:
            s.executemany(
                "INSERT INTO lg_checkpoint (thread_id, checkpoint_ns, checkpoint_id,"
                " parent_checkpoint_id, ckpt_id, run_id) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                copied,
            )
            activity.touch(s, dst, touch_at)
            # The digest seals the thread id too: each copied write is re-sealed (after
            # checking the source row's own seal). One statement reads them all.
            out = []
            for ns, cid, task_id, idx, channel, type_, value, path, digest in s.execute(
                "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value,"
                f" task_path, {self._digest_sql} FROM lg_write WHERE thread_id = ?",
                (src,),
            ):
                if (ns, cid) not in wanted:
                    continue
                check_types(
                    (task_id, channel, type_, value, path, idx), WRITE_TYPES, "pending write"
                )
                self._check_write(
                    (src, ns, cid, task_id, idx, channel, type_, value, path),
                    digest,
                    f"{cid!r} task {task_id!r} idx {idx}",
                )
                plain_type, plain = type_, value
                if type_.startswith(SEALED_TYPE):  # bound to the source row: open, seal again
                    plain_type, plain = self._opened_write(
                        (src, ns, cid), task_id, idx, channel, type_, value, path
                    )
                stored = self._seal_write(
                    target[ns], (dst, ns, cid, task_id, idx, channel, plain_type, plain, path)
                )
                out.append(sealing.sealed_row(stored))
            s.executemany(
                "INSERT INTO lg_write (thread_id, checkpoint_ns, checkpoint_id,"
                " task_id, idx, channel, type, value, task_path, digest)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                out,
            )
        self._cache.put_touched(dst, touch_at)

    def _copy_by_reference(
        self,
        namespace: str,
        dst: str,
        todo: builtins.list[CheckpointRow],
        existing: dict[tuple[str, str], str],
    ) -> builtins.list[tuple[CheckpointRow, str]]:
        """Copy one checkpoint namespace's rows with one core ``copy_checkpoints`` (one
        transaction, no blob byte read): each copy's parent is the copy of its LangGraph
        parent (or the target's existing checkpoint standing for it). Updates ``existing``."""
        for attempt in range(3):
            stored = self.db.existing([r.ckpt_id for r in todo])
            live = [r for r in todo if r.ckpt_id in stored]  # collected since: gone for all
            if not live:
                return []
            ns = live[0].checkpoint_ns
            by_lg = {r.checkpoint_id: r for r in live}
            outside = {
                existing[(ns, r.parent_id)]
                for r in live
                if r.parent_id is not None
                and r.parent_id not in by_lg
                and (ns, r.parent_id) in existing
            }
            kept = self.db.existing(sorted(outside))
            parents: dict[str, str | None] = {}
            for r in live:
                if r.parent_id is not None and r.parent_id in by_lg:
                    parents[r.ckpt_id] = by_lg[r.parent_id].ckpt_id
                else:
                    standing = existing.get((ns, r.parent_id or ""))
                    parents[r.ckpt_id] = standing if standing in kept else None
            try:
                report = self.db.copy_checkpoints(
                    [r.ckpt_id for r in live],
                    namespace,
                    parents=parents,
                    metadata={"lg_thread_id": dst},
                    reason="lg.copy_thread",
                )
            except errors.CheckpointNotFoundError:
                if attempt == 2:
                    raise
                continue  # GC collected a source or parent meanwhile: look again
            made = [(r, report.copies[r.ckpt_id]) for r in live]
            for r, ck in made:
                existing[(ns, r.checkpoint_id)] = ck
            return made
        return []  # unreachable: the last attempt returns or raises

    def _copy_by_value(
        self,
        namespace: str,
        dst: str,
        todo: builtins.list[CheckpointRow],
        existing: dict[tuple[str, str], str],
    ) -> builtins.list[tuple[CheckpointRow, str]]:
        """Copy rows into another key scope: each checkpoint's bytes are read (verified)
        and committed again, sealed for the target. Updates ``existing``."""
        made: builtins.list[tuple[CheckpointRow, str]] = []
        for row in todo:
            try:
                cp = self.db.get(row.ckpt_id)
            except errors.CheckpointNotFoundError:
                continue
            entries: dict[str, bytes | BlobRef] = {name: cp.read(name) for name in cp.entries}
            meta = cp.metadata
            meta["lg_thread_id"] = dst
            parent_ck = existing.get((row.checkpoint_ns, row.parent_id or ""))
            try:
                ack = self._copy_commit(namespace, entries, meta, parent_ck)
            except errors.BlobMissingError:
                if self.db.existing([row.ckpt_id]):
                    raise  # a stored manifest whose blob is missing: damage, not a race
                continue  # collected since (by ckptdb GC): the source reads as gone too
            existing[(row.checkpoint_ns, row.checkpoint_id)] = ack
            made.append((row, ack))
        return made

    def _copy_commit(
        self,
        namespace: str,
        entries: Mapping[str, bytes | BlobRef],
        meta: dict[str, Any],
        base: str | None,
    ) -> str:
        try:
            ack = self.db.commit(
                namespace, entries, metadata=meta, base=base, reason="lg.copy_thread"
            )
        except errors.CheckpointNotFoundError:
            ack = self.db.commit(namespace, entries, metadata=meta, reason="lg.copy_thread")
        return ack.checkpoint_id
