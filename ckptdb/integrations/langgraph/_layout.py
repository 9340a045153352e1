"""How LangGraph checkpoints are laid out in ckptdb: namespaces, entries and the envelope.

* One ckptdb **namespace** per ``(thread_id, checkpoint_ns)`` pair:
  ``langgraph/<thread>`` for the root graph, ``langgraph/<thread>/<checkpoint_ns>`` for a
  subgraph, each part percent-encoded so the mapping is injective and the result is plain
  printable ASCII (hence NFC, no control characters, no surrounding whitespace): an encoded
  part never holds ``/``, so the name splits back into its parts in exactly one way. A name
  that would exceed ckptdb's 256 characters becomes ``langgraph#<sha256 of that readable
  name>`` instead: the readable name is already injective, so its hash is too (as far as
  sha256 resists collisions), and ``#`` never appears in the readable form, so the two forms
  cannot collide. (Up to langgraph schema version 2 the hash was taken over ``thread NUL
  checkpoint_ns``, which ids containing NUL share; files of that time keep the names they
  registered in ``lg_namespace``; migration ``0003`` separates the threads that shared
  one, see :meth:`.maintenance.Maintenance.separate_shared_namespaces`.)
* An encrypted thread (the saver's ``encryption=``) lives under its key's scope prefix,
  ``langgraph@<key id>/``, then the same name (``langgraph@<key id>/#<sha256>`` when long);
  the key id is percent-encoded too, so no scope prefix is a prefix of another.
* A thread keeps the namespace its first put registered in ``lg_namespace``; the mapping
  names only new threads.
* One ckptdb **checkpoint** per LangGraph checkpoint, with entries:

  - ``checkpoint`` -- the *envelope* (below): the LangGraph checkpoint with the channel
    values that ride inline, the parent checkpoint id, and the names of the entries that
    hold the larger values;
  - ``channels/<channel>`` -- one entry per channel value larger than the inline limit,
    holding the serializer's bytes. ckptdb blobs are content addressed, so a channel whose
    value did not change since an earlier checkpoint adds no bytes at all: the new manifest
    points at the same blob.

  Values up to the inline limit (default 256 bytes) ride in the envelope: an entry costs
  about as much as such a value (an entry row, an index row and a 64-character digest), so
  giving it a blob of its own would cost more space and time than it saves.

* The ckptdb **metadata** of the checkpoint holds LangGraph's metadata under ``langgraph``
  plus ``lg_thread_id``, ``lg_checkpoint_ns``, ``lg_checkpoint_id`` and ``lg_run_id``, so
  ``ckptdb log`` and ``ckptdb prune --where`` speak LangGraph too.

The envelope is msgpack (``ormsgpack``); each ``[type, bytes]`` pair in it is what
LangGraph's serializer produced (``dumps_typed``). Version 2 (written since issue 25)::

    {"v": 2, "checkpoint": [type, bytes], "parent": str | None,
     "values": {channel: [type, bytes]}, "blobs": {channel: [entry, type]}}

``checkpoint`` is the whole LangGraph checkpoint serialized in ONE call, as SqliteSaver
does, its ``channel_values`` holding the inline values and placed first, so a reader can
add the other values to it at the byte level (:func:`merge`); which channels ride inside
is read from it (:func:`inside`), not listed again. ``values`` holds the small values that
cannot ride inside with their type intact (a ``bytearray`` comes back from msgpack as
``bytes``), ``blobs`` the channels stored as entries of their own. Version 1 (the same
keys) serialized every channel value separately, ``checkpoint`` being the LangGraph
checkpoint *without* its channel values; it stays readable (:func:`splice`). Neither
names the thread, so copying a thread re-uses every blob.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ormsgpack

from ...errors import CorruptionError, InvalidInputError

NAMESPACE_PREFIX = "langgraph/"
HASHED_NAMESPACE_PREFIX = "langgraph#"
ENCRYPTED_PREFIX = "langgraph@"
MAX_NAMESPACE_CHARS = 256
ENVELOPE_ENTRY = "checkpoint"
CHANNEL_PREFIX = "channels/"
#: Longest percent-encoded channel name kept readable in an entry name.
MAX_READABLE_CHANNEL = 200
#: The envelope version this saver writes; it reads every version up to it.
ENVELOPE_VERSION = 2
DEFAULT_INLINE_MAX = 256

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:|")

Typed = tuple[str, bytes]


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{what} {text[:80]!r} is not valid Unicode ({exc.reason})"
        ) from exc


def escape(text: str, what: str) -> str:
    """Percent-encode every character outside ``[A-Za-z0-9-_.:|]`` (as UTF-8 bytes)."""
    if all(c in _SAFE for c in text):
        return text
    out: list[str] = []
    for ch in text:
        if ch in _SAFE:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in _utf8(ch, what))
    return "".join(out)


def scope_prefix(key_id: str) -> str:
    """The namespace prefix of the threads encrypted under ``key_id`` (its key scope)."""
    return ENCRYPTED_PREFIX + escape(key_id, "key id") + "/"


@functools.lru_cache(maxsize=4096)
def namespace_for(thread_id: str, checkpoint_ns: str, scope: str = "") -> str:
    """The ckptdb namespace holding the checkpoints of ``(thread_id, checkpoint_ns)``;
    ``scope``: the :func:`scope_prefix` of an encrypted thread."""
    readable = (scope or NAMESPACE_PREFIX) + escape(thread_id, "thread_id")
    if checkpoint_ns:
        readable += "/" + escape(checkpoint_ns, "checkpoint_ns")
    if len(readable) <= MAX_NAMESPACE_CHARS:
        return readable
    # The hash of the (injective, ASCII) readable name: never of the raw parts joined by a
    # separator, which parts holding that separator would share.
    digest = hashlib.sha256(readable.encode("ascii")).hexdigest()
    return (scope + "#" if scope else HASHED_NAMESPACE_PREFIX) + digest


@functools.lru_cache(maxsize=4096)
def channel_entry(channel: str) -> str:
    """The entry name of a channel value stored as its own blob."""
    readable = escape(channel, "channel name")
    if readable.startswith("."):
        readable = "%2E" + readable[1:]  # never a '.' or '..' path segment
    # The empty channel has no readable name ("channels/" is no entry name): hashed.
    if 0 < len(readable) <= MAX_READABLE_CHANNEL:
        return CHANNEL_PREFIX + readable
    return CHANNEL_PREFIX + "~" + hashlib.sha256(_utf8(channel, "channel name")).hexdigest()


@dataclass(frozen=True)
class Envelope:
    """The decoded ``checkpoint`` entry (see the module docstring)."""

    checkpoint: Typed
    parent: str | None
    values: dict[str, Typed]
    blobs: dict[str, tuple[str, str]]
    #: 2: ``checkpoint`` holds the other channel values; 1: it holds none.
    version: int = 1


def encode_envelope(
    checkpoint: Typed,
    parent: str | None,
    values: Mapping[str, Typed],
    blobs: Mapping[str, tuple[str, str]],
) -> bytes:
    """The ``checkpoint`` entry's bytes (version 2): ``checkpoint`` is the LangGraph
    checkpoint serialized with the channel values that ride inside it (its
    ``channel_values`` first), ``values`` the other inline values and ``blobs`` channel ->
    (entry name, type) of those stored as entries of their own."""
    # msgpack packs a tuple as the array a list would be: no per-value conversion.
    return ormsgpack.packb(
        {
            "v": ENVELOPE_VERSION,
            "checkpoint": checkpoint,
            "parent": parent,
            "values": values,
            "blobs": blobs,
        }
    )


_NIL = b"\xc0"
_CHANNEL_VALUES = ormsgpack.packb("channel_values")


def _map_header(count: int) -> bytes:
    if count < 16:
        return bytes((0x80 | count,))
    if count < 1 << 16:
        return b"\xde" + count.to_bytes(2, "big")
    return b"\xdf" + count.to_bytes(4, "big")


def _map_start(data: bytes) -> tuple[int, int] | None:
    """(entry count, header length) of a msgpack map at the start of ``data``, else None."""
    if not data:
        return None
    first = data[0]
    if 0x80 <= first <= 0x8F:
        return first & 0x0F, 1
    if first == 0xDE and len(data) >= 3:
        return int.from_bytes(data[1:3], "big"), 3
    if first == 0xDF and len(data) >= 5:
        return int.from_bytes(data[1:5], "big"), 5
    return None


def splice(checkpoint: Typed, values: Iterable[tuple[str, Typed]]) -> bytes | None:
    """The whole LangGraph checkpoint -- ``checkpoint`` (serialized without its channel
    values) with ``channel_values`` added -- as one msgpack document, built from the bytes
    the serializer produced, without decoding them; None unless every part is plain
    ``msgpack`` (or ``null``), as LangGraph's ``JsonPlusSerializer`` writes them.

    msgpack is a concatenation of self-delimiting objects, so a map whose values are the
    stored encodings decodes (``loads_typed(("msgpack", ...))``) to exactly what decoding
    the body and each value separately and putting the values in does -- in one call
    instead of one per channel.
    """
    type_, body = checkpoint
    head = _map_start(body) if type_ == "msgpack" else None
    if head is None:
        return None
    count, skip = head
    pairs = _pairs(values)
    if pairs is None:
        return None
    return b"".join(
        [
            _map_header(count + 1),
            memoryview(body)[skip:],
            _CHANNEL_VALUES,
            _map_header(len(pairs) // 2),
            *pairs,
        ]
    )


def _pairs(values: Iterable[tuple[str, Typed]]) -> list[bytes] | None:
    """The msgpack key and value bytes of each (channel, typed value), in order; None
    unless every value is plain ``msgpack`` (or ``null``)."""
    out: list[bytes] = []
    for channel, (vtype, data) in values:
        if vtype == "msgpack" and data:
            out += (ormsgpack.packb(channel), data)
        elif vtype == "null":
            out += (ormsgpack.packb(channel), _NIL)
        else:
            return None
    return out


def merge(checkpoint: Typed, values: Sequence[tuple[str, Typed]]) -> bytes | None:
    """The whole LangGraph checkpoint as one msgpack document: a version 2 ``checkpoint``
    (whose first key is ``channel_values``) with ``values`` added to its channel values,
    built from the serializer's bytes without decoding them; None unless every part is
    plain ``msgpack`` (or ``null``). The added pairs go first in the channel values map,
    then those already inside; nothing is copied when there is nothing to add."""
    type_, doc = checkpoint
    outer = _map_start(doc) if type_ == "msgpack" else None
    if outer is None:
        return None
    key_end = outer[1] + len(_CHANNEL_VALUES)
    if doc[outer[1] : key_end] != _CHANNEL_VALUES:
        return None
    inner = _map_start(doc[key_end : key_end + 5])
    if inner is None:
        return None
    if not values:
        return doc
    pairs = _pairs(values)
    if pairs is None:
        return None
    return b"".join(
        [
            memoryview(doc)[:key_end],
            _map_header(inner[0] + len(values)),
            *pairs,
            memoryview(doc)[key_end + inner[1] :],
        ]
    )


def _opaque(_tag: int, _data: bytes) -> None:
    return None  # an extension type (a class LangGraph revives): never revived here


def inside(checkpoint: Typed) -> frozenset[str] | None:
    """The channels whose values ride inside a version 2 ``checkpoint``, read from its
    bytes without reviving any value; None unless it is plain ``msgpack`` (the caller then
    deserializes it). CorruptionError when it holds no map of channel values."""
    type_, doc = checkpoint
    if type_ != "msgpack":
        return None
    try:
        raw = ormsgpack.unpackb(doc, ext_hook=_opaque, option=ormsgpack.OPT_NON_STR_KEYS)
    except ormsgpack.MsgpackDecodeError as exc:
        raise CorruptionError(f"a stored LangGraph checkpoint is not msgpack ({exc})") from exc
    found = raw.get("channel_values") if isinstance(raw, dict) else None
    if not isinstance(found, dict):
        raise CorruptionError("a stored LangGraph checkpoint has no map of channel values")
    return frozenset(str(channel) for channel in found)


def checkpoint_metadata(
    metadata: Mapping[str, object], thread_id: str, checkpoint_ns: str, checkpoint_id: str
) -> tuple[str | None, dict[str, Any]]:
    """The run id (for delete_for_runs) and the ckptdb metadata of the checkpoint holding
    one LangGraph checkpoint with this LangGraph ``metadata``."""
    run_id = metadata.get("run_id")
    run = run_id if isinstance(run_id, str) else None
    ck_meta: dict[str, Any] = {
        "langgraph": metadata,
        "lg_thread_id": thread_id,
        "lg_checkpoint_ns": checkpoint_ns,
        "lg_checkpoint_id": checkpoint_id,
    }
    if run is not None:
        ck_meta["lg_run_id"] = run
    return run, ck_meta


def _typed(value: Any, where: str) -> Typed:
    if (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], bytes)
    ):
        return value[0], value[1]
    raise CorruptionError(f"LangGraph envelope: {where} is not a [type, bytes] pair")


def decode_envelope(data: bytes, checkpoint_id: str) -> Envelope:
    """Parse a ``checkpoint`` entry (already verified against its digest by ckptdb)."""
    try:
        raw = ormsgpack.unpackb(data)
    except ormsgpack.MsgpackDecodeError as exc:
        raise CorruptionError(
            f"checkpoint {checkpoint_id[:12]}: the LangGraph envelope is not msgpack ({exc})",
            checkpoint_id=checkpoint_id,
            entry=ENVELOPE_ENTRY,
        ) from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("v"), int):
        raise CorruptionError(
            f"checkpoint {checkpoint_id[:12]} has no LangGraph envelope; it was not written by "
            "the ckptdb LangGraph saver",
            checkpoint_id=checkpoint_id,
            entry=ENVELOPE_ENTRY,
        )
    version = raw["v"]
    if version > ENVELOPE_VERSION:
        raise InvalidInputError(
            f"checkpoint {checkpoint_id[:12]} uses LangGraph envelope version {version}; this "
            f"ckptdb reads up to version {ENVELOPE_VERSION}. Upgrade ckptdb."
        )
    parent = raw.get("parent")
    values = raw.get("values")
    blobs = raw.get("blobs")
    if (
        (parent is not None and not isinstance(parent, str))
        or not isinstance(values, dict)
        or not isinstance(blobs, dict)
    ):
        raise CorruptionError(
            f"checkpoint {checkpoint_id[:12]}: malformed LangGraph envelope",
            checkpoint_id=checkpoint_id,
            entry=ENVELOPE_ENTRY,
        )
    blob_map: dict[str, tuple[str, str]] = {}
    for channel, ref in blobs.items():
        if not (
            isinstance(channel, str)
            and isinstance(ref, list)
            and len(ref) == 2
            and all(isinstance(x, str) for x in ref)
        ):
            raise CorruptionError(
                f"checkpoint {checkpoint_id[:12]}: malformed blob reference in the envelope",
                checkpoint_id=checkpoint_id,
                entry=ENVELOPE_ENTRY,
            )
        blob_map[channel] = (ref[0], ref[1])
    return Envelope(
        checkpoint=_typed(raw.get("checkpoint"), "checkpoint"),
        parent=parent,
        values={str(k): _typed(v, f"value of {k!r}") for k, v in values.items()},
        blobs=blob_map,
        version=version,
    )
