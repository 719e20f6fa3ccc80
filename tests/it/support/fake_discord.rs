//! A fake Discord for tests: REST (HTTP/1.1) and the gateway (WebSocket) on one loopback
//! port, speaking enough of the real protocol that an unmodified serenity client and a poise
//! framework run against it.
//!
//! Point serenity at it with
//! `HttpBuilder::new(fake.token()).proxy(fake.base_url()).ratelimiter_disabled(true).build()`
//! (with the ratelimiter enabled serenity ignores the proxy). REST requests arrive as
//! `METHOD /api/v10/...`; `GET /api/v10/gateway` hands out `ws://127.0.0.1:PORT/ws`.
//!
//! Everything the bot does is recorded and can be read back through the plain Rust methods
//! of [`FakeDiscord`]: every REST request (also refused and unknown ones), registered
//! commands, forum posts, channel messages with their edit history, and the answers to each
//! interaction. Tests drive the bot with [`FakeDiscord::slash`], [`FakeDiscord::button`] and
//! [`FakeDiscord::modal_submit`], which dispatch `INTERACTION_CREATE` over the gateway.
//!
//! Every gateway payload the fake dispatches is first checked against serenity's own
//! `GatewayEvent` model, so a payload serenity would silently drop makes the test panic with
//! the deserialisation error instead of timing out.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use super::http::{RawRequest, connection, next_request, reason};

/// The only bot token the fake accepts (REST `Authorization: Bot <token>` and IDENTIFY).
pub const FAKE_TOKEN: &str = "MTAwMDAwMDAwMDAwMDAwMDA0.FakeDc.hanarang-fake-discord-token";
/// The application's owner, as `GET /oauth2/applications/@me` reports it.
pub const FAKE_OWNER_ID: u64 = 100_000_000_000_000_099;
/// The text channel slash commands and modal submits come from unless
/// [`FakeDiscord::set_command_channel`] says otherwise.
pub const DEFAULT_COMMAND_CHANNEL_ID: u64 = 100_000_000_000_000_010;
/// How long the `wait_*` helpers without a timeout argument wait before panicking.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

const API_PREFIX: &str = "/api/v10";
const FIRST_SNOWFLAKE: u64 = 1_200_000_000_000_000_000;
const HEARTBEAT_INTERVAL_MS: u64 = 41_250;
/// VIEW_CHANNEL | SEND_MESSAGES | EMBED_LINKS | READ_MESSAGE_HISTORY | USE_APPLICATION_COMMANDS
/// | SEND_MESSAGES_IN_THREADS: what a plain member has in the fake.
const MEMBER_PERMISSIONS: u64 =
    (1 << 10) | (1 << 11) | (1 << 14) | (1 << 16) | (1 << 31) | (1 << 38);
/// The bot's own permissions: the member set plus MANAGE_MESSAGES, MANAGE_THREADS,
/// CREATE_PUBLIC_THREADS.
const BOT_PERMISSIONS: u64 = MEMBER_PERMISSIONS | (1 << 13) | (1 << 34) | (1 << 35);

/// The ids the fake Discord is built around.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FakeConfig {
    pub guild_id: u64,
    pub forum_channel_id: u64,
    pub application_id: u64,
    pub bot_user_id: u64,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            guild_id: 100_000_000_000_000_001,
            forum_channel_id: 100_000_000_000_000_002,
            application_id: 100_000_000_000_000_003,
            bot_user_id: 100_000_000_000_000_004,
        }
    }
}

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

/// A running fake Discord. Dropping it stops the listener and its connections.
pub struct FakeDiscord {
    inner: Arc<Inner>,
    addr: SocketAddr,
}

struct Inner {
    config: FakeConfig,
    addr: SocketAddr,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    tasks: Mutex<Vec<AbortHandle>>,
}

struct GatewaySession {
    tx: mpsc::UnboundedSender<WsMessage>,
    session_id: String,
}

struct InteractionState {
    token: String,
    kind: u8,
    channel_id: u64,
    /// For components: the message the component is on.
    message_id: Option<u64>,
    callback: Option<u64>,
    original: Option<u64>,
    followups: Vec<u64>,
    responses: Vec<InteractionResponse>,
}

struct ThreadState {
    id: u64,
    parent_id: u64,
    name: String,
    archived: bool,
    locked: bool,
    has_starter: bool,
    auto_archive_duration: u64,
    create_body: Value,
    edits: Vec<Value>,
    created_at: String,
}

struct State {
    next_id: u64,
    requests: Vec<RecordedRequest>,
    /// Commands by guild (`None`: global).
    commands: BTreeMap<Option<u64>, Vec<Value>>,
    messages: BTreeMap<u64, FakeMessage>,
    threads: Vec<ThreadState>,
    interactions: HashMap<u64, InteractionState>,
    tokens: HashMap<String, u64>,
    gateway: Option<GatewaySession>,
    gateway_received: Vec<Value>,
    identify: Option<Value>,
    ready_count: usize,
    seq: u64,
    fail_next: u32,
    fail_next_status: u16,
    failing: Option<u16>,
    delay: Duration,
    roles: Vec<(u64, String)>,
    command_channel_id: u64,
    /// Channels (threads) deleted: every request about them is answered 404 Unknown Channel.
    deleted_channels: Vec<u64>,
    /// Channels the bot lost access to: 403 Missing Access.
    denied_channels: Vec<u64>,
    /// Channels whose every request fails with a status (a 503 on one thread).
    failing_channels: Vec<(u64, u16)>,
    /// The next posts of a message (`POST /channels/{id}/messages`) to fail, and how.
    fail_next_posts: (u32, u16),
}

