"""One renderer per result the ``ckptdb`` commands print, a module per command family: a
table or summary for people, or with ``as_json`` the result as one JSON document (the model
the library returned). Every renderer prints through :mod:`ckptdb.cli.output`, which
escapes whatever a hostile file could hold."""
