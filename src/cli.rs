//! The command line (`SPEC.md` §6): clap definitions and the dispatch to the library.
//!
//! Exit codes are part of the public interface: 0 success, 1 other failure, 2 usage or
//! config error, 3 escalated (`run`), 4 refused command.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{self, Config};
use crate::handoff::message::Actor;
use crate::handoff::schema::{self, Dialect};
use crate::handoff::validate;
use crate::notify::console::{Console, Progress};
use crate::orchestrator::client::{self, Answer};
use crate::orchestrator::{Orchestrator, OrchestratorError, now_ms};
use crate::pipeline::{Policy, State};
use crate::store::{CommandKind, Sprint, Store, parse_sprint_id};
use crate::{errln, out, outln};

/// The process exit codes of `SPEC.md` §6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    Failure = 1,
    Usage = 2,
    Escalated = 3,
    Refused = 4,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "hanarang",
    version,
    about = "Runs four AI coding agents as a state machine: plan, implement, review, deploy"
)]
pub struct Cli {
    /// Config file (default: ./config.toml, else $HANARANG_CONFIG)
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Log lines on stderr as text or as JSON (RUST_LOG sets the level)
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: crate::logging::LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the orchestrator, plus the Discord bridge when [discord] is set
    Serve,
    /// Run one sprint in the foreground with console progress
    Run(RunArgs),
    /// A whole sprint with built-in simulated sisters and a throwaway database
    Demo,
    /// Start, inspect and steer sprints
    #[command(subcommand)]
    Sprint(SprintCommand),
    /// Print the JSON Schema of the messages a sister returns
    Schema(SchemaArgs),
    /// Check one sister output as the orchestrator would
    Validate(ValidateArgs),
    /// Configuration commands
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Check a deployment: config, database, agent programs, projects, Discord
    Doctor,
    /// Act as a simulated sister (what `demo` runs)
    #[command(hide = true)]
    SimulateSister,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// What the sprint should achieve
    pub goal: String,
    /// The configured project (optional when exactly one is configured)
    #[arg(long)]
    pub project: Option<String>,
    /// Extra instructions handed to the first sister
    #[arg(long)]
    pub focus: Option<String>,
    /// Approve the deploy without asking
    #[arg(long)]
    pub auto_approve: bool,
}

