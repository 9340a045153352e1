"""Pending writes as stored in ``lg_write``: sealed for an encrypted thread, each row checked
against its digest (:mod:`.sealing`) and opened when read back."""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import PendingWrite, writes_sort_key

from ... import errors
from ...extension import Row, Session, check_types
from . import sealing
from .rows import WRITE_COLUMNS, WRITE_TYPES, CheckpointRow, batches
from .serialization import loads
from .threads import Threads

#: The ``type`` of a pending write whose value is sealed (an encrypted thread): this prefix,
#: then the serializer's own type.
SEALED_TYPE = "ckptdb-sealed/"

#: (thread, ns, checkpoint, task, idx, channel, type, value, task path) of an lg_write row
WriteRow = tuple[str, str, str, str, int, str, str, bytes, str]


def _write_context(row: Sequence[Any]) -> bytes:
    """What a sealed pending write is bound to: (thread, namespace, checkpoint, task, idx,
    channel, type, task path) -- a sealed value moved to another row does not open."""
    return json.dumps(list(row), ensure_ascii=True, separators=(",", ":")).encode()


class PendingWrites(Threads):
    """Sealing, checking and opening the rows of ``lg_write``."""

    def _seal_write(self, namespace: str, row: WriteRow) -> WriteRow:
        """A pending-write row as stored: its value sealed when the thread is encrypted."""
        sealer = self._sealer(namespace)
        if sealer is None:
            return row
        tid, ns, cid, task, idx, channel, type_, value, path = row
        context = _write_context((tid, ns, cid, task, idx, channel, type_, path))
        return (
            tid,
            ns,
            cid,
            task,
            idx,
            channel,
            SEALED_TYPE + type_,
            sealer.seal(value, context),
            path,
        )

    def _write_value(self, key: tuple[str, str, str], r: Sequence[Any]) -> Any:
        """The value of a stored pending write ``r`` = (task, channel, type, value, task
        path, idx) of checkpoint ``key``, opened first when it is sealed."""
        task, channel, type_, value, path, idx = r[:6]
        if not type_.startswith(SEALED_TYPE):
            return loads(self.serde, type_, value)
        return loads(self.serde, *self._opened_write(key, task, idx, channel, type_, value, path))

    def _opened_write(
        self,
        key: tuple[str, str, str],
        task: str,
        idx: int,
        channel: str,
        type_: str,
        value: bytes,
        path: str,
    ) -> tuple[str, bytes]:
        """(serializer type, plaintext) of a sealed pending write of checkpoint ``key``."""
        thread_id, ns, cid = key
        namespace = self._registered_namespace(thread_id, ns)
        sealer = None if namespace is None else self._sealer(namespace)
        if sealer is None:
            raise errors.CorruptionError(
                f"pending write {cid!r} task {task!r} is sealed but its thread is not "
                "encrypted; the row was altered",
                reason="record_sealed",
            )
        inner = type_[len(SEALED_TYPE) :]
        context = _write_context((thread_id, ns, cid, task, idx, channel, inner, path))
        return inner, sealer.open(value, context)

    def _check_write(self, row: tuple[Any, ...], digest: Any, where: str) -> None:
        """:func:`.sealing.check_write`, skipped for a row equal to one whose seal held
        before (or that this saver sealed itself)."""
        if isinstance(digest, str) and self._cache.sealed(digest, row):
            return
        sealing.check_write(row, digest, self._unsealed_ok, where)
        if isinstance(digest, str):
            self._cache.put_sealed(digest, row)

    def _writes_of(
        self, s: Session, rows: Sequence[CheckpointRow]
    ) -> dict[tuple[str, str, str], builtins.list[PendingWrite]]:
        """The pending writes of every row, each list in ``writes_sort_key`` order, read in
        one statement per 150 rows and each checked against its digest."""
        found: builtins.list[Row] = []
        for part in batches(rows, 150):
            marks = ", ".join("(?, ?, ?)" for _ in part)
            args: builtins.list[Any] = []
            for r in part:
                args.extend((r.thread_id, r.checkpoint_ns, r.checkpoint_id))
            found.extend(
                s.execute(
                    f"SELECT {WRITE_COLUMNS.format(digest=self._digest_sql)} FROM lg_write"
                    f" WHERE (thread_id, checkpoint_ns, checkpoint_id) IN (VALUES {marks})",
                    args,
                )
            )
        return self._pending(found)

    def _pending(
        self, found: Sequence[Row]
    ) -> dict[tuple[str, str, str], builtins.list[PendingWrite]]:
        """Check and decode ``lg_write`` rows of :data:`.rows.WRITE_COLUMNS`, grouped by
        checkpoint in ``writes_sort_key`` order."""
        grouped: dict[tuple[str, str, str], builtins.list[Row]] = {}
        for w in found:
            check_types(w[:3], (str, str, str), "pending write")
            check_types(w[3:9], WRITE_TYPES, "pending write")
            self._check_write(
                (w[0], w[1], w[2], w[3], w[8], w[4], w[5], w[6], w[7]),
                w[9],
                f"{w[2]!r} task {w[3]!r} idx {w[8]}",
            )
            grouped.setdefault((w[0], w[1], w[2]), []).append(w[3:9])
        out: dict[tuple[str, str, str], builtins.list[PendingWrite]] = {}
        for key, ws in grouped.items():
            ws.sort(key=lambda r: writes_sort_key(r[4], r[0], r[5]))
            out[key] = [(r[0], r[1], self._write_value(key, r)) for r in ws]
        return out
