//! Facts beat claims: when the workdir is a git repository, the implementer's `IMPL_DONE` is
//! checked against it — the branch exists, and every listed commit resolves and is
//! reachable from that branch.

use super::{GitError, Repo, is_branch_name};
use crate::handoff::message::ImplPayload;

/// `Ok` when the claim holds or there is nothing to check it against (the workdir holds
/// no repository); `Err(reason)` when it does not hold, or git cannot check it.
pub async fn check_impl_claim(repo: &Repo, payload: &ImplPayload) -> Result<(), String> {
    if !repo.is_repository() {
        return Ok(());
    }
    let workdir = repo.workdir();
    // The workdir holds a repository: a claim git cannot check (a repository broken or
    // made to hang) is not taken on trust.
    match repo.git(&["rev-parse", "--is-inside-work-tree"]).await {
        Ok(out) if out.trim() == "true" => {}
        Ok(out) => {
            return Err(format!(
                "{} is not a work tree to git ({}); the claims cannot be checked",
                workdir.display(),
                out.trim()
            ));
        }
        Err(e) => {
            return Err(super::failed(
                &format!(
                    "cannot check the claims in {}: git cannot read the repository",
                    workdir.display()
                ),
                e,
            ));
        }
    }
    let branch = payload.branch.trim();
    if !is_branch_name(repo, branch).await {
        return Err(format!(
            "/payload/branch: {branch:?} is not a valid branch name"
        ));
    }
    let branch_ref = format!("refs/heads/{branch}");
    if repo
        .git(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{branch_ref}^{{commit}}"),
        ])
        .await
        .is_err()
    {
        return Err(format!(
            "/payload/branch: branch {branch:?} does not exist in {}",
            workdir.display()
        ));
    }
    for (i, commit) in payload.commits.iter().enumerate() {
        let commit = commit.trim();
        let looks_like_id =
            (4..=64).contains(&commit.len()) && commit.chars().all(|c| c.is_ascii_hexdigit());
        if !looks_like_id {
            return Err(format!(
                "/payload/commits/{i}: {commit:?} is not a commit id"
            ));
        }
        if repo
            .git(&[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{commit}^{{commit}}"),
            ])
            .await
            .is_err()
        {
            return Err(format!(
                "/payload/commits/{i}: commit {commit} does not exist"
            ));
        }
        if repo
            .git(&["merge-base", "--is-ancestor", commit, &branch_ref])
            .await
            .is_err()
        {
            return Err(format!(
                "/payload/commits/{i}: commit {commit} is not on branch {branch:?}"
            ));
        }
    }
    let dirty = super::dirty_paths(repo).await?;
    if !dirty.is_empty() {
        return Err(format!(
            "the work tree has uncommitted changes: {}; commit them on {branch:?} or remove them before answering",
            super::some_names(&dirty)
        ));
    }
    Ok(())
}

/// The commit checked out in `workdir`, when it is a git repository.
pub async fn head(repo: &Repo) -> Option<String> {
    if !repo.is_repository() {
        return None;
    }
    repo.git(&["rev-parse", "--verify", "--quiet", "HEAD"])
        .await
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// What happened in `workdir` since `since` was checked out: the files changed (committed
/// or not) and the commits made, newest first (`<short id> <subject>`).
pub async fn changes_since(repo: &Repo, since: &str) -> (Vec<String>, Vec<String>) {
    let lines = |out: Result<String, GitError>| -> Vec<String> {
        out.map(|s| {
            s.lines()
                .map(str::to_string)
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
    };
    let files = lines(
        repo.git(&[
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--ignore-submodules=dirty",
            "--name-only",
            since,
            "--",
        ])
        .await,
    );
    let range = format!("{since}..HEAD");
    let commits = lines(repo.git(&["log", "--format=%h %s", &range, "--"]).await);
    (files, commits)
}

/// The commits of `base..head`, oldest first: `(full id, subject)`.
pub async fn commits_between(
    repo: &Repo,
    base: &str,
    head: &str,
) -> Result<Vec<(String, String)>, String> {
    let out = repo
        .git(&[
            "log",
            "--reverse",
            "--format=%H %s",
            &format!("{base}..{head}"),
            "--",
        ])
        .await
        .map_err(|e| super::failed(&format!("cannot list the commits {base}..{head}"), e))?;
    Ok(out
        .lines()
        .filter_map(|l| {
            l.split_once(' ')
                .map(|(id, s)| (id.to_string(), s.to_string()))
        })
        .collect())
}

/// The commit `branch` points at now.
pub async fn branch_head(repo: &Repo, branch: &str) -> Option<String> {
    super::commit_of(repo, &format!("refs/heads/{branch}")).await
}
