-- Who gave the words a sprint runs on (SPEC §11): the author of the sprint, and of the
-- focus waiting for its next run (`discord:<id>` or `cli:<user>@<host>`).
ALTER TABLE sprints ADD COLUMN started_by TEXT;
ALTER TABLE sprints ADD COLUMN focus_by TEXT;
