-- ckptdb core schema, version 1.
--
-- Conventions: ids and digests are lowercase hex sha256 (TEXT, 64 characters) so that the
-- sqlite3 shell shows them as they are printed everywhere else; times are integer
-- milliseconds since the Unix epoch (the views render them as ISO 8601 UTC). Integer
-- surrogate keys keep the big tables small. Tables are STRICT; no syntax newer than
-- SQLite 3.37 is used, so the system sqlite3 shell, Python's sqlite3 and Datasette can
-- read the file.

CREATE TABLE ckptdb_migration (
    migration_set  TEXT    NOT NULL,
    version        INTEGER NOT NULL CHECK (version >= 1),
    name           TEXT    NOT NULL,
    checksum       TEXT    NOT NULL CHECK (length(checksum) = 64),
    applied_at_ms  INTEGER NOT NULL,
    ckptdb_version TEXT    NOT NULL,
    PRIMARY KEY (migration_set, version)
) STRICT;

-- Per-file settings fixed at creation (e.g. chunk_size).
CREATE TABLE setting (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE namespace (
    namespace_id  INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    created_at_ms INTEGER NOT NULL
) STRICT;

-- Immutable manifests. `id` is sha256 over the canonical manifest (namespace, parent_id,
-- generation, entries, metadata); created_at_ms is stored beside it, not hashed.
-- parent_id has no foreign key on purpose: GC may remove an old ancestor, after which the
-- oldest kept checkpoint simply starts the stored lineage.
CREATE TABLE checkpoint (
    seq           INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE CHECK (length(id) = 64),
    namespace_id  INTEGER NOT NULL REFERENCES namespace (namespace_id),
    parent_id     TEXT    CHECK (parent_id IS NULL OR length(parent_id) = 64),
    generation    INTEGER NOT NULL CHECK (generation >= 1),
    created_at_ms INTEGER NOT NULL,
    metadata      TEXT    NOT NULL,
    entry_count   INTEGER NOT NULL CHECK (entry_count >= 0),
    total_size    INTEGER NOT NULL CHECK (total_size >= 0),
    format        INTEGER NOT NULL DEFAULT 1
) STRICT;
CREATE INDEX checkpoint_by_namespace ON checkpoint (namespace_id, generation);
CREATE INDEX checkpoint_by_parent ON checkpoint (parent_id);

-- Content-addressed blobs. A blob of at most one chunk is stored inline; a larger one is
-- an ordered list of chunks (blob_chunk), guarded by chunk_list_digest.
CREATE TABLE blob (
    blob_id           INTEGER PRIMARY KEY,
    digest            TEXT    NOT NULL UNIQUE CHECK (length(digest) = 64),
    size              INTEGER NOT NULL CHECK (size >= 0),
    chunk_count       INTEGER NOT NULL CHECK (chunk_count >= 0),
    chunk_list_digest TEXT,
    inline_data       BLOB,
    created_at_ms     INTEGER NOT NULL,
    CHECK ((chunk_count = 0 AND inline_data IS NOT NULL AND chunk_list_digest IS NULL)
        OR (chunk_count > 0 AND inline_data IS NULL AND length(chunk_list_digest) = 64))
) STRICT;

-- The small row per chunk: digest, size and the last time a writer staged or re-used it
-- (GC's grace period is measured from last_touched_ms). Its bytes live in chunk_data,
-- whose rows are written once and never updated.
CREATE TABLE chunk (
    chunk_id        INTEGER PRIMARY KEY,
    digest          TEXT    NOT NULL UNIQUE CHECK (length(digest) = 64),
    size            INTEGER NOT NULL CHECK (size > 0),
    last_touched_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE chunk_data (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunk (chunk_id) ON DELETE CASCADE,
    data     BLOB    NOT NULL
) STRICT;

CREATE TABLE blob_chunk (
    blob_id  INTEGER NOT NULL REFERENCES blob (blob_id) ON DELETE CASCADE,
    seq      INTEGER NOT NULL CHECK (seq >= 0),
    chunk_id INTEGER NOT NULL REFERENCES chunk (chunk_id),
    PRIMARY KEY (blob_id, seq)
) STRICT, WITHOUT ROWID;
CREATE INDEX blob_chunk_by_chunk ON blob_chunk (chunk_id);

CREATE TABLE entry (
    checkpoint_seq INTEGER NOT NULL REFERENCES checkpoint (seq) ON DELETE CASCADE,
    name           TEXT    NOT NULL,
    blob_id        INTEGER NOT NULL REFERENCES blob (blob_id),
    media_type     TEXT,
    schema_pin     TEXT,
    PRIMARY KEY (checkpoint_seq, name)
) STRICT, WITHOUT ROWID;
CREATE INDEX entry_by_blob ON entry (blob_id);

-- CURRENT per namespace. The foreign keys make it impossible to delete the checkpoint a
-- pointer names. digest = sha256 over (namespace, revision, current, fallback, previous
-- digest): a chain over every move, each move also appended to pointer_history.
CREATE TABLE pointer (
    namespace_id    INTEGER PRIMARY KEY REFERENCES namespace (namespace_id),
    current_seq     INTEGER NOT NULL REFERENCES checkpoint (seq),
    fallback_seq    INTEGER REFERENCES checkpoint (seq),
    revision        INTEGER NOT NULL CHECK (revision >= 1),
    digest          TEXT    NOT NULL CHECK (length(digest) = 64),
    previous_digest TEXT,
    updated_at_ms   INTEGER NOT NULL,
    confirmed_at_ms INTEGER
) STRICT;
CREATE INDEX pointer_by_current ON pointer (current_seq);
CREATE INDEX pointer_by_fallback ON pointer (fallback_seq);

-- Every move of a CURRENT pointer, like git's reflog. Ids are kept as text so the history
-- outlives the checkpoints it names.
CREATE TABLE pointer_history (
    namespace_id    INTEGER NOT NULL REFERENCES namespace (namespace_id) ON DELETE CASCADE,
    revision        INTEGER NOT NULL,
    current_id      TEXT    NOT NULL,
    fallback_id     TEXT,
    previous_digest TEXT,
    digest          TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    at_ms           INTEGER NOT NULL,
    PRIMARY KEY (namespace_id, revision)
) STRICT, WITHOUT ROWID;

-- Durable records of acts other than publishing (fallback, verify, gc, migration, ...).
CREATE TABLE receipt (
    receipt_id    INTEGER PRIMARY KEY,
    kind          TEXT    NOT NULL,
    namespace     TEXT,
    checkpoint_id TEXT,
    at_ms         INTEGER NOT NULL,
    body          TEXT    NOT NULL,
    digest        TEXT    NOT NULL CHECK (length(digest) = 64)
) STRICT;
CREATE INDEX receipt_by_kind ON receipt (kind, at_ms);

-- ---------------------------------------------------------------------------------------
-- Views for people and their tools (sqlite3 shell, Datasette): hex ids, ISO times, sizes.

CREATE VIEW checkpoints AS
SELECT c.id                                                              AS checkpoint_id,
       n.name                                                            AS namespace,
       c.parent_id                                                       AS parent_id,
       c.generation                                                      AS generation,
       strftime('%Y-%m-%dT%H:%M:%fZ', c.created_at_ms / 1000.0, 'unixepoch') AS created_at,
       c.entry_count                                                     AS entry_count,
       c.total_size                                                      AS total_size,
       c.metadata                                                        AS metadata,
       EXISTS (SELECT 1 FROM pointer p WHERE p.current_seq = c.seq)      AS is_current,
       EXISTS (SELECT 1 FROM pointer p WHERE p.fallback_seq = c.seq)     AS is_fallback
  FROM checkpoint c
  JOIN namespace n ON n.namespace_id = c.namespace_id;

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

CREATE VIEW entries AS
SELECT c.id                                                              AS checkpoint_id,
       n.name                                                            AS namespace,
       e.name                                                            AS name,
       b.digest                                                          AS digest,
       b.size                                                            AS size,
       e.media_type                                                      AS media_type,
       e.schema_pin                                                      AS schema_pin
  FROM entry e
  JOIN checkpoint c ON c.seq = e.checkpoint_seq
  JOIN namespace n ON n.namespace_id = c.namespace_id
  JOIN blob b ON b.blob_id = e.blob_id;

CREATE VIEW blob_usage AS
SELECT b.digest                                                          AS digest,
       b.size                                                            AS size,
       CASE WHEN b.chunk_count = 0 THEN 'inline' ELSE 'chunked' END      AS storage,
       b.chunk_count                                                     AS chunk_count,
       (SELECT count(*) FROM entry e WHERE e.blob_id = b.blob_id)        AS entry_refs,
       strftime('%Y-%m-%dT%H:%M:%fZ', b.created_at_ms / 1000.0, 'unixepoch') AS created_at
  FROM blob b;

CREATE VIEW pointer_log AS
SELECT n.name                                                            AS namespace,
       h.revision                                                        AS revision,
       h.current_id                                                      AS current_id,
       h.fallback_id                                                     AS fallback_id,
       h.reason                                                          AS reason,
       strftime('%Y-%m-%dT%H:%M:%fZ', h.at_ms / 1000.0, 'unixepoch')     AS at,
       h.digest                                                          AS digest,
       h.previous_digest                                                 AS previous_digest
  FROM pointer_history h
  JOIN namespace n ON n.namespace_id = h.namespace_id;

CREATE VIEW receipts AS
SELECT r.receipt_id                                                      AS receipt_id,
       r.kind                                                            AS kind,
       r.namespace                                                       AS namespace,
       r.checkpoint_id                                                   AS checkpoint_id,
       strftime('%Y-%m-%dT%H:%M:%fZ', r.at_ms / 1000.0, 'unixepoch')     AS at,
       r.body                                                            AS body
  FROM receipt r;
