"""Where the SQL migrations and the generated schema are found at run time.

In an installed wheel they live inside the package (``ckptdb/_data/migrations`` and
``ckptdb/_data/schema``, mapped there by pyproject.toml); in a source checkout (editable
install, running from the repository) they are the repository's top-level ``migrations/``
and ``schema/`` directories, which are their source of truth.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Literal


def data_dir(kind: Literal["migrations", "schema"]) -> Traversable:
    """The directory holding the shipped ``migrations`` or ``schema`` files."""
    packaged = resources.files("ckptdb") / "_data" / kind
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / kind
