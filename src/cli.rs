//! The command line (`SPEC.md` §6): clap definitions and the dispatch to the library.
//!
//! Exit codes are part of the public interface: 0 success, 1 other failure, 2 usage or
//! config error, 3 escalated (`run`), 4 refused command.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::config::{self, Config};
use crate::handoff::message::Actor;
use crate::handoff::schema::{self, Dialect};
use crate::handoff::validate;

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
        goal: String,
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        focus: Option<String>,
    },
    /// Show sprints (all, or one)
    Status {
        id: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Transitions, runs and the handoff lineage of a sprint
    Log {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Approve the deploy of a sprint in `done`
    Approve { id: String },
    /// Send a sprint in `done` back to the implementer with a note
    RequestChanges {
        id: String,
        #[arg(long)]
        note: String,
    },
    /// Resume an escalated sprint
    Resume {
        id: String,
        #[arg(long)]
        focus: Option<String>,
    },
    /// Stop a sprint for good
    Abort {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Restart the running sister as a fresh session seeded with a handoff document
    Handoff {
        id: String,
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

/// Runs a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> Exit {
    match cli.command {
        Command::Schema(args) => print_schema(&args),
        Command::Validate(args) => validate_file(&args),
        Command::Config(ConfigCommand::Check) => config_check(cli.config.as_deref()),
        Command::Serve | Command::Run(_) | Command::Demo | Command::Sprint(_) => {
            eprintln!("hanarang: this command is not yet implemented");
            Exit::Failure
        }
    }
}

fn print_schema(args: &SchemaArgs) -> Exit {
    match schema::schema(args.actor, args.dialect) {
        Ok(s) => print_json(&s),
        Err(e) => {
            eprintln!("hanarang schema: {e}");
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
        eprintln!("hanarang validate: cannot read {source}: {e}");
        return Exit::Failure;
    }
    match validate::validate_output(&bytes, VALIDATE_MAX_BYTES, &args.pointer, args.actor) {
        Ok(valid) => match serde_json::to_value(&valid.message) {
            Ok(v) => print_json(&v),
            Err(e) => {
                eprintln!("hanarang validate: {e}");
                Exit::Failure
            }
        },
        Err(problems) => {
            eprintln!(
                "{source}: invalid HandoffMessage ({} problem{})",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            );
            for p in problems {
                eprintln!("  {p}");
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
                println!("# {}: valid", path.display());
                print!("{text}");
                println!(
                    "\n# How each sister is spawned (its table over [agent] over the defaults):"
                );
                for actor in Actor::ALL {
                    let spec = config.agent.spec(actor);
                    println!(
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
                eprintln!("hanarang config check: {e}");
                Exit::Failure
            }
        },
        Err(e) => {
            eprintln!("{e}");
            Exit::Usage
        }
    }
}

fn print_json(value: &serde_json::Value) -> Exit {
    let mut out = std::io::stdout().lock();
    match serde_json::to_writer_pretty(&mut out, value)
        .and_then(|()| writeln!(out).map_err(serde_json::Error::io))
    {
        Ok(()) => Exit::Success,
        // A closed pipe (`| head`) is the reader's choice, not a failure to report.
        Err(e) if e.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe) => Exit::Success,
        Err(e) => {
            eprintln!("hanarang: cannot write output: {e}");
            Exit::Failure
        }
    }
}
