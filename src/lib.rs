//! hanarang-rails: four AI coding agents run as a finite-state machine.
//!
//! See ARCHITECTURE.md for the map. The pure core (`pipeline`, `handoff`) knows nothing of
//! processes, databases or Discord; the edges each live in one module.

pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod discord;
pub mod doctor;
pub mod domain;
pub mod environ;
pub mod fence;
pub mod forge;
pub mod git;
pub mod handoff;
pub mod logging;
pub mod notify;
pub mod orchestrator;
pub mod output;
pub mod pipeline;
pub mod placeholder;
pub mod report;
pub mod sister;
pub mod startup;
pub mod store;
