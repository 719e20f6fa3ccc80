//! The git remote: git's smart HTTP under `/{owner}/{repo}.git/`, answered by the real
//! `git http-backend` run as a CGI program over the bare repository, so clones, fetches
//! and pushes are git's own. The token is checked as GitHub and Forgejo check it: HTTP
//! Basic, any user name, the token as the password; without it, 401 and
//! `WWW-Authenticate: Basic realm="fake"` (git then asks its credential helpers). A token
//! without `push` permission gets 403 on `git-receive-pack`. Every ref update a push asks
//! for is recorded with whether git applied it, and pull requests follow their head.
//!
//! Left out: anonymous reads of a public repository (every request needs the token), LFS,
//! and the hook messages a forge prints in `remote:` lines.

use base64_decode::decode;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::super::http::RawRequest;
use super::records::Push;
use super::server::{Body, Reply};
use super::state::Inner;

pub(super) async fn serve(inner: &Inner, request: &RawRequest, path: &str, query: &str) -> Reply {
    if !has_token(inner, request) {
        return Reply::text(401, "Unauthorized").header("WWW-Authenticate", "Basic realm=\"fake\"");
    }
    let push = path.ends_with("/git-receive-pack") || query.contains("service=git-receive-pack");
    if push && !inner.state().permissions.push {
        let message = format!(
            "Permission to {}.git denied to {}.",
            inner.full_name(),
            inner.login
        );
        return Reply::text(403, &message);
    }
    let commands = if push && request.method == "POST" {
        push_commands(&request.body)
    } else {
        Vec::new()
    };
    let reply = match run_backend(inner, request, path, query).await {
        Ok(reply) => reply,
        Err(e) => Reply::text(500, &format!("git http-backend: {e}")),
    };
    if !commands.is_empty() {
        let branches = inner.bare.branches();
        let mut state = inner.state();
        let at_index = state.requests.len();
        for (old, new, refname) in commands {
            let now = refname
                .strip_prefix("refs/heads/")
                .and_then(|b| branches.get(b));
            let applied = match now {
                Some(sha) => *sha == new,
                None => new.bytes().all(|b| b == b'0'),
            };
            state.pushes.push(Push {
                at_index,
                refname,
                old,
                new,
                by: inner.login.clone(),
                applied,
            });
        }
        state.set_branches(inner.kind, branches);
    }
    reply
}

fn has_token(inner: &Inner, request: &RawRequest) -> bool {
    request
        .header("authorization")
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|encoded| decode(encoded.trim()))
        .and_then(|decoded| String::from_utf8(decoded).ok())
        .is_some_and(|pair| pair.split_once(':').map(|(_, p)| p) == Some(inner.token.as_str()))
}

/// The `old new refname` commands at the start of a `git-receive-pack` request
/// (pkt-lines up to the first flush; the first carries capabilities after a NUL).
fn push_commands(body: &[u8]) -> Vec<(String, String, String)> {
    let mut commands = Vec::new();
    let mut at = 0;
    while let Some(length) = body
        .get(at..at + 4)
        .and_then(|h| std::str::from_utf8(h).ok())
        .and_then(|h| usize::from_str_radix(h, 16).ok())
    {
        if length < 4 || at + length > body.len() {
            break;
        }
        let line = &body[at + 4..at + length];
        at += length;
        let line = line.split(|b| *b == 0).next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let parts: Vec<&str> = line.trim_end().split(' ').collect();
        if let [old, new, refname] = parts.as_slice()
            && old.len() == 40
            && new.len() == 40
        {
            commands.push((old.to_string(), new.to_string(), refname.to_string()));
        }
    }
    commands
}

/// Runs `git http-backend` for the request (RFC 3875 variables, the body on its stdin)
/// and turns its CGI answer into an HTTP one.
async fn run_backend(
    inner: &Inner,
    request: &RawRequest,
    path: &str,
    query: &str,
) -> std::io::Result<Reply> {
    let mut command = Command::new("git");
    command
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", inner.bare.home())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_PROJECT_ROOT", inner.bare.project_root())
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REMOTE_USER", &inner.login)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("REQUEST_METHOD", &request.method)
        .env("PATH_INFO", super::server::percent_decode(path))
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", request.header("content-type").unwrap_or(""))
        .env("CONTENT_LENGTH", request.body.len().to_string());
    for (name, value) in &request.headers {
        if name == "content-type" || name == "content-length" || name == "authorization" {
            continue;
        }
        let variable = format!("HTTP_{}", name.to_ascii_uppercase().replace('-', "_"));
        command.env(variable, value);
    }
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let mut stdin = child.stdin.take();
    let feed = async {
        if let Some(pipe) = stdin.as_mut() {
            // git may stop reading early (a refused push); what it did not read is moot.
            let _ = pipe.write_all(&request.body).await;
            let _ = pipe.shutdown().await;
        }
        drop(stdin.take());
    };
    let (_, out) = tokio::join!(feed, child.wait_with_output());
    let out = out?;
    Ok(cgi_reply(&out.stdout))
}

/// A CGI answer (headers, a blank line, the body) as an HTTP reply; `Status:` sets the
/// status, 200 when absent.
fn cgi_reply(output: &[u8]) -> Reply {
    let (head_end, body_start) = match find(output, b"\r\n\r\n") {
        Some(i) => (i, i + 4),
        None => match find(output, b"\n\n") {
            Some(i) => (i, i + 2),
            None => (output.len(), output.len()),
        },
    };
    let head = String::from_utf8_lossy(&output[..head_end]);
    let mut status = 200;
    let mut headers = Vec::new();
    let mut content_type = "application/octet-stream".to_string();
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            status = value
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(500);
        } else if name.eq_ignore_ascii_case("content-type") {
            content_type = value.to_string();
        } else {
            headers.push((name.trim().to_string(), value.to_string()));
        }
    }
    Reply {
        status,
        headers,
        body: Body::Bytes(
            std::sync::Arc::new(output[body_start..].to_vec()),
            content_type,
        ),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Base64 (RFC 4648, with padding) for the Basic credentials git sends.
mod base64_decode {
    pub(super) fn decode(text: &str) -> Option<Vec<u8>> {
        let value = |c: u8| -> Option<u32> {
            Some(match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => return None,
            } as u32)
        };
        let bytes = text.trim_end_matches('=').as_bytes();
        let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
        for chunk in bytes.chunks(4) {
            let mut n = 0u32;
            for (i, c) in chunk.iter().enumerate() {
                n |= value(*c)? << (18 - 6 * i);
            }
            let take = match chunk.len() {
                4 => 3,
                3 => 2,
                2 => 1,
                _ => return None,
            };
            out.extend_from_slice(&n.to_be_bytes()[1..1 + take]);
        }
        Some(out)
    }
}
