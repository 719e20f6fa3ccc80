//! GitHub's objects as api.github.com writes them: a repository, a pull request (whole,
//! or "simple" as lists give it), the issue behind it, reviews, review comments, issue
//! comments, check runs, commit statuses and their combined state.

use serde_json::{Value, json};

use super::super::records::{PullRequest, Verdict};
use super::super::state::{CommitStatus, Inner, State, timestamp};

pub(super) fn repo_api(inner: &Inner) -> String {
    format!("{}/repos/{}", inner.base_url(), inner.full_name())
}

pub(super) fn repo_json(inner: &Inner, state: &State) -> Value {
    let p = state.permissions;
    let allows = |m: &str| state.merge_methods.iter().any(|x| x == m);
    json!({
        "id": 1,
        "name": inner.repo,
        "full_name": inner.full_name(),
        "owner": inner.user_json(&inner.owner),
        "private": true,
        "html_url": format!("{}/{}", inner.base_url(), inner.full_name()),
        "url": repo_api(inner),
        "clone_url": format!("{}/{}.git", inner.base_url(), inner.full_name()),
        "default_branch": "main",
        "permissions": {
            "admin": p.admin, "maintain": p.maintain, "push": p.push,
            "triage": p.triage, "pull": p.pull,
        },
        "allow_merge_commit": allows("merge"),
        "allow_squash_merge": allows("squash"),
        "allow_rebase_merge": allows("rebase"),
        "delete_branch_on_merge": false,
    })
}

fn branch_end(inner: &Inner, reference: &str, sha: &str) -> Value {
    json!({
        "label": format!("{}:{reference}", inner.owner),
        "ref": reference,
        "sha": sha,
        "user": inner.user_json(&inner.owner),
        "repo": {
            "id": 1,
            "name": inner.repo,
            "full_name": inner.full_name(),
            "default_branch": "main",
        },
    })
}

/// A pull request; `full` as a single GET answers it, else as the list does.
pub(super) fn pr_json(inner: &Inner, state: &State, number: u64, full: bool) -> Value {
    let Some(pr) = state.pr(number) else {
        return Value::Null;
    };
    let base_sha = state
        .branches
        .get(&pr.base_ref)
        .cloned()
        .unwrap_or_default();
    let merged_at = pr.merged.then(|| pr.closed_at.map(timestamp)).flatten();
    let mut value = json!({
        "url": format!("{}/pulls/{number}", repo_api(inner)),
        "id": pr.id,
        "node_id": format!("PR_fake{}", pr.id),
        "html_url": format!("{}/{}/pull/{number}", inner.base_url(), inner.full_name()),
        "number": number,
        "state": if pr.open { "open" } else { "closed" },
        "locked": false,
        "title": pr.title,
        "user": inner.user_json(&pr.author),
        "body": (!pr.body.is_empty()).then_some(&pr.body),
        "created_at": timestamp(pr.created_at),
        "updated_at": timestamp(pr.updated_at),
        "closed_at": pr.closed_at.map(timestamp),
        "merged_at": merged_at,
        "merge_commit_sha": pr.merge_commit,
        "draft": false,
        "head": branch_end(inner, &pr.head_ref, &pr.head_sha),
        "base": branch_end(inner, &pr.base_ref, &base_sha),
        "author_association": "MEMBER",
    });
    if full {
        value["merged"] = json!(pr.merged);
        value["merged_by"] = pr
            .merged_by
            .as_deref()
            .map_or(Value::Null, |l| inner.user_json(l));
        value["mergeable"] = Value::Null;
        value["mergeable_state"] = json!("unknown");
        value["comments"] = json!(state.comments.iter().filter(|c| c.pr == number).count());
        value["review_comments"] = json!(
            state
                .line_comments
                .iter()
                .filter(|c| c.pr == number)
                .count()
        );
    }
    value
}

pub(super) fn issue_json(inner: &Inner, pr: &PullRequest) -> Value {
    let closer = pr.closed_by.as_deref().or(pr.merged_by.as_deref());
    json!({
        "id": pr.id + 500_000,
        "number": pr.number,
        "title": pr.title,
        "user": inner.user_json(&pr.author),
        "state": if pr.open { "open" } else { "closed" },
        "body": (!pr.body.is_empty()).then_some(&pr.body),
        "closed_by": closer.map_or(Value::Null, |l| inner.user_json(l)),
        "created_at": timestamp(pr.created_at),
        "updated_at": timestamp(pr.updated_at),
        "closed_at": pr.closed_at.map(timestamp),
        "pull_request": {
            "url": format!("{}/pulls/{}", repo_api(inner), pr.number),
            "html_url": format!("{}/{}/pull/{}", inner.base_url(), inner.full_name(), pr.number),
            "merged_at": pr.merged.then(|| pr.closed_at.map(timestamp)).flatten(),
        },
    })
}

