"""A host store inside a ckptdb database: every ``put`` is a checkpoint.

Built on the public :class:`~ckptdb.Database` API only (``commit``, ``get``,
``Checkpoint.read``), so it inherits the core's guarantees unchanged: the put is one atomic,
durable commit, and ``get`` returns bytes verified against the checkpoint id.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from .. import errors
from ..database import Database
from .protocol import validate_data, validate_key, validate_location

#: Every location of this store starts with this scheme.
SCHEME = "ckptdb:"
#: The one entry of a host store checkpoint.
ENTRY = "data"
#: The metadata field holding the key the bytes were put under.
KEY_FIELD = "host_store_key"
#: The longest namespace prefix accepted (a namespace holds at most 256 characters, and the
#: part a key adds is at most 128).
MAX_PREFIX_CHARS = 128
#: The longest readable suffix a key names (less after a 128-character prefix given
#: without its "/": a namespace holds at most 256 characters).
MAX_SUFFIX_CHARS = 128
_MAX_NAMESPACE_CHARS = 256
#: A key shaped like this -- a label of letters, digits and ``._+=,:/-`` not starting with
#: punctuation -- names its namespace readably, so an operator listing namespaces reads the
#: host's own labels; any other key is hashed.
_LABEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+=,:/-]*")
#: The readable suffix: the label with each "/" written "%2F". "%" is not in the label
#: alphabet, so the suffix decodes back to exactly one key, and it never holds "/".
_READABLE_SUFFIX = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._+=,:-]|%2F)*")
#: The namespace suffix of a hashed key. "~" is not in the label alphabet, so the two forms
#: never look alike.
_HASHED_KEY = re.compile(r"~[0-9a-f]{40}")
#: The suffix the mapping of ckptdb before issue 23 gave a label: the label itself, "/"
#: included (it let the store with prefix "t/" and key "e/k" write into the namespace of the
#: store with prefix "t/e/" and key "k"). Locations of that time stay readable.
_LEGACY_LABEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+=,:/-]{0,127}")
_CHECKPOINT_ID = re.compile(r"[0-9a-f]{64}")


class DatabaseHostStore:
    """A :class:`~ckptdb.host_store.HostStore` whose bytes are checkpoints of an open
    :class:`~ckptdb.Database`, each in a namespace under ``namespace_prefix``.

    ``put(data, key=k)`` commits ``{"data": data}`` with metadata ``{"host_store_key": k}``
    to the namespace ``namespace_prefix + suffix(k)``. The prefix is a folder: it always
    ends with ``/`` (``"tenant-7"`` is taken as ``"tenant-7/"``), and no suffix holds a
    ``/``: ``suffix(k)`` is ``k`` with each ``/`` written ``%2F`` when ``k`` is a plain
    label (letters, digits and ``._+=,:/-``, not starting with a punctuation mark) that
    stays within 128 characters, else ``"~" + sha256(k)[:40]``. So a namespace splits at
    its last ``/`` into exactly one (prefix, key): two stores, even with nested prefixes
    (``tenant-7/`` and ``tenant-7/engine/``), never write into one namespace. Puts under
    one key form one lineage, whose CURRENT is the latest put. The location names the
    checkpoint: ``ckptdb:<namespace>@<checkpoint id>``. Callers treat it as opaque; this
    store parses it strictly and refuses any other string with InvalidLocationError --
    including a location naming a namespace outside its prefix, so a store scoped to one
    tenant never reads another tenant's checkpoints.

    Files written before this mapping: puts went to ``given prefix + k`` for a plain label
    (``/`` included) and to the same hashed name otherwise. Their locations stay valid
    (``get`` accepts a checkpoint of either mapping whose recorded key maps to its
    namespace); new puts under a key holding ``/`` (or with a prefix given without its
    trailing ``/``) start the key's lineage in the new namespace.

    Same bytes twice: with the same key and nothing put under that key in between, the
    commit is idempotent and the same location comes back; otherwise (another key, or an
    intervening put) a new checkpoint and a new location. Both are valid.

    Lifetime: a location stays valid until its checkpoint is deleted. The latest put under
    each key is its namespace's CURRENT, which GC never deletes; older ones are kept unless
    the host sets a retention policy, a quota that evicts, prunes or drops namespaces under
    the prefix. Then ``get`` raises LocationNotFoundError.

    Encryption: choose a prefix inside the tenant's encrypted key scope (create the scope
    before the first put). The core then encrypts these checkpoints like any other under
    the scope; this store neither knows nor needs to.

    Thread-safe (the :class:`~ckptdb.Database` handle is); concurrent puts on one handle
    share write transactions through group commit. The store does not own ``db``: close
    the database yourself, after the last put or get.
    """

    def __init__(self, db: Database, *, namespace_prefix: str) -> None:
        if not isinstance(db, Database):
            raise errors.InvalidInputError(
                f"DatabaseHostStore needs an open ckptdb.Database, got {type(db).__name__}"
            )
        self._db = db
        # As given: the prefix of the namespaces the mapping before issue 23 wrote.
        self._given = _validate_prefix(namespace_prefix)
        self._prefix = folder_prefix(self._given)
        self._room = min(MAX_SUFFIX_CHARS, _MAX_NAMESPACE_CHARS - len(self._prefix))

    @property
    def namespace_prefix(self) -> str:
        """The prefix of every namespace this store writes (the given one, ending with
        ``/``)."""
        return self._prefix

    def namespace_for(self, key: str) -> str:
        """The namespace that puts under ``key`` commit to (for operators and retention
        policies; callers never need it to read their bytes back)."""
        return self._prefix + key_suffix(validate_key(key), self._room)

    def _legacy_namespace_for(self, key: str) -> str:
        """The namespace the mapping before issue 23 gave ``key`` (reads only)."""
        if _LEGACY_LABEL.fullmatch(key):
            return self._given + key
        return self._given + _hashed(key)

    def put(self, data: bytes, *, key: str) -> str:
        """Commit ``data`` as a checkpoint of :meth:`namespace_for` ``(key)`` and return its
        location. Atomic, and durable when it returns as the database's ``synchronous``
        setting promises (across power loss with the default, ``"full"``)."""
        key = validate_key(key)
        data = validate_data(data)
        namespace = self.namespace_for(key)
        ack = self._db.commit(
            namespace, {ENTRY: data}, metadata={KEY_FIELD: key}, reason="host_store.put"
        )
        return f"{SCHEME}{namespace}@{ack.checkpoint_id}"

    def get(self, location: str) -> bytes:
        """The bytes put at ``location``, verified by the core against the checkpoint id.

        LocationNotFoundError when the checkpoint is not (or no longer) in the database, or
        is not one this store's put wrote under that namespace; InvalidLocationError for a
        string this store never returns; CorruptionError when stored bytes are damaged."""
        namespace, checkpoint_id = self._parse(location)
        try:
            checkpoint = self._db.get(checkpoint_id)
            # The checkpoint must be the one the location describes: in that namespace,
            # written by a put (one entry, the key that maps to that namespace). Anything
            # else under the id is "not found", which also keeps a forged location from
            # reading a checkpoint of another namespace.
            key = checkpoint.metadata.get(KEY_FIELD)
            if (
                checkpoint.namespace != namespace
                or list(checkpoint.entries) != [ENTRY]
                or not isinstance(key, str)
                or namespace not in (self.namespace_for(key), self._legacy_namespace_for(key))
            ):
                raise errors.LocationNotFoundError(
                    f"no host store object at {location[:200]!r}: checkpoint "
                    f"{checkpoint_id[:12]} exists but was not put there by this store",
                    location=location[:200],
                )
            return checkpoint.read(ENTRY)
        except errors.CheckpointNotFoundError as exc:
            raise errors.LocationNotFoundError(
                f"nothing is stored at {location[:200]!r}: checkpoint {checkpoint_id[:12]} is "
                "not in this database (it was never put here, or it was deleted since)",
                location=location[:200],
            ) from exc

    def _parse(self, location: object) -> tuple[str, str]:
        text = validate_location(location)
        shown = text[:200]
        if not text.startswith(SCHEME):
            raise errors.InvalidLocationError(
                f"{shown!r} is not a location of a DatabaseHostStore; pass only the strings "
                "its put() returned",
                location=shown,
            )
        namespace, at, checkpoint_id = text[len(SCHEME) :].rpartition("@")
        if not at or not _CHECKPOINT_ID.fullmatch(checkpoint_id):
            raise errors.InvalidLocationError(
                f"{shown!r} is not a location of a DatabaseHostStore (it names no "
                "checkpoint); pass only the strings its put() returned",
                location=shown,
            )
        if not (namespace.startswith(self._prefix) or namespace.startswith(self._given)):
            raise errors.InvalidLocationError(
                f"{shown!r} names a namespace outside this store's prefix "
                f"{self._prefix!r}; it belongs to another store",
                location=shown,
                namespace_prefix=self._prefix,
            )
        suffix = namespace[len(self._prefix) :]
        legacy = namespace[len(self._given) :]
        if not (
            (namespace.startswith(self._prefix) and is_suffix(suffix, self._room))
            or (
                namespace.startswith(self._given)
                and (_LEGACY_LABEL.fullmatch(legacy) or _HASHED_KEY.fullmatch(legacy))
            )
        ):
            raise errors.InvalidLocationError(
                f"{shown!r} names a namespace this store never writes; pass only the "
                "strings its put() returned",
                location=shown,
            )
        return namespace, checkpoint_id


def folder_prefix(prefix: str) -> str:
    """``prefix`` as a folder: with a trailing ``/`` (added when missing)."""
    return prefix if prefix.endswith("/") else prefix + "/"


def key_suffix(key: str, room: int = MAX_SUFFIX_CHARS) -> str:
    """The namespace suffix of a (valid) key: never empty, never holding ``/``, and
    different for every key (see :class:`DatabaseHostStore`); readable when that fits in
    ``room`` characters."""
    if _LABEL.fullmatch(key):
        readable = key.replace("/", "%2F")
        if len(readable) <= room:
            return readable
    return _hashed(key)


def is_suffix(text: str, room: int = MAX_SUFFIX_CHARS) -> bool:
    """Whether ``text`` is a suffix :func:`key_suffix` can return."""
    return bool(
        (len(text) <= room and _READABLE_SUFFIX.fullmatch(text)) or _HASHED_KEY.fullmatch(text)
    )


def _hashed(key: str) -> str:
    return "~" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]


def _validate_prefix(prefix: object) -> str:
    """A prefix every namespace ``prefix + suffix`` of this store can be valid under."""
    if not isinstance(prefix, str) or not prefix:
        raise errors.InvalidInputError(
            "namespace_prefix must be a non-empty str such as 'tenant-7/checkpoints/'"
        )
    if len(prefix) > MAX_PREFIX_CHARS:
        raise errors.InvalidInputError(
            f"namespace_prefix is {len(prefix)} characters; the limit is {MAX_PREFIX_CHARS}"
        )
    # The same rules a namespace's beginning must follow (printable, no leading whitespace,
    # NFC), checked here so a bad prefix fails at construction and not at the first put.
    if not prefix.isprintable() or prefix != prefix.lstrip():
        raise errors.InvalidInputError(
            f"namespace_prefix {prefix!r} must be printable text with no leading whitespace"
        )
    if unicodedata.normalize("NFC", prefix) != prefix:
        raise errors.InvalidInputError(
            f"namespace_prefix {prefix!r} is not NFC-normalized; pass "
            "unicodedata.normalize('NFC', prefix)"
        )
    return prefix
