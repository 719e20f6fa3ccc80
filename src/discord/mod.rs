//! The Discord bridge, the only module that knows serenity and poise. It
//! turns slash commands and button clicks into the same durable commands the CLI gives,
//! and follows the transitions log into one forum post per sprint. It never touches a
//! sister process or routes a handoff: Discord only notifies.

mod bridge;
pub mod buttons;
pub mod commands;
pub mod inert;
pub mod notes;
pub mod render;
mod rest;
pub mod summary;
mod token;

use std::sync::Arc;
use std::time::Duration;

use poise::serenity_prelude as serenity;

pub use bridge::{BOARD_INTERVAL, Bridge, CURSOR};
pub use token::{Token, read_token, take_from_environment};

use crate::config::{Config, DiscordConfig, TokenSource};
use crate::orchestrator::Handle;
use crate::pipeline::Backoff;
use crate::pipeline::Policy;

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Context<'a> = poise::Context<'a, Data, Error>;

/// What every command and click can reach.
pub struct Data {
    pub handle: Handle,
    /// Tells the forum bridge a note from a thread was recorded (it marks it when given).
    pub notes: Arc<tokio::sync::Notify>,
    pub config: Arc<Config>,
    pub discord: DiscordConfig,
    pub policy: Policy,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "discord.token_env: the environment variable {0} is not set (it must hold the bot token, unless discord.token_file or systemd's credential discord-token does; the token never goes in the config file)"
    )]
    TokenMissing(String),
    #[error("{}: {}", .0.key(), .1)]
    TokenUnreadable(TokenSource, String),
    #[error("{}: Discord refused the token in {} ({}); check the bot token", .0.key(), .0.place(), .1)]
    TokenRefused(TokenSource, String),
    #[error("Discord could not be reached: {0}")]
    Unreachable(String),
    #[error("the Discord client failed: {0}")]
    Client(String),
}

impl StartError {
    /// Config and token problems are the operator's to fix (exit 2).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            StartError::TokenMissing(_)
                | StartError::TokenUnreadable(..)
                | StartError::TokenRefused(..)
        )
    }
}

/// serenity's REST client (the gateway, commands and replies), through
/// `discord.http_proxy` when set. serenity honours a proxy only with its own ratelimiter
/// off; the forum bridge, which makes most of the calls, honours 429s itself (`rest`).
pub fn http(discord: &DiscordConfig, token: &Token) -> serenity::Http {
    let mut builder = serenity::HttpBuilder::new(token.expose());
    if let Some(proxy) = &discord.http_proxy {
        builder = builder
            .proxy(proxy.trim_end_matches('/'))
            .ratelimiter_disabled(true);
    }
    builder.build()
}

/// Checks the token with Discord, waiting at most `wait` for its answer.
pub async fn check_token(
    discord: &DiscordConfig,
    http: &serenity::Http,
    wait: Duration,
) -> Result<(), StartError> {
    match tokio::time::timeout(wait, http.get_current_user()).await {
        Ok(Ok(me)) => {
            tracing::info!(bot = %me.name, "Discord token accepted");
            Ok(())
        }
        Ok(Err(e)) => Err(refused_or(discord, e, StartError::Unreachable)),
        Err(_) => Err(StartError::Unreachable(format!(
            "no answer within {}",
            humantime::format_duration(wait)
        ))),
    }
}

/// The wait before the bot tries to reach Discord again: from a second, doubling up to a
/// minute.
const RECONNECT: Backoff = Backoff::doubling(Duration::from_secs(1), Duration::from_secs(60));
/// A failure to reach Discord is logged at most this often (the rest at debug).
const LOG_EVERY: Duration = Duration::from_secs(60);

/// A warning that repeats while Discord is down: logged once per `LOG_EVERY`, so an
/// outage of an hour is a line a minute in the journal, not one per retry.
#[derive(Debug, Default)]
struct Repeated(Option<tokio::time::Instant>);

impl Repeated {
    /// Whether this occurrence is to be logged as a warning.
    fn due(&mut self) -> bool {
        let due = self.0.is_none_or(|at| at.elapsed() >= LOG_EVERY);
        if due {
            self.0 = Some(tokio::time::Instant::now());
        }
        due
    }
}

