//! Telling people what happened: the message texts (ko/en) the console and the Discord
//! bridge both print.

pub mod messages;

pub use messages::{Context, Line, render};
