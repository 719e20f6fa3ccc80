//! The sister runner: spawns one sister as the spawn contract says and turns
//! whatever the process does into exactly one outcome.
//!
//! No shell ever runs: `program` + `args`, placeholders substituted as whole strings. The
//! sister gets its contract file, its prompt on stdin and its environment (minus the
//! Discord token). Its stdout is read with a cap, its stderr keeps only a tail, a timeout
//! or a stop kills its whole process group, and its output is validated before anything
//! believes it.

pub mod check;
pub mod container;
pub mod contract;
pub mod events;
pub mod launch;
pub mod process;
mod prompt;

mod classify;
mod pause;
pub mod role;
mod spawn;
mod supervise;

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::{oneshot, watch};

pub use check::{Check, CheckEnd, CheckReport};
pub use contract::ContractFile;
pub use events::Progress;
pub use prompt::render_prompt;
pub use spawn::{Prepared, prepare};
pub use supervise::run_prepared;

use crate::config::SisterSpec;
pub use crate::domain::RunOutcome;
use crate::handoff::message::Usage;
use crate::handoff::validate::{Problem, Validated};

/// How much of each stream a run record keeps.
pub const TAIL_BYTES: usize = 64 * 1024;

/// Why a user stopped a running sister.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The sprint is aborted: outcome `cancelled`.
    Abort,
    /// A fresh session takes over: outcome `handed_off`.
    Handoff,
    /// The orchestrator shuts down: outcome `interrupted`, retried after a restart.
    Shutdown,
}

impl From<crate::pipeline::Interrupt> for Stop {
    fn from(interrupt: crate::pipeline::Interrupt) -> Stop {
        match interrupt {
            crate::pipeline::Interrupt::Abort => Stop::Abort,
            crate::pipeline::Interrupt::Handoff => Stop::Handoff,
        }
    }
}

/// A run's stop, listened to by the sister's wait and then the check's.
pub(super) struct Stopper(Option<oneshot::Receiver<Stop>>);

impl Stopper {
    /// The stop, when one comes; never, once nobody can send one.
    pub(super) async fn wait(&mut self) -> Stop {
        if let Some(receiver) = &mut self.0 {
            let got = receiver.await;
            // A oneshot answers once: it is not polled again.
            self.0 = None;
            if let Ok(reason) = got {
                return reason;
            }
        }
        std::future::pending().await
    }
}

/// Everything one run needs.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub spec: SisterSpec,
    pub contract: ContractFile,
    /// Where the contract file is written (its folder is created).
    pub contract_path: PathBuf,
    pub workdir: PathBuf,
    /// The Discord token variable, removed from the sister's environment.
    pub token_env: String,
    /// The project's text for this sister's job, replacing the built-in one.
    pub role_text: Option<String>,
    /// The project's check, run after the implementer's `IMPL_DONE` holds (the implementer's runs only).
    pub check: Option<Check>,
    /// The project's check, run at the sprint's base commit before the sister starts, its
    /// result put in the contract (the sprint's first run, when nothing recorded it yet).
    pub base_check: Option<Check>,
    /// What the sister (and the check) may touch; `None`: unconfined.
    pub fence: Option<crate::fence::Fence>,
    /// Where the run's container is made; `None`: the host gives none, and only the
    /// process group is stopped at the run's end.
    pub containers: Option<container::Containers>,
    /// Who the sister's commits are by (`[agent] git_author`): name and e-mail.
    pub git_identity: Option<(String, String)>,
    /// git on the workdir, for the facts checked after the sister (fenced the same way).
    pub repo: crate::git::Repo,
}

/// How a run ended, with what the user needs to know.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub outcome: RunOutcome,
    /// The exit code or signal, the first validation problem, the timeout that fired.
    pub detail: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The sister's process (and process group) id, when it was spawned.
    pub pid: Option<u32>,
    pub duration: Duration,
    /// The last `TAIL_BYTES` of stdout and stderr, as text.
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Set when the outcome is `handoff`.
    pub message: Option<Validated>,
    /// Every problem when the outcome is `bad_output` because of the message.
    pub problems: Vec<Problem>,
    /// What the CLI's envelope reported the run cost (`[agent].usage`); it counts over the
    /// message's own `usage`.
    pub usage: Option<Usage>,
    /// With outcome `paused`: when the stage may run again (unix ms).
    pub resume_at_ms: Option<i64>,
    /// The agent's session, as its envelope names it at `session_pointer`.
    pub session_id: Option<String>,
    /// The project's check, when one ran after the sister (or before it, at the base).
    pub check: Option<CheckReport>,
}

impl RunReport {
    /// A run that could not even be started.
    pub fn spawn_failed(detail: String) -> RunReport {
        RunReport::early(RunOutcome::SpawnFailed, detail)
    }

    pub(crate) fn early(outcome: RunOutcome, detail: String) -> RunReport {
        RunReport {
            outcome,
            detail,
            exit_code: None,
            signal: None,
            pid: None,
            duration: Duration::ZERO,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            stdout_bytes: 0,
            stderr_bytes: 0,
            message: None,
            problems: Vec::new(),
            usage: None,
            resume_at_ms: None,
            session_id: None,
            check: None,
        }
    }
}

/// How the caller steers a run while it goes.
#[derive(Debug)]
pub struct RunControl {
    /// Stops the run; dropping the sender means it is never stopped.
    pub stop: oneshot::Receiver<Stop>,
    /// The last moment the sister may still be started, on the monotonic clock (the end
    /// of this host's claim on the sprint); past it the run ends `interrupted`, its sister
    /// never started. `None`: no limit.
    pub start_by: Option<tokio::time::Instant>,
    /// Where the run's steps go as its event stream tells them (latest wins); `None`:
    /// nobody watches.
    pub progress: Option<watch::Sender<Progress>>,
}

impl RunControl {
    /// A run nobody will stop, and whose pid nobody needs.
    pub fn unattended() -> RunControl {
        let (_, stop) = oneshot::channel();
        RunControl {
            stop,
            start_by: None,
            progress: None,
        }
    }
}

/// Runs one sister to its end: `prepare`, then `run_prepared`. Never panics on anything
/// the child does; every path ends with the sister's whole process group gone.
pub async fn run(req: &RunRequest, control: RunControl) -> RunReport {
    match prepare(req) {
        Ok(prepared) => run_prepared(req, prepared, control).await,
        Err(report) => *report,
    }
}

/// The last `TAIL_BYTES` of a stream as text, cut on a character boundary.
pub fn tail_text(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(TAIL_BYTES);
    let text = String::from_utf8_lossy(&bytes[start..]);
    text.trim_start_matches('\u{FFFD}').to_string()
}
