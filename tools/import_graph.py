"""Check the layering of the ckptdb package from its import statements.

    python tools/import_graph.py          # exit 1 (and print it) if there is a cycle or a
                                          # module below the front object imports it

Reads every module's source with ``ast`` (TYPE_CHECKING imports included), builds the
graph of imports between ckptdb modules, and checks two rules: no cycle, and nothing in
``ckptdb.ops``, ``ckptdb.store``, ``ckptdb.connection`` or the foundation modules imports
``ckptdb.database``.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ckptdb"
BELOW_FRONT = ("ckptdb.ops", "ckptdb.store", "ckptdb.connection", "ckptdb.types")
FOUNDATION = {
    "models", "errors", "canonical", "validation", "load_checks", "retention", "files", "resources",
}  # fmt: skip


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def graph() -> dict[str, set[str]]:
    """module -> the ckptdb modules it imports."""
    edges: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join([*base, node.module] if node.module else base)
                else:
                    target = node.module or ""
                if target.startswith("ckptdb"):
                    out.add(target)
                    out.update(f"{target}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.startswith("ckptdb"))
        edges[name] = out
    known = set(edges)
    return {m: {t for t in targets if t in known and t != m} for m, targets in edges.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first search (each reported once)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                found.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def main() -> int:
    edges = graph()
    # A package's __init__ re-exporting its children is not a layering cycle.
    for name, targets in edges.items():
        edges[name] = {t for t in targets if not name or not t.startswith(name + ".")}
    bad = [
        f"{m} imports ckptdb.database"
        for m, targets in edges.items()
        if (m.startswith(BELOW_FRONT) or m.rpartition(".")[2] in FOUNDATION)
        and "ckptdb.database" in targets
    ]
    loops = cycles(edges)
    print(json.dumps({"modules": len(edges), "cycles": loops, "layer_violations": bad}, indent=1))
    return 1 if loops or bad else 0


if __name__ == "__main__":
    sys.exit(main())
