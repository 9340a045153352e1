-- ckptdb LangGraph integration, schema version 3 (migration set "langgraph"): every
-- (thread, checkpoint namespace) pair in a ckptdb namespace of its own.
--
-- Up to version 2 a pair whose readable name exceeded 256 characters was named
-- langgraph#<sha256(thread_id NUL checkpoint_ns)>, which two pairs share when their ids hold
-- NUL (("a\0", "b") and ("a", "\0b")). The first pair registered the name in lg_namespace;
-- the second one's INSERT OR IGNORE was ignored, so it committed into the first one's
-- namespace without a row of its own, and deleting the first thread dropped both. From
-- version 3 the saver hashes the percent-encoded readable name instead (injective).
--
-- A pair that has checkpoints but no lg_namespace row is such a second pair. Moving its
-- checkpoints into a namespace of its own needs sha256 and the core's copy_checkpoints,
-- which SQL has not: this migration records `shared_namespaces` = 'pending' in lg_meta when
-- one exists, and the saver separates them in Python the first time it opens the file
-- read-write, then deletes the marker. Names that pairs registered alone stay as they are.
-- No syntax newer than SQLite 3.37.
INSERT INTO lg_meta (key, value)
    SELECT 'shared_namespaces', 'pending'
    WHERE EXISTS (
        SELECT 1 FROM lg_checkpoint c
        WHERE NOT EXISTS (
            SELECT 1 FROM lg_namespace n
            WHERE n.thread_id = c.thread_id AND n.checkpoint_ns = c.checkpoint_ns
        )
    );