#[derive(Debug, Subcommand)]
pub enum SprintCommand {
    /// Queue a new sprint; prints its id
    Start {
        /// What the sprint should achieve
        goal: String,
        /// The configured project (optional when exactly one is configured)
        #[arg(long)]
        project: Option<String>,
        /// Extra instructions handed to the first sister
        #[arg(long)]
        focus: Option<String>,
    },
    /// Show sprints (all, or one)
    Status {
        /// A sprint: SPRINT-001, sprint-001 or 1 (all sprints when left out)
        id: Option<String>,
        /// Print JSON (fields in README) instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Transitions, runs and the handoff lineage of a sprint; one run's captured output
    Log {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
        /// Print JSON (fields in README), runs with their stdout/stderr tails
        #[arg(long)]
        json: bool,
        /// One run (SPRINT-001-R02, R02 or 2): its captured stdout and stderr
        #[arg(long, value_name = "RUN", conflicts_with = "json")]
        run: Option<String>,
        /// With --run: only the run's stdout, as it was captured
        #[arg(long, requires = "run", conflicts_with = "stderr")]
        stdout: bool,
        /// With --run: only the run's stderr, as it was captured
        #[arg(long, requires = "run")]
        stderr: bool,
    },
    /// Approve the deploy of a sprint in `done`
    Approve {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
    },
    /// Send a sprint in `done` back to the implementer with a note
    RequestChanges {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
        /// What should change (handed to the implementer)
        #[arg(long)]
        note: String,
    },
    /// Resume an escalated sprint, or start a waiting stage (a pause, a retry) at once
    Resume {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
        /// Extra instructions for the sister that resumes
        #[arg(long)]
        focus: Option<String>,
    },
    /// Stop a sprint for good
    Abort {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
        /// Why (shown in the log and the thread)
        #[arg(long)]
        reason: Option<String>,
    },
    /// Restart the running sister as a fresh session seeded with a handoff document
    Handoff {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
        /// Extra instructions for the fresh session
        #[arg(long)]
        focus: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Only this sister's message
    #[arg(long)]
    pub actor: Option<Actor>,
    /// draft-07 (Claude Code) or openai-strict (Codex)
    #[arg(long, value_enum, default_value = "draft-07")]
    pub dialect: Dialect,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Also require the message to come from this sister
    #[arg(long)]
    pub actor: Option<Actor>,
    /// Take the message from this JSON Pointer inside the input (as `output_pointer`)
    #[arg(long, default_value = "")]
    pub pointer: String,
    /// The output to check; `-` or nothing reads stdin
    pub file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the config and print it resolved (the token is never printed)
    Check,
}

impl Command {
    /// Whether the command is the service (and so logs at info by default). `run` is a
    /// person's command: its own lines are the progress, so it logs at warn like the rest.
    pub fn is_service(&self) -> bool {
        matches!(self, Command::Serve)
    }
}

/// Runs a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> Exit {
    match cli.command {
        Command::Schema(args) => print_schema(&args),
        Command::Validate(args) => validate_file(&args),
        Command::Config(ConfigCommand::Check) => config_check(cli.config.as_deref()),
        Command::SimulateSister => match crate::demo::simulate_sister() {
            0 => Exit::Success,
            _ => Exit::Failure,
        },
        Command::Demo => block_on(demo()),
        Command::Doctor => block_on(async {
            let checks = crate::doctor::run(cli.config.as_deref()).await;
            for check in &checks {
                outln!("{}", check.line());
            }
            if checks.iter().all(|c| c.ok) {
                outln!("\nall {} checks passed", checks.len());
                Exit::Success
            } else {
                let failed = checks.iter().filter(|c| !c.ok).count();
                outln!("\n{failed} of {} checks failed", checks.len());
                Exit::Failure
            }
        }),
        Command::Serve => with_config(cli.config.as_deref(), |c| block_on(serve(c))),
        Command::Run(args) => with_config(cli.config.as_deref(), |c| {
            block_on(run_sprint(c, args, RunMode::Foreground))
        }),
        Command::Sprint(command) => {
            with_config(cli.config.as_deref(), |c| block_on(sprint(c, command)))
        }
    }
}

fn with_config(path: Option<&Path>, f: impl FnOnce(Arc<Config>) -> Exit) -> Exit {
    match config::locate(path).and_then(|p| Config::load(&p)) {
        Ok(config) => f(Arc::new(config)),
        Err(e) => {
            errln!("{e}");
            Exit::Usage
        }
    }
}

/// How long a command's runtime may take to stop once the command is done.
const EXIT_GRACE: Duration = Duration::from_secs(2);

fn block_on(f: impl std::future::Future<Output = Exit>) -> Exit {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => {
            let exit = rt.block_on(f);
            // Nothing left running may hold the exit up: serenity 0.12 leaves a bot's shard
            // runner behind, and one whose connection has ended busy-loops until its next
            // heartbeat (41 s) without yielding.
            rt.shutdown_timeout(EXIT_GRACE);
            exit
        }
        Err(e) => {
            errln!("hanarang: cannot start the async runtime: {e}");
            Exit::Failure
        }
    }
}

async fn open_store(config: &Config) -> Result<Store, Exit> {
    Store::open(&config.database.url).await.map_err(|e| {
        errln!("hanarang: {e}");
        Exit::Failure
    })
}

async fn start_orchestrator(config: Arc<Config>, store: Store) -> Result<Orchestrator, Exit> {
    Orchestrator::start(config, store).await.map_err(|e| {
        errln!("hanarang: {e}");
        Exit::Failure
    })
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
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

async fn serve(config: Arc<Config>) -> Exit {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunMode {
    Foreground,
    Demo,
}

async fn demo() -> Exit {
    let dir =
        std::env::temp_dir().join(format!("hanarang-demo-{}-{}", std::process::id(), now_ms()));
    let config = match crate::demo::config(&dir) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            errln!("hanarang demo: cannot prepare {}: {e}", dir.display());
            return Exit::Failure;
        }
    };
    outln!(
        "hanarang demo: simulated sisters, throwaway database in {}\n",
        dir.display()
    );
    let args = RunArgs {
        goal: "Add a greeting page to the demo app".into(),
        project: Some(crate::demo::PROJECT.into()),
        focus: None,
        auto_approve: true,
    };
    let exit = run_sprint(config, args, RunMode::Demo).await;
    let _ = std::fs::remove_dir_all(&dir);
    exit
}

