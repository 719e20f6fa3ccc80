//! Facts beat claims: when the workdir is a git repository, narang's `IMPL_DONE` is
//! checked against it — the branch exists, and every listed commit resolves and is
//! reachable from that branch.

use std::path::Path;

use super::git::{GitError, git, is_branch_name};
use crate::handoff::message::ImplPayload;

/// `Ok` when the claim holds or cannot be checked (no git repository, no git binary);
/// `Err(reason)` when it does not hold.
pub async fn check_impl_claim(workdir: &Path, payload: &ImplPayload) -> Result<(), String> {
    if !in_git_repository(workdir) {
        return Ok(());
    }
    match git(workdir, &["rev-parse", "--is-inside-work-tree"]).await {
        Ok(out) if out.trim() == "true" => {}
        Ok(_) | Err(GitError::Failed(_)) => return Ok(()), // not a repository
        Err(GitError::Unavailable(e)) => {
            tracing::warn!(workdir = %workdir.display(), error = %e, "cannot run git: IMPL_DONE claims are not checked");
            return Ok(());
        }
    }
    let branch = payload.branch.trim();
    if !is_branch_name(workdir, branch).await {
        return Err(format!(
            "/payload/branch: {branch:?} is not a valid branch name"
        ));
    }
    let branch_ref = format!("refs/heads/{branch}");
    if git(
        workdir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{branch_ref}^{{commit}}"),
        ],
    )
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
        if git(
            workdir,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{commit}^{{commit}}"),
            ],
        )
        .await
        .is_err()
        {
            return Err(format!(
                "/payload/commits/{i}: commit {commit} does not exist"
            ));
        }
        if git(
            workdir,
            &["merge-base", "--is-ancestor", commit, &branch_ref],
        )
        .await
        .is_err()
        {
            return Err(format!(
                "/payload/commits/{i}: commit {commit} is not on branch {branch:?}"
            ));
        }
    }
    let dirty = super::git::dirty_paths(workdir).await?;
    if !dirty.is_empty() {
        return Err(format!(
            "the work tree has uncommitted changes: {}; commit them on {branch:?} or remove them before answering",
            super::git::some_names(&dirty)
        ));
    }
    Ok(())
}

/// Whether `workdir` is inside a git repository, as git finds one: a `.git` in it or in a
/// folder above. A file-system look, so a workdir that is no repository costs no process.
pub fn in_git_repository(workdir: &Path) -> bool {
    workdir.ancestors().any(|dir| dir.join(".git").exists())
}

/// The commit checked out in `workdir`, when it is a git repository.
pub async fn head(workdir: &Path) -> Option<String> {
    if !in_git_repository(workdir) {
        return None;
    }
    git(workdir, &["rev-parse", "--verify", "--quiet", "HEAD"])
        .await
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// What happened in `workdir` since `since` was checked out: the files changed (committed
/// or not) and the commits made, newest first (`<short id> <subject>`).
pub async fn changes_since(workdir: &Path, since: &str) -> (Vec<String>, Vec<String>) {
    let lines = |out: Result<String, GitError>| -> Vec<String> {
        out.map(|s| {
            s.lines()
                .map(str::to_string)
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
    };
    let files = lines(git(workdir, &["diff", "--name-only", since, "--"]).await);
    let range = format!("{since}..HEAD");
    let commits = lines(git(workdir, &["log", "--format=%h %s", &range, "--"]).await);
    (files, commits)
}

/// The commits of `base..head`, oldest first: `(full id, subject)`.
pub async fn commits_between(
    workdir: &Path,
    base: &str,
    head: &str,
) -> Result<Vec<(String, String)>, String> {
    let out = git(
        workdir,
        &[
            "log",
            "--reverse",
            "--format=%H %s",
            &format!("{base}..{head}"),
            "--",
        ],
    )
    .await
    .map_err(|e| super::git::failed(&format!("cannot list the commits {base}..{head}"), e))?;
    Ok(out
        .lines()
        .filter_map(|l| {
            l.split_once(' ')
                .map(|(id, s)| (id.to_string(), s.to_string()))
        })
        .collect())
}

/// The files `base..head` changes: `(path, lines added, lines removed)`; a binary file
/// counts no lines.
pub async fn diffstat(
    workdir: &Path,
    base: &str,
    head: &str,
) -> Result<Vec<(String, u64, u64)>, String> {
    let out = git(
        workdir,
        &["diff", "--numstat", &format!("{base}..{head}"), "--"],
    )
    .await
    .map_err(|e| super::git::failed(&format!("cannot compare {base}..{head}"), e))?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, '\t');
            let added = parts.next()?.parse().unwrap_or(0);
            let removed = parts.next()?.parse().unwrap_or(0);
            Some((parts.next()?.to_string(), added, removed))
        })
        .collect())
}

/// The commit `branch` points at now.
pub async fn branch_head(workdir: &Path, branch: &str) -> Option<String> {
    super::git::commit_of(workdir, &format!("refs/heads/{branch}")).await
}

/// The patch of `base..head`, as `git diff` writes it.
pub async fn patch(workdir: &Path, base: &str, head: &str) -> Result<String, String> {
    git(
        workdir,
        &["diff", "--no-color", &format!("{base}..{head}"), "--"],
    )
    .await
    .map_err(|e| super::git::failed(&format!("cannot compare {base}..{head}"), e))
}
