//! The forum bridge's REST calls (create a post, send a line, edit a message; and, after a
//! failover, list the forum's posts for one an earlier bot left unrecorded), made
//! with serenity's own request builders but sent here rather than through its `Http`: a
//! 429's `retry_after` must be honoured, and through `discord.http_proxy` serenity's
//! ratelimiter is off and its error keeps neither the body nor the headers that carry it.

use std::time::Duration;

use poise::serenity_prelude as serenity;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serenity::{
    ChannelId, CreateForumPost, CreateMessage, EditMessage, GuildChannel, GuildId, Message,
    MessageId,
};

use super::Token;
use crate::config::DiscordConfig;

/// `GET /guilds/{id}/threads/active`, as far as the bridge reads it.
#[derive(Debug, serde::Deserialize)]
struct ActiveThreads {
    #[serde(default)]
    threads: Vec<ThreadBrief>,
}

/// `GET /channels/{id}/threads/archived/public`, as far as the bridge reads it.
#[derive(Debug, serde::Deserialize)]
struct ArchivedThreads {
    #[serde(default)]
    threads: Vec<ThreadBrief>,
    #[serde(default)]
    has_more: bool,
}

/// A thread's id, its parent channel and its name.
#[derive(Debug, serde::Deserialize)]
pub struct ThreadBrief {
    pub id: ChannelId,
    #[serde(default)]
    pub parent_id: Option<ChannelId>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub thread_metadata: Option<ThreadMetadata>,
}

/// When a thread was archived (the key of the archived-threads listing's pages).
#[derive(Debug, serde::Deserialize)]
pub struct ThreadMetadata {
    #[serde(default)]
    pub archive_timestamp: Option<String>,
}

/// Discord's code for a request about an archived thread.
pub const THREAD_ARCHIVED: i64 = 50083;
/// Pages of archived posts read when looking for one a stopped bot left behind.
const ARCHIVED_PAGES: usize = 10;

/// A file attached to a message.
#[derive(Debug, Clone)]
pub struct File {
    pub name: String,
    pub mime: &'static str,
    pub data: Vec<u8>,
}

/// What a request carries.
enum Body {
    None,
    Json(Vec<u8>),
    Form(reqwest::multipart::Form),
}

