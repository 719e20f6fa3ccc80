//! GitHub's REST API, the subset delivery uses, answered as api.github.com answers (shapes
//! from docs.github.com's REST reference and its OpenAPI description):
//!
//! - `GET /user`; `GET /repos/{o}/{r}` (`permissions`, `allow_*_merge`); `GET
//!   /repos/{o}/{r}/branches/{branch}` (404 "Branch not found").
//! - Pulls: list (`state`, `head=owner:branch`, `base`; a `head` without its `owner:` is
//!   ignored, as GitHub ignores it), create (422 "Validation Failed" with GitHub's
//!   `errors`: an open PR for the head, no commits between, a missing branch), get, edit
//!   (`title`, `body`, `state`). The list gives GitHub's "pull-request-simple" (no
//!   `merged`, `merged_by`, `mergeable`); a single PR gives them.
//! - `PUT …/pulls/{n}/merge` (`merge_method`, `sha`, `commit_title`, `commit_message`):
//!   200 `{sha, merged, message}` after a real merge; 409 "Head branch was modified…" when
//!   `sha` is not the head; 405 when not mergeable (closed, conflict, a method the
//!   repository does not allow, or a refusal a test set); `GET …/merge` 204 or 404.
//! - `GET …/issues/{n}` (`closed_by`: who closed or merged it; the PR object has no such
//!   field), `…/issues/{n}/comments`, `…/pulls/{n}/reviews` (`DISMISSED` once dismissed),
//!   `…/pulls/{n}/comments` (`line`/`position` null once the head moved past the
//!   commented commit, `original_line` kept).
//! - `GET …/commits/{ref}/check-runs` (latest run per name), `…/commits/{ref}/status`
//!   (combined: `pending` with no statuses), `…/commits/{ref}/statuses`; `GET
//!   …/actions/jobs/{id}/logs` 302 to the log (an Actions check run's id is its job's id),
//!   404 for a check without a job.
//!
//! Left out: pagination (`per_page`, `Link`: everything is on one page), drafts, labels,
//! requested reviewers, the test merge commit of an open PR (`merge_commit_sha` is null
//! until merged) and `mergeable` (always null: "not computed yet"), check suites,
//! annotations, GraphQL, webhooks, forks.

mod json;

use serde_json::{Value, json};

use super::bare::{MergeError, Style};
use super::records::PullRequest;
use super::server::{ApiCall, LOG_PREFIX, Reply};
use super::state::{Inner, State};
use json::{
    check_runs_json, combined_status_json, issue_comments_json, issue_json, line_comments_json,
    pr_json, repo_api, repo_json, reviews_json, status_json,
};

pub(super) fn handle(inner: &Inner, state: &mut State, call: &ApiCall) -> Option<Reply> {
    let segments = call.segments();
    match (call.method, segments.as_slice()) {
        ("GET", ["user"]) => Some(Reply::json(200, inner.user_json(&inner.login))),
        (_, ["repos", owner, repo, rest @ ..]) => {
            if !owner.eq_ignore_ascii_case(&inner.owner) || !repo.eq_ignore_ascii_case(&inner.repo)
            {
                return Some(inner.error(404, "Not Found"));
            }
            repo_route(inner, state, call, rest)
        }
        _ => None,
    }
}

