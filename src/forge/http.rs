//! One HTTP client for a forge's REST API: JSON in and out, conditional reads (each
//! answer's `ETag` kept and sent back as `If-None-Match`: a 304 is answered from the copy,
//! and GitHub does not count it against the limit), the rate limit honoured (after a 403
//! or 429 for it nothing is sent before the reset the forge named), bounded answers, and
//! every request counted.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{ForgeError, Result};
use crate::clock::now_ms;

/// An answer longer than this is not read: no forge's JSON for one pull request is.
const MAX_JSON: usize = 8 * 1024 * 1024;
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// How long to wait after a rate-limit answer that names no reset.
const DEFAULT_BACKOFF_MS: i64 = 60_000;

/// What a client asked of its forge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    /// Requests sent.
    pub requests: u64,
    /// Of those, answered 304 Not Modified (free on GitHub).
    pub not_modified: u64,
}

/// How the token goes in the `Authorization` header.
#[derive(Debug, Clone, Copy)]
pub enum Scheme {
    /// `Bearer <token>` (GitHub).
    Bearer,
    /// `token <token>` (Forgejo, Gitea).
    Token,
}

#[derive(Debug)]
pub struct Client {
    base: String,
    token: SecretString,
    scheme: Scheme,
    http: reqwest::Client,
    /// URL → (ETag, body) of the last 200 answer to a read.
    cache: Mutex<HashMap<String, (String, Vec<u8>)>>,
    /// Nothing is sent before this (unix ms): the forge's rate limit.
    blocked_until: AtomicI64,
    budget: Mutex<Budget>,
}

impl Client {
    pub fn new(base: &str, token: SecretString, scheme: Scheme) -> Result<Client> {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .user_agent(concat!("hanarang/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ForgeError::Invalid(format!("cannot make an HTTP client: {e}")))?;
        Ok(Client {
            base: base.trim_end_matches('/').to_string(),
            token,
            scheme,
            http,
            cache: Mutex::new(HashMap::new()),
            blocked_until: AtomicI64::new(0),
            budget: Mutex::new(Budget::default()),
        })
    }

    pub fn budget(&self) -> Budget {
        *lock(&self.budget)
    }

    /// `path` under the API's base.
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn authorization(&self) -> Result<HeaderValue> {
        let value = match self.scheme {
            Scheme::Bearer => format!("Bearer {}", self.token.expose_secret()),
            Scheme::Token => format!("token {}", self.token.expose_secret()),
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            ForgeError::Invalid("the token holds a character HTTP cannot carry".into())
        })?;
        value.set_sensitive(true);
        Ok(value)
    }

    /// The JSON at `path`, asked conditionally.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let bytes = self.read(path).await?;
        decode(path, &bytes)
    }

