"""The rows the saver reads back from its own tables: ``lg_checkpoint`` and ``lg_write``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

_T = TypeVar("_T")

#: Parameters per ``IN (...)`` list, well under SQLite's limit.
SQL_VARS = 500
#: The ``lg_checkpoint`` columns :func:`checkpoint_row` reads, in its order.
CHECKPOINT_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, ckpt_id"
#: Types of (task_id, channel, type, value, task_path, idx) of an ``lg_write`` row.
WRITE_TYPES = (str, str, str, bytes, str, int)
#: The ``lg_write`` columns read with a checkpoint's writes; ``{digest}`` is the column, or
#: NULL on a file opened read-only before schema version 2 gave it one.
WRITE_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, task_id, channel, type, value, task_path, idx,"
    " {digest}"
)


@dataclass(frozen=True)
class CheckpointRow:
    """A row of ``lg_checkpoint``: a LangGraph checkpoint and the ckptdb checkpoint holding it."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    ckpt_id: str


def checkpoint_row(values: Sequence[Any]) -> CheckpointRow:
    """The :class:`CheckpointRow` of values read as :data:`CHECKPOINT_COLUMNS`."""
    return CheckpointRow(str(values[0]), str(values[1]), str(values[2]), values[3], str(values[4]))


def batches(items: Sequence[_T], size: int = SQL_VARS) -> Iterator[Sequence[_T]]:
    """``items`` in consecutive slices of at most ``size`` (one statement each)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
