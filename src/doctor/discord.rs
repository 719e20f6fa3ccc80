//! The Discord part of `hanarang doctor`: the token, the guild, the forum channel and the
//! bot's permissions there, asked of Discord over REST (nothing is sent).

use std::time::Duration;

use poise::serenity_prelude as serenity;
use serenity::{Channel, ChannelId, ChannelType, GuildId, Permissions};

use super::Check;
use crate::config::{DiscordConfig, TOKEN_CREDENTIAL, TokenSource};
use crate::discord::{StartError, check_token, http, message_content_granted, read_token};

const TIMEOUT: Duration = Duration::from_secs(20);

/// What the bot needs in the forum: see it, create posts, write in them, read them back.
const NEEDED: Permissions = Permissions::VIEW_CHANNEL
    .union(Permissions::SEND_MESSAGES)
    .union(Permissions::SEND_MESSAGES_IN_THREADS)
    .union(Permissions::READ_MESSAGE_HISTORY);

pub async fn checks(discord: &DiscordConfig) -> Vec<Check> {
    let [start, approve] = discord.access();
    let mut checks = vec![
        Check::pass("discord start", start),
        Check::pass("discord approve", approve),
    ];
    let source = discord.token_source();
    let token = match read_token(discord) {
        Ok(t) => {
            checks.push(token_check(&source));
            t
        }
        Err(e) => {
            let fix = match &source {
                TokenSource::Env(name) => format!(
                    "put the bot token in a file the service reads (discord.token_file, or systemd's LoadCredential={TOKEN_CREDENTIAL}:PATH), or export {name}=<the bot token> in the service's environment"
                ),
                _ => "check the file's path, that the service's user may read it, and that it holds the bot token".into(),
            };
            checks.push(Check::fail("discord token", e.to_string(), fix));
            return checks;
        }
    };
    let http = http(discord, &token);
    match check_token(discord, &http, std::time::Duration::from_secs(20)).await {
        Ok(()) => checks.push(Check::pass("discord login", "Discord accepted the token")),
        Err(e) => {
            let fix = match e {
                StartError::TokenRefused(..) => {
                    "reset the bot token in the developer portal and set it again"
                }
                _ => "check the network (or discord.http_proxy)",
            };
            checks.push(Check::fail("discord login", e.to_string(), fix));
            return checks;
        }
    }
    checks.push(
        match tokio::time::timeout(TIMEOUT, message_content_granted(&http)).await {
            Ok(Ok(true)) => Check::pass(
                "discord message content",
                "the bot may read replies in sprint threads (they become notes)",
            ),
            Ok(Ok(false)) => Check::warn(
                "discord message content",
                "the bot has no Message Content intent: replies in sprint threads are not read as notes",
                "turn on Message Content Intent in the developer portal (Bot, Privileged Gateway Intents), then restart serve",
            ),
            other => Check::warn(
                "discord message content",
                format!("the application cannot be read: {}", error_of(other)),
                "check the network",
            ),
        },
    );
    let guild_id = GuildId::new(discord.guild_id.0);
    let guild = match tokio::time::timeout(TIMEOUT, http.get_guild(guild_id)).await {
        Ok(Ok(g)) => {
            checks.push(Check::pass(
                "discord guild",
                format!("{} ({guild_id})", g.name),
            ));
            g
        }
        other => {
            checks.push(Check::fail(
                "discord guild",
                format!("guild {guild_id} cannot be read: {}", error_of(other)),
                "invite the bot to the guild (scopes bot and applications.commands) and check discord.guild_id",
            ));
            return checks;
        }
    };
    let forum_id = ChannelId::new(discord.forum_channel_id.0);
    let forum = match tokio::time::timeout(TIMEOUT, http.get_channel(forum_id)).await {
        Ok(Ok(Channel::Guild(c))) if c.kind == ChannelType::Forum && c.guild_id == guild_id => {
            checks.push(Check::pass(
                "discord forum",
                format!("#{} is a forum channel", c.name),
            ));
            c
        }
        Ok(Ok(Channel::Guild(c))) => {
            checks.push(Check::fail(
                "discord forum",
                format!("#{} ({forum_id}) is a {:?} channel in guild {}, not a forum of guild {guild_id}", c.name, c.kind, c.guild_id),
                "set discord.forum_channel_id to a forum channel of the guild",
            ));
            return checks;
        }
        other => {
            let why = match other {
                Ok(Ok(_)) => "it is not a guild channel".to_string(),
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {}s", TIMEOUT.as_secs()),
            };
            checks.push(Check::fail(
                "discord forum",
                format!("channel {forum_id} cannot be read: {why}"),
                "set discord.forum_channel_id to a forum channel the bot can see",
            ));
            return checks;
        }
    };
    let me = match tokio::time::timeout(TIMEOUT, http.get_current_user()).await {
        Ok(Ok(me)) => me,
        other => {
            checks.push(Check::fail(
                "discord permissions",
                error_of(other),
                "check the network",
            ));
            return checks;
        }
    };
    match tokio::time::timeout(TIMEOUT, http.get_member(guild_id, me.id)).await {
        Ok(Ok(member)) => {
            let have = guild.user_permissions_in(&forum, &member);
            let missing = NEEDED - have;
            if missing.is_empty() {
                checks.push(Check::pass(
                    "discord permissions",
                    format!("the bot may view, post and reply in #{}", forum.name),
                ));
            } else {
                checks.push(Check::fail(
                    "discord permissions",
                    format!(
                        "the bot lacks {} in #{}",
                        missing.get_permission_names().join(", "),
                        forum.name
                    ),
                    "grant these to the bot's role on the forum channel",
                ));
            }
        }
        other => checks.push(Check::fail(
            "discord permissions",
            format!("the bot's membership cannot be read: {}", error_of(other)),
            "invite the bot to the guild",
        )),
    }
    checks
}

/// Where the token comes from: a variable is a warning, since hanarang's environment is
/// in `/proc` until it is wiped at start, and in the environment of whatever started it.
fn token_check(source: &TokenSource) -> Check {
    match source {
        TokenSource::Env(_) => Check::warn(
            "discord token",
            format!("from {source} (wiped from hanarang's environment at start)"),
            format!(
                "better: a file only the service reads, discord.token_file or systemd's LoadCredential={TOKEN_CREDENTIAL}:/etc/hanarang/{TOKEN_CREDENTIAL}"
            ),
        ),
        _ => Check::pass("discord token", format!("from {source}")),
    }
}

fn error_of<T>(r: Result<Result<T, serenity::Error>, tokio::time::error::Elapsed>) -> String {
    match r {
        Ok(Ok(_)) => "unexpected answer".into(),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {}s", TIMEOUT.as_secs()),
    }
}
