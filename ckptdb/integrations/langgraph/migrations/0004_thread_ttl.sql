-- ckptdb LangGraph integration, schema version 4 (migration set "langgraph"): when each
-- thread was last active, for threads that expire (a time-to-live, see
-- ckptdb/integrations/langgraph/ttl.py).
--
-- One row per LangGraph thread (every checkpoint namespace of it together): the time of its
-- last put or pending write (and, when the saver refreshes on reads, its last read), in
-- milliseconds since the Unix epoch by the saver's clock. A put writes it in the
-- checkpoint's own commit transaction, at most once per thread in a short interval. The
-- sweep deletes or prunes the threads whose row is older than the TTL, oldest first (the
-- index); a thread it pruned to its latest checkpoint loses its row, so it is swept again
-- only after new activity.
--
-- Every thread that exists when this migration runs is stamped with the migration's own
-- time: the file never said when a thread was last used, so each one's TTL starts now.
-- No syntax newer than SQLite 3.37.
CREATE TABLE lg_thread (
    thread_id     TEXT    NOT NULL PRIMARY KEY,
    touched_at_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX lg_thread_by_touched ON lg_thread (touched_at_ms);
INSERT INTO lg_thread (thread_id, touched_at_ms)
    SELECT thread_id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT thread_id FROM lg_namespace UNION SELECT thread_id FROM lg_checkpoint);
