-- The durable record of every sprint: its current state, the append-only log of its
-- transitions, every sister run, the commands given to it, and who holds the database.
-- Times are unix milliseconds. Portable SQL: a PostgreSQL backend is planned.

CREATE TABLE sprints (
    id            TEXT PRIMARY KEY,            -- SPRINT-001
    number        INTEGER NOT NULL UNIQUE,     -- 1
    project       TEXT NOT NULL,
    goal          TEXT NOT NULL,
    state         TEXT NOT NULL,
    round         INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,
    resume_stage  TEXT,                        -- while escalated: where resume goes
    resume_round  INTEGER,
    contract_id   TEXT NOT NULL,
    branch        TEXT NOT NULL,
    next_run_at   INTEGER,                     -- when the stage's sister may be spawned (backoff)
    focus         TEXT,                        -- focus for the next run, from a user
    last_seq      INTEGER NOT NULL DEFAULT 0,  -- seq of its last transition
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX sprints_by_project_state ON sprints (project, state, number);
CREATE INDEX sprints_by_state ON sprints (state, number);

CREATE TABLE transitions (
    global_seq  INTEGER PRIMARY KEY AUTOINCREMENT, -- order across sprints (delivery cursors)
    sprint_id   TEXT NOT NULL REFERENCES sprints (id),
    seq         INTEGER NOT NULL,                  -- contiguous per sprint, from 1
    from_state  TEXT NOT NULL,
    to_state    TEXT NOT NULL,
    event       TEXT NOT NULL,                     -- short name, e.g. darang:APPROVE
    event_json  TEXT NOT NULL,
    note_json   TEXT,
    round       INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    run_id      TEXT,                              -- the run whose result caused it
    at          INTEGER NOT NULL,
    UNIQUE (sprint_id, seq)
);

CREATE TABLE runs (
    id             TEXT PRIMARY KEY,            -- SPRINT-001/R03
    sprint_id      TEXT NOT NULL REFERENCES sprints (id),
    number         INTEGER NOT NULL,            -- per sprint, from 1
    actor          TEXT NOT NULL,
    round          INTEGER NOT NULL,
    attempt        INTEGER NOT NULL,
    parent_run_id  TEXT,                        -- the run whose document this one was given
    handoff_json   TEXT NOT NULL,               -- the document it was given
    synthesized    INTEGER NOT NULL,            -- 1 when the orchestrator composed that document
    focus          TEXT,
    pid            INTEGER,                     -- process group, while it runs
    started_at     INTEGER NOT NULL,
    ended_at       INTEGER,
    outcome        TEXT,                        -- NULL while running
    detail         TEXT,
    rejection      TEXT,                        -- bad_output: every problem, for the repair prompt
    exit_code      INTEGER,
    signal         INTEGER,
    duration_ms    INTEGER,
    stdout_tail    TEXT,
    stderr_tail    TEXT,
    message_json   TEXT,                        -- the validated message, raw (unknown fields kept)
    input_tokens   INTEGER,
    output_tokens  INTEGER,
    cost_usd       REAL,
    UNIQUE (sprint_id, number)
);
CREATE INDEX runs_in_flight ON runs (outcome);

CREATE TABLE commands (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    sprint_id   TEXT NOT NULL REFERENCES sprints (id),
    kind        TEXT NOT NULL,                  -- approve, request_changes, resume, abort, handoff
    text        TEXT,                           -- the note, focus or reason
    by          TEXT NOT NULL,                  -- cli, discord:<user id>
    created_at  INTEGER NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending',-- pending, applied, refused
    result      TEXT,
    applied_at  INTEGER
);
CREATE INDEX commands_pending ON commands (status, id);

-- The one orchestrator allowed on this database.
CREATE TABLE instance_lease (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    token         TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    host          TEXT NOT NULL,
    started_at    INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL
);

-- How far each notifier has delivered the transitions log.
CREATE TABLE delivery_cursors (
    consumer    TEXT PRIMARY KEY,
    global_seq  INTEGER NOT NULL
);
