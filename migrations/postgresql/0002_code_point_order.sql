-- ckptdb core schema on PostgreSQL, version 2: text compared as SQLite compares it, and
-- the usage view's sums as integers.
--
-- SQLite compares text by code point (its BINARY collation); a PostgreSQL database compares
-- by its own collation, which is often a language's ('en-US': 'a' < 'B' < 'b'). The store
-- relies on code-point order wherever it orders or ranges over names (namespaces under a
-- prefix, pins and namespaces listed by name, ids by prefix), so every text column takes
-- the "C" collation: the same order and the same ranges as on SQLite, whatever collation
-- the database was created with. Equality is unchanged (collations PostgreSQL creates
-- databases with are deterministic), and each index on such a column is rebuilt with it.
--
-- PostgreSQL cannot change a column's collation while a view reads it: the views are
-- dropped first and made again afterwards, the same as version 1 made them but for
-- `namespace_usage`, whose sums PostgreSQL types as numeric (a decimal in Python): they are
-- cast to BIGINT, the integers the SQLite view gives.

DROP VIEW checkpoints, protected, heads, lineage, namespace_usage, blob_usage, entries,
    pointer_targets, key_scopes, pins, receipts, pointer_log;

DO $$
DECLARE
    col record;
BEGIN
    FOR col IN
        SELECT c.table_name, c.column_name
          FROM information_schema.columns c
          JOIN information_schema.tables t
            ON t.table_schema = c.table_schema AND t.table_name = c.table_name
         WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
           AND c.data_type = 'text'
         ORDER BY c.table_name, c.ordinal_position
    LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I TYPE TEXT COLLATE "C"',
                       col.table_name, col.column_name);
    END LOOP;
END
$$;

CREATE VIEW pointer_log AS
SELECT n.name                      AS namespace,
       h.revision                  AS revision,
       h.current_id                AS current_id,
       h.fallback_id               AS fallback_id,
       h.reason                    AS reason,
       ckptdb_iso_time(h.at_ms)    AS at,
       h.digest                    AS digest,
       h.previous_digest           AS previous_digest
  FROM pointer_history h
  JOIN namespace n ON n.namespace_id = h.namespace_id;

CREATE VIEW receipts AS
SELECT r.receipt_id                AS receipt_id,
       r.kind                      AS kind,
       r.namespace                 AS namespace,
       r.checkpoint_id             AS checkpoint_id,
       ckptdb_iso_time(r.at_ms)    AS at,
       r.body                      AS body
  FROM receipt r;

CREATE VIEW pins AS
SELECT p.name                             AS name,
       c.id                               AS checkpoint_id,
       n.name                             AS namespace,
       c.generation                       AS generation,
       ckptdb_iso_time(p.created_at_ms)   AS created_at,
       p.note                             AS note
  FROM pin p
  JOIN checkpoint c ON c.seq = p.checkpoint_seq
  JOIN namespace n ON n.namespace_id = c.namespace_id;

CREATE VIEW key_scopes AS
SELECT s.key_id                            AS key_id,
       s.prefix                            AS prefix,
       s.algorithm                         AS algorithm,
       s.key_generation                    AS key_generation,
       s.seal_metadata                     AS seal_metadata,
       s.wrapped_key IS NULL               AS shredded,
       ckptdb_iso_time(s.created_at_ms)    AS created_at,
       ckptdb_iso_time(s.rotated_at_ms)    AS rotated_at,
       ckptdb_iso_time(s.shredded_at_ms)   AS shredded_at,
       (SELECT count(*) FROM namespace n WHERE n.scope_id = s.scope_id) AS namespaces
  FROM key_scope s;

-- The one definition of "a pointer and the checkpoints it names": every view that joins a
-- pointer to its checkpoint is built on it.
CREATE VIEW pointer_targets AS
SELECT p.namespace_id   AS namespace_id,
       p.revision       AS revision,
       p.digest         AS pointer_digest,
       p.updated_at_ms  AS updated_at_ms,
       c.seq            AS current_seq,
       c.id             AS current_id,
       c.generation     AS generation,
       f.seq            AS fallback_seq,
       f.id             AS fallback_id
  FROM pointer p
  LEFT JOIN checkpoint c ON c.seq = p.current_seq AND c.namespace_id = p.namespace_id
  LEFT JOIN checkpoint f ON f.seq = p.fallback_seq AND f.namespace_id = p.namespace_id;

CREATE VIEW entries AS
SELECT c.id                           AS checkpoint_id,
       n.name                         AS namespace,
       j.value ->> 0                  AS name,
       b.digest                       AS digest,
       b.size                         AS size,
       j.value ->> 2                  AS media_type,
       j.value ->> 3                  AS schema_pin
  FROM checkpoint c
  CROSS JOIN LATERAL jsonb_array_elements(c.entries::jsonb) AS j (value)
  JOIN namespace n ON n.namespace_id = c.namespace_id
  JOIN blob b ON b.blob_id = (j.value ->> 1)::BIGINT;

