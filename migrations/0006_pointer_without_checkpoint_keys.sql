-- ckptdb core schema, version 6: the pointer table without foreign keys to checkpoint.
--
-- The two foreign keys from pointer to checkpoint needed an index each (SQLite looks them
-- up on every checkpoint deletion), and every CURRENT move rewrote a leaf of both: 2 of the
-- ~16 WAL frames a LangGraph put writes with one thread, 4 with a thousand
-- (tools/profile_commit.py, tools/bench_layout.py). What they guarded -- a checkpoint a
-- pointer names is never deleted -- is now checked by the one function that deletes
-- checkpoints (store/checkpoints.delete_listed refuses with `protected`), and `verify`
-- reports a pointer that names a missing checkpoint (finding `foreign_key`), as
-- `PRAGMA foreign_key_check` did before. Pins keep their foreign key: a pin changes rarely.
--
-- The pointer table holds one row per namespace, so it is rebuilt here in the one
-- transaction of this migration; no other table is rewritten. The views that read it are
-- dropped first and created again unchanged, except `checkpoints`, which now finds a
-- checkpoint's pointer through the namespace's key instead of the dropped indexes.
DROP VIEW lineage;
DROP VIEW heads;
DROP VIEW protected;
DROP VIEW checkpoints;

ALTER TABLE pointer RENAME TO pointer_v5;

-- CURRENT per namespace. digest = sha256 over (namespace, revision, current, fallback,
-- previous digest): a chain over every move, each move also appended to pointer_history.
-- current_seq and fallback_seq name checkpoint rows; ckptdb never deletes a checkpoint a
-- pointer names (checked where checkpoints are deleted, reported by verify).
CREATE TABLE pointer (
    namespace_id    INTEGER PRIMARY KEY REFERENCES namespace (namespace_id),
    current_seq     INTEGER NOT NULL,
    fallback_seq    INTEGER,
    revision        INTEGER NOT NULL CHECK (revision >= 1),
    digest          TEXT    NOT NULL CHECK (length(digest) = 64),
    previous_digest TEXT,
    updated_at_ms   INTEGER NOT NULL,
    confirmed_at_ms INTEGER
) STRICT;

INSERT INTO pointer (namespace_id, current_seq, fallback_seq, revision, digest,
                     previous_digest, updated_at_ms, confirmed_at_ms)
SELECT namespace_id, current_seq, fallback_seq, revision, digest,
       previous_digest, updated_at_ms, confirmed_at_ms
  FROM pointer_v5;

DROP TABLE pointer_v5;

-- Lineage of every namespace, walked from CURRENT along parent links (depth 0 = CURRENT).
-- The walk only steps to a strictly smaller generation, so even a damaged parent link
-- cannot make it loop.
CREATE VIEW lineage AS
WITH RECURSIVE walk (namespace_id, depth, seq, parent_id, generation) AS (
    SELECT p.namespace_id, 0, c.seq, c.parent_id, c.generation
      FROM pointer p
      JOIN checkpoint c ON c.seq = p.current_seq
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
       c.id                                                              AS current_id,
       f.id                                                              AS fallback_id,
       c.generation                                                      AS generation,
       p.revision                                                        AS revision,
       p.digest                                                          AS pointer_digest,
       strftime('%Y-%m-%dT%H:%M:%fZ', p.updated_at_ms / 1000.0, 'unixepoch') AS updated_at
  FROM pointer p
  JOIN namespace n ON n.namespace_id = p.namespace_id
  JOIN checkpoint c ON c.seq = p.current_seq
  LEFT JOIN checkpoint f ON f.seq = p.fallback_seq;

-- Why each checkpoint is protected from GC regardless of policy (current, fallback, pinned);
-- a checkpoint with no row here is kept only if a retention policy keeps it.
CREATE VIEW protected AS
SELECT c.id AS checkpoint_id, n.name AS namespace, 'current' AS reason
  FROM pointer p JOIN checkpoint c ON c.seq = p.current_seq
  JOIN namespace n ON n.namespace_id = p.namespace_id
UNION ALL
SELECT c.id, n.name, 'fallback'
  FROM pointer p JOIN checkpoint c ON c.seq = p.fallback_seq
  JOIN namespace n ON n.namespace_id = p.namespace_id
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
       EXISTS (SELECT 1 FROM pointer p WHERE p.namespace_id = c.namespace_id
                                         AND p.current_seq = c.seq)      AS is_current,
       EXISTS (SELECT 1 FROM pointer p WHERE p.namespace_id = c.namespace_id
                                         AND p.fallback_seq = c.seq)     AS is_fallback,
       c.code_revision                                                   AS code_revision,
       s.key_id                                                          AS key_id
  FROM checkpoint c
  JOIN namespace n ON n.namespace_id = c.namespace_id
  LEFT JOIN key_scope s ON s.scope_id = n.scope_id;
