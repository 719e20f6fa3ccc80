//! Forgejo's (and Gitea's: one API) REST API under `/api/v1`, the subset delivery uses,
//! answered as Gitea's `routers/api/v1/repo` and `modules/structs` answer:
//!
//! - `GET /user`; `GET /repos/{o}/{r}` (`permissions {admin, push, pull}`,
//!   `allow_merge_commits`, `allow_rebase`, `allow_squash_merge`, …); `GET
//!   …/branches/{b}` (`commit.id`).
//! - Pulls: list (`state`), `GET …/pulls/{base}/{head}` (the open-or-latest PR of a head,
//!   as Gitea ≥ 1.18 finds it), create (409 "pull request already exists for these
//!   targets [...]", 404 for a missing branch), get, edit (answered **201**, as Gitea does),
//!   with `state` refused 412 on a merged PR.
//! - `POST …/pulls/{n}/merge` (`Do`, `head_commit_id`, `MergeTitleField`,
//!   `MergeMessageField`): 200 with an empty body after a real merge; 409 "head out of
//!   date" when `head_commit_id` is not the head; 409 with Gitea's `{Style, StdOut, StdErr,
//!   Err}` on a conflict; 405 for a merged PR, a style the repository does not allow, or a
//!   refusal a test set; 404 for a closed one; 500 for a fast-forward-only merge of a head
//!   that does not contain the base (Gitea's API maps that error to nothing else).
//! - `GET …/commits/{ref}/status`: the combined status, the worst state of the latest per
//!   context; with no status at all Gitea answers a zero `CombinedStatus` (`state: ""`,
//!   `statuses: null`). Each status names its state `status`. `…/commits/{ref}/statuses`.
//! - `GET …/pulls/{n}/reviews` (`APPROVED`, `REQUEST_CHANGES`, `COMMENT`; `dismissed`,
//!   `stale`), `…/pulls/{n}/reviews/{id}/comments` (the new-file line is `position`, an
//!   old-file one `original_position`), `…/issues/{n}/comments`.
//!
//! - `GET …/issues/{n}/timeline`: the PR's `close` (and `reopen`) events with their `user`
//!   (Gitea's PR has no `closed_by`).
//!
//! Left out: `rebase-merge` (answered as a merge commit), manually-merged, auto-merge,
//! pagination, and rate limits (Gitea has none; a test's forced limit answers as a proxy
//! would). Gitea puts no `ETag` on API JSON: [`super::Etags::Off`] is the default here.

mod json;

use serde_json::{Value, json};

use super::bare::{MergeError, Style};
use super::records::PullRequest;
use super::server::{ApiCall, Reply};
use super::state::{Inner, State, now};
use json::{
    combined_status_json, issue_comments_json, pr_json, repo_json, review_comments_json,
    reviews_json, status_json,
};

pub(super) fn handle(inner: &Inner, state: &mut State, call: &ApiCall) -> Option<Reply> {
    let segments = call.segments();
    match (call.method, segments.as_slice()) {
        ("GET", ["user"]) => Some(Reply::json(200, inner.user_json(&inner.login))),
        (_, ["repos", owner, repo, rest @ ..]) => {
            if !owner.eq_ignore_ascii_case(&inner.owner) || !repo.eq_ignore_ascii_case(&inner.repo)
            {
                return Some(not_found(inner));
            }
            repo_route(inner, state, call, rest)
        }
        _ => None,
    }
}

