"""Regenerate schema/ckptdb.sql and schema/models/*.json from the migrations and models.

    python tools/gen_schema.py          # rewrite the files
    python tools/gen_schema.py --check  # exit 1 if they differ from what is committed

schema/ckptdb.sql is the full core schema after every migration (what a new database
contains); the JSON Schemas describe every pydantic model ckptdb returns, for programs that
consume ``--json`` output or stored receipts.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import textwrap
from pathlib import Path

import ckptdb
from ckptdb import models
from ckptdb.connection import open_connection
from ckptdb.store.migrations import core_set

REPO = Path(__file__).resolve().parent.parent
SCHEMA_DIR = REPO / "schema"

EXPORTED_MODELS: list[type[models.BaseModel]] = [
    models.CheckpointInfo,
    models.CommitAck,
    models.CopyReport,
    models.EntryInfo,
    models.FallbackReceipt,
    models.NamespaceInfo,
    models.Pointer,
    models.PointerMove,
    models.Problem,
    models.Quota,
    models.Receipt,
    models.VerifyReport,
]


#: What each table is: canonical (the truth; lose it and data is lost), derived (could be
#: rebuilt from canonical rows) or a record (an audit trail: kept, never needed to read data).
ROLES: dict[str, str] = {
    "ckptdb_migration": "canonical (schema history)",
    "setting": "canonical",
    "namespace": "canonical",
    "checkpoint": "canonical",
    "entry": "canonical (format 2: rows not yet moved into checkpoint.entries)",
    "blob_ref": "derived (GC's reverse index of the packed entries; verify compares them)",
    "seq_high_water": "canonical",
    "blob": "canonical",
    "blob_chunk": "canonical",
    "chunk": "canonical",
    "chunk_data": "canonical",
    "pointer": "canonical",
    "pointer_history": "record (the reflog: its last row equals the pointer)",
    "receipt": "record",
    "pin": "canonical",
    "retention": "canonical (policy)",
    "quota": "canonical (policy)",
}

#: Invariants that hold in every valid file and where the code enforces them. They are the
#: part of the schema's contract that SQL constraints cannot state.
INVARIANTS: dict[str, list[str]] = {
    "ckptdb_migration": [
        "one row per applied migration, versions 1..N without gaps; checksum = sha256 of the"
        " shipped file (line endings normalized); the core set's N = PRAGMA user_version",
        "owner: ckptdb/store/migrations.py",
    ],
    "setting": [
        "chunk_size is written once when the file is created and never changed (dedup of"
        " chunked blobs needs the same cut points)",
        "owner: ckptdb/store/settings.py",
    ],
    "namespace": [
        "scope_id (v5) is fixed when the namespace is created: the key scope whose prefix"
        " its name starts with, or NULL",
        "owner: ckptdb/store/checkpoints.py",
    ],
    "checkpoint": [
        "immutable: a row is never updated; id = sha256 of the canonical manifest (namespace,"
        " parent_id, generation, entries, metadata) -- so entry_count and total_size are"
        " checked against the entries, and created_at_ms is not covered",
        "generation = 1 without a parent, else the parent's generation + 1 (checked by verify"
        " while the parent is stored)",
        "format: always 1 (the manifest encoding's version; canonical.FORMAT_VERSION)",
        "code_revision (v5): recorded beside the manifest, not part of the id",
        "entries (v7): the entries as a JSON array sorted by name of [name, blob_id,"
        " media_type, schema_pin] (trailing nulls left out); NULL only for a row stored"
        " before v7 whose entries are"
        " still in `entry` (written once: at insert, or by migrate's move of such a row)",
        "seq (v7): above every stored seq and seq_high_water, so never given twice",
        "owner: ckptdb/store/checkpoints.py",
    ],
    "entry": [
        "immutable; one row per (checkpoint, name); names are safe relative POSIX paths",
        "v7: only rows of checkpoints whose `entries` is NULL; `migrate up` moves them",
        "owner: ckptdb/store/checkpoints.py",
    ],
    "blob_ref": [
        "one row per (blob, checkpoint) that a packed entry names, no other: GC deletes a"
        " blob only when no row names it",
        "owner: ckptdb/store/checkpoints.py (GC's batch deletes a deleted checkpoint's rows)",
    ],
    "seq_high_water": [
        "seq >= the seq of every checkpoint ever deleted; raised only by deletions",
        "owner: ckptdb/store/checkpoints.py (raised by store/gc_batch.py)",
    ],
    "blob": [
        "digest = sha256 of the raw bytes; inline (chunk_count = 0, inline_data of `size`"
        " bytes) or chunked (chunk_list_digest = sha256 over the ordered chunk digests)",
        "inline_data is rewritten only to repair damaged bytes from a caller's verified copy",
        "owner: ckptdb/store/blobs.py",
    ],
    "blob_chunk": ["the chunk list of a chunked blob, seq 0..n-1", "owner: ckptdb/store/blobs.py"],
    "chunk": [
        "digest = sha256 of the chunk's bytes (in a key scope: HMAC-SHA256 under the"
        " scope's address key, sealed_digest = sha256 of the stored bytes); last_touched_ms"
        " restarts GC's grace period on a dedup hit (this small row is touched, never the"
        " bytes)",
        "owner: ckptdb/store/blobs.py",
    ],
    "chunk_data": [
        "written once with incremental blob I/O, never updated (a damaged copy is deleted and"
        " written again)",
        "owner: ckptdb/store/blobs.py",
    ],
    "pointer": [
        "current_seq and fallback_seq name stored checkpoints (v6: no foreign key;"
        " store/gc_batch.GcBatch.delete_checkpoints refuses to delete them, verify"
        " reports a dangling one as foreign_key)",
        "fallback = the previous CURRENT; digest seals (namespace, revision, current,"
        " fallback, previous_digest) and previous_digest chains to the move before",
        "confirmed_at_ms exists so that a commit whose COMMIT failed can be confirmed by a"
        " later transaction that itself commits (its frames are then durable)",
        "owner: ckptdb/store/pointers.py",
    ],
    "pointer_history": [
        "append-only (GC's keep_history may trim the oldest, recording the floor in its"
        " receipt); the newest row of a namespace equals its pointer",
        "owner: ckptdb/store/pointers.py",
    ],
    "receipt": [
        "digest = sha256 over (kind, namespace, checkpoint_id, at_ms, body)",
        "owner: ckptdb/store/receipts.py",
    ],
    "pin": [
        "write-once names; the foreign key makes a pinned checkpoint undeletable",
        "owner: ckptdb/store/pins.py",
    ],
    "retention": ["owner: ckptdb/store/settings.py"],
    "key_scope": [
        "prefixes never overlap; a scope exists before any namespace under its prefix; a"
        " shredded scope stays as a tombstone (wrapped_key NULL) so its prefix is refused",
        "wrapped_key = AES-256-GCM(host key, data key) binding (key_id, prefix,"
        " key_generation); the data key itself is never stored",
        "owner: ckptdb/store/scopes.py",
    ],
    "quota": [
        "at least one limit is set; prefix is '' or text a namespace can start with (at most"
        " 256 characters, no control character or leading whitespace, NFC)",
        "a namespace is under a quota when its name starts with prefix; usage = (checkpoint"
        " rows, sum of their total_size) of each namespace ('each') or of all of them"
        " ('total'), checked inside every commit transaction that stores a new checkpoint",
        "owner: ckptdb/store/quotas.py",
    ],
}

_CREATE = re.compile(
    r"^CREATE\s+(?:UNIQUE\s+)?(TABLE|INDEX|VIEW|TRIGGER)\s+(?:IF NOT EXISTS\s+)?(\w+)",
    re.IGNORECASE,
)


def _comment_blocks() -> dict[str, list[str]]:
    """Each object's comment block: the comment lines right above its CREATE statement in
    the migration that created it (the newest one, if an object was re-created)."""
    blocks: dict[str, list[str]] = {}
    for migration in core_set().migrations:
        pending: list[str] = []
        for line in migration.sql.splitlines():
            stripped = line.strip()
            if stripped.startswith("--"):
                pending.append(stripped[2:].strip())
                continue
            match = _CREATE.match(stripped)
            if match and pending:
                # A file's header paragraph is not about its first object.
                body = pending
                if "" in body and body[0].startswith("ckptdb core schema"):
                    body = body[body.index("") + 1 :] if "" in body else []
                if body:
                    blocks[match.group(2)] = body
            pending = [] if stripped else pending
            if not stripped:
                pending = []
    return blocks


def _wrap(line: str, width: int = 92) -> str:
    """A comment line folded to ``width`` columns (continuations indented)."""
    if len(line) <= width:
        return line
    return "\n".join(textwrap.wrap(line, width, subsequent_indent="--   "))


def full_schema_sql() -> str:
    """The CREATE statements of a freshly created database, in creation order, each with
    its comment block, role and invariants."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "schema.ckpt")
        ckptdb.open(path).close()
        conn = open_connection(path, readonly=True)
        try:
            rows = conn.execute(
                "SELECT type, name, sql FROM sqlite_schema"
                " WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
            )
        finally:
            conn.close()
    migrations = ", ".join(f"{m.version:04d}_{m.name}" for m in core_set().migrations)
    blocks = _comment_blocks()
    out = [
        "-- GENERATED by tools/gen_schema.py -- do not edit; change migrations/ instead.",
        f"-- The full ckptdb core schema after migrations: {migrations}.",
        f"-- PRAGMA application_id = {0x636B7074} ('ckpt'); PRAGMA user_version = "
        f"{core_set().latest}.",
        "--",
        "-- Every table below has one owning module under ckptdb/store/ (named with it), the",
        "-- only code that writes it. Roles: canonical = the truth; record = an audit trail;",
        "-- views are derived and read-only. A valid file has no triggers.",
        "",
    ]
    for kind, name, sql in rows:
        lines = [f"-- {line}".rstrip() for line in blocks.get(name, [])]
        if kind == "table":
            lines.append(f"-- Role: {ROLES.get(name, 'canonical')}.")
            lines.extend(
                f"-- Invariant: {text}."
                if not text.startswith("owner:")
                else f"-- Owner: {text[7:]}."
                for text in INVARIANTS.get(name, [])
            )
        elif kind == "view":
            lines.append("-- Role: derived (a read-only view for SQL inspection).")
        out.extend(_wrap(line) for line in lines)
        out.append(f"{sql};\n")
    return "\n".join(out)


def model_schemas() -> dict[str, str]:
    """File name -> JSON Schema text of every exported model."""
    return {
        f"{model.__name__}.json": json.dumps(model.model_json_schema(), indent=2, sort_keys=True)
        + "\n"
        for model in EXPORTED_MODELS
    }


def expected_files() -> dict[Path, str]:
    """Every generated file and its expected content."""
    files = {SCHEMA_DIR / "ckptdb.sql": full_schema_sql()}
    for name, text in model_schemas().items():
        files[SCHEMA_DIR / "models" / name] = text
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report drift")
    args = parser.parse_args()
    drift = []
    for path, text in expected_files().items():
        current = path.read_text() if path.exists() else None
        if current != text:
            drift.append(path)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    for path in drift:
        print(("drift: " if args.check else "wrote: ") + str(path.relative_to(REPO)))
    return 1 if (drift and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