fn repo_route(inner: &Inner, state: &mut State, call: &ApiCall, rest: &[&str]) -> Option<Reply> {
    let number = |s: &str| s.parse::<u64>().ok();
    Some(match (call.method, rest) {
        ("GET", []) => Reply::json(200, repo_json(inner, state)),
        ("GET", ["branches", branch @ ..]) if !branch.is_empty() => {
            let name = branch.join("/");
            match state.branches.get(&name) {
                Some(sha) => Reply::json(
                    200,
                    json!({
                        "name": name,
                        "commit": { "sha": sha, "url": format!("{}/commits/{sha}", repo_api(inner)) },
                        "protected": false,
                    }),
                ),
                None => inner.error(404, "Branch not found"),
            }
        }
        ("GET", ["pulls"]) => list_pulls(inner, state, call),
        ("POST", ["pulls"]) => create_pull(inner, state, call),
        (method, ["pulls", n, tail @ ..]) => {
            let n = number(n)?;
            if state.pr(n).is_none() {
                return Some(inner.error(404, "Not Found"));
            }
            match (method, tail) {
                ("GET", []) => Reply::json(200, pr_json(inner, state, n, true)),
                ("PATCH", []) => edit_pull(inner, state, call, n),
                ("PUT", ["merge"]) => merge_pull(inner, state, call, n),
                ("GET", ["merge"]) if state.pr(n).is_some_and(|p| p.merged) => Reply::empty(204),
                ("GET", ["merge"]) => inner.error(404, "Not Found"),
                ("GET", ["reviews"]) => Reply::json(200, reviews_json(inner, state, n)),
                ("GET", ["comments"]) => Reply::json(200, line_comments_json(inner, state, n)),
                _ => return None,
            }
        }
        ("GET", ["issues", n]) => {
            let n = number(n)?;
            match state.pr(n) {
                Some(pr) => Reply::json(200, issue_json(inner, pr)),
                None => inner.error(404, "Not Found"),
            }
        }
        ("GET", ["issues", n, "comments"]) => {
            let n = number(n)?;
            if state.pr(n).is_none() {
                return Some(inner.error(404, "Not Found"));
            }
            Reply::json(200, issue_comments_json(inner, state, n))
        }
        ("GET", ["commits", reference @ .., what]) if !reference.is_empty() => {
            let reference = reference.join("/");
            let Some(sha) = state.resolve(&inner.bare, &reference) else {
                return Some(inner.error(422, &format!("No commit found for SHA: {reference}")));
            };
            match *what {
                "check-runs" => Reply::json(200, check_runs_json(inner, state, &sha)),
                "status" => Reply::json(200, combined_status_json(inner, state, &sha)),
                "statuses" => {
                    let mut all: Vec<Value> = state
                        .statuses
                        .iter()
                        .filter(|s| s.sha == sha)
                        .map(|s| status_json(inner, s))
                        .collect();
                    all.reverse();
                    Reply::json(200, Value::Array(all))
                }
                _ => return None,
            }
        }
        ("GET", ["actions", "jobs", id, "logs"]) => {
            let id = number(id)?;
            match state.checks.iter().find(|c| c.id == id) {
                Some(check) if check.log.is_some() => Reply::empty(302)
                    .header("Location", format!("{}{LOG_PREFIX}{id}", inner.base_url())),
                _ => inner.error(404, "Not Found"),
            }
        }
        _ => return None,
    })
}

fn list_pulls(inner: &Inner, state: &State, call: &ApiCall) -> Reply {
    let wanted = call.query("state").unwrap_or("open");
    // `head` filters only in GitHub's `owner:branch` form.
    let head = call.query("head").and_then(|h| h.split_once(':'));
    let base = call.query("base");
    let mut list: Vec<&PullRequest> = state
        .prs
        .iter()
        .filter(|p| !p.deleted)
        .filter(|p| match wanted {
            "all" => true,
            "closed" => !p.open,
            _ => p.open,
        })
        .filter(|p| {
            head.is_none_or(|(owner, branch)| {
                owner.eq_ignore_ascii_case(&inner.owner) && p.head_ref == branch
            })
        })
        .filter(|p| base.is_none_or(|b| p.base_ref == b))
        .collect();
    list.sort_by_key(|p| std::cmp::Reverse(p.number));
    let items = list
        .iter()
        .map(|p| pr_json(inner, state, p.number, false))
        .collect();
    Reply::json(200, Value::Array(items))
}

fn validation_failed(inner: &Inner, errors: Value) -> Reply {
    let mut reply = inner.error(422, "Validation Failed");
    if let super::server::Body::Json(body) = &mut reply.body {
        body["errors"] = errors;
    }
    reply
}

fn create_pull(inner: &Inner, state: &mut State, call: &ApiCall) -> Reply {
    let text = |k: &str| call.body[k].as_str().unwrap_or_default().to_string();
    let (title, head, base, body) = (text("title"), text("head"), text("base"), text("body"));
    let head = match head.split_once(':') {
        Some((owner, branch)) if owner.eq_ignore_ascii_case(&inner.owner) => branch.to_string(),
        Some(_) => String::new(),
        None => head,
    };
    if title.is_empty() {
        return validation_failed(
            inner,
            json!([{ "resource": "PullRequest", "code": "missing_field", "field": "title" }]),
        );
    }
    for (field, branch) in [("head", &head), ("base", &base)] {
        if !state.branches.contains_key(branch.as_str()) {
            return validation_failed(
                inner,
                json!([{ "resource": "PullRequest", "field": field, "code": "invalid" }]),
            );
        }
    }
    if inner.open_pr_for(state, &head, Some(&base)).is_some() {
        let message = format!("A pull request already exists for {}:{head}.", inner.owner);
        return validation_failed(
            inner,
            json!([{ "resource": "PullRequest", "code": "custom", "message": message }]),
        );
    }
    let (head_sha, base_sha) = (&state.branches[&head], &state.branches[&base]);
    if inner.bare.is_ancestor(head_sha, base_sha) {
        let message = format!("No commits between {base} and {head}");
        return validation_failed(
            inner,
            json!([{ "resource": "PullRequest", "code": "custom", "message": message }]),
        );
    }
    let pr = inner.open_pr(state, &head, &base, &title, &body, &inner.login);
    Reply::json(201, pr_json(inner, state, pr.number, true))
}

