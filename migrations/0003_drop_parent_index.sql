-- ckptdb core schema, version 3: drop the index on checkpoint.parent_id.
--
-- Nothing looks checkpoints up by their parent: the lineage view, fallback and GC walk from
-- a child to its parent by id (the unique index on checkpoint.id). The index cost every
-- commit a write to a random page (parent ids are hashes), about 2 of the ~17 WAL frames a
-- small commit writes. A query for the children of a checkpoint now scans the table.
DROP INDEX checkpoint_by_parent;
