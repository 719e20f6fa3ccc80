//! How a run ends, and the failures the retry policy counts.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How one run ended. Stored with the run; lower-case in JSON and the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// A valid HandoffMessage (which may still be ERROR or DEPLOY_FAILED).
    Handoff,
    SpawnFailed,
    ExitNonzero,
    BadOutput,
    Timeout,
    /// A user aborted the sprint.
    Cancelled,
    /// The orchestrator died while it ran (set at recovery, never by the runner).
    Interrupted,
    /// Valid, but wrong for the state (set by the orchestrator).
    ProtocolViolation,
    /// narang's `IMPL_DONE` held, but the project's own `check` did not pass.
    CheckFailed,
    /// A user handed the work to a fresh session.
    HandedOff,
    /// The agent hit its usage or rate limit (`[agent].pause_on`): not a failure; the
    /// stage runs again when the limit resets.
    Paused,
}

impl RunOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Handoff => "handoff",
            RunOutcome::SpawnFailed => "spawn_failed",
            RunOutcome::ExitNonzero => "exit_nonzero",
            RunOutcome::BadOutput => "bad_output",
            RunOutcome::Timeout => "timeout",
            RunOutcome::Cancelled => "cancelled",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::ProtocolViolation => "protocol_violation",
            RunOutcome::CheckFailed => "check_failed",
            RunOutcome::HandedOff => "handed_off",
            RunOutcome::Paused => "paused",
        }
    }

    /// The failure this outcome counts as for the retry policy, if it is one.
    pub fn failure_kind(self) -> Option<FailureKind> {
        match self {
            RunOutcome::SpawnFailed => Some(FailureKind::SpawnFailed),
            RunOutcome::ExitNonzero => Some(FailureKind::ExitNonzero),
            RunOutcome::BadOutput => Some(FailureKind::BadOutput),
            RunOutcome::Timeout => Some(FailureKind::Timeout),
            RunOutcome::Interrupted => Some(FailureKind::Interrupted),
            RunOutcome::CheckFailed => Some(FailureKind::CheckFailed),
            RunOutcome::Handoff
            | RunOutcome::Cancelled
            | RunOutcome::ProtocolViolation
            | RunOutcome::HandedOff
            | RunOutcome::Paused => None,
        }
    }
}

impl fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a run did not produce a usable result. ERROR and DEPLOY_FAILED are valid messages
/// that count as failures too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    SpawnFailed,
    ExitNonzero,
    BadOutput,
    Timeout,
    Interrupted,
    /// The project's `check` failed after narang's `IMPL_DONE`.
    CheckFailed,
    /// narang's `ERROR` verdict.
    Error,
    /// erang's `DEPLOY_FAILED` verdict.
    DeployFailed,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::SpawnFailed => "spawn_failed",
            FailureKind::ExitNonzero => "exit_nonzero",
            FailureKind::BadOutput => "bad_output",
            FailureKind::Timeout => "timeout",
            FailureKind::Interrupted => "interrupted",
            FailureKind::CheckFailed => "check_failed",
            FailureKind::Error => "ERROR",
            FailureKind::DeployFailed => "DEPLOY_FAILED",
        }
    }
}