/// Runs the bot and the forum bridge until `shutdown` resolves. Discord being down never
/// ends it: the forum bridge retries its deliveries, and the gateway is tried again with
/// backoff (each failure logged once a minute) for as long as it takes. Only a token
/// Discord refuses ends it early (`StartError::TokenRefused`).
pub async fn run(
    config: Arc<Config>,
    discord: DiscordConfig,
    handle: Handle,
    token: Token,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    run_leading(config, discord, handle, token, None, shutdown).await
}

/// The bot's lease among several hosts, as its host last renewed it: the bridge posts
/// nothing once it may have run out (another host's bot may be posting by then).
#[derive(Debug, Clone)]
pub struct Lead(Arc<std::sync::Mutex<tokio::time::Instant>>);

impl Lead {
    /// A lease valid until `until`.
    pub fn new(until: tokio::time::Instant) -> Lead {
        Lead(Arc::new(std::sync::Mutex::new(until)))
    }

    /// Renewed: valid until `until`.
    pub fn extend(&self, until: tokio::time::Instant) {
        if let Ok(mut valid) = self.0.lock() {
            *valid = until;
        }
    }

    pub fn holds(&self) -> bool {
        self.0
            .lock()
            .is_ok_and(|valid| tokio::time::Instant::now() < *valid)
    }
}