/// One sprint in the foreground: the orchestrator drives it (and the sprints its project
/// must finish first), the console prints its lines, and the terminal is asked for deploy
/// approval unless `--auto-approve`.
async fn run_sprint(config: Arc<Config>, args: RunArgs, mode: RunMode) -> Exit {
    let project = match config.project(args.project.as_deref()) {
        Ok((name, _)) => name.to_string(),
        Err(e) => {
            errln!("hanarang run: {e}");
            return Exit::Usage;
        }
    };
    if args.goal.trim().is_empty() {
        errln!("hanarang run: the goal must not be empty");
        return Exit::Usage;
    }
    let Ok(store) = open_store(&config).await else {
        return Exit::Failure;
    };
    let orchestrator = match start_orchestrator(config.clone(), store.clone()).await {
        Ok(o) => o,
        Err(exit) => return exit,
    };
    let sprint = match store
        .create_sprint(
            &project,
            &args.goal,
            args.focus.as_deref(),
            &config.pipeline.branch_template,
            now_ms(),
        )
        .await
    {
        Ok(s) => s,
        Err(e) => {
            errln!("hanarang run: {e}");
            return Exit::Failure;
        }
    };
    outln!(
        "{} queued: {}",
        sprint.id,
        crate::output::escape_controls(&sprint.goal)
    );
    let orchestrator = orchestrator.only(&sprint);
    let handle = orchestrator.handle();
    let mut events = handle.subscribe();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut driver = orchestrator.run_on_own_thread(async move {
        let _ = stop_rx.await;
    });
    let terminal = std::io::stdout().is_terminal();
    let mut console = Console::new(&sprint.id, terminal);
    let mut ticker = tokio::time::interval(STATUS_EVERY);
    // After a long wait (the deploy question) one redraw, not a burst of them.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut current = sprint;
    // What the sprint was last said to wait for (the sprint ahead of it, and its state).
    let mut waits_for: Option<(String, State)> = None;
    let mut ended = None;
    let mut interrupted = false;
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let exit = loop {
        if current.state == State::Queued {
            match store.ahead_of(&current).await {
                Ok(ahead) => {
                    let now = ahead.as_ref().map(|a| (a.id.clone(), a.state));
                    if let Some(ahead) = ahead.filter(|_| now != waits_for) {
                        console.say(&waiting_line(&current, &ahead));
                    }
                    waits_for = now;
                }
                Err(e) => {
                    console.clear_status();
                    errln!("hanarang run: {e}");
                    break Exit::Failure;
                }
            }
        }
        let progress = tokio::select! {
            p = console.next(&store, &mut events, &config) => p,
            () = &mut shutdown => {
                interrupted = true;
                crate::store::stopping();
                break Exit::Failure;
            }
            // The orchestrator stopped on its own (an error): nothing more will happen.
            r = &mut driver => {
                ended = Some(r);
                break Exit::Failure;
            }
            _ = ticker.tick(), if terminal => {
                show_status(&mut console, &current, &config);
                continue;
            }
        };
        current = match progress {
            Ok(Progress::Moved(s)) => *s,
            Ok(Progress::Elsewhere) => continue,
            Err(e) => {
                console.clear_status();
                errln!("hanarang run: {e}");
                break Exit::Failure;
            }
        };
        show_status(&mut console, &current, &config);
        match current.state {
            State::Deployed => break Exit::Success,
            State::Aborted => break Exit::Failure,
            State::Escalated => {
                console.say(&format!(
                    "{} needs a human. Next: {}",
                    current.id,
                    next_step(&current, AppliedBy::Serve)
                ));
                break Exit::Escalated;
            }
            State::Done => {
                console.clear_status();
                let decision = if args.auto_approve {
                    Decision::Approve
                } else {
                    tokio::select! {
                        d = ask_deploy(&current.id, config.pipeline.locale) => d,
                        // Ctrl-C at the question: where the sprint stands is said below.
                        () = &mut shutdown => {
                            interrupted = true;
                            crate::store::stopping();
                            break Exit::Failure;
                        }
                    }
                };
                let by = if args.auto_approve {
                    "cli:auto-approve"
                } else {
                    "cli"
                };
                let (kind, text) = match decision {
                    Decision::Approve => (CommandKind::Approve, None),
                    Decision::RequestChanges(note) => (CommandKind::RequestChanges, Some(note)),
                    Decision::Abort => (
                        CommandKind::Abort,
                        Some("declined at the deploy prompt".to_string()),
                    ),
                    Decision::Later => {
                        outln!(
                            "{} waits in done for deploy approval. Next: {}",
                            current.id,
                            next_step(&current, AppliedBy::Serve)
                        );
                        break Exit::Failure;
                    }
                };
                if let Err(e) = store
                    .submit_command(&current.id, kind, text.as_deref(), by, now_ms())
                    .await
                {
                    errln!("hanarang run: {e}");
                    break Exit::Failure;
                }
                handle.wake();
            }
            _ => {}
        }
    };
    console.clear_status();
    let _ = stop_tx.send(());
    let ended = match ended {
        Some(r) => r,
        None => driver.await,
    };
    if let Err(e) = ended {
        errln!("hanarang run: {e}");
        return Exit::Failure;
    }
    if interrupted {
        // The orchestrator has stopped the sister and recorded where the sprint stands.
        match store.sprint(&current.id).await {
            Ok(Some(s)) => outln!(
                "\n{} stopped: it is {} (round {}, attempt {}). Next: {}",
                s.id,
                s.state,
                s.round,
                s.attempt,
                next_step(&s, AppliedBy::Serve)
            ),
            Ok(None) => {}
            Err(e) => errln!("hanarang run: {e}"),
        }
    }
    if mode == RunMode::Demo && exit == Exit::Success {
        outln!("\ndemo finished: the sprint went from planning to deployed.");
    }
    exit
}

