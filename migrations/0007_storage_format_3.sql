-- ckptdb core schema, version 7: storage format 3 -- a checkpoint's entries packed into its
-- own row, a slim table of blob references for GC, the caller's own name for a checkpoint
-- (its label) in the row, checkpoint row ids never reused, and one definition of "the
-- checkpoints a pointer names" behind every view that needs it.
--
-- Format 2 stored each entry as a row of `entry` plus a row of its index `entry_by_blob`:
-- two b-trees written per entry on every commit, and a second statement on every read.
-- From version 7 a checkpoint row carries its entries in `entries`, a JSON array sorted by
-- name of [name, blob_id, media_type, schema_pin] without its trailing nulls (no spaces:
-- ["weights.bin",12] is an entry with neither media type nor schema pin); `blob_ref`
-- holds one (blob_id, checkpoint_seq) row per entry, the reverse lookup GC needs to tell
-- whether a blob is still used. The manifest (and so every checkpoint id) is unchanged:
-- the id hashes names, digests, sizes, media types and schema pins, not where they are
-- stored.
--
-- This file changes the schema only, in one short transaction. Rows of checkpoints stored
-- before it keep `entries` NULL and their entries in `entry`, and are read from there;
-- `ckptdb migrate DB up` then moves them in bounded transactions of their own
-- (store/checkpoints.pack_entries), each complete on its own, so an interrupted move
-- resumes where it stopped and the file is valid at every step. `entry` stays (empty once
-- every row moved) until a later migration drops it.
ALTER TABLE checkpoint ADD COLUMN entries TEXT;

UPDATE setting SET value = '3' WHERE key = 'storage_format';

-- The caller's own name for a checkpoint, unique within its namespace (an integration's
-- id, e.g. LangGraph's checkpoint id): written with the row, not part of the manifest or
-- its id (like created_at_ms), never changed. The index answers "the checkpoint labelled
-- L" and "the newest labels of a namespace" (labels that sort by time, as uuid6 ids do)
-- without a table of the integration's own: one b-tree per commit instead of a table and
-- its key. Rows without a label are not in it.
ALTER TABLE checkpoint ADD COLUMN label TEXT
    CHECK (label IS NULL OR length(label) BETWEEN 1 AND 256);
CREATE UNIQUE INDEX checkpoint_by_label ON checkpoint (namespace_id, label)
    WHERE label IS NOT NULL;

-- One row per entry of every checkpoint whose `entries` is packed: GC deletes a blob only
-- when no row names it. No foreign key to checkpoint: SQLite would scan this table (keyed
-- by blob) on every checkpoint deletion to check it; GC deletes a checkpoint's rows with
-- it, and `verify` compares the rows with the packed entries.
CREATE TABLE blob_ref (
    blob_id        INTEGER NOT NULL REFERENCES blob (blob_id),
    checkpoint_seq INTEGER NOT NULL,
    PRIMARY KEY (blob_id, checkpoint_seq)
) STRICT, WITHOUT ROWID;

-- The highest row id ever given to a checkpoint that has since been deleted. A new
-- checkpoint takes a seq above both it and every stored one, so a seq names one
-- checkpoint forever: a stale seq held anywhere (a pointer, a pin, another process's
-- cache) can never come to name another namespace's checkpoint. Written only by the
-- deletion of checkpoints (an AUTOINCREMENT would write a row on every commit instead).
CREATE TABLE seq_high_water (
    name TEXT    NOT NULL PRIMARY KEY CHECK (name IN ('checkpoint')),
    seq  INTEGER NOT NULL CHECK (seq >= 0)
) STRICT, WITHOUT ROWID;

INSERT INTO seq_high_water (name, seq)
    SELECT 'checkpoint', coalesce(max(seq), 0) FROM checkpoint;

