"""The commit of one LangGraph checkpoint: one ckptdb commit whose ``on_publish`` hook
writes the saver's own rows (``lg_namespace`` on a thread's first commit, ``lg_checkpoint``
always, the thread's ``lg_thread`` activity when its refresh is due) in the same
transaction -- so LangGraph sees the checkpoint exactly when it lands, and the thread's TTL
restarts with it -- and the retries a concurrent prune or GC makes necessary."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ... import BlobRef, CommitAck, errors
from ...extension import Session
from . import _layout, activity
from ._cache import Loaded, ThreadState
from .threads import Threads, register

#: Commits tried before a retryable error reaches the caller.
ATTEMPTS = 3


@dataclass(slots=True)
class Encoded:
    """The entries of the ckptdb checkpoint holding one LangGraph checkpoint, and what a
    put remembers of them."""

    entries: dict[str, Any]
    channels: dict[str, BlobRef]  # the blob of each channel stored as an entry of its own
    checkpoint: _layout.Typed  # the checkpoint serialized with the ``within`` channels
    within: frozenset[str]  # the channels whose values ride inside ``checkpoint``
    values: dict[str, _layout.Typed]  # the other inline channel values, serialized apart
    refs: dict[str, tuple[str, str]]  # channel -> (type, digest) of those with a blob
    blobs: dict[str, bytes]  # digest -> bytes of those
    size: int  # bytes of the envelope
    versions: dict[str, object]  # the LangGraph version of each ``within`` channel (a hint)


#: LangGraph's row of a checkpoint ckptdb stored (a retry of the same put rewrites it).
_RECORD = (
    "INSERT INTO lg_checkpoint (thread_id, checkpoint_ns, checkpoint_id,"
    " parent_checkpoint_id, ckpt_id, run_id) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET"
    " parent_checkpoint_id = excluded.parent_checkpoint_id, ckpt_id = excluded.ckpt_id,"
    " run_id = excluded.run_id"
)


class Publish(Threads):
    """Committing one LangGraph checkpoint (see the module docstring)."""

    def _commit(
        self,
        namespace: str,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        run_id: str | None,
        entries: Mapping[str, Any],
        ck_meta: dict[str, Any],
        reason: str,
        *,
        state: ThreadState | None = None,
        put: Encoded | None = None,
    ) -> CommitAck:
        """Commit ``entries`` as LangGraph checkpoint ``checkpoint_id`` of the pair, on its
        parent ``parent_id``; ``state``: the pair's cached state if the caller has it.
        ``put``: a put's entries as encoded, remembered (with ``ck_meta``) for the next put
        (the blob of each channel) and for reads (the content, verified by construction:
        the id is the digest of exactly these entries)."""
        if state is None:
            state = self._cache.thread(thread_id, ns)
        # The first commit of this saver in a namespace registers it (or checks that the
        # registration is the pair's); later ones only add their lg_checkpoint row.
        confirmed = state is not None and state.confirmed and state.namespace == namespace
        touch_at = self._activity_due(thread_id)

        def record(session: Session, ack: CommitAck) -> None:
            if not confirmed:
                register(session, namespace, thread_id, ns)
            row = (thread_id, ns, checkpoint_id, parent_id, ack.checkpoint_id, run_id)
            if touch_at is None:
                session.execute(_RECORD, row)
            elif session.dialect == "postgresql":
                # The thread's activity and the row in one statement: a round trip each.
                session.execute(
                    f"WITH touched AS ({activity.TOUCH['postgresql']}) {_RECORD}",
                    (thread_id, touch_at, *row),
                )
            else:
                activity.touch(session, thread_id, touch_at)
                session.execute(_RECORD, row)

        base = None
        if parent_id:
            last = None if state is None else state.last_put
            base = (
                last[1] if last and last[0] == parent_id else self._lookup(thread_id, ns, parent_id)
            )
        for attempt in range(ATTEMPTS):
            try:
                ack = self.db.commit(
                    namespace,
                    entries,
                    metadata=ck_meta,
                    base=base,
                    reason=reason,
                    on_publish=record,
                )
            except errors.CheckpointNotFoundError:
                # The parent was deleted (prune/delete, maybe in another process) after we
                # looked it up: look again, and commit on CURRENT if it is gone.
                if base is None or attempt == ATTEMPTS - 1:
                    raise
                self._cache.forget_thread(thread_id, ns)
                state = None
                fresh = self._lookup(thread_id, ns, parent_id) if parent_id else None
                base = fresh if fresh != base else None
                continue
            except errors.ChunkMissingError:
                # GC reclaimed a chunk this commit staged (a very large value and a
                # concurrent GC with a zero grace period): ckptdb says a retry is safe.
                if attempt == ATTEMPTS - 1:
                    raise
                continue
            if touch_at is not None:
                self._cache.put_touched(thread_id, touch_at)
            last_put = (checkpoint_id, ack.checkpoint_id)
            if put is None:
                channels, hints = ({}, {}) if state is None else (state.channels, state.versions)
                self._cache.put_thread(
                    thread_id, ns, ThreadState(namespace, True, last_put, channels, hints)
                )
            else:
                encoded = put
                # JSON text only now that ckptdb accepted the metadata as JSON; the cache
                # holds it as committed, whatever the caller does with its objects later.
                loaded = Loaded(
                    json.dumps(ck_meta),
                    encoded.checkpoint,
                    encoded.values,
                    encoded.refs,
                    encoded.size,
                    _layout.ENVELOPE_VERSION,
                    encoded.within,
                )
                self._cache.remember_put(
                    thread_id,
                    ns,
                    ThreadState(namespace, True, last_put, encoded.channels, encoded.versions),
                    ack.checkpoint_id,
                    loaded,
                    encoded.blobs,
                )
            return ack
        raise AssertionError("unreachable")  # pragma: no cover

    def _lookup(self, thread_id: str, ns: str, checkpoint_id: str) -> str | None:
        """The ckptdb id holding a LangGraph checkpoint of the pair, or None."""
        with self.db.read_session(snapshot=False) as s:  # one statement
            found = s.scalar(
                "SELECT ckpt_id FROM lg_checkpoint"
                " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (thread_id, ns, checkpoint_id),
            )
        return None if found is None else str(found)
