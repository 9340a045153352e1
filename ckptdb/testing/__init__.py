"""Support for testing code built on ckptdb: damage simulation helpers (``wal``), the
conformance kit for host stores (``host_store``) and a throwaway PostgreSQL server
(``postgres``).

Not needed at run time; nothing in the library imports it.
"""
