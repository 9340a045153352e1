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


def scanned(conn: EngineConnection, table: str, column: str) -> tuple[str, str]:
    """``table`` (with its alias, if any) and one of its ``column``, written so that a
    lookup by the column reads the table itself, not an index on it (recovery from a
    damaged index). SQLite needs ``NOT INDEXED``: a unary ``+`` leaves it free to scan a
    covering index, which reads the damaged entry again."""
    if conn.dialect == "sqlite":
        return f"{table} NOT INDEXED", column
    return table, unindexed(conn, column)


def no_limit(conn: EngineConnection) -> int | None:
    """The value of a ``LIMIT ?`` parameter that means "no limit"."""
    return -1 if conn.dialect == "sqlite" else None


def explicit_key(conn: EngineConnection) -> str:
    """What an ``INSERT`` that gives an identity column its value says after the column
    list: PostgreSQL's identity columns (``GENERATED ALWAYS``) take a value only when told
    to; SQLite's rowid keys take one as given."""
    return "" if conn.dialect == "sqlite" else " OVERRIDING SYSTEM VALUE"


def insert_or_ignore(conn: EngineConnection, into: str, key: str, returning: str = "") -> str:
    """An ``INSERT`` of ``into`` (``" INTO table (...) VALUES (...)"``) that does nothing when
    a row with the same unique ``key`` exists (``returning``: a ``RETURNING`` clause)."""
    if conn.dialect == "sqlite":
        return f"INSERT OR IGNORE{into}{returning}"
    return f"INSERT{into} ON CONFLICT ({key}) DO NOTHING{returning}"


def key_share(conn: EngineConnection, of: str = "") -> str:
    """What a ``SELECT`` of rows a write transaction is about to reference appends, so
    that no other transaction deletes them before it commits (``of``: the table alias).
    SQLite's write lock already keeps every other writer out; PostgreSQL's writers run
    at once, so the rows are locked (``FOR KEY SHARE``: a delete waits for this
    transaction, which then references them; the foreign keys make the deleter fail)."""
    if conn.dialect == "sqlite" or not getattr(conn, "in_write_transaction", True):
        return ""  # (a lookup outside a write transaction references nothing: no lock)
    return f" FOR KEY SHARE OF {of}" if of else " FOR KEY SHARE"


def is_null_safe(conn: EngineConnection) -> str:
    """The operator that compares two values with NULL equal to NULL."""
    return "IS" if conn.dialect == "sqlite" else "IS NOT DISTINCT FROM"


def text_list(conn: EngineConnection, mark: str = "?") -> str:
    """A subquery of the strings of a JSON array bound at ``mark`` (``json.dumps`` of a
    list of strings)."""
    if conn.dialect == "sqlite":
        return f"(SELECT value FROM json_each({mark}))"
    return f"(SELECT jsonb_array_elements_text({mark}::jsonb))"
