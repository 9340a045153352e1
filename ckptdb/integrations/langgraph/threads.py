"""Which ckptdb namespace -- and so which key scope -- holds a LangGraph thread.

A ``(thread_id, checkpoint_ns)`` pair keeps the namespace its first put registered in
``lg_namespace`` (this module is the only one that writes that table); a new pair gets the
one :func:`._layout.namespace_for` names, under its key's scope prefix when the saver's
``encryption`` setting encrypts it. What a lookup found is remembered per pair in the
saver's cache (:class:`._cache.ThreadState`), so a running thread resolves without a read.
"""

from __future__ import annotations

import builtins
import hashlib
from typing import Any

from langchain_core.runnables import RunnableConfig

from ... import errors
from ...extension import Addressed, RecordSealer, Session
from . import _layout
from ._cache import ThreadState, Unknown
from ._core import SaverCore


def configurable(config: RunnableConfig) -> dict[str, Any]:
    """``config["configurable"]``, which must name a ``thread_id``."""
    conf = config.get("configurable")
    if not isinstance(conf, dict) or "thread_id" not in conf:
        raise errors.InvalidInputError(
            "the config needs configurable.thread_id, e.g. {'configurable': {'thread_id': '1'}}"
        )
    return conf


def thread_of(config: RunnableConfig) -> tuple[str, str, dict[str, Any]]:
    """(thread_id, checkpoint_ns, configurable) of a config."""
    conf = configurable(config)
    ns = conf.get("checkpoint_ns") or ""
    if not isinstance(ns, str):
        raise errors.InvalidInputError(f"checkpoint_ns must be a str, got {type(ns).__name__}")
    return str(conf["thread_id"]), ns, conf


def check_owner(session: Session, namespace: str, thread_id: str, ns: str) -> None:
    """CorruptionError unless ``lg_namespace`` registers ``namespace`` to exactly the pair
    ``(thread_id, ns)``: a commit never lands in a namespace that holds (or is registered
    to) another pair, nor outside the one its own pair registered -- so deleting one thread
    can never drop another's checkpoints. Raised inside the commit transaction, it rolls the
    commit back."""
    owners = session.execute(
        "SELECT thread_id, checkpoint_ns FROM lg_namespace WHERE namespace = ?", (namespace,)
    )
    _refuse_other_owners(owners, namespace, thread_id, ns)


def _refuse_other_owners(owners: list[Any], namespace: str, thread_id: str, ns: str) -> None:
    """:func:`check_owner`'s verdict on the pairs ``lg_namespace`` registers
    ``namespace`` to."""
    if [tuple(o) for o in owners] != [(thread_id, ns)]:
        raise errors.CorruptionError(
            f"ckptdb namespace {namespace[:80]!r} is registered to another LangGraph thread "
            f"than {thread_id[:80]!r}/{ns[:80]!r} (or that thread to another namespace); "
            "nothing was committed. The saver's lg_namespace table was altered: run "
            "`ckptdb verify`.",
            reason="lg_namespace_conflict",
            namespace=namespace[:200],
        )


def register(session: Session, namespace: str, thread_id: str, ns: str) -> None:
    """Register ``namespace`` to the pair (if it is not yet) and check that it is theirs
    alone (:func:`check_owner`), in the caller's write transaction. On PostgreSQL both in
    one statement (each is a round trip there): the rows inserted, and those there before
    it (the statement's snapshot does not see its own insert)."""
    if session.dialect == "postgresql":
        owners = session.execute(
            "WITH added AS (INSERT INTO lg_namespace (namespace, thread_id, checkpoint_ns)"
            " VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING thread_id, checkpoint_ns)"
            " SELECT thread_id, checkpoint_ns FROM added UNION ALL"
            " SELECT thread_id, checkpoint_ns FROM lg_namespace WHERE namespace = ?",
            (namespace, thread_id, ns, namespace),
        )
        _refuse_other_owners(owners, namespace, thread_id, ns)
        return
    session.execute(
        "INSERT INTO lg_namespace (namespace, thread_id, checkpoint_ns) VALUES (?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        (namespace, thread_id, ns),
    )
    check_owner(session, namespace, thread_id, ns)


