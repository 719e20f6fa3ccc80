//! The baseline: what the pipeline's sprints cost at the least, the same sister spawned
//! bare and one durable SQLite commit per transition.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hanarang::clock::now_ms;
use hanarang::store::testing::Floor;

use crate::setup::PROJECT;
use crate::sprints::{BareRun, Step, Template, verdict};
use crate::support::TempDir;

pub struct BaselineRun {
    _dir: TempDir,
    pub elapsed: Duration,
    pub spawns: Vec<Duration>,
    pub commits: Vec<Duration>,
    pub mismatches: usize,
}

/// What the pipeline's sprints cost at the least: for each of `n` sprints, the same
/// sister spawns and one durable commit per transition, in the order the pipeline took
/// them.
pub async fn baseline_once(bin: &Path, template: &Template, n: usize, label: &str) -> BaselineRun {
    let dir = TempDir::new(label);
    let workdir = dir.path().join(PROJECT);
    std::fs::create_dir_all(&workdir).expect("create the workdir");
    let floor = Floor::open(&dir.path().join("baseline.db"), true)
        .await
        .expect("open the baseline database");
    floor.create_log().await.expect("create the baseline table");

    let mut spawns = Vec::new();
    let mut commits = Vec::new();
    let mut mismatches = 0;
    let started = Instant::now();
    for sprint in 0..n {
        let mut seq = 0i64;
        for step in &template.steps {
            match step {
                Step::Spawn(i) => {
                    let run = &template.runs[*i];
                    let t = Instant::now();
                    let out = spawn_bare(bin, run, &workdir);
                    spawns.push(t.elapsed());
                    let answered = serde_json::from_slice::<serde_json::Value>(&out).ok();
                    if verdict(answered.as_ref()) != run.verdict {
                        mismatches += 1;
                    }
                }
                Step::Commit { event, event_json } => {
                    seq += 1;
                    let t = Instant::now();
                    floor
                        .append(
                            i64::try_from(sprint).unwrap_or(i64::MAX),
                            seq,
                            event,
                            event_json,
                            now_ms(),
                        )
                        .await
                        .expect("commit a row");
                    commits.push(t.elapsed());
                }
            }
        }
    }
    let elapsed = started.elapsed();
    floor.close().await;
    BaselineRun {
        _dir: dir,
        elapsed,
        spawns,
        commits,
        mismatches,
    }
}

/// The sister spawned by hand: same program, args and environment as the runner gives
/// it, the same prompt written to stdin, all of stdout read, the child waited for.
pub fn spawn_bare(bin: &Path, run: &BareRun, workdir: &Path) -> Vec<u8> {
    let mut child = Command::new(bin)
        .arg("simulate-sister")
        .current_dir(workdir)
        .env("SIMULATE_DELAY_MS", "0")
        .env("HANARANG_SPRINT_ID", &run.sprint_id)
        .env("HANARANG_ROLE", run.actor.as_str())
        .env("HANARANG_RUN_ID", &run.run_id)
        .env("HANARANG_CONTRACT_FILE", &run.contract_file)
        .env("HANARANG_ROUND", run.round.to_string())
        .env("HANARANG_ATTEMPT", run.attempt.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the bare sister");
    if let Some(mut stdin) = child.stdin.take() {
        // The prompt fits in the pipe buffer; the sister reads it all before answering.
        let _ = stdin.write_all(run.prompt.as_bytes());
    }
    let mut out = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_end(&mut out);
    }
    let _ = child.wait();
    out
}
