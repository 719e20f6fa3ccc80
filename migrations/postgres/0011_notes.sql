-- Notes (SPEC §17): a person's words for a sprint's next sister run, commands of kind
-- 'note'. delivered_run: the run they were given to (set with that run's record);
-- message: where a note from Discord was written ("<channel id>/<message id>"), for the
-- reaction that marks it delivered; marked_at: when that reaction was added.
ALTER TABLE commands ADD COLUMN delivered_run TEXT;
ALTER TABLE commands ADD COLUMN message TEXT;
ALTER TABLE commands ADD COLUMN marked_at BIGINT;
CREATE INDEX commands_unmarked ON commands (id)
    WHERE kind = 'note' AND message IS NOT NULL AND marked_at IS NULL;
-- A reply in a thread finds its sprint.
CREATE INDEX discord_threads_thread ON discord_threads (thread_id);