def unregister(session: Session, namespace: str, thread_id: str, ns: str) -> None:
    """Remove the pair's registration of ``namespace`` unless it has rows again, in the
    caller's write transaction."""
    session.execute(
        "DELETE FROM lg_namespace WHERE namespace = ? AND NOT EXISTS (SELECT 1 FROM"
        " lg_checkpoint WHERE thread_id = ? AND checkpoint_ns = ?)",
        (namespace, thread_id, ns),
    )


class Threads(SaverCore):
    """The thread -> namespace mapping and each namespace's key scope."""

    def _key_id(self, config: RunnableConfig) -> str | None:
        if self._encryption is None or isinstance(self._encryption, str):
            return self._encryption
        key_id = self._encryption(config)
        if key_id is not None and not isinstance(key_id, str):
            raise errors.InvalidInputError(
                f"the encryption function returned {type(key_id).__name__}, not a key id (str)"
            )
        return key_id

    def _namespace(self, config: RunnableConfig, thread_id: str, ns: str) -> str:
        """The ckptdb namespace of a thread: where its first put placed it (an encrypted
        thread stays encrypted), or where the encryption setting says a new one goes."""
        known = self._registered_namespace(thread_id, ns)
        if known is not None:
            return known
        key_id = self._key_id(config)
        if key_id is None:
            return _layout.namespace_for(thread_id, ns)
        prefix = _layout.scope_prefix(key_id)
        if not self._cache.scope_ready(key_id):
            self.db.set_encryption(prefix, key_id=key_id)  # idempotent
            self._cache.put_scope_ready(key_id)
        return _layout.namespace_for(thread_id, ns, prefix)

    def _registered_namespace(self, thread_id: str, ns: str) -> str | None:
        """The namespace ``lg_namespace`` registers to the pair, or None."""
        state = self._cache.thread(thread_id, ns)
        if state is not None:
            return state.namespace
        with self.db.read_session(snapshot=False) as s:  # one statement
            value = s.scalar(
                "SELECT namespace FROM lg_namespace WHERE thread_id = ? AND checkpoint_ns = ?",
                (thread_id, ns),
            )
        if not isinstance(value, str):
            return None
        self._cache.put_thread(thread_id, ns, ThreadState(value, False, None, {}))
        return value

    def _namespaces(self, thread_id: str) -> builtins.list[tuple[str, str]]:
        """(ckptdb namespace, checkpoint_ns) of every namespace the thread has used."""
        with self.db.read_session() as s:
            registered = {
                str(ns): str(namespace)
                for namespace, ns in s.execute(
                    "SELECT namespace, checkpoint_ns FROM lg_namespace WHERE thread_id = ?",
                    (thread_id,),
                )
            }
            for (ns,) in s.execute(
                "SELECT DISTINCT checkpoint_ns FROM lg_checkpoint WHERE thread_id = ?",
                (thread_id,),
            ):
                registered.setdefault(str(ns), _layout.namespace_for(thread_id, str(ns)))
        return sorted((namespace, ns) for ns, namespace in registered.items())

    def _sealer(self, namespace: str) -> RecordSealer | None:
        """The record sealer of ``namespace``'s key scope (None: not encrypted)."""
        found = self._cache.sealer(namespace)
        if not isinstance(found, Unknown):
            return found
        sealer = self.db.record_sealer(namespace)
        self._cache.put_sealer(namespace, sealer)
        return sealer

    def _scope_key(self, namespace: str) -> str | None:
        """The key id encrypting ``namespace`` (None: plaintext)."""
        sealer = self._sealer(namespace)
        return None if sealer is None else sealer.key_id

    def _addressed(self, namespace: str, data: bytes) -> Addressed:
        """``data`` with the digest it is stored under in ``namespace`` (see
        ``Database.content_address``): its sha256 unless the namespace is encrypted."""
        sealer = self._sealer(namespace)
        if sealer is None:
            return Addressed(data, hashlib.sha256(data).hexdigest())
        return Addressed(data, self.db.content_address(namespace, data), sealer.scope_id)
