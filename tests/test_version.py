"""One version, said the same everywhere: ``ckptdb.__version__`` is the only place it is
written (pyproject.toml reads it), ``ckptdb --version`` prints it, CHANGELOG.md's newest
entry is it, and every schema migration shipped is listed in the changelog (a new schema
version is a new version of ckptdb, with what it changed and what an older one sees)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import REPO

import ckptdb

SCRIPT = str(Path(sys.executable).parent / "ckptdb")
CHANGELOG = REPO / "CHANGELOG.md"


def _changelog_versions() -> list[str]:
    return re.findall(r"^## (\d+\.\d+\.\d+)$", CHANGELOG.read_text(), re.M)


def test_the_console_script_prints_the_package_version() -> None:
    out = subprocess.run(
        [SCRIPT, "--version"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.strip() == f"ckptdb, version {ckptdb.__version__}"


def test_pyproject_reads_the_version_from_the_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in config["project"]
    assert "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ckptdb.__version__"}
    # setuptools reads the attribute without importing the package: it must be a literal.
    tree = ast.parse((REPO / "ckptdb" / "__init__.py").read_text())
    literals = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    assert literals == [ckptdb.__version__]
    assert re.fullmatch(r"\d+\.\d+\.\d+", ckptdb.__version__)


def test_the_changelog_starts_with_this_version_and_lists_every_migration() -> None:
    versions = _changelog_versions()
    assert versions[0] == ckptdb.__version__
    keyed = [tuple(int(p) for p in v.split(".")) for v in versions]
    assert keyed == sorted(keyed, reverse=True) and len(set(keyed)) == len(keyed)
    text = CHANGELOG.read_text()
    shipped = [
        *sorted((REPO / "migrations").glob("*.sql")),
        *sorted((REPO / "migrations" / "postgresql").glob("*.sql")),
        *sorted((REPO / "ckptdb" / "integrations" / "langgraph" / "migrations").glob("*.sql")),
    ]
    assert len(shipped) >= 9
    missing = [path.name for path in shipped if path.name not in text]
    assert missing == [], f"CHANGELOG.md does not say which version brought {missing}"


def test_the_langgraph_extra_brings_the_graph_runtime() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {re.split(r"[<>=!~ ;\[]", req, maxsplit=1)[0] for req in extras["langgraph"]}
    assert {"langgraph", "langgraph-checkpoint"} <= names
