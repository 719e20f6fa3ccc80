-- The git HEAD of the workdir when a run started, so a handoff can tell what the stopped
-- session changed and committed.
ALTER TABLE runs ADD COLUMN git_head TEXT;
