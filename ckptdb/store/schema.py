"""Proving that a file's schema is ckptdb's before trusting it.

A file carrying ckptdb's application id and a valid migration history could still hold
objects nobody wrote through ckptdb: a trigger that runs attacker SQL inside ckptdb's own
transactions, a replaced view, a table rebuilt without its constraints, a missing index.
So the file's ``sqlite_schema`` is compared, object by object, with what the migrations it
records must have produced (built once per process in a private in-memory database). The
comparison is on normalized SQL text: SQLite stores each CREATE statement as written, so
the same migration gives the same text.

Known companions are allowed by name only: the tables Litestream adds while it replicates
a file. Integration migration sets are part of the expected schema when the file records
them and this ckptdb ships them. A valid ckptdb file has no triggers.
"""

from __future__ import annotations

import functools
import re
import threading
from importlib.resources import files

from .. import errors
from ..connection import LITESTREAM_TABLES, Connection, open_memory
from . import migrations

#: Tables another tool may add to a ckptdb file (Litestream's replication bookkeeping).
COMPANION_TABLES = frozenset(LITESTREAM_TABLES)

#: Integration migration sets this ckptdb ships: name -> (package, folder).
KNOWN_SETS: dict[str, tuple[str, str]] = {
    "langgraph": ("ckptdb.integrations.langgraph", "migrations"),
}

Objects = dict[tuple[str, str], str]
_cache: dict[tuple[tuple[str, int], ...], Objects] = {}
_cache_lock = threading.Lock()


@functools.lru_cache(maxsize=4096)
def normalize(sql: str) -> str:
    """SQL text with runs of white space folded, so layout alone never differs (remembered:
    every open of a file normalizes the same few dozen statements)."""
    return re.sub(r"\s+", " ", sql).strip()


def _set(name: str) -> migrations.MigrationSet | None:
    if name == migrations.CORE:
        return migrations.core_set()
    where = KNOWN_SETS.get(name)
    if where is None:
        return None
    return migrations.load_set(name, files(where[0]).joinpath(where[1]))


def expected(versions: dict[str, int]) -> Objects:
    """(type, name) -> normalized SQL of every object the given set versions produce."""
    key = tuple(sorted(versions.items()))
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    conn = open_memory()
    try:
        order = [migrations.CORE, *sorted(n for n in versions if n != migrations.CORE)]
        for name in order:
            mset = _set(name)
            if mset is None:
                continue
            for migration in mset.migrations[: versions.get(name, 0)]:
                conn.execute_script(migration.sql)
        objects = _objects(conn)
    finally:
        conn.close()
    with _cache_lock:
        _cache[key] = objects
    return objects


def _objects(conn: Connection) -> Objects:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'")
    return {(str(t), str(n)): normalize(s) if isinstance(s, str) else "" for t, n, s in rows}


def mismatches(conn: Connection, versions: dict[str, int] | None = None) -> list[str]:
    """Every way the file's schema differs from what its recorded migrations produce,
    in words (empty when the schema is exactly ckptdb's). Call it inside a read snapshot:
    another process may be applying a migration meanwhile. ``versions``: the file's
    ``applied_sets``, when the caller read them in that snapshot."""
    if versions is None:
        versions = migrations.applied_sets(conn)
    have = _objects(conn)
    if not versions:
        return []  # a new, empty file: nothing to compare yet
    problems = [
        f"migration set {name!r} (version {v}) is not one this ckptdb knows"
        for name, v in sorted(versions.items())
        if _set(name) is None
    ]
    want = expected(versions)
    for (kind, name), sql in sorted(have.items()):
        if kind == "table" and name in COMPANION_TABLES:
            continue
        if (kind, name) not in want:
            problems.append(f"unexpected {kind} {name!r}")
        elif want[(kind, name)] != sql:
            problems.append(f"{kind} {name!r} differs from its migration")
    for kind, name in sorted(want.keys() - have.keys()):
        problems.append(f"missing {kind} {name!r}")
    return problems


def require_valid(conn: Connection, path: str) -> None:
    """SchemaMismatchError (nothing written) unless the file's schema is ckptdb's;
    SchemaTooNewError when a set the file records is newer than this code knows (a newer
    release wrote it: nothing was changed outside ckptdb)."""
    versions = migrations.applied_sets(conn)
    for name, version in versions.items():
        known = _set(name)
        if known is not None:
            if name == migrations.CORE:
                migrations.refuse_too_new(conn, known)  # the header's version
            else:
                migrations.refuse_version(conn, known, version)
    problems = mismatches(conn, versions)
    if problems:
        raise errors.SchemaMismatchError(
            f"{path} is not a valid ckptdb file: its schema was changed outside ckptdb ("
            + "; ".join(problems[:8])
            + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
            + "). ckptdb will not write to it; the file was not modified. Inspect it "
            "read-only (`ckptdb sql`), then restore it from a backup or an export.",
            objects=problems,
        )


def data_version(conn: Connection) -> int:
    """SQLite's change counter as this connection sees it: it moves whenever another
    connection (of any process) commits, and never for this connection's own writes -- so
    a cache this connection keeps of rows others may change holds while it stands still."""
    # A plain statement: apsw's pragma() helper builds its text each time (2.5x slower).
    return int(conn.execute("PRAGMA data_version")[0][0])