impl State {
    fn snowflake(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

impl FakeDiscord {
    /// Binds 127.0.0.1 on a random port and starts serving REST and the gateway.
    pub async fn start(config: FakeConfig) -> FakeDiscord {
        FakeDiscord::start_on(config, 0).await
    }

    /// A loopback port nothing listens on (yet): where a Discord that is down is.
    pub fn unused_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free loopback port")
    }

    /// As `start`, on a given loopback port (`0`: any): Discord coming back where the bot
    /// has been trying to reach it.
    pub async fn start_on(config: FakeConfig, port: u16) -> FakeDiscord {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the fake Discord on loopback");
        let addr = listener.local_addr().expect("local addr");
        let (changed, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            config,
            addr,
            state: Mutex::new(State {
                next_id: FIRST_SNOWFLAKE,
                requests: Vec::new(),
                commands: BTreeMap::new(),
                messages: BTreeMap::new(),
                threads: Vec::new(),
                interactions: HashMap::new(),
                tokens: HashMap::new(),
                gateway: None,
                gateway_received: Vec::new(),
                identify: None,
                ready_count: 0,
                seq: 0,
                fail_next: 0,
                fail_next_status: 500,
                failing: None,
                delay: Duration::ZERO,
                roles: Vec::new(),
                command_channel_id: DEFAULT_COMMAND_CHANNEL_ID,
                deleted_channels: Vec::new(),
                denied_channels: Vec::new(),
                failing_channels: Vec::new(),
                fail_next_posts: (0, 500),
            }),
            changed,
            tasks: Mutex::new(Vec::new()),
        });
        let accept_inner = Arc::clone(&inner);
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let conn_inner = Arc::clone(&accept_inner);
                let task = tokio::spawn(async move {
                    serve_connection(conn_inner, stream).await;
                });
                let mut tasks = lock(&accept_inner.tasks);
                tasks.retain(|t| !t.is_finished());
                tasks.push(task.abort_handle());
            }
        });
        lock(&inner.tasks).push(accept.abort_handle());
        FakeDiscord { inner, addr }
    }

    pub fn config(&self) -> FakeConfig {
        self.inner.config
    }

    /// `http://127.0.0.1:PORT`, for `HttpBuilder::proxy`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `ws://127.0.0.1:PORT/ws`, what `GET /gateway` answers.
    pub fn gateway_url(&self) -> String {
        gateway_url(self.addr)
    }

    /// The bot token the fake accepts.
    pub fn token(&self) -> &'static str {
        FAKE_TOKEN
    }

    /// Waits (up to [`DEFAULT_WAIT`]) until a bot has identified and received READY;
    /// panics with the recorded requests otherwise.
    pub async fn wait_ready(&self) {
        if !self.wait_until(DEFAULT_WAIT, |f| f.ready_count() > 0).await {
            panic!(
                "the bot never identified on the fake gateway; requests: {:#?}",
                self.requests()
            );
        }
    }

    /// How many READY events were sent (one per successful IDENTIFY).
    pub fn ready_count(&self) -> usize {
        self.state().ready_count
    }

    /// Whether a gateway session is currently open (identified or resumed).
    pub fn gateway_connected(&self) -> bool {
        self.state().gateway.is_some()
    }

    /// The last IDENTIFY payload's `d`.
    pub fn identify_payload(&self) -> Option<Value> {
        self.state().identify.clone()
    }

    /// Every gateway payload the bot sent (IDENTIFY, heartbeats, presence updates, ...).
    pub fn gateway_received(&self) -> Vec<Value> {
        self.state().gateway_received.clone()
    }

    /// The commands registered in the configured guild (last `PUT` wins), as echoed back.
    pub fn commands(&self) -> Vec<Value> {
        let guild = self.inner.config.guild_id;
        self.state()
            .commands
            .get(&Some(guild))
            .cloned()
            .unwrap_or_default()
    }

    /// The globally registered commands.
    pub fn global_commands(&self) -> Vec<Value> {
        self.state()
            .commands
            .get(&None)
            .cloned()
            .unwrap_or_default()
    }

    /// Snapshot of every REST request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state().requests.clone()
    }

    /// The requests the fake had no route for (answered 404).
    pub fn unknown_requests(&self) -> Vec<RecordedRequest> {
        self.state()
            .requests
            .iter()
            .filter(|r| !r.known_route)
            .cloned()
            .collect()
    }

    /// Waits until a recorded request (already there or arriving) satisfies `predicate`.
    pub async fn wait_for_request(
        &self,
        predicate: impl Fn(&RecordedRequest) -> bool,
        timeout: Duration,
    ) -> Option<RecordedRequest> {
        let mut found = None;
        self.wait_until(timeout, |f| {
            found = f.state().requests.iter().find(|r| predicate(r)).cloned();
            found.is_some()
        })
        .await;
        found
    }

    /// Waits until `condition` holds, re-checking after every change in the fake's state.
    /// Returns whether it held before `timeout`.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut condition: impl FnMut(&FakeDiscord) -> bool,
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

    /// The threads the bot created, in creation order.
    pub fn threads(&self) -> Vec<FakeThread> {
        let state = self.state();
        state
            .threads
            .iter()
            .map(|t| FakeThread {
                id: t.id,
                parent_id: t.parent_id,
                name: t.name.clone(),
                archived: t.archived,
                locked: t.locked,
                starter: if t.has_starter {
                    state.messages.get(&t.id).cloned()
                } else {
                    None
                },
                create_body: t.create_body.clone(),
                edits: t.edits.clone(),
            })
            .collect()
    }

    /// The current (not deleted) messages in a channel or thread, oldest first, including a
    /// forum post's starter message. Interaction responses are not here; see
    /// [`FakeDiscord::interaction_responses`].
    /// The messages of the first forum post after its starter message (the status
    /// board): the lines a bridge posted, in order.
    pub fn post_lines(&self) -> Vec<FakeMessage> {
        let Some(thread) = self.threads().into_iter().next() else {
            return Vec::new();
        };
        self.messages(thread.id)
            .into_iter()
            .filter(|m| m.id != thread.id)
            .collect()
    }

    pub fn messages(&self, channel_id: u64) -> Vec<FakeMessage> {
        self.state()
            .messages
            .values()
            .filter(|m| m.channel_id == channel_id && !m.deleted && m.interaction_id.is_none())
            .cloned()
            .collect()
    }

    /// Any message the fake knows by id (deleted ones and interaction messages included).
    pub fn message(&self, message_id: u64) -> Option<FakeMessage> {
        self.state().messages.get(&message_id).cloned()
    }

    /// The channel [`FakeDiscord::slash`] and [`FakeDiscord::modal_submit`] use.
    pub fn set_command_channel(&self, channel_id: u64) {
        self.state().command_channel_id = channel_id;
    }

    /// Adds a role to the guild (`GET /guilds/{id}/roles`, GUILD_CREATE of later sessions).
    pub fn add_role(&self, role_id: u64, name: &str) {
        self.state().roles.push((role_id, name.to_string()));
    }

    /// Dispatches an application-command interaction (`type 2`) for the command
    /// `name_path` (`&["sprint", "start"]`: command, then subcommand group/subcommand).
    /// `options` are the leaf options: an object `{"goal": "text", "round": 2}` (option types
    /// taken from the registered command when known, else inferred from the JSON type) or
    /// an array of raw `{name, type, value}` options. Panics when no gateway session is open.
    pub fn slash(
        &self,
        user_id: u64,
        roles: &[u64],
        name_path: &[&str],
        options: Value,
    ) -> FakeInteraction {
        assert!(!name_path.is_empty(), "slash needs at least a command name");
        let registered = self
            .commands()
            .into_iter()
            .chain(self.global_commands())
            .find(|c| c["name"] == name_path[0]);
        let command_id = registered
            .as_ref()
            .and_then(|c| c["id"].as_str())
            .and_then(|id| id.parse::<u64>().ok());
        // Walk the registered tree alongside the path, to find the leaf's option types.
        let mut node = registered.clone();
        for name in &name_path[1..] {
            node = node.and_then(|n| {
                n["options"]
                    .as_array()
                    .and_then(|opts| opts.iter().find(|o| o["name"] == *name).cloned())
            });
        }
        let leaf_options = build_options(options, node.as_ref());
        // Wrap from the leaf outwards: the last path element is a subcommand (type 1), the
        // ones between the command and it are subcommand groups (type 2).
        let mut opts = leaf_options;
        for (depth, name) in name_path.iter().enumerate().skip(1).rev() {
            let kind = if depth == name_path.len() - 1 { 1 } else { 2 };
            opts = json!([{ "name": name, "type": kind, "options": opts }]);
        }
        let (channel_id, command_id) = {
            let mut state = self.state();
            let id = command_id.unwrap_or_else(|| state.snowflake());
            (state.command_channel_id, id)
        };
        let data = json!({
            "id": command_id.to_string(),
            "name": name_path[0],
            "type": 1,
            "options": opts,
            "guild_id": self.inner.config.guild_id.to_string(),
        });
        self.interaction(2, user_id, roles, channel_id, data, None)
    }

    /// Dispatches a button click (`type 3`) on `message_id` in `channel_id`. The `message`
    /// object is the one the bot sent when the fake knows it, else a stub from the bot.
    pub fn button(
        &self,
        user_id: u64,
        roles: &[u64],
        custom_id: &str,
        message_id: u64,
        channel_id: u64,
    ) -> FakeInteraction {
        let message = {
            let state = self.state();
            match state.messages.get(&message_id) {
                Some(m) => message_json(&self.inner.config, m),
                None => {
                    let stub = new_message(message_id, channel_id, &json!({"content": ""}), None);
                    message_json(&self.inner.config, &stub)
                }
            }
        };
        let data = json!({ "custom_id": custom_id, "component_type": 2 });
        self.interaction(
            3,
            user_id,
            roles,
            channel_id,
            data,
            Some((message_id, message)),
        )
    }

    /// Dispatches a modal submit (`type 5`) with text inputs `(custom_id, value)`, one per
    /// action row.
    pub fn modal_submit(
        &self,
        user_id: u64,
        roles: &[u64],
        custom_id: &str,
        fields: &[(&str, &str)],
    ) -> FakeInteraction {
        let rows: Vec<Value> = fields
            .iter()
            .map(|(id, value)| {
                json!({ "type": 1, "components": [{ "type": 4, "custom_id": id, "value": value }] })
            })
            .collect();
        let data = json!({ "custom_id": custom_id, "components": rows });
        let channel_id = self.state().command_channel_id;
        self.interaction(5, user_id, roles, channel_id, data, None)
    }

    /// The delivered answers to an interaction (callback, follow-ups, edits), in order.
    pub fn interaction_responses(&self, interaction_id: u64) -> Vec<InteractionResponse> {
        self.state()
            .interactions
            .get(&interaction_id)
            .map(|i| i.responses.clone())
            .unwrap_or_default()
    }

    /// Waits until the interaction has at least `count` delivered answers and returns them;
    /// panics after `timeout` with the requests seen.
    pub async fn wait_for_responses(
        &self,
        interaction_id: u64,
        count: usize,
        timeout: Duration,
    ) -> Vec<InteractionResponse> {
        let ok = self
            .wait_until(timeout, |f| {
                f.interaction_responses(interaction_id).len() >= count
            })
            .await;
        assert!(
            ok,
            "interaction {interaction_id} got {} answers, wanted {count}; requests: {:#?}",
            self.interaction_responses(interaction_id).len(),
            self.requests()
        );
        self.interaction_responses(interaction_id)
    }

    /// The next `n` REST writes (POST/PATCH/PUT under `/channels` and `/webhooks`) are
    /// answered with `status` and not delivered.
    pub fn fail_next(&self, n: u32, status: u16) {
        let mut state = self.state();
        state.fail_next = n;
        state.fail_next_status = status;
    }

    /// While on, every REST write (as in [`FakeDiscord::fail_next`]) is answered with
    /// `status` and not delivered.
    pub fn set_failing(&self, on: bool, status: u16) {
        self.state().failing = on.then_some(status);
    }

    /// Someone deleted this channel (a sprint's forum post): it is answered 404 Unknown
    /// Channel from now on.
    pub fn delete_channel(&self, channel_id: u64) {
        self.state().deleted_channels.push(channel_id);
    }

    /// The bot lost its access to this channel: 403 Missing Access from now on.
    pub fn deny_channel(&self, channel_id: u64) {
        self.state().denied_channels.push(channel_id);
    }

    /// The next `n` message posts (`POST /channels/{id}/messages`, not board edits or new
    /// threads) are answered with `status` and not delivered.
    pub fn fail_next_posts(&self, n: u32, status: u16) {
        self.state().fail_next_posts = (n, status);
    }

    /// Every request about this channel fails with `status` (`None`: it works again).
    pub fn fail_channel(&self, channel_id: u64, status: Option<u16>) {
        let mut state = self.state();
        state.failing_channels.retain(|(id, _)| *id != channel_id);
        if let Some(status) = status {
            state.failing_channels.push((channel_id, status));
        }
    }

    /// Delays every REST answer by `delay` (before the request is handled).
    pub fn set_delay(&self, delay: Duration) {
        self.state().delay = delay;
    }

    /// Dispatches any gateway event (`op 0`, next sequence number). Panics when no session
    /// is open or when serenity could not deserialise the event.
    pub fn dispatch(&self, event: &str, data: Value) {
        if let Err(e) = self.inner.dispatch(event, data) {
            panic!("{e}");
        }
    }

    /// Closes the gateway connection with `code` (e.g. 4000: serenity resumes; 4004:
    /// authentication failed, serenity gives up).
    pub fn close_gateway(&self, code: u16) {
        let mut state = self.state();
        if let Some(session) = state.gateway.take() {
            let _ = session.tx.send(WsMessage::Close(Some(CloseFrame {
                code: CloseCode::from(code),
                reason: "closed by the fake".into(),
            })));
        }
        drop(state);
        self.inner.bump();
    }

    fn interaction(
        &self,
        kind: u8,
        user_id: u64,
        roles: &[u64],
        channel_id: u64,
        data: Value,
        message: Option<(u64, Value)>,
    ) -> FakeInteraction {
        let config = self.inner.config;
        let (id, token) = {
            let mut state = self.state();
            let id = state.snowflake();
            let token = format!("fake-interaction-token-{id}");
            state.tokens.insert(token.clone(), id);
            state.interactions.insert(
                id,
                InteractionState {
                    token: token.clone(),
                    kind,
                    channel_id,
                    message_id: message.as_ref().map(|(id, _)| *id),
                    callback: None,
                    original: None,
                    followups: Vec::new(),
                    responses: Vec::new(),
                },
            );
            (id, token)
        };
        let mut payload = json!({
            "id": id.to_string(),
            "application_id": config.application_id.to_string(),
            "type": kind,
            "data": data,
            "guild_id": config.guild_id.to_string(),
            "channel_id": channel_id.to_string(),
            "member": member_json(user_id, roles, Some(MEMBER_PERMISSIONS)),
            "token": token,
            "version": 1,
            "app_permissions": BOT_PERMISSIONS.to_string(),
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": { "0": config.guild_id.to_string() },
            "context": 0,
            "attachment_size_limit": 10_485_760,
        });
        if let Some((_, message)) = message {
            payload["message"] = message;
        }
        self.dispatch("INTERACTION_CREATE", payload.clone());
        FakeInteraction {
            id,
            token,
            kind,
            channel_id,
            payload,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.state)
    }
}

