//! The Discord bridge (`SPEC.md` §8), the only module that knows serenity and poise. It
//! turns slash commands and button clicks into the same durable commands the CLI gives,
//! and follows the transitions log into one forum post per sprint. It never touches a
//! sister process or routes a handoff: Discord only notifies.

mod bridge;
pub mod checks;
pub mod commands;
pub mod doctor;
pub mod render;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use poise::serenity_prelude as serenity;

pub use bridge::{BOARD_INTERVAL, Bridge, CURSOR};

use crate::config::{Config, DiscordConfig};
use crate::orchestrator::Handle;
use crate::pipeline::Policy;

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Context<'a> = poise::Context<'a, Data, Error>;

/// What every command and click can reach.
pub struct Data {
    pub handle: Handle,
    pub config: Arc<Config>,
    pub discord: DiscordConfig,
    pub policy: Policy,
}

/// The bot token, read from the environment; never printed.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    pub fn new(token: impl Into<String>) -> Token {
        Token(token.into())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<hidden>)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "discord.token_env: the environment variable {0} is not set (it must hold the bot token; the token never goes in the config file)"
    )]
    TokenMissing(String),
    #[error("discord.token_env: Discord refused the token in {0} ({1}); check the bot token")]
    TokenRefused(String, String),
    #[error("Discord could not be reached to check the token: {0}")]
    Unreachable(String),
    #[error("the Discord client failed: {0}")]
    Client(String),
}

impl StartError {
    /// Config and token problems are the operator's to fix (exit 2).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            StartError::TokenMissing(_) | StartError::TokenRefused(..)
        )
    }
}

/// Reads the token from the variable `discord.token_env` names.
pub fn read_token(discord: &DiscordConfig) -> Result<Token, StartError> {
    match std::env::var(&discord.token_env) {
        Ok(t) if !t.trim().is_empty() => Ok(Token(t.trim().to_string())),
        _ => Err(StartError::TokenMissing(discord.token_env.clone())),
    }
}

/// The REST client, through `discord.http_proxy` when set. serenity honours a proxy only
/// with its own ratelimiter off; the proxy then owns rate limiting.
pub fn http(discord: &DiscordConfig, token: &Token) -> serenity::Http {
    let mut builder = serenity::HttpBuilder::new(&token.0);
    if let Some(proxy) = &discord.http_proxy {
        builder = builder
            .proxy(proxy.trim_end_matches('/'))
            .ratelimiter_disabled(true);
    }
    builder.build()
}

/// Checks the token with Discord before anything starts.
pub async fn check_token(discord: &DiscordConfig, http: &serenity::Http) -> Result<(), StartError> {
    match tokio::time::timeout(Duration::from_secs(20), http.get_current_user()).await {
        Ok(Ok(me)) => {
            tracing::info!(bot = %me.name, "Discord token accepted");
            Ok(())
        }
        Ok(Err(serenity::Error::Http(e))) if e.status_code().is_some_and(|s| s.as_u16() == 401) => {
            Err(StartError::TokenRefused(
                discord.token_env.clone(),
                "401 Unauthorized".into(),
            ))
        }
        Ok(Err(e)) => Err(StartError::Unreachable(e.to_string())),
        Err(_) => Err(StartError::Unreachable("no answer within 20s".into())),
    }
}

/// Runs the bot and the forum bridge until `shutdown` resolves.
pub async fn run(
    config: Arc<Config>,
    discord: DiscordConfig,
    handle: Handle,
    http: serenity::Http,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    let guild = serenity::GuildId::new(discord.guild_id.0);
    let data = Data {
        policy: Policy::from(&config.pipeline),
        handle: handle.clone(),
        config: config.clone(),
        discord: discord.clone(),
    };
    let framework = poise::Framework::builder()
        .options(poise::FrameworkOptions {
            commands: commands::all(),
            event_handler: |ctx, event| Box::pin(on_event(ctx, event)),
            on_error: |error| Box::pin(on_error(error)),
            ..Default::default()
        })
        .setup(move |ctx, _ready, framework| {
            Box::pin(async move {
                poise::builtins::register_in_guild(ctx, &framework.options().commands, guild)
                    .await?;
                tracing::info!(%guild, "slash commands registered");
                Ok(data)
            })
        })
        .build();
    let mut client = serenity::ClientBuilder::new_with_http(http, serenity::GatewayIntents::GUILDS)
        .framework(framework)
        .await
        .map_err(|e| StartError::Client(e.to_string()))?;
    let bridge = Bridge::new(client.http.clone(), handle.store.clone(), config, discord);
    let (stop_bridge, bridge_stopped) = tokio::sync::oneshot::channel::<()>();
    let bridge_task = tokio::spawn(bridge.run(handle.subscribe(), async {
        let _ = bridge_stopped.await;
    }));
    let result = tokio::select! {
        r = client.start() => r.map_err(|e| StartError::Client(e.to_string())),
        // No `shard_manager.shutdown_all()`: serenity 0.12's shard shutdown waits for the
        // gateway's close frame in a loop that spins without yielding once the stream has
        // ended (`checked_shutdown`), which would hold a worker thread and keep the
        // runtime from ever stopping. The shards are dropped with the runtime instead;
        // Discord sees the connection close.
        () = shutdown => Ok(()),
    };
    let _ = stop_bridge.send(());
    let _ = bridge_task.await;
    result
}

async fn on_event(
    ctx: poise::FrameworkContext<'_, Data, Error>,
    event: &serenity::FullEvent,
) -> Result<(), Error> {
    if let serenity::FullEvent::InteractionCreate { interaction } = event {
        let data = ctx.user_data;
        match interaction {
            serenity::Interaction::Component(click) => {
                commands::on_button(ctx.serenity_context, data, click).await?;
            }
            serenity::Interaction::Modal(submit) => {
                commands::on_modal(ctx.serenity_context, data, submit).await?;
            }
            _ => {}
        }
    }
    Ok(())
}

async fn on_error(error: poise::FrameworkError<'_, Data, Error>) {
    match error {
        poise::FrameworkError::Command { error, ctx, .. } => {
            tracing::error!(command = %ctx.command().qualified_name, error = %error, "a Discord command failed");
            let _ = ctx
                .send(
                    poise::CreateReply::default()
                        .content("Something went wrong; the orchestrator's log has the details.")
                        .ephemeral(true)
                        .allowed_mentions(serenity::CreateAllowedMentions::new()),
                )
                .await;
        }
        other => {
            if let Err(e) = poise::builtins::on_error(other).await {
                tracing::error!(error = %e, "while handling a Discord error");
            }
        }
    }
}
