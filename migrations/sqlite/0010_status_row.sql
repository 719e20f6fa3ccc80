-- `sprint status` (the table) for every sprint: each sprint also keeps its row of the
-- table as a JSON array, so listing 10,000 sprints joins stored text instead of building
-- 10,000 arrays (and writing 10,000 costs as text) per call. `Store::status_rows` reads
-- the array's fields in this order.
--
-- The rows are read through an index of their own, in the order of the table: a scan of
-- the table reads every row's status document too (three times the pages).
--
-- The triggers of 0007 are replaced by two that keep both stored texts with one update.
-- A field added to the row goes into the array and into the update trigger's column list.
ALTER TABLE sprints ADD COLUMN status_row TEXT;

DROP TRIGGER sprints_status_doc_insert;
DROP TRIGGER sprints_status_doc_update;

CREATE TRIGGER sprints_status_insert AFTER INSERT ON sprints BEGIN
    UPDATE sprints SET
        status_doc = (SELECT doc FROM sprint_status_doc WHERE id = NEW.id),
        status_row = json_array(id, state, project, round, attempt, cost_usd, next_run_at, goal)
    WHERE id = NEW.id;
END;

-- Every column but the stored texts, so the trigger's own update does not fire it again.
CREATE TRIGGER sprints_status_update AFTER UPDATE OF
    id, project, goal, state, round, attempt, resume_stage, resume_round, contract_id, branch,
    next_run_at, focus, budget_usd, created_at, updated_at, input_tokens, output_tokens, cost_usd
ON sprints BEGIN
    UPDATE sprints SET
        status_doc = (SELECT doc FROM sprint_status_doc WHERE id = NEW.id),
        status_row = json_array(id, state, project, round, attempt, cost_usd, next_run_at, goal)
    WHERE id = NEW.id;
END;

UPDATE sprints SET
    status_row = json_array(id, state, project, round, attempt, cost_usd, next_run_at, goal);

CREATE INDEX sprints_status_rows ON sprints (number, status_row);
