-- ckptdb LangGraph integration on PostgreSQL, schema version 1 (migration set "langgraph"
-- of this engine).
--
-- The model of the SQLite set's version 1, table for table and column for column, so the
-- saver runs the same statements on both engines where they agree. Types: INTEGER ->
-- BIGINT, BLOB -> BYTEA; every text column compares by code point (COLLATE "C"), as SQLite
-- compares text: LangGraph's checkpoint ids (uuid6 strings) order checkpoints, and a
-- language's collation would order them differently.
--
-- These tables index what LangGraph needs that a ckptdb checkpoint does not say by itself:
-- LangGraph's own checkpoint ids mapped to ckptdb checkpoint ids, and the pending writes
-- attached to a checkpoint after it was published. Rows here are written in the same
-- transaction as the checkpoint they describe.

-- Every ckptdb namespace the integration created, with the (thread, checkpoint namespace)
-- pair it holds. Registered before anything is committed to it, removed after the ckptdb
-- namespace was dropped, so leftovers of an interrupted delete can always be found.
CREATE TABLE lg_namespace (
    namespace     TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    thread_id     TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL,
    UNIQUE (thread_id, checkpoint_ns)
);

-- One row per LangGraph checkpoint. `ckpt_id` is the ckptdb checkpoint (lowercase hex
-- sha256) holding it; `run_id` is copied from the checkpoint metadata for delete_for_runs.
CREATE TABLE lg_checkpoint (
    thread_id            TEXT COLLATE "C" NOT NULL,
    checkpoint_ns        TEXT COLLATE "C" NOT NULL,
    checkpoint_id        TEXT COLLATE "C" NOT NULL,
    parent_checkpoint_id TEXT COLLATE "C",
    ckpt_id              TEXT COLLATE "C" NOT NULL CHECK (length(ckpt_id) = 64),
    run_id               TEXT COLLATE "C",
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE INDEX lg_checkpoint_by_run ON lg_checkpoint (run_id) WHERE run_id IS NOT NULL;

-- Pending writes (put_writes): (task_id, idx) is unique per checkpoint; idx < 0 marks the
-- special channels (error, interrupt, resume, scheduled), which a later write replaces.
-- `type` is the serializer's tag (never "pickle"); `value` its bytes.
CREATE TABLE lg_write (
    write_id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id     TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL,
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    task_id       TEXT COLLATE "C" NOT NULL,
    idx           BIGINT NOT NULL,
    channel       TEXT COLLATE "C" NOT NULL,
    type          TEXT COLLATE "C" NOT NULL CHECK (type <> 'pickle'),
    value         BYTEA  NOT NULL,
    task_path     TEXT COLLATE "C" NOT NULL DEFAULT '',
    UNIQUE (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);
