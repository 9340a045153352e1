"""Every Python example (a ```python block) in README.md and docs/*.md runs as written.

A document's blocks run in order, in one fresh Python process started in an empty
temporary directory, as a reader pasting them one after another would: a block may use what
an earlier block of the same page defined (``db``, a class), and must create every file it
reads. The process is this environment's Python, with ckptdb and every extra installed
(LangGraph and Litestream included), and nothing of the tests on its path. Each block is
compiled under the document's name with the document's line numbers, so a failure reads
``README.md, line 42`` in the traceback, and the test names the block's first line.

A block that must not run starts with the line ``# not run in tests: <why>`` -- the marker
tests/test_cli_docs.py uses for sh blocks -- for an example that needs a file or a service
the reader brings (an S3 bucket, a KMS). Use it sparingly: most examples can create what
they need, and then they are proven to work.

The same pages are also held to one rule of their outline: no page repeats a heading (a
pasted section twice over reads as two sections and breaks its link anchor)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_docs import DOCS, SKIP_MARK

#: Runs the blocks given as JSON ``[[document, first line, source], ...]`` on stdin,
#: stopping at the first that raises (its traceback names the document and line).
_RUNNER = """
import json, sys, traceback
namespace = {"__name__": "__main__"}
for doc, line, source in json.load(sys.stdin):
    print(f"--- {doc}:{line}", flush=True)
    code = compile("\\n" * (line - 1) + source, doc, "exec")
    try:
        exec(code, namespace)
    except BaseException:
        traceback.print_exc()
        print(f"FAILED {doc}:{line}", file=sys.stderr, flush=True)
        sys.exit(1)
"""


def python_blocks(doc: Path) -> list[tuple[int, str]]:
    """The runnable ```python blocks of ``doc``: (line of the block's first line, source)."""
    text = doc.read_text()
    found = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        source = match.group(1)
        if source.lstrip().startswith(SKIP_MARK):
            continue
        found.append((text[: match.start(1)].count("\n") + 1, source))
    return found


DOCUMENTS = [doc for doc in DOCS if python_blocks(doc)]


def test_the_documents_with_python_examples_are_found() -> None:
    names = {doc.name for doc in DOCUMENTS}
    assert {"README.md", "langgraph.md", "loading.md", "security.md"} <= names


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda doc: doc.name)
def test_python_examples_run(tmp_path: Path, doc: Path) -> None:
    blocks = [[doc.name, line, source] for line, source in python_blocks(doc)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER],
        input=json.dumps(blocks),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    started = [line for line in proc.stdout.splitlines() if line.startswith("--- ")]
    where = started[-1][4:] if started else doc.name
    if proc.returncode != 0:
        pytest.fail(
            f"{where}: the example fails as written\nstdout: {proc.stdout[-2000:]}\n"
            f"stderr: {proc.stderr[-4000:]}"
        )
    assert len(started) == len(blocks)


def _headings(text: str) -> list[str]:
    """The Markdown headings of ``text``, leaving out fenced blocks (a ``#`` there is a
    shell or Python comment)."""
    outside = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [line.strip() for line in outside.splitlines() if re.match(r"#{1,6} ", line)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_no_page_repeats_a_heading(doc: Path) -> None:
    headings = _headings(doc.read_text())
    assert headings, f"{doc.name} has no heading"
    repeated = sorted({h for h in headings if headings.count(h) > 1})
    assert repeated == [], f"{doc.name} repeats {repeated}"
