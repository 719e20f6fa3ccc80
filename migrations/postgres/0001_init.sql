-- The durable record on PostgreSQL, the same tables as SQLite's migrations 0001-0007
-- leave (SQLite's history is its own: this engine starts from today's schema). Times are
-- unix milliseconds; integers are BIGINT (sqlx reads them as i64), reals DOUBLE PRECISION.
-- The stored status documents of SQLite's 0007 are not kept here: PostgreSQL builds the
-- list from the rows (`Store::status_json`).

CREATE TABLE sprints (
    id            TEXT PRIMARY KEY,              -- SPRINT-001
    number        BIGINT NOT NULL UNIQUE,        -- 1
    project       TEXT NOT NULL,
    goal          TEXT NOT NULL,
    state         TEXT NOT NULL,
    round         BIGINT NOT NULL,
    attempt       BIGINT NOT NULL,
    resume_stage  TEXT,                          -- while escalated: where resume goes
    resume_round  BIGINT,
    contract_id   TEXT NOT NULL,
    branch        TEXT NOT NULL,
    next_run_at   BIGINT,                        -- when the stage's sister may be spawned (backoff)
    focus         TEXT,                          -- focus for the next run, from a user
    budget_usd    DOUBLE PRECISION,              -- the limit a human raised past max_cost_usd
    last_seq      BIGINT NOT NULL DEFAULT 0,     -- seq of its last transition
    input_tokens  BIGINT NOT NULL DEFAULT 0,     -- its runs' spend, rolled up as they end
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cost_usd      DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX sprints_by_project_state ON sprints (project, state, number);
CREATE INDEX sprints_by_state ON sprints (state, number);

CREATE TABLE transitions (
    global_seq  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- order across sprints
    sprint_id   TEXT NOT NULL REFERENCES sprints (id),
    seq         BIGINT NOT NULL,                 -- contiguous per sprint, from 1
    from_state  TEXT NOT NULL,
    to_state    TEXT NOT NULL,
    event       TEXT NOT NULL,                   -- short name, e.g. darang:APPROVE
    event_json  TEXT NOT NULL,
    note_json   TEXT,
    round       BIGINT NOT NULL,
    attempt     BIGINT NOT NULL,
    run_id      TEXT,                            -- the run whose result caused it
    at          BIGINT NOT NULL,
    branch      TEXT,                            -- the sprint's branch at that moment
    UNIQUE (sprint_id, seq)
);

CREATE TABLE runs (
    id             TEXT PRIMARY KEY,             -- SPRINT-001/R03
    sprint_id      TEXT NOT NULL REFERENCES sprints (id),
    number         BIGINT NOT NULL,              -- per sprint, from 1
    actor          TEXT NOT NULL,
    round          BIGINT NOT NULL,
    attempt        BIGINT NOT NULL,
    parent_run_id  TEXT,                         -- the run whose document this one was given
    handoff_json   TEXT NOT NULL,                -- the document it was given
    synthesized    BIGINT NOT NULL,              -- 1 when the orchestrator composed that document
    focus          TEXT,
    pid            BIGINT,                       -- process group, while it runs
    started_at     BIGINT NOT NULL,
    ended_at       BIGINT,
    outcome        TEXT,                         -- NULL while running
    detail         TEXT,
    rejection      TEXT,                         -- bad_output: every problem, for the repair prompt
    exit_code      BIGINT,
    signal         BIGINT,
    duration_ms    BIGINT,
    stdout_tail    TEXT,
    stderr_tail    TEXT,
    message_json   TEXT,                         -- the validated message, raw (unknown fields kept)
    input_tokens   BIGINT,
    output_tokens  BIGINT,
    cost_usd       DOUBLE PRECISION,
    git_head       TEXT,                         -- the workdir's HEAD when it started
    UNIQUE (sprint_id, number)
);
CREATE INDEX runs_in_flight ON runs (outcome);

CREATE TABLE commands (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sprint_id   TEXT NOT NULL REFERENCES sprints (id),
    kind        TEXT NOT NULL,                   -- approve, request_changes, resume, abort, handoff
    text        TEXT,                            -- the note, focus or reason
    by          TEXT NOT NULL,                   -- cli, discord:<user id>
    created_at  BIGINT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending', -- pending, applied, refused
    result      TEXT,
    applied_at  BIGINT
);
CREATE INDEX commands_pending ON commands (status, id);

-- The one orchestrator allowed on this database.
CREATE TABLE instance_lease (
    id            BIGINT PRIMARY KEY CHECK (id = 1),
    token         TEXT NOT NULL,
    pid           BIGINT NOT NULL,
    host          TEXT NOT NULL,
    started_at    BIGINT NOT NULL,
    heartbeat_at  BIGINT NOT NULL
);

-- How far each notifier has delivered the transitions log.
CREATE TABLE delivery_cursors (
    consumer    TEXT PRIMARY KEY,
    global_seq  BIGINT NOT NULL
);

-- The forum post of each sprint (Discord ids are u64, kept as their i64 bits).
CREATE TABLE discord_threads (
    sprint_id         TEXT PRIMARY KEY REFERENCES sprints (id),
    thread_id         BIGINT NOT NULL,
    board_message_id  BIGINT NOT NULL,
    done_message_id   BIGINT
);
