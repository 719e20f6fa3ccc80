//! The gateway: one WebSocket session at a time, HELLO, IDENTIFY and RESUME answered with
//! READY and GUILD_CREATE, heartbeats acknowledged, and every event the fake dispatches
//! checked against serenity's own model first.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::json::{forum_json, guild_json, member_json, text_channel_json, thread_json, user_json};
use super::state::{GatewaySession, Inner, State, lock};
use super::{FAKE_TOKEN, HEARTBEAT_INTERVAL_MS};

pub(super) fn gateway_url(addr: SocketAddr) -> String {
    format!("ws://{addr}/ws")
}

impl Inner {
    pub(super) fn dispatch(&self, event: &str, data: Value) -> Result<(), String> {
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
            "application": { "id": config.application_id.to_string(), "flags": state.app_flags },
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

pub(super) async fn serve_gateway(inner: Arc<Inner>, ws: WebSocketStream<BufReader<TcpStream>>) {
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
                } else if !super::people::intents_allowed(
                    payload["d"]["intents"].as_u64().unwrap_or(0),
                    state.app_flags,
                ) {
                    let _ = tx.send(WsMessage::Close(Some(CloseFrame {
                        code: CloseCode::from(4014),
                        reason: "Disallowed intent(s).".into(),
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

impl Inner {
    /// Closes the open session, if any, with `code`.
    pub(super) fn close_gateway(&self, code: u16) {
        let mut state = lock(&self.state);
        if let Some(session) = state.gateway.take() {
            let _ = session.tx.send(WsMessage::Close(Some(CloseFrame {
                code: CloseCode::from(code),
                reason: "closed by the fake".into(),
            })));
        }
        drop(state);
        self.bump();
    }
}

/// Checks that serenity can read `value` as `T`; the error text otherwise.
fn serenity_reads<T: serde::de::DeserializeOwned>(value: &Value) -> Result<(), String> {
    serde_json::from_value::<T>(value.clone())
        .map(|_| ())
        .map_err(|e| e.to_string())
}
