"""schema/ckptdb.sql and schema/models/*.json are generated; they must not drift."""

from __future__ import annotations

import gen_schema


def test_generated_schema_files_match_the_code() -> None:
    stale = [
        str(path.relative_to(gen_schema.REPO))
        for path, text in gen_schema.expected_files().items()
        if not path.exists() or path.read_text() != text
    ]
    assert not stale, f"regenerate with `python tools/gen_schema.py`: {stale}"
