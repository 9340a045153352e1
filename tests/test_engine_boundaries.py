"""The engines stay behind the connection layer (docs/architecture.md, docs/postgresql.md):
only ``ckptdb/connection/`` imports apsw, only ``ckptdb/connection/postgres/`` imports
psycopg, and ckptdb works without psycopg installed (the ``postgresql`` extra) -- importing
ckptdb, opening a file and using it never import the PostgreSQL engine."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "ckptdb"


def _imports(path: Path) -> set[str]:
    """The top-level modules a file imports, anywhere in it (functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_connection_layer_imports_a_driver() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        inside = path.relative_to(PACKAGE).as_posix()
        imports = _imports(path)
        if "apsw" in imports and not inside.startswith("connection/"):
            offenders.append(f"{inside} imports apsw")
        if "psycopg" in imports and not inside.startswith("connection/postgres/"):
            offenders.append(f"{inside} imports psycopg")
    assert offenders == []


def test_ckptdb_runs_without_psycopg(tmp_path: Path) -> None:
    # psycopg made unimportable: the core, a commit and a read must not need it.
    script = (
        "import sys\n"
        "sys.modules['psycopg'] = None\n"
        "import ckptdb, ckptdb.cli, ckptdb.testing.postgres\n"
        f"db = ckptdb.open({str(tmp_path / 'a.ckpt')!r})\n"
        "db.commit('ns', {'a': b'1'})\n"
        "assert db.current('ns').read('a') == b'1'\n"
        "db.close()\n"
        "assert not any(m.startswith('ckptdb.connection.postgres') for m in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
