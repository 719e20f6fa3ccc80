//! The pipeline's rules: the pure state machine and the retry policy.

pub mod fsm;
pub mod policy;

pub use fsm::{
    Event, Facts, Failure, FailureKind, Position, Refusal, Stage, State, Transition, apply,
};
pub use policy::{Backoff, Policy};
