"""How many functions a small commit and a 1 KB LangGraph put pass through.

    python tools/count_calls.py              # both paths, a table
    python tools/count_calls.py --json out.json
    python tools/count_calls.py --show commit   # every call of one small commit, in order

A warm handle commits ``{"a": b"x"}`` (and a warm CkptdbSaver puts a 1 KB state of 10
channels, one changed) while ``sys.setprofile`` records every call. Reported per path:

* ``ckptdb functions``: distinct Python functions defined under ``ckptdb/`` that ran;
* ``ckptdb frames``: calls of those functions;
* ``all calls``: every call, Python and C (builtins, apsw, hashlib, zstd, ...);
* ``depth``: the deepest nesting of ckptdb frames below the public call.

The median of ``--repeat`` measured calls is reported (the first calls after opening fill
caches, so they are skipped). Issue 24's targets: a small commit <= 30 functions / <= 130
calls; a 1 KB saver put <= 40 / <= 170.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ckptdb

ROOT = str(Path(ckptdb.__file__).resolve().parent)


class _Recorder:
    def __init__(self) -> None:
        self.functions: set[tuple[str, int, str]] = set()
        self.frames = 0
        self.calls = 0
        self.depth = 0
        self.max_depth = 0
        self.trace: list[str] = []

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self.calls += 1
            code = frame.f_code
            if code.co_filename.startswith(ROOT):
                self.frames += 1
                self.functions.add((code.co_filename, code.co_firstlineno, code.co_name))
                self.depth += 1
                self.max_depth = max(self.max_depth, self.depth)
                where = code.co_filename[len(ROOT) + 1 :]
                self.trace.append(f"{'  ' * self.depth}{where}:{code.co_name}")
        elif event == "c_call":
            self.calls += 1
            self.trace.append(f"{'  ' * (self.depth + 1)}[C] {getattr(arg, '__qualname__', arg)}")
        elif event == "return":
            code = frame.f_code
            if code.co_filename.startswith(ROOT):
                self.depth -= 1


def measure(action: Callable[[], object]) -> _Recorder:
    """Record one call of ``action``."""
    recorder = _Recorder()
    sys.setprofile(recorder)
    try:
        action()
    finally:
        sys.setprofile(None)
    return recorder


def _commit_path(directory: Path) -> Callable[[], object]:
    db = ckptdb.open(directory / "commit.ckpt")
    counter = iter(range(10**9))
    for _ in range(20):
        db.commit("ns", {"a": b"x%d" % next(counter)})

    def one() -> object:
        return db.commit("ns", {"a": b"x%d" % next(counter)})

    return one


def _put_path(directory: Path) -> Callable[[], object]:
    from langgraph.checkpoint.base import empty_checkpoint

    from ckptdb.integrations.langgraph import CkptdbSaver

    saver = CkptdbSaver(ckptdb.open(directory / "put.ckpt"))
    channels = {f"c{i}": "v" * 100 for i in range(10)}
    config: dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    step = iter(range(10**9))

    def one() -> object:
        nonlocal config
        n = next(step)
        checkpoint = empty_checkpoint()
        channels[f"c{n % 10}"] = f"{n:04d}" + "v" * 96
        checkpoint["channel_values"] = dict(channels)
        checkpoint["channel_versions"] = {k: str(n) for k in channels}
        config = saver.put(config, checkpoint, {"source": "loop", "step": n}, {})  # type: ignore[arg-type]
        return config

    for _ in range(20):
        one()
    return one


PATHS = {"commit": _commit_path, "put": _put_path}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--show", choices=sorted(PATHS), help="print one call's trace")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in PATHS.items():
            one = build(Path(tmp))
            runs = [measure(one) for _ in range(args.repeat)]
            if args.show == name:
                print("\n".join(runs[-1].trace))
            results[name] = {
                "ckptdb functions": statistics.median(len(r.functions) for r in runs),
                "ckptdb frames": statistics.median(r.frames for r in runs),
                "all calls": statistics.median(r.calls for r in runs),
                "depth": statistics.median(r.max_depth for r in runs),
            }
    print(f"{'path':8} {'functions':>10} {'frames':>8} {'calls':>7} {'depth':>6}")
    for name, r in results.items():
        print(
            f"{name:8} {r['ckptdb functions']:>10.0f} {r['ckptdb frames']:>8.0f} "
            f"{r['all calls']:>7.0f} {r['depth']:>6.0f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
