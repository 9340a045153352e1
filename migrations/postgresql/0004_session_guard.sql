-- ckptdb on PostgreSQL, version 4: integration sessions may not write ckptdb's own tables.
--
-- An integration (the LangGraph saver, a host's own tables) runs its SQL in a session inside
-- a transaction ckptdb opened (ckptdb/connection/postgres/session.py). On SQLite an
-- authorizer refuses a session's write to a core table before the statement runs; this
-- engine has none, so every core table gets a statement-level trigger that refuses a write
-- while the transaction-local setting `ckptdb.session` is 'on' -- which a session sets
-- before its first statement and clears when it ends. ckptdb's own statements run with the
-- setting off and pay one cheap function call per statement.
--
-- It guards against mistakes, not against hostile code: a statement could clear the
-- setting itself (the session refuses SET, RESET and every statement that is not a query
-- or a row write before sending it, so only a deliberate set_config() call would).
-- The refusal's SQLSTATE is CK001, with the table and the operation in its fields.

-- Role: guard (no rows).
-- Invariant: raises CK001 exactly when current_setting('ckptdb.session') is 'on'.
-- Owner: ckptdb/connection/postgres/session.py.
CREATE FUNCTION ckptdb_session_guard() RETURNS trigger LANGUAGE plpgsql AS $guard$
BEGIN
    IF current_setting('ckptdb.session', true) = 'on' THEN
        RAISE EXCEPTION '% on table % refused: an integration session writes only the integration''s own tables; this one is ckptdb''s (it changes only through ckptdb''s API)', TG_OP, TG_TABLE_NAME
            USING ERRCODE = 'CK001', TABLE = TG_TABLE_NAME, DETAIL = TG_OP;
    END IF;
    RETURN NULL;
END
$guard$;

CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON ckptdb_migration FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON setting FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON key_scope FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON namespace FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON checkpoint FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON blob FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON chunk FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON chunk_data FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON blob_chunk FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON blob_ref FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON pointer FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON pointer_history FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON receipt FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON pin FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON retention FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
CREATE TRIGGER ckptdb_session_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON quota FOR EACH STATEMENT EXECUTE FUNCTION ckptdb_session_guard();
