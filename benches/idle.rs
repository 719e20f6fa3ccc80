//! What an idle `serve` costs, and how fast a CLI command comes back (issue 18), measured:
//! `cargo bench --bench idle`. For 100, 1,000 and 10,000 sprints in a SQLite database (the
//! first waiting in `done` with its project's lock, the rest queued behind it), the real
//! `hanarang serve` as a child process: its CPU over `IDLE_FOR` from `/proc/<pid>/stat`,
//! as a share of one core. Then `hanarang sprint approve` from start to exit (with its
//! answer), `APPROVALS` times, each on the next sprint waiting in `done`. Targets
//! (docs/benchmarks/idle.md): under 0.2% of a core at every size; approve under 15 ms
//! median.

#[allow(dead_code)] // what every benchmark prints about the machine
#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)] // the benchmark uses a part of the tests' support
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use hanarang::pipeline::State;
use hanarang::store::Store;
use support::pipeline::{Files, Setup};

const SIZES: [usize; 3] = [100, 1_000, 10_000];
const IDLE_FOR: Duration = Duration::from_secs(30);
const APPROVALS: usize = 30;

/// CPU time (user + system) of a process so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // After the state: ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime.
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    let per_second: u64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100);
    Duration::from_millis(ticks * 1000 / per_second.max(1))
}

async fn wait_in_done(store: &Store, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if store
            .sprint(id)
            .await
            .ok()
            .flatten()
            .is_some_and(|s| s.state == State::Done)
        {
            return;
        }
        assert!(Instant::now() < deadline, "{id} never reached done");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let bin = common::hanarang_binary();
    println!("{}", common::machine());
    for size in SIZES {
        let files = Files::new(&Setup::default());
        let url = files.config().database.url;
        let store = rt.block_on(Store::open(&url)).expect("open the database");
        rt.block_on(async {
            for n in 0..size {
                store
                    .create_sprint(
                        "app",
                        &format!("idle {n}"),
                        None,
                        "cli:tester@test",
                        "b/{sprint_lower}",
                        1,
                    )
                    .await
                    .expect("queue a sprint");
            }
        });
        let mut serve = support::serve(&bin, &files.config_path)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start serve");
        let pid = serve.id();
        rt.block_on(wait_in_done(&store, "SPRINT-001"));
        // Settled: the first sprint waits for its approval, nothing else can move.
        std::thread::sleep(Duration::from_secs(1));
        let before = cpu(pid);
        std::thread::sleep(IDLE_FOR);
        let used = cpu(pid).saturating_sub(before);
        println!(
            "{size:>6} sprints: idle serve used {} ms of CPU in {} s = {:.3}% of a core",
            used.as_millis(),
            IDLE_FOR.as_secs(),
            used.as_secs_f64() / IDLE_FOR.as_secs_f64() * 100.0
        );
        if size == SIZES[0] {
            let mut took = Vec::new();
            for n in 1..=APPROVALS {
                let id = format!("SPRINT-{n:03}");
                rt.block_on(wait_in_done(&store, &id));
                let started = Instant::now();
                let out = files.hanarang(&["sprint", "approve", &id]);
                took.push(started.elapsed());
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            took.sort();
            println!(
                "`sprint approve` round trip, {APPROVALS} approvals: median {:.1} ms, p90 {:.1} ms",
                common::median(&took).as_secs_f64() * 1000.0,
                took[took.len() * 9 / 10].as_secs_f64() * 1000.0
            );
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX)),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = serve.wait();
    }
}
