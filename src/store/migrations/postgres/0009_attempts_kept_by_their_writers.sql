-- PostgreSQL: the attempt history stops paying, on every claim and every
-- completion, for two guards that decide nothing its writers do not already
-- decide (issue 14; docs/decisions.md, "PostgreSQL's attempt history").
--
-- Every attempt is opened by a claim, in the statement (or transaction)
-- whose guarded UPDATE of its todo row takes the todo from pending, or from
-- a lapsed lease whose open attempt that same transaction closes first; its
-- key is (todo_id, attempts_total) of the row it just updated. The row lock
-- of that UPDATE serialises every writer of one todo's history, as SQLite's
-- single writer does there (SQLite's migration 0009).
--
-- 1. The foreign key to todos. Its check ran a query and locked the todo row
--    it had just updated once more on every claim: ~30 µs (pgbench: 116 vs
--    84 µs per insert) and one WAL record per claim. The attempt is inserted
--    from the updated row, so the row exists. What the key also did, delete
--    the history with its todo (retention, or an endpoint or human deleted
--    with its todos), a statement trigger now does.
ALTER TABLE todo_attempts DROP CONSTRAINT todo_attempts_todo_id_fkey;

CREATE FUNCTION todo_attempts_go_with_their_todos() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM todo_attempts a USING deleted_todos d WHERE a.todo_id = d.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER todos_delete_their_attempts AFTER DELETE ON todos
    REFERENCING OLD TABLE AS deleted_todos
    FOR EACH STATEMENT EXECUTE FUNCTION todo_attempts_go_with_their_todos();

-- 2. "At most one open attempt per todo" as a unique index. Its predicate
--    (`ended_at IS NULL`) made closing an attempt a non-HOT update: a new
--    heap tuple and primary-key entry at every completion, besides the
--    index's own entry at every claim. The conformance suite checks the
--    open-attempt count after every transition, on both backends.
DROP INDEX todo_attempts_one_open;
