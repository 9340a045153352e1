"""Receipts: durable, digest-bound records of what ckptdb did (fallback, verify, gc, ...)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import canonical, errors, models, validation
from ..connection.engine import EngineConnection
from . import dialect
from .rows import check_types


def _bound(
    kind: str, namespace: str | None, checkpoint_id: str | None, at_ms: int, body_json: str
) -> dict[str, Any]:
    return {
        "at_ms": at_ms,
        "body": body_json,
        "checkpoint_id": checkpoint_id,
        "kind": kind,
        "namespace": namespace,
    }


def store_receipt(
    conn: EngineConnection,
    kind: str,
    body: dict[str, Any],
    *,
    namespace: str | None,
    checkpoint_id: str | None,
    at_ms: int,
) -> int:
    """Insert a receipt (inside the caller's write transaction); returns its id."""
    body_json = canonical.dumps(body)
    digest = canonical.receipt_digest(_bound(kind, namespace, checkpoint_id, at_ms, body_json))
    (receipt_id,) = conn.execute(
        "INSERT INTO receipt (kind, namespace, checkpoint_id, at_ms, body, digest)"
        " VALUES (?, ?, ?, ?, ?, ?) RETURNING receipt_id",
        (kind, namespace, checkpoint_id, at_ms, body_json, digest),
    )[0]
    return int(receipt_id)


def digest_matches(
    kind: str, namespace: str | None, checkpoint_id: str | None, at_ms: int, body: str, digest: str
) -> bool:
    """True when a stored receipt still matches its digest."""
    return canonical.receipt_digest(_bound(kind, namespace, checkpoint_id, at_ms, body)) == digest


def list_receipts(
    conn: EngineConnection, *, kind: str | None = None, limit: int | None = None
) -> list[models.Receipt]:
    """Stored receipts, newest first."""
    rows = conn.execute(
        "SELECT receipt_id, kind, namespace, checkpoint_id, at_ms, body, digest FROM receipt"
        " WHERE CAST(?1 AS TEXT) IS NULL OR kind = ?1 ORDER BY receipt_id DESC LIMIT ?2",
        (kind, dialect.no_limit(conn) if limit is None else limit),
    )
    return [_receipt(r) for r in rows]


_N = type(None)
_RECEIPT_TYPES: tuple[Any, ...] = (int, str, (str, _N), (str, _N), int, str, str)


def _receipt(row: tuple[Any, ...]) -> models.Receipt:
    check_types(row, _RECEIPT_TYPES, f"receipt {row[0]}")
    body = validation.stored_json(row[5], f"body of receipt {row[0]}", "receipt_damaged")
    if not isinstance(body, dict):
        raise errors.CorruptionError(
            f"receipt {row[0]}: its stored body is not a JSON object (the row is damaged); "
            "`ckptdb verify` reports it. List fewer receipts (--limit) or other kinds to "
            "read the others.",
            reason="receipt_damaged",
        )
    return models.Receipt(
        receipt_id=row[0],
        kind=row[1],
        namespace=row[2],
        checkpoint_id=row[3],
        at=models.from_ms(row[4]),
        body=body,
        digest=row[6],
    )


def gc_bodies(conn: EngineConnection) -> Iterator[Any]:
    """The raw bodies of every gc receipt (verify reads their history floors)."""
    for (body,) in conn.iterate("SELECT body FROM receipt WHERE kind = 'gc'"):
        yield body


def iter_raw(conn: EngineConnection) -> Iterator[tuple[Any, ...]]:
    """Every receipt row as stored (for verify)."""
    return conn.iterate(
        "SELECT receipt_id, kind, namespace, checkpoint_id, at_ms, body, digest FROM receipt"
    )
