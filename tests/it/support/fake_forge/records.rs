//! What a test tells the fake forge (its kinds, review states, limits, outages) and what
//! the fake hands back for assertions: every request with the status it got, every push,
//! every merge asked for, the pull requests as the forge holds them.

use std::time::Instant;

use serde_json::Value;

/// Which forge's API the fake speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// GitHub's REST API at the root (`api_url = http://127.0.0.1:PORT`), as GitHub
    /// Enterprise would serve it at `/api/v3`.
    GitHub,
    /// Forgejo's (and Gitea's) API under `/api/v1`.
    Forgejo,
}

/// A review's verdict, named per forge when served (GitHub `CHANGES_REQUESTED`, Forgejo
/// `REQUEST_CHANGES`; GitHub `COMMENTED`, Forgejo `COMMENT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Approved,
    ChangesRequested,
    Commented,
}

/// How a forced rate limit answers ([`super::Forge::rate_limit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// GitHub's primary limit: 403 "API rate limit exceeded", `X-RateLimit-Remaining: 0`
    /// and `X-RateLimit-Reset` this many seconds ahead.
    Primary { reset_in_secs: u64 },
    /// GitHub's secondary limit: 403 with `Retry-After`.
    Secondary { retry_after_secs: u64 },
    /// 429 Too Many Requests with `Retry-After` (GitHub's secondary limit may answer so; a
    /// proxy before a Forgejo does).
    TooMany { retry_after_secs: u64 },
}

/// How the forge is unreachable while down ([`super::Forge::down`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outage {
    /// Nothing listens: connections are refused (open ones are closed unanswered).
    Refused,
    /// A proxy in front answers every request 502 Bad Gateway.
    BadGateway,
}

/// Which `ETag` the fake puts on its GET answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Etags {
    /// `ETag: "…"`.
    Strong,
    /// `ETag: W/"…"`, as api.github.com sends on its JSON.
    Weak,
    /// None at all, as Forgejo's and Gitea's API JSON comes.
    Off,
}

/// What the token may do in the repository (GitHub's `permissions`; Forgejo shows
/// `admin`, `push`, `pull`). Without `push`, git pushes are refused with 403.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permissions {
    pub admin: bool,
    pub maintain: bool,
    pub push: bool,
    pub triage: bool,
    pub pull: bool,
}

impl Default for Permissions {
    /// A bot with write access: what the delivery flow needs, no more.
    fn default() -> Self {
        Permissions {
            admin: false,
            maintain: false,
            push: true,
            triage: true,
            pull: true,
        }
    }
}

/// What part of the fake a request reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The REST API (a route the fake serves).
    Api,
    /// git's smart HTTP under `/{owner}/{repo}.git/`.
    Git,
    /// A job's log where the API's redirect pointed.
    Log,
    /// Nothing the fake serves (answered 404); the client asked for something the real
    /// forge may have but this fake does not model.
    Unknown,
}

/// One request as the fake received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// Arrival order, from 0.
    pub index: usize,
    pub at: Instant,
    pub method: String,
    /// The path as requested, without the query string.
    pub path: String,
    pub query: Option<String>,
    /// Every header as sent (names in lower case), `authorization` included.
    pub headers: Vec<(String, String)>,
    /// The JSON body, `Value::Null` when none or not JSON (git's bodies are not kept).
    pub body: Value,
    pub status: u16,
    pub route: Route,
    /// It counted against the rate limit: an API request answered with its resource, not
    /// a 304, not refused for its token or a limit.
    pub counted: bool,
    /// A conditional GET answered 304 Not Modified.
    pub not_modified: bool,
    /// Answered by a control (a limit, an outage) rather than by the forge's logic.
    pub injected: bool,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `method` matches and the path matches `pattern`, where a `*` segment matches any
    /// one segment: `req.is("PUT", "/repos/*/*/pulls/*/merge")`.
    pub fn is(&self, method: &str, pattern: &str) -> bool {
        if !self.method.eq_ignore_ascii_case(method) {
            return false;
        }
        let path: Vec<&str> = self.path.trim_matches('/').split('/').collect();
        let pattern: Vec<&str> = pattern.trim_matches('/').split('/').collect();
        path.len() == pattern.len() && path.iter().zip(&pattern).all(|(s, p)| *p == "*" || s == p)
    }
}

/// A branch update, by the client over git's smart HTTP or by someone else through a
/// control. Deleting a branch has `new` all zeros.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Push {
    pub at_index: usize,
    /// `refs/heads/NAME`.
    pub refname: String,
    /// What the pusher said the ref pointed at (all zeros: created).
    pub old: String,
    pub new: String,
    /// The login that pushed (the token's for the client's pushes).
    pub by: String,
    /// The ref points at `new` after the push (git may refuse a stale or non-fast-forward
    /// update).
    pub applied: bool,
}

/// A merge the client asked for, and what came of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeRecord {
    pub pr: u64,
    /// As sent: GitHub's `merge_method`, Forgejo's `Do`.
    pub method: String,
    /// The head the client said it expects (GitHub's `sha`, Forgejo's `head_commit_id`).
    pub expected_head: Option<String>,
    /// The PR's head when the request came.
    pub head: String,
    pub status: u16,
    /// The commit the base branch was moved to.
    pub commit: Option<String>,
}

/// A pull request as the forge holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    pub id: u64,
    pub title: String,
    pub body: String,
    pub author: String,
    pub head_ref: String,
    /// The head branch's commit while open (it follows pushes); the last one once closed.
    pub head_sha: String,
    pub base_ref: String,
    pub open: bool,
    pub merged: bool,
    pub merged_by: Option<String>,
    pub closed_by: Option<String>,
    pub merge_commit: Option<String>,
    pub created_at: u64,
    pub updated_at: u64,
    pub closed_at: Option<u64>,
    /// Gone from the forge ([`super::Forge::delete_pr`]): every route answers 404.
    pub deleted: bool,
}
