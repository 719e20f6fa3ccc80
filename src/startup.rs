//! Start-up wiring for `serve` and `run`: the store, the orchestrator, the Discord bridge
//! and the signals that stop them.

use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::errln;
use crate::fence::Confinement;
use crate::orchestrator::Orchestrator;
use crate::output::Exit;
use crate::sister::container::Containment;
use crate::store::Store;

pub async fn open_store(config: &Config) -> Result<Store, Exit> {
    Store::open(&config.database.url).await.map_err(|e| {
        errln!("hanarang: {e}");
        Exit::Failure
    })
}

pub async fn start_orchestrator(config: Arc<Config>, store: Store) -> Result<Orchestrator, Exit> {
    // Said once, before any sister starts.
    let required = config.agent.confine == crate::config::Confine::Required;
    match crate::fence::confinement(required) {
        Confinement::Fenced(_) => {}
        Confinement::Unconfined(warning) => {
            tracing::warn!("{warning}; `hanarang doctor` says more");
        }
        Confinement::Refused(e) => {
            errln!("hanarang: {e}");
            return Err(Exit::Usage);
        }
    }
    match crate::sister::container::containment(required) {
        Containment::Contained(_) => {}
        Containment::Uncontained(warning) => {
            tracing::warn!("{warning}; `hanarang doctor` says more");
        }
        Containment::Refused(e) => {
            errln!("hanarang: {e}");
            return Err(Exit::Usage);
        }
    }
    let describe = crate::report::pull_request_body(store.clone(), config.clone());
    Orchestrator::start(config, store)
        .await
        .map(|o| o.describe_with(describe))
        .map_err(|e| {
            errln!("hanarang: {e}");
            Exit::Failure
        })
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

/// `hanarang serve` until `shutdown` resolves (the process's signals: `shutdown_signal`),
/// or until the loop or the bot stops on its own.
pub async fn serve(config: Arc<Config>, shutdown: impl std::future::Future<Output = ()>) -> Exit {
    // A missing or refused token is the operator's to fix (exit 2), found before anything
    // starts. Discord being unreachable is not: it only notifies, so the pipeline starts
    // all the same and the bot keeps trying to connect.
    let discord = match &config.discord {
        None => None,
        Some(d) => {
            let token = match crate::discord::read_token(d) {
                Ok(token) => token,
                Err(e) => return discord_failed(&e),
            };
            let http = crate::discord::http(d, &token);
            match crate::discord::check_token(d, &http, TOKEN_CHECK_WAIT).await {
                Ok(()) => {}
                Err(e) if e.is_config() => return discord_failed(&e),
                Err(e) => {
                    tracing::warn!(error = %e, "Discord cannot be reached; the pipeline starts anyway, and the bot keeps trying to connect")
                }
            }
            Some((d.clone(), token))
        }
    };
    let Ok(store) = open_store(&config).await else {
        return Exit::Failure;
    };
    let orchestrator = match start_orchestrator(config.clone(), store.clone()).await {
        Ok(o) => o,
        Err(exit) => return exit,
    };
    tracing::info!(database = %crate::config::redacted(&config.database.url), host = ?orchestrator.handle().store.scope().map(|s| s.name.clone()), projects = config.projects.len(), discord = discord.is_some(), "orchestrator started");
    let (stop, _) = tokio::sync::broadcast::channel::<()>(1);
    let stopped = |stop: &tokio::sync::broadcast::Sender<()>| {
        let mut rx = stop.subscribe();
        async move {
            let _ = rx.recv().await;
        }
    };
    let has_bot = discord.is_some();
    let bot = discord.map(|(d, token)| {
        let handle = orchestrator.handle();
        if handle.store.scope().is_some() {
            tokio::spawn(bot_when_leading(
                config.clone(),
                d,
                handle,
                token,
                stop.subscribe(),
            ))
        } else {
            tokio::spawn(crate::discord::run(
                config.clone(),
                d,
                handle,
                token,
                stopped(&stop),
            ))
        }
    });
    let bot = async move {
        match bot {
            Some(task) => task.await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(bot);
    let mut driver = orchestrator.run_on_own_thread(stopped(&stop));
    // Until a signal, or until the orchestrator or the bot stops on its own (an error).
    let (mut bot_result, mut driver_result) = (None, None);
    tokio::select! {
        () = shutdown => {}
        r = &mut driver => driver_result = Some(r),
        r = &mut bot => bot_result = Some(r),
    }
    tracing::info!("shutting down");
    store.stopping();
    let _ = stop.send(());
    if has_bot && bot_result.is_none() {
        bot_result = Some(bot.await);
    }
    let driver_result = match driver_result {
        Some(r) => r,
        None => driver.await,
    };
    let mut exit = Exit::Success;
    match bot_result {
        None | Some(Ok(Ok(()))) => {}
        Some(Ok(Err(e))) => {
            errln!("hanarang serve: {e}");
            exit = if e.is_config() {
                Exit::Usage
            } else {
                Exit::Failure
            };
        }
        Some(Err(e)) => {
            errln!("hanarang serve: the Discord bridge failed: {e}");
            exit = Exit::Failure;
        }
    }
    store.close().await;
    match driver_result {
        Ok(()) => exit,
        Err(e) => {
            errln!("hanarang serve: {e}");
            Exit::Failure
        }
    }
}

/// How long `serve` waits for Discord to judge the token before it starts the pipeline
/// anyway (the bot then finds out, and a refused token still stops `serve`).
const TOKEN_CHECK_WAIT: Duration = Duration::from_secs(5);

fn discord_failed(e: &crate::discord::StartError) -> Exit {
    errln!("hanarang serve: {e}");
    if e.is_config() {
        Exit::Usage
    } else {
        Exit::Failure
    }
}

/// The role of the host that runs the Discord bot, among several on one database.
const BOT_ROLE: &str = "discord";

/// With several hosts on one PostgreSQL database, exactly one runs the Discord bot: the
/// one that holds the bot's lease (`Database::lead`), renewed every third of `[host]
/// lease_ttl`. The others stand by and try for it as often; when the holder goes (its
/// lease runs out, or it gives it up on stopping), one of them starts its bot, which
/// delivers the log from the shared cursor on. A bot whose lease could not be renewed
/// within its life is stopped: another host may run the bot by then.
async fn bot_when_leading(
    config: Arc<Config>,
    discord: crate::config::DiscordConfig,
    handle: crate::orchestrator::Handle,
    token: crate::discord::Token,
    mut stop: tokio::sync::broadcast::Receiver<()>,
) -> Result<(), crate::discord::StartError> {
    let ttl = config.host.lease_ttl.0;
    let store = handle.store.clone();
    let lease = format!("{}-{}", std::process::id(), crate::clock::now_ms());
    loop {
        // Standing by.
        let asked = loop {
            let asked = tokio::time::Instant::now();
            match store.lead(BOT_ROLE, &lease).await {
                Ok(true) => break asked,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "cannot ask for the Discord bot's lease"),
            }
            tokio::select! {
                _ = stop.recv() => return Ok(()),
                () = tokio::time::sleep(ttl / 3) => {}
            }
        };
        tracing::info!("this host runs the Discord bot");
        // Valid a lease's life from before the renewal was asked for: the database's
        // heartbeat is no earlier, so the lease runs out no sooner there.
        let lead = crate::discord::Lead::new(asked + ttl);
        let (lost_tx, lost) = tokio::sync::oneshot::channel::<()>();
        let (end_tx, end) = tokio::sync::oneshot::channel::<()>();
        let bot = bot_on_own_runtime(
            config.clone(),
            discord.clone(),
            handle.clone(),
            token.clone(),
            lead.clone(),
            async move {
                tokio::select! {
                    _ = lost => {}
                    _ = end => {}
                }
            },
        );
        tokio::pin!(bot);
        let mut renewed = asked;
        let result = loop {
            // Held: renewed. Taken by another host (this one's lease ran out meanwhile),
            // or not renewed within its life: the bot stops.
            tokio::select! {
                r = &mut bot => break Some(r),
                _ = stop.recv() => {
                    let _ = end_tx.send(());
                    let r = bot.await;
                    if let Err(e) = store.release_lead(BOT_ROLE, &lease).await {
                        tracing::warn!(error = %e, "cannot give the Discord bot's lease up");
                    }
                    return r;
                }
                () = tokio::time::sleep(ttl / 3) => {
                    let asked = tokio::time::Instant::now();
                    let lost = match store.lead(BOT_ROLE, &lease).await {
                        Ok(true) => {
                            renewed = asked;
                            lead.extend(asked + ttl);
                            false
                        }
                        Ok(false) => true,
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot renew the Discord bot's lease");
                            renewed.elapsed() > ttl
                        }
                    };
                    if lost {
                        tracing::error!("this host lost the Discord bot's lease: its bot stops, another host runs it");
                        let _ = lost_tx.send(());
                        let _ = bot.await;
                        break None;
                    }
                }
            }
        };
        if let Some(r) = result {
            // The bot ended on its own: a refused token, or a failure.
            let _ = store.release_lead(BOT_ROLE, &lease).await;
            return r;
        }
    }
}

/// `discord::run` on a thread with a runtime of its own, until `until` resolves. The
/// runtime is shut down with it: serenity leaves its shard runners behind when the client
/// is dropped, and a bot that stops must leave no connection to Discord behind.
/// The database as `store` is, through a pool of its own.
async fn own_store(
    config: &Config,
    store: &crate::store::Store,
) -> Result<crate::store::Store, crate::store::StoreError> {
    let own = crate::store::Store::open(&config.database.url).await?;
    Ok(match store.scope() {
        Some(scope) => own.shared_by(scope.clone()),
        None => own,
    })
}

async fn bot_on_own_runtime(
    config: Arc<Config>,
    discord: crate::config::DiscordConfig,
    handle: crate::orchestrator::Handle,
    token: crate::discord::Token,
    lead: crate::discord::Lead,
    until: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), crate::discord::StartError> {
    let (done_tx, done) = tokio::sync::oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("hanarang-bot".into())
        .spawn(move || {
            let result = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
            {
                Ok(rt) => {
                    let r = rt.block_on(async {
                        // Connections of its own, opened on its runtime: a PostgreSQL
                        // connection belongs to the runtime that opened it, and the
                        // orchestrator's pool would keep the ones that die with this
                        // runtime when the bot stops (its next statement on one failed).
                        let handle = match own_store(&config, &handle.store).await {
                            Ok(store) => handle.with_store(store),
                            Err(e) => {
                                return Err(crate::discord::StartError::Client(format!(
                                    "cannot open the database for the bot: {e}"
                                )));
                            }
                        };
                        crate::discord::run_leading(
                            config,
                            discord,
                            handle,
                            token,
                            Some(lead),
                            until,
                        )
                        .await
                    });
                    rt.shutdown_background();
                    r
                }
                Err(e) => Err(crate::discord::StartError::Client(format!(
                    "cannot start the bot's runtime: {e}"
                ))),
            };
            let _ = done_tx.send(result);
        });
    if let Err(e) = thread {
        return Err(crate::discord::StartError::Client(format!(
            "cannot start the bot's thread: {e}"
        )));
    }
    done.await.unwrap_or_else(|_| {
        Err(crate::discord::StartError::Client(
            "the bot's thread ended without a result".into(),
        ))
    })
}
