//! The sprint's branch is a fact, not a guess: created from its base before the
//! planner's first run, checked out before every run, on a tree that holds no changes a
//! run of the sprint did not make. Every git call is bounded (`git/mod.rs`).

use super::{Repo, commit_of, dirty_paths, failed, is_branch_name, some_names};

/// Where a run starts: the sprint's base and the commit its branch is at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    pub base_branch: String,
    pub base_commit: String,
    /// The branch's head once checked out: what a reviewer reviews.
    pub head: String,
}

/// What the sprint knows before a run: its branch, the base it recorded (if any), the
/// project's `base_branch`, and when its runs that really ran (a process started) worked:
/// from the first one's start to the last one's end (unix ms; `None` before any).
pub struct Sprint<'a> {
    pub project: &'a str,
    pub branch: &'a str,
    pub recorded_base: Option<(&'a str, &'a str)>,
    pub configured_base: Option<&'a str>,
    pub worked: Option<(i64, i64)>,
}

/// Readies `workdir` (a git repository) for a run of `sprint`; the error is the run's
/// `spawn_failed` detail, naming what to fix.
pub async fn prepare(repo: &Repo, sprint: &Sprint<'_>) -> Result<Checkout, String> {
    let workdir = repo.workdir();
    let foreign = changes_no_run_made(repo, sprint.worked).await?;
    if !foreign.is_empty() {
        return Err(format!(
            "the work tree {} has uncommitted changes no run of this sprint made: {}; hanarang never takes them into a sprint: commit, stash or remove them, then resume the sprint",
            workdir.display(),
            some_names(&foreign)
        ));
    }
    let (base_branch, base_commit) = match sprint.recorded_base {
        Some((branch, commit)) => (branch.to_string(), commit.to_string()),
        None => base(repo, sprint).await?,
    };
    let branch = sprint.branch;
    if !is_branch_name(repo, branch).await {
        return Err(format!(
            "the sprint's branch {branch:?} is not a valid branch name (pipeline.branch_template)"
        ));
    }
    let branch_ref = format!("refs/heads/{branch}");
    if commit_of(repo, &branch_ref).await.is_none() {
        // A branch left by an earlier try (a restart) is reused as it is.
        repo.git(&["branch", "--no-track", branch, &base_commit])
            .await
            .map_err(|e| {
                failed(
                    &format!("cannot create the branch {branch:?} from {base_commit}"),
                    e,
                )
            })?;
    }
    let current = repo
        .git(&["symbolic-ref", "--quiet", "--short", "HEAD"])
        .await
        .ok();
    if current.as_deref().map(str::trim) != Some(branch) {
        repo.git(&["checkout", "--quiet", branch])
            .await
            .map_err(|e| {
                failed(
                    &format!("cannot check out {branch:?} in {}", workdir.display()),
                    e,
                )
            })?;
    }
    let head = commit_of(repo, &branch_ref).await.ok_or_else(|| {
        format!(
            "the branch {branch:?} has no commit in {}",
            workdir.display()
        )
    })?;
    Ok(Checkout {
        base_branch,
        base_commit,
        head,
    })
}

/// The base a new sprint starts from: the project's `base_branch`, else the branch
/// checked out now, with its commit.
async fn base(repo: &Repo, sprint: &Sprint<'_>) -> Result<(String, String), String> {
    let workdir = repo.workdir();
    let key = format!("projects.{}.base_branch", sprint.project);
    let branch = match sprint.configured_base {
        Some(b) => b.to_string(),
        None => repo
            .git(&["symbolic-ref", "--quiet", "--short", "HEAD"])
            .await
            .map(|s| s.trim().to_string())
            .map_err(|_| {
                format!(
                    "{key} is not set and {} has no branch checked out (a detached HEAD): set {key}",
                    workdir.display()
                )
            })?,
    };
    let commit = commit_of(repo, &branch).await.ok_or_else(|| {
        format!(
            "{key}: no branch {branch:?} with a commit in {}",
            workdir.display()
        )
    })?;
    Ok((branch, commit))
}

/// A reviewer reads; it does not write: `Err` naming the commits when `branch` is no
/// longer at `head`, the commit it was given.
pub async fn unmoved(repo: &Repo, branch: &str, head: &str) -> Result<(), String> {
    let now = commit_of(repo, &format!("refs/heads/{branch}")).await;
    if now.as_deref() == Some(head) {
        return Ok(());
    }
    let Some(now) = now else {
        return Err(format!(
            "the branch {branch:?} is gone; a reviewer must not delete or move it"
        ));
    };
    let made = repo
        .git(&["log", "--format=%h %s", &format!("{head}..{now}"), "--"])
        .await
        .map(|s| s.lines().map(str::to_string).collect::<Vec<_>>())
        .unwrap_or_default();
    let what = if made.is_empty() {
        format!("it now points at {now}")
    } else {
        format!("commits {}", some_names(&made))
    };
    Err(format!(
        "the branch {branch:?} moved during the review (it was at {head}): {what}; a reviewer reads, it does not commit; keep review notes outside the repository"
    ))
}

/// The dirty paths no run made: all of them before a run of the sprint really ran; after,
/// those written before the first such run started or after the last one ended (a
/// deleted path cannot say when, and counts as the runs').
async fn changes_no_run_made(
    repo: &Repo,
    worked: Option<(i64, i64)>,
) -> Result<Vec<String>, String> {
    let dirty = dirty_paths(repo).await?;
    let Some((from, until)) = worked else {
        return Ok(dirty);
    };
    Ok(dirty
        .into_iter()
        .filter(|path| {
            std::fs::symlink_metadata(repo.workdir().join(path))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .is_some_and(|t| {
                    let at = i64::try_from(t.as_millis()).unwrap_or(i64::MAX);
                    at < from || at > until
                })
        })
        .collect())
}

/// Makes `branch` point at `commit` (fetched from the forge: someone else's push) and, when
/// it is checked out in a workdir holding no change, the workdir show it. A workdir with
/// changes is left alone, and said so: nothing of a person's is overwritten.
pub async fn take(repo: &Repo, branch: &str, commit: &str) -> Result<(), String> {
    let checked_out = repo
        .git(&["symbolic-ref", "--quiet", "--short", "HEAD"])
        .await
        .is_ok_and(|head| head.trim() == branch);
    if !checked_out {
        return repo
            .git(&["update-ref", &format!("refs/heads/{branch}"), commit])
            .await
            .map(|_| ())
            .map_err(|e| super::failed(&format!("cannot move {branch} to {commit}"), e));
    }
    let dirty = dirty_paths(repo).await?;
    if !dirty.is_empty() {
        return Err(format!(
            "the workdir holds changes ({}): {branch} was not moved to {commit}",
            some_names(&dirty)
        ));
    }
    repo.git(&["reset", "--quiet", "--hard", commit])
        .await
        .map(|_| ())
        .map_err(|e| super::failed(&format!("cannot check out {commit}"), e))
}

/// Checks `commit` out detached, on a workdir holding no change (the merged base a deployer
/// is given).
pub async fn detach(repo: &Repo, commit: &str) -> Result<(), String> {
    let dirty = dirty_paths(repo).await?;
    if !dirty.is_empty() {
        return Err(format!(
            "the workdir holds changes ({}): {commit} was not checked out",
            some_names(&dirty)
        ));
    }
    repo.git(&["checkout", "--quiet", "--detach", commit])
        .await
        .map(|_| ())
        .map_err(|e| super::failed(&format!("cannot check out {commit}"), e))
}
