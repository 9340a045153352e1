"""Canonical encodings and the digests computed over them.

A checkpoint id is ``sha256(domain || canonical JSON)`` of what the checkpoint *is*:
namespace, parent id, generation, entries sorted by name and metadata. Wall-clock time is
deliberately left out so that a retried commit computes the same id. Canonical JSON here
means: keys sorted, no insignificant whitespace, UTF-8 (not ASCII-escaped), no NaN or
infinities, optional fields omitted when absent (so adding an optional field later never
changes the id of an old checkpoint). The domain prefix names the encoding version: a
future encoding gets a new prefix and old ids stay verifiable.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol

CHECKPOINT_DOMAIN = b"ckptdb-checkpoint-v1\n"
POINTER_DOMAIN = b"ckptdb-pointer-v1\n"
CHUNK_LIST_DOMAIN = b"ckptdb-chunk-list-v1\n"
RECEIPT_DOMAIN = b"ckptdb-receipt-v1\n"
FORMAT_VERSION = 1


# One encoder, built once: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def dumps(value: Any) -> str:
    """Canonical JSON text of ``value`` (raises ValueError/TypeError when not JSON)."""
    return _ENCODER.encode(value)


#: ``dumps`` of a str, without the encoder set-up ``json.dumps`` pays per call: the C
#: string encoder json.dumps itself uses for a str when ensure_ascii is off.
_json_string: Callable[[str], str] = json.encoder.encode_basestring


def sha256_hex(data: bytes) -> str:
    """Lowercase hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


class EntryFields(Protocol):
    """What of an entry takes part in the checkpoint identity: a commit's
    :class:`EntryRecord` and a stored ``store.rows.EntryRow`` both have it."""

    @property
    def name(self) -> str: ...
    @property
    def digest(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def media_type(self) -> str | None: ...
    @property
    def schema_pin(self) -> str | None: ...


class EntryRecord(NamedTuple):
    """One entry of a commit, as it takes part in the checkpoint identity."""

    name: str
    digest: str
    size: int
    media_type: str | None
    schema_pin: str | None


def entry_json(entry: EntryFields) -> dict[str, Any]:
    """The JSON object of one entry inside the canonical manifest."""
    out: dict[str, Any] = {"digest": entry.digest, "name": entry.name, "size": entry.size}
    if entry.media_type is not None:
        out["media_type"] = entry.media_type
    if entry.schema_pin is not None:
        out["schema"] = entry.schema_pin
    return out


def entries_json(entries: Iterable[EntryFields]) -> str:
    """The canonical JSON of a checkpoint's entries (sorted by name): exactly
    ``dumps([entry_json(e) for e in entries])``, spelled out because every commit and every
    verified read computes it (keys in sorted order: digest, media_type, name, schema, size)."""
    parts = []
    for e in entries:
        media = "" if e.media_type is None else ',"media_type":' + _json_string(e.media_type)
        schema = "" if e.schema_pin is None else ',"schema":' + _json_string(e.schema_pin)
        parts.append(
            '{"digest":' + _json_string(e.digest) + media + ',"name":' + _json_string(e.name)
            + schema + ',"size":' + str(int(e.size)) + "}"
        )  # fmt: skip
    return "[" + ",".join(parts) + "]"


def manifest_text(
    namespace: str,
    parent_id: str | None,
    generation: int,
    entries: Iterable[EntryFields] | str,
    metadata_json: str,
) -> str:
    """The canonical manifest of a checkpoint. ``entries`` must be sorted by name (or be
    their :func:`entries_json`) and ``metadata_json`` must already be canonical."""
    head = entries if isinstance(entries, str) else entries_json(entries)
    # Keys in sorted order: entries, generation, metadata, namespace, parent. The metadata
    # text is spliced in verbatim: it is canonical already and re-encoding it is the
    # costliest step of identifying a small checkpoint.
    return (
        '{"entries":'
        + head
        + ',"generation":'
        + str(int(generation))
        + ',"metadata":'
        + metadata_json
        + ',"namespace":'
        + _json_string(namespace)
        + ',"parent":'
        + ("null" if parent_id is None else _json_string(parent_id))
        + "}"
    )


def checkpoint_id(
    namespace: str,
    parent_id: str | None,
    generation: int,
    entries: Iterable[EntryFields] | str,
    metadata_json: str,
) -> str:
    """The id of a checkpoint: sha256 over the domain prefix and its canonical manifest."""
    text = manifest_text(namespace, parent_id, generation, entries, metadata_json)
    return hashlib.sha256(CHECKPOINT_DOMAIN + text.encode("utf-8")).hexdigest()


def pointer_digest(
    namespace: str,
    revision: int,
    current_id: str | None,
    fallback_id: str | None,
    previous_digest: str | None,
) -> str:
    """Digest of one CURRENT pointer state, chained to the digest of the state before it."""
    # dumps({"current", "fallback", "namespace", "previous", "revision"}), spelled out: one
    # per commit.
    text = (
        '{"current":' + ("null" if current_id is None else _json_string(current_id))
        + ',"fallback":' + ("null" if fallback_id is None else _json_string(fallback_id))
        + ',"namespace":' + _json_string(namespace)
        + ',"previous":' + ("null" if previous_digest is None else _json_string(previous_digest))
        + ',"revision":' + str(int(revision)) + "}"
    )  # fmt: skip
    return hashlib.sha256(POINTER_DOMAIN + text.encode("utf-8")).hexdigest()


def chunk_list_digest(chunk_digests: Iterable[str]) -> str:
    """Digest of the ordered chunk list of a chunked blob.

    Checked before the first byte of a chunked blob is streamed, so a reordered or swapped
    chunk list is caught before any bytes reach the caller (each chunk is also checked
    against its own digest, and the whole blob against its digest at the end).
    """
    h = hashlib.sha256(CHUNK_LIST_DOMAIN)
    for digest in chunk_digests:
        h.update(digest.encode("ascii"))
        h.update(b"\n")
    return h.hexdigest()


def receipt_digest(body: Mapping[str, Any]) -> str:
    """Digest binding a receipt's content (stored beside it; verified by ``verify``)."""
    return hashlib.sha256(RECEIPT_DOMAIN + dumps(dict(body)).encode("utf-8")).hexdigest()
