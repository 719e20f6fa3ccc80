//! REST: the HTTP/1.1 connection (a WebSocket upgrade hands it to the gateway), the
//! routes the bridge calls answered as Discord answers them, and the failures a test
//! injects.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::super::http::{RawRequest, connection, next_request, reason};
use super::gateway::{gateway_url, serve_gateway};
use super::json::{
    apply_edit, forum_json, guild_json, member_json, message_json, new_message, now, roles_json,
    text_channel_json, thread_json, user_json,
};
use super::records::FakeFile;
use super::state::{Inner, State, ThreadState, lock};
use super::{
    API_PREFIX, FAKE_OWNER_ID, FAKE_TOKEN, InteractionResponse, RecordedRequest, ResponseKind,
};

mod form;
use form::{parse_body, uploaded_files, validate_message};

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

pub(super) async fn serve_connection(inner: Arc<Inner>, stream: TcpStream) {
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
        let upload = request
            .header("content-type")
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("multipart/"));
        if !hold(&inner, &request.target, upload).await {
            return;
        }
        let close = request.wants_close();
        let reply = inner.handle(&request);
        inner.bump();
        if write_reply(reader.get_mut(), &reply).await.is_err() || close {
            return;
        }
    }
}

/// Waits while the request's channel is held (`FakeDiscord::hold_channel`), or while
/// uploads are (`FakeDiscord::hold_uploads`). False when the fake stops meanwhile.
async fn hold(inner: &Inner, target: &str, upload: bool) -> bool {
    let channel = target
        .strip_prefix(API_PREFIX)
        .and_then(|route| route.strip_prefix("/channels/"))
        .and_then(|rest| rest.split(['/', '?']).next())
        .and_then(parse_id);
    let Some(channel) = channel else {
        return true;
    };
    let mut changes = inner.changed.subscribe();
    let mut counted = false;
    let held =
        |state: &State| state.held_channels.contains(&channel) || (upload && state.hold_uploads);
    while held(&lock(&inner.state)) {
        if !counted {
            counted = true;
            lock(&inner.state).held += 1;
            inner.bump();
        }
        if changes.changed().await.is_err() {
            return false;
        }
    }
    if counted {
        lock(&inner.state).held -= 1;
    }
    true
}

fn parse_id(segment: &str) -> Option<u64> {
    segment.parse().ok()
}

impl Inner {
    fn handle(&self, request: &RawRequest) -> Reply {
        let (path, query) = match request.target.split_once('?') {
            Some((p, q)) => (p.to_string(), Some(q.to_string())),
            None => (request.target.clone(), None),
        };
        let body = parse_body(request);
        let files = uploaded_files(request, &body);
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
            match self.route(&mut state, &method, &segments, &body, files, index) {
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
        files: Result<Vec<FakeFile>, Reply>,
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
                    "flags": state.app_flags,
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
                let reply = self.create_thread(state, parse_id(channel)?, None, body);
                match &mut state.lose_next_post_answers {
                    (n, status) if *n > 0 => {
                        *n -= 1;
                        Reply::error(*status, 0, "the answer was lost")
                    }
                    _ => reply,
                }
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
                let files = match files {
                    Ok(files) => files,
                    Err(reply) => return Some(reply),
                };
                // Posting opens an archived thread again, unless it is locked.
                if let Some(thread) = state
                    .threads
                    .iter_mut()
                    .find(|t| t.id == channel && t.archived)
                {
                    if thread.locked {
                        return Some(Reply::error(400, 50083, "Thread is archived"));
                    }
                    thread.archived = false;
                }
                let nonce = match &body["nonce"] {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                }
                .filter(|_| body["enforce_nonce"] == json!(true));
                if let Some(earlier) = nonce
                    .as_ref()
                    .and_then(|n| state.nonces.get(n))
                    .and_then(|id| state.messages.get(id))
                {
                    return Some(Reply::ok(message_json(config, earlier)));
                }
                let id = state.snowflake();
                let mut message = new_message(id, channel, body, None);
                message.files = files;
                // Each attachment has an id of its own after the message's.
                for _ in &message.files {
                    state.snowflake();
                }
                let json = message_json(config, &message);
                state.messages.insert(id, message);
                if let Some(nonce) = nonce {
                    state.nonces.insert(nonce, id);
                }
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
                let archived = state.threads.iter().any(|t| t.id == channel && t.archived);
                let Some(stored) = state
                    .messages
                    .get_mut(&message)
                    .filter(|m| m.channel_id == channel && !m.deleted)
                else {
                    return Some(Reply::error(404, 10008, "Unknown Message"));
                };
                match method {
                    "GET" => Reply::ok(message_json(config, stored)),
                    // An archived thread's messages cannot be edited (it is not opened).
                    "PATCH" if archived => Reply::error(400, 50083, "Thread is archived"),
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
            (
                "PUT" | "DELETE",
                [
                    "channels",
                    channel,
                    "messages",
                    message,
                    "reactions",
                    emoji,
                    "@me",
                ],
            ) => {
                let (channel, message) = (parse_id(channel)?, parse_id(message)?);
                let emoji = super::people::percent_decode(emoji);
                if state.threads.iter().any(|t| t.id == channel && t.archived) {
                    return Some(Reply::error(400, 50083, "Thread is archived"));
                }
                let Some(stored) = state
                    .messages
                    .get_mut(&message)
                    .filter(|m| m.channel_id == channel && !m.deleted)
                else {
                    return Some(Reply::error(404, 10008, "Unknown Message"));
                };
                stored.reactions.retain(|r| *r != emoji);
                if method == "PUT" {
                    stored.reactions.push(emoji);
                }
                Reply::no_content()
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

            ("GET", ["channels", channel, "threads", "archived", "public"]) => {
                let channel = parse_id(channel)?;
                let threads: Vec<Value> = state
                    .threads
                    .iter()
                    .rev()
                    .filter(|t| t.parent_id == channel && t.archived)
                    .filter(|t| !state.deleted_channels.contains(&t.id))
                    .map(|t| self.channel_json(state, t.id))
                    .collect();
                Reply::ok(json!({ "threads": threads, "members": [], "has_more": false }))
            }

            // Guild.
            ("GET", ["guilds", guild, "threads", "active"])
                if parse_id(guild) == Some(config.guild_id) =>
            {
                let threads: Vec<Value> = state
                    .threads
                    .iter()
                    .filter(|t| !t.archived && !state.deleted_channels.contains(&t.id))
                    .map(|t| self.channel_json(state, t.id))
                    .collect();
                Reply::ok(json!({ "threads": threads, "members": [] }))
            }
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
