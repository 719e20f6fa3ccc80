//! Benchmark of the orchestrator: whole sprints with zero-delay simulated sisters. Run it
//! with `cargo bench --bench pipeline` (all three parts) or name parts:
//! `cargo bench --bench pipeline -- wall serve status`. `docs/benchmarks/orchestrator.md`
//! says what it measures and records the numbers (its later rounds on the pages after
//! it). It only reports: nothing here asserts.
//!
//! 1. `wall`: per-sprint wall time of an in-process `Orchestrator` (one project, so the
//!    sprints run one after another; each approved as it reaches `done`), against a
//!    baseline measured in the same run: the same sister program spawned bare with
//!    `std::process::Command` as many times, with the same args, env and prompts, plus one
//!    durable SQLite transaction (WAL, `synchronous = FULL`, one row) per transition.
//!    Repetitions alternate A B, B A, ...; medians. Target: ratio ≤ 1.25.
//! 2. `serve`: the real binary's `serve` as a child process while 1,000 queued sprints
//!    pass through (approved from this process through the database); its peak RSS
//!    (`VmHWM`) is read before it is stopped with SIGTERM. Target < 40 MiB.
//! 3. `status`: `hanarang sprint status --json` (and the text form) as a whole process,
//!    median of 10, on a database of 10,000 sprints: just queued, and with the history a
//!    sprint leaves (runs, transitions, an approval). Target < 50 ms.
//!
//! The sister is this package's own `hanarang simulate-sister` with
//! `SIMULATE_DELAY_MS=0`: its reviewer asks for changes in round 1 and approves in
//! round 2, so a sprint is 6 runs and 8 transitions.
//!
//! Part 1 also prints where the pipeline's extra time goes: the same pipeline with the
//! database on tmpfs (no fsync), without git on PATH, and both (the last two in a child
//! process of this benchmark, `--pipeline-child <mode> <n>`, since PATH is per process),
//! the SQL statements it runs per sprint (counted from the store's statement events in another
//! child), and reference costs of one git call, one commit, one runner run. Part 3 times
//! the status command's steps in process as well.
//!
//! For a closer look, `--pipeline-child trace <n>` runs n sprints with the library's
//! debug events and every SQL statement on stderr, timestamped (a timeline of each run);
//! every child's `RESULT` line carries its own CPU time and its children's.
//!
//! The code: `main` here; [`setup`] the config and sprints every part starts from;
//! [`sprints`] whole sprints through an in-process orchestrator (and the warm-up's
//! template); [`baseline`] the same work done bare; [`wall`], [`serve`] and [`status`] the
//! three parts; [`child`] this benchmark re-run as a child, with [`sql_count`] counting its
//! statements; [`numbers`] how the figures are printed. Temp dirs, and `serve` as an
//! operator starts it, are the tests' own (`tests/it/support`).

#[path = "../common/mod.rs"]
mod common;
#[allow(dead_code)] // the benchmark uses a part of the tests' support
#[path = "../../tests/it/support/mod.rs"]
mod support;

mod baseline;
mod child;
mod numbers;
mod serve;
mod setup;
mod sprints;
mod sql_count;
mod status;
mod wall;

use std::time::Instant;

use child::{CHILD_ARG, child_main};
use common::{MIB, fs_type, machine};
use numbers::loadavg;
use serve::serve;
use setup::hanarang_binary;
use sprints::warm_up;
use status::status;
use wall::{WALL_SPRINTS, wall};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == CHILD_ARG) {
        let mode = args.get(i + 1).map_or("", String::as_str);
        let n = args
            .get(i + 2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(WALL_SPRINTS);
        child_main(mode, n);
        return;
    }
    // `cargo bench` passes `--bench`; anything else without dashes names a part.
    let parts: Vec<&str> = args
        .iter()
        .skip(1)
        .map(String::as_str)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wants = |part: &str| parts.is_empty() || parts.contains(&part);
    let bin = hanarang_binary();
    println!("orchestrator benchmark");
    println!("machine: {}", machine());
    let tmp = std::env::temp_dir();
    println!(
        "temp dirs under {} ({}); load average at start: {}",
        tmp.display(),
        fs_type(&tmp).unwrap_or_else(|| "unknown file system".into()),
        loadavg()
    );
    println!(
        "sister: {} simulate-sister, SIMULATE_DELAY_MS=0 ({:.1} MiB binary)",
        bin.display(),
        std::fs::metadata(&bin).map_or(0.0, |m| m.len() as f64 / MIB)
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a multi-thread runtime");
    let started = Instant::now();
    // A short pipeline first: it warms the caches, and its first sprint is the template
    // for the baseline (runs, prompts, transitions) and for the history of part 3.
    let template = rt.block_on(warm_up(&bin));
    println!(
        "one sprint = {} runs ({}) and {} transitions ({})",
        template.runs.len(),
        template
            .runs
            .iter()
            .map(|r| format!("{} r{}", r.actor, r.round))
            .collect::<Vec<_>>()
            .join(", "),
        template.history.transitions.len(),
        template
            .history
            .transitions
            .iter()
            .map(|t| t.event.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut serve_dir = None;
    if wants("wall") {
        println!();
        wall(&rt, &bin, &template);
    }
    if wants("serve") {
        println!();
        serve_dir = serve(&rt, &bin);
    }
    if wants("status") {
        println!();
        status(&rt, &bin, &template, serve_dir.as_ref());
    }
    println!();
    println!(
        "whole benchmark: {:.0} s; load average at end: {}",
        started.elapsed().as_secs_f64(),
        loadavg()
    );
}
