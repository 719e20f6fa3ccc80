//! The command line: clap definitions and the dispatch to the commands,
//! one file per group: `run` and `demo` in the foreground (`run.rs`), the `sprint`
//! subcommands (`sprint.rs`), and the tools that need no database (`tools.rs`: `schema`,
//! `validate`, `config check`). Start-up wiring is `crate::startup`; the exit codes and
//! the output helpers are `crate::output`.

mod console;
mod run;
mod sprint;
mod tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{self, Config, ConfigError};
use crate::domain::Actor;
use crate::handoff::schema::Dialect;
use crate::output::Exit;
use crate::startup::serve;
use crate::{errln, outln};

use run::{RunMode, demo, run_sprint};
use sprint::sprint;
use tools::{config_check, print_schema, validate_file};

/// `--dialect`: the pure core's `Dialect` knows nothing of clap.
impl clap::ValueEnum for Dialect {
    fn value_variants<'a>() -> &'a [Self] {
        &Dialect::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let help = match self {
            Dialect::Draft07 => "JSON Schema draft-07, with `$schema` set",
            Dialect::OpenaiStrict => {
                "OpenAI strict mode: additionalProperties false, every property required, optional ones nullable"
            }
        };
        Some(clap::builder::PossibleValue::new(self.as_str()).help(help))
    }
}

/// How long a CLI command waits for a running orchestrator's answer.
const COMMAND_WAIT: Duration = Duration::from_secs(30);

/// Who gives a command from this command line, as the record names them:
/// `cli:<user>@<host>`, the user this process runs as and the host's name (`[host] name`).
fn cli_author(config: &Config) -> String {
    let uid = nix::unistd::geteuid();
    let user = match nix::unistd::User::from_uid(uid) {
        Ok(Some(user)) => user.name,
        _ => std::env::var("USER").unwrap_or_else(|_| uid.to_string()),
    };
    format!("cli:{user}@{}", config.host.name)
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
    /// The hosts sharing a PostgreSQL database: heartbeat, projects, the sprints they own
    Hosts {
        /// Print JSON (fields in docs/cli.md) instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Act as a simulated sister (what `demo` runs)
    #[command(hide = true)]
    SimulateSister,
    /// Act as the demo project's check (what `demo` runs after the implementation)
    #[command(hide = true)]
    SimulateCheck,
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
        /// Print JSON (fields in docs/cli.md) instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Transitions, runs and the handoff lineage of a sprint; one run's captured output
    Log {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
        /// Print JSON (fields in docs/cli.md), runs with their stdout/stderr tails
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
    /// What a sprint did: commits and diff stat against its base, contract, checks,
    /// review rounds, time and spend
    Show {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
        /// Print JSON (fields in docs/cli.md)
        #[arg(long)]
        json: bool,
    },
    /// The patch of a sprint's branch against its base, on stdout
    Diff {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
    },
    /// Approve the deploy of a sprint in `done`
    Approve {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
    },
    /// Let a sprint's CI files run: push the held head whose change touches the files the
    /// forge runs (a sprint in `verifying`, waiting: ci_files)
    ApproveCi {
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
    /// Leave a note for the sprint's next sister run (it does not stop the running one)
    Note {
        /// The sprint: SPRINT-001, sprint-001 or 1
        id: String,
        /// What the next sister should know (at most 4000 characters)
        #[arg(long)]
        text: String,
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
        Command::SimulateCheck => match crate::demo::simulate_check() {
            0 => Exit::Success,
            _ => Exit::Failure,
        },
        Command::Demo => block_on_one_thread(demo()),
        Command::Doctor => {
            let loaded = load_config(cli.config.as_deref());
            block_on(async {
                let checks = crate::doctor::run(loaded).await;
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
            })
        }
        Command::Serve => with_config(cli.config.as_deref(), |c| {
            block_on(serve(c, crate::startup::shutdown_signal()))
        }),
        Command::Run(args) => with_config(cli.config.as_deref(), |c| {
            block_on_one_thread(run_sprint(c, args, RunMode::Foreground))
        }),
        Command::Sprint(command) => {
            with_config(cli.config.as_deref(), |c| block_on(sprint(c, command)))
        }
        Command::Hosts { json } => with_config(cli.config.as_deref(), |c| {
            block_on(async move {
                match crate::store::Store::open_existing(&c.database.url).await {
                    Ok(store) => crate::report::hosts(&store, json).await,
                    Err(e) => {
                        errln!("hanarang: {e}");
                        Exit::Failure
                    }
                }
            })
        }),
    }
}

fn with_config(path: Option<&Path>, f: impl FnOnce(Arc<Config>) -> Exit) -> Exit {
    match load_config(path) {
        Ok((_, config)) => f(Arc::new(config)),
        Err(e) => {
            errln!("{e}");
            Exit::Usage
        }
    }
}

/// The config and the path it was read from; then the token's variable is taken out of
/// the environment (`discord::take_from_environment`). Here, between the two: its name is
/// the config's, and the environment may be changed only before the command's runtime
/// starts threads.
fn load_config(path: Option<&Path>) -> Result<(PathBuf, Config), ConfigError> {
    let loaded = config::locate(path).and_then(|p| Config::load(&p).map(|c| (p, c)))?;
    crate::discord::take_from_environment(loaded.1.token_env());
    // The database's password and URL stay where hanarang (its PostgreSQL driver) reads
    // them, but out of what /proc shows.
    for name in crate::fence::Own::of(&loaded.1, Path::new("")).hidden_env(&Default::default()) {
        if crate::environ::hide(&name, true).is_err() {
            tracing::warn!(variable = %name, "stays readable in hanarang's /proc environ: other threads run already");
        }
    }
    Ok(loaded)
}

/// How long a command's runtime may take to stop once the command is done.
const EXIT_GRACE: Duration = Duration::from_secs(2);

fn block_on(f: impl std::future::Future<Output = Exit>) -> Exit {
    finish_on(tokio::runtime::Builder::new_multi_thread(), f)
}

/// `block_on` on a runtime of the calling thread alone: for `run` and `demo`, whose loop
/// runs beside the console on that thread (`Orchestrator::run_here`).
fn block_on_one_thread(f: impl std::future::Future<Output = Exit>) -> Exit {
    finish_on(tokio::runtime::Builder::new_current_thread(), f)
}

fn finish_on(
    mut builder: tokio::runtime::Builder,
    f: impl std::future::Future<Output = Exit>,
) -> Exit {
    match builder.enable_all().build() {
        Ok(rt) => {
            let exit = rt.block_on(f);
            // Dropping what is left kills any sister a failed loop left behind; nothing may
            // hold the exit up longer (serenity 0.12 leaves a busy-looping shard runner).
            rt.shutdown_timeout(EXIT_GRACE);
            exit
        }
        Err(e) => {
            errln!("hanarang: cannot start the async runtime: {e}");
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