/// `run` for the host holding the bot's lease among several (`lead`).
pub async fn run_leading(
    config: Arc<Config>,
    discord: DiscordConfig,
    handle: Handle,
    token: Token,
    lead: Option<Lead>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    let mut bridge = Bridge::new(
        rest::Rest::new(&discord, &token),
        handle.store.clone(),
        config.clone(),
        discord.clone(),
    );
    bridge.lead = lead;
    let notes = bridge.notes.clone();
    let (stop_bridge, bridge_stopped) = tokio::sync::oneshot::channel::<()>();
    let (events, steps) = (handle.subscribe(), handle.subscribe_live());
    let mut bridge_task = tokio::spawn(bridge.run(events, steps, async {
        let _ = bridge_stopped.await;
    }));
    let result = tokio::select! {
        r = connect(&config, &discord, &handle, &token, &notes) => r,
        // It ends early only when Discord refused the token, or when it failed.
        r = &mut bridge_task => {
            return r.unwrap_or_else(|e| {
                tracing::error!(error = %e, "the Discord forum bridge failed");
                Err(StartError::Client(format!("the forum bridge failed: {e}")))
            });
        }
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

/// The gateway side of the bot: connects, and connects again after every failure to
/// reach Discord, until the token is refused.
async fn connect(
    config: &Arc<Config>,
    discord: &DiscordConfig,
    handle: &Handle,
    token: &Token,
    notes: &Arc<tokio::sync::Notify>,
) -> Result<(), StartError> {
    let mut failures: u32 = 0;
    let mut repeated = Repeated::default();
    loop {
        let why = match start_client(config, discord, handle, token, notes).await {
            Err(e @ StartError::TokenRefused(..)) => return Err(e),
            Err(e) => e.to_string(),
            Ok(()) => {
                // It was connected: a new outage starts its backoff afresh.
                failures = 0;
                "the gateway connection ended".to_string()
            }
        };
        failures = failures.saturating_add(1);
        let wait = RECONNECT.delay(failures);
        if repeated.due() {
            tracing::warn!(error = %why, retry_in = ?wait, "Discord cannot be reached; the pipeline runs on, and the bot keeps trying");
        } else {
            tracing::debug!(error = %why, retry_in = ?wait, "Discord still cannot be reached");
        }
        tokio::time::sleep(wait).await;
    }
}

/// One life of the gateway client: from asking Discord where the gateway is to the end of
/// its shards (which serenity reconnects itself while Discord answers).
async fn start_client(
    config: &Arc<Config>,
    discord: &DiscordConfig,
    handle: &Handle,
    token: &Token,
    notes: &Arc<tokio::sync::Notify>,
) -> Result<(), StartError> {
    let http = http(discord, token);
    // Asked here first: serenity falls back to the public gateway address when this
    // fails, which is not where a proxied bot must connect (and no use while Discord is
    // down anyway).
    let gateway = match http.get_gateway().await {
        Ok(gateway) => gateway.url,
        Err(e) => return Err(refused_or(discord, e, StartError::Unreachable)),
    };
    let guild = serenity::GuildId::new(discord.guild_id.0);
    let data = Data {
        policy: Policy::from(&config.pipeline),
        handle: handle.clone(),
        notes: notes.clone(),
        config: config.clone(),
        discord: discord.clone(),
    };
    let intents = intents(&http).await;
    let framework = poise::Framework::builder()
        .options(poise::FrameworkOptions {
            commands: commands::all(),
            // Replies in a thread are notes (`notes`), never commands.
            prefix_options: poise::PrefixFrameworkOptions {
                mention_as_prefix: false,
                ..Default::default()
            },
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
    let mut client = serenity::ClientBuilder::new_with_http(http, intents)
        .framework(framework)
        .await
        .map_err(|e| StartError::Client(e.to_string()))?;
    *client.ws_url.lock().await = gateway;
    client
        .start()
        .await
        .map_err(|e| refused_or(discord, e, StartError::Client))
}

/// The gateway intents: the guild, and its messages for the replies in sprint threads
/// (`notes`). Their text needs the privileged Message Content intent, asked for only when
/// the application has it: Discord closes the gateway (4014) on a bot that asks for one it
/// was not granted, which would leave the bot offline.
async fn intents(http: &serenity::Http) -> serenity::GatewayIntents {
    use serenity::GatewayIntents as I;
    let base = I::GUILDS | I::GUILD_MESSAGES;
    match message_content_granted(http).await {
        Ok(true) => base | I::MESSAGE_CONTENT,
        Ok(false) => {
            tracing::warn!(
                "the bot has no Message Content intent: replies in sprint threads are not read as notes (docs/discord.md, Replies in the thread, says how to turn it on)"
            );
            base
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot ask Discord whether the bot has the Message Content intent: replies in sprint threads are not read as notes until the bot connects again");
            base
        }
    }
}

/// Whether the application may receive message text (`GATEWAY_MESSAGE_CONTENT`, or its
/// `_LIMITED` form under 100 guilds, turned on in the developer portal).
pub async fn message_content_granted(http: &serenity::Http) -> Result<bool, serenity::Error> {
    use serenity::ApplicationFlags as F;
    let app = http.get_current_application_info().await?;
    Ok(app.flags.is_some_and(|f| {
        f.intersects(F::GATEWAY_MESSAGE_CONTENT | F::GATEWAY_MESSAGE_CONTENT_LIMITED)
    }))
}

/// A 401 from REST or an invalid-authentication close (4004) from the gateway: Discord
/// refuses the token.
fn is_refused(e: &serenity::Error) -> bool {
    match e {
        serenity::Error::Http(h) => h.status_code().is_some_and(|s| s.as_u16() == 401),
        serenity::Error::Gateway(serenity::GatewayError::InvalidAuthentication) => true,
        _ => false,
    }
}

/// A refused token (`is_refused`), or whatever `other` makes of the error.
fn refused_or(
    discord: &DiscordConfig,
    e: serenity::Error,
    other: fn(String) -> StartError,
) -> StartError {
    match &e {
        serenity::Error::Http(_) if is_refused(&e) => {
            StartError::TokenRefused(discord.token_source(), "401 Unauthorized".into())
        }
        serenity::Error::Gateway(_) if is_refused(&e) => StartError::TokenRefused(
            discord.token_source(),
            "the gateway closed with 4004, authentication failed".into(),
        ),
        _ => other(e.to_string()),
    }
}

async fn on_event(
    ctx: poise::FrameworkContext<'_, Data, Error>,
    event: &serenity::FullEvent,
) -> Result<(), Error> {
    if let serenity::FullEvent::Message { new_message } = event {
        notes::on_message(ctx.serenity_context, ctx.user_data, new_message).await?;
    }
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
