//! The pipeline's rules: the pure state machine and the retry policy.

pub mod fsm;
pub mod policy;

pub use crate::domain::FailureKind;
pub use fsm::{Event, Facts, Failure, Position, Refusal, Stage, State, Transition, apply};
pub use policy::{Backoff, Policy};
