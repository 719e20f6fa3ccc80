//! The pipeline's nouns, shared by every layer: the four sisters, their stages and
//! verdicts, how a run ends, and the ids people type. Pure data: no I/O, and no import of any other
//! module of the crate (the store, the runner and the state machine all build on it).

mod actor;
mod forge;
mod ids;
mod outcome;
mod shell;

pub use actor::{Actor, ActorInfo, Stage, Verdict, Words};
pub use forge::{CheckState, ForgeFault, ReviewState};
pub use ids::{parse_run_id, parse_sprint_id, run_id, short_commit, sprint_id};
pub use outcome::{FailureKind, RunOutcome};
pub use shell::{shell_line, shell_word};