CREATE VIEW blob_usage AS
SELECT b.digest                                                     AS digest,
       b.size                                                       AS size,
       CASE WHEN b.chunk_count = 0 THEN 'inline' ELSE 'chunked' END AS storage,
       b.chunk_count                                                AS chunk_count,
       (SELECT count(*) FROM blob_ref r WHERE r.blob_id = b.blob_id) AS entry_refs,
       ckptdb_iso_time(b.created_at_ms)                             AS created_at
  FROM blob b;

CREATE VIEW namespace_usage AS
WITH ns_blob AS (
    SELECT DISTINCT c.namespace_id, r.blob_id
      FROM checkpoint c JOIN blob_ref r ON r.checkpoint_seq = c.seq
), ns_chunk AS (
    SELECT DISTINCT nb.namespace_id, bc.chunk_id
      FROM ns_blob nb JOIN blob_chunk bc ON bc.blob_id = nb.blob_id
)
SELECT n.name                                                            AS namespace,
       (SELECT count(*) FROM checkpoint c WHERE c.namespace_id = n.namespace_id) AS checkpoints,
       (SELECT coalesce(sum(c.total_size), 0) FROM checkpoint c
         WHERE c.namespace_id = n.namespace_id)::BIGINT                  AS logical_bytes,
       ((SELECT coalesce(sum(length(b.inline_data)), 0) FROM ns_blob nb
          JOIN blob b ON b.blob_id = nb.blob_id
         WHERE nb.namespace_id = n.namespace_id AND b.chunk_count = 0)
     + (SELECT coalesce(sum(coalesce(ch.stored_size, ch.size)), 0) FROM ns_chunk nc
          JOIN chunk ch ON ch.chunk_id = nc.chunk_id
         WHERE nc.namespace_id = n.namespace_id))::BIGINT                AS stored_bytes,
       s.key_id                                                          AS key_id
  FROM namespace n
  LEFT JOIN key_scope s ON s.scope_id = n.scope_id;

CREATE VIEW lineage AS
WITH RECURSIVE walk (namespace_id, depth, seq, parent_id, generation) AS (
    SELECT t.namespace_id, 0::BIGINT, c.seq, c.parent_id, c.generation
      FROM pointer_targets t
      JOIN checkpoint c ON c.seq = t.current_seq
    UNION ALL
    SELECT w.namespace_id, w.depth + 1, c.seq, c.parent_id, c.generation
      FROM walk w
      JOIN checkpoint c ON c.id = w.parent_id AND c.generation < w.generation
)
SELECT n.name                             AS namespace,
       w.depth                            AS depth,
       c.id                               AS checkpoint_id,
       c.parent_id                        AS parent_id,
       c.generation                       AS generation,
       ckptdb_iso_time(c.created_at_ms)   AS created_at,
       c.entry_count                      AS entry_count,
       c.total_size                       AS total_size,
       c.metadata                         AS metadata
  FROM walk w
  JOIN checkpoint c ON c.seq = w.seq
  JOIN namespace n ON n.namespace_id = w.namespace_id;

CREATE VIEW heads AS
SELECT n.name                             AS namespace,
       t.current_id                       AS current_id,
       t.fallback_id                      AS fallback_id,
       t.generation                       AS generation,
       t.revision                         AS revision,
       t.pointer_digest                   AS pointer_digest,
       ckptdb_iso_time(t.updated_at_ms)   AS updated_at
  FROM pointer_targets t
  JOIN namespace n ON n.namespace_id = t.namespace_id;

CREATE VIEW protected AS
SELECT t.current_id AS checkpoint_id, n.name AS namespace, 'current' AS reason
  FROM pointer_targets t JOIN namespace n ON n.namespace_id = t.namespace_id
 WHERE t.current_id IS NOT NULL
UNION ALL
SELECT t.fallback_id, n.name, 'fallback'
  FROM pointer_targets t JOIN namespace n ON n.namespace_id = t.namespace_id
 WHERE t.fallback_id IS NOT NULL
UNION ALL
SELECT c.id, n.name, 'pin:' || pn.name
  FROM pin pn JOIN checkpoint c ON c.seq = pn.checkpoint_seq
  JOIN namespace n ON n.namespace_id = c.namespace_id;

CREATE VIEW checkpoints AS
SELECT c.id                               AS checkpoint_id,
       n.name                             AS namespace,
       c.parent_id                        AS parent_id,
       c.generation                       AS generation,
       ckptdb_iso_time(c.created_at_ms)   AS created_at,
       c.entry_count                      AS entry_count,
       c.total_size                       AS total_size,
       c.metadata                         AS metadata,
       EXISTS (SELECT 1 FROM pointer_targets t WHERE t.namespace_id = c.namespace_id
                                                 AND t.current_seq = c.seq) AS is_current,
       EXISTS (SELECT 1 FROM pointer_targets t WHERE t.namespace_id = c.namespace_id
                                                 AND t.fallback_seq = c.seq) AS is_fallback,
       c.code_revision                    AS code_revision,
       s.key_id                           AS key_id,
       c.label                            AS label
  FROM checkpoint c
  JOIN namespace n ON n.namespace_id = c.namespace_id
  LEFT JOIN key_scope s ON s.scope_id = n.scope_id;
