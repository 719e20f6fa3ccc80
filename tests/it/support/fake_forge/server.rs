//! The fake forge's HTTP side: a loopback listener on a thread and runtime of its own (so a
//! test may run `git` or block without starving it), keep-alive connections, an outage
//! that refuses connections or answers 502, and what every API answer carries in common:
//! the token checked, forced rate limits and GitHub's hourly budget with its
//! `X-RateLimit-*` headers, `ETag`s and the 304 of a conditional GET (not counted against
//! the budget, as GitHub does not count it). The routes themselves are in `github`,
//! `forgejo`, `smart_http` (git) and here (a job's log where the API redirects).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use sha1::{Digest, Sha1};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

use super::super::http::{RawRequest, connection, next_request, reason};
use super::records::{Etags, Kind, Limit, Outage, RecordedRequest, Route};
use super::state::{Inner, State, now};
use super::{forgejo, github, smart_http};

/// Where a job's log is served (GitHub's redirect points at another host; here, this one).
pub(super) const LOG_PREFIX: &str = "/_fake/logs/";

pub(super) enum Body {
    Empty,
    Json(Value),
    Bytes(Arc<Vec<u8>>, String),
}

pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Body,
}

impl Reply {
    pub(super) fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Json(body),
        }
    }

    pub(super) fn empty(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Empty,
        }
    }

    pub(super) fn text(status: u16, text: &str) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Bytes(Arc::new(text.as_bytes().to_vec()), "text/plain".into()),
        }
    }

    pub(super) fn header(mut self, name: &str, value: impl Into<String>) -> Reply {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// A request to the API, after its prefix, as the route handlers see it.
pub(super) struct ApiCall<'a> {
    pub(super) method: &'a str,
    /// The path's segments, percent-decoded.
    pub(super) segments: Vec<String>,
    pub(super) query: Vec<(String, String)>,
    pub(super) body: &'a Value,
}

impl ApiCall<'_> {
    pub(super) fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn segments(&self) -> Vec<&str> {
        self.segments.iter().map(String::as_str).collect()
    }
}

/// Runs the listener until `stop` fires. Called on the fake's own thread.
pub(super) async fn serve(
    inner: Arc<Inner>,
    listener: std::net::TcpListener,
    mut stop: oneshot::Receiver<()>,
) {
    let Ok(addr) = listener.local_addr() else {
        return;
    };
    let mut listener = TcpListener::from_std(listener).ok();
    let mut outage = inner.outage.subscribe();
    loop {
        let refused = *outage.borrow_and_update() == Some(Outage::Refused);
        if refused {
            listener = None;
        } else if listener.is_none() {
            listener = TcpListener::bind(addr).await.ok();
        }
        inner.listening.send_replace(listener.is_some());
        tokio::select! {
            _ = &mut stop => return,
            _ = outage.changed() => {}
            accepted = accept(listener.as_ref()) => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(serve_connection(Arc::clone(&inner), stream));
                }
            }
        }
    }
}

async fn accept(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// Counts a connection while it is served.
struct Open<'a>(&'a Inner);