/// How often `run` redraws its status line on a terminal.
const STATUS_EVERY: Duration = Duration::from_secs(1);

fn show_status(console: &mut Console, sprint: &Sprint, config: &Config) {
    let cx = crate::notify::Context::new(config, sprint);
    match crate::notify::messages::status_line(sprint, &cx, now_ms()) {
        Some(line) => console.status(&line),
        None => console.clear_status(),
    }
}

/// What a queued sprint of `run` waits for, and what moves it.
fn waiting_line(sprint: &Sprint, ahead: &Sprint) -> String {
    let why = if ahead.state == State::Queued {
        format!(
            "{} was queued before it in project {} and runs here first",
            ahead.id, sprint.project
        )
    } else {
        format!(
            "{} ({}) holds project {}'s pipeline lock",
            ahead.id, ahead.state, sprint.project
        )
    };
    format!(
        "{} waits: {why}. Next: {}. Commands given meanwhile (from another terminal) are applied here.",
        sprint.id,
        next_step(ahead, AppliedBy::ThisRun)
    )
}

/// Who would carry out the next step: this `run` (it drives the sprints ahead of its own),
/// or `serve` once this process has stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AppliedBy {
    ThisRun,
    Serve,
}

/// The command that moves a sprint on from where it stands.
fn next_step(s: &Sprint, by: AppliedBy) -> String {
    let id = &s.id;
    let applied = match by {
        AppliedBy::ThisRun => "",
        AppliedBy::Serve => {
            "; `hanarang serve` (or the next `hanarang run` of its project) applies it"
        }
    };
    match s.state {
        State::Done => format!(
            "`hanarang sprint approve {id}` deploys it (or `hanarang sprint request-changes {id} --note TEXT`, `hanarang sprint abort {id}`){applied}"
        ),
        State::Escalated => format!(
            "`hanarang sprint resume {id}` (optionally `--focus TEXT`) or `hanarang sprint abort {id}`{applied}"
        ),
        State::Deployed | State::Aborted => "nothing: it has ended".into(),
        _ if by == AppliedBy::ThisRun => {
            format!("it runs here until it ends (or `hanarang sprint abort {id}`)")
        }
        State::Queued => format!(
            "`hanarang serve` starts it once project {}'s pipeline lock is free (or `hanarang sprint abort {id}`)",
            s.project
        ),
        _ => format!("`hanarang serve` carries it on from here (or `hanarang sprint abort {id}`)"),
    }
}

enum Decision {
    Approve,
    RequestChanges(String),
    Abort,
    Later,
}

