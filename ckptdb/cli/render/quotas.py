"""Renderers of the quota commands: quota set, list, clear."""

from __future__ import annotations

from ...models import Quota
from ..output import count, echo, print_json, size, table, when


def _limits(quota: Quota) -> str:
    limits = []
    if quota.max_checkpoints is not None:
        limits.append(count(quota.max_checkpoints, "checkpoint"))
    if quota.max_bytes is not None:
        limits.append(f"{size(quota.max_bytes)} ({quota.max_bytes} B)")
    return ", ".join(limits)


def quota_stored(quota: Quota, as_json: bool) -> None:
    """``quota set``: the quota as stored."""
    if as_json:
        print_json(quota)
    else:
        echo(
            f"quota {quota.prefix!r} ({quota.applies_to}): at most {_limits(quota)}; "
            f"on exceed: {quota.on_exceed}"
        )


def quotas(stored: list[Quota], as_json: bool) -> None:
    """``quota list``: one row per quota."""
    if as_json:
        print_json(stored)
        return
    table(
        ["prefix", "applies to", "checkpoints", "bytes", "on exceed", "updated"],
        [
            [
                repr(q.prefix),
                q.applies_to,
                q.max_checkpoints,
                q.max_bytes,
                q.on_exceed,
                when(q.updated_at),
            ]
            for q in stored
        ],
    )


def quota_cleared(prefix: str, applies_to: str, removed: bool, as_json: bool) -> None:
    """``quota clear``: whether PREFIX had such a quota to remove."""
    if as_json:
        print_json({"prefix": prefix, "applies_to": applies_to, "removed": removed})
    else:
        echo(("removed" if removed else "no") + f" quota {prefix!r} ({applies_to})")
