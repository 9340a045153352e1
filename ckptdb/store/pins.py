"""Pins: named references that protect a checkpoint from GC and every retention policy."""

from __future__ import annotations

import json
from typing import Any

from .. import errors, models
from ..connection.engine import EngineConnection
from . import dialect
from .rows import CheckpointRow, check_types

MAX_PIN_NAME = 200


def validate_name(name: object) -> str:
    """A pin name: 1-200 printable characters."""
    if (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_PIN_NAME
        or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)
        or name != name.strip()
    ):
        raise errors.InvalidInputError(
            f"pin name must be 1-{MAX_PIN_NAME} printable characters without surrounding "
            f"spaces, got {name!r}"
        )
    return name


_SELECT = (
    "SELECT p.name, c.id, n.name, p.created_at_ms, p.note FROM pin p"
    " JOIN checkpoint c ON c.seq = p.checkpoint_seq"
    " JOIN namespace n ON n.namespace_id = c.namespace_id"
)


def _model(row: tuple[Any, ...]) -> models.Pin:
    check_types(row, (str, str, str, int, (str, type(None))), "pin row")
    return models.Pin(
        name=row[0],
        checkpoint_id=row[1],
        namespace=row[2],
        created_at=models.from_ms(row[3]),
        note=row[4],
    )


def get(conn: EngineConnection, name: str) -> models.Pin | None:
    """The pin with this name, if any."""
    row = conn.one(_SELECT + " WHERE p.name = ?", (name,))
    return None if row is None else _model(row)


def list_pins(conn: EngineConnection, namespace: str | None = None) -> list[models.Pin]:
    """Pins (of one namespace, or all), by name."""
    rows = conn.execute(
        _SELECT + " WHERE CAST(?1 AS TEXT) IS NULL OR n.name = ?1 ORDER BY p.name", (namespace,)
    )
    return [_model(r) for r in rows]


def pin(
    conn: EngineConnection,
    name: str,
    target: CheckpointRow,
    *,
    note: str | None,
    replace: bool,
    now_ms: int,
) -> models.Pin:
    """Create (or, with ``replace``, move) a pin, inside the caller's write transaction.

    A pin name is write-once: pinning the same checkpoint again is a no-op; pinning a
    different one is a ConflictError unless ``replace``.
    """
    existing = get(conn, name)
    if existing is not None:
        if existing.checkpoint_id == target.id:
            return existing
        if not replace:
            raise errors.ConflictError(
                f"pin {name!r} already protects {existing.checkpoint_id[:12]}; replace it "
                f"to move it to {target.id[:12]}, or choose another name",
                expected=existing.checkpoint_id,
                actual=target.id,
            )
        conn.execute(
            "UPDATE pin SET checkpoint_seq = ?, created_at_ms = ?, note = ? WHERE name = ?",
            (target.seq, now_ms, note, name),
        )
    elif not conn.execute(
        "INSERT INTO pin (name, checkpoint_seq, created_at_ms, note) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (name) DO NOTHING RETURNING 1",
        (name, target.seq, now_ms, note),
    ):
        # Another writer pinned this name since it was read (PostgreSQL runs writers at
        # once; SQLite's write lock rules this out): decide again against its pin.
        if get(conn, name) is None:  # taken by a row that names no stored checkpoint
            raise errors.ConstraintViolationError(
                f"pin {name!r} exists but names no stored checkpoint (the file was changed "
                "outside ckptdb); nothing was written. Run `ckptdb verify`, or choose "
                "another name"
            )
        return pin(conn, name, target, note=note, replace=replace, now_ms=now_ms)
    found = get(conn, name)
    assert found is not None
    return found


def unpin(conn: EngineConnection, name: str) -> models.Pin:
    """Remove a pin (inside the caller's write transaction); returns what it was."""
    existing = get(conn, name)
    if existing is None:
        raise errors.NotFoundError(f"no pin named {name!r}", pin=name)
    conn.execute("DELETE FROM pin WHERE name = ?", (name,))
    return existing


def protected_seqs(conn: EngineConnection) -> set[int]:
    """Seqs of every pinned checkpoint."""
    out: set[int] = set()
    for row in conn.execute("SELECT checkpoint_seq FROM pin"):
        check_types(row, (int,), "pin row")
        out.add(row[0])
    return out


def pinned_among(conn: EngineConnection, seqs: list[int]) -> set[int]:
    """The seqs among ``seqs`` that a pin holds (one indexed lookup each)."""
    if not seqs:
        return set()
    out: set[int] = set()
    for row in conn.execute(
        f"SELECT DISTINCT checkpoint_seq FROM pin WHERE checkpoint_seq IN {dialect.int_list(conn)}",
        (json.dumps(sorted(set(seqs))),),
    ):
        check_types(row, (int,), "pin row")
        out.add(row[0])
    return out


def pinned_in_namespace(conn: EngineConnection, namespace_id: int) -> set[int]:
    """Seqs of the pinned checkpoints of one namespace."""
    return {
        int(r[0])
        for r in conn.execute(
            "SELECT p.checkpoint_seq FROM pin p JOIN checkpoint c ON c.seq = p.checkpoint_seq"
            " WHERE c.namespace_id = ?",
            (namespace_id,),
        )
    }


def delete_in_namespace(conn: EngineConnection, namespace_id: int) -> None:
    """Remove every pin of a namespace's checkpoints (drop_namespace with force)."""
    conn.execute(
        "DELETE FROM pin WHERE checkpoint_seq IN"
        " (SELECT seq FROM checkpoint WHERE namespace_id = ?)",
        (namespace_id,),
    )
