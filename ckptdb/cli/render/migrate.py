"""Renderers of the migrate commands: status, plan, up, history."""

from __future__ import annotations

from ...models import MigrationInfo, MigrationResult, MigrationStatus
from ..output import block, count, echo, print_json, table, when


def status(st: MigrationStatus, as_json: bool) -> None:
    """``migrate status``: the file's version, this ckptdb's, what is pending."""
    if as_json:
        print_json(st)
        return
    state = "up to date" if st.up_to_date else f"{len(st.pending)} pending"
    echo(
        f"{st.path}: schema version {st.file_version}, this ckptdb knows "
        f"{st.code_version} ({state})"
    )
    for m in st.pending:
        echo(f"  pending {m.version:04d}_{m.name}  {m.checksum[:12]}")
    if st.checkpoints_to_move:
        echo(
            f"  {count(st.checkpoints_to_move, 'checkpoint')} still in the format-2 layout "
            f"(readable as they are); `ckptdb migrate {st.path} up` moves them"
        )
    for name, version in st.sets.items():
        if name != "core":
            echo(f"  migration set {name}: version {version}")


def plan(migrations: list[MigrationInfo], as_json: bool) -> None:
    """``migrate plan``: the SQL ``up`` would run, each migration headed by a comment."""
    if as_json:
        print_json(migrations)
        return
    if not migrations:
        echo("-- nothing to do: the schema is up to date")
    for m in migrations:
        echo(f"-- {m.migration_set} {m.version:04d}_{m.name} (sha256 {m.checksum})")
        block(m.sql or "")


def applied(result: MigrationResult, as_json: bool) -> None:
    """``migrate up``: the backup taken and the migrations applied."""
    if as_json:
        print_json(result)
        return
    if not result.applied and not result.checkpoints_moved:
        echo(f"nothing to do: {result.path} is at version {result.to_version}")
        return
    if result.backup_path:
        echo(f"backup (verified): {result.backup_path}")
    for m in result.applied:
        echo(f"applied {m.version:04d}_{m.name}")
    if result.checkpoints_moved:
        echo(f"moved the entries of {count(result.checkpoints_moved, 'checkpoint')} into format 3")
    echo(f"{result.path}: version {result.from_version} -> {result.to_version}")


def history(rows: list[MigrationInfo], as_json: bool) -> None:
    """``migrate history``: every applied migration."""
    if as_json:
        print_json(rows)
        return
    table(
        ["set", "version", "name", "checksum", "applied at", "by ckptdb"],
        [
            [
                m.migration_set,
                m.version,
                m.name,
                m.checksum[:12],
                "" if m.applied_at is None else when(m.applied_at),
                m.ckptdb_version,
            ]
            for m in rows
        ],
    )
