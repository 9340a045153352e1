"""The hand-spelled canonical encodings (entries, pointer digests, manifests) are exactly
the canonical JSON they stand for: a checkpoint id or pointer digest never depends on
which of the two computed it."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from ckptdb import canonical

text = st.text(max_size=40)
optional = st.none() | text
records = st.lists(
    st.builds(
        canonical.EntryRecord,
        name=text,
        digest=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
        size=st.integers(min_value=0, max_value=2**62),
        media_type=optional,
        schema_pin=optional,
    ),
    max_size=6,
)


@given(records)
def test_entries_json_is_the_canonical_json_of_the_entries(
    entries: list[canonical.EntryRecord],
) -> None:
    assert canonical.entries_json(entries) == canonical.dumps(
        [canonical.entry_json(e) for e in entries]
    )


@given(text, st.integers(min_value=1, max_value=2**62), optional, optional, optional)
def test_pointer_digest_is_over_the_canonical_json(
    namespace: str, revision: int, current: str | None, fallback: str | None, previous: str | None
) -> None:
    reference = canonical.dumps(
        {
            "current": current,
            "fallback": fallback,
            "namespace": namespace,
            "previous": previous,
            "revision": revision,
        }
    )
    expected = hashlib.sha256(canonical.POINTER_DOMAIN + reference.encode()).hexdigest()
    assert canonical.pointer_digest(namespace, revision, current, fallback, previous) == expected


@given(
    text,
    optional,
    st.integers(min_value=1, max_value=2**62),
    records,
    st.dictionaries(text, st.integers()),
)
def test_manifest_text_is_the_canonical_json_of_the_manifest(
    namespace: str,
    parent: str | None,
    generation: int,
    entries: list[canonical.EntryRecord],
    metadata: dict[str, int],
) -> None:
    meta = canonical.dumps(metadata)
    reference = canonical.dumps(
        {
            "entries": [canonical.entry_json(e) for e in entries],
            "generation": generation,
            "metadata": metadata,
            "namespace": namespace,
            "parent": parent,
        }
    )
    assert canonical.manifest_text(namespace, parent, generation, entries, meta) == reference