/// Asks on the terminal whether to deploy. End of input means "later".
async fn ask_deploy(sprint_id: &str, locale: crate::config::Locale) -> Decision {
    let prompt = crate::notify::messages::deploy_prompt(sprint_id, locale);
    tokio::task::spawn_blocking(move || {
        let read = || {
            let mut line = String::new();
            match std::io::stdin().read_line(&mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(line.trim().to_string()),
            }
        };
        loop {
            out!("{}", prompt.question);
            match read().as_deref() {
                None | Some("l") => return Decision::Later,
                Some("y") => return Decision::Approve,
                Some("a") => return Decision::Abort,
                Some("n") => {
                    out!("{}", prompt.what_to_change);
                    match read() {
                        Some(note) if !note.is_empty() => return Decision::RequestChanges(note),
                        Some(_) => outln!("{}", prompt.note_needed),
                        None => return Decision::Later,
                    }
                }
                Some(_) => {}
            }
        }
    })
    .await
    .unwrap_or(Decision::Later)
}

/// How long a CLI command waits for a running orchestrator's answer.
const COMMAND_WAIT: Duration = Duration::from_secs(30);

async fn sprint(config: Arc<Config>, command: SprintCommand) -> Exit {
    // Only a new sprint may create the database; every other command acts on sprints that
    // are in it, and says where it looked when there is none.
    let store = match &command {
        SprintCommand::Start { .. } => open_store(&config).await,
        _ => Store::open_existing(&config.database.url)
            .await
            .map_err(|e| store_failed(&command, &e)),
    };
    let store = match store {
        Ok(store) => store,
        Err(exit) => return exit,
    };
    let policy = Policy::from(&config.pipeline);
    let submit = |id: String, kind: CommandKind, text: Option<String>| {
        let store = store.clone();
        let id = parse_sprint_id(&id);
        async move {
            let request = client::Request {
                sprint_id: &id,
                kind,
                text: text.as_deref(),
                by: "cli",
            };
            let answer = client::submit(&store, &policy, request, None, COMMAND_WAIT).await;
            report_answer(&id, answer)
        }
    };
    match command {
        SprintCommand::Start {
            goal,
            project,
            focus,
        } => {
            let project = match config.project(project.as_deref()) {
                Ok((name, _)) => name.to_string(),
                Err(e) => {
                    errln!("hanarang sprint start: {e}");
                    return Exit::Usage;
                }
            };
            if goal.trim().is_empty() {
                errln!("hanarang sprint start: the goal must not be empty");
                return Exit::Usage;
            }
            match store
                .create_sprint(
                    &project,
                    &goal,
                    focus.as_deref(),
                    &config.pipeline.branch_template,
                    now_ms(),
                )
                .await
            {
                Ok(s) => {
                    outln!("{}", s.id);
                    Exit::Success
                }
                Err(e) => {
                    errln!("hanarang sprint start: {e}");
                    Exit::Failure
                }
            }
        }
        SprintCommand::Status { id, json } => {
            let id = id.as_deref().map(parse_sprint_id);
            crate::report::status(&store, id.as_deref(), json).await
        }
        SprintCommand::Log {
            id,
            json: _,
            run: Some(run),
            stdout,
            stderr,
        } => {
            let capture = match (stdout, stderr) {
                (true, _) => crate::report::Capture::Stdout,
                (_, true) => crate::report::Capture::Stderr,
                _ => crate::report::Capture::Both,
            };
            crate::report::run_capture(&store, &parse_sprint_id(&id), &run, capture).await
        }
        SprintCommand::Log { id, json, .. } => {
            crate::report::log(&store, &config, &parse_sprint_id(&id), json).await
        }
        SprintCommand::Approve { id } => submit(id, CommandKind::Approve, None).await,
        SprintCommand::RequestChanges { id, note } => {
            submit(id, CommandKind::RequestChanges, Some(note)).await
        }
        SprintCommand::Resume { id, focus } => submit(id, CommandKind::Resume, focus).await,
        SprintCommand::Abort { id, reason } => submit(id, CommandKind::Abort, reason).await,
        SprintCommand::Handoff { id, focus } => submit(id, CommandKind::Handoff, focus).await,
    }
}

/// A command that found no database: a listing of all sprints has nothing to list (and
/// says why); a command about one sprint cannot find it.
fn store_failed(command: &SprintCommand, e: &crate::store::StoreError) -> Exit {
    match (command, e) {
        (SprintCommand::Status { id: None, json }, crate::store::StoreError::NoDatabase(_)) => {
            errln!("hanarang: {e}");
            if *json {
                outln!("[]");
            } else {
                outln!("no sprints yet: start one with `hanarang sprint start \"<goal>\"`");
            }
            Exit::Success
        }
        _ => {
            errln!("hanarang: {e}");
            Exit::Failure
        }
    }
}

