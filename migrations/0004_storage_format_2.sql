-- ckptdb core schema, version 4: storage format 2 -- compressed chunks and content-defined
-- chunking.
--
-- Every stored chunk and inline blob now passes through the codec chain
-- (ckptdb/store/codec.py): `codec` names how the stored bytes decode back to the raw bytes
-- (0 = raw, 1 = zstd; bits 8-15 are reserved for a sealing layer). Content addresses stay
-- the sha256 of the raw bytes and every read verifies after decoding. Rows written before
-- this version keep codec 0 (raw), so the migration rewrites nothing: ADD COLUMN only
-- changes the schema, and the whole migration is one short transaction.
--
-- The `chunking` setting fixes how blobs are cut for the life of the file (dedup needs
-- the same cut points): content-defined chunking (FastCDC 2020, 2/8/64 KiB, blobs under
-- 16 KiB kept whole) for files created or migrated from now on; a file created with an
-- explicit fixed chunk size keeps fixed-size cutting. `storage_format` and `features`
-- say what a reader must understand; one that lacks a feature refuses the file.
ALTER TABLE chunk ADD COLUMN codec INTEGER NOT NULL DEFAULT 0 CHECK (codec BETWEEN 0 AND 65535);
ALTER TABLE chunk ADD COLUMN stored_size INTEGER CHECK (stored_size IS NULL OR stored_size >= 0);
ALTER TABLE blob ADD COLUMN codec INTEGER NOT NULL DEFAULT 0 CHECK (codec BETWEEN 0 AND 65535);
INSERT OR IGNORE INTO setting (key, value) VALUES ('storage_format', '2');
INSERT OR IGNORE INTO setting (key, value) VALUES ('features', '["cdc","zstd"]');
INSERT OR IGNORE INTO setting (key, value) VALUES (
    'chunking',
    '{"algorithm":"fastcdc2020-gear0","avg_size":8192,"max_size":65536,"min_size":2048,'
    || '"normalization":1,"single_chunk_threshold":16384}'
);
