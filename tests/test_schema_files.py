"""schema/ckptdb.sql and schema/models/*.json are generated; they must not drift."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_generated_schema_files_match_the_code() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_schema.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"regenerate with `python tools/gen_schema.py`: {proc.stdout}"
