"""Issue 12 section 3: a racing process cannot redirect a checkout.

A real swapper process keeps replacing a directory of the target's path with a symlink to
a directory outside it (and back) while this process runs thousands of checkouts into
that path. Nothing may ever appear outside the target, every failure must be a typed
ckptdb error, and every checkout that reported success must be found, complete, where it
was written: in the real directory, whichever name it had at the time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ckptdb
from ckptdb import errors

SWAPPER = r"""
import os, sys, time
real, aside, outside, stop = sys.argv[1:5]
swaps = 0
while not os.path.exists(stop):
    try:
        os.rename(real, aside)          # the real directory moves away ...
        os.symlink(outside, real)       # ... and a symlink to outside takes its name
        time.sleep(0.0002)
        os.unlink(real)
        os.rename(aside, real)
        swaps += 1
    except OSError:
        pass
    time.sleep(0.0001)
print(swaps)
"""

ENTRIES = {"a.txt": b"alpha", "sub/b.bin": bytes(range(256)), "sub/deep/c": b"c" * 3000}


def _walk_all(root: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        found += [os.path.join(dirpath, n) for n in dirnames + filenames]
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    ("depth", "force", "rounds"),
    [
        (1, False, 3000),  # the target's own parent is swapped
        (2, False, 2000),  # a grandparent is swapped
        (1, True, 1500),  # replacing existing targets (RENAME_EXCHANGE path)
    ],
)
def test_swapping_a_parent_for_a_symlink_never_redirects_a_checkout(
    tmp_path: Path, depth: int, force: bool, rounds: int
) -> None:
    db = ckptdb.open(tmp_path / "race.ckpt")
    db.commit("ns", ENTRIES)
    base = tmp_path / "base"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"keep")
    swapped = base / "mid"  # the directory the swapper replaces
    leaf_parent = swapped if depth == 1 else swapped / "inner"
    leaf_parent.mkdir(parents=True)
    # With --force, every target exists (non-empty) before its checkout.
    if force:
        for i in range(rounds):
            (leaf_parent / f"t{i}").mkdir()
            (leaf_parent / f"t{i}" / "old.txt").write_bytes(b"old")
    if depth == 2:
        # A grandparent swap points into outside/inner, so the path resolves fully.
        (outside / "inner").mkdir()
    stop = tmp_path / "stop"
    swapper = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SWAPPER,
            str(swapped),
            str(base / "mid.aside"),
            str(outside),
            str(stop),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    outcomes: dict[int, str] = {}
    try:
        time.sleep(0.05)
        for i in range(rounds):
            target = leaf_parent / f"t{i}"
            try:
                db.checkout("ns@current", target, force=force)
                outcomes[i] = "ok"
            except errors.CkptdbError as exc:
                assert exc.code in ("unsafe_path", "io_error"), exc.to_dict()
                outcomes[i] = exc.code
            # Any other exception type fails the test right here (untyped failure).
    finally:
        stop.write_bytes(b"")
        out, _ = swapper.communicate(timeout=30)
    swaps = int(out.strip() or 0)
    db.close()
    assert swaps > 50, f"the swapper hardly ran ({swaps} swaps)"
    # Nothing was ever written outside the target.
    assert sorted(_walk_all(outside)) == sorted(
        [str(outside / "keep")] + ([str(outside / "inner")] if depth == 2 else [])
    )
    assert (outside / "keep").read_bytes() == b"keep"
    # The swapper left the real directory in place; every success is there, complete.
    assert swapped.is_dir() and not swapped.is_symlink()
    ok = [i for i, o in outcomes.items() if o == "ok"]
    assert ok, outcomes
    for i in ok:
        target = leaf_parent / f"t{i}"
        files = {
            str(p.relative_to(target)): p.read_bytes() for p in target.rglob("*") if p.is_file()
        }
        assert files == ENTRIES, (i, sorted(files))
    for i, outcome in outcomes.items():
        target = leaf_parent / f"t{i}"
        if outcome != "ok":
            if force:  # a refused replacement left the old content untouched
                assert (target / "old.txt").read_bytes() == b"old"
            else:
                assert not target.exists()
    # No staging directory was left behind anywhere.
    leftovers = [p for p in _walk_all(tmp_path) if ".ckptdb-checkout-" in p]
    assert not leftovers, leftovers
    refused = sum(1 for o in outcomes.values() if o != "ok")
    print(f"depth={depth} force={force}: {len(ok)} ok, {refused} refused, {swaps} swaps")
