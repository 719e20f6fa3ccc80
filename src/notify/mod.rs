//! Telling people what happened: the message texts (ko/en) and the console printer. The
//! Discord bridge uses the same texts.

pub mod console;
pub mod messages;

pub use messages::{Context, Line, render};
