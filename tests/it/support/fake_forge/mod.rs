//! A fake code forge for tests, as the fake Discord is one: an HTTP server on loopback
//! speaking GitHub's REST subset (or Forgejo's) over a real git remote, so the forge client
//! and its git pushes are tested over the wire they use in production.
//!
//! - [`Forge::start`] makes a bare repository (empty, or with `main` from a seed working
//!   repository) and serves it on `127.0.0.1:PORT`, on a thread and runtime of its own: a
//!   test may call git synchronously against it, from any runtime.
//! - The git remote is [`Forge::remote_url`] (`http://127.0.0.1:PORT/owner/repo.git`),
//!   answered by `git http-backend`; HTTP Basic with the token as the password (any user
//!   name; GitHub's convention is `x-access-token`).
//! - The API is [`Forge::api_url`]: `http://127.0.0.1:PORT` for GitHub (routes at the
//!   root, as api.github.com has them), `http://127.0.0.1:PORT/api/v1` for Forgejo (the
//!   prefix is part of the API URL, as a Forgejo's API URL is written). The token goes in
//!   `Authorization: Bearer TOKEN` or `token TOKEN`.
//!
//! Tests act as the people and the CI on the forge through the controls in `controls`
//! (checks, statuses, reviews, comments, a merge or close on the forge, someone else's
//! push, refusals, rate limits, an outage) and read back every request, push and merge.
//!
//! Its parts: [`records`] (what a test passes and reads back), `state` (what the fake
//! holds), `server` (connections, token, limits, ETags), `github` and `forgejo` (each
//! API's routes and JSON), `pulls` (a pull request's life, the same for both), `bare`
//! (the repository, changed with git's plumbing), `smart_http` (the git remote).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, watch};

mod bare;
mod controls;
mod forgejo;
mod github;
mod pulls;
pub mod records;
mod server;
mod smart_http;
mod state;

pub use records::{
    Etags, Kind, Limit, MergeRecord, Outage, Permissions, PullRequest, Push, RecordedRequest,
    Route, Verdict,
};

use super::TempDir;
use state::{Inner, State};

/// The login the token belongs to: who the client's pushes, PRs and merges are by.
pub const BOT_LOGIN: &str = "hanarang-bot";
/// How long the `wait_*` helpers wait by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// A running fake forge. Dropping it stops the server and removes the repository.
pub struct Forge {
    inner: Arc<Inner>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _root: TempDir,
}

