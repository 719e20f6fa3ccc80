-- The git HEAD of the workdir when a run started, so a handoff can tell what the stopped
-- session changed and committed.
ALTER TABLE runs ADD COLUMN git_head TEXT;

-- The sprint's branch when each transition happened, so a line delivered late (after an
-- outage) still names the branch of its moment.
ALTER TABLE transitions ADD COLUMN branch TEXT;
