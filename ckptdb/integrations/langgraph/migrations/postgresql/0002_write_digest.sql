-- ckptdb LangGraph integration on PostgreSQL, schema version 2: sealed pending writes (the
-- SQLite set's version 2).
--
-- Every lg_write row gets a digest: lowercase hex sha256 of a domain-separated encoding of
-- the row (see ckptdb/integrations/langgraph/sealing.py); reads and `ckptdb verify`
-- recompute it. A database of this engine gets versions 1 and 2 together when the saver
-- first opens it, so no row is ever written without a digest; the marker below is kept
-- for the model's sake (the saver seals rows under it the same way on both engines).
ALTER TABLE lg_write ADD COLUMN digest TEXT COLLATE "C"
    CHECK (digest IS NULL OR length(digest) = 64);

-- Facts about the integration's own tables (key -> value): `unsealed_writes` while rows
-- written before schema version 2 are unsealed.
CREATE TABLE lg_meta (
    key   TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO lg_meta (key, value)
    SELECT 'unsealed_writes', 'pending' WHERE EXISTS (SELECT 1 FROM lg_write);
