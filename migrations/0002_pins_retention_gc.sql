-- ckptdb core schema, version 2: pins, stored retention policies, and what GC needs.

-- A pin (tag) is a named reference that protects a checkpoint from garbage collection and
-- from every retention policy. The foreign key (no cascade) makes it impossible to delete
-- a pinned checkpoint.
CREATE TABLE pin (
    name           TEXT    PRIMARY KEY,
    checkpoint_seq INTEGER NOT NULL REFERENCES checkpoint (seq),
    created_at_ms  INTEGER NOT NULL,
    note           TEXT
) STRICT;
CREATE INDEX pin_by_checkpoint ON pin (checkpoint_seq);

-- Retention policies applied by `gc` when no explicit policy is given: one row for the
-- whole database (scope '*') and/or one per namespace (scope = namespace name), each a
-- canonical JSON object of rules. A namespace without a policy of its own uses '*'; with
-- neither, GC keeps all of its checkpoints.
CREATE TABLE retention (
    scope         TEXT    PRIMARY KEY,
    policy        TEXT    NOT NULL,
    updated_at_ms INTEGER NOT NULL
) STRICT;

-- GC finds staged chunks whose grace period ran out without scanning every chunk.
CREATE INDEX chunk_by_last_touched ON chunk (last_touched_ms);

CREATE VIEW pins AS
SELECT p.name                                                            AS name,
       c.id                                                              AS checkpoint_id,
       n.name                                                            AS namespace,
       c.generation                                                      AS generation,
       strftime('%Y-%m-%dT%H:%M:%fZ', p.created_at_ms / 1000.0, 'unixepoch') AS created_at,
       p.note                                                            AS note
  FROM pin p
  JOIN checkpoint c ON c.seq = p.checkpoint_seq
  JOIN namespace n ON n.namespace_id = c.namespace_id;

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
