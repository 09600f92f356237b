-- Cheaper writes of planner output and leases, which every replica makes many times a second.
--
-- planner_outputs loses its foreign key to planner_sessions: checking it locked the session row
-- of every output stored, a WAL record in a logged table, so that every window of outputs waited
-- for a WAL flush at commit and paid the check row by row. The statement that stores outputs
-- keeps only those of sessions that exist, and a trigger deletes the outputs of deleted sessions
-- in the deleting statement, as the cascade did. An output stored while its session is being
-- deleted may outlive it, until it expires as any turn's outputs do.
--
-- planner_outputs_created indexed every output; only done rows need their time looked up (a turn
-- whose done is older than the resume window goes), so the index holds those alone.
--
-- planner_leases_subject drops expires_at, and the table leaves room on its pages: a renewal
-- then changes no indexed column, and PostgreSQL updates the row in place of an index entry
-- (a HOT update). Counting a person's unexpired leases reads their few rows.

ALTER TABLE planner_outputs DROP CONSTRAINT planner_outputs_session_id_fkey;

CREATE FUNCTION planner_sessions_delete_outputs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM planner_outputs o USING deleted d WHERE o.session_id = d.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER planner_sessions_delete_outputs AFTER DELETE ON planner_sessions
    REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION planner_sessions_delete_outputs();

DROP INDEX planner_outputs_created;
CREATE INDEX planner_outputs_done ON planner_outputs (created_at) WHERE done;

DROP INDEX planner_leases_subject;
CREATE INDEX planner_leases_subject ON planner_leases (subject);
ALTER TABLE planner_leases SET (fillfactor = 50);
