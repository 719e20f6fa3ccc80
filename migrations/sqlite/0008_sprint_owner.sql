-- The owner and epoch every engine's sprint row has (PostgreSQL's several hosts use them,
-- SPEC §9). With SQLite one orchestrator owns every sprint: `owner` stays NULL and
-- `epoch` 0, and the guard on `epoch` in a commit always holds.
ALTER TABLE sprints ADD COLUMN owner TEXT;
ALTER TABLE sprints ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
