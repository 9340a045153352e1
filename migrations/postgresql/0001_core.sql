-- ckptdb core schema on PostgreSQL, version 1 (migration set "core" of this engine).
--
-- The model of the SQLite engine's schema version 7 (storage format 3), table for table and
-- column for column, so that the store runs the same statements on both where the engines
-- agree (docs/postgresql.md). Types: INTEGER -> BIGINT, BLOB -> BYTEA, TEXT -> TEXT; ids
-- and digests stay lowercase hex text. Left out, because PostgreSQL gives what they stand
-- for: `entry` (format 2 rows not yet moved into checkpoint.entries: a database here starts
-- in format 3) and `seq_high_water` (an identity column never hands out a value twice).
-- Every table has one owning module under ckptdb/store/, the only code that writes it.
-- Runs inside one transaction, as every migration does.

-- Role: canonical (schema history).
-- Invariant: one row per applied migration, versions 1..N without gaps; checksum = sha256
--   of the shipped file (line endings normalized). The version lives here alone (no header).
-- Owner: ckptdb/store/migrations.py.
CREATE TABLE ckptdb_migration (
    migration_set  TEXT   NOT NULL,
    version        BIGINT NOT NULL CHECK (version >= 1),
    name           TEXT   NOT NULL,
    checksum       TEXT   NOT NULL CHECK (length(checksum) = 64),
    applied_at_ms  BIGINT NOT NULL,
    ckptdb_version TEXT   NOT NULL,
    PRIMARY KEY (migration_set, version)
);

