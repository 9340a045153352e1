"""The host store seam: a two-method protocol for hosts that decide where checkpoint bytes
go (:class:`HostStore` and its contract), and the input rules every store shares.

This package sits above the front object: it uses only the public ckptdb API.
"""

from __future__ import annotations

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
    "HostStore",
    "validate_data",
    "validate_key",
    "validate_location",
]
