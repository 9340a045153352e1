"""Loading litestream-vfs into ckptdb's SQLite (the one apsw bundles) and naming replicas.

Two facts about litestream-vfs 0.5 shape this module:

* Loading it also installs an SQLite *auto-extension* that, for every later connection not
  opened through the ``litestream`` VFS, returns a non-zero code -- so every ordinary open
  in the process would fail. Right after loading, this module clears the auto-extension
  list through the extension's own pointer to SQLite's API table
  (``sqlite3_api->reset_auto_extension``). The VFS itself stays registered; its state
  (``PRAGMA litestream_txid``, ``litestream_lag``) is read with PRAGMAs, which the VFS
  answers without the SQL functions that auto-extension would have added.
* Each replica is configured under a name (``GoLitestreamConfigure(name, key, value)``);
  opening ``name`` through the ``litestream`` VFS then reads that replica. One process can
  read several replicas at once.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading

import apsw

from .. import errors

VFS_NAME = "litestream"
#: Index of ``reset_auto_extension`` in SQLite's ``sqlite3_api_routines`` (a stable ABI:
#: fields are only ever appended).
_RESET_AUTO_EXTENSION_SLOT = 200

_lock = threading.Lock()
_loaded: list[ctypes.CDLL] = []


def _load(extension: str) -> ctypes.CDLL:
    with _lock:
        if _loaded:
            return _loaded[0]
        path = extension
        if VFS_NAME not in apsw.vfs_names():
            loader = apsw.Connection(":memory:")
            try:
                loader.enable_load_extension(True)
                loader.load_extension(path)
            except apsw.Error as exc:
                raise errors.ReplicatorUnavailableError(
                    f"cannot load litestream-vfs from {path}: {exc}"
                ) from exc
            finally:
                loader.close()
        library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        api = ctypes.c_void_p.in_dll(library, "sqlite3_api").value
        if not api:
            raise errors.ReplicatorUnavailableError("litestream-vfs did not initialize")
        reset = ctypes.c_void_p.from_address(api + _RESET_AUTO_EXTENSION_SLOT * 8).value
        if not reset:
            raise errors.ReplicatorUnavailableError("litestream-vfs: SQLite API table is empty")
        ctypes.CFUNCTYPE(None)(reset)()
        configure = library.GoLitestreamConfigure
        configure.restype = ctypes.c_void_p
        configure.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
        _loaded.append(library)
        return library


def configure(url: str, *, poll_interval: float, extension: str) -> str:
    """Configure a VFS name that reads the replica at ``url``; returns the name to open."""
    library = _load(extension)
    digest = hashlib.sha256(f"{url}\0{poll_interval}".encode()).hexdigest()[:24]
    name = f"ckptdb-replica-{digest}.db"
    settings = {
        "replica_url": url,
        "poll_interval": f"{max(1, round(poll_interval * 1000))}ms",
    }
    with _lock:
        for key, value in settings.items():
            failure = library.GoLitestreamConfigure(name.encode(), key.encode(), value.encode())
            if failure:
                message = ctypes.string_at(failure).decode(errors="replace")
                raise errors.ReplicatorUnavailableError(f"litestream-vfs refused {key}: {message}")
    return name
