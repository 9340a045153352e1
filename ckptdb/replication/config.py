"""Replica URLs and the Litestream configuration ckptdb generates for one database.

The configuration is written as JSON (which YAML parsers, Litestream's included, read as
YAML) into a private directory (0700, file 0600). It names the database, the replica URL,
the intervals and the control socket -- never a credential: Litestream reads S3 keys from
its environment (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` or the ``LITESTREAM_``
forms), which the supervisor passes through unchanged. Environment expansion in the file is
turned off (``-no-expand-env``) so nothing in a path or URL can pull a secret in.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from dataclasses import dataclass

from .. import errors

SCHEMES = ("file", "s3", "gs", "abs", "sftp", "webdav", "webdavs", "nats", "oss")
#: Query parameters that would carry a secret inside the URL (and so into argv and files).
_SECRET_PARAMS = ("secret", "password", "token", "key", "credential", "sas")


@dataclass(frozen=True)
class ReplicaURL:
    """A validated replica URL (``file:///dir``, ``s3://bucket/path?endpoint=...``, ...)."""

    url: str
    scheme: str

    @classmethod
    def parse(cls, url: object) -> ReplicaURL:
        """Check a replica URL: a scheme Litestream knows and no credentials inside it."""
        if not isinstance(url, str) or not url or len(url) > 4096:
            raise errors.InvalidInputError("the replica URL must be a non-empty str")
        if any(ord(c) < 0x20 for c in url):
            raise errors.InvalidInputError("the replica URL holds control characters")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in SCHEMES:
            raise errors.InvalidInputError(
                f"replica URL {url!r}: the scheme must be one of {', '.join(SCHEMES)}"
            )
        if parts.password is not None:
            raise errors.InvalidInputError(
                "the replica URL holds a password; pass credentials in the environment "
                "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for S3), never in the URL"
            )
        for name, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
            if any(word in name.lower() for word in _SECRET_PARAMS):
                raise errors.InvalidInputError(
                    f"the replica URL has a {name!r} parameter; pass credentials in the "
                    "environment, never in the URL"
                )
        if parts.scheme == "file":
            if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
                raise errors.InvalidInputError(
                    f"a file replica URL needs an absolute path: file:///dir, not {url!r}"
                )
        elif not parts.netloc:
            raise errors.InvalidInputError(f"replica URL {url!r} names no bucket or host")
        return cls(url=url, scheme=parts.scheme)

    @classmethod
    def from_path_or_url(cls, value: str) -> ReplicaURL:
        """A URL, or a local directory path (turned into a ``file://`` URL)."""
        if "://" not in value:
            return cls.parse("file://" + urllib.parse.quote(os.path.abspath(value)))
        return cls.parse(value)

    @property
    def local_dir(self) -> str | None:
        """The directory of a ``file://`` replica, else None."""
        if self.scheme != "file":
            return None
        return urllib.parse.unquote(urllib.parse.urlsplit(self.url).path)

    @property
    def display(self) -> str:
        """The URL without its query string (endpoints, options) for logs and receipts."""
        parts = urllib.parse.urlsplit(self.url)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def render(
    database: str,
    replica: ReplicaURL,
    *,
    socket_path: str,
    sync_interval: float,
    monitor_interval: float,
    busy_timeout: float,
) -> str:
    """The Litestream configuration (JSON text) for replicating ``database``."""
    config = {
        "socket": {"enabled": True, "path": socket_path},
        "logging": {"level": "info", "type": "text"},
        "dbs": [
            {
                "path": database,
                "monitor-interval": _duration(monitor_interval),
                "busy-timeout": _duration(busy_timeout),
                "replica": {"url": replica.url, "sync-interval": _duration(sync_interval)},
            }
        ],
    }
    return json.dumps(config, indent=2)


def _duration(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"
