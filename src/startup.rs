//! Start-up wiring for `serve` and `run`: the store, the orchestrator, the Discord bridge
//! and the signals that stop them.

use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::errln;
use crate::orchestrator::Orchestrator;
use crate::output::Exit;
use crate::store::Store;

pub async fn open_store(config: &Config) -> Result<Store, Exit> {
    Store::open(&config.database.url).await.map_err(|e| {
        errln!("hanarang: {e}");
        Exit::Failure
    })
}

pub async fn start_orchestrator(config: Arc<Config>, store: Store) -> Result<Orchestrator, Exit> {
    Orchestrator::start(config, store).await.map_err(|e| {
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

pub async fn serve(config: Arc<Config>) -> Exit {
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
    let orchestrator = match start_orchestrator(config.clone(), store).await {
        Ok(o) => o,
        Err(exit) => return exit,
    };
    tracing::info!(database = %config.database.url, projects = config.projects.len(), discord = discord.is_some(), "orchestrator started");
    let (stop, _) = tokio::sync::broadcast::channel::<()>(1);
    let stopped = |stop: &tokio::sync::broadcast::Sender<()>| {
        let mut rx = stop.subscribe();
        async move {
            let _ = rx.recv().await;
        }
    };
    let has_bot = discord.is_some();
    let bot = discord.map(|(d, token)| {
        tokio::spawn(crate::discord::run(
            config.clone(),
            d,
            orchestrator.handle(),
            token,
            stopped(&stop),
        ))
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
        () = shutdown_signal() => {}
        r = &mut driver => driver_result = Some(r),
        r = &mut bot => bot_result = Some(r),
    }
    tracing::info!("shutting down");
    crate::store::stopping();
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
