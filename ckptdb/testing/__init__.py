"""Support for testing code built on ckptdb: damage simulation helpers (``wal``) and the
conformance kit for host stores (``host_store``).

Not needed at run time; nothing in the library imports it.
"""
