//! What the fake records of the bot and hands back to a test: its REST requests, the
//! messages and threads it made, its answers to each interaction.

use serde_json::Value;

use super::API_PREFIX;

/// One REST request as the fake received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// Arrival order, from 0, over the whole life of the fake.
    pub index: usize,
    /// When it arrived.
    pub at: std::time::Instant,
    pub method: String,
    /// The path as requested, without the query string (e.g. `/api/v10/users/@me`).
    pub path: String,
    pub query: Option<String>,
    /// The JSON body (for multipart requests: the `payload_json` part), or `Value::Null`.
    pub body: Value,
    /// The status the fake answered with.
    pub status: u16,
    /// The `Authorization` header as sent.
    pub authorization: Option<String>,
    /// `false` when the fake has no handler for this method and path (answered 404).
    pub known_route: bool,
    /// `true` when the answer came from failure injection ([`FakeDiscord::fail_next`],
    /// [`FakeDiscord::set_failing`]); nothing was delivered.
    pub injected_failure: bool,
}

impl RecordedRequest {
    /// The path without the `/api/v10` prefix, e.g. `/channels/1/messages`.
    pub fn route(&self) -> &str {
        self.path.strip_prefix(API_PREFIX).unwrap_or(&self.path)
    }

    /// `method` matches and the route (without `/api/v10`) matches `pattern`, where a `*`
    /// segment matches any one segment: `req.is("POST", "/channels/*/messages")`.
    pub fn is(&self, method: &str, pattern: &str) -> bool {
        if !self.method.eq_ignore_ascii_case(method) {
            return false;
        }
        let route: Vec<&str> = self.route().trim_matches('/').split('/').collect();
        let pattern: Vec<&str> = pattern.trim_matches('/').split('/').collect();
        route.len() == pattern.len() && route.iter().zip(&pattern).all(|(r, p)| *p == "*" || r == p)
    }

    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// A message as the bot sent it (channel message, forum starter message, or a message
/// belonging to an interaction), with its current state and every body that shaped it.
#[derive(Clone, Debug)]
pub struct FakeMessage {
    pub id: u64,
    pub channel_id: u64,
    pub content: String,
    /// The `components` array as sent (action rows), `[]` when none.
    pub components: Value,
    /// The `embeds` array as sent, `[]` when none.
    pub embeds: Value,
    /// The `allowed_mentions` object as sent, `Value::Null` when none.
    pub allowed_mentions: Value,
    pub flags: u64,
    /// The create body, then each edit body, in order.
    pub history: Vec<Value>,
    /// Number of edits applied after creation.
    pub edits: usize,
    pub deleted: bool,
    /// The interaction this message answers (original response or follow-up), if any.
    pub interaction_id: Option<u64>,
    pub created_at: String,
    pub edited_at: Option<String>,
    /// The files uploaded with it (multipart `files[N]` parts), in the order of its
    /// `attachments`.
    pub files: Vec<FakeFile>,
    /// Who wrote it: the bot, or a person ([`FakeDiscord::user_message`]).
    pub author_id: u64,
    /// The Unicode emoji the bot reacted with, in order (removed ones dropped).
    pub reactions: Vec<String>,
}

/// A file uploaded with a message.
#[derive(Clone, Debug)]
pub struct FakeFile {
    pub filename: String,
    pub content_type: String,
    pub data: Vec<u8>,
}

impl FakeMessage {
    pub fn is_ephemeral(&self) -> bool {
        self.flags & 64 != 0
    }

    /// The `custom_id`s of every component, in order.
    pub fn custom_ids(&self) -> Vec<String> {
        let mut ids = Vec::new();
        collect_custom_ids(&self.components, &mut ids);
        ids
    }
}

fn collect_custom_ids(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| collect_custom_ids(v, out)),
        Value::Object(map) => {
            if let Some(Value::String(id)) = map.get("custom_id") {
                out.push(id.clone());
            }
            if let Some(children) = map.get("components") {
                collect_custom_ids(children, out);
            }
        }
        _ => {}
    }
}

/// A thread the bot created (a forum post when `starter` is set).
#[derive(Clone, Debug)]
pub struct FakeThread {
    pub id: u64,
    pub parent_id: u64,
    pub name: String,
    pub archived: bool,
    pub locked: bool,
    /// The starter message (its id is the thread's id, as on Discord), current state.
    pub starter: Option<FakeMessage>,
    /// The create request body.
    pub create_body: Value,
    /// Every `PATCH /channels/{thread}` body, in order.
    pub edits: Vec<Value>,
}

/// What the bot did about one interaction.
#[derive(Clone, Debug, PartialEq)]
pub enum ResponseKind {
    /// `POST /interactions/{id}/{token}/callback` with this `type` (4 reply, 5 defer,
    /// 6 deferred update, 7 update message, 9 modal, ...).
    Callback(u64),
    /// `POST /webhooks/{app}/{token}`.
    Followup,
    /// `PATCH /webhooks/{app}/{token}/messages/@original`.
    EditOriginal,
    /// `DELETE /webhooks/{app}/{token}/messages/@original`.
    DeleteOriginal,
    /// `PATCH /webhooks/{app}/{token}/messages/{id}`.
    EditFollowup(u64),
    /// `DELETE /webhooks/{app}/{token}/messages/{id}`.
    DeleteFollowup(u64),
}

/// One delivered answer to an interaction.
#[derive(Clone, Debug)]
pub struct InteractionResponse {
    /// Index of the REST request that carried it (see [`RecordedRequest::index`]).
    pub request_index: usize,
    pub kind: ResponseKind,
    /// The request body as sent.
    pub body: Value,
    /// The message this response created or touched, if any.
    pub message_id: Option<u64>,
}

impl InteractionResponse {
    /// The message data: `body.data` for a callback, the body itself otherwise.
    pub fn data(&self) -> &Value {
        match self.kind {
            ResponseKind::Callback(_) => self.body.get("data").unwrap_or(&Value::Null),
            _ => &self.body,
        }
    }

    pub fn content(&self) -> Option<&str> {
        self.data().get("content").and_then(Value::as_str)
    }

    pub fn is_ephemeral(&self) -> bool {
        self.data()
            .get("flags")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            & 64
            != 0
    }
}

/// An interaction the fake dispatched.
#[derive(Clone, Debug)]
pub struct FakeInteraction {
    pub id: u64,
    pub token: String,
    /// 2 application command, 3 message component, 5 modal submit.
    pub kind: u8,
    pub channel_id: u64,
    /// The `d` of the dispatched `INTERACTION_CREATE`.
    pub payload: Value,
}