fn not_found(inner: &Inner) -> Reply {
    let mut reply = inner.error(404, "The target couldn't be found.");
    if let super::server::Body::Json(body) = &mut reply.body {
        body["errors"] = json!([]);
    }
    reply
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
                        "commit": { "id": sha, "url": format!("{}/{}/commit/{sha}", inner.base_url(), inner.full_name()) },
                        "protected": false,
                        "user_can_push": state.permissions.push,
                        "user_can_merge": state.permissions.push,
                    }),
                ),
                None => not_found(inner),
            }
        }
        ("GET", ["pulls"]) => list_pulls(inner, state, call),
        ("POST", ["pulls"]) => create_pull(inner, state, call),
        (method, ["pulls", n, tail @ ..]) if number(n).is_some() && is_pull_route(tail) => {
            let n = number(n)?;
            if state.pr(n).is_none() {
                return Some(not_found(inner));
            }
            match (method, tail) {
                ("GET", []) => Reply::json(200, pr_json(inner, state, n)),
                ("PATCH", []) => edit_pull(inner, state, call, n),
                ("POST", ["merge"]) => merge_pull(inner, state, call, n),
                ("GET", ["merge"]) if state.pr(n).is_some_and(|p| p.merged) => Reply::empty(204),
                ("GET", ["merge"]) => not_found(inner),
                ("GET", ["reviews"]) => Reply::json(200, reviews_json(inner, state, n)),
                ("GET", ["reviews", id, "comments"]) => {
                    let id = number(id)?;
                    if !state.reviews.iter().any(|r| r.id == id && r.pr == n) {
                        return Some(not_found(inner));
                    }
                    Reply::json(200, review_comments_json(inner, state, n, id))
                }
                _ => return None,
            }
        }
        ("GET", ["pulls", base, head @ ..]) if !head.is_empty() => {
            let head = head.join("/");
            let found = state
                .prs
                .iter()
                .filter(|p| !p.deleted && p.base_ref == *base && p.head_ref == head)
                .max_by_key(|p| (p.open, p.number));
            match found {
                Some(pr) => Reply::json(200, pr_json(inner, state, pr.number)),
                None => not_found(inner),
            }
        }
        ("GET", ["issues", n, "timeline"]) => {
            let n = number(n)?;
            let Some(pr) = state.pr(n) else {
                return Some(not_found(inner));
            };
            Reply::json(200, json::timeline_json(inner, pr))
        }
        ("GET", ["issues", n, "comments"]) => {
            let n = number(n)?;
            if state.pr(n).is_none() {
                return Some(not_found(inner));
            }
            Reply::json(200, issue_comments_json(inner, state, n))
        }
        ("GET", ["commits", reference @ .., what]) if !reference.is_empty() => {
            let reference = reference.join("/");
            let Some(sha) = state.resolve(&inner.bare, &reference) else {
                return Some(not_found(inner));
            };
            match *what {
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
        _ => return None,
    })
}

fn is_pull_route(tail: &[&str]) -> bool {
    matches!(
        tail,
        [] | ["merge"] | ["reviews"] | ["reviews", _, "comments"]
    )
}

fn list_pulls(inner: &Inner, state: &State, call: &ApiCall) -> Reply {
    let wanted = call.query("state").unwrap_or("open");
    let mut list: Vec<&PullRequest> = state
        .prs
        .iter()
        .filter(|p| !p.deleted)
        .filter(|p| match wanted {
            "all" => true,
            "closed" => !p.open,
            _ => p.open,
        })
        .collect();
    list.sort_by_key(|p| std::cmp::Reverse(p.number));
    let items = list
        .iter()
        .map(|p| pr_json(inner, state, p.number))
        .collect();
    Reply::json(200, Value::Array(items))
}

fn create_pull(inner: &Inner, state: &mut State, call: &ApiCall) -> Reply {
    let text = |k: &str| call.body[k].as_str().unwrap_or_default().to_string();
    let (title, head, base, body) = (text("title"), text("head"), text("base"), text("body"));
    if title.is_empty() || head.is_empty() || base.is_empty() {
        return inner.error(422, "[Title]: Required");
    }
    if head == base {
        return inner.error(
            422,
            "Invalid PullRequest: There are no changes between the head and the base",
        );
    }
    let head = match head.split_once(':') {
        Some((owner, branch)) if owner.eq_ignore_ascii_case(&inner.owner) => branch.to_string(),
        Some(_) => return not_found(inner),
        None => head,
    };
    if !state.branches.contains_key(&head) || !state.branches.contains_key(&base) {
        return not_found(inner);
    }
    if let Some(existing) = inner.open_pr_for(state, &head, Some(&base)) {
        let id = state.pr(existing).map_or(0, |p| p.id);
        let message = format!(
            "pull request already exists for these targets [id: {id}, issue_id: {existing}, head_repo_id: 1, base_repo_id: 1, head_branch: {head}, base_branch: {base}]"
        );
        return inner.error(409, &message);
    }
    let pr = inner.open_pr(state, &head, &base, &title, &body, &inner.login);
    Reply::json(201, pr_json(inner, state, pr.number))
}