-- The checkpoints each pointer names: the one definition every view below joins through.
-- A checkpoint is matched in the pointer's own namespace only, so a damaged seq shows as a
-- NULL id here rather than as another namespace's checkpoint.
CREATE VIEW pointer_targets AS
SELECT p.namespace_id                                                    AS namespace_id,
       p.revision                                                        AS revision,
       p.digest                                                          AS pointer_digest,
       p.updated_at_ms                                                   AS updated_at_ms,
       c.seq                                                             AS current_seq,
       c.id                                                              AS current_id,
       c.generation                                                      AS generation,
       f.seq                                                             AS fallback_seq,
       f.id                                                              AS fallback_id
  FROM pointer p
  LEFT JOIN checkpoint c ON c.seq = p.current_seq AND c.namespace_id = p.namespace_id
  LEFT JOIN checkpoint f ON f.seq = p.fallback_seq AND f.namespace_id = p.namespace_id;

DROP VIEW entries;
DROP VIEW blob_usage;
DROP VIEW namespace_usage;
DROP VIEW lineage;
DROP VIEW heads;
DROP VIEW protected;
DROP VIEW checkpoints;

-- Every entry of every checkpoint: packed ones from the row, the others (stored before
-- version 7 and not moved yet) from `entry`.
CREATE VIEW entries AS
SELECT c.id                                                              AS checkpoint_id,
       n.name                                                            AS namespace,
       json_extract(j.value, '$[0]')                                     AS name,
       b.digest                                                          AS digest,
       b.size                                                            AS size,
       json_extract(j.value, '$[2]')                                     AS media_type,
       json_extract(j.value, '$[3]')                                     AS schema_pin
  FROM checkpoint c
  JOIN json_each(c.entries) j
  JOIN namespace n ON n.namespace_id = c.namespace_id
  JOIN blob b ON b.blob_id = json_extract(j.value, '$[1]')
 WHERE c.entries IS NOT NULL
UNION ALL
SELECT c.id, n.name, e.name, b.digest, b.size, e.media_type, e.schema_pin
  FROM entry e
  JOIN checkpoint c ON c.seq = e.checkpoint_seq
  JOIN namespace n ON n.namespace_id = c.namespace_id
  JOIN blob b ON b.blob_id = e.blob_id;

CREATE VIEW blob_usage AS
SELECT b.digest                                                          AS digest,
       b.size                                                            AS size,
       CASE WHEN b.chunk_count = 0 THEN 'inline' ELSE 'chunked' END      AS storage,
       b.chunk_count                                                     AS chunk_count,
       (SELECT count(*) FROM blob_ref r WHERE r.blob_id = b.blob_id)
     + (SELECT count(*) FROM entry e WHERE e.blob_id = b.blob_id)        AS entry_refs,
       strftime('%Y-%m-%dT%H:%M:%fZ', b.created_at_ms / 1000.0, 'unixepoch') AS created_at
  FROM blob b;

-- What each namespace holds: its checkpoints, their logical bytes (what loads return) and
-- the stored bytes of every distinct blob and chunk they reference (shared ones counted in
-- each namespace that references them, so the column does not sum to the file size).
CREATE VIEW namespace_usage AS
WITH ns_blob AS (
    SELECT DISTINCT c.namespace_id, r.blob_id
      FROM checkpoint c JOIN blob_ref r ON r.checkpoint_seq = c.seq
    UNION
    SELECT c.namespace_id, e.blob_id
      FROM checkpoint c JOIN entry e ON e.checkpoint_seq = c.seq
), ns_chunk AS (
    SELECT DISTINCT nb.namespace_id, bc.chunk_id
      FROM ns_blob nb JOIN blob_chunk bc ON bc.blob_id = nb.blob_id
)
SELECT n.name                                                            AS namespace,
       (SELECT count(*) FROM checkpoint c WHERE c.namespace_id = n.namespace_id) AS checkpoints,
       (SELECT coalesce(sum(c.total_size), 0) FROM checkpoint c
         WHERE c.namespace_id = n.namespace_id)                          AS logical_bytes,
       (SELECT coalesce(sum(length(b.inline_data)), 0) FROM ns_blob nb
          JOIN blob b ON b.blob_id = nb.blob_id
         WHERE nb.namespace_id = n.namespace_id AND b.chunk_count = 0)
     + (SELECT coalesce(sum(coalesce(ch.stored_size, ch.size)), 0) FROM ns_chunk nc
          JOIN chunk ch ON ch.chunk_id = nc.chunk_id
         WHERE nc.namespace_id = n.namespace_id)                         AS stored_bytes,
       s.key_id                                                          AS key_id
  FROM namespace n
  LEFT JOIN key_scope s ON s.scope_id = n.scope_id;

