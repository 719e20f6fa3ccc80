-- The forum post of each sprint: created once, then its status board is edited in place
-- and lines are appended. The `done` message carries the approval buttons until the
-- sprint leaves `done`.
CREATE TABLE discord_threads (
    sprint_id         TEXT PRIMARY KEY REFERENCES sprints (id),
    thread_id         INTEGER NOT NULL,
    board_message_id  INTEGER NOT NULL,
    done_message_id   INTEGER
);