impl Forge {
    /// Serves `owner/repo` as a `kind` forge on a random loopback port, accepting `token`.
    /// The repository's `main` is `seed`'s checked-out commit, or unborn without one.
    pub fn start(kind: Kind, owner: &str, repo: &str, token: &str, seed: Option<&Path>) -> Forge {
        let root = TempDir::new("forge");
        let bare = bare::Bare::create(root.path(), owner, repo, seed);
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake forge on loopback");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let addr = listener.local_addr().expect("its address");
        let branches = bare.branches();
        let inner = Arc::new(Inner {
            kind,
            addr,
            owner: owner.to_string(),
            repo: repo.to_string(),
            token: token.to_string(),
            login: BOT_LOGIN.to_string(),
            bare,
            state: Mutex::new(State::new(kind, branches)),
            changed: watch::channel(0).0,
            outage: watch::channel(None).0,
            listening: watch::channel(false).0,
            connections: Default::default(),
        });
        let (stop, stopped) = oneshot::channel();
        let serving = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("fake-forge".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the fake forge's runtime");
                runtime.block_on(server::serve(serving, listener, stopped));
            })
            .expect("the fake forge's thread");
        Forge {
            inner,
            stop: Some(stop),
            thread: Some(thread),
            _root: root,
        }
    }

    pub fn kind(&self) -> Kind {
        self.inner.kind
    }

    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        self.inner.base_url()
    }

    /// What the client is configured with as `api_url`.
    pub fn api_url(&self) -> String {
        match self.inner.kind {
            Kind::GitHub => self.base_url(),
            Kind::Forgejo => format!("{}/api/v1", self.base_url()),
        }
    }

    /// `http://127.0.0.1:PORT/owner/repo.git`, with no credentials.
    pub fn remote_url(&self) -> String {
        format!("{}/{}.git", self.base_url(), self.inner.full_name())
    }

    /// The remote with the token in it (`http://x-access-token:TOKEN@…`), for a test's
    /// own git calls. The client must never put the token in a URL.
    pub fn clone_url_with_token(&self) -> String {
        format!(
            "http://x-access-token:{}@{}/{}.git",
            self.inner.token,
            self.inner.addr,
            self.inner.full_name()
        )
    }

    pub fn token(&self) -> &str {
        &self.inner.token
    }

    /// `owner/repo`.
    pub fn full_name(&self) -> String {
        self.inner.full_name()
    }

    /// The bare repository on disk (to inspect with git).
    pub fn bare_path(&self) -> &Path {
        self.inner.bare.path()
    }

    /// A branch's commit as the repository has it now.
    pub fn branch(&self, name: &str) -> Option<String> {
        self.inner.bare.branches().get(name).cloned()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.inner.state().requests.clone()
    }

    /// The requests to the API (not git's, not logs').
    pub fn api_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.route == Route::Api)
            .collect()
    }

    /// Requests the fake has no route for: what the client asked that the fake does not
    /// model (or that the real forge does not have).
    pub fn unknown_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.route == Route::Unknown)
            .collect()
    }

    /// API requests that counted against the rate limit.
    pub fn counted_requests(&self) -> usize {
        self.requests().iter().filter(|r| r.counted).count()
    }

    /// Conditional GETs answered 304 (not counted).
    pub fn not_modified_requests(&self) -> usize {
        self.requests().iter().filter(|r| r.not_modified).count()
    }

    /// The most API requests (counted or not) that arrived within any `window`: how hard
    /// the client pressed the forge at its busiest.
    pub fn busiest(&self, window: Duration) -> usize {
        let times: Vec<_> = self.api_requests().iter().map(|r| r.at).collect();
        let mut most = 0;
        let mut start = 0;
        for (end, at) in times.iter().enumerate() {
            while at.duration_since(times[start]) >= window {
                start += 1;
            }
            most = most.max(end + 1 - start);
        }
        most
    }

    /// Every branch update pushed, by the client or a control.
    pub fn pushes(&self) -> Vec<Push> {
        self.inner.state().pushes.clone()
    }

    /// Every merge the client asked for through the API.
    pub fn merges(&self) -> Vec<MergeRecord> {
        self.inner.state().merges.clone()
    }

    /// A pull request as the forge holds it (deleted ones too).
    pub fn pr(&self, number: u64) -> Option<PullRequest> {
        self.inner
            .state()
            .prs
            .iter()
            .find(|p| p.number == number)
            .cloned()
    }

    pub fn prs(&self) -> Vec<PullRequest> {
        self.inner.state().prs.clone()
    }

    /// Waits until `condition` holds, re-checking after every change; whether it did
    /// before `timeout`.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut condition: impl FnMut(&Forge) -> bool,
    ) -> bool {
        let mut changes = self.inner.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            changes.borrow_and_update();
            if condition(self) {
                return true;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return condition(self),
            }
        }
    }

    /// Waits for a request (already there or arriving) that satisfies `predicate`.
    pub async fn wait_for_request(
        &self,
        predicate: impl Fn(&RecordedRequest) -> bool,
        timeout: Duration,
    ) -> Option<RecordedRequest> {
        let mut found = None;
        self.wait_until(timeout, |f| {
            found = f
                .inner
                .state()
                .requests
                .iter()
                .find(|r| predicate(r))
                .cloned();
            found.is_some()
        })
        .await;
        found
    }
}

impl Drop for Forge {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
