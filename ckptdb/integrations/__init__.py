"""Optional integrations of ckptdb with other frameworks.

Each integration sits outside the core: it uses only the public :mod:`ckptdb` API (plus
its own tables, created through ``Database.apply_migration_set``) and its third-party
dependencies come with an extra, e.g. ``pip install "ckptdb[langgraph]"``.
"""
