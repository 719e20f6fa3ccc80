//! git, as the sister runner asks it: every call bounded, run without a shell or a
//! prompt, its refusal kept as what git said.

use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

/// Every git call is bounded: a wedged repository must not hang the run.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a git call gave no answer.
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

/// The paths `git status` reports: changed, staged, deleted or untracked (ignored files
/// are not changes).
pub async fn dirty_paths(workdir: &Path) -> Result<Vec<String>, String> {
    let out = git(
        workdir,
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
    )
    .await
    .map_err(|e| {
        failed(
            &format!("cannot read the state of {}", workdir.display()),
            e,
        )
    })?;
    let mut paths = Vec::new();
    let mut entries = out.split('\0').filter(|e| !e.is_empty());
    while let Some(entry) = entries.next() {
        let (status, path) = entry.split_at(entry.len().min(3));
        paths.push(path.to_string());
        // A rename or copy is followed by the path it came from.
        if status.starts_with('R') || status.starts_with('C') {
            entries.next();
        }
    }
    Ok(paths)
}

/// Up to ten names, then how many more.
pub fn some_names(paths: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut names = paths
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        names.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    names
}

/// `what` failed, with what git said.
pub(super) fn failed(what: &str, e: GitError) -> String {
    match e {
        GitError::Failed(said) if !said.is_empty() => format!("{what}: git says {said:?}"),
        GitError::Failed(_) => what.to_string(),
        GitError::Unavailable(why) => format!("{what}: {why}"),
    }
}

/// Whether `name` may name a branch (and is no option in disguise).
pub(super) async fn is_branch_name(workdir: &Path, name: &str) -> bool {
    !name.starts_with('-')
        && git(workdir, &["check-ref-format", "--branch", name])
            .await
            .is_ok()
}

/// The commit `rev` names, when it names one.
pub(super) async fn commit_of(workdir: &Path, rev: &str) -> Option<String> {
    git(
        workdir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .await
    .ok()
    .map(|s| s.trim().to_string())
    .filter(|s| !s.is_empty())
}
