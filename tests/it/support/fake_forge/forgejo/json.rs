//! Forgejo's objects as Gitea's `modules/structs` and `services/convert` write them: a
//! repository, a pull request, reviews and their line comments, issue comments, commit
//! statuses (`status`, not `state`) and the combined status.

use serde_json::{Value, json};

use super::super::records::{PullRequest, Verdict};
use super::super::state::{CommitStatus, Inner, State, timestamp};

pub(super) fn repo_json(inner: &Inner, state: &State) -> Value {
    let p = state.permissions;
    let allows = |m: &str| state.merge_methods.iter().any(|x| x == m);
    json!({
        "id": 1,
        "owner": inner.user_json(&inner.owner),
        "name": inner.repo,
        "full_name": inner.full_name(),
        "private": true,
        "html_url": format!("{}/{}", inner.base_url(), inner.full_name()),
        "clone_url": format!("{}/{}.git", inner.base_url(), inner.full_name()),
        "default_branch": "main",
        "permissions": { "admin": p.admin, "push": p.push, "pull": p.pull },
        "has_pull_requests": true,
        "allow_merge_commits": allows("merge"),
        "allow_rebase": allows("rebase"),
        "allow_rebase_explicit": allows("rebase-merge"),
        "allow_squash_merge": allows("squash"),
        "allow_fast_forward_only_merge": allows("fast-forward-only"),
        "default_merge_style": "merge",
    })
}

fn branch_end(inner: &Inner, reference: &str, sha: &str) -> Value {
    json!({
        "label": reference,
        "ref": reference,
        "sha": sha,
        "repo_id": 1,
        "repo": { "id": 1, "name": inner.repo, "full_name": inner.full_name() },
    })
}

pub(super) fn pr_json(inner: &Inner, state: &State, number: u64) -> Value {
    let Some(pr) = state.pr(number) else {
        return Value::Null;
    };
    let base_sha = state
        .branches
        .get(&pr.base_ref)
        .cloned()
        .unwrap_or_default();
    let html = format!("{}/{}/pulls/{number}", inner.base_url(), inner.full_name());
    json!({
        "id": pr.id,
        "url": html,
        "number": number,
        "user": inner.user_json(&pr.author),
        "title": pr.title,
        "body": pr.body,
        "labels": [],
        "milestone": null,
        "assignee": null,
        "assignees": null,
        "state": if pr.open { "open" } else { "closed" },
        "is_locked": false,
        "comments": state.comments.iter().filter(|c| c.pr == number).count(),
        "html_url": html,
        "diff_url": format!("{html}.diff"),
        "patch_url": format!("{html}.patch"),
        "mergeable": pr.open,
        "merged": pr.merged,
        "merged_at": pr.merged.then(|| pr.closed_at.map(timestamp)).flatten(),
        "merge_commit_sha": pr.merge_commit,
        "merged_by": pr.merged_by.as_deref().map_or(Value::Null, |l| inner.user_json(l)),
        "base": branch_end(inner, &pr.base_ref, &base_sha),
        "head": branch_end(inner, &pr.head_ref, &pr.head_sha),
        "merge_base": base_sha,
        "due_date": null,
        "created_at": timestamp(pr.created_at),
        "updated_at": timestamp(pr.updated_at),
        "closed_at": pr.closed_at.map(timestamp),
    })
}

pub(super) fn reviews_json(inner: &Inner, state: &State, number: u64) -> Value {
    let head = state
        .pr(number)
        .map(|p| p.head_sha.clone())
        .unwrap_or_default();
    let html = format!("{}/{}/pulls/{number}", inner.base_url(), inner.full_name());
    state
        .reviews
        .iter()
        .filter(|r| r.pr == number)
        .map(|r| {
            let verdict = match r.verdict {
                Verdict::Approved => "APPROVED",
                Verdict::ChangesRequested => "REQUEST_CHANGES",
                Verdict::Commented => "COMMENT",
            };
            json!({
                "id": r.id,
                "user": inner.user_json(&r.login),
                "team": null,
                "state": verdict,
                "body": r.body,
                "commit_id": r.commit_id,
                "stale": r.commit_id != head,
                "official": r.verdict != Verdict::Commented,
                "dismissed": r.dismissed,
                "comments_count": state.line_comments.iter().filter(|c| c.review_id == r.id).count(),
                "submitted_at": timestamp(r.at),
                "updated_at": timestamp(r.at),
                "html_url": format!("{html}#issuecomment-{}", r.id),
                "pull_request_url": html,
            })
        })
        .collect()
}

