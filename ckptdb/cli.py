"""The ckptdb command (filled in by the CLI issue)."""

from __future__ import annotations


def main() -> None:
    """Entry point of the ``ckptdb`` console script."""
    raise SystemExit("ckptdb: the command line is not built yet")
