-- ckptdb LangGraph integration on PostgreSQL, schema version 4: when each thread was last
-- active, for threads that expire (the SQLite set's version 4; see
-- ckptdb/integrations/langgraph/ttl.py).
--
-- One row per LangGraph thread: the time of its last put or pending write (and, when the
-- saver refreshes on reads, its last read), in milliseconds since the Unix epoch by the
-- saver's clock. The sweep deletes or prunes the threads whose row is older than the TTL,
-- oldest first (the index). Threads that exist when this migration runs are stamped with
-- the migration's own time.
CREATE TABLE lg_thread (
    thread_id     TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    touched_at_ms BIGINT NOT NULL
);
CREATE INDEX lg_thread_by_touched ON lg_thread (touched_at_ms);
INSERT INTO lg_thread (thread_id, touched_at_ms)
    SELECT thread_id, (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT
    FROM (SELECT thread_id FROM lg_namespace UNION SELECT thread_id FROM lg_checkpoint) t;
