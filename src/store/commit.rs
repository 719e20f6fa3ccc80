//! What a write carries: a transition's commit (the sprint before and after, the log
//! entry, the run it ends, the command it answers, the run it starts), a run's start and
//! a run's end. Engine-neutral: each engine binds these to its own statements.

use super::{CheckRecord, Result, Sprint, StoreError, TransitionRecord};
use crate::domain::{Actor, RunOutcome};
use crate::handoff::HandoffDocument;
use crate::pipeline::{Event, Transition};

/// The new state of a sprint after a transition, and what else the same transaction
/// records.
#[derive(Debug)]
pub struct Commit<'a> {
    /// The sprint as it was read before the transition (its `last_seq` guards the write).
    pub before: &'a Sprint,
    /// The sprint as it is after (state, round, attempt, resume, contract, branch, due
    /// time, focus).
    pub after: &'a Sprint,
    pub transition: &'a Transition,
    pub event: &'a Event,
    /// The run whose result caused the transition.
    pub run: Option<&'a RunEnd>,
    /// The command that asked for it, answered in the same transaction.
    pub command: Option<(i64, &'a str)>,
    pub at: i64,
    /// The run the move into a stage starts at once, recorded with it (as `start_run`
    /// would, at the transition's durability). Its focus, if any, is `after`'s no more.
    pub start: Option<NewRun<'a>>,
}

impl Commit<'_> {
    /// The `seq` of the log entry this commit appends.
    pub(super) fn seq(&self) -> i64 {
        self.before.last_seq + 1
    }

    /// The event and the note as the log stores them.
    pub(super) fn encoded(&self) -> Result<(String, Option<String>)> {
        let event =
            serde_json::to_string(self.event).map_err(|e| StoreError::Encode("event", e))?;
        let note = self
            .transition
            .note
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Encode("note", e))?;
        Ok((event, note))
    }

    /// What was written, as `transitions` reads it back, once the log gave it `global_seq`.
    pub(super) fn record(&self, global_seq: i64) -> TransitionRecord {
        TransitionRecord {
            global_seq,
            sprint_id: self.before.id.clone(),
            seq: self.seq(),
            from: self.transition.from.state,
            to: self.transition.to.state,
            event: self.event.name(),
            round: self.transition.to.round,
            attempt: self.transition.to.attempt,
            at: self.at,
            run_id: self.run.map(|r| r.run_id.clone()),
            branch: Some(self.after.branch.clone()),
            by: self.event.by().map(str::to_string),
            detail: self.event.clone(),
            note: self.transition.note.clone(),
        }
    }
}

/// How a run ended, as recorded.
#[derive(Debug, Clone)]
pub struct RunEnd {
    pub run_id: String,
    pub outcome: RunOutcome,
    pub detail: String,
    pub rejection: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: i64,
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub message: Option<serde_json::Value>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    pub ended_at: i64,
    /// The agent's session, as its envelope named it.
    pub session_id: Option<String>,
    /// With outcome `paused`: until when (unix ms) its agent is at its usage limit.
    pub paused_until: Option<i64>,
    /// The project's check that ran after it, recorded with its end (`run_id` is this
    /// run's).
    pub check: Option<CheckRecord>,
}

/// A run about to be spawned.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub sprint_id: &'a str,
    /// The next number among the sprint's runs; the run's id is `domain::run_id`.
    pub number: i64,
    pub actor: Actor,
    pub round: u32,
    pub attempt: u32,
    pub parent_run_id: Option<&'a str>,
    pub handoff: &'a HandoffDocument,
    pub synthesized: bool,
    pub focus: Option<&'a str>,
    /// The workdir's git HEAD when it started, in a git workdir.
    pub git_head: Option<&'a str>,
    pub started_at: i64,
    /// Which of the reviewer's parallel reviewers this run is, when it has several.
    pub reviewer: Option<&'a str>,
    /// The run whose session it continues, when it does.
    pub resumes: Option<&'a str>,
    /// The agent that runs it: a preset or `[agent.profiles.NAME]` name.
    pub agent: Option<&'a str>,
    /// The sprint's notes given to it: those not given to a run yet, up to
    /// this command id. They are marked as given in the run's own write.
    pub notes_upto: Option<i64>,
}
