"""The ``ckptdb`` command: a thin layer over the public API (no SQL, no logic of its own).

Every command prints a readable table or summary for people, or with ``--json`` one JSON
document for programs. Errors print ``error: <code>: <message>`` on stderr (with
``--json``: a JSON object with ``code`` and ``message`` on stdout) and exit with the error
class's ``exit_status``; ``ckptdb --help`` and docs/cli.md list them.

One module per command family; each command parses its arguments, opens DB
(:func:`.command.open_database`), makes one call of the public API and hands the result to
its renderer (:mod:`.render`). The root group and its options are in :mod:`.app`.
"""

from __future__ import annotations

from . import (
    checkpoints,
    completion,
    demo,
    inspection,
    keys,
    langgraph,
    lineage,
    migrate,
    pins,
    quotas,
    replication,
    retention,
    transfer,
)
from .app import EXIT_DEGRADED, EXIT_IMPORT_SKIPPED, main

__all__ = ["EXIT_DEGRADED", "EXIT_IMPORT_SKIPPED", "SHORT_HELP", "main"]

for _family in (
    checkpoints,
    lineage,
    inspection,
    transfer,
    retention,
    pins,
    quotas,
    keys,
    migrate,
    replication,
    langgraph,
    demo,
    completion,
):
    for _command in _family.COMMANDS:
        main.add_command(_command)

#: One short, whole sentence per command for `ckptdb --help` (click would cut the first
#: sentence of the docstring mid-way at 80 columns).
SHORT_HELP = {
    "cat": "Write the verified bytes of an entry to stdout.",
    "checkout": "Materialize a checkpoint into a directory.",
    "commit": "Commit files and directories as one checkpoint.",
    "completion": "Print the shell completion script.",
    "current": "Show the CURRENT checkpoint of a namespace.",
    "demo": "Run the Quickstart tour (your data is safe).",
    "diff": "Show what changed between two checkpoints.",
    "drop-namespace": "Delete a namespace and its checkpoints.",
    "export": "Write the selected lineage to a new ckptdb file.",
    "fork": "Copy a namespace's lineage, sharing its blobs.",
    "gc": "Delete what retention does not keep.",
    "history": "Show every move of a namespace's CURRENT.",
    "import": "Merge the checkpoints of another ckptdb file.",
    "import-from": "Import checkpoints from another kind of store.",
    "init": "Create an empty database.",
    "keys": "Create, list, rotate or shred encryption key scopes.",
    "langgraph": "Expire the LangGraph threads nobody used within a TTL.",
    "log": "Show the lineage of a namespace (--graph, --all).",
    "migrate": "Inspect and apply schema migrations.",
    "namespaces": "List namespaces with their CURRENT checkpoint.",
    "pin": "Pin a checkpoint: protected from GC.",
    "pins": "List pins with their checkpoints.",
    "prune": "Delete checkpoints whose metadata matches.",
    "quota": "Set, list or clear quotas on namespace prefixes.",
    "receipts": "List stored receipts, newest first.",
    "replicate": "Replicate DB to a Litestream replica.",
    "restore": "Restore a Litestream replica into a new file.",
    "retention": "Show, set or clear stored retention policies.",
    "set-current": "Move CURRENT explicitly (e.g. roll back).",
    "show": "Show the manifest of a checkpoint.",
    "sql": "Run one read-only SQL query.",
    "stats": "Show sizes, counts, dedup and usage per namespace.",
    "unpin": "Remove a pin.",
    "verify": "Verify the whole database.",
}
for _name, _text in SHORT_HELP.items():
    main.commands[_name].short_help = _text
