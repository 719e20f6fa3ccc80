//! What the fake forge holds between requests: the pull requests and what was said on
//! them, the checks and statuses on commits, the branches as last read from the bare
//! repository, the records, and the failures a test asked for. One mutex guards it; a watch
//! channel says it changed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use super::bare::Bare;
use super::records::{
    Etags, Kind, Limit, MergeRecord, Outage, Permissions, PullRequest, Push, RecordedRequest,
    Verdict,
};

pub(super) struct Inner {
    pub(super) kind: Kind,
    pub(super) addr: std::net::SocketAddr,
    pub(super) owner: String,
    pub(super) repo: String,
    pub(super) token: String,
    /// The token's user.
    pub(super) login: String,
    pub(super) bare: Bare,
    pub(super) state: Mutex<State>,
    pub(super) changed: watch::Sender<u64>,
    /// `Some` while the forge is down.
    pub(super) outage: watch::Sender<Option<Outage>>,
    /// Whether the listener is bound, as the server last set it.
    pub(super) listening: watch::Sender<bool>,
    /// Connections being served now.
    pub(super) connections: std::sync::atomic::AtomicUsize,
}

impl Inner {
    pub(super) fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub(super) fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }
}

/// A check run on a commit (GitHub).
#[derive(Clone)]
pub(super) struct CheckRun {
    pub(super) id: u64,
    pub(super) sha: String,
    pub(super) name: String,
    pub(super) status: String,
    pub(super) conclusion: Option<String>,
    /// Its `output`.
    pub(super) title: Option<String>,
    pub(super) summary: Option<String>,
    pub(super) text: Option<String>,
    pub(super) started_at: u64,
    pub(super) completed_at: Option<u64>,
    /// The job's log, served where `GET /actions/jobs/{id}/logs` redirects to.
    pub(super) log: Option<Arc<Vec<u8>>>,
}

/// A commit status (both forges).
#[derive(Clone)]
pub(super) struct CommitStatus {
    pub(super) id: u64,
    pub(super) sha: String,
    pub(super) context: String,
    pub(super) state: String,
    pub(super) target_url: Option<String>,
    pub(super) description: Option<String>,
    pub(super) at: u64,
}

pub(super) struct Review {
    pub(super) id: u64,
    pub(super) pr: u64,
    pub(super) login: String,
    pub(super) verdict: Verdict,
    pub(super) dismissed: bool,
    pub(super) body: String,
    pub(super) commit_id: String,
    pub(super) at: u64,
}

/// A comment on a line of the diff, part of a review.
pub(super) struct LineComment {
    pub(super) id: u64,
    pub(super) review_id: u64,
    pub(super) pr: u64,
    pub(super) login: String,
    pub(super) path: String,
    pub(super) line: u64,
    pub(super) body: String,
    pub(super) commit_id: String,
    pub(super) at: u64,
}

/// A comment on the pull request's conversation.
pub(super) struct IssueComment {
    pub(super) id: u64,
    pub(super) pr: u64,
    pub(super) login: String,
    pub(super) body: String,
    pub(super) at: u64,
}

pub(super) struct State {
    pub(super) next_id: u64,
    pub(super) next_number: u64,
    pub(super) requests: Vec<RecordedRequest>,
    pub(super) pushes: Vec<Push>,
    pub(super) merges: Vec<MergeRecord>,
    /// Branch -> commit, as the bare repository last had them.
    pub(super) branches: BTreeMap<String, String>,
    pub(super) prs: Vec<PullRequest>,
    pub(super) checks: Vec<CheckRun>,
    pub(super) statuses: Vec<CommitStatus>,
    pub(super) reviews: Vec<Review>,
    pub(super) line_comments: Vec<LineComment>,
    pub(super) comments: Vec<IssueComment>,
    /// Every merge is answered with this (status, message) while set.
    pub(super) refusal: Option<(u16, String)>,
    /// A merge asked through the API is made, and its answer never sent, while set: the
    /// connection is closed unanswered once it is cleared.
    pub(super) lose_merge_answers: bool,
    /// The next `n` API requests are refused this way.
    pub(super) forced_limit: Option<(u32, Limit)>,
    /// GitHub's primary limit: requests an hour, what is left, when it resets (unix s).
    pub(super) limit: u32,
    pub(super) remaining: u32,
    pub(super) reset_at: u64,
    pub(super) etags: Etags,
    pub(super) permissions: Permissions,
    /// The merge methods the repository allows, as the forge names them.
    pub(super) merge_methods: Vec<String>,
}

