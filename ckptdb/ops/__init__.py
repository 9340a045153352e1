"""The operations: what the front object delegates to, each over a :class:`~ckptdb.store.Store`.

| module | operation |
| --- | --- |
| :mod:`.open` | probe a file before SQLite may write, initialize, migrate, build a handle |
| :mod:`.handle` | the lock, the store of one connection, reconnect, migration state |
| :mod:`.prepare` | hash caller values and stage large ones, outside the write lock |
| :mod:`.commit` | publish in one write transaction; outcome-unknown recovery; set_current |
| :mod:`.read`, :mod:`.checkpoint` | verified entry bytes; the Checkpoint handle |
| :mod:`.refs` | CURRENT, references, the verified lineage |
| :mod:`.load` | load with explicit, receipted fallback |
| :mod:`.gc` | mark/sweep, drop_namespace, prune |
| :mod:`.migrate` | status, plan, history, up with a verified backup |
| :mod:`.transfer` | export and import between ckptdb files |
| :mod:`.verify` | the whole-file check |
| :mod:`.checkout` | materializing a checkpoint into a directory |
| :mod:`.stats` | sizes and counts |

Operations never import the front object (:mod:`ckptdb.database`).
"""