-- Role: canonical.
-- Invariant: chunk_size is written once when the database is created, never changed.
-- Owner: ckptdb/store/settings.py.
CREATE TABLE setting (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Role: canonical.
-- Invariant: prefixes never overlap; a scope exists before any namespace under its prefix;
--   a shredded scope stays as a tombstone (wrapped_key NULL) so its prefix is refused.
-- Invariant: wrapped_key = AES-256-GCM(host key, data key) binding (key_id, prefix,
--   key_generation); the data key itself is never stored.
-- Owner: ckptdb/store/scopes.py.
CREATE TABLE key_scope (
    scope_id       BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key_id         TEXT    NOT NULL UNIQUE CHECK (length(key_id) BETWEEN 1 AND 200),
    prefix         TEXT    NOT NULL UNIQUE CHECK (length(prefix) BETWEEN 1 AND 1024),
    algorithm      TEXT    NOT NULL,
    wrapped_key    BYTEA,
    key_generation BIGINT  NOT NULL DEFAULT 1 CHECK (key_generation >= 1),
    seal_metadata  BIGINT  NOT NULL DEFAULT 0 CHECK (seal_metadata IN (0, 1)),
    created_at_ms  BIGINT  NOT NULL,
    rotated_at_ms  BIGINT,
    shredded_at_ms BIGINT,
    CHECK ((wrapped_key IS NULL) = (shredded_at_ms IS NOT NULL))
);

-- Role: canonical.
-- Invariant: scope_id is fixed when the namespace is created: the key scope whose prefix
--   its name starts with, or NULL.
-- Owner: ckptdb/store/checkpoints.py.
CREATE TABLE namespace (
    namespace_id  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          TEXT   NOT NULL UNIQUE,
    created_at_ms BIGINT NOT NULL,
    scope_id      BIGINT REFERENCES key_scope (scope_id)
);

-- Immutable manifests.
-- Role: canonical.
-- Invariant: immutable: a row is never updated; id = sha256 of the canonical manifest
--   (namespace, parent_id, generation, entries, metadata); created_at_ms, code_revision and
--   label are stored beside it, not hashed. parent_id has no foreign key: GC may remove an
--   old ancestor, after which the oldest kept checkpoint starts the stored lineage.
-- Invariant: generation = 1 without a parent, else the parent's generation + 1.
-- Invariant: entries: a JSON array sorted by name of [name, blob_id, media_type,
--   schema_pin] (trailing nulls left out), stored as text (the bytes ckptdb wrote).
-- Invariant: seq is never given twice (an identity column, ALWAYS).
-- Invariant: label: at most one per namespace (checkpoint_by_label).
-- Owner: ckptdb/store/checkpoints.py.
CREATE TABLE checkpoint (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            TEXT   NOT NULL UNIQUE CHECK (length(id) = 64),
    namespace_id  BIGINT NOT NULL REFERENCES namespace (namespace_id),
    parent_id     TEXT   CHECK (parent_id IS NULL OR length(parent_id) = 64),
    generation    BIGINT NOT NULL CHECK (generation >= 1),
    created_at_ms BIGINT NOT NULL,
    metadata      TEXT   NOT NULL,
    entry_count   BIGINT NOT NULL CHECK (entry_count >= 0),
    total_size    BIGINT NOT NULL CHECK (total_size >= 0),
    format        BIGINT NOT NULL DEFAULT 1,
    code_revision TEXT   CHECK (code_revision IS NULL OR length(code_revision) BETWEEN 1 AND 200),
    entries       TEXT   NOT NULL,
    label         TEXT   CHECK (label IS NULL OR length(label) BETWEEN 1 AND 256)
);
CREATE INDEX checkpoint_by_namespace ON checkpoint (namespace_id, generation);
CREATE UNIQUE INDEX checkpoint_by_label ON checkpoint (namespace_id, label)
    WHERE label IS NOT NULL;

-- Content-addressed blobs: inline when at most one chunk, else an ordered chunk list.
-- Role: canonical.
-- Invariant: digest = sha256 of the raw bytes; inline (chunk_count = 0, inline_data of
--   `size` bytes) or chunked (chunk_list_digest = sha256 over the ordered chunk digests).
-- Invariant: inline_data is rewritten only to repair damaged bytes from a verified copy.
-- Owner: ckptdb/store/blobs.py.
CREATE TABLE blob (
    blob_id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    digest            TEXT   NOT NULL UNIQUE CHECK (length(digest) = 64),
    size              BIGINT NOT NULL CHECK (size >= 0),
    chunk_count       BIGINT NOT NULL CHECK (chunk_count >= 0),
    chunk_list_digest TEXT,
    inline_data       BYTEA,
    created_at_ms     BIGINT NOT NULL,
    codec             BIGINT NOT NULL DEFAULT 0 CHECK (codec BETWEEN 0 AND 65535),
    scope_id          BIGINT REFERENCES key_scope (scope_id),
    sealed_digest     BYTEA  CHECK (sealed_digest IS NULL OR length(sealed_digest) = 32),
    CHECK ((chunk_count = 0 AND inline_data IS NOT NULL AND chunk_list_digest IS NULL)
        OR (chunk_count > 0 AND inline_data IS NULL AND length(chunk_list_digest) = 64))
);

-- The small row per chunk; its bytes live in chunk_data.
-- Role: canonical.
-- Invariant: digest = sha256 of the chunk's bytes (in a key scope: HMAC-SHA256 under the
--   scope's address key, sealed_digest = sha256 of the stored bytes); last_touched_ms
--   restarts GC's grace period on a dedup hit.
-- Owner: ckptdb/store/blobs.py.
CREATE TABLE chunk (
    chunk_id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    digest          TEXT   NOT NULL UNIQUE CHECK (length(digest) = 64),
    size            BIGINT NOT NULL CHECK (size > 0),
    last_touched_ms BIGINT NOT NULL,
    codec           BIGINT NOT NULL DEFAULT 0 CHECK (codec BETWEEN 0 AND 65535),
    stored_size     BIGINT CHECK (stored_size IS NULL OR stored_size >= 0),
    scope_id        BIGINT REFERENCES key_scope (scope_id),
    sealed_digest   BYTEA  CHECK (sealed_digest IS NULL OR length(sealed_digest) = 32)
);
CREATE INDEX chunk_by_last_touched ON chunk (last_touched_ms);

-- Role: canonical.
-- Invariant: written once, never updated (a damaged copy is deleted and written again).
-- Owner: ckptdb/store/blobs.py.
CREATE TABLE chunk_data (
    chunk_id BIGINT PRIMARY KEY REFERENCES chunk (chunk_id) ON DELETE CASCADE,
    data     BYTEA  NOT NULL
);

-- Role: canonical.
-- Invariant: the chunk list of a chunked blob, seq 0..n-1.
-- Owner: ckptdb/store/blobs.py.
CREATE TABLE blob_chunk (
    blob_id  BIGINT NOT NULL REFERENCES blob (blob_id) ON DELETE CASCADE,
    seq      BIGINT NOT NULL CHECK (seq >= 0),
    chunk_id BIGINT NOT NULL REFERENCES chunk (chunk_id),
    PRIMARY KEY (blob_id, seq)
);
CREATE INDEX blob_chunk_by_chunk ON blob_chunk (chunk_id);

-- The references GC reads: one row per (blob, checkpoint naming it).
-- Role: derived from checkpoint.entries, written in the same transaction.
-- Invariant: exactly the (blob_id, seq) pairs of every stored checkpoint's entries.
-- Owner: ckptdb/store/checkpoints.py.
CREATE TABLE blob_ref (
    blob_id        BIGINT NOT NULL REFERENCES blob (blob_id),
    checkpoint_seq BIGINT NOT NULL,
    PRIMARY KEY (blob_id, checkpoint_seq)
);

-- CURRENT per namespace.
-- Role: canonical.
-- Invariant: current_seq and fallback_seq name stored checkpoints of the namespace
--   (store/gc_batch refuses to delete them; verify reports a dangling one).
-- Invariant: fallback = the previous CURRENT; digest seals (namespace, revision, current,
--   fallback, previous_digest) and previous_digest chains to the move before.
-- Invariant: moved only by a compare-and-swap UPDATE on (revision, digest), or created by
--   an INSERT that loses to a concurrent one (ON CONFLICT DO NOTHING): one winner.
-- Owner: ckptdb/store/pointers.py.
CREATE TABLE pointer (
    namespace_id    BIGINT PRIMARY KEY REFERENCES namespace (namespace_id),
    current_seq     BIGINT NOT NULL,
    fallback_seq    BIGINT,
    revision        BIGINT NOT NULL CHECK (revision >= 1),
    digest          TEXT   NOT NULL CHECK (length(digest) = 64),
    previous_digest TEXT,
    updated_at_ms   BIGINT NOT NULL,
    confirmed_at_ms BIGINT
);

-- Every move of a CURRENT pointer (the reflog); ids as text, so it outlives checkpoints.
-- Role: record.
-- Invariant: append-only (GC's keep_history may trim the oldest); the newest row of a
--   namespace equals its pointer.
-- Owner: ckptdb/store/pointers.py.
CREATE TABLE pointer_history (
    namespace_id    BIGINT NOT NULL REFERENCES namespace (namespace_id) ON DELETE CASCADE,
    revision        BIGINT NOT NULL,
    current_id      TEXT   NOT NULL,
    fallback_id     TEXT,
    previous_digest TEXT,
    digest          TEXT   NOT NULL,
    reason          TEXT   NOT NULL,
    at_ms           BIGINT NOT NULL,
    PRIMARY KEY (namespace_id, revision)
);

-- Durable records of acts other than publishing (fallback, verify, gc, migration, ...).
-- Role: record.
-- Invariant: digest = sha256 over (kind, namespace, checkpoint_id, at_ms, body).
-- Owner: ckptdb/store/receipts.py.
CREATE TABLE receipt (
    receipt_id    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind          TEXT   NOT NULL,
    namespace     TEXT,
    checkpoint_id TEXT,
    at_ms         BIGINT NOT NULL,
    body          TEXT   NOT NULL,
    digest        TEXT   NOT NULL CHECK (length(digest) = 64)
);
CREATE INDEX receipt_by_kind ON receipt (kind, at_ms);

-- Role: canonical.
-- Invariant: write-once names; the foreign key makes a pinned checkpoint undeletable.
-- Owner: ckptdb/store/pins.py.
CREATE TABLE pin (
    name           TEXT   PRIMARY KEY,
    checkpoint_seq BIGINT NOT NULL REFERENCES checkpoint (seq),
    created_at_ms  BIGINT NOT NULL,
    note           TEXT
);
CREATE INDEX pin_by_checkpoint ON pin (checkpoint_seq);

-- Role: canonical (policy): '*' for the whole database, or one namespace.
-- Owner: ckptdb/store/settings.py.
CREATE TABLE retention (
    scope         TEXT   PRIMARY KEY,
    policy        TEXT   NOT NULL,
    updated_at_ms BIGINT NOT NULL
);

-- Role: canonical (policy).
-- Invariant: at least one limit is set; a namespace is under a quota when its name starts
--   with prefix; checked inside every commit transaction that stores a new checkpoint.
-- Owner: ckptdb/store/quotas.py.
CREATE TABLE quota (
    prefix          TEXT   NOT NULL,
    applies_to      TEXT   NOT NULL CHECK (applies_to IN ('each', 'total')),
    max_checkpoints BIGINT CHECK (max_checkpoints IS NULL OR max_checkpoints >= 1),
    max_bytes       BIGINT CHECK (max_bytes IS NULL OR max_bytes >= 0),
    on_exceed       TEXT   NOT NULL CHECK (on_exceed IN ('refuse', 'evict')),
    updated_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (prefix, applies_to),
    CHECK (max_checkpoints IS NOT NULL OR max_bytes IS NOT NULL)
);

-- Derived, read-only views for SQL inspection: the same names and columns as on SQLite.

-- A time in milliseconds since the Unix epoch as ISO 8601 UTC text, as the SQLite views
-- spell it ('2026-12-06T01:02:03.456Z').
CREATE FUNCTION ckptdb_iso_time(ms BIGINT) RETURNS TEXT
    LANGUAGE SQL STABLE STRICT PARALLEL SAFE
    RETURN to_char(to_timestamp(ms / 1000.0) AT TIME ZONE 'UTC',
                   'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');

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
