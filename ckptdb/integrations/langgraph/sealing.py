"""Sealed pending writes: the digest of an ``lg_write`` row, its check on read, the backfill
of rows written before schema version 2, and the ``ckptdb verify`` hook for the saver's
tables.

This module imports nothing from LangGraph, so ``ckptdb verify`` can check a file's
LangGraph tables on a machine without the ``langgraph`` extra.

The digest is the lowercase hex sha256 of::

    b"ckptdb.langgraph.write.v1\\0" + field(thread_id) + field(checkpoint_ns)
      + field(checkpoint_id) + field(task_id) + field(str(idx)) + field(channel)
      + field(type) + field(task_path) + field(value)

where ``field(x)`` is the 8-byte big-endian length of ``x`` (UTF-8 for text) followed by
``x``: an injective encoding, so no two different rows share a preimage, and the prefix
keeps it apart from every other sha256 in the file (blobs, manifests, receipts).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from ... import errors, models
from ...extension import Session, register_verify_hook

MIGRATION_SET = "langgraph"
#: Schema version of the ``langgraph`` set from which ``lg_write`` has a digest column.
SEALED_VERSION = 2
#: ``lg_meta`` key present while rows written before :data:`SEALED_VERSION` are unsealed.
UNSEALED_MARKER = "unsealed_writes"
_DOMAIN = b"ckptdb.langgraph.write.v1\x00"
_BATCH = 500


def write_digest(
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    idx: int,
    channel: str,
    type_: str,
    value: bytes,
    task_path: str,
) -> str:
    """The digest sealing one ``lg_write`` row (see the module docstring): the domain, then
    each field as its 8-byte big-endian length and its bytes (text as UTF-8)."""
    parts = [_DOMAIN]
    for text in (thread_id, checkpoint_ns, checkpoint_id, task_id, str(idx), channel, type_):
        data = text.encode("utf-8", "surrogatepass")
        parts += (len(data).to_bytes(8, "big"), data)
    path = task_path.encode("utf-8", "surrogatepass")
    parts += (len(path).to_bytes(8, "big"), path, len(value).to_bytes(8, "big"), value)
    # One buffer, one hash call: a read checks every pending write it hands out.
    return hashlib.sha256(b"".join(parts)).hexdigest()


def sealed_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """``row`` (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value,
    task_path) with its digest appended, ready for an ``INSERT`` of the ten columns."""
    return (*row, write_digest(*row))


def set_version(s: Session) -> int:
    """The applied version of the ``langgraph`` migration set (0 when absent)."""
    found = s.scalar(
        "SELECT max(version) FROM ckptdb_migration WHERE migration_set = ?", (MIGRATION_SET,)
    )
    return int(found) if isinstance(found, int) else 0


def unsealed_pending(s: Session) -> bool:
    """Whether rows written before schema version 2 may still lack a digest."""
    return s.scalar("SELECT 1 FROM lg_meta WHERE key = ?", (UNSEALED_MARKER,)) is not None


def backfill(s: Session) -> int:
    """Seal every row without a digest and drop the marker, in the caller's write
    transaction; returns how many rows were sealed. Only rows written before the
    migration lack a digest, so this seals what the file held when it was upgraded."""
    sealed = 0
    if not unsealed_pending(s):
        return 0
    while True:
        rows = s.execute(
            "SELECT write_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            " type, value, task_path FROM lg_write WHERE digest IS NULL LIMIT ?",
            (_BATCH,),
        )
        if not rows:
            break
        updates = []
        for r in rows:
            if not all(isinstance(v, str) for v in (*r[1:5], r[6], r[7], r[9])) or not (
                isinstance(r[5], int) and isinstance(r[8], bytes)
            ):
                raise errors.CorruptionError(
                    f"pending write {r[0]} has columns of the wrong type; it cannot be sealed",
                    reason="damaged_write",
                )
            updates.append((write_digest(*r[1:]), r[0]))
        s.executemany("UPDATE lg_write SET digest = ? WHERE write_id = ?", updates)
        sealed += len(updates)
    s.execute("DELETE FROM lg_meta WHERE key = ?", (UNSEALED_MARKER,))
    return sealed


def check_write(row: Sequence[Any], digest: Any, unsealed_ok: bool, where: str) -> None:
    """CorruptionError unless ``digest`` seals ``row`` (the nine digested columns in
    :func:`write_digest` order). A NULL digest passes only with ``unsealed_ok``."""
    if digest is None and unsealed_ok:
        return
    if not isinstance(digest, str) or digest != write_digest(*row):
        raise errors.CorruptionError(
            f"pending write {where} does not match its digest: the row was damaged",
            reason="write_digest_mismatch",
        )


_TEXT4 = (str, str, str, str)


def _verify(s: Session, quick: bool) -> list[models.Problem]:
    """The ``ckptdb verify`` findings for the saver's tables."""
    problems: list[models.Problem] = []

    def add(code: models.FindingCode, detail: str, namespace: object = None) -> None:
        ns = namespace if isinstance(namespace, str) else None
        problems.append(models.Problem(code=code, detail=detail, namespace=ns))

    version = set_version(s)
    unsealed_ok = version < SEALED_VERSION or unsealed_pending(s)
    for ns, tid, cns in s.execute("SELECT namespace, thread_id, checkpoint_ns FROM lg_namespace"):
        if not all(isinstance(v, str) for v in (ns, tid, cns)):
            add("lg_row_damaged", "an lg_namespace row has columns of the wrong type", ns)
    for tid, cns, cid, parent, ckpt, run in s.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, ckpt_id, run_id"
        " FROM lg_checkpoint"
    ):
        typed = all(isinstance(v, str) for v in (tid, cns, cid, ckpt)) and all(
            v is None or isinstance(v, str) for v in (parent, run)
        )
        hexed = isinstance(ckpt, str) and all(c in "0123456789abcdef" for c in ckpt)
        if not typed or not hexed:
            add(
                "lg_row_damaged",
                f"lg_checkpoint row {tid!r}/{cns!r}/{cid!r} has a damaged column",
            )
    digest_col = "digest" if version >= SEALED_VERSION else "NULL"
    last = -1
    while True:
        rows = s.execute(
            "SELECT write_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            f" type, {'NULL' if quick else 'value'}, task_path, {digest_col} FROM lg_write"
            " WHERE write_id > ? ORDER BY write_id LIMIT ?",
            (last, _BATCH),
        )
        if not rows:
            break
        last = int(rows[-1][0])
        for r in rows:
            where = f"{r[0]} ({r[1]!r}/{r[2]!r}/{r[3]!r} task {r[4]!r} idx {r[5]!r})"
            typed = (
                all(isinstance(v, str) for v in (*r[1:5], r[6], r[7], r[9]))
                and isinstance(r[5], int)
                and (quick or isinstance(r[8], bytes))
            )
            if not typed:
                add("lg_write_damaged", f"pending write {where} has columns of the wrong type")
                continue
            digest = r[10]
            if digest is None:
                if not unsealed_ok:
                    add("lg_write_unsealed", f"pending write {where} lost its digest")
                continue
            if quick:
                if not (isinstance(digest, str) and len(digest) == 64):
                    add("lg_write_mismatch", f"pending write {where} has a damaged digest")
                continue
            try:
                check_write(r[1:10], digest, unsealed_ok, where)
            except errors.CorruptionError as exc:
                add("lg_write_mismatch", str(exc))
    return problems


verify_hook: Callable[[Session, bool], list[models.Problem]] = _verify
register_verify_hook(MIGRATION_SET, verify_hook)
