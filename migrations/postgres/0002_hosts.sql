-- Several orchestrator hosts on one database (SPEC §9).
--
-- A sprint is owned by at most one host (`owner`, a host's name). `epoch` counts the
-- times it was claimed or taken over: every write for the sprint is guarded by the
-- epoch its writer read, so a host that lost the sprint cannot write for it any more.
ALTER TABLE sprints ADD COLUMN owner TEXT;
ALTER TABLE sprints ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
CREATE INDEX sprints_by_owner ON sprints (owner, state);

-- Each host's lease. Times are the database server's clock (unix ms), so hosts whose
-- clocks disagree still agree on whose lease has expired.
CREATE TABLE hosts (
    name          TEXT PRIMARY KEY,
    token         TEXT NOT NULL,       -- this process's, while it holds the name
    pid           BIGINT NOT NULL,
    machine       TEXT NOT NULL,       -- the machine's hostname
    projects      TEXT NOT NULL,       -- JSON array of the project names it serves
    lease_ttl_ms  BIGINT NOT NULL,
    started_at    BIGINT NOT NULL,
    heartbeat_at  BIGINT NOT NULL
);

-- Roles exactly one host plays at a time (the Discord bot), with a lease of their own.
CREATE TABLE leaders (
    role          TEXT PRIMARY KEY,
    host          TEXT NOT NULL,
    token         TEXT NOT NULL,
    heartbeat_at  BIGINT NOT NULL,
    lease_ttl_ms  BIGINT NOT NULL
);