/// Discord's REST API, as the bridge calls it.
pub struct Rest {
    client: reqwest::Client,
    /// `https://discord.com/api/v10`, or the same path under `discord.http_proxy`.
    base: String,
    authorization: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RestError {
    #[error("Discord answered {status} ({message}, code {code})")]
    Status {
        status: u16,
        code: i64,
        message: String,
        /// A 429's wait, from its body or its `Retry-After` header.
        retry_after: Option<Duration>,
        /// A 429 for the whole bot (`global: true`, or `X-RateLimit-Scope: global`).
        global: bool,
    },
    #[error("Discord could not be reached: {0}")]
    Transport(String),
    #[error("Discord's answer could not be read: {0}")]
    Decode(String),
}

impl RestError {
    pub fn status(&self) -> Option<u16> {
        match self {
            RestError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    pub fn code(&self) -> Option<i64> {
        match self {
            RestError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_global(&self) -> bool {
        matches!(
            self,
            RestError::Status {
                status: 429,
                global: true,
                ..
            }
        )
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            RestError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// What Discord says about a failed request (every field optional: a 429 carries no code).
#[derive(Debug, Default, serde::Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    message: String,
    retry_after: Option<f64>,
    #[serde(default)]
    global: bool,
}

impl Rest {
    pub fn new(discord: &DiscordConfig, token: &Token) -> Rest {
        let root = discord
            .http_proxy
            .as_deref()
            .map_or("https://discord.com", |p| p.trim_end_matches('/'));
        Rest {
            client: reqwest::Client::new(),
            base: format!("{root}/api/v10"),
            authorization: format!("Bot {}", token.expose().trim_start_matches("Bot ")),
        }
    }

    pub async fn create_forum_post(
        &self,
        forum: ChannelId,
        post: &CreateForumPost<'_>,
    ) -> Result<GuildChannel, RestError> {
        self.call(
            reqwest::Method::POST,
            &format!("/channels/{forum}/threads"),
            post,
        )
        .await
    }

    pub async fn send_message(
        &self,
        channel: ChannelId,
        message: &CreateMessage,
    ) -> Result<Message, RestError> {
        self.call(
            reqwest::Method::POST,
            &format!("/channels/{channel}/messages"),
            message,
        )
        .await
    }

    /// A message with files, as serenity sends one: a multipart form of `payload_json` (the
    /// message, its `attachments` naming each file by its place) and `files[N]` parts.
    pub async fn send_message_with_files(
        &self,
        channel: ChannelId,
        message: &CreateMessage,
        files: &[File],
    ) -> Result<Message, RestError> {
        let mut payload =
            serde_json::to_value(message).map_err(|e| RestError::Decode(e.to_string()))?;
        payload["attachments"] = files
            .iter()
            .enumerate()
            .map(|(i, f)| serde_json::json!({ "id": i, "filename": f.name }))
            .collect();
        let mut form = reqwest::multipart::Form::new();
        for (i, file) in files.iter().enumerate() {
            let part = reqwest::multipart::Part::bytes(file.data.clone())
                .file_name(file.name.clone())
                .mime_str(file.mime)
                .map_err(|e| RestError::Decode(e.to_string()))?;
            form = form.part(format!("files[{i}]"), part);
        }
        form = form.text("payload_json", payload.to_string());
        self.request(
            reqwest::Method::POST,
            &format!("/channels/{channel}/messages"),
            Body::Form(form),
        )
        .await
    }

    pub async fn edit_message(
        &self,
        channel: ChannelId,
        message: MessageId,
        edit: &EditMessage,
    ) -> Result<Message, RestError> {
        self.call(
            reqwest::Method::PATCH,
            &format!("/channels/{channel}/messages/{message}"),
            edit,
        )
        .await
    }

    /// The forum posts (and other threads) of the guild that are not archived, for
    /// finding a post a bot created but could not record (it stopped in between).
    pub async fn active_threads(&self, guild: GuildId) -> Result<Vec<ThreadBrief>, RestError> {
        let active: ActiveThreads = self
            .request(
                reqwest::Method::GET,
                &format!("/guilds/{guild}/threads/active"),
                Body::None,
            )
            .await?;
        Ok(active.threads)
    }

    /// The forum's archived posts, most recently archived first (up to a thousand): a post
    /// a stopped bot left behind may have archived before the next bot looked for it.
    pub async fn archived_threads(&self, forum: ChannelId) -> Result<Vec<ThreadBrief>, RestError> {
        let mut all = Vec::new();
        let mut before: Option<String> = None;
        for _ in 0..ARCHIVED_PAGES {
            let query = match &before {
                Some(at) => format!("?limit=100&before={}", url_encode(at)),
                None => "?limit=100".to_string(),
            };
            let page: ArchivedThreads = self
                .request(
                    reqwest::Method::GET,
                    &format!("/channels/{forum}/threads/archived/public{query}"),
                    Body::None,
                )
                .await?;
            before = page
                .threads
                .last()
                .and_then(|t| t.thread_metadata.as_ref())
                .and_then(|m| m.archive_timestamp.clone());
            all.extend(page.threads);
            if !page.has_more || before.is_none() {
                break;
            }
        }
        Ok(all)
    }

    /// Adds the bot's reaction `emoji` (a Unicode emoji) to a message.
    pub async fn react(
        &self,
        channel: ChannelId,
        message: MessageId,
        emoji: &str,
    ) -> Result<(), RestError> {
        let emoji = url_encode(emoji);
        self.request(
            reqwest::Method::PUT,
            &format!("/channels/{channel}/messages/{message}/reactions/{emoji}/@me"),
            Body::None,
        )
        .await
    }

    /// Opens an archived thread again.
    pub async fn unarchive(&self, thread: ChannelId) -> Result<GuildChannel, RestError> {
        self.call(
            reqwest::Method::PATCH,
            &format!("/channels/{thread}"),
            &serde_json::json!({ "archived": false }),
        )
        .await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, RestError> {
        let body = serde_json::to_vec(body).map_err(|e| RestError::Decode(e.to_string()))?;
        self.request(method, path, Body::Json(body)).await
    }

    async fn request<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Body,
    ) -> Result<T, RestError> {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header(reqwest::header::AUTHORIZATION, &self.authorization);
        request = match body {
            Body::None => request,
            Body::Json(body) => request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body),
            Body::Form(form) => request.multipart(form),
        };
        let response = request
            .send()
            .await
            .map_err(|e| RestError::Transport(e.without_url().to_string()))?;
        let status = response.status();
        let header_wait = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok());
        let global_scope = response
            .headers()
            .get("x-ratelimit-scope")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("global"));
        let bytes = response
            .bytes()
            .await
            .map_err(|e| RestError::Transport(e.without_url().to_string()))?;
        if status.is_success() {
            // 204 No Content reads as `null`: what `()` is read from.
            let body: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
            return serde_json::from_slice(body).map_err(|e| RestError::Decode(e.to_string()));
        }
        let error: ErrorBody = serde_json::from_slice(&bytes).unwrap_or_default();
        let retry_after = error
            .retry_after
            .or(header_wait)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s.min(3600.0)));
        Err(RestError::Status {
            status: status.as_u16(),
            code: error.code,
            message: error.message,
            retry_after,
            global: error.global || global_scope,
        })
    }
}

/// A query value with the characters an ISO timestamp holds escaped (`+`, `:`).
fn url_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
