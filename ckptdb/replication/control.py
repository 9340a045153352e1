"""A client of Litestream's control socket (HTTP over a Unix socket in the private dir)."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from typing import Any

from .. import errors


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class ControlClient:
    """Calls of the running replicator: sync, status, info."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path

    def _call(
        self, method: str, path: str, body: dict[str, Any] | None, timeout: float
    ) -> dict[str, Any]:
        conn = _UnixConnection(self.socket_path, timeout)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if payload else {}
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise errors.ReplicationError(
                f"the replicator's control socket did not answer {path}: {exc}"
            ) from exc
        finally:
            conn.close()
        try:
            data = json.loads(raw or b"{}")
        except ValueError as exc:
            raise errors.ReplicationError(f"the replicator answered {path} with non-JSON") from exc
        if not isinstance(data, dict):
            raise errors.ReplicationError(f"the replicator answered {path} with {data!r}")
        if response.status >= 400:
            raise errors.ReplicationError(
                f"the replicator refused {path}: {data.get('error') or response.status}"
            )
        return data

    def sync(self, database: str, *, timeout: float = 10.0) -> dict[str, Any]:
        """Make Litestream read the WAL into a new LTX file now (its upload follows on its
        own schedule). ``timeout`` bounds this client's wait only.

        The request carries neither ``wait`` nor ``timeout`` on purpose. Litestream 0.5.x
        runs a sync under the context of the request that asked for it, and a request with
        ``wait`` or ``timeout`` gets a context that is cancelled when the request returns;
        a sync that (re)opened Litestream's long-running read transaction under that
        context loses it on return. That read transaction is what stops every other
        connection from restarting the WAL past frames Litestream has not copied, so
        without it a writer's checkpoint overwrites unreplicated frames (docs/replication.md,
        known issues). A plain request runs under Litestream's own server context."""
        return self._call("POST", "/sync", {"path": database}, max(1.0, timeout))

    def txid(self, database: str) -> int:
        """The newest Litestream transaction id built from the local database."""
        query = urllib.parse.urlencode({"path": database})
        return int(self._call("GET", f"/txid?{query}", None, 5.0).get("txid") or 0)

    def info(self) -> dict[str, Any]:
        """Version, pid and uptime of the running replicator."""
        return self._call("GET", "/info", None, 5.0)
