"""The one package that talks to psycopg: ckptdb's connection to a PostgreSQL server.

The second engine behind the backend seam (docs/postgresql.md): everything
PostgreSQL-specific about *how* ckptdb talks to the server lives here, as everything
SQLite-specific lives in the package above. It is imported only when a PostgreSQL URL is
opened, so psycopg (the ``postgresql`` extra) is needed only then.

| module | its one job |
| --- | --- |
| :mod:`.driver` | :class:`PgConnection`: statements, transactions, advisory locks |
| :mod:`.placeholders` | the store's SQLite parameter marks bound for psycopg |
| :mod:`.translate` | psycopg exceptions turned into ckptdb errors |
"""

from __future__ import annotations

from .driver import DEFAULT_LOCK_TIMEOUT_S, PgConnection, lock_key

__all__ = ["DEFAULT_LOCK_TIMEOUT_S", "PgConnection", "lock_key"]
