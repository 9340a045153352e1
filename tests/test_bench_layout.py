"""tools/bench_layout.py still runs in its quick mode and reports every contender. Only the
shape of the report and what holds whatever the disk does (frame counts, positive times) is
checked -- timings are the tool's business (docs/performance.md holds the figures)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import run_tool

LAYOUTS = ("current", "binary", "packed", "packed-nofk", "hashed", "lean")


def test_bench_layout_quick(tmp_path: Path) -> None:
    report: dict[str, Any] = run_tool(
        "bench_layout", "--quick", "--dir", str(tmp_path), tmp=tmp_path, timeout=120
    )
    contenders = report["contenders"]
    scenarios = ("1ns", f"{report['namespaces']}ns")
    assert set(contenders) == {"floor"} | {f"{x}/{s}" for x in LAYOUTS for s in scenarios}
    for c in contenders.values():
        times = [c[k] for k in ("commit_median_us", "commit_p90_us", "txn_median_us")]
        assert all(v > 0 for v in [*times, c["cpu_mean_us"], *c["ratio_to_floor"].values()])
        assert abs(c["frames_per_commit"] - sum(c["frames_by_btree"].values())) < 0.2
    assert contenders["floor"]["ratio_to_floor"]["commit_median"] == 1.0
    # Every layout writes more than the floor's one table; the real schema writes its blob
    # digest index on every commit, and since v6 no pointer index (the v5-shaped layouts
    # still write them).
    floor_frames = contenders["floor"]["frames_per_commit"]
    for s in scenarios:
        for x in LAYOUTS:
            assert contenders[f"{x}/{s}"]["frames_per_commit"] > floor_frames
        real = contenders[f"current/{s}"]["frames_by_btree"]
        assert real["sqlite_autoindex_blob_1"] >= 1.0 and "pointer_by_current" not in real
        assert contenders[f"binary/{s}"]["frames_by_btree"]["pointer_by_current"] >= 1.0
        assert "entry" not in contenders[f"packed/{s}"]["frames_by_btree"]
