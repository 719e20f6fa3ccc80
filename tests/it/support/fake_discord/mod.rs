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
//!
//! Its parts: [`records`] (what a test reads back), [`state`] (what the fake holds between
//! requests), [`rest`] (the HTTP/1.1 connection and the REST routes), [`gateway`] (the
//! WebSocket session) and [`json`] (Discord's objects as it sends them).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

mod gateway;
mod json;
mod people;
mod records;
mod rest;
mod state;

use gateway::gateway_url;
use json::{build_options, member_json, message_json, new_message};
pub use records::{
    FakeFile, FakeInteraction, FakeMessage, FakeThread, InteractionResponse, RecordedRequest,
    ResponseKind,
};
use rest::serve_connection;
use state::{Inner, InteractionState, State, lock};

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

/// A running fake Discord. Dropping it stops the listener and its connections.
pub struct FakeDiscord {
    inner: Arc<Inner>,
    addr: SocketAddr,
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
                lose_next_post_answers: (0, 0),
                denied_channels: Vec::new(),
                failing_channels: Vec::new(),
                held_channels: Vec::new(),
                hold_uploads: false,
                held: 0,
                fail_next_posts: (0, 500),
                nonces: HashMap::new(),
                app_flags: people::MESSAGE_CONTENT_LIMITED,
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

    /// The messages of the first forum post after its starter message (the status
    /// board): the lines a bridge posted, in order (not people's messages, nor the bot's
    /// answers to them).
    pub fn post_lines(&self) -> Vec<FakeMessage> {
        let Some(thread) = self.threads().into_iter().next() else {
            return Vec::new();
        };
        self.messages(thread.id)
            .into_iter()
            .filter(|m| {
                m.id != thread.id
                    && m.author_id == 0
                    && !m.history[0]["message_reference"].is_object()
            })
            .collect()
    }

    /// The current (not deleted) messages in a channel or thread, oldest first, including a
    /// forum post's starter message and people's messages. Interaction responses are not
    /// here; see [`FakeDiscord::interaction_responses`].
    pub fn messages(&self, channel_id: u64) -> Vec<FakeMessage> {
        self.state()
            .messages
            .values()
            .filter(|m| m.channel_id == channel_id && !m.deleted && m.interaction_id.is_none())
            .cloned()
            .collect()
    }

    /// The files uploaded to a channel or thread, oldest first.
    pub fn files_in(&self, channel_id: u64) -> Vec<FakeFile> {
        self.messages(channel_id)
            .into_iter()
            .flat_map(|m| m.files)
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

    /// The next `n` forum posts are created, but answered with `status`, as when their
    /// answer is lost on the way (the bot cannot know it made them).
    pub fn lose_next_post_answers(&self, n: u32, status: u16) {
        self.state().lose_next_post_answers = (n, status);
    }

    /// The thread archives, as Discord archives a post after its auto-archive duration
    /// without a message.
    pub fn archive_thread(&self, thread_id: u64) {
        if let Some(thread) = self.state().threads.iter_mut().find(|t| t.id == thread_id) {
            thread.archived = true;
        }
        self.inner.bump();
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

    /// While on, requests about this channel get no answer (a route Discord is slow on);
    /// off, the held ones are handled.
    pub fn hold_channel(&self, channel_id: u64, on: bool) {
        let mut state = self.state();
        state.held_channels.retain(|id| *id != channel_id);
        if on {
            state.held_channels.push(channel_id);
        }
        drop(state);
        self.inner.bump();
    }

    /// While on, requests that upload files get no answer; off, the held ones are handled
    /// (even when the bot that sent them is gone, as Discord would).
    pub fn hold_uploads(&self, on: bool) {
        self.state().hold_uploads = on;
        self.inner.bump();
    }

    /// A forum post made as the bot would make it (one a stopped bot left unrecorded), with
    /// its starter message; archived when asked. Returns its id.
    pub fn add_forum_post(&self, name: &str, archived: bool) -> u64 {
        let mut state = self.state();
        let id = state.snowflake();
        let forum = self.inner.config.forum_channel_id;
        state.threads.push(state::ThreadState {
            id,
            parent_id: forum,
            name: name.to_string(),
            archived,
            locked: false,
            has_starter: true,
            auto_archive_duration: 10080,
            create_body: serde_json::json!({ "name": name }),
            edits: Vec::new(),
            created_at: json::now(),
        });
        let starter = json::new_message(id, id, &serde_json::json!({ "content": "board" }), None);
        state.messages.insert(id, starter);
        drop(state);
        self.inner.bump();
        id
    }

    /// How many requests wait for their answer now (`hold_channel`).
    pub fn held_requests(&self) -> usize {
        self.state().held
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
        self.inner.close_gateway(code);
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
