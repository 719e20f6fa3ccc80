//! The pipeline's rules: the pure state machine, the retry policy and the merge of a
//! review round's verdicts.

pub mod fsm;
pub mod policy;
pub mod review;

pub use crate::domain::FailureKind;
pub use fsm::{Event, Facts, Failure, Position, Refusal, Stage, State, Transition, apply};
pub use policy::{Backoff, Policy};
