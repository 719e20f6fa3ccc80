-- The branch a sprint started from and its commit then (SPEC §12), recorded when the
-- orchestrator creates the sprint's branch before the planner's first run.
ALTER TABLE sprints ADD COLUMN base_branch TEXT;
ALTER TABLE sprints ADD COLUMN base_commit TEXT;
