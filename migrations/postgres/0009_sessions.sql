-- An agent's session per run, and the run whose session a retry continued (SPEC §14).
ALTER TABLE runs ADD COLUMN session_id TEXT;
ALTER TABLE runs ADD COLUMN resumes TEXT;
