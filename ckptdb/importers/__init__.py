"""Importers: moving checkpoints into ckptdb from the stores people use today.

Each importer is a function ``(db, source, *, namespace, dry_run, progress) ->
ImportReport``. Importers are idempotent (content addressing: a second run imports nothing
new), verify every digest they read, refuse symlinks and path traversal in the source, and
report what was imported and what was skipped and why.

``IMPORTERS`` maps a kind (the ``ckptdb import-from KIND`` argument) to ``module:function``;
modules are imported on first use, so an importer that needs an optional extra fails with a
clear error only when it is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import errors

if TYPE_CHECKING:
    from ..database import Database
    from ..models import ImportReport

Importer = Callable[..., "ImportReport"]

IMPORTERS: dict[str, str] = {
    "fs-store": "ckptdb.importers.fs_store:import_fs_store",
    "json-dir": "ckptdb.importers.json_dir:import_json_dir",
    "state-dir": "ckptdb.importers.state_dir:import_state_dir",
    "langgraph-sqlite": "ckptdb.integrations.langgraph.importer:import_langgraph_sqlite",
}


def get_importer(kind: str) -> Importer:
    """The importer function for ``kind``; InvalidInputError for an unknown kind."""
    target = IMPORTERS.get(kind)
    if target is None:
        raise errors.InvalidInputError(
            f"unknown import source kind {kind!r}; known kinds: {', '.join(sorted(IMPORTERS))}"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise errors.InvalidInputError(
            f"the {kind!r} importer needs an optional dependency that is not installed "
            f"({exc.name}); install it with: pip install 'ckptdb[langgraph]'"
        ) from exc
    fn: Importer = getattr(module, attr)
    return fn


def run_import(db: Database, kind: str, source: str, **options: Any) -> ImportReport:
    """Run the importer for ``kind`` against ``source`` into ``db``."""
    return get_importer(kind)(db, source, **options)