impl<'a> Open<'a> {
    fn new(inner: &'a Inner) -> Open<'a> {
        inner.connections.fetch_add(1, Ordering::SeqCst);
        Open(inner)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve_connection(inner: Arc<Inner>, stream: TcpStream) {
    let _open = Open::new(&inner);
    let mut reader = connection(stream);
    let mut outage = inner.outage.subscribe();
    loop {
        let request = tokio::select! {
            request = next_request(&mut reader) => request,
            _ = refused(&mut outage) => return,
        };
        let Some(request) = request else {
            return;
        };
        let down = *outage.borrow_and_update();
        if down == Some(Outage::Refused) {
            return;
        }
        let reply = match down {
            Some(_) => {
                let reply = Reply::text(502, "502 Bad Gateway");
                let route = if request.target.contains(".git/") {
                    Route::Git
                } else {
                    Route::Api
                };
                inner.record(&request, &reply, route, false, true);
                reply
            }
            None => answer(&inner, &request).await,
        };
        inner.bump();
        let merge = matches!(request.method.as_str(), "PUT" | "POST")
            && request
                .target
                .split('?')
                .next()
                .is_some_and(|p| p.ends_with("/merge"));
        if merge && inner.state().lose_merge_answers {
            while inner.state().lose_merge_answers {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            return;
        }
        if write_reply(reader.get_mut(), &reply).await.is_err() || request.wants_close() {
            return;
        }
    }
}

/// Resolves once the forge goes down with its connections refused.
async fn refused(outage: &mut watch::Receiver<Option<Outage>>) {
    loop {
        if *outage.borrow_and_update() == Some(Outage::Refused) {
            return;
        }
        if outage.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

async fn answer(inner: &Inner, request: &RawRequest) -> Reply {
    let (path, query) = match request.target.split_once('?') {
        Some((path, query)) => (path, query),
        None => (request.target.as_str(), ""),
    };
    let git_prefix = format!("/{}/{}.git/", inner.owner, inner.repo);
    if path.starts_with(&git_prefix) {
        let reply = smart_http::serve(inner, request, path, query).await;
        inner.record(request, &reply, Route::Git, false, false);
        return reply;
    }
    if let Some(id) = path.strip_prefix(LOG_PREFIX) {
        let log = {
            let state = inner.state();
            id.parse::<u64>()
                .ok()
                .and_then(|id| state.checks.iter().find(|c| c.id == id))
                .and_then(|c| c.log.clone())
        };
        let reply = match log {
            Some(log) => Reply {
                status: 200,
                headers: Vec::new(),
                body: Body::Bytes(log, "text/plain; charset=utf-8".into()),
            },
            None => Reply::text(404, "Not Found"),
        };
        inner.record(request, &reply, Route::Log, false, false);
        return reply;
    }
    let route = match inner.kind {
        Kind::GitHub => Some(path),
        Kind::Forgejo => path.strip_prefix("/api/v1"),
    };
    match route {
        Some(route) => inner.answer_api(request, route, query),
        None => {
            let reply = inner.error(404, "Not Found");
            inner.record(request, &reply, Route::Unknown, false, false);
            reply
        }
    }
}

impl Inner {
    /// An error as the forge words it: GitHub's `{message, documentation_url}`, Forgejo's
    /// `{message, url}`.
    pub(super) fn error(&self, status: u16, message: &str) -> Reply {
        match self.kind {
            Kind::GitHub => Reply::json(
                status,
                json!({
                    "message": message,
                    "documentation_url": "https://docs.github.com/rest",
                    "status": status.to_string(),
                }),
            ),
            Kind::Forgejo => Reply::json(
                status,
                json!({ "message": message, "url": format!("{}/api/swagger", self.base_url()) }),
            ),
        }
    }

    pub(super) fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn answer_api(&self, request: &RawRequest, route: &str, query: &str) -> Reply {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let call = ApiCall {
            method: &request.method,
            segments: route
                .trim_matches('/')
                .split('/')
                .filter(|s| !s.is_empty())
                .map(percent_decode)
                .collect(),
            query: query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (percent_decode(k), percent_decode(&v.replace('+', " ")))
                })
                .collect(),
            body: &body,
        };
        let mut state = self.state();
        if !self.authorized(request) {
            let message = match self.kind {
                Kind::GitHub => "Bad credentials",
                Kind::Forgejo => "invalid username, password or token",
            };
            let reply = self.error(401, message);
            return self.finish(&mut state, request, reply, Route::Api, false, false);
        }
        if let Some(reply) = self.limited(&mut state) {
            return self.finish(&mut state, request, reply, Route::Api, false, true);
        }
        let handled = match self.kind {
            Kind::GitHub => github::handle(self, &mut state, &call),
            Kind::Forgejo => forgejo::handle(self, &mut state, &call),
        };
        let Some(mut reply) = handled else {
            let reply = self.error(404, "Not Found");
            return self.finish(&mut state, request, reply, Route::Unknown, false, false);
        };
        let mut counted = true;
        if request.method == "GET"
            && (200..300).contains(&reply.status)
            && let Body::Json(value) = &reply.body
        {
            let tag = Sha1::digest(value.to_string().as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>();
            let etag = match state.etags {
                Etags::Strong => Some(format!("\"{tag}\"")),
                Etags::Weak => Some(format!("W/\"{tag}\"")),
                Etags::Off => None,
            };
            if let Some(etag) = etag {
                let unchanged = request
                    .header("if-none-match")
                    .is_some_and(|sent| sent.split(',').any(|s| same_etag(s, &etag)));
                if unchanged {
                    counted = false;
                    reply = Reply::empty(304);
                }
                reply = reply.header("ETag", etag);
            }
        }
        if counted && self.kind == Kind::GitHub {
            state.remaining = state.remaining.saturating_sub(1);
        }
        self.finish(&mut state, request, reply, Route::Api, counted, false)
    }

    /// The token, as `Authorization: Bearer …` or `token …` (either forge takes both).
    fn authorized(&self, request: &RawRequest) -> bool {
        let Some(value) = request.header("authorization") else {
            return false;
        };
        let (scheme, credential) = value.split_once(' ').unwrap_or((value, ""));
        matches!(scheme.to_ascii_lowercase().as_str(), "bearer" | "token")
            && credential.trim() == self.token
    }

    /// The answer of a forced limit, or of GitHub's hourly budget when it is spent.
    fn limited(&self, state: &mut State) -> Option<Reply> {
        let at = now();
        if at >= state.reset_at {
            state.remaining = state.limit;
            state.reset_at = at + 3_600;
        }
        if let Some((count, limit)) = state.forced_limit {
            state.forced_limit = (count > 1).then_some((count - 1, limit));
            return Some(match limit {
                Limit::Primary { reset_in_secs } => self
                    .primary_limit()
                    .header("X-RateLimit-Limit", state.limit.to_string())
                    .header("X-RateLimit-Remaining", "0")
                    .header("X-RateLimit-Reset", (at + reset_in_secs).to_string())
                    .header("X-RateLimit-Used", state.limit.to_string())
                    .header("X-RateLimit-Resource", "core"),
                Limit::Secondary { retry_after_secs } => self
                    .error(
                        403,
                        "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                    )
                    .header("Retry-After", retry_after_secs.to_string()),
                Limit::TooMany { retry_after_secs } => self
                    .error(429, "Too Many Requests")
                    .header("Retry-After", retry_after_secs.to_string()),
            });
        }
        (self.kind == Kind::GitHub && state.remaining == 0).then(|| self.primary_limit())
    }

    fn primary_limit(&self) -> Reply {
        self.error(403, "API rate limit exceeded for user ID 1.")
    }

    /// Adds GitHub's rate-limit headers, records the request, returns the reply.
    fn finish(
        &self,
        state: &mut State,
        request: &RawRequest,
        mut reply: Reply,
        route: Route,
        counted: bool,
        injected: bool,
    ) -> Reply {
        let has_limits = reply
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("x-ratelimit-remaining"));
        if self.kind == Kind::GitHub && !has_limits {
            reply = reply
                .header("X-RateLimit-Limit", state.limit.to_string())
                .header("X-RateLimit-Remaining", state.remaining.to_string())
                .header("X-RateLimit-Reset", state.reset_at.to_string())
                .header(
                    "X-RateLimit-Used",
                    (state.limit - state.remaining.min(state.limit)).to_string(),
                )
                .header("X-RateLimit-Resource", "core");
        }
        record_into(state, request, &reply, route, counted, injected);
        reply
    }

    pub(super) fn record(
        &self,
        request: &RawRequest,
        reply: &Reply,
        route: Route,
        counted: bool,
        injected: bool,
    ) {
        record_into(&mut self.state(), request, reply, route, counted, injected);
    }
}

fn record_into(
    state: &mut State,
    request: &RawRequest,
    reply: &Reply,
    route: Route,
    counted: bool,
    injected: bool,
) {
    let (path, query) = match request.target.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (request.target.clone(), None),
    };
    let body = if route == Route::Git {
        Value::Null
    } else {
        serde_json::from_slice(&request.body).unwrap_or(Value::Null)
    };
    let index = state.requests.len();
    state.requests.push(RecordedRequest {
        index,
        at: std::time::Instant::now(),
        method: request.method.clone(),
        path,
        query,
        headers: request.headers.clone(),
        body,
        status: reply.status,
        route,
        counted,
        not_modified: reply.status == 304,
        injected,
    });
}

/// `If-None-Match` compares weakly: `W/"x"` and `"x"` are the same tag.
fn same_etag(sent: &str, ours: &str) -> bool {
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_string();
    sent.trim() == "*" || bare(sent) == bare(ours)
}

pub(super) fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

async fn write_reply(stream: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    let (bytes, content_type): (Arc<Vec<u8>>, Option<String>) = match &reply.body {
        Body::Empty => (Arc::new(Vec::new()), None),
        Body::Json(value) => (
            Arc::new(value.to_string().into_bytes()),
            Some("application/json; charset=utf-8".into()),
        ),
        Body::Bytes(bytes, content_type) => (Arc::clone(bytes), Some(content_type.clone())),
    };
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    let has_type = reply
        .headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    if let (Some(content_type), false) = (content_type, has_type) {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if reply.status != 304 {
        head.push_str(&format!("Content-Length: {}\r\n", bytes.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    if reply.status != 304 {
        stream.write_all(&bytes).await?;
    }
    stream.flush().await
}
