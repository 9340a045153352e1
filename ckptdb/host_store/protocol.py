"""The host store protocol: two methods for hosts that must decide where bytes go.

A program that keeps its checkpoints as bytes (an envelope it encodes itself) hands them to
a :class:`HostStore` and keeps the location it gets back; later, possibly in another
process, it gives that location to ``get`` and receives the same bytes. What a location
means is the store's business alone. This module holds the contract and the input rules
every store applies the same way (:func:`validate_key`, :func:`validate_data`,
:func:`validate_location`), so that callers see the same errors whichever store the host
plugged in.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .. import errors

#: The longest key (in characters) a store must accept.
MAX_KEY_CHARS = 1024
#: The longest location (in characters) a store may return, so that callers can size the
#: column or field they keep locations in.
MAX_LOCATION_CHARS = 4096


@runtime_checkable
class HostStore(Protocol):
    """Where a host keeps checkpoint bytes: ``put`` bytes, get an opaque location back;
    ``get`` that location, get the same bytes back.

    The contract every implementation keeps (``ckptdb.testing.host_store`` checks it):

    - **Locations are opaque.** A location is a non-empty ``str`` of at most
      :data:`MAX_LOCATION_CHARS` characters with no NUL. Callers store it and hand it back
      unchanged; they never parse it, join it to a path or build one themselves. Only the
      store that returned it knows what it means.
    - **Every location stays valid** until the host deletes what it names through the
      store's own means (a retention rule, a GC, removing a file): ``get`` returns exactly
      the bytes given to the ``put`` that returned it, from any thread, and -- for a store
      over shared storage -- from any process.
    - **Unknown locations are typed errors.** ``get`` of a location that names nothing (never
      written here, or deleted since) raises :class:`~ckptdb.errors.LocationNotFoundError`
      (code ``location_not_found``); of something this store could never have returned (not
      a str, malformed, another store's) it raises
      :class:`~ckptdb.errors.InvalidLocationError` (``invalid_location``). Never a bare
      ``KeyError`` or ``OSError``, never empty bytes.
    - **Never wrong bytes.** Bytes that no longer match what was put raise a
      :class:`~ckptdb.errors.CorruptionError` (a subclass such as
      :class:`~ckptdb.errors.LocationCorruptError`); ``get`` never returns damaged bytes.
    - **The key is a label, not an identity.** It describes what is stored (e.g.
      ``"turn-153012-000041.json"``); a store may use it in its names, record it or ignore
      it. Two puts with one key and different bytes give two locations, both valid. A key
      is a non-empty ``str`` of at most :data:`MAX_KEY_CHARS` characters with no NUL and no
      lone surrogate; any other raises :class:`~ckptdb.errors.InvalidStoreKeyError`
      (``invalid_store_key``) before anything is stored, and data that is not bytes raises
      :class:`~ckptdb.errors.InvalidInputError`.
    - **Same bytes twice.** Putting the same bytes again (with the same key or another)
      returns a location that is valid like any other; whether it equals the first one is
      the store's choice (a content-addressed store may return the same location). Callers
      must not rely on either.
    - **Thread-safe.** ``put`` and ``get`` may be called from many threads at once; each put
      gets its own valid location.
    - **Durable on return.** When ``put`` returns, the bytes survive a crash of the process
      (and, for a local store, of the machine) as far as the storage below can promise.

    Errors are :class:`~ckptdb.errors.CkptdbError` subclasses with stable codes; a store
    over its own backend should translate that backend's errors the same way.
    """

    def put(self, data: bytes, *, key: str) -> str:
        """Store ``data`` durably and return an opaque location naming it.

        ``key`` is a descriptive label (see the class docstring); it is validated but
        carries no identity."""
        ...

    def get(self, location: str) -> bytes:
        """The bytes stored at ``location``, verified.

        Raises LocationNotFoundError (nothing there), InvalidLocationError (not a location
        of this store) or a CorruptionError (damaged bytes; none are returned)."""
        ...


def validate_key(key: object) -> str:
    """Return ``key`` if every store must accept it as a label, else raise
    :class:`~ckptdb.errors.InvalidStoreKeyError` saying what to change."""
    if not isinstance(key, str):
        raise errors.InvalidStoreKeyError(
            f"a store key must be a str (a label such as 'turn-12.json'), got {type(key).__name__}"
        )
    if not key:
        raise errors.InvalidStoreKeyError(
            "the store key is empty; pass a short label describing the bytes, "
            "such as 'turn-12.json'"
        )
    if len(key) > MAX_KEY_CHARS:
        raise errors.InvalidStoreKeyError(
            f"the store key is {len(key)} characters; the limit is {MAX_KEY_CHARS}. Keys are "
            "labels: shorten it (identity is the location put returns)",
            length=len(key),
            limit=MAX_KEY_CHARS,
        )
    if "\x00" in key:
        raise errors.InvalidStoreKeyError(
            f"the store key {key[:80]!r} contains a NUL character; remove it"
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise errors.InvalidStoreKeyError(
            f"the store key {key[:80]!r} holds a lone surrogate and is not valid Unicode text; "
            "decode it properly (or use errors='replace') before passing it"
        ) from None
    return key


def validate_data(data: object) -> bytes:
    """Return ``data`` as immutable ``bytes`` (a bytearray or memoryview is copied), else
    raise :class:`~ckptdb.errors.InvalidInputError`."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        # A copy, so a caller mutating its buffer later cannot change what was stored.
        return bytes(data)
    raise errors.InvalidInputError(
        f"a store puts bytes, got {type(data).__name__}; encode text first (e.g. "
        "text.encode('utf-8'))"
    )


def validate_location(location: object) -> str:
    """Return ``location`` if it could be a location at all (a non-empty str of at most
    :data:`MAX_LOCATION_CHARS` characters without NUL), else raise
    :class:`~ckptdb.errors.InvalidLocationError`. Each store then checks its own format."""
    if not isinstance(location, str):
        raise errors.InvalidLocationError(
            f"a location is the str a store's put() returned, got {type(location).__name__}"
        )
    if not location or len(location) > MAX_LOCATION_CHARS or "\x00" in location:
        raise errors.InvalidLocationError(
            f"{location[:80]!r} is not a location: pass the str a store's put() returned, unchanged"
        )
    return location
