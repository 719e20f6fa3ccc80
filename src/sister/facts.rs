//! Facts beat claims: when the workdir is a git repository, narang's `IMPL_DONE` is
//! checked against it — the branch exists, and every listed commit resolves and is
//! reachable from that branch.

use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

use crate::handoff::message::ImplPayload;

/// Every git call is bounded: a wedged repository must not hang the run.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

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
    if branch.starts_with('-')
        || git(workdir, &["check-ref-format", "--branch", branch])
            .await
            .is_err()
    {
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
    let dirty = super::branch::dirty_paths(workdir).await?;
    if !dirty.is_empty() {
        return Err(format!(
            "the work tree has uncommitted changes: {}; commit them on {branch:?} or remove them before answering",
            super::branch::some_names(&dirty)
        ));
    }
    Ok(())
}

pub(super) enum GitError {
    /// git ran and said no: the last line of what it said.
    Failed(String),
    /// git could not be run at all.
    Unavailable(String),
}

pub(super) async fn git(workdir: &Path, args: &[&str]) -> Result<String, GitError> {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(workdir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|e| GitError::Unavailable(e.to_string()))?;
    let out = tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| GitError::Unavailable(format!("git {} timed out", args.join(" "))))?
        .map_err(|e| GitError::Unavailable(e.to_string()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let said = String::from_utf8_lossy(&out.stderr);
        let last = said.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        Err(GitError::Failed(last.trim().to_string()))
    }
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
