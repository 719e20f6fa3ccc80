-- What a forge's repository said of its checks at a base commit, read once when a sprint
-- from that commit first runs: every sister is told, and the summary shows it beside the
-- check. `repository` is the forge's API and the repository's owner/name.
CREATE TABLE forge_base_checks (
    repository TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    checks TEXT NOT NULL,
    read_at BIGINT NOT NULL,
    PRIMARY KEY (repository, commit_id)
);
