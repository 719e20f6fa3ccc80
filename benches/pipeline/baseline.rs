//! The baseline: what the pipeline's sprints cost at the least, the same sister spawned
//! bare and one durable SQLite commit per transition.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use hanarang::clock::now_ms;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

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

/// A database opened the way the store opens its own (`test_before_acquire` is sqlx's
/// default, `true`, in the store).
pub async fn open_like_store(path: &Path, test_before_acquire: bool) -> SqlitePool {
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
        .expect("a database URL")
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true);
    SqlitePoolOptions::new()
        .max_connections(4)
        .test_before_acquire(test_before_acquire)
        .connect_with(options)
        .await
        .expect("open the baseline database")
}

/// What the pipeline's sprints cost at the least: for each of `n` sprints, the same
/// sister spawns and one durable commit per transition, in the order the pipeline took
/// them.
pub async fn baseline_once(bin: &Path, template: &Template, n: usize, label: &str) -> BaselineRun {
    let dir = TempDir::new(label);
    let workdir = dir.path().join(PROJECT);
    std::fs::create_dir_all(&workdir).expect("create the workdir");
    let pool = open_like_store(&dir.path().join("baseline.db"), true).await;
    sqlx::query(
        "CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, sprint INTEGER NOT NULL,
             seq INTEGER NOT NULL, event TEXT NOT NULL, event_json TEXT NOT NULL, at INTEGER NOT NULL)",
    )
    .execute(&pool)
    .await
    .expect("create the baseline table");

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
                    commit_one(&pool, sprint, seq, event, event_json).await;
                    commits.push(t.elapsed());
                }
            }
        }
    }
    let elapsed = started.elapsed();
    pool.close().await;
    BaselineRun {
        _dir: dir,
        elapsed,
        spawns,
        commits,
        mismatches,
    }
}

/// One transaction that takes the write lock at once (as the store's), one row, commit.
async fn commit_one(pool: &SqlitePool, sprint: usize, seq: i64, event: &str, event_json: &str) {
    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .expect("begin a transaction");
    sqlx::query("INSERT INTO log (sprint, seq, event, event_json, at) VALUES (?, ?, ?, ?, ?)")
        .bind(i64::try_from(sprint).unwrap_or(i64::MAX))
        .bind(seq)
        .bind(event)
        .bind(event_json)
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .expect("insert a row");
    tx.commit().await.expect("commit");
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
