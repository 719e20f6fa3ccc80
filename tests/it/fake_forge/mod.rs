//! The fake forge in `support::fake_forge` speaks what GitHub and Forgejo speak: a real
//! git remote with the token checked, pull requests that follow pushes and really merge,
//! conditional GETs, rate limits, outages. Driven by plain git and a plain HTTP client.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::TempDir;
use crate::support::fake_forge::Forge;

mod forgejo;
mod github;
mod limits;
mod remote;

pub(crate) const TOKEN: &str = "fake-forge-token-0123";

/// git as a test runs it: nobody's configuration, no prompt for credentials.
pub(crate) fn git(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs")
}

pub(crate) fn git_ok(dir: &Path, args: &[&str]) -> String {
    let out = git(dir, args);
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A working repository with one commit on `main`.
pub(crate) fn seed() -> TempDir {
    let dir = TempDir::new("forge-seed");
    git_ok(dir.path(), &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(dir.path().join("README.md"), "app\n").expect("write README");
    git_ok(dir.path(), &["add", "."]);
    git_ok(dir.path(), &["commit", "--quiet", "-m", "Start"]);
    dir
}

/// A commit on a new `branch` in `work` writing `file`.
pub(crate) fn commit_on(work: &Path, branch: &str, file: &str, content: &[u8]) -> String {
    git_ok(work, &["checkout", "--quiet", "-B", branch]);
    std::fs::write(work.join(file), content).expect("write the file");
    git_ok(work, &["add", "."]);
    git_ok(
        work,
        &["commit", "--quiet", "-m", &format!("Change {file}")],
    );
    git_ok(work, &["rev-parse", "HEAD"])
}

/// Incompressible bytes: a push of them is larger than git's 1 MiB post buffer, so git
/// sends it chunked.
pub(super) fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub(super) struct Api {
    pub(super) client: reqwest::Client,
    pub(super) base: String,
    pub(super) auth: String,
}

pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: reqwest::header::HeaderMap,
    pub(super) body: Value,
}

impl Answer {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Api {
    pub(super) fn new(forge: &Forge, scheme: &str) -> Api {
        Api {
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("a client"),
            base: forge.api_url(),
            auth: format!("{scheme} {}", forge.token()),
        }
    }

    pub(super) async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Answer {
        self.call_with(method, path, body, &[]).await
    }

    pub(super) async fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", &self.auth);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request
                .header("Content-Type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.expect("the fake forge answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("the body");
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer {
            status,
            headers,
            body,
        }
    }
}
