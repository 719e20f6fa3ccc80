//! People writing in the guild, as the gateway tells a bot of it: `MESSAGE_CREATE` for a
//! message in a thread, only to a bot that asked for `GUILD_MESSAGES`, its text only to a
//! bot that asked for (and was granted) the privileged Message Content intent. A bot that
//! asks for a privileged intent its application was not granted is closed with 4014, as
//! Discord does.

use serde_json::json;

use super::json::{member_json, message_json, new_message};
use super::{FakeDiscord, lock};

/// Intents (`IDENTIFY`'s `intents`).
const GUILD_MEMBERS: u64 = 1 << 1;
const GUILD_PRESENCES: u64 = 1 << 8;
const GUILD_MESSAGES: u64 = 1 << 9;
const MESSAGE_CONTENT: u64 = 1 << 15;

/// Application flags: the privileged intents granted (each as a verified app's, or as an
/// app in fewer than 100 servers has it: "limited").
const PRESENCE_GRANTED: u64 = (1 << 12) | (1 << 13);
const MEMBERS_GRANTED: u64 = (1 << 14) | (1 << 15);
pub const MESSAGE_CONTENT_GRANTED: u64 = 1 << 18;
pub const MESSAGE_CONTENT_LIMITED: u64 = 1 << 19;

/// Whether an application with `flags` may identify with `intents`.
pub(super) fn intents_allowed(intents: u64, flags: u64) -> bool {
    [
        (GUILD_MEMBERS, MEMBERS_GRANTED),
        (GUILD_PRESENCES, PRESENCE_GRANTED),
        (
            MESSAGE_CONTENT,
            MESSAGE_CONTENT_GRANTED | MESSAGE_CONTENT_LIMITED,
        ),
    ]
    .iter()
    .all(|(intent, granted)| intents & intent == 0 || flags & granted != 0)
}

/// A path segment with its `%XX` escapes undone (an emoji in a reaction's route).
pub(super) fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl FakeDiscord {
    /// Sets the application's flags (default: Message Content granted, limited): `0` is an
    /// application whose Message Content intent was never turned on.
    pub fn set_app_flags(&self, flags: u64) {
        self.state().app_flags = flags;
    }

    /// A person (`user_id`, with `roles`) writes `content` in `channel_id` (a thread: an
    /// archived one opens again, as Discord does). Returns the message's id. The bot hears
    /// of it as the gateway would tell it.
    pub fn user_message(&self, channel_id: u64, user_id: u64, roles: &[u64], content: &str) -> u64 {
        let config = self.inner.config;
        let (id, payload) = {
            let mut state = self.state();
            if let Some(thread) = state.threads.iter_mut().find(|t| t.id == channel_id) {
                assert!(!thread.locked, "a person cannot write in a locked thread");
                thread.archived = false;
            }
            let id = state.snowflake();
            let mut message = new_message(id, channel_id, &json!({ "content": content }), None);
            message.author_id = user_id;
            let intents = state
                .identify
                .as_ref()
                .and_then(|i| i["intents"].as_u64())
                .unwrap_or(0);
            let mut payload = message_json(&config, &message);
            state.messages.insert(id, message);
            if intents & GUILD_MESSAGES == 0 {
                (id, None)
            } else {
                if intents & MESSAGE_CONTENT == 0 {
                    payload["content"] = json!("");
                }
                let mut member = member_json(user_id, roles, None);
                if let Some(member) = member.as_object_mut() {
                    member.remove("user");
                }
                payload["member"] = member;
                (id, Some(payload))
            }
        };
        self.inner.bump();
        if let Some(payload) = payload {
            self.dispatch("MESSAGE_CREATE", payload);
        }
        id
    }

    /// The emoji the bot reacted to a message with.
    pub fn reactions(&self, message_id: u64) -> Vec<String> {
        lock(&self.inner.state)
            .messages
            .get(&message_id)
            .map(|m| m.reactions.clone())
            .unwrap_or_default()
    }
}
