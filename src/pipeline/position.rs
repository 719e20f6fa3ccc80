//! Where a sprint is: its state, the stage whose sister runs in it, and the position
//! (state, round, attempt, and where a resume goes back to) the rules move.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a sprint is. Lower-case in JSON, the CLI and the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Queued,
    Planning,
    Implementing,
    Reviewing,
    /// A project with a forge: its pull request's checks run on the pushed head.
    Verifying,
    Done,
    /// A project with a forge: approved, and its pull request is being merged at the
    /// approved head (the merge is asked after this state is committed).
    Merging,
    Deploying,
    Deployed,
    Escalated,
    Aborted,
}

impl State {
    pub const ALL: [State; 11] = [
        State::Queued,
        State::Planning,
        State::Implementing,
        State::Reviewing,
        State::Verifying,
        State::Done,
        State::Merging,
        State::Deploying,
        State::Deployed,
        State::Escalated,
        State::Aborted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Planning => "planning",
            State::Implementing => "implementing",
            State::Reviewing => "reviewing",
            State::Verifying => "verifying",
            State::Done => "done",
            State::Merging => "merging",
            State::Deploying => "deploying",
            State::Deployed => "deployed",
            State::Escalated => "escalated",
            State::Aborted => "aborted",
        }
    }

    /// The stage a sister works in, if this state is one.
    pub fn stage(self) -> Option<Stage> {
        match self {
            State::Planning => Some(Stage::Planning),
            State::Implementing => Some(Stage::Implementing),
            State::Reviewing => Some(Stage::Reviewing),
            State::Deploying => Some(Stage::Deploying),
            // Listed, not `_`: a new state is a stage or not, and says so here.
            State::Queued
            | State::Verifying
            | State::Done
            | State::Merging
            | State::Deployed
            | State::Escalated
            | State::Aborted => None,
        }
    }

    /// `deployed` and `aborted` accept no event.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Deployed | State::Aborted)
    }

    /// Whether a sprint in this state holds its project's pipeline lock: from planning
    /// until it has ended. One resting in `done` or escalated still holds it: the
    /// project's next sprint waits for a person's decision on this one.
    pub fn holds_lock(self) -> bool {
        self != State::Queued && !self.is_terminal()
    }

    /// Whether a sprint in this state runs (or will run) a sister: queued, or in a stage.
    pub fn runs_a_sister(self) -> bool {
        self == State::Queued || self.stage().is_some()
    }

    /// The names of the states `which` keeps, in order: how the store's queries learn
    /// which states hold the lock, run a sister, or have not ended (bound as a
    /// parameter, never typed into the SQL).
    pub fn names(which: impl Fn(State) -> bool) -> Vec<&'static str> {
        State::ALL
            .into_iter()
            .filter(|&s| which(s))
            .map(State::as_str)
            .collect()
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for State {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown state {s:?}"))
    }
}

pub use crate::domain::Stage;

impl Stage {
    pub fn state(self) -> State {
        match self {
            Stage::Planning => State::Planning,
            Stage::Implementing => State::Implementing,
            Stage::Reviewing => State::Reviewing,
            Stage::Deploying => State::Deploying,
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.state().fmt(f)
    }
}

/// Where an escalated sprint goes back to when a human resumes it: a stage, or (a
/// project with a forge) waiting for its checks again, or for the person's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumePoint {
    /// A stage's state, `verifying` or `done`.
    pub stage: State,
    pub round: u32,
}

/// The part of a sprint the rules look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub state: State,
    /// Review round, from 1 once implementing starts (0 while queued or planning).
    pub round: u32,
    /// The try of the current (or last) stage, from 1.
    pub attempt: u32,
    /// Set while escalated.
    pub resume: Option<ResumePoint>,
}

impl Position {
    /// A sprint that was just created.
    pub const QUEUED: Position = Position {
        state: State::Queued,
        round: 0,
        attempt: 0,
        resume: None,
    };

    pub(super) fn enter(stage: Stage, round: u32) -> Position {
        Position {
            state: stage.state(),
            round,
            attempt: 1,
            resume: None,
        }
    }

    /// Where a resume goes: the state of `point`, afresh.
    pub(super) fn resumed(point: ResumePoint) -> Position {
        Position {
            state: point.stage,
            round: point.round,
            attempt: 1,
            resume: None,
        }
    }

    pub(super) fn with_state(self, state: State) -> Position {
        Position {
            state,
            resume: None,
            ..self
        }
    }
}