pub(super) fn review_comments_json(
    inner: &Inner,
    state: &State,
    number: u64,
    review: u64,
) -> Value {
    let html = format!("{}/{}/pulls/{number}", inner.base_url(), inner.full_name());
    state
        .line_comments
        .iter()
        .filter(|c| c.review_id == review)
        .map(|c| {
            json!({
                "id": c.id,
                "body": c.body,
                "user": inner.user_json(&c.login),
                "resolver": null,
                "pull_request_review_id": c.review_id,
                "created_at": timestamp(c.at),
                "updated_at": timestamp(c.at),
                "path": c.path,
                "commit_id": c.commit_id,
                "original_commit_id": "",
                "diff_hunk": "",
                "position": c.line,
                "original_position": 0,
                "html_url": format!("{html}/files#issuecomment-{}", c.id),
                "pull_request_url": html,
            })
        })
        .collect()
}

pub(super) fn issue_comments_json(inner: &Inner, state: &State, number: u64) -> Value {
    let html = format!("{}/{}/pulls/{number}", inner.base_url(), inner.full_name());
    state
        .comments
        .iter()
        .filter(|c| c.pr == number)
        .map(|c| {
            json!({
                "id": c.id,
                "html_url": format!("{html}#issuecomment-{}", c.id),
                "pull_request_url": html,
                "issue_url": "",
                "user": inner.user_json(&c.login),
                "original_author": "",
                "original_author_id": 0,
                "body": c.body,
                "assets": [],
                "created_at": timestamp(c.at),
                "updated_at": timestamp(c.at),
            })
        })
        .collect()
}

pub(super) fn status_json(inner: &Inner, s: &CommitStatus) -> Value {
    json!({
        "id": s.id,
        "status": s.state,
        "target_url": s.target_url.clone().unwrap_or_default(),
        "description": s.description.clone().unwrap_or_default(),
        "url": format!("{}/api/v1/repos/{}/statuses/{}", inner.base_url(), inner.full_name(), s.sha),
        "context": s.context,
        "creator": inner.user_json("ci"),
        "created_at": timestamp(s.at),
        "updated_at": timestamp(s.at),
    })
}

/// Gitea's combined state: the worst of the latest status per context.
pub(super) fn combined_status_json(inner: &Inner, state: &State, sha: &str) -> Value {
    let latest = state.latest_statuses(sha);
    if latest.is_empty() {
        return json!({
            "state": "", "sha": "", "total_count": 0, "statuses": null,
            "repository": null, "commit_url": "", "url": "",
        });
    }
    let rank = |s: &str| match s {
        "error" => 0,
        "failure" => 1,
        "warning" => 2,
        "pending" => 3,
        "success" => 4,
        _ => 5,
    };
    let worst = latest
        .iter()
        .map(|s| s.state.as_str())
        .min_by_key(|s| rank(s))
        .unwrap_or("pending");
    json!({
        "state": worst,
        "sha": sha,
        "total_count": latest.len(),
        "statuses": latest.iter().map(|s| status_json(inner, s)).collect::<Vec<_>>(),
        "repository": { "id": 1, "full_name": inner.full_name() },
        "commit_url": format!("{}/api/v1/repos/{}/git/commits/{sha}", inner.base_url(), inner.full_name()),
        "url": format!("{}/api/v1/repos/{}/commits/{sha}/status", inner.base_url(), inner.full_name()),
    })
}

/// An issue's timeline as Gitea serves it, as far as the fake knows it: who closed the
/// pull request, when it is closed unmerged.
pub(super) fn timeline_json(inner: &Inner, pr: &PullRequest) -> Value {
    let closed = !pr.open && !pr.merged;
    let events: Vec<Value> = pr
        .closed_by
        .iter()
        .filter(|_| closed)
        .map(|login| {
            json!({
                "id": pr.number * 1000 + 1,
                "type": "close",
                "user": inner.user_json(login),
                "body": "",
                "created_at": timestamp(pr.closed_at.unwrap_or(pr.updated_at)),
            })
        })
        .collect();
    Value::Array(events)
}