pub(super) fn reviews_json(inner: &Inner, state: &State, number: u64) -> Value {
    let html = format!("{}/{}/pull/{number}", inner.base_url(), inner.full_name());
    state
        .reviews
        .iter()
        .filter(|r| r.pr == number)
        .map(|r| {
            let verdict = match r.verdict {
                _ if r.dismissed => "DISMISSED",
                Verdict::Approved => "APPROVED",
                Verdict::ChangesRequested => "CHANGES_REQUESTED",
                Verdict::Commented => "COMMENTED",
            };
            json!({
                "id": r.id,
                "node_id": format!("PRR_fake{}", r.id),
                "user": inner.user_json(&r.login),
                "body": r.body,
                "state": verdict,
                "html_url": format!("{html}#pullrequestreview-{}", r.id),
                "pull_request_url": format!("{}/pulls/{number}", repo_api(inner)),
                "submitted_at": timestamp(r.at),
                "commit_id": r.commit_id,
                "author_association": "MEMBER",
            })
        })
        .collect()
}

pub(super) fn line_comments_json(inner: &Inner, state: &State, number: u64) -> Value {
    let head = state
        .pr(number)
        .map(|p| p.head_sha.clone())
        .unwrap_or_default();
    state
        .line_comments
        .iter()
        .filter(|c| c.pr == number)
        .map(|c| {
            let current = (c.commit_id == head).then_some(c.line);
            json!({
                "id": c.id,
                "pull_request_review_id": c.review_id,
                "user": inner.user_json(&c.login),
                "body": c.body,
                "path": c.path,
                "line": current,
                "original_line": c.line,
                "position": current,
                "original_position": c.line,
                "side": "RIGHT",
                "commit_id": head,
                "original_commit_id": c.commit_id,
                "diff_hunk": "",
                "created_at": timestamp(c.at),
                "updated_at": timestamp(c.at),
                "html_url": format!("{}/{}/pull/{number}#discussion_r{}", inner.base_url(), inner.full_name(), c.id),
                "subject_type": "line",
            })
        })
        .collect()
}

pub(super) fn issue_comments_json(inner: &Inner, state: &State, number: u64) -> Value {
    state
        .comments
        .iter()
        .filter(|c| c.pr == number)
        .map(|c| {
            json!({
                "id": c.id,
                "node_id": format!("IC_fake{}", c.id),
                "user": inner.user_json(&c.login),
                "body": c.body,
                "created_at": timestamp(c.at),
                "updated_at": timestamp(c.at),
                "html_url": format!("{}/{}/pull/{number}#issuecomment-{}", inner.base_url(), inner.full_name(), c.id),
                "issue_url": format!("{}/issues/{number}", repo_api(inner)),
                "author_association": "MEMBER",
            })
        })
        .collect()
}

pub(super) fn check_runs_json(inner: &Inner, state: &State, sha: &str) -> Value {
    let runs: Vec<Value> = state
        .checks
        .iter()
        .filter(|c| c.sha == sha)
        .map(|c| {
            let page = format!(
                "{}/{}/actions/runs/{}/job/{}",
                inner.base_url(),
                inner.full_name(),
                c.id / 10,
                c.id
            );
            let app = if c.log.is_some() {
                json!({ "slug": "github-actions", "name": "GitHub Actions" })
            } else {
                json!({ "slug": "fake-ci", "name": "Fake CI" })
            };
            json!({
                "id": c.id,
                "name": c.name,
                "node_id": format!("CR_fake{}", c.id),
                "head_sha": c.sha,
                "external_id": "",
                "url": format!("{}/check-runs/{}", repo_api(inner), c.id),
                "html_url": page,
                "details_url": page,
                "status": c.status,
                "conclusion": c.conclusion,
                "started_at": timestamp(c.started_at),
                "completed_at": c.completed_at.map(timestamp),
                "output": {
                    "title": c.title,
                    "summary": c.summary,
                    "text": c.text,
                    "annotations_count": 0,
                    "annotations_url": format!("{}/check-runs/{}/annotations", repo_api(inner), c.id),
                },
                "check_suite": { "id": c.id / 10 },
                "app": app,
                "pull_requests": [],
            })
        })
        .collect();
    json!({ "total_count": runs.len(), "check_runs": runs })
}

pub(super) fn status_json(inner: &Inner, s: &CommitStatus) -> Value {
    json!({
        "url": format!("{}/statuses/{}", repo_api(inner), s.sha),
        "avatar_url": null,
        "id": s.id,
        "node_id": format!("SC_fake{}", s.id),
        "state": s.state,
        "description": s.description,
        "target_url": s.target_url,
        "context": s.context,
        "created_at": timestamp(s.at),
        "updated_at": timestamp(s.at),
    })
}

pub(super) fn combined_status_json(inner: &Inner, state: &State, sha: &str) -> Value {
    let latest = state.latest_statuses(sha);
    let any = |wanted: &[&str]| latest.iter().any(|s| wanted.contains(&s.state.as_str()));
    let combined = if any(&["error", "failure"]) {
        "failure"
    } else if latest.is_empty() || any(&["pending"]) {
        "pending"
    } else {
        "success"
    };
    json!({
        "state": combined,
        "statuses": latest.iter().map(|s| status_json(inner, s)).collect::<Vec<_>>(),
        "sha": sha,
        "total_count": latest.len(),
        "repository": { "id": 1, "full_name": inner.full_name() },
        "commit_url": format!("{}/commits/{sha}", repo_api(inner)),
        "url": format!("{}/commits/{sha}/status", repo_api(inner)),
    })
}
