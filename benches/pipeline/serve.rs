//! Part 2: the real binary's `serve` as a child process while queued sprints pass
//! through, approved from this process through the database; its memory read from /proc.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use hanarang::clock::now_ms;
use hanarang::pipeline::State;
use hanarang::store::{CommandKind, Store};

use crate::common::mib;
use crate::numbers::percentile;
use crate::setup::{Setup, create_sprints};
use crate::support;

/// Part 2: sprints that pass through `serve`.
pub const SERVE_SPRINTS: usize = 1000;
const RSS_TARGET_BYTES: u64 = 40 * 1024 * 1024;
/// How often this process looks at the sprint it waits for.
const SERVE_POLL: Duration = Duration::from_millis(5);
/// Gives up (and says so) after this long.
const SERVE_PATIENCE: Duration = Duration::from_secs(20 * 60);

/// Runs `serve` while `SERVE_SPRINTS` sprints pass through; returns its folder (the
/// database of part 3's "deployed by serve" row).
pub fn serve(rt: &tokio::runtime::Runtime, bin: &Path) -> Option<Setup> {
    println!(
        "2. Peak RSS of `hanarang serve` (a child process, logging at info to a file) while {SERVE_SPRINTS} queued sprints pass through"
    );
    let setup = Setup::new("serve", bin);
    let config = setup.config();
    let store = rt
        .block_on(Store::open(&setup.url()))
        .expect("open the database");
    let queued_at = Instant::now();
    let ids = rt.block_on(create_sprints(&store, &config, SERVE_SPRINTS));
    println!(
        "queued {} sprints through the store in {:.1} s",
        ids.len(),
        queued_at.elapsed().as_secs_f64()
    );
    let log = std::fs::File::create(setup.dir.path().join("serve.log")).expect("a log file");
    let mut child = support::serve(bin, &setup.config_path)
        .stderr(log)
        .spawn()
        .expect("start hanarang serve");
    let pid = child.id();
    let started = Instant::now();
    let outcome = rt.block_on(drive_serve(&store, &mut child, &ids));
    let elapsed = started.elapsed();
    let status = proc_status(pid);
    let cpu = proc_cpu(pid);
    let exit = stop_child(&mut child);

    let hwm = status.get("VmHWM").copied().unwrap_or(0);
    let rss = status.get("VmRSS").copied().unwrap_or(0);
    println!(
        "{} of {} sprints deployed in {:.1} s ({:.0} ms per sprint, approvals included){}",
        outcome.deployed,
        ids.len(),
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / outcome.deployed.max(1) as f64,
        outcome
            .problem
            .as_ref()
            .map(|p| format!("; stopped early: {p}"))
            .unwrap_or_default()
    );
    println!(
        "serve's memory over the run (VmRSS after k sprints deployed): {}",
        outcome
            .samples
            .iter()
            .map(|(k, kb)| format!("{k}: {}", mib(kb * 1024)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "peak RSS (VmHWM) {}, VmRSS at the end {}; target < {}: {}",
        mib(hwm * 1024),
        mib(rss * 1024),
        mib(RSS_TARGET_BYTES),
        if outcome.deployed == ids.len() && hwm * 1024 < RSS_TARGET_BYTES {
            "PASS"
        } else if hwm * 1024 < RSS_TARGET_BYTES {
            "not all sprints passed"
        } else {
            "FAIL"
        }
    );
    if let Some((serve_ms, children_ms)) = cpu {
        println!(
            "CPU time: serve itself {:.1} ms per sprint, its children (sisters, git) {:.1} ms per sprint",
            serve_ms / outcome.deployed.max(1) as f64,
            children_ms / outcome.deployed.max(1) as f64
        );
    }
    let log_lines = std::fs::read_to_string(setup.dir.path().join("serve.log"))
        .map_or(0, |l| l.lines().count());
    println!(
        "serve exited: {exit}; its log: {log_lines} lines ({:.0} per sprint)",
        log_lines as f64 / outcome.deployed.max(1) as f64
    );

    // Where a sprint's time went, from the log: the pipeline itself, and the approval's
    // wait (a command from another process is seen at the orchestrator's next poll).
    let (pipeline_ms, approval_ms) = rt.block_on(serve_log_times(&store, &ids, &outcome));
    rt.block_on(store.close());
    if !pipeline_ms.is_empty() {
        let tenth = (pipeline_ms.len() / 10).max(1);
        let mut first: Vec<i64> = pipeline_ms[..tenth].to_vec();
        let mut last: Vec<i64> = pipeline_ms[pipeline_ms.len() - tenth..].to_vec();
        first.sort_unstable();
        last.sort_unstable();
        let mut all = pipeline_ms.clone();
        all.sort_unstable();
        println!(
            "per sprint without the approval wait (lock_acquired → done, deploying → deployed): median {} ms (first {tenth}: {} ms, last {tenth}: {} ms), p90 {} ms",
            percentile(&all, 50),
            percentile(&first, 50),
            percentile(&last, 50),
            percentile(&all, 90)
        );
    }
    if !approval_ms.is_empty() {
        let mut a = approval_ms;
        a.sort_unstable();
        println!(
            "approval written → applied (done → deploying): median {} ms, p90 {} ms, max {} ms",
            percentile(&a, 50),
            percentile(&a, 90),
            a.last().copied().unwrap_or(0)
        );
    }
    Some(setup)
}

struct ServeOutcome {
    deployed: usize,
    /// (sprints deployed, VmRSS kB)
    samples: Vec<(usize, u64)>,
    /// When each approval was written (unix ms), by sprint index.
    approved_at: Vec<Option<i64>>,
    problem: Option<String>,
}

/// Waits for each sprint in turn (one project: they run in order), approves it in `done`.
async fn drive_serve(store: &Store, child: &mut Child, ids: &[String]) -> ServeOutcome {
    let pid = child.id();
    let deadline = Instant::now() + SERVE_PATIENCE;
    let mut out = ServeOutcome {
        deployed: 0,
        samples: Vec::new(),
        approved_at: vec![None; ids.len()],
        problem: None,
    };
    let step = (ids.len() / 10).max(1);
    while out.deployed < ids.len() {
        if let Ok(Some(status)) = child.try_wait() {
            out.problem = Some(format!("serve exited on its own: {status}"));
            break;
        }
        if Instant::now() > deadline {
            out.problem = Some(format!("gave up after {SERVE_PATIENCE:?}"));
            break;
        }
        let i = out.deployed;
        let sprint = match store.sprint(&ids[i]).await {
            Ok(Some(s)) => s,
            Ok(None) => {
                out.problem = Some(format!("no sprint {}", ids[i]));
                break;
            }
            Err(e) => {
                out.problem = Some(format!("reading {}: {e}", ids[i]));
                break;
            }
        };
        match sprint.state {
            State::Done if out.approved_at[i].is_none() => {
                let at = now_ms();
                store
                    .submit_command(&sprint.id, CommandKind::Approve, None, "bench", None, at)
                    .await
                    .expect("submit the approval");
                out.approved_at[i] = Some(at);
                continue;
            }
            State::Deployed => {
                out.deployed += 1;
                if out.deployed == 1 || out.deployed.is_multiple_of(step) {
                    let rss = proc_status(pid).get("VmRSS").copied().unwrap_or(0);
                    out.samples.push((out.deployed, rss));
                }
                continue;
            }
            State::Escalated | State::Aborted => {
                out.problem = Some(format!("{} is {}", sprint.id, sprint.state));
                break;
            }
            _ => {}
        }
        tokio::time::sleep(SERVE_POLL).await;
    }
    out
}

/// Per deployed sprint: its time in the pipeline without the wait for the approval, and
/// how long the approval took to be applied.
async fn serve_log_times(
    store: &Store,
    ids: &[String],
    outcome: &ServeOutcome,
) -> (Vec<i64>, Vec<i64>) {
    let mut pipeline = Vec::new();
    let mut approval = Vec::new();
    for (i, id) in ids.iter().enumerate().take(outcome.deployed) {
        let log = store.transitions(id).await.unwrap_or_default();
        let at = |to: State| log.iter().find(|t| t.to == to).map(|t| t.at);
        let first = log.first().map(|t| t.at);
        if let (Some(first), Some(done), Some(deploying), Some(deployed)) = (
            first,
            at(State::Done),
            at(State::Deploying),
            at(State::Deployed),
        ) {
            pipeline.push((done - first) + (deployed - deploying));
            if let Some(approved) = outcome.approved_at[i] {
                approval.push(deploying - approved);
            }
        }
    }
    (pipeline, approval)
}

/// `/proc/<pid>/status` fields in kB (VmHWM, VmRSS, ...).
fn proc_status(pid: u32) -> HashMap<String, u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (key, value) = l.split_once(':')?;
            let kb = value.split_whitespace().next()?.parse().ok()?;
            Some((key.to_string(), kb))
        })
        .collect()
}

/// CPU time in ms of the process itself and of its waited-for children.
fn proc_cpu(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // After the state: ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime stime cutime cstime.
    let ticks = clock_ticks();
    let ms = |t: u64| t as f64 * 1000.0 / ticks;
    Some((
        ms(fields.get(10)? + fields.get(11)?),
        ms(fields.get(12)? + fields.get(13)?),
    ))
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// SIGTERM, then waits (SIGKILL after 30 s). How it ended.
fn stop_child(child: &mut Child) -> String {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.to_string(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                return format!(
                    "still running 30 s after SIGTERM, killed: {:?}",
                    child.wait()
                );
            }
        }
    }
}
