//! Parallel reviewers, measured: `cargo bench --bench reviewers`. A review
//! round costs about what its slowest reviewer takes, not the sum: sprints whose reviewers
//! each take `T` (the scripted fixture sister, `sleep-then T`), reviewed by darang alone
//! and then by two reviewers at once. The round's cost is the time from the transition
//! into `reviewing` to the one out of it, from the transitions log; the median over a few
//! sprints of each kind, and the ratio (target: about 1, not 2;
//! docs/benchmarks/reviewers.md).

#[allow(dead_code)] // the machine line of what every benchmark prints
#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)] // the benchmark uses a part of the tests' support
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::time::Duration;

use hanarang::pipeline::State;
use support::pipeline::{Pipeline, Setup};

/// How long each reviewer takes.
const T: &str = "1";
const SPRINTS: usize = 5;
/// One project per sprint: a sprint waiting in `done` keeps its project's lock.
const PROJECTS: [&str; SPRINTS] = ["p0", "p1", "p2", "p3", "p4"];

/// The median cost of one review round over `SPRINTS` sprints of this setup.
async fn review_round(setup: Setup) -> Duration {
    let p = Pipeline::start(Setup {
        projects: &PROJECTS,
        ..setup
    })
    .await;
    let mut samples = Vec::new();
    for (n, project) in PROJECTS.iter().enumerate() {
        let s = p
            .start_sprint(project, &format!("bench sprint {n}"), None)
            .await;
        p.wait_for(&s.id, State::Done).await;
        let log = p.transitions(&s.id).await;
        let entered = log
            .iter()
            .find(|t| t.to == State::Reviewing && t.from != State::Reviewing)
            .expect("the move into reviewing");
        let left = log
            .iter()
            .find(|t| t.from == State::Reviewing && t.to != State::Reviewing)
            .expect("the move out of reviewing");
        samples.push(Duration::from_millis(
            u64::try_from(left.at - entered.at).unwrap_or(0),
        ));
    }
    p.stop().await;
    common::median(&samples)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        println!("{}", common::machine());
        let mode = format!("sleep-then {T}");
        let alone = review_round(Setup {
            darang: Box::leak(mode.clone().into_boxed_str()),
            ..Setup::default()
        })
        .await;
        let reviewers = format!(
            "[agent.darang.reviewers.static]\nargs = [\"sleep-then\", \"{T}\"]\n[agent.darang.reviewers.runtime]\nargs = [\"sleep-then\", \"{T}\"]\n"
        );
        let two = review_round(Setup {
            extra: Box::leak(reviewers.into_boxed_str()),
            ..Setup::default()
        })
        .await;
        println!("review round, each reviewer {T} s, median of {SPRINTS} sprints:");
        println!("  darang alone:          {:>6} ms", alone.as_millis());
        println!("  two reviewers at once: {:>6} ms", two.as_millis());
        println!(
            "  ratio: {:.2} (two reviewers one after the other would be 2.00)",
            two.as_secs_f64() / alone.as_secs_f64()
        );
    });
}
