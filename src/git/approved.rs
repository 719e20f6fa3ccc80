//! What an approval deploys is the commit the review approved, byte for byte. Before the
//! deployer starts, the branch must still point at that commit, the working tree must
//! hold no change beside it, every object new since the base must still hash to its id
//! (an object rewritten in place keeps its name), and nothing in the repository may make
//! git show other bytes for them (a replacement ref, a graft file).

use super::facts::branch_head;
use super::{Repo, failed};
use crate::domain::short_commit as short;

/// Why the branch no longer holds exactly the `reviewed` commit (with its objects since
/// `base`), for the person; `None` when it does.
pub async fn moved(repo: &Repo, branch: &str, base: &str, reviewed: &str) -> Option<String> {
    let now = branch_head(repo, branch).await;
    match now.as_deref() {
        None => {
            return Some(format!(
                "the branch {branch} is gone (it was at {} when reviewed)",
                short(reviewed)
            ));
        }
        Some(now) if now != reviewed => {
            let since = super::facts::commits_between(repo, reviewed, now)
                .await
                .map(|c| format!(" ({} new, never reviewed)", commits(c.len())))
                .unwrap_or_default();
            return Some(format!(
                "the branch {branch} moved from {} to {} after the review{since}",
                short(reviewed),
                short(now)
            ));
        }
        Some(_) => {}
    }
    // What a deployer would take from the working tree beside the commit.
    match super::dirty_paths(repo).await {
        Ok(paths) if paths.is_empty() => {}
        Ok(paths) => {
            return Some(format!(
                "the workdir holds changes that are in no commit ({}), which would deploy with it",
                super::some_names(&paths)
            ));
        }
        Err(e) => return Some(e),
    }
    match rewritten(repo, base, reviewed).await {
        Ok(None) => None,
        Ok(Some(why)) => Some(why),
        Err(e) => Some(format!(
            "the approved commit {}'s objects cannot be verified: {e}",
            short(reviewed)
        )),
    }
}

/// An object of `base..reviewed` whose bytes are not its id's, or a redirection that would
/// show other bytes for one; `Err` when git could not tell.
async fn rewritten(repo: &Repo, base: &str, reviewed: &str) -> Result<Option<String>, String> {
    let view = repo
        .view()
        .await
        .map_err(|e| failed("cannot read the repository", e))?;
    let range = format!("{base}..{reviewed}");
    let (listed, more) = repo
        .git_in(&view, &["rev-list", "--objects", &range, "--"], usize::MAX)
        .await
        .map_err(|e| failed(&format!("cannot list the objects of {range}"), e))?;
    if more {
        return Err(format!("the objects of {range} are too many to list"));
    }
    let listed = String::from_utf8_lossy(&listed);
    let objects: Vec<(String, String)> = listed
        .lines()
        .filter_map(|l| {
            let (id, path) = l.split_once(' ').unwrap_or((l, ""));
            (!id.is_empty()).then(|| (id.to_string(), path.to_string()))
        })
        .collect();
    let ids: Vec<String> = objects.iter().map(|(id, _)| id.clone()).collect();
    let read = repo
        .objects(&view, &ids)
        .await
        .map_err(|e| failed("cannot read the approved objects", e))?;
    for ((id, path), object) in objects.iter().zip(&read) {
        if object.hashed_id != *id {
            let what = match path.as_str() {
                "" => format!("the {} {}", object.kind, short(id)),
                path => format!("the {} {} ({path})", object.kind, short(id)),
            };
            return Ok(Some(format!(
                "{what} of the approved commits no longer holds the reviewed bytes (they hash to {}): the repository was written behind git's back",
                short(&object.hashed_id)
            )));
        }
    }
    // What a deployer's own git would honour and hanarang's ignores.
    let replaced = repo
        .git(&["for-each-ref", "--format=%(refname)", "refs/replace/"])
        .await
        .map_err(|e| failed("cannot list the replacement refs", e))?;
    if let Some(name) = replaced.lines().find(|name| {
        name.rsplit('/')
            .next()
            .is_some_and(|id| ids.iter().any(|i| i == id))
    }) {
        return Ok(Some(format!(
            "{name} would show other bytes for an object of the approved commits"
        )));
    }
    let grafts = repo.workdir().join(".git/info/grafts");
    if std::fs::symlink_metadata(&grafts).is_ok_and(|m| m.len() > 0) {
        return Ok(Some(
            "the repository's .git/info/grafts rewrites its history as git shows it".into(),
        ));
    }
    Ok(None)
}

fn commits(n: usize) -> String {
    match n {
        1 => "1 commit".into(),
        n => format!("{n} commits"),
    }
}
