"""``python -m ckptdb.cli``: the ``ckptdb`` command."""

from . import main

main()
