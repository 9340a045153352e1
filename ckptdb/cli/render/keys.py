"""Renderers of the key scope commands: keys list, set, rotate, shred (never key material:
the library hands out none)."""

from __future__ import annotations

from ...models import KeyScope, ShredReport
from ..output import count, echo, print_json, table


def scopes(rows: list[KeyScope], as_json: bool) -> None:
    """``keys list``: one row per key scope."""
    if as_json:
        print_json(rows)
        return
    table(
        ["key id", "prefix", "generation", "shredded", "namespaces"],
        [
            [s.key_id, s.prefix, s.key_generation, "yes" if s.shredded else "", s.namespaces]
            for s in rows
        ],
    )


def scope_created(scope: KeyScope, as_json: bool) -> None:
    """``keys set``: the prefix now encrypted and its key id."""
    if as_json:
        print_json(scope)
        return
    echo(f"namespaces under {scope.prefix!r} are encrypted with key id {scope.key_id!r}")


def key_rotated(key_id: str, scope: KeyScope, as_json: bool) -> None:
    """``keys rotate``: the scope's new key generation."""
    if as_json:
        print_json(scope)
        return
    echo(f"key id {key_id!r} re-wrapped: generation {scope.key_generation}")


def shredded(key_id: str, report: ShredReport, as_json: bool) -> None:
    """``keys shred``: what was destroyed, and whether the WAL still holds a copy."""
    if as_json:
        print_json(report)
        return
    echo(
        f"shredded {key_id!r}: {count(len(report.namespaces), 'namespace')}, "
        f"{count(report.checkpoints_deleted, 'checkpoint')} deleted"
        + ("" if report.wal_truncated else " (WAL not yet truncated: a reader held it)")
    )
