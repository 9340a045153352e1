"""Read-only connections on files not trusted yet: a file about to be opened as a ckptdb
database, and files another program wrote (import sources)."""

from __future__ import annotations

import os
import urllib.parse

import apsw

from .busy import LockWaits, busy_handler
from .driver import Connection
from .translate import force_close, translate


def open_probe(path: str) -> Connection:
    """A read-only, non-creating connection used to inspect a file before trusting it.

    Read-only so that opening a foreign database can never roll back its journal or
    otherwise change a byte of it. When no -wal file exists the main file holds the whole
    database, so it is opened ``immutable``: SQLite then creates no -wal/-shm beside a
    file we may be about to refuse.
    """
    return Connection(_open_untrusted(path), path, readonly=True)


def open_foreign_readonly(path: str) -> Connection:
    """A read-only connection on a file another program wrote (an import source):
    :func:`open_probe` -- read-only, ``immutable`` when no WAL is beside it,
    ``trusted_schema=OFF`` -- plus ``SQLITE_DBCONFIG_DEFENSIVE``. Bound its reads with
    :meth:`Connection.progress_check`."""
    raw = _open_untrusted(path)
    try:
        raw.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
    except apsw.Error as exc:
        force_close(raw)
        raise translate(exc, f"configuring {path}") from exc
    return Connection(raw, path, readonly=True)


def _open_untrusted(path: str) -> apsw.Connection:
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    wal = path + "-wal"
    immutable = not os.path.exists(wal) or os.path.getsize(wal) == 0
    uri = "file:" + urllib.parse.quote(os.path.abspath(path))
    if immutable:
        uri += "?immutable=1"
    try:
        raw = apsw.Connection(uri, flags=flags)
        raw.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
        raw.set_busy_handler(busy_handler(LockWaits()))
    except apsw.Error as exc:
        raise translate(exc, f"opening {path}") from exc
    return raw
