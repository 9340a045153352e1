"""docs/cli.md is generated from the click commands, and every command example in the
README and docs/ runs as written against a fresh file."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, child_env

SCRIPT = str(Path(sys.executable).parent / "ckptdb")
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: A fenced block whose first line is this comment is not run (it needs a service or a
#: file the reader brings, e.g. an S3 bucket or a LangGraph database).
SKIP_MARK = "# not run in tests"


def test_cli_docs_match_the_commands() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_cli_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"regenerate with `python tools/gen_cli_docs.py`: {proc.stdout}"


def _examples() -> list[tuple[str, int, str]]:
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for match in re.finditer(r"```(?:sh|bash|console)\n(.*?)```", text, re.S):
            block = match.group(1)
            if block.lstrip().startswith(SKIP_MARK):
                continue
            if not re.search(r"^ckptdb ", block, re.M):
                continue  # maintainer tools (benchmarks, harnesses): tests/test_tools.py
            line = text[: match.start()].count("\n") + 1
            found.append((doc.name, line, block))
    return found


@pytest.mark.parametrize(("doc", "line", "block"), _examples(), ids=lambda v: str(v)[:40])
def test_documented_commands_run(tmp_path: Path, doc: str, line: int, block: str) -> None:
    """Each block runs in a fresh directory, as a shell script, stopping at the first
    failing command (``set -e``); ``ckptdb`` is this environment's console script."""
    bin_dir = Path(SCRIPT).parent
    env = {**child_env(), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "notes.txt").write_text("hello\n")
    script = "set -e\n" + block
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{doc}:{line}: {shlex.quote(block)}\nstdout: {proc.stdout[-2000:]}\n"
        f"stderr: {proc.stderr[-2000:]}"
    )
