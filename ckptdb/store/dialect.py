"""The SQL the two engines spell differently, in one place (docs/postgresql.md).

The store writes one statement text for SQLite and PostgreSQL wherever they agree. Where
they do not, a store module asks here for the engine's spelling of the piece, by the
connection's ``dialect``, so each difference is written once and both spellings stand side
by side.
"""

from __future__ import annotations

from ..connection.engine import EngineConnection


def int_list(conn: EngineConnection, mark: str = "?") -> str:
    """A subquery of the integers of a JSON array bound at ``mark`` (``json.dumps`` of a
    list of ints): ``x IN (...)`` without one parameter per value."""
    if conn.dialect == "sqlite":
        return f"(SELECT value FROM json_each({mark}))"
    return f"(SELECT jsonb_array_elements_text({mark}::jsonb)::BIGINT)"


def text_as_bytes(conn: EngineConnection, column: str) -> str:
    """A text column read as its UTF-8 bytes (so that a damaged value reaches Python as
    bytes, not as a decoding error). PostgreSQL's ``CAST(... AS bytea)`` would parse
    backslash escapes, hence ``convert_to``."""
    if conn.dialect == "sqlite":
        return f"CAST({column} AS BLOB)"
    return f"convert_to({column}, 'UTF8')"


def unindexed(conn: EngineConnection, column: str) -> str:
    """``column`` written so that the engine cannot answer from an index on it (a read
    that must see the table itself, when a damaged index may mislead)."""
    return f"+{column}" if conn.dialect == "sqlite" else f"({column} || '')"


def no_limit(conn: EngineConnection) -> int | None:
    """The value of a ``LIMIT ?`` parameter that means "no limit"."""
    return -1 if conn.dialect == "sqlite" else None


def explicit_key(conn: EngineConnection) -> str:
    """What an ``INSERT`` that gives an identity column its value says after the column
    list: PostgreSQL's identity columns (``GENERATED ALWAYS``) take a value only when told
    to; SQLite's rowid keys take one as given."""
    return "" if conn.dialect == "sqlite" else " OVERRIDING SYSTEM VALUE"
