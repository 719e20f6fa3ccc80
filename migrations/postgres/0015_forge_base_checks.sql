-- What a project's forge said of its checks at a base commit, read once when a sprint from
-- that commit first runs: every sister is told, and the summary shows it beside the check.
CREATE TABLE forge_base_checks (
    project TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    checks TEXT NOT NULL,
    read_at BIGINT NOT NULL,
    PRIMARY KEY (project, commit_id)
);
