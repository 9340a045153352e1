"""The ``setting`` and ``retention`` tables: per-file settings and stored retention policies."""

from __future__ import annotations

import json

import pydantic

from .. import errors, limits, validation
from ..connection.engine import EngineConnection
from ..retention import RetentionPolicy
from .chunking import Chunker, FixedChunker, InvalidChunkParamsError, chunker_from_settings
from .rows import check_types

#: Storage features this ckptdb understands; a file recording another one is refused.
KNOWN_FEATURES = frozenset({"cdc", "zstd"})


def layout(conn: EngineConnection, path: str) -> tuple[int, Chunker]:
    """The file's chunk size and chunker, after checking it needs no feature this ckptdb
    lacks: the three settings in one read (each is a round trip on a server)."""
    rows = conn.execute(
        "SELECT key, value FROM setting WHERE key IN ('chunk_size', 'chunking', 'features')"
    )
    stored = {str(r[0]): r[1] for r in rows}
    require_features(conn, path, stored=stored)
    size = chunk_size(conn, stored=stored)
    return size, chunker(conn, size, stored=stored)


def chunk_size(
    conn: EngineConnection,
    lowest: int = limits.MIN_CHUNK_BYTES,
    highest: int = limits.MAX_CHUNK_BYTES,
    *,
    stored: dict[str, object] | None = None,
) -> int:
    """The chunk size fixed when the file was created (setting ``chunk_size``): read back
    within the same bounds that ``ckptdb.open(chunk_size=...)`` accepts. ``stored``: the
    settings read already (:func:`layout`)."""
    value = _raw(conn, "chunk_size", stored)
    if not (isinstance(value, str) and value.isascii() and value.isdigit()):
        size = None
    else:
        size = int(value)
    if size is None or not lowest <= size <= highest:
        raise errors.CorruptionError(
            f"the stored chunk_size setting ({value!r}) is missing or not a whole number "
            f"between {lowest} and {highest}; the file is damaged. Restore it from a backup "
            "or export.",
            reason="bad_setting",
        )
    return size


def _raw(conn: EngineConnection, key: str, stored: dict[str, object] | None) -> object:
    """The stored value of setting ``key`` (None when absent), from ``stored`` when the
    caller read the settings already."""
    if stored is not None:
        return stored.get(key)
    return conn.scalar("SELECT value FROM setting WHERE key = ?", (key,))


def has_chunk_size(conn: EngineConnection) -> bool:
    """Whether the file records its chunk size (every file does once its creation committed)."""
    return bool(conn.scalar("SELECT count(*) FROM setting WHERE key = 'chunk_size'"))


def init_new_file(conn: EngineConnection, size: int, *, fixed: bool) -> None:
    """Record the layout of a new file (inside a write transaction; never changed after):
    its chunk size and, with ``fixed``, fixed-size cutting instead of the content-defined
    chunking the migrations record by default."""
    layout = FixedChunker(size)  # refuses a size that chunk_size() would not read back
    conn.execute(
        "INSERT INTO setting (key, value) VALUES ('chunk_size', ?) ON CONFLICT (key) DO NOTHING",
        (str(size),),
    )
    if fixed:
        conn.execute(
            "INSERT INTO setting (key, value) VALUES ('chunking', ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (json.dumps(layout.settings(), sort_keys=True),),
        )


def _text(conn: EngineConnection, key: str, stored: dict[str, object] | None = None) -> str | None:
    value = _raw(conn, key, stored)
    if value is not None and not isinstance(value, str):
        raise errors.CorruptionError(
            f"the stored {key} setting is not text; the file is damaged. Restore it from a "
            "backup or export.",
            reason="bad_setting",
        )
    return value


def chunker(
    conn: EngineConnection, chunk_size: int, *, stored: dict[str, object] | None = None
) -> Chunker:
    """How this file cuts blobs: its ``chunking`` setting, or fixed-size cutting at the
    file's chunk size for a file from before storage format 2."""
    text = _text(conn, "chunking", stored)
    if text is None:
        return FixedChunker(chunk_size)
    settings = validation.stored_json(text, "chunking setting", "bad_setting")
    try:
        return chunker_from_settings(settings)
    except (ValueError, InvalidChunkParamsError) as exc:
        raise errors.CorruptionError(
            f"the stored chunking setting is damaged ({exc}); restore the file from a "
            "backup or export.",
            reason="bad_setting",
        ) from exc


def require_features(
    conn: EngineConnection, path: str, *, stored: dict[str, object] | None = None
) -> None:
    """UnsupportedFeatureError when the file uses a storage feature this ckptdb lacks."""
    text = _text(conn, "features", stored)
    if text is None:
        return
    used = validation.stored_json(text, "features setting", "bad_setting")
    try:
        if not isinstance(used, list) or not all(isinstance(f, str) for f in used):
            raise ValueError("not a list of names")
    except ValueError as exc:
        raise errors.CorruptionError(
            f"the stored features setting is damaged ({exc}); restore the file from a backup.",
            reason="bad_setting",
        ) from exc
    unknown = sorted(set(used) - KNOWN_FEATURES)
    if unknown:
        raise errors.UnsupportedFeatureError(
            f"{path} uses storage feature(s) {', '.join(unknown)} that this ckptdb does not "
            "have; upgrade ckptdb to read it. The file was not modified.",
            features=unknown,
        )


def stored_policies(conn: EngineConnection) -> dict[str, RetentionPolicy]:
    """Stored retention policies by scope ('*' = database-wide)."""
    policies: dict[str, RetentionPolicy] = {}
    for row in conn.execute("SELECT scope, policy FROM retention"):
        check_types(row, (str, str), "retention row")
        scope, policy = row
        try:
            policies[scope] = RetentionPolicy.model_validate_json(policy)
        except pydantic.ValidationError as exc:
            raise errors.CorruptionError(
                f"the stored retention policy of {scope!r} is damaged ({exc.error_count()} "
                "problem(s)). Set it again (`set_retention`, `ckptdb retention set`) or clear "
                "it (`clear_retention`, `ckptdb retention clear`).",
                reason="retention_damaged",
            ) from exc
    return policies


def set_policy(conn: EngineConnection, scope: str, policy: RetentionPolicy, now_ms: int) -> None:
    """Store (or replace) the policy of a scope (inside a write transaction)."""
    conn.execute(
        "INSERT INTO retention (scope, policy, updated_at_ms) VALUES (?, ?, ?)"
        " ON CONFLICT (scope) DO UPDATE SET policy = excluded.policy,"
        " updated_at_ms = excluded.updated_at_ms",
        (scope, policy.model_dump_json(), now_ms),
    )


def clear_policy(conn: EngineConnection, scope: str) -> bool:
    """Remove the policy of a scope; True if there was one."""
    conn.execute("DELETE FROM retention WHERE scope = ?", (scope,))
    return conn.changes() > 0
