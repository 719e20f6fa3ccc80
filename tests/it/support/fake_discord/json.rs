//! Discord's objects (users, members, roles, channels, threads, messages, the guild) as
//! Discord sends them, built from what the fake holds.

use serde_json::{Value, json};

use super::state::ThreadState;
use super::{FAKE_OWNER_ID, FakeConfig, FakeMessage, MEMBER_PERMISSIONS};

pub(super) fn now() -> String {
    serenity::model::Timestamp::now().to_string()
}

/// Leaf options for a slash interaction from the test's JSON.
pub(super) fn build_options(options: Value, registered: Option<&Value>) -> Value {
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

pub(super) fn user_json(id: u64, bot: bool) -> Value {
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

pub(super) fn member_json(user_id: u64, roles: &[u64], permissions: Option<u64>) -> Value {
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

pub(super) fn roles_json(config: &FakeConfig, roles: &[(u64, String)]) -> Vec<Value> {
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

pub(super) fn new_message(
    id: u64,
    channel_id: u64,
    body: &Value,
    interaction_id: Option<u64>,
) -> FakeMessage {
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
        files: Vec::new(),
        author_id: 0,
        reactions: Vec::new(),
    }
}

pub(super) fn apply_edit(message: &mut FakeMessage, body: &Value) {
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

pub(super) fn message_json(config: &FakeConfig, m: &FakeMessage) -> Value {
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
        "author": if m.author_id == 0 || m.author_id == config.bot_user_id {
            user_json(config.bot_user_id, true)
        } else {
            user_json(m.author_id, false)
        },
        "content": m.content,
        "timestamp": m.created_at,
        "edited_timestamp": m.edited_at,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "mention_channels": [],
        "attachments": m.files.iter().enumerate().map(|(i, f)| {
            let id = m.id + 1 + i as u64;
            json!({
                "id": id.to_string(),
                "filename": f.filename,
                "size": f.data.len(),
                "url": format!("https://cdn.discordapp.com/attachments/{}/{id}/{}", m.channel_id, f.filename),
                "proxy_url": format!("https://media.discordapp.net/attachments/{}/{id}/{}", m.channel_id, f.filename),
                "content_type": f.content_type,
            })
        }).collect::<Vec<_>>(),
        "embeds": embeds,
        "reactions": m.reactions.iter().map(|emoji| json!({
            "count": 1,
            "count_details": { "burst": 0, "normal": 1 },
            "me": true,
            "me_burst": false,
            "burst_colors": [],
            "emoji": { "id": null, "name": emoji },
        })).collect::<Vec<_>>(),
        "pinned": false,
        "type": if m.interaction_id.is_some() {
            20
        } else if m.history.first().is_some_and(|b| b["message_reference"].is_object()) {
            19
        } else {
            0
        },
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

pub(super) fn forum_json(config: &FakeConfig) -> Value {
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

pub(super) fn text_channel_json(config: &FakeConfig, id: u64) -> Value {
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

pub(super) fn thread_json(config: &FakeConfig, t: &ThreadState, message_count: usize) -> Value {
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

pub(super) fn guild_json(config: &FakeConfig, roles: &[(u64, String)]) -> Value {
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
