//! The pipeline's rules: the pure state machine, the retry policy, the merge of a review
//! round's verdicts, and what a run's end, a retry's wait and a budget mean.

mod decide;
mod event;
pub mod forge;
pub mod fsm;
pub mod policy;
mod position;
pub mod review_round;
pub mod rules;

pub use crate::domain::FailureKind;
pub use decide::{Before, Decision, Due, Focus, Launch, decide, due};
pub use event::merged_verdict;
pub use fsm::{Event, Facts, Failure, Position, Refusal, Stage, State, Transition, apply, asks};
pub use policy::{Backoff, Policy};
pub use rules::{
    Answer, Budget, Interrupt, LastRun, NoteGiven, Pick, ProgressCheck, RunEndIs, RunResult,
    after_pause, at_cap, event_of, holds_spawn, interrupt_of, interrupts, next_run_at, note_due,
    paused_agents, pick_agent, progress_check, protocol_violation, resumed_session, run_end_is,
    waits,
};