impl Drop for FakeDiscord {
    fn drop(&mut self) {
        for task in lock(&self.inner.tasks).drain(..) {
            task.abort();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn gateway_url(addr: SocketAddr) -> String {
    format!("ws://{addr}/ws")
}

fn now() -> String {
    serenity::model::Timestamp::now().to_string()
}

/// Leaf options for a slash interaction from the test's JSON.
fn build_options(options: Value, registered: Option<&Value>) -> Value {
    match options {
        Value::Array(_) => options,
        Value::Null => json!([]),
        Value::Object(map) => {
            let registered_type = |name: &str| -> Option<u64> {
                registered?["options"]
                    .as_array()?
                    .iter()
                    .find(|o| o["name"] == name)?["type"]
                    .as_u64()
            };
            let opts: Vec<Value> = map
                .into_iter()
                .map(|(name, value)| {
                    let kind = registered_type(&name).unwrap_or(match &value {
                        Value::Bool(_) => 5,
                        Value::Number(n) if n.is_f64() => 10,
                        Value::Number(_) => 4,
                        _ => 3,
                    });
                    json!({ "name": name, "type": kind, "value": value })
                })
                .collect();
            Value::Array(opts)
        }
        other => panic!("slash options must be an object or an array, got {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// JSON objects as Discord sends them
// ---------------------------------------------------------------------------------------

fn user_json(id: u64, bot: bool) -> Value {
    let name = if bot {
        "hanarang-fake-bot".to_string()
    } else {
        format!("user{id}")
    };
    json!({
        "id": id.to_string(),
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": null,
        "bot": bot,
        "system": false,
        "public_flags": 0,
        "flags": 0,
    })
}

fn member_json(user_id: u64, roles: &[u64], permissions: Option<u64>) -> Value {
    let mut member = json!({
        "user": user_json(user_id, false),
        "nick": null,
        "avatar": null,
        "roles": roles.iter().map(u64::to_string).collect::<Vec<_>>(),
        "joined_at": "2024-01-01T00:00:00.000Z",
        "premium_since": null,
        "deaf": false,
        "mute": false,
        "flags": 0,
        "pending": false,
        "communication_disabled_until": null,
    });
    if let Some(permissions) = permissions {
        member["permissions"] = json!(permissions.to_string());
    }
    member
}

fn role_json(id: u64, name: &str, permissions: u64, position: u64) -> Value {
    json!({
        "id": id.to_string(),
        "name": name,
        "color": 0,
        "colors": { "primary_color": 0, "secondary_color": null, "tertiary_color": null },
        "hoist": false,
        "icon": null,
        "unicode_emoji": null,
        "position": position,
        "permissions": permissions.to_string(),
        "managed": false,
        "mentionable": false,
        "flags": 0,
    })
}

fn roles_json(config: &FakeConfig, roles: &[(u64, String)]) -> Vec<Value> {
    let mut out = vec![role_json(
        config.guild_id,
        "@everyone",
        MEMBER_PERMISSIONS,
        0,
    )];
    out.extend(
        roles
            .iter()
            .enumerate()
            .map(|(i, (id, name))| role_json(*id, name, MEMBER_PERMISSIONS, i as u64 + 1)),
    );
    out
}

fn new_message(id: u64, channel_id: u64, body: &Value, interaction_id: Option<u64>) -> FakeMessage {
    FakeMessage {
        id,
        channel_id,
        content: body["content"].as_str().unwrap_or_default().to_string(),
        components: array_or_empty(&body["components"]),
        embeds: array_or_empty(&body["embeds"]),
        allowed_mentions: body["allowed_mentions"].clone(),
        flags: body["flags"].as_u64().unwrap_or(0),
        history: vec![body.clone()],
        edits: 0,
        deleted: false,
        interaction_id,
        created_at: now(),
        edited_at: None,
    }
}

fn apply_edit(message: &mut FakeMessage, body: &Value) {
    if let Some(content) = body.get("content") {
        message.content = content.as_str().unwrap_or_default().to_string();
    }
    if let Some(components) = body.get("components") {
        message.components = array_or_empty(components);
    }
    if let Some(embeds) = body.get("embeds") {
        message.embeds = array_or_empty(embeds);
    }
    if let Some(allowed) = body.get("allowed_mentions") {
        message.allowed_mentions = allowed.clone();
    }
    if let Some(flags) = body.get("flags").and_then(Value::as_u64) {
        message.flags = flags;
    }
    message.history.push(body.clone());
    message.edits += 1;
    message.edited_at = Some(now());
}

fn array_or_empty(value: &Value) -> Value {
    if value.is_array() {
        value.clone()
    } else {
        json!([])
    }
}

fn message_json(config: &FakeConfig, m: &FakeMessage) -> Value {
    let mut embeds = m.embeds.clone();
    if let Some(list) = embeds.as_array_mut() {
        for embed in list {
            if embed.get("type").is_none() {
                embed["type"] = json!("rich");
            }
        }
    }
    let mut message = json!({
        "id": m.id.to_string(),
        "channel_id": m.channel_id.to_string(),
        "guild_id": config.guild_id.to_string(),
        "author": user_json(config.bot_user_id, true),
        "content": m.content,
        "timestamp": m.created_at,
        "edited_timestamp": m.edited_at,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "mention_channels": [],
        "attachments": [],
        "embeds": embeds,
        "reactions": [],
        "pinned": false,
        "type": if m.interaction_id.is_some() { 20 } else { 0 },
        "flags": m.flags,
        "components": m.components,
        "webhook_id": null,
    });
    if m.interaction_id.is_some() {
        message["webhook_id"] = json!(config.application_id.to_string());
        message["application_id"] = json!(config.application_id.to_string());
    }
    message
}

fn forum_json(config: &FakeConfig) -> Value {
    json!({
        "id": config.forum_channel_id.to_string(),
        "type": 15,
        "guild_id": config.guild_id.to_string(),
        "name": "sprints",
        "position": 1,
        "parent_id": null,
        "permission_overwrites": [],
        "nsfw": false,
        "topic": null,
        "rate_limit_per_user": 0,
        "last_message_id": null,
        "flags": 0,
        "available_tags": [],
        "default_reaction_emoji": null,
        "default_thread_rate_limit_per_user": 0,
        "default_sort_order": null,
        "default_forum_layout": 0,
    })
}

fn text_channel_json(config: &FakeConfig, id: u64) -> Value {
    json!({
        "id": id.to_string(),
        "type": 0,
        "guild_id": config.guild_id.to_string(),
        "name": "general",
        "position": 0,
        "parent_id": null,
        "permission_overwrites": [],
        "nsfw": false,
        "topic": null,
        "rate_limit_per_user": 0,
        "last_message_id": null,
        "flags": 0,
    })
}

fn thread_json(config: &FakeConfig, t: &ThreadState, message_count: usize) -> Value {
    json!({
        "id": t.id.to_string(),
        "type": 11,
        "guild_id": config.guild_id.to_string(),
        "parent_id": t.parent_id.to_string(),
        "owner_id": config.bot_user_id.to_string(),
        "name": t.name,
        "last_message_id": t.id.to_string(),
        "rate_limit_per_user": 0,
        "message_count": message_count,
        "member_count": 1,
        "total_message_sent": message_count,
        "flags": 0,
        "applied_tags": t.create_body.get("applied_tags").cloned().unwrap_or(json!([])),
        "thread_metadata": {
            "archived": t.archived,
            "auto_archive_duration": t.auto_archive_duration,
            "archive_timestamp": t.created_at,
            "locked": t.locked,
            "create_timestamp": t.created_at,
        },
        "member": {
            "id": t.id.to_string(),
            "user_id": config.bot_user_id.to_string(),
            "join_timestamp": t.created_at,
            "flags": 1,
        },
    })
}

fn guild_json(config: &FakeConfig, roles: &[(u64, String)]) -> Value {
    json!({
        "id": config.guild_id.to_string(),
        "name": "hanarang-fake-guild",
        "icon": null,
        "icon_hash": null,
        "splash": null,
        "discovery_splash": null,
        "owner_id": FAKE_OWNER_ID.to_string(),
        "afk_channel_id": null,
        "afk_timeout": 300,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "roles": roles_json(config, roles),
        "emojis": [],
        "features": [],
        "mfa_level": 0,
        "application_id": null,
        "system_channel_id": null,
        "system_channel_flags": 0,
        "rules_channel_id": null,
        "vanity_url_code": null,
        "description": null,
        "banner": null,
        "premium_tier": 0,
        "premium_subscription_count": 0,
        "preferred_locale": "en-US",
        "public_updates_channel_id": null,
        "nsfw_level": 0,
        "stickers": [],
        "premium_progress_bar_enabled": false,
        "safety_alerts_channel_id": null,
    })
}

/// Checks that serenity can read `value` as `T`; the error text otherwise.
fn serenity_reads<T: serde::de::DeserializeOwned>(value: &Value) -> Result<(), String> {
    serde_json::from_value::<T>(value.clone())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------
// Gateway
// ---------------------------------------------------------------------------------------

impl Inner {
    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    fn dispatch(&self, event: &str, data: Value) -> Result<(), String> {
        let mut state = lock(&self.state);
        let result = Self::dispatch_locked(&mut state, event, data);
        drop(state);
        self.bump();
        result
    }

    fn dispatch_locked(state: &mut State, event: &str, data: Value) -> Result<(), String> {
        let Some(session) = &state.gateway else {
            return Err(format!(
                "no gateway session is open to dispatch {event}; call wait_ready() first"
            ));
        };
        let tx = session.tx.clone();
        state.seq += 1;
        let payload = json!({ "op": 0, "t": event, "s": state.seq, "d": data });
        serenity_reads::<serenity::model::event::GatewayEvent>(&payload).map_err(|e| {
            format!("serenity cannot read the fake's {event}: {e}\npayload: {payload:#}")
        })?;
        tx.send(WsMessage::Text(payload.to_string()))
            .map_err(|_| format!("the gateway connection is gone; {event} not sent"))
    }

    fn ready_payloads(
        &self,
        state: &mut State,
        session_id: &str,
        shard: Value,
    ) -> Result<(), String> {
        let config = &self.config;
        let ready = json!({
            "v": 10,
            "user": {
                "id": config.bot_user_id.to_string(),
                "username": "hanarang-fake-bot",
                "discriminator": "0",
                "global_name": null,
                "avatar": null,
                "bot": true,
                "verified": true,
                "mfa_enabled": false,
                "flags": 0,
            },
            "guilds": [{ "id": config.guild_id.to_string(), "unavailable": true }],
            "session_id": session_id,
            "resume_gateway_url": gateway_url(self.addr),
            "shard": shard,
            "application": { "id": config.application_id.to_string(), "flags": 0 },
            "private_channels": [],
            "presences": [],
            "relationships": [],
            "_trace": ["fake-discord"],
        });
        Self::dispatch_locked(state, "READY", ready)?;
        let mut guild = guild_json(config, &state.roles);
        let mut channels = vec![forum_json(config)];
        if state.command_channel_id != config.forum_channel_id {
            channels.push(text_channel_json(config, state.command_channel_id));
        }
        let threads: Vec<Value> = state
            .threads
            .iter()
            .filter(|t| !t.archived)
            .map(|t| thread_json(config, t, 0))
            .collect();
        let mut bot = member_json(config.bot_user_id, &[], None);
        bot["user"] = user_json(config.bot_user_id, true);
        let extra = json!({
            "joined_at": "2024-01-01T00:00:00.000Z",
            "large": false,
            "unavailable": false,
            "member_count": 2,
            "voice_states": [],
            "members": [bot],
            "channels": channels,
            "threads": threads,
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
        });
        for (k, v) in extra.as_object().expect("object") {
            guild[k] = v.clone();
        }
        Self::dispatch_locked(state, "GUILD_CREATE", guild)
    }
}

async fn serve_gateway(inner: Arc<Inner>, ws: WebSocketStream<BufReader<TcpStream>>) {
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<WsMessage>();
    let writer = tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            let closing = matches!(message, WsMessage::Close(_));
            if sink.send(message).await.is_err() || closing {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let hello = json!({ "op": 10, "s": null, "t": null, "d": { "heartbeat_interval": HEARTBEAT_INTERVAL_MS } });
    let _ = tx.send(WsMessage::Text(hello.to_string()));

    while let Some(Ok(message)) = stream.next().await {
        let text = match message {
            WsMessage::Text(text) => text,
            WsMessage::Binary(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            WsMessage::Close(_) => break,
            _ => continue,
        };
        let Ok(payload) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        inner.on_gateway_payload(&tx, payload);
        inner.bump();
    }

    {
        let mut state = lock(&inner.state);
        if state
            .gateway
            .as_ref()
            .is_some_and(|s| s.tx.same_channel(&tx))
        {
            state.gateway = None;
        }
    }
    inner.bump();
    drop(tx);
    let _ = writer.await;
}

impl Inner {
    /// One payload the bot sent over the gateway.
    fn on_gateway_payload(&self, tx: &mpsc::UnboundedSender<WsMessage>, payload: Value) {
        let mut state = lock(&self.state);
        state.gateway_received.push(payload.clone());
        match payload["op"].as_u64() {
            Some(1) => {
                let _ = tx.send(WsMessage::Text(
                    json!({ "op": 11, "s": null, "t": null, "d": null }).to_string(),
                ));
            }
            Some(2) => {
                state.identify = Some(payload["d"].clone());
                if payload["d"]["token"].as_str().map(strip_bot) != Some(FAKE_TOKEN) {
                    let _ = tx.send(WsMessage::Close(Some(CloseFrame {
                        code: CloseCode::from(4004),
                        reason: "Authentication failed.".into(),
                    })));
                } else {
                    let session_id = format!("fake-session-{}", state.snowflake());
                    state.gateway = Some(GatewaySession {
                        tx: tx.clone(),
                        session_id: session_id.clone(),
                    });
                    state.seq = 0;
                    let shard = payload["d"]["shard"].clone();
                    let shard = if shard.is_array() {
                        shard
                    } else {
                        json!([0, 1])
                    };
                    match self.ready_payloads(&mut state, &session_id, shard) {
                        Ok(()) => state.ready_count += 1,
                        Err(e) => eprintln!("fake discord: READY not sent: {e}"),
                    }
                }
            }
            Some(6) => {
                let d = &payload["d"];
                let known = state.identify.is_some()
                    && d["token"].as_str().map(strip_bot) == Some(FAKE_TOKEN);
                if known {
                    let session_id = d["session_id"].as_str().unwrap_or_default().to_string();
                    state.gateway = Some(GatewaySession {
                        tx: tx.clone(),
                        session_id,
                    });
                    if let Err(e) = Inner::dispatch_locked(&mut state, "RESUMED", json!({})) {
                        eprintln!("fake discord: RESUMED not sent: {e}");
                    }
                } else {
                    let _ = tx.send(WsMessage::Text(
                        json!({ "op": 9, "s": null, "t": null, "d": false }).to_string(),
                    ));
                }
            }
            _ => {}
        }
    }
}

fn strip_bot(token: &str) -> &str {
    token.strip_prefix("Bot ").unwrap_or(token)
}

// ---------------------------------------------------------------------------------------
// HTTP/1.1
// ---------------------------------------------------------------------------------------

struct Reply {
    status: u16,
    body: Option<Value>,
}

impl Reply {
    fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            body: Some(body),
        }
    }

    fn ok(body: Value) -> Reply {
        Reply::json(200, body)
    }

    fn no_content() -> Reply {
        Reply {
            status: 204,
            body: None,
        }
    }

    fn error(status: u16, code: u64, message: &str) -> Reply {
        Reply::json(status, json!({ "message": message, "code": code }))
    }

    fn not_found_route() -> Reply {
        Reply::error(404, 0, "404: Not Found")
    }

    fn invalid_form(path: &str, code: &str, message: &str) -> Reply {
        Reply::json(
            400,
            json!({
                "message": "Invalid Form Body",
                "code": 50035,
                "errors": { path: { "_errors": [{ "code": code, "message": message }] } },
            }),
        )
    }
}

async fn write_reply(stream: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    let body = reply
        .body
        .as_ref()
        .map(|b| b.to_string())
        .unwrap_or_default();
    if reply.status == 429 {
        head.push_str("retry-after: 1\r\nx-ratelimit-global: false\r\nx-ratelimit-scope: user\r\n");
    }
    if reply.status != 204 {
        head.push_str("content-type: application/json\r\n");
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    if reply.status != 204 {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.flush().await
}

async fn serve_connection(inner: Arc<Inner>, stream: TcpStream) {
    let mut reader = connection(stream);
    while let Some(request) = next_request(&mut reader).await {
        let upgrade = request
            .header("upgrade")
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
        if upgrade && request.target.starts_with("/ws") {
            let Some(key) = request.header("sec-websocket-key") else {
                return;
            };
            let accept = derive_accept_key(key.as_bytes());
            let head = format!(
                "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: {accept}\r\n\r\n"
            );
            if reader.get_mut().write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let ws = WebSocketStream::from_raw_socket(reader, Role::Server, None).await;
            serve_gateway(inner, ws).await;
            return;
        }
        let delay = lock(&inner.state).delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let close = request.wants_close();
        let reply = inner.handle(&request);
        inner.bump();
        if write_reply(reader.get_mut(), &reply).await.is_err() || close {
            return;
        }
    }
}

/// The JSON body of a request: plain JSON, or the `payload_json` part of a multipart form.
fn parse_body(request: &RawRequest) -> Value {
    if request.body.is_empty() {
        return Value::Null;
    }
    let content_type = request
        .header("content-type")
        .unwrap_or_default()
        .to_ascii_lowercase();
    if content_type.starts_with("multipart/form-data") {
        let text = String::from_utf8_lossy(&request.body);
        let Some(start) = text.find("name=\"payload_json\"") else {
            return Value::Null;
        };
        let rest = &text[start..];
        let Some(body_start) = rest.find("\r\n\r\n") else {
            return Value::Null;
        };
        let rest = &rest[body_start + 4..];
        let end = rest.find("\r\n--").unwrap_or(rest.len());
        return serde_json::from_str(&rest[..end]).unwrap_or(Value::Null);
    }
    serde_json::from_slice(&request.body).unwrap_or(Value::Null)
}

fn parse_id(segment: &str) -> Option<u64> {
    segment.parse().ok()
}

/// Discord's checks on a message body that the bridge could plausibly get wrong.
fn validate_message(body: &Value, require_non_empty: bool) -> Result<(), Reply> {
    if let Some(content) = body.get("content").and_then(Value::as_str)
        && content.chars().count() > 2000
    {
        return Err(Reply::invalid_form(
            "content",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 2000 or fewer in length.",
        ));
    }
    if body
        .get("embeds")
        .and_then(Value::as_array)
        .is_some_and(|e| e.len() > 10)
    {
        return Err(Reply::invalid_form(
            "embeds",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 10 or fewer in length.",
        ));
    }
    if body
        .get("components")
        .and_then(Value::as_array)
        .is_some_and(|c| c.len() > 5)
    {
        return Err(Reply::invalid_form(
            "components",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 5 or fewer in length.",
        ));
    }
    let allowed = &body["allowed_mentions"];
    for kind in ["users", "roles"] {
        let parsed = allowed["parse"]
            .as_array()
            .is_some_and(|p| p.iter().any(|v| v == kind));
        let listed = allowed[kind].as_array().is_some_and(|l| !l.is_empty());
        if parsed && listed {
            return Err(Reply::invalid_form(
                "allowed_mentions",
                "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE",
                &format!("parse:[\"{kind}\"] and {kind}: [ids] are mutually exclusive."),
            ));
        }
    }
    if require_non_empty {
        let has = |k: &str| match &body[k] {
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            _ => false,
        };
        if ![
            "content",
            "embeds",
            "components",
            "attachments",
            "sticker_ids",
            "poll",
        ]
        .iter()
        .any(|k| has(k))
        {
            return Err(Reply::error(400, 50006, "Cannot send an empty message"));
        }
    }
    Ok(())
}

impl Inner {
    fn handle(&self, request: &RawRequest) -> Reply {
        let (path, query) = match request.target.split_once('?') {
            Some((p, q)) => (p.to_string(), Some(q.to_string())),
            None => (request.target.clone(), None),
        };
        let body = parse_body(request);
        let method = request.method.to_ascii_uppercase();
        let authorization = request.header("authorization").map(str::to_string);
        let route = path.strip_prefix(API_PREFIX).unwrap_or(&path).to_string();
        let segments: Vec<&str> = route.trim_matches('/').split('/').collect();

        let mut state = lock(&self.state);
        let index = state.requests.len();
        let token_free = matches!(segments.first(), Some(&"interactions") | Some(&"webhooks"));
        let authorized = match authorization.as_deref() {
            Some(value) => value.strip_prefix("Bot ").map(str::trim) == Some(FAKE_TOKEN),
            None => token_free,
        };

        let is_write = matches!(method.as_str(), "POST" | "PATCH" | "PUT")
            && matches!(segments.first(), Some(&"channels") | Some(&"webhooks"));
        let mut injected = false;
        let mut known = true;
        let reply = if !path.starts_with(API_PREFIX) {
            known = false;
            Reply::not_found_route()
        } else if !authorized {
            Reply::error(401, 0, "401: Unauthorized")
        } else if let Some(reply) = channel_gone(&state, &segments) {
            reply
        } else if method == "POST"
            && matches!(segments.as_slice(), ["channels", _, "messages"])
            && state.fail_next_posts.0 > 0
        {
            injected = true;
            state.fail_next_posts.0 -= 1;
            let status = state.fail_next_posts.1;
            Reply::error(status, 0, &format!("{status}: {}", reason(status)))
        } else if is_write && (state.failing.is_some() || state.fail_next > 0) {
            injected = true;
            let status = match state.failing {
                Some(status) => status,
                None => {
                    state.fail_next -= 1;
                    state.fail_next_status
                }
            };
            if status == 429 {
                Reply::json(
                    429,
                    json!({ "message": "You are being rate limited.", "retry_after": 1.0, "global": false, "code": 0 }),
                )
            } else {
                Reply::error(status, 0, &format!("{status}: {}", reason(status)))
            }
        } else {
            match self.route(&mut state, &method, &segments, &body, index) {
                Some(reply) => reply,
                None => {
                    known = false;
                    Reply::not_found_route()
                }
            }
        };
        state.requests.push(RecordedRequest {
            index,
            at: std::time::Instant::now(),
            method,
            path,
            query,
            body,
            status: reply.status,
            authorization,
            known_route: known,
            injected_failure: injected,
        });
        reply
    }

    /// `None` when the fake has no such route.
    fn route(
        &self,
        state: &mut State,
        method: &str,
        segments: &[&str],
        body: &Value,
        index: usize,
    ) -> Option<Reply> {
        let config = &self.config;
        let reply = match (method, segments) {
            ("GET", ["gateway"]) => Reply::ok(json!({ "url": gateway_url(self.addr) })),
            ("GET", ["gateway", "bot"]) => Reply::ok(json!({
                "url": gateway_url(self.addr),
                "shards": 1,
                "session_start_limit": { "total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1 },
            })),
            ("GET", ["oauth2", "applications", "@me"]) | ("GET", ["applications", "@me"]) => {
                Reply::ok(json!({
                    "id": config.application_id.to_string(),
                    "name": "hanarang-fake-app",
                    "icon": null,
                    "description": "",
                    "rpc_origins": [],
                    "bot_public": false,
                    "bot_require_code_grant": false,
                    "owner": user_json(FAKE_OWNER_ID, false),
                    "verify_key": "0000000000000000000000000000000000000000000000000000000000000000",
                    "team": null,
                    "flags": 0,
                }))
            }
            ("GET", ["users", "@me"]) => {
                let mut me = user_json(config.bot_user_id, true);
                me["verified"] = json!(true);
                me["mfa_enabled"] = json!(false);
                Reply::ok(me)
            }
            ("GET", ["users", id]) => Reply::ok(user_json(
                parse_id(id)?,
                parse_id(id)? == config.bot_user_id,
            )),

            // Application commands.
            ("PUT", ["applications", _app, "guilds", guild, "commands"]) => {
                self.put_commands(state, Some(parse_id(guild)?), body)
            }
            ("PUT", ["applications", _app, "commands"]) => self.put_commands(state, None, body),
            ("GET", ["applications", _app, "guilds", guild, "commands"]) => Reply::ok(json!(
                state
                    .commands
                    .get(&Some(parse_id(guild)?))
                    .cloned()
                    .unwrap_or_default()
            )),
            ("GET", ["applications", _app, "commands"]) => Reply::ok(json!(
                state.commands.get(&None).cloned().unwrap_or_default()
            )),
            ("POST", ["applications", _app, "guilds", guild, "commands"]) => {
                let command = self.echo_command(state, body);
                let list = state.commands.entry(Some(parse_id(guild)?)).or_default();
                list.retain(|c| c["name"] != command["name"]);
                list.push(command.clone());
                Reply::ok(command)
            }

            // Interactions.
            ("POST", ["interactions", id, token, "callback"]) => {
                self.interaction_callback(state, parse_id(id)?, token, body, index)
            }
            ("POST", ["webhooks", _app, token]) => self.followup(state, token, body, index),
            (_, ["webhooks", _app, token, "messages", target]) => {
                self.webhook_message(state, method, token, target, body, index)?
            }

            // Threads and messages.
            ("POST", ["channels", channel, "threads"]) => {
                self.create_thread(state, parse_id(channel)?, None, body)
            }
            ("POST", ["channels", channel, "messages", message, "threads"]) => {
                self.create_thread(state, parse_id(channel)?, Some(parse_id(message)?), body)
            }
            ("POST", ["channels", channel, "messages"]) => {
                let channel = parse_id(channel)?;
                if channel == config.forum_channel_id {
                    return Some(Reply::error(
                        400,
                        50008,
                        "Cannot send messages in a non-text channel",
                    ));
                }
                if let Err(reply) = validate_message(body, true) {
                    return Some(reply);
                }
                let id = state.snowflake();
                let message = new_message(id, channel, body, None);
                let json = message_json(config, &message);
                state.messages.insert(id, message);
                Reply::ok(json)
            }
            ("GET", ["channels", channel, "messages"]) => {
                let channel = parse_id(channel)?;
                let list: Vec<Value> = state
                    .messages
                    .values()
                    .rev()
                    .filter(|m| m.channel_id == channel && !m.deleted && m.interaction_id.is_none())
                    .map(|m| message_json(config, m))
                    .collect();
                Reply::ok(json!(list))
            }
            (_, ["channels", channel, "messages", message]) => {
                let (channel, message) = (parse_id(channel)?, parse_id(message)?);
                let Some(stored) = state
                    .messages
                    .get_mut(&message)
                    .filter(|m| m.channel_id == channel && !m.deleted)
                else {
                    return Some(Reply::error(404, 10008, "Unknown Message"));
                };
                match method {
                    "GET" => Reply::ok(message_json(config, stored)),
                    "PATCH" => {
                        if let Err(reply) = validate_message(body, false) {
                            return Some(reply);
                        }
                        apply_edit(stored, body);
                        Reply::ok(message_json(config, stored))
                    }
                    "DELETE" => {
                        stored.deleted = true;
                        Reply::no_content()
                    }
                    _ => return None,
                }
            }
            ("POST", ["channels", _channel, "typing"]) => Reply::no_content(),
            ("PUT" | "DELETE", ["channels", _channel, "thread-members", "@me"]) => {
                Reply::no_content()
            }
            ("GET", ["channels", channel]) => {
                Reply::ok(self.channel_json(state, parse_id(channel)?))
            }
            ("PATCH", ["channels", channel]) => {
                let channel = parse_id(channel)?;
                if let Some(thread) = state.threads.iter_mut().find(|t| t.id == channel) {
                    if let Some(archived) = body["archived"].as_bool() {
                        thread.archived = archived;
                    }
                    if let Some(locked) = body["locked"].as_bool() {
                        thread.locked = locked;
                    }
                    if let Some(name) = body["name"].as_str() {
                        thread.name = name.to_string();
                    }
                    thread.edits.push(body.clone());
                }
                Reply::ok(self.channel_json(state, channel))
            }

            // Guild.
            ("GET", ["guilds", guild]) if parse_id(guild) == Some(config.guild_id) => {
                Reply::ok(guild_json(config, &state.roles))
            }
            ("GET", ["guilds", guild, "roles"]) if parse_id(guild) == Some(config.guild_id) => {
                Reply::ok(json!(roles_json(config, &state.roles)))
            }
            ("GET", ["guilds", guild, "channels"]) if parse_id(guild) == Some(config.guild_id) => {
                let mut channels = vec![forum_json(config)];
                if state.command_channel_id != config.forum_channel_id {
                    channels.push(text_channel_json(config, state.command_channel_id));
                }
                Reply::ok(json!(channels))
            }
            ("GET", ["guilds", guild, "members", user])
                if parse_id(guild) == Some(config.guild_id) =>
            {
                let user = parse_id(user)?;
                let mut member = member_json(user, &[], None);
                member["user"] = user_json(user, user == config.bot_user_id);
                Reply::ok(member)
            }
            ("GET", ["guilds", _guild, ..]) => Reply::error(404, 10004, "Unknown Guild"),
            _ => return None,
        };
        Some(reply)
    }

    fn echo_command(&self, state: &mut State, command: &Value) -> Value {
        let mut command = command.clone();
        let id = state.snowflake();
        command["id"] = json!(id.to_string());
        command["application_id"] = json!(self.config.application_id.to_string());
        command["version"] = json!(id.to_string());
        if command.get("type").is_none() {
            command["type"] = json!(1);
        }
        if command.get("description").is_none() {
            command["description"] = json!("");
        }
        command
    }

    fn put_commands(&self, state: &mut State, guild: Option<u64>, body: &Value) -> Reply {
        let Some(list) = body.as_array() else {
            return Reply::invalid_form("_", "LIST_TYPE_CONVERT", "Must be a list.");
        };
        let mut echoed: Vec<Value> = list.iter().map(|c| self.echo_command(state, c)).collect();
        if let Some(guild) = guild {
            for command in &mut echoed {
                command["guild_id"] = json!(guild.to_string());
            }
        }
        state.commands.insert(guild, echoed.clone());
        Reply::ok(json!(echoed))
    }

    fn channel_json(&self, state: &State, channel: u64) -> Value {
        let config = &self.config;
        if channel == config.forum_channel_id {
            return forum_json(config);
        }
        if let Some(thread) = state.threads.iter().find(|t| t.id == channel) {
            let count = state
                .messages
                .values()
                .filter(|m| m.channel_id == channel && !m.deleted)
                .count();
            return thread_json(config, thread, count);
        }
        if channel == state.command_channel_id {
            return text_channel_json(config, channel);
        }
        let stub = ThreadState {
            id: channel,
            parent_id: config.forum_channel_id,
            name: format!("thread-{channel}"),
            archived: false,
            locked: false,
            has_starter: false,
            auto_archive_duration: 4320,
            create_body: Value::Null,
            edits: Vec::new(),
            created_at: now(),
        };
        thread_json(config, &stub, 0)
    }

    fn create_thread(
        &self,
        state: &mut State,
        parent: u64,
        from_message: Option<u64>,
        body: &Value,
    ) -> Reply {
        let config = &self.config;
        let Some(name) = body["name"].as_str().filter(|n| !n.is_empty()) else {
            return Reply::invalid_form("name", "BASE_TYPE_REQUIRED", "This field is required");
        };
        if name.chars().count() > 100 {
            return Reply::invalid_form(
                "name",
                "BASE_TYPE_BAD_LENGTH",
                "Must be between 1 and 100 in length.",
            );
        }
        let forum_post = parent == config.forum_channel_id;
        if forum_post {
            if !body["message"].is_object() {
                return Reply::invalid_form(
                    "message",
                    "BASE_TYPE_REQUIRED",
                    "This field is required",
                );
            }
            if let Err(reply) = validate_message(&body["message"], true) {
                return reply;
            }
        }
        let id = match from_message {
            Some(message) => message,
            None => state.snowflake(),
        };
        let thread = ThreadState {
            id,
            parent_id: parent,
            name: name.to_string(),
            archived: false,
            locked: false,
            has_starter: forum_post,
            auto_archive_duration: body["auto_archive_duration"].as_u64().unwrap_or(4320),
            create_body: body.clone(),
            edits: Vec::new(),
            created_at: now(),
        };
        let mut channel = thread_json(config, &thread, usize::from(forum_post));
        if forum_post {
            let starter = new_message(id, id, &body["message"], None);
            channel["message"] = message_json(config, &starter);
            state.messages.insert(id, starter);
        }
        state.threads.push(thread);
        Reply::json(201, channel)
    }

    fn interaction_callback(
        &self,
        state: &mut State,
        id: u64,
        token: &str,
        body: &Value,
        index: usize,
    ) -> Reply {
        let Some(interaction) = state.interactions.get(&id).filter(|i| i.token == token) else {
            return Reply::error(404, 10062, "Unknown interaction");
        };
        if interaction.callback.is_some() {
            return Reply::error(400, 40060, "Interaction has already been acknowledged.");
        }
        let kind = body["type"].as_u64().unwrap_or(0);
        let data = &body["data"];
        if kind == 4
            && let Err(reply) = validate_message(data, true)
        {
            return reply;
        }
        if kind == 7
            && let Err(reply) = validate_message(data, false)
        {
            return reply;
        }
        let (channel_id, component_message) = (interaction.channel_id, interaction.message_id);
        let message_id = match kind {
            4 | 5 => {
                let message_id = state.snowflake();
                let initial = if kind == 4 {
                    data.clone()
                } else {
                    json!({ "content": "", "flags": data["flags"] })
                };
                state.messages.insert(
                    message_id,
                    new_message(message_id, channel_id, &initial, Some(id)),
                );
                Some(message_id)
            }
            6 => component_message,
            7 => {
                if let Some(message) = component_message.and_then(|m| state.messages.get_mut(&m)) {
                    apply_edit(message, data);
                }
                component_message
            }
            _ => None,
        };
        let interaction = state.interactions.get_mut(&id).expect("checked above");
        interaction.callback = Some(kind);
        interaction.original = message_id;
        interaction.responses.push(InteractionResponse {
            request_index: index,
            kind: ResponseKind::Callback(kind),
            body: body.clone(),
            message_id,
        });
        Reply::no_content()
    }

    fn followup(&self, state: &mut State, token: &str, body: &Value, index: usize) -> Reply {
        let Some(&id) = state.tokens.get(token) else {
            return Reply::error(404, 10015, "Unknown Webhook");
        };
        let interaction = &state.interactions[&id];
        if interaction.callback.is_none() {
            return Reply::error(404, 10015, "Unknown Webhook");
        }
        if let Err(reply) = validate_message(body, true) {
            return reply;
        }
        let channel_id = interaction.channel_id;
        let message_id = state.snowflake();
        let message = new_message(message_id, channel_id, body, Some(id));
        let json = message_json(&self.config, &message);
        state.messages.insert(message_id, message);
        let interaction = state.interactions.get_mut(&id).expect("known");
        interaction.followups.push(message_id);
        interaction.responses.push(InteractionResponse {
            request_index: index,
            kind: ResponseKind::Followup,
            body: body.clone(),
            message_id: Some(message_id),
        });
        Reply::ok(json)
    }

    fn webhook_message(
        &self,
        state: &mut State,
        method: &str,
        token: &str,
        target: &str,
        body: &Value,
        index: usize,
    ) -> Option<Reply> {
        let Some(&id) = state.tokens.get(token) else {
            return Some(Reply::error(404, 10015, "Unknown Webhook"));
        };
        let interaction = &state.interactions[&id];
        let original = target == "@original";
        let message_id = if original {
            interaction.original
        } else {
            parse_id(target).filter(|m| interaction.followups.contains(m))
        };
        let Some(message_id) = message_id else {
            return Some(Reply::error(404, 10008, "Unknown Message"));
        };
        let config = self.config;
        let Some(message) = state.messages.get_mut(&message_id).filter(|m| !m.deleted) else {
            return Some(Reply::error(404, 10008, "Unknown Message"));
        };
        let (reply, kind) = match method {
            "GET" => return Some(Reply::ok(message_json(&config, message))),
            "PATCH" => {
                if let Err(reply) = validate_message(body, false) {
                    return Some(reply);
                }
                apply_edit(message, body);
                let kind = if original {
                    ResponseKind::EditOriginal
                } else {
                    ResponseKind::EditFollowup(message_id)
                };
                (Reply::ok(message_json(&config, message)), kind)
            }
            "DELETE" => {
                message.deleted = true;
                let kind = if original {
                    ResponseKind::DeleteOriginal
                } else {
                    ResponseKind::DeleteFollowup(message_id)
                };
                (Reply::no_content(), kind)
            }
            _ => return None,
        };
        state
            .interactions
            .get_mut(&id)
            .expect("known")
            .responses
            .push(InteractionResponse {
                request_index: index,
                kind,
                body: body.clone(),
                message_id: Some(message_id),
            });
        Some(reply)
    }
}

/// The answer for a request about a deleted or forbidden channel, if it is one.
fn channel_gone(state: &State, segments: &[&str]) -> Option<Reply> {
    let ["channels", id, ..] = segments else {
        return None;
    };
    let id: u64 = id.parse().ok()?;
    if state.deleted_channels.contains(&id) {
        Some(Reply::error(404, 10003, "Unknown Channel"))
    } else if state.denied_channels.contains(&id) {
        Some(Reply::error(403, 50001, "Missing Access"))
    } else {
        let (_, status) = state.failing_channels.iter().find(|(c, _)| *c == id)?;
        Some(Reply::error(
            *status,
            0,
            &format!("{status}: {}", reason(*status)),
        ))
    }
}
