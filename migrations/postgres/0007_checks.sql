-- The project's own check (SPEC §12), run by the orchestrator after narang's IMPL_DONE
-- held: one row per check, written in the transaction that records its run's end.
CREATE TABLE checks (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sprint_id    TEXT NOT NULL REFERENCES sprints (id),
    run_id       TEXT NOT NULL REFERENCES runs (id),
    command      TEXT NOT NULL,              -- JSON array: the program and its arguments
    head         TEXT,                       -- the workdir's HEAD it checked; NULL: no git
    exit_code    BIGINT,                     -- NULL when it was killed (timeout, stop)
    duration_ms  BIGINT NOT NULL,
    output_tail  TEXT NOT NULL,              -- the last lines of stdout and stderr
    at           BIGINT NOT NULL
);
CREATE INDEX checks_of_sprint ON checks (sprint_id, id);