impl State {
    pub(super) fn new(kind: Kind, branches: BTreeMap<String, String>) -> State {
        let methods: &[&str] = match kind {
            Kind::GitHub => &["merge", "squash", "rebase"],
            Kind::Forgejo => &[
                "merge",
                "rebase",
                "rebase-merge",
                "squash",
                "fast-forward-only",
            ],
        };
        State {
            next_id: 1_000,
            next_number: 1,
            requests: Vec::new(),
            pushes: Vec::new(),
            merges: Vec::new(),
            branches,
            prs: Vec::new(),
            checks: Vec::new(),
            statuses: Vec::new(),
            reviews: Vec::new(),
            line_comments: Vec::new(),
            comments: Vec::new(),
            refusal: None,
            lose_merge_answers: false,
            forced_limit: None,
            limit: 5_000,
            remaining: 5_000,
            reset_at: now() + 3_600,
            etags: match kind {
                Kind::GitHub => Etags::Weak,
                Kind::Forgejo => Etags::Off,
            },
            permissions: Permissions::default(),
            merge_methods: methods.iter().map(|m| m.to_string()).collect(),
        }
    }

    pub(super) fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A pull request that was not deleted.
    pub(super) fn pr(&self, number: u64) -> Option<&PullRequest> {
        self.prs.iter().find(|p| p.number == number && !p.deleted)
    }

    pub(super) fn pr_mut(&mut self, number: u64) -> Option<&mut PullRequest> {
        self.prs
            .iter_mut()
            .find(|p| p.number == number && !p.deleted)
    }

    /// A branch name or a commit id, as the commit it names.
    pub(super) fn resolve(&self, bare: &Bare, reference: &str) -> Option<String> {
        if let Some(sha) = self.branches.get(reference) {
            return Some(sha.clone());
        }
        let hex = reference.len() == 40 && reference.bytes().all(|b| b.is_ascii_hexdigit());
        (hex && bare.has_commit(reference)).then(|| reference.to_ascii_lowercase())
    }

    /// Takes the branches as the repository has them now: open pull requests follow their
    /// head branch. On GitHub a pull request whose head branch is deleted is closed.
    pub(super) fn set_branches(&mut self, kind: Kind, branches: BTreeMap<String, String>) {
        let at = now();
        for pr in self.prs.iter_mut().filter(|p| p.open && !p.deleted) {
            match branches.get(&pr.head_ref) {
                Some(sha) if *sha != pr.head_sha => {
                    pr.head_sha = sha.clone();
                    pr.updated_at = at;
                }
                None if kind == Kind::GitHub => {
                    pr.open = false;
                    pr.closed_at = Some(at);
                    pr.updated_at = at;
                }
                _ => {}
            }
        }
        self.branches = branches;
    }

    /// The commit statuses of `sha`, the latest per context, oldest context first.
    pub(super) fn latest_statuses(&self, sha: &str) -> Vec<&CommitStatus> {
        let mut latest: Vec<&CommitStatus> = Vec::new();
        for status in self.statuses.iter().filter(|s| s.sha == sha) {
            match latest.iter_mut().find(|s| s.context == status.context) {
                Some(slot) => *slot = status,
                None => latest.push(status),
            }
        }
        latest
    }
}

/// Now, in unix seconds.
pub(super) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A unix time as the forges write it: `2024-05-01T12:00:00Z`.
pub(super) fn timestamp(unix: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + std::time::Duration::from_secs(unix)).to_string()
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
