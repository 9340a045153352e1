"""The serializer policy: LangGraph's ``JsonPlusSerializer`` (optionally inside an
``EncryptedSerializer``), with pickle refused both ways -- nothing else is known not to
pickle, and ckptdb never stores or loads pickle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ... import errors
from ._layout import Typed
from .errors import PickleRefusedError


def checked_serde(serde: SerializerProtocol | None) -> SerializerProtocol:
    """LangGraph's JsonPlusSerializer (optionally inside an EncryptedSerializer) with pickle
    disabled; anything else is refused, because no other serializer is known not to pickle."""
    if serde is None:
        return JsonPlusSerializer(pickle_fallback=False)
    inner = serde.serde if isinstance(serde, EncryptedSerializer) else serde
    if not isinstance(inner, JsonPlusSerializer):
        raise errors.InvalidInputError(
            f"CkptdbSaver needs LangGraph's JsonPlusSerializer (optionally wrapped in an "
            f"EncryptedSerializer), got {type(inner).__name__}; other serializers may use pickle"
        )
    if inner.pickle_fallback:
        raise PickleRefusedError(
            "the serializer has pickle_fallback=True; ckptdb never stores pickle. Use "
            "JsonPlusSerializer() (pickle_fallback defaults to False)"
        )
    return serde


def _pickled() -> PickleRefusedError:
    return PickleRefusedError("the serializer produced pickle; ckptdb never stores pickle")


def dumps(serde: SerializerProtocol, value: Any) -> Typed:
    """``value`` serialized: (type, bytes)."""
    type_, data = serde.dumps_typed(value)
    if type_ == "pickle":
        raise _pickled()
    return type_, bytes(data)


def dumps_each(serde: SerializerProtocol, values: Mapping[str, Any]) -> dict[str, Typed]:
    """Every value of ``values`` serialized on its own, in order (one Python call for
    them all: a put serializes its large and changed values this way)."""
    dumps_typed = serde.dumps_typed
    out: dict[str, Typed] = {}
    for key, value in values.items():
        type_, data = dumps_typed(value)
        if type_ == "pickle":
            raise _pickled()
        out[key] = (type_, bytes(data))
    return out


def size_bound(value: Any) -> int | None:
    """At most how many bytes msgpack takes for ``value``, known without serializing it
    (a plain string, bytes, a number that fits 64 bits, a boolean or None); None for
    anything else (subclasses too: the serializer may tag them with their class)."""
    kind = type(value)
    if kind is str:
        # isascii() reads a flag CPython keeps: no scan. A header takes at most 5 bytes.
        return (len(value) if value.isascii() else 4 * len(value)) + 5
    if kind is bytes:
        return len(value) + 5
    if value is None or kind is bool or kind is float:
        return 9  # a marker and at most 8 bytes
    if kind is int and -(2**63) <= value < 2**64:
        return 9
    return None


def loads(serde: SerializerProtocol, type_: str, data: bytes) -> Any:
    """The value stored as (``type_``, ``data``); CorruptionError when it does not decode."""
    if type_ == "pickle":
        raise PickleRefusedError(
            "a stored value is tagged 'pickle'; ckptdb never loads pickle (the file was "
            "written by something else)"
        )
    try:
        return serde.loads_typed((type_, data))
    except Exception as exc:  # the serializer's own errors vary by format and library
        raise errors.CorruptionError(
            f"a stored value tagged {type_!r} could not be decoded ({type(exc).__name__}: "
            f"{exc}); it is damaged or was written with another serializer",
            reason="undecodable_value",
        ) from exc
