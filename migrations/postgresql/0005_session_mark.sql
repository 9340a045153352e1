-- ckptdb on PostgreSQL, version 5: the session guard recognizes a session's statement by its
-- text, so a session costs no statement of its own.
--
-- Version 4 refused a core-table write while the transaction-local setting `ckptdb.session`
-- was 'on', which a session raised before its first statement and cleared after its last:
-- two round trips to the server for every session (a LangGraph put has one), and a
-- statement could clear the setting itself with set_config(). From this version a
-- session's statement always starts with the comment `/* ckptdb integration session */`
-- (ckptdb/connection/postgres/session.py adds it, as the SQLite engine's sessions do), and
-- the guard refuses a core-table write while the statement the client sent -- the
-- top-level one, current_query(), also when the write happens in a function it called --
-- starts with that comment. ckptdb's own statements never start with it.
-- The refusal is still SQLSTATE CK001, with the table and the operation in its fields.

-- Role: guard (no rows).
-- Invariant: raises CK001 exactly when the client's statement starts with the session mark.
-- Owner: ckptdb/connection/postgres/session.py.
CREATE OR REPLACE FUNCTION ckptdb_session_guard() RETURNS trigger LANGUAGE plpgsql AS $guard$
BEGIN
    IF starts_with(current_query(), '/* ckptdb integration session */') THEN
        RAISE EXCEPTION '% on table % refused: an integration session writes only the integration''s own tables; this one is ckptdb''s (it changes only through ckptdb''s API)', TG_OP, TG_TABLE_NAME
            USING ERRCODE = 'CK001', TABLE = TG_TABLE_NAME, DETAIL = TG_OP;
    END IF;
    RETURN NULL;
END
$guard$;