fn edit_pull(inner: &Inner, state: &mut State, call: &ApiCall, number: u64) -> Reply {
    if let Some(wanted) = call.body["state"].as_str() {
        if state.pr(number).is_some_and(|p| p.merged) {
            return inner.error(
                412,
                "cannot change state of this pull request, it was already merged",
            );
        }
        if !inner.set_open(state, number, wanted == "open", &inner.login) {
            return inner.error(422, "cannot reopen: the head branch is gone");
        }
    }
    let at = now();
    if let Some(pr) = state.pr_mut(number) {
        if let Some(title) = call.body["title"].as_str().filter(|t| !t.is_empty()) {
            pr.title = title.to_string();
            pr.updated_at = at;
        }
        if let Some(body) = call.body["body"].as_str() {
            pr.body = body.to_string();
            pr.updated_at = at;
        }
    }
    // Gitea answers an edit with 201 Created.
    Reply::json(201, pr_json(inner, state, number))
}

fn merge_pull(inner: &Inner, state: &mut State, call: &ApiCall, number: u64) -> Reply {
    let method = call.body["Do"]
        .as_str()
        .filter(|d| !d.is_empty())
        .unwrap_or("merge");
    let expected = call.body["head_commit_id"]
        .as_str()
        .filter(|s| !s.is_empty());
    let reply = merge_answer(inner, state, call, number, method, expected);
    let commit = state
        .pr(number)
        .filter(|_| reply.status == 200)
        .and_then(|p| p.merge_commit.clone());
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
        return not_found(inner);
    };
    if pr.merged {
        return inner.error(405, "");
    }
    if !pr.open {
        return not_found(inner);
    }
    if let Some((status, message)) = state.refusal.clone() {
        return inner.error(status, &message);
    }
    let style = match method {
        "merge" | "rebase-merge" => Some(Style::Merge),
        "rebase" => Some(Style::RebaseOrFastForward),
        "squash" => Some(Style::Squash),
        "fast-forward-only" => Some(Style::FastForwardOnly),
        _ => None,
    };
    let allowed = state.merge_methods.iter().any(|m| m == method);
    let Some(style) = style.filter(|_| allowed) else {
        return inner.error(
            405,
            &format!("{method} is not allowed an allowed merge style for this repository"),
        );
    };
    if expected.is_some_and(|sha| !sha.eq_ignore_ascii_case(&pr.head_sha)) {
        return inner.error(409, "head out of date");
    }
    let title = call.body["MergeTitleField"]
        .as_str()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map_or_else(
            || match style {
                Style::Squash => format!("{} (#{number})", pr.title),
                _ => format!(
                    "Merge pull request '{}' (#{number}) from {} into {}",
                    pr.title, pr.head_ref, pr.base_ref
                ),
            },
            str::to_string,
        );
    let detail = call.body["MergeMessageField"].as_str().unwrap_or("").trim();
    let message = if detail.is_empty() {
        title
    } else {
        format!("{title}\n\n{detail}")
    };
    match inner.merge_pr(state, number, style, &message, &inner.login) {
        Ok(_) => Reply::empty(200),
        Err(MergeError::Conflict) => Reply::json(
            409,
            json!({ "Style": method, "StdOut": "", "StdErr": "CONFLICT (content): Merge conflict", "Err": {} }),
        ),
        // Gitea's API has no case for it: an internal error.
        Err(MergeError::NotFastForward) => {
            inner.error(500, "fast-forward-only: the head does not contain the base")
        }
        Err(MergeError::BaseMoved) => inner.error(409, "merge push out of date"),
        Err(MergeError::Git(e)) => inner.error(500, &e),
    }
}
