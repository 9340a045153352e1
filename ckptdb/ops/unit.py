"""The unit of work: one transaction on a handle, and the only way ckptdb opens one.

Every operation that touches the file runs inside a :class:`Unit`. A unit holds the handle's
lock for its whole life, carries the connection, the one clock (read once, when the unit
begins: every row an act writes bears the same time), the keyring and the per-handle caches,
and knows whether it writes. Store functions are handed a unit (or its connection), assume
its transaction is open, and never open one themselves; so they compose: a store function
can call another inside the same transaction, and a reader knows from the signature alone
that it runs inside one.

An operation declares the unit it needs with a decorator -- :func:`reads`, :func:`writes` or
:func:`holds` -- and takes the unit as its first argument. Called with a handle (what the
front object does), it begins that unit around itself; called with a unit (what another
operation does, inside its own), it joins it. So the front object validates and calls one
operation, and operations compose without nesting transactions.

Three ways to begin one, all here:

* :func:`writing` -- ``BEGIN IMMEDIATE`` ... ``COMMIT`` (ROLLBACK if the block raises);
* :func:`reading` -- a consistent snapshot (``BEGIN`` ... ``COMMIT``), or with
  ``snapshot=False`` none: each statement reads its own (one-statement reads);
* :func:`holding` -- the handle and no transaction, for the few operations that run many
  short transactions of their own (GC's batches, verify's pages, migrations, transfers,
  staging a large value); each of those is opened by the operation itself, in ``ops/``
  (:meth:`Unit.write_batch` / :meth:`Unit.read_batch`, or the connection's own helpers
  where a batch runs on another connection), never by ``store/``.

The clock is injectable (``ckptdb.open(..., clock=...)``): GC's grace period, ``keep_within``
and every ``*_at`` column read it and nothing else.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from ..connection.engine import EngineConnection
from ..store import Store
from ..store.blobs import BlobStore
from ..store.chunking import Chunker
from ..store.quotas import QuotaCache
from ..store.rows import PointerRow
from ..store.scopes import Keyring

if TYPE_CHECKING:
    from .handle import Handle

#: ``clock()``: the time now, in milliseconds since the Unix epoch.
Clock = Callable[[], int]

P = ParamSpec("P")
R = TypeVar("R")


def system_clock() -> int:
    """The wall clock, in milliseconds since the Unix epoch (the default :data:`Clock`)."""
    return time.time_ns() // 1_000_000


class Unit:
    """One transaction (or, from :func:`holding`, one stretch of short ones) on a handle."""

    __slots__ = ("conn", "handle", "moved", "now_ms", "store", "writes")

    def __init__(self, handle: Handle, store: Store, *, writes: bool) -> None:
        self.handle = handle
        self.store = store
        #: the connection every statement of this unit runs on
        self.conn: EngineConnection = store.conn
        #: the time of this act, read from the handle's clock when the unit began
        self.now_ms: int = handle.clock()
        #: True when the unit may write
        self.writes = writes
        #: pointers this unit's commits moved, by namespace: a later commit of the same
        #: unit (group commit) starts from them; the handle caches them once COMMIT returned
        self.moved: dict[str, PointerRow] = {}

    @property
    def blobs(self) -> BlobStore:
        """The blob tables and their caches."""
        return self.store.blobs

    @property
    def keyring(self) -> Keyring:
        """The host's keys and this file's key scopes."""
        return self.store.blobs.keyring

    @property
    def quotas(self) -> QuotaCache:
        """This connection's copy of the quota rows."""
        return self.store.quotas

    @property
    def chunk_size(self) -> int:
        """The file's chunk size."""
        return self.store.chunk_size

    @property
    def chunker(self) -> Chunker:
        """How the file cuts blobs into chunks."""
        return self.store.blobs.chunker

    @property
    def readonly(self) -> bool:
        """True when the connection cannot write."""
        return self.store.conn.readonly

    def clock(self) -> int:
        """The handle's clock read now (for an act that lasts: GC's later batches)."""
        return self.handle.clock()

    @contextmanager
    def write_batch(self) -> Iterator[None]:
        """One short write transaction of a :func:`holding` unit."""
        with self.conn.write_transaction():
            yield

    @contextmanager
    def read_batch(self) -> Iterator[None]:
        """One consistent snapshot of a :func:`holding` unit."""
        with self.conn.read_transaction():
            yield


@contextmanager
def writing(handle: Handle, *, keeps_heads: bool = False) -> Iterator[Unit]:
    """A write transaction on ``handle`` (``BEGIN IMMEDIATE``; COMMIT when the block ends,
    ROLLBACK if it raises). ``keeps_heads``: the unit moves no pointer except through
    ``ops/commit.publish`` (which keeps the handle's cached pointers true); any other
    write unit drops them."""
    with (
        handle.use(write=True, keeps_heads=keeps_heads) as store,
        store.conn.write_transaction(),
    ):
        yield Unit(handle, store, writes=True)


@contextmanager
def reading(handle: Handle, *, snapshot: bool = True) -> Iterator[Unit]:
    """A read snapshot on ``handle`` (``snapshot=False``: none -- each statement reads its
    own, which is all a block of one statement needs)."""
    with handle.use() as store:
        if not snapshot:
            yield Unit(handle, store, writes=False)
            return
        with store.conn.read_transaction():
            yield Unit(handle, store, writes=False)


@contextmanager
def holding(
    handle: Handle, *, write: bool = False, schema_work: bool = False, keeps_heads: bool = False
) -> Iterator[Unit]:
    """The handle without a transaction, for an operation of many short ones (see the module
    docstring). ``schema_work``: allowed while migrations are pending; ``keeps_heads`` as
    for :func:`writing`."""
    with handle.use(write=write, schema_work=schema_work, keeps_heads=keeps_heads) as store:
        yield Unit(handle, store, writes=write)


def _operation(
    begin: Callable[[Handle], AbstractContextManager[Unit]],
) -> Callable[[Callable[Concatenate[Unit, P], R]], Callable[Concatenate[Handle | Unit, P], R]]:
    def decorate(
        fn: Callable[Concatenate[Unit, P], R],
    ) -> Callable[Concatenate[Handle | Unit, P], R]:
        @functools.wraps(fn)
        def run(at: Handle | Unit, /, *args: P.args, **kwargs: P.kwargs) -> R:
            if type(at) is Unit:
                return fn(at, *args, **kwargs)
            assert not isinstance(at, Unit)
            with begin(at) as tx:
                return fn(tx, *args, **kwargs)

        return run

    return decorate


#: An operation in a read snapshot of its own (or of the unit it is called with).
reads = _operation(reading)
#: An operation in a write transaction of its own (or of the unit it is called with).
writes = _operation(writing)


def holds(
    *, write: bool = False, schema_work: bool = False
) -> Callable[[Callable[Concatenate[Unit, P], R]], Callable[Concatenate[Handle | Unit, P], R]]:
    """An operation that holds the handle and opens short transactions of its own."""
    return _operation(lambda handle: holding(handle, write=write, schema_work=schema_work))
