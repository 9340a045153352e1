"""The benchmarks and profilers under tools/ still run: each in its quick mode, in its own
process, writing its JSON report. Only the shape of the report is checked -- timings are
the tools' business, never a test's (docs/performance.md holds the figures)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, child_env

from ckptdb.integrations.langgraph import CkptdbSaver


def run_tool(tmp_path: Path, *argv: str) -> Any:
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / argv[0]), *argv[1:], "--json", str(out)],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text())


def _positive(*values: Any) -> bool:
    return all(isinstance(v, int | float) and v > 0 for v in values)


@pytest.mark.slow
def test_bench_commit_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_commit.py", "--quick", "--dir", str(tmp_path))
    rates = report["small_commit"]["commits_per_second"]
    assert set(rates) == {"fs-store", "floor", "ckptdb"} and _positive(*rates.values())
    assert _positive(report["small_commit"]["ckptdb_vs_fs_store"])
    large = report["large_entry"]
    assert _positive(large["ckptdb_write_MBps"], large["ckptdb_read_MBps"], large["bytes"])
    quota = report["quota"]
    assert set(quota["commits_per_second"]) == {
        "none",
        "unrelated_100",
        "refuse_covering",
        "evict_100",
    } and _positive(*quota["commits_per_second"].values())
    assert quota["checkpoints_at_end"]["evict_100"] == 100 and quota["evicting_commits"] > 0


@pytest.mark.slow
def test_bench_commit_threads_with_a_slow_fsync(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_commit.py", "--quick", "--only", "threads", "--sync-ms", "2")
    threads = report["threads"]
    assert threads["sync_ms"] == 2 and _positive(*threads["commits_per_second"].values())
    assert _positive(threads["single_caller_latency_us"]["group"])
    sizes = {int(k): n for k, n in threads["group_8_threads_batch_sizes"].items()}
    assert sizes and all(1 <= k <= 8 for k in sizes)
    # Every commit of the measured 8-thread rounds (3 x 80 in --quick) in exactly one batch.
    assert sum(k * n for k, n in sizes.items()) == 3 * 80


@pytest.mark.slow
def test_bench_gc_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_gc.py", "--quick")
    small, large = report["runs"]
    assert large["checkpoints"] == 5 * small["checkpoints"]
    for run in report["runs"]:
        # keep_last=5 over 100 namespaces: everything but 500 checkpoints goes.
        assert run["deleted"] == run["checkpoints"] - 500
        assert run["file_bytes_after"] < run["file_bytes_before"]
    assert _positive(report["scaling_ratio_per_deleted"])


@pytest.mark.slow
def test_bench_pagesize_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_pagesize.py", "--quick")
    assert set(report["median"]) == {"4096", "8192", "16384"}
    for per_size in report["median"].values():
        assert set(per_size) == {"small", "langgraph", "large"} and _positive(*per_size.values())
    assert report["ratio_to_4096"]["4096"] == {"small": 1.0, "langgraph": 1.0, "large": 1.0}


def test_profile_commit_attributes_every_frame(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "profile_commit.py", "--commits", "30")
    frames = report["frames_by_btree"]
    # Every commit writes the pointer and at least one page of its history and ids.
    assert frames["pointer"] >= 1.0 and frames["sqlite_autoindex_checkpoint_1"] > 0
    assert report["frames_per_commit"] == pytest.approx(sum(frames.values()), abs=0.2)
    assert 0 < report["of_which_COMMIT_us"] < report["commit_us"]


@pytest.mark.slow
def test_bench_langgraph_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_langgraph.py", "--quick", "--dir", str(tmp_path))
    for workload in ("1kb", "100kb"):
        result = report[workload]
        for saver in ("sqlite", "ckptdb"):
            assert _positive(result[saver]["puts_per_s"], result[saver]["file_bytes"])
        assert result["ckptdb"]["kept_checkpoints"] == 1
        assert result["ckptdb"]["file_bytes_after_prune"] < result["ckptdb"]["file_bytes"]
    chat = report["chat"]
    assert chat["turns"] == 30 and chat["sqlite"]["checkpoints"] == chat["ckptdb"]["checkpoints"]
    estimate = chat["format2_estimate"]
    assert 0 < estimate["distinct_chunk_bytes_zstd"] <= estimate["distinct_chunk_bytes"]
    assert estimate["distinct_chunk_bytes"] <= estimate["distinct_blob_bytes"]


@pytest.mark.slow
def test_bench_langgraph_scale_quick(tmp_path: Path) -> None:
    report = run_tool(
        tmp_path,
        "bench_langgraph.py",
        "--only",
        "scale",
        "--quick",
        "--keep",
        "--dir",
        str(tmp_path),
    )
    assert "1kb" not in report and "chat" not in report  # scale alone
    scale = report["scale"]
    assert scale["threads"] == 20 and scale["sizes"] == [3, 10]
    for point, size in zip(scale["points"], (3, 10), strict=True):
        assert point["checkpoints"] == 20 * size
        for saver in ("sqlite", "ckptdb"):
            timed = {k: v for k, v in point[saver].items() if k.endswith("_us")}
            assert len(timed) >= 20 and _positive(*timed.values(), point[saver]["file_bytes"])
        assert _positive(*point["ratio"].values())
    assert set(scale["growth"]["ckptdb"]) == set(scale["growth"]["sqlite"])
    assert _positive(*scale["growth"]["ckptdb"].values(), *scale["growth"]["sqlite"].values())
    # --keep left both grown files, whole: 20 threads x 10 checkpoints each.
    kept = Path(report["kept_dir"])
    with closing(sqlite3.connect(kept / "sqlite-scale.db")) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (200,)
        assert conn.execute("SELECT count(DISTINCT thread_id) FROM writes").fetchone() == (20,)
    with CkptdbSaver(kept / "ckptdb-scale.db") as saver:
        assert len(list(saver.list(None))) == 200
    assert not list(kept.glob("*-scratch.db*"))  # the scratch copies are gone


def test_bench_read_floor_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_read_floor.py", "--quick")
    assert set(report["median_us"]) == {"saver", "floor", "sql"}
    assert _positive(*report["median_us"].values())
    assert report["ratio_to_sqlite"] is None  # no SqliteSaver file given


@pytest.mark.slow
def test_bench_ttl_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_ttl.py", "--quick")
    assert report["threads"] == 20 and report["checkpoints"] == 200
    for mode in ("on_demand", "background"):
        result = report[mode]
        for phase in ("without_sweep", "during_sweep"):
            row = result[phase]
            assert row["puts"] > 0 and _positive(row["p50_ms"], row["p99_ms"], row["puts_per_s"])
        assert _positive(*result["ratio"].values(), result["sweep_s"], result["threads_per_s"])
        assert result["checkpoints_deleted"] == 200
        assert result["namespaces_left"] == report["live_threads"]  # every expired one went


def test_bench_chunking_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_chunking.py", "--quick", "--big-size-mib", "16")
    for row in report["params"].values():
        # A 1 MiB rewrite costs about 1 MiB, whatever the chunk size.
        assert 1 << 20 <= row["big"]["new_bytes_after_1mib_rewrite"] <= 2 << 20
        assert row["list_end"]["new_stored_per_version"] > 0
    assert set(report["zstd_json_chunks"]) == {"-5", "-1", "1", "3", "6", "9"}


@pytest.mark.slow
def test_bench_format2_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_format2.py", "--quick")
    for where in ("end", "middle"):
        assert _positive(report["growing_list"][where]["mean_new_bytes_per_version"])
    big = report["large_file"]
    assert _positive(big["write_ratio"], big["read_ratio"], big["rewrite_1mib_new_bytes"])


@pytest.mark.slow
def test_bench_encryption_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_encryption.py", "--quick", "--dir", str(tmp_path))
    platform = report["platform"]
    assert platform["openssl"] and isinstance(platform["cpu_flags"]["aes"], bool)
    for size in ("8KiB", "1MiB"):
        assert _positive(*platform["throughput"][size].values())
    for chunk in report["codec_chain"].values():
        assert _positive(chunk["encode_ratio"], chunk["decode_verify_ratio"])
        assert "seal" in chunk["enc"]["codec"] and "seal" not in chunk["plain"]["codec"]
    for workload in ("3x1KiB", "state_1kb", "state_100kb"):
        result = report["small_commit"][workload]
        for key in ("commits_per_second", "p50_latency_us", "p99_latency_us", "cpu_us_per_commit"):
            assert set(result[key]) == {"plain", "enc"} and _positive(*result[key].values())
        assert _positive(result["time_ratio"], result["paired_median_ratio"], result["cpu_ratio"])
        assert _positive(result["p50_ratio"], result["p99_ratio"])
    large = report["large_entry"]
    for side in ("plain", "enc"):
        assert _positive(large[side]["write_MBps"], large[side]["read_verify_MBps"])
        assert large[side]["write_peak_rss_growth_MiB"] >= 0
    assert _positive(large["write_time_ratio"], large["read_time_ratio"])
    assert _positive(large["paired_median_write_ratio"], large["paired_median_read_cpu_ratio"])


@pytest.mark.slow
def test_bench_secure_delete_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_secure_delete.py", "--quick", "--dir", str(tmp_path))
    cpu = report["small_commit_cpu"]
    assert _positive(cpu["off_us"], cpu["check_us"], cpu["on_us"], cpu["check_alone_us"])
    for mode in ("off", "check", "on"):
        assert _positive(*report["gc"][mode].values())


def test_bench_pg_entries_quick(tmp_path: Path) -> None:
    report = run_tool(tmp_path, "bench_pg_entries.py", "--quick")
    assert report["checkpoints"] == 2_000
    for figures in (report["page_of_50_ms"], report["scan_all_ms"]):
        assert set(figures) == {"unsafe", "safe_fn", "python"}
        assert _positive(*figures.values())


def test_bench_engines_runs_every_workload_on_both_engines(tmp_path: Path) -> None:
    report = run_tool(
        tmp_path, "bench_engines.py", "--checkpoints", "200", "--namespaces", "20", "--ops", "40"
    )
    assert report["checkpoints"] == 200 and report["namespaces"] == 20
    for engine in ("sqlite", "postgresql"):
        assert set(report[engine]) == {"put", "cold_get", "lineage"}
        for figures in report[engine].values():
            assert _positive(figures["wall_us"], figures["client_cpu_us"])
    assert all(w["server_cpu_us"] == 0 for w in report["sqlite"].values())
    assert all(w["server_cpu_us"] >= 0 for w in report["postgresql"].values())
    assert set(report["postgresql_over_sqlite"]) == {"put", "cold_get", "lineage"}
    assert _positive(report["sqlite_file_bytes"], report["postgresql_database_bytes"])


def test_bench_langgraph_pg_runs_every_contender_and_workload(tmp_path: Path) -> None:
    report = run_tool(
        tmp_path,
        "bench_langgraph_pg.py",
        *("--turns", "6", "--threads", "6", "--steps", "10", "--ops", "2"),
    )
    contenders = {"postgres_saver", "ckptdb_pg", "ckptdb_sqlite"}
    chat = report["chat"]
    for who in contenders:
        assert chat[who]["turns"] == 6
        assert _positive(chat[who]["cpu_per_turn_us"], chat[who]["bytes"])
    assert set(chat["ckptdb_pg_over_postgres_saver"]) >= {"cpu_per_turn_us", "bytes"}
    scale = report["scale"]
    assert scale["checkpoints"] == 60
    for name in ("put", "cold_get_tuple", "uncached_get_tuple", "list"):
        assert {who: scale[name][who]["ops"] for who in contenders} == dict.fromkeys(contenders, 2)
        assert _positive(*(scale[name][who]["client_cpu_us"] for who in contenders))
        assert "cpu_us" in scale[name]["ckptdb_pg_over_postgres_saver"]
