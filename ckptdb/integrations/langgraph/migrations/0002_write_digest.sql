-- ckptdb LangGraph integration, schema version 2 (migration set "langgraph"): sealed
-- pending writes.
--
-- Every lg_write row gets a digest: lowercase hex sha256 of a domain-separated encoding of
-- the row's identity (thread, checkpoint namespace, checkpoint id, task id, idx), channel,
-- type tag, task path and value (see ckptdb/integrations/langgraph/sealing.py). Reads and
-- `ckptdb verify` recompute it, so a damaged value that still decodes is caught.
--
-- SQLite has no sha256 in SQL, so rows written before this migration cannot be sealed
-- here: they keep a NULL digest and `lg_meta` records `unsealed_writes` = 'pending'. The
-- saver seals them in Python the first time it opens the file read-write (one
-- transaction, which also deletes the marker). A NULL digest is accepted only while the
-- marker exists; afterwards it is corruption. No syntax newer than SQLite 3.37.
ALTER TABLE lg_write ADD COLUMN digest TEXT CHECK (digest IS NULL OR length(digest) = 64);

-- Facts about the integration's own tables (key -> value). Today only
-- `unsealed_writes`: present while rows written before schema version 2 are unsealed.
CREATE TABLE lg_meta (
    key   TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO lg_meta (key, value)
    SELECT 'unsealed_writes', 'pending' WHERE EXISTS (SELECT 1 FROM lg_write);
