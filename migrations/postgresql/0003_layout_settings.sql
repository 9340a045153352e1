-- ckptdb on PostgreSQL, version 3: the layout settings every new database records.
--
-- The SQLite engine's migrations record them (0004: storage format, features, chunking;
-- 0007: format 3); this engine's first two did not, so a database created by them cut
-- blobs at a fixed size and kept large values whole where an SQLite file chunks them
-- (content-defined chunking: FastCDC 2020, 2/8/64 KiB, blobs under 16 KiB kept whole) --
-- the same checkpoints and ids, a different and larger layout. A database that recorded a
-- chunking already (created with an explicit fixed chunk size) keeps it: dedup needs the
-- same cut points for the life of the database.
INSERT INTO setting (key, value) VALUES ('storage_format', '3') ON CONFLICT (key) DO NOTHING;
INSERT INTO setting (key, value) VALUES ('features', '["cdc","zstd"]')
    ON CONFLICT (key) DO NOTHING;
INSERT INTO setting (key, value) VALUES (
    'chunking',
    '{"algorithm":"fastcdc2020-gear0","avg_size":8192,"max_size":65536,"min_size":2048,'
    || '"normalization":1,"single_chunk_threshold":16384}'
) ON CONFLICT (key) DO NOTHING;
