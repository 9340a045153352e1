"""The host store seam: a two-method protocol for hosts that decide where checkpoint bytes
go, and two stores that ship with ckptdb.

>>> import tempfile
>>> from ckptdb.host_store import FileHostStore
>>> with tempfile.TemporaryDirectory() as tmp, FileHostStore(tmp + "/store") as store:
...     location = store.put(b'{"turn": 12}', key="turn-12.json")
...     store.get(location)
b'{"turn": 12}'

- :class:`HostStore` -- the protocol (``put(data, *, key) -> location``, ``get(location)``)
  and its contract.
- :class:`DatabaseHostStore` -- each put is a checkpoint of an open ckptdb database, under a
  namespace prefix the host chooses (e.g. inside its tenant's encrypted key scope).
- :class:`FileHostStore` -- each put is an owner-only, content-addressed file.

``ckptdb.testing.host_store`` checks any store against the contract. This package sits
above the front object: it uses only the public :class:`ckptdb.Database` API.
"""

from __future__ import annotations

from .database_store import DatabaseHostStore
from .file_store import FileHostStore
from .protocol import (
    MAX_KEY_CHARS,
    MAX_LOCATION_CHARS,
    HostStore,
    validate_data,
    validate_key,
    validate_location,
)

__all__ = [
    "MAX_KEY_CHARS",
    "MAX_LOCATION_CHARS",
    "DatabaseHostStore",
    "FileHostStore",
    "HostStore",
    "validate_data",
    "validate_key",
    "validate_location",
]