fn report_answer(id: &str, answer: Result<Answer, crate::store::StoreError>) -> Exit {
    match answer {
        Ok(Answer::Applied(what)) => {
            outln!("{what}");
            Exit::Success
        }
        Ok(Answer::Refused(reason)) => {
            errln!("refused: {reason}");
            Exit::Refused
        }
        Ok(Answer::Queued(n)) => {
            outln!(
                "{id}: recorded as command #{n}; no orchestrator is running, so it is applied when `hanarang serve` starts"
            );
            Exit::Success
        }
        Ok(Answer::Unanswered(n)) => {
            errln!(
                "{id}: recorded as command #{n}, but the orchestrator has not answered within {}s; see `hanarang sprint log {id}`",
                COMMAND_WAIT.as_secs()
            );
            Exit::Failure
        }
        Err(e) => {
            errln!("hanarang: {e}");
            Exit::Failure
        }
    }
}

impl From<OrchestratorError> for Exit {
    fn from(_: OrchestratorError) -> Exit {
        Exit::Failure
    }
}

fn print_schema(args: &SchemaArgs) -> Exit {
    match schema::schema(args.actor, args.dialect) {
        Ok(s) => print_json(&s),
        Err(e) => {
            errln!("hanarang schema: {e}");
            Exit::Usage
        }
    }
}

/// The largest input `validate` reads: the runner's default cap, so a file that would be
/// rejected at run time is rejected here too.
const VALIDATE_MAX_BYTES: usize = config::DEFAULT_MAX_OUTPUT_BYTES;

fn validate_file(args: &ValidateArgs) -> Exit {
    let source = match &args.file {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "stdin".to_string(),
    };
    let mut bytes = Vec::new();
    let cap = VALIDATE_MAX_BYTES as u64 + 1;
    let read = match &args.file {
        Some(p) if p.as_os_str() != "-" => {
            std::fs::File::open(p).and_then(|f| f.take(cap).read_to_end(&mut bytes))
        }
        _ => std::io::stdin().lock().take(cap).read_to_end(&mut bytes),
    };
    if let Err(e) = read {
        errln!("hanarang validate: cannot read {source}: {e}");
        return Exit::Failure;
    }
    match validate::validate_output(&bytes, VALIDATE_MAX_BYTES, &args.pointer, args.actor) {
        Ok(valid) => match serde_json::to_value(&valid.message) {
            Ok(v) => print_json(&v),
            Err(e) => {
                errln!("hanarang validate: {e}");
                Exit::Failure
            }
        },
        Err(problems) => {
            errln!(
                "{source}: invalid HandoffMessage ({} problem{})",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            );
            for p in problems {
                errln!("  {p}");
            }
            Exit::Failure
        }
    }
}

fn config_check(path: Option<&std::path::Path>) -> Exit {
    let loaded = config::locate(path).and_then(|p| Config::load(&p).map(|c| (p, c)));
    match loaded {
        Ok((path, config)) => match config.to_toml() {
            Ok(text) => {
                outln!("# {}: valid", path.display());
                out!("{text}");
                outln!(
                    "\n# How each sister is spawned (its table over [agent] over the defaults):"
                );
                for actor in Actor::ALL {
                    let spec = config.agent.spec(actor);
                    outln!(
                        "#   {actor}: {} {} (timeout {}, output_pointer {:?})",
                        spec.program,
                        spec.args.join(" "),
                        humantime::format_duration(spec.timeout),
                        spec.output_pointer
                    );
                }
                Exit::Success
            }
            Err(e) => {
                errln!("hanarang config check: {e}");
                Exit::Failure
            }
        },
        Err(e) => {
            errln!("{e}");
            Exit::Usage
        }
    }
}

/// JSON on stdout (`--json`, `schema`, `validate`).
pub(crate) fn print_json(value: &impl serde::Serialize) -> Exit {
    match crate::output::out_json(value) {
        Ok(()) => Exit::Success,
        Err(e) => {
            errln!("hanarang: cannot write output: {e}");
            Exit::Failure
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every command, argument and flag says in `--help` what it is for.
    #[test]
    fn every_argument_and_flag_has_help() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in command.get_subcommands() {
                if sub.get_about().is_none() {
                    missing.push(format!("{path} {}", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "hanarang", &mut missing);
        assert!(missing.is_empty(), "without help: {missing:?}");
    }
}