    /// The JSON at `path`; `None` when the forge has nothing there (404).
    pub async fn get_optional<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>> {
        match self.get(path).await {
            Ok(value) => Ok(Some(value)),
            Err(ForgeError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A read: the cached copy's ETag sent along; a 304 answers from the copy.
    async fn read(&self, path: &str) -> Result<Vec<u8>> {
        let url = self.url(path);
        let cached = lock(&self.cache).get(&url).cloned();
        let mut request = self.http.get(&url);
        if let Some((etag, _)) = &cached {
            request = request.header(reqwest::header::IF_NONE_MATCH, etag.as_str());
        }
        let response = self.send(request).await?;
        if response.status() == reqwest::StatusCode::NOT_MODIFIED
            && let Some((_, body)) = cached
        {
            lock(&self.budget).not_modified += 1;
            return Ok(body);
        }
        let etag = response
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = self.answer(path, response).await?;
        if let Some(etag) = etag {
            lock(&self.cache).insert(url, (etag, body.clone()));
        }
        Ok(body)
    }

    /// A write: `body` as JSON with `method`; the answer's JSON (`null` when it has none).
    pub async fn write<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T> {
        let json = serde_json::to_vec(body)
            .map_err(|e| ForgeError::Invalid(format!("cannot encode a request: {e}")))?;
        let request = self
            .http
            .request(method, self.url(path))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(json);
        let response = self.send(request).await?;
        let bytes = self.answer(path, response).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return decode(path, b"null");
        }
        decode(path, &bytes)
    }

    /// The last `max_bytes` of the text at `path` (a log; its redirect followed, the token
    /// not sent to another host), read as it streams: nothing more is held.
    pub async fn tail(&self, path: &str, max_bytes: usize) -> Result<String> {
        let url = self.url(path);
        let response = self.send(self.http.get(&url)).await?;
        let mut response = self.status(path, response).await?;
        let mut kept: Vec<u8> = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ForgeError::Unavailable(format!("{path}: {e}")))?
        {
            kept.extend_from_slice(&chunk);
            if kept.len() > 2 * max_bytes {
                kept.drain(..kept.len() - max_bytes);
            }
        }
        let start = kept.len().saturating_sub(max_bytes);
        Ok(String::from_utf8_lossy(&kept[start..]).into_owned())
    }

    /// Sends `request` with the token, unless the rate limit says wait; counts it.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let until_ms = self.blocked_until.load(Ordering::Relaxed);
        if until_ms > now_ms() {
            return Err(ForgeError::RateLimited { until_ms });
        }
        lock(&self.budget).requests += 1;
        let response = request
            .header(reqwest::header::AUTHORIZATION, self.authorization()?)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| ForgeError::Unavailable(e.without_url().to_string()))?;
        if let Some(until_ms) = rate_limited(response.status(), response.headers()) {
            self.blocked_until.store(until_ms, Ordering::Relaxed);
            return Err(ForgeError::RateLimited { until_ms });
        }
        Ok(response)
    }

    /// The response when it is a success; else what it means, in the forge's words.
    async fn status(&self, what: &str, response: reqwest::Response) -> Result<reqwest::Response> {
        let status = response.status();
        if status.is_success() || status == reqwest::StatusCode::NOT_MODIFIED {
            return Ok(response);
        }
        let body = bounded(response, 64 * 1024).await.unwrap_or_default();
        let message = message(&body).unwrap_or_else(|| status.to_string());
        Err(match status.as_u16() {
            401 => ForgeError::Unauthorized(message),
            404 | 410 => ForgeError::NotFound(format!("{what} ({message})")),
            500..=599 => ForgeError::Unavailable(format!("{status}: {message}")),
            code => ForgeError::Refused {
                status: code,
                message,
            },
        })
    }

    /// A success's body, bounded.
    async fn answer(&self, what: &str, response: reqwest::Response) -> Result<Vec<u8>> {
        let response = self.status(what, response).await?;
        bounded(response, MAX_JSON).await
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Up to `max` bytes of the body; more is an error, never read into memory.
async fn bounded(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ForgeError::Unavailable(e.without_url().to_string()))?
    {
        if body.len() + chunk.len() > max {
            return Err(ForgeError::Invalid(format!(
                "an answer of more than {max} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn decode<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| ForgeError::Invalid(format!("{what}: {e}")))
}

/// The forge's own words in an error's body: `message`, with the first of `errors`.
fn message(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let message = value.get("message")?.as_str()?.to_string();
    let detail = value
        .get("errors")
        .and_then(|e| e.as_array())
        .and_then(|e| e.first())
        .and_then(|e| e.get("message").and_then(|m| m.as_str()));
    Some(match detail {
        Some(detail) if !detail.is_empty() => format!("{message}: {detail}"),
        _ => message,
    })
}

/// When a 403 or 429 is the rate limit: until when (unix ms), from `Retry-After` (seconds)
/// or `X-RateLimit-Reset` (unix seconds), else a minute from now.
fn rate_limited(status: reqwest::StatusCode, headers: &HeaderMap) -> Option<i64> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<i64>().ok())
    };
    let exhausted = header("x-ratelimit-remaining") == Some(0);
    let limited = status == reqwest::StatusCode::TOO_MANY_REQUESTS
        || (status == reqwest::StatusCode::FORBIDDEN
            && (exhausted || headers.contains_key("retry-after")));
    if !limited {
        return None;
    }
    let now = now_ms();
    Some(
        header("retry-after")
            .map(|secs| now + secs.max(1) * 1000)
            .or_else(|| header("x-ratelimit-reset").map(|at| (at * 1000).max(now + 1000)))
            .unwrap_or(now + DEFAULT_BACKOFF_MS),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_waits_for_what_the_forge_names() {
        let mut headers = HeaderMap::new();
        assert_eq!(rate_limited(reqwest::StatusCode::FORBIDDEN, &headers), None);
        headers.insert("retry-after", HeaderValue::from_static("30"));
        let until = rate_limited(reqwest::StatusCode::TOO_MANY_REQUESTS, &headers).unwrap();
        assert!((until - now_ms() - 30_000).abs() < 1_000, "{until}");
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        headers.insert("x-ratelimit-reset", HeaderValue::from_static("4102444800"));
        assert_eq!(
            rate_limited(reqwest::StatusCode::FORBIDDEN, &headers),
            Some(4_102_444_800_000)
        );
    }

    #[test]
    fn the_forges_words_are_its_message_and_first_error() {
        let body = br#"{"message":"Validation Failed","errors":[{"message":"A pull request already exists for o:b."}]}"#;
        assert_eq!(
            message(body).as_deref(),
            Some("Validation Failed: A pull request already exists for o:b.")
        );
        assert_eq!(message(b"not json"), None);
    }
}
