-- ckptdb LangGraph integration, schema version 1 (migration set "langgraph").
--
-- These tables index what LangGraph needs that a ckptdb checkpoint does not say by itself:
-- LangGraph's own checkpoint ids (uuid6 strings, which order checkpoints) mapped to ckptdb
-- checkpoint ids, and the pending writes attached to a checkpoint after it was published.
-- Checkpoint content (channel values, versions, metadata) lives in ckptdb checkpoints and
-- blobs; rows here are written in the same transaction as the checkpoint they describe.
-- No syntax newer than SQLite 3.37; STRICT tables.

-- Every ckptdb namespace the integration created, with the (thread, checkpoint namespace)
-- pair it holds. Registered before anything is committed to it, removed after the ckptdb
-- namespace was dropped, so leftovers of an interrupted delete can always be found.
CREATE TABLE lg_namespace (
    namespace     TEXT NOT NULL PRIMARY KEY,
    thread_id     TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL,
    UNIQUE (thread_id, checkpoint_ns)
) STRICT;

-- One row per LangGraph checkpoint. `ckpt_id` is the ckptdb checkpoint (lowercase hex
-- sha256) holding it; `run_id` is copied from the checkpoint metadata for delete_for_runs.
CREATE TABLE lg_checkpoint (
    thread_id            TEXT NOT NULL,
    checkpoint_ns        TEXT NOT NULL,
    checkpoint_id        TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    ckpt_id              TEXT NOT NULL CHECK (length(ckpt_id) = 64),
    run_id               TEXT,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX lg_checkpoint_by_run ON lg_checkpoint (run_id) WHERE run_id IS NOT NULL;

-- Pending writes (put_writes): (task_id, idx) is unique per checkpoint; idx < 0 marks the
-- special channels (error, interrupt, resume, scheduled), which a later write replaces.
-- `type` is the serializer's tag (never "pickle"); `value` its bytes.
CREATE TABLE lg_write (
    write_id      INTEGER PRIMARY KEY,
    thread_id     TEXT    NOT NULL,
    checkpoint_ns TEXT    NOT NULL,
    checkpoint_id TEXT    NOT NULL,
    task_id       TEXT    NOT NULL,
    idx           INTEGER NOT NULL,
    channel       TEXT    NOT NULL,
    type          TEXT    NOT NULL CHECK (type <> 'pickle'),
    value         BLOB    NOT NULL,
    task_path     TEXT    NOT NULL DEFAULT '',
    UNIQUE (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
) STRICT;
