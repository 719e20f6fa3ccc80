-- `sprint status` is built from the sprint rows by the binary (as on PostgreSQL): the
-- stored texts of 0007 and 0010, their triggers, view and index go.
DROP TRIGGER IF EXISTS sprints_status_insert;
DROP TRIGGER IF EXISTS sprints_status_update;
DROP INDEX IF EXISTS sprints_status_rows;
DROP VIEW IF EXISTS sprint_status_doc;
ALTER TABLE sprints DROP COLUMN status_row;
ALTER TABLE sprints DROP COLUMN status_doc;