fn edit_pull(inner: &Inner, state: &mut State, call: &ApiCall, number: u64) -> Reply {
    if let Some(open) = call.body["state"].as_str().map(|s| s == "open")
        && !inner.set_open(state, number, open, &inner.login)
    {
        return validation_failed(
            inner,
            json!([{ "resource": "PullRequest", "code": "custom", "field": "state",
                     "message": "state cannot be changed." }]),
        );
    }
    let at = super::state::now();
    if let Some(pr) = state.pr_mut(number) {
        if let Some(title) = call.body["title"].as_str() {
            pr.title = title.to_string();
            pr.updated_at = at;
        }
        if let Some(body) = call.body["body"].as_str() {
            pr.body = body.to_string();
            pr.updated_at = at;
        }
    }
    Reply::json(200, pr_json(inner, state, number, true))
}

fn merge_pull(inner: &Inner, state: &mut State, call: &ApiCall, number: u64) -> Reply {
    let method = call.body["merge_method"].as_str().unwrap_or("merge");
    let expected = call.body["sha"].as_str();
    let reply = merge_answer(inner, state, call, number, method, expected);
    let commit = match &reply.body {
        super::server::Body::Json(v) if reply.status == 200 => v["sha"].as_str().map(String::from),
        _ => None,
    };
    inner.record_merge(
        state,
        number,
        method,
        expected,
        reply.status,
        commit.as_deref(),
    );
    reply
}

fn merge_answer(
    inner: &Inner,
    state: &mut State,
    call: &ApiCall,
    number: u64,
    method: &str,
    expected: Option<&str>,
) -> Reply {
    let Some(pr) = state.pr(number).cloned() else {
        return inner.error(404, "Not Found");
    };
    let style = match method {
        "merge" => Style::Merge,
        "squash" => Style::Squash,
        "rebase" => Style::Rebase,
        _ => {
            return validation_failed(
                inner,
                json!([{ "resource": "PullRequest", "field": "merge_method", "code": "invalid" }]),
            );
        }
    };
    if !pr.open {
        return inner.error(405, "Pull Request is not mergeable");
    }
    if expected.is_some_and(|sha| !sha.eq_ignore_ascii_case(&pr.head_sha)) {
        return inner.error(
            409,
            "Head branch was modified. Review and try the merge again.",
        );
    }
    if !state.merge_methods.iter().any(|m| m == method) {
        let what = match style {
            Style::Squash => "Squash merges",
            Style::Rebase => "Rebase merges",
            _ => "Merge commits",
        };
        return inner.error(405, &format!("{what} are not allowed on this repository."));
    }
    if let Some((status, message)) = state.refusal.clone() {
        return inner.error(status, &message);
    }
    let title = call.body["commit_title"].as_str();
    let detail = call.body["commit_message"].as_str();
    let message = match style {
        // GitHub's default lists the commits' messages: what their authors wrote lands
        // on the base unless the call says otherwise.
        Style::Squash => format!(
            "{}\n\n{}",
            title.map_or_else(|| format!("{} (#{number})", pr.title), str::to_string),
            detail.map_or_else(
                || {
                    let base = state
                        .branches
                        .get(&pr.base_ref)
                        .cloned()
                        .unwrap_or_default();
                    inner.bare.squashed_messages(&base, &pr.head_sha)
                },
                str::to_string
            )
        ),
        _ => format!(
            "{}\n\n{}",
            title.map_or_else(
                || format!(
                    "Merge pull request #{number} from {}/{}",
                    inner.owner, pr.head_ref
                ),
                str::to_string
            ),
            detail.unwrap_or(&pr.title)
        ),
    };
    match inner.merge_pr(state, number, style, message.trim_end(), &inner.login) {
        Ok(sha) => Reply::json(
            200,
            json!({ "sha": sha, "merged": true, "message": "Pull Request successfully merged" }),
        ),
        Err(MergeError::Conflict | MergeError::NotFastForward) => {
            inner.error(405, "Pull Request is not mergeable")
        }
        Err(MergeError::BaseMoved) => inner.error(
            405,
            "Base branch was modified. Review and try the merge again.",
        ),
        Err(MergeError::Git(e)) => inner.error(500, &e),
    }
}