-- Lineage of every namespace, walked from CURRENT along parent links (depth 0 = CURRENT).
-- The walk only steps to a strictly smaller generation, so even a damaged parent link
-- cannot make it loop.
CREATE VIEW lineage AS
WITH RECURSIVE walk (namespace_id, depth, seq, parent_id, generation) AS (
    SELECT t.namespace_id, 0, c.seq, c.parent_id, c.generation
      FROM pointer_targets t
      JOIN checkpoint c ON c.seq = t.current_seq
    UNION ALL
    SELECT w.namespace_id, w.depth + 1, c.seq, c.parent_id, c.generation
      FROM walk w
      JOIN checkpoint c ON c.id = w.parent_id AND c.generation < w.generation
)
SELECT n.name                                                            AS namespace,
       w.depth                                                           AS depth,
       c.id                                                              AS checkpoint_id,
       c.parent_id                                                       AS parent_id,
       c.generation                                                      AS generation,
       strftime('%Y-%m-%dT%H:%M:%fZ', c.created_at_ms / 1000.0, 'unixepoch') AS created_at,
       c.entry_count                                                     AS entry_count,
       c.total_size                                                      AS total_size,
       c.metadata                                                        AS metadata
  FROM walk w
  JOIN checkpoint c ON c.seq = w.seq
  JOIN namespace n ON n.namespace_id = w.namespace_id;

CREATE VIEW heads AS
SELECT n.name                                                            AS namespace,
       t.current_id                                                      AS current_id,
       t.fallback_id                                                     AS fallback_id,
       t.generation                                                      AS generation,
       t.revision                                                        AS revision,
       t.pointer_digest                                                  AS pointer_digest,
       strftime('%Y-%m-%dT%H:%M:%fZ', t.updated_at_ms / 1000.0, 'unixepoch') AS updated_at
  FROM pointer_targets t
  JOIN namespace n ON n.namespace_id = t.namespace_id;

-- Why each checkpoint is protected from GC regardless of policy (current, fallback, pinned);
-- a checkpoint with no row here is kept only if a retention policy keeps it.
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
SELECT c.id                                                              AS checkpoint_id,
       n.name                                                            AS namespace,
       c.parent_id                                                       AS parent_id,
       c.generation                                                      AS generation,
       strftime('%Y-%m-%dT%H:%M:%fZ', c.created_at_ms / 1000.0, 'unixepoch') AS created_at,
       c.entry_count                                                     AS entry_count,
       c.total_size                                                      AS total_size,
       c.metadata                                                        AS metadata,
       EXISTS (SELECT 1 FROM pointer_targets t WHERE t.namespace_id = c.namespace_id
                                                 AND t.current_seq = c.seq) AS is_current,
       EXISTS (SELECT 1 FROM pointer_targets t WHERE t.namespace_id = c.namespace_id
                                                 AND t.fallback_seq = c.seq) AS is_fallback,
       c.code_revision                                                   AS code_revision,
       s.key_id                                                          AS key_id,
       c.label                                                           AS label
  FROM checkpoint c
  JOIN namespace n ON n.namespace_id = c.namespace_id
  LEFT JOIN key_scope s ON s.scope_id = n.scope_id;
