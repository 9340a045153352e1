-- ckptdb LangGraph integration on PostgreSQL, schema version 3: every (thread, checkpoint
-- namespace) pair in a ckptdb namespace of its own (the SQLite set's version 3).
--
-- On SQLite, pairs written before this version could share a namespace; the marker below
-- makes the saver separate them. A database of this engine never had such pairs (its saver
-- names namespaces as version 3 does from the start), so the marker is never set here; the
-- statement stays for the model's sake.
INSERT INTO lg_meta (key, value)
    SELECT 'shared_namespaces', 'pending'
    WHERE EXISTS (
        SELECT 1 FROM lg_checkpoint c
        WHERE NOT EXISTS (
            SELECT 1 FROM lg_namespace n
            WHERE n.thread_id = c.thread_id AND n.checkpoint_ns = c.checkpoint_ns
        )
    );
