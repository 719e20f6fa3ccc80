//! The integration tests, one binary: each module is the scenarios of one part (named as
//! the part it drives), `support` the fixtures they share. One binary links the library
//! and the support code once, where a binary per file linked them once each.
//!
//! All the tests share this process, so none changes what is the process's own (its
//! environment, its current folder, its signal handlers): a test that needs another
//! environment or folder gives it to the child process it starts.

mod support;

mod amended_contract;
mod approved_commit;
mod authors;
mod base_check;
mod branch;
mod check;
mod config;
mod containment;
mod crash;
mod discord;
mod docs;
mod doctor;
mod fake_discord;
mod fake_forge;
mod fallback;
mod fence;
mod forge_client;
mod forge_delivery;
mod fsm;
mod handoff;
mod hostile_text;
mod hosts;
mod newcomer_cli;
mod orchestrator;
mod planted_git_programs;
mod presets;
mod progress;
mod real_clis;
mod recipe;
mod review_merge;
mod reviewers;
mod run_command;
mod runner;
mod steering;
mod storage;
mod store;
mod streams;
mod validate_corpus;
mod validate_props;
mod workdir_files;
