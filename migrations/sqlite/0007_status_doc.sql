-- `sprint status --json` for every sprint: each sprint keeps its own document, so listing
-- 10,000 sprints joins stored text instead of building 10,000 objects per call.
--
-- The document is the one `Sprint` serializes to, plus its `usage`: absent keys where the
-- Rust side skips `None` (json_patch drops the nulls). A test holds the two equal. A field
-- added to the document goes into the view and into the trigger's column list.
ALTER TABLE sprints ADD COLUMN status_doc TEXT;

CREATE VIEW sprint_status_doc AS
SELECT s.id, json_patch('{}', json_object(
    'id', s.id, 'project', s.project, 'goal', s.goal, 'state', s.state,
    'round', s.round, 'attempt', s.attempt,
    'resume', json(CASE WHEN s.resume_stage IS NULL THEN NULL
                   ELSE json_object('stage', s.resume_stage, 'round', s.resume_round) END),
    'contract_id', s.contract_id, 'branch', s.branch,
    'next_run_at', s.next_run_at, 'focus', s.focus, 'budget_usd', s.budget_usd,
    'created_at', s.created_at, 'updated_at', s.updated_at,
    'usage', json_object('input_tokens', s.input_tokens,
                         'output_tokens', s.output_tokens,
                         'cost_usd', s.cost_usd))) AS doc
FROM sprints s;

CREATE TRIGGER sprints_status_doc_insert AFTER INSERT ON sprints BEGIN
    UPDATE sprints SET status_doc = (SELECT doc FROM sprint_status_doc WHERE id = NEW.id)
    WHERE id = NEW.id;
END;

-- Every column but status_doc itself, so the trigger's own update does not fire it again.
CREATE TRIGGER sprints_status_doc_update AFTER UPDATE OF
    id, project, goal, state, round, attempt, resume_stage, resume_round, contract_id, branch,
    next_run_at, focus, budget_usd, created_at, updated_at, input_tokens, output_tokens, cost_usd
ON sprints BEGIN
    UPDATE sprints SET status_doc = (SELECT doc FROM sprint_status_doc WHERE id = NEW.id)
    WHERE id = NEW.id;
END;

UPDATE sprints SET status_doc = (SELECT doc FROM sprint_status_doc v WHERE v.id = sprints.id);
