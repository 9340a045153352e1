"""LangGraph checkpointers on ckptdb: ``pip install "ckptdb[langgraph]"``.

>>> from ckptdb.integrations.langgraph import CkptdbSaver        # doctest: +SKIP
>>> with CkptdbSaver("agent.ckpt") as saver:                        # doctest: +SKIP
...     graph = builder.compile(checkpointer=saver)
...     graph.invoke(inputs, {"configurable": {"thread_id": "1"}})

A drop-in replacement for LangGraph's ``SqliteSaver`` (and, with :class:`AsyncCkptdbSaver`,
``AsyncSqliteSaver``): unchanged channel values are stored once (content addressing),
``prune`` returns space, threads can expire (``ttl=ThreadTTL(...)``), every schema change
is a checksummed migration, and several processes can share one file without "database is
locked". ``ckptdb import-from langgraph-sqlite SOURCE DB`` moves an existing SqliteSaver
database over. See ``docs/langgraph.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import NotLangGraphSqliteError, PickleRefusedError
from .ttl import KeptThread, ThreadTTL, TTLSweepReport

if TYPE_CHECKING:
    from .saver import AsyncCkptdbSaver, CkptdbSaver

__all__ = [
    "AsyncCkptdbSaver",
    "CkptdbSaver",
    "KeptThread",
    "NotLangGraphSqliteError",
    "PickleRefusedError",
    "TTLSweepReport",
    "ThreadTTL",
]


def __getattr__(name: str) -> Any:
    # The savers import LangGraph; ``ckptdb verify`` imports .sealing without it.
    if name in ("AsyncCkptdbSaver", "CkptdbSaver"):
        from . import saver  # noqa: PLC0415 - lazy on purpose

        return getattr(saver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
