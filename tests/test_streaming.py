"""Large entries stream in and out with bounded memory, past SQLite's 1e9-byte row limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, child_env

SIZE = int(os.environ.get("CKPTDB_STREAM_BYTES", str(1_500_000_000)))
MAX_GROWTH = 64 * 1024 * 1024


def test_1_5_gb_entry_round_trip_with_bounded_memory(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "tools" / "stream_worker.py"),
            str(tmp_path / "big.ckpt"),
            str(SIZE),
        ],
        env=child_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    result = json.loads(out.stdout)
    assert result["read_size"] == SIZE
    assert result["written_digest"] == result["entry_digest"] == result["read_digest"]
    growth = result["peak_rss"] - result["baseline_rss"]
    print(
        f"\n{SIZE / 1e9:.2f} GB: write {result['write_seconds']:.1f}s, "
        f"read {result['read_seconds']:.1f}s, peak RSS growth {growth / 2**20:.1f} MiB"
    )
    assert growth < MAX_GROWTH, f"peak RSS grew by {growth / 2**20:.1f} MiB"
