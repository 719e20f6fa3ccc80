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

/// A thread's id, its parent channel and its name.
#[derive(Debug, serde::Deserialize)]
pub struct ThreadBrief {
    pub id: ChannelId,
    #[serde(default)]
    pub parent_id: Option<ChannelId>,
    #[serde(default)]
    pub name: String,
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
                None,
            )
            .await?;
        Ok(active.threads)
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, RestError> {
        let body = serde_json::to_vec(body).map_err(|e| RestError::Decode(e.to_string()))?;
        self.request(method, path, Some(body)).await
    }

    async fn request<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T, RestError> {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header(reqwest::header::AUTHORIZATION, &self.authorization);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
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
            return serde_json::from_slice(&bytes).map_err(|e| RestError::Decode(e.to_string()));
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
