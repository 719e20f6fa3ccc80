//! Benchmark of the orchestrator: whole sprints with zero-delay simulated sisters. Run it
//! with `cargo bench --bench pipeline` (all three parts) or name parts:
//! `cargo bench --bench pipeline -- wall serve status`. `docs/benchmarks.md` says what
//! it measures and records the numbers. It only reports: nothing here asserts.
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
//! the SQL statements it runs per sprint (counted from sqlx's statement events in another
//! child), and reference costs of one git call, one commit, one runner run. Part 3 times
//! the status command's steps in process as well.
//!
//! For a closer look, `--pipeline-child trace <n>` runs n sprints with the library's
//! debug events and every SQL statement on stderr, timestamped (a timeline of each run);
//! every child's `RESULT` line carries its own CPU time and its children's.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{fs_type, machine};
use hanarang::clock::now_ms;
use hanarang::config::Config;
use hanarang::handoff::message::Actor;
use hanarang::orchestrator::Orchestrator;
use hanarang::pipeline::{Event, Facts, Policy, State, apply};
use hanarang::sister::{ContractFile, RunControl, RunRequest, render_prompt};
use hanarang::store::{CommandKind, Commit, NewRun, Run, RunEnd, Sprint, Store, TransitionRecord};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::{broadcast, oneshot};

const PROJECT: &str = "app";

/// Part 1: sprints per repetition, and repetitions of each side.
const WALL_SPRINTS: usize = 40;
const WALL_REPS: usize = 11;
const WALL_RATIO_TARGET: f64 = 1.25;
/// How this benchmark runs itself as a child (the no-git variants, the statement count).
const CHILD_ARG: &str = "--pipeline-child";
/// Samples for the reference costs printed under part 1.
const REFERENCE_SAMPLES: usize = 30;

/// Part 2: sprints that pass through `serve`.
const SERVE_SPRINTS: usize = 1000;
const RSS_TARGET_BYTES: u64 = 40 * 1024 * 1024;
/// How often this process looks at the sprint it waits for.
const SERVE_POLL: Duration = Duration::from_millis(5);
/// Gives up (and says so) after this long.
const SERVE_PATIENCE: Duration = Duration::from_secs(20 * 60);

/// Part 3.
const STATUS_SPRINTS: usize = 10_000;
const STATUS_SAMPLES: usize = 10;
const STATUS_TARGET: Duration = Duration::from_millis(50);

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

// --- setup ---------------------------------------------------------------------------------

/// The release `hanarang` that `cargo bench` builds beside this benchmark.
fn hanarang_binary() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_hanarang"));
    if built.is_file() {
        return built;
    }
    // target/release/deps/pipeline-<hash> → target/release/hanarang
    let exe = std::env::current_exe().expect("this benchmark's executable");
    let beside = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("hanarang"))
        .filter(|p| p.is_file());
    beside.unwrap_or_else(|| panic!("no hanarang binary at {}", built.display()))
}

/// A fresh folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        TempDir::new_in(&std::env::temp_dir(), label)
    }

    fn new_in(root: &Path, label: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = root.join(format!(
            "hanarang-bench-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create a temp dir");
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A config as an operator would write it: one project, the simulated sister for every
/// role, a short backoff.
struct Setup {
    dir: TempDir,
    config_path: PathBuf,
    db: PathBuf,
    /// Where the database (and the runs folder beside it) lives when not in `dir`.
    _db_dir: Option<TempDir>,
}

impl Setup {
    fn new(label: &str, bin: &Path) -> Setup {
        Setup::with_db_in(label, bin, None, None)
    }

    /// The database (and so the contract files, beside it) under `db_root` when given.
    /// With `keep_contracts`, the sister is started through `sh`, which first copies its
    /// contract file (one per sprint, rewritten for each run) to `<run id>.contract.json`
    /// in that folder: the warm-up keeps each run's contract for the baseline that way.
    fn with_db_in(
        label: &str,
        bin: &Path,
        db_root: Option<&Path>,
        keep_contracts: Option<&Path>,
    ) -> Setup {
        let dir = TempDir::new(label);
        let db_dir = db_root.map(|root| TempDir::new_in(root, label));
        let db = db_dir
            .as_ref()
            .map_or_else(|| dir.path().to_path_buf(), |d| d.path().to_path_buf())
            .join("hanarang.db");
        let workdir = dir.path().join(PROJECT);
        std::fs::create_dir_all(&workdir).expect("create the workdir");
        let (program, args) = match keep_contracts {
            None => (
                bin.display().to_string(),
                r#"["simulate-sister"]"#.to_string(),
            ),
            Some(keep) => (
                "/bin/sh".to_string(),
                format!(
                    r#"["-c", "cp \"$HANARANG_CONTRACT_FILE\" \"{}/$HANARANG_RUN_ID.contract.json\" && exec \"$0\" simulate-sister", "{}"]"#,
                    keep.display(),
                    bin.display()
                ),
            ),
        };
        let toml = format!(
            r#"[database]
url = "sqlite://{db}"

[pipeline]
backoff = {{ initial = "10ms", factor = 2.0, max = "50ms" }}

[agent]
program = "{program}"
args = {args}
kill_grace = "2s"
env = {{ SIMULATE_DELAY_MS = "0" }}

[projects.{PROJECT}]
workdir = "{workdir}"
"#,
            db = db.display(),
            workdir = workdir.display(),
        );
        let config_path = dir.path().join("config.toml");
        std::fs::write(&config_path, toml).expect("write the config");
        Setup {
            dir,
            config_path,
            db,
            _db_dir: db_dir,
        }
    }

    fn config(&self) -> Arc<Config> {
        Arc::new(Config::load(&self.config_path).expect("the bench config is valid"))
    }

    fn url(&self) -> String {
        format!("sqlite://{}", self.db.display())
    }
}

fn goal(i: usize) -> String {
    format!(
        "Add a greeting page to the demo app (bench sprint {})",
        i + 1
    )
}

async fn create_sprints(store: &Store, config: &Config, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let sprint = store
            .create_sprint(
                PROJECT,
                &goal(i),
                None,
                &config.pipeline.branch_template,
                now_ms(),
            )
            .await
            .expect("create a sprint");
        ids.push(sprint.id);
    }
    ids
}

// --- the pipeline, in process ------------------------------------------------------------

/// One pass of N sprints through an in-process orchestrator.
struct PipelineRun {
    setup: Setup,
    n: usize,
    deployed: usize,
    elapsed: Duration,
    /// Per sprint: its first transition to its last (lock_acquired → deployed), from the log.
    spans_ms: Vec<i64>,
    runs_per_sprint: BTreeMap<usize, usize>,
    transitions_per_sprint: BTreeMap<usize, usize>,
    outcomes: BTreeMap<String, usize>,
    problems: Vec<String>,
    /// SQL statements run while timed, and their time in SQLite (counted only in the
    /// `count` child).
    statements: (u64, Duration),
    /// The same, by statement text (count, ns, text), most time first.
    by_sql: Vec<(u64, u64, String)>,
}

/// Queues `n` sprints, starts an orchestrator on them and approves each as it reaches
/// `done` (a command in the database plus a wake-up, as `run --auto-approve` does). Timed
/// from the orchestrator's first pass to the last sprint deployed.
async fn pipeline_once(bin: &Path, n: usize, label: &str, db_root: Option<&Path>) -> PipelineRun {
    pipeline_in(Setup::with_db_in(label, bin, db_root, None), n).await
}

/// `pipeline_once` in a given setup.
async fn pipeline_in(setup: Setup, n: usize) -> PipelineRun {
    let config = setup.config();
    let store = Store::open(&config.database.url)
        .await
        .expect("open the database");
    let ids = create_sprints(&store, &config, n).await;
    let orchestrator = Orchestrator::start(config.clone(), store.clone())
        .await
        .expect("the orchestrator starts");
    let handle = orchestrator.handle();
    let mut events = handle.subscribe();
    let (stop, stopped) = oneshot::channel::<()>();
    let patience = Duration::from_secs(60) + Duration::from_secs(2) * n as u32;
    let deadline = tokio::time::Instant::now() + patience;

    let counted = sql_count::now();
    sql_count::reset_by_sql();
    let started = Instant::now();
    // As `serve` runs it.
    let task = orchestrator.run_on_own_thread(async move {
        let _ = stopped.await;
    });
    let mut deployed = 0;
    let mut problems = Vec::new();
    while deployed < n {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) => {
                problems.push(format!(
                    "only {deployed} of {n} deployed after {patience:?}"
                ));
                break;
            }
            Ok(Err(broadcast::error::RecvError::Lagged(k))) => {
                problems.push(format!("the event receiver lagged by {k}"));
            }
            Ok(Err(broadcast::error::RecvError::Closed)) => {
                problems.push("the orchestrator stopped".into());
                break;
            }
            Ok(Ok(record)) => match record.to {
                State::Done => {
                    store
                        .submit_command(
                            &record.sprint_id,
                            CommandKind::Approve,
                            None,
                            "bench",
                            now_ms(),
                        )
                        .await
                        .expect("submit the approval");
                    handle.wake();
                }
                State::Deployed => deployed += 1,
                State::Escalated | State::Aborted => {
                    problems.push(format!(
                        "{} went {} → {} on {}",
                        record.sprint_id, record.from, record.to, record.event
                    ));
                    break;
                }
                _ => {}
            },
        }
    }
    let elapsed = started.elapsed();
    let statements = {
        let now = sql_count::now();
        (now.0 - counted.0, now.1.saturating_sub(counted.1))
    };
    let by_sql = sql_count::by_sql();
    let _ = stop.send(());
    if let Err(e) = task.await {
        problems.push(format!("the orchestrator failed: {e}"));
    }

    let mut spans_ms = Vec::new();
    let mut runs_per_sprint = BTreeMap::new();
    let mut transitions_per_sprint = BTreeMap::new();
    let mut outcomes = BTreeMap::new();
    for id in &ids {
        let log = store.transitions(id).await.unwrap_or_default();
        let runs = store.runs(id).await.unwrap_or_default();
        *transitions_per_sprint.entry(log.len()).or_default() += 1;
        *runs_per_sprint.entry(runs.len()).or_default() += 1;
        for r in &runs {
            let outcome = r.outcome.map_or("running", |o| o.as_str());
            *outcomes.entry(outcome.to_string()).or_default() += 1;
        }
        if let (Some(first), Some(last)) = (log.first(), log.last())
            && last.to == State::Deployed
        {
            spans_ms.push(last.at - first.at);
        }
    }
    store.close().await;
    PipelineRun {
        setup,
        n,
        deployed,
        elapsed,
        spans_ms,
        runs_per_sprint,
        transitions_per_sprint,
        outcomes,
        problems,
        statements,
        by_sql,
    }
}

/// One run of a sprint as the baseline replays it.
struct BareRun {
    actor: Actor,
    round: u32,
    attempt: u32,
    run_id: String,
    sprint_id: String,
    contract_file: String,
    /// The very prompt the runner gave this run.
    prompt: String,
    /// What the sister answered (checked on every bare run).
    verdict: String,
    /// The contract as JSON (for the contract-write reference).
    contract_json: Vec<u8>,
}

/// A step of one sprint, in the order the orchestrator took them.
enum Step {
    /// Spawn the sister of this run (an index into `Template::runs`).
    Spawn(usize),
    /// Commit this transition.
    Commit { event: String, event_json: String },
}

/// The first sprint of the warm-up, as the store recorded it.
struct History {
    runs: Vec<Run>,
    transitions: Vec<TransitionRecord>,
}

struct Template {
    runs: Vec<BareRun>,
    steps: Vec<Step>,
    history: History,
    /// The warm-up's folder: the contract files the baseline names stay there.
    _warm_up: (Setup, TempDir),
}

async fn warm_up(bin: &Path) -> Template {
    let kept = TempDir::new("warm-up-contracts");
    let run = pipeline_in(
        Setup::with_db_in("warm-up", bin, None, Some(kept.path())),
        2,
    )
    .await;
    assert!(
        run.problems.is_empty() && run.deployed == 2,
        "the warm-up pipeline failed: {:?}",
        run.problems
    );
    let store = Store::open(&run.setup.url())
        .await
        .expect("reopen the warm-up database");
    let sprint = hanarang::domain::sprint_id(1);
    let runs = store.runs(&sprint).await.expect("read runs");
    let transitions = store.transitions(&sprint).await.expect("read transitions");
    let mut bare = Vec::new();
    for r in &runs {
        let path = kept.path().join(format!("{}.contract.json", r.run_id));
        let bytes = std::fs::read(&path).expect("read a contract file of the warm-up");
        let contract: ContractFile =
            serde_json::from_slice(&bytes).expect("the contract file parses");
        let contract_file = path.display().to_string();
        bare.push(BareRun {
            actor: r.actor,
            round: r.round,
            attempt: r.attempt,
            run_id: r.run_id.clone(),
            sprint_id: r.sprint_id.clone(),
            prompt: render_prompt(&contract, &contract_file),
            contract_file,
            verdict: verdict(r.message.as_ref()),
            contract_json: bytes,
        });
    }
    let mut steps = Vec::new();
    for t in &transitions {
        if let Some(run_id) = &t.run_id
            && let Some(i) = runs.iter().position(|r| &r.run_id == run_id)
        {
            steps.push(Step::Spawn(i));
        }
        steps.push(Step::Commit {
            event: t.event.clone(),
            event_json: serde_json::to_string(&t.detail).unwrap_or_default(),
        });
    }
    store.close().await;
    Template {
        runs: bare,
        steps,
        history: History { runs, transitions },
        _warm_up: (run.setup, kept),
    }
}

fn verdict(message: Option<&serde_json::Value>) -> String {
    message
        .and_then(|m| m.get("verdict"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("?")
        .to_string()
}

// --- the baseline --------------------------------------------------------------------------

struct BaselineRun {
    _dir: TempDir,
    elapsed: Duration,
    spawns: Vec<Duration>,
    commits: Vec<Duration>,
    mismatches: usize,
}

/// A database opened the way the store opens its own (`test_before_acquire` is sqlx's
/// default, `true`, in the store).
async fn open_like_store(path: &Path, test_before_acquire: bool) -> SqlitePool {
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
async fn baseline_once(bin: &Path, template: &Template, n: usize, label: &str) -> BaselineRun {
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
fn spawn_bare(bin: &Path, run: &BareRun, workdir: &Path) -> Vec<u8> {
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

// --- 1. per-sprint wall time -----------------------------------------------------------

/// The pipeline variants of part 1. `A` and `B` are the measurement; the others take
/// costs away, to show their share.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The pipeline, in this process, database under the temp dir.
    A,
    /// The baseline.
    B,
    /// The pipeline with the database and its runs folder on tmpfs: no fsync cost, no
    /// ext4 inode allocation for contract files.
    AShm,
    /// The pipeline in a child process whose PATH has no git: no git process per spawn.
    ANoGit,
    /// Both: a child without git, its database on tmpfs.
    ABoth,
}

impl Side {
    fn label(self) -> &'static str {
        match self {
            Side::A => "A",
            Side::B => "B",
            Side::AShm => "A-shm",
            Side::ANoGit => "A-nogit",
            Side::ABoth => "A-both",
        }
    }
}

/// Runs the pipeline in a child of this benchmark: `nogit` with `PATH` emptied of git,
/// `both` the same with its database on /dev/shm, `count` with the SQL statements
/// counted. Returns the wall time, the problems it
/// reported and its other fields.
fn pipeline_child(mode: &str, n: usize) -> (Duration, Vec<String>, HashMap<String, String>) {
    let exe = std::env::current_exe().expect("this benchmark's executable");
    let empty = TempDir::new("no-git-path");
    let mut cmd = Command::new(exe);
    cmd.args([CHILD_ARG, mode, &n.to_string()])
        .stderr(Stdio::inherit());
    if mode == "nogit" || mode == "both" {
        cmd.env("PATH", empty.path());
    }
    let stdout = cmd
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT ").map(str::to_string));
    let Some(line) = line else {
        return (
            Duration::ZERO,
            vec!["the child reported nothing".into()],
            HashMap::new(),
        );
    };
    let mut elapsed = Duration::ZERO;
    let mut problems = Vec::new();
    let mut fields: HashMap<String, String> = line
        .split_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let statements: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("STMT "))
        .collect();
    fields.insert("by_sql".into(), statements.join("\n"));
    for (key, value) in &fields {
        let (key, value) = (key.as_str(), value.as_str());
        match key {
            "elapsed_ns" => elapsed = Duration::from_nanos(value.parse().unwrap_or(0)),
            "deployed" if value != n.to_string() => {
                problems.push(format!("deployed {value} of {n}"));
            }
            "problems" if value != "0" => problems.push(format!("{value} problems")),
            _ => {}
        }
    }
    (elapsed, problems, fields)
}

/// In the child: one pipeline pass, then a line for the parent.
fn child_main(mode: &str, n: usize) {
    if mode == "count" {
        sql_count::install();
    }
    if mode == "trace" {
        tracing_subscriber::fmt()
            .with_env_filter("hanarang=debug,sqlx::query=debug")
            .with_timer(tracing_subscriber::fmt::time::uptime())
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .init();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a multi-thread runtime");
    let bin = hanarang_binary();
    let root = (mode == "both").then(|| Path::new("/dev/shm"));
    let run = rt.block_on(pipeline_once(&bin, n, &format!("wall-a-{mode}"), root));
    for p in &run.problems {
        eprintln!("{mode} child: {p}");
    }
    let (statements, in_sqlite) = run.statements;
    for (count, ns, text) in &run.by_sql {
        println!("STMT {count} {ns} {text}");
    }
    let (own, children) = cpu_ticks();
    println!(
        "RESULT elapsed_ns={} deployed={} problems={} statements={statements} in_sqlite_ns={} cpu_self_ticks={own} cpu_children_ticks={children}",
        run.elapsed.as_nanos(),
        run.deployed,
        run.problems.len(),
        in_sqlite.as_nanos()
    );
}

/// CPU time (clock ticks, user + system) of this process and of its reaped children,
/// from `/proc/self/stat`.
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let fields: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    match fields.as_slice() {
        [utime, stime, cutime, cstime] => (utime + stime, cutime + cstime),
        _ => (0, 0),
    }
}

/// Counts the SQL statements sqlx runs (its `sqlx::query` debug events), and the time
/// each spent in SQLite, in the `count` child. `BEGIN` and `COMMIT` are not among them.
mod sql_count {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    static STATEMENTS: AtomicU64 = AtomicU64::new(0);
    static NANOS: AtomicU64 = AtomicU64::new(0);
    /// By statement text: how many, and their time in SQLite (ns).
    static BY_SQL: Mutex<Option<HashMap<String, (u64, u64)>>> = Mutex::new(None);

    struct Counter;

    #[derive(Default)]
    struct Fields {
        elapsed: f64,
        summary: String,
        statement: String,
    }

    impl tracing::field::Visit for Fields {
        fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
            if field.name() == "elapsed_secs" {
                self.elapsed = value;
            }
        }

        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            match field.name() {
                "summary" => self.summary = value.to_string(),
                "db.statement" => self.statement = value.to_string(),
                _ => {}
            }
        }

        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() == "summary" && self.summary.is_empty() {
                self.summary = format!("{value:?}");
            }
        }
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Counter {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if event.metadata().target() != "sqlx::query" {
                return;
            }
            let mut fields = Fields::default();
            event.record(&mut fields);
            let nanos = (fields.elapsed * 1e9) as u64;
            STATEMENTS.fetch_add(1, Ordering::Relaxed);
            NANOS.fetch_add(nanos, Ordering::Relaxed);
            let text = if fields.statement.trim().is_empty() {
                fields.summary
            } else {
                fields.statement
            };
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let mut by_sql = BY_SQL.lock().unwrap_or_else(|p| p.into_inner());
            let entry = by_sql
                .get_or_insert_with(HashMap::new)
                .entry(text)
                .or_default();
            entry.0 += 1;
            entry.1 += nanos;
        }
    }

    pub fn install() {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let filter = tracing_subscriber::EnvFilter::new("sqlx::query=debug");
        let _ = tracing_subscriber::registry()
            .with(tracing_subscriber::Layer::with_filter(Counter, filter))
            .try_init();
    }

    /// Statements so far, and their time in SQLite.
    pub fn now() -> (u64, Duration) {
        (
            STATEMENTS.load(Ordering::Relaxed),
            Duration::from_nanos(NANOS.load(Ordering::Relaxed)),
        )
    }

    /// Forgets the statements by text counted so far.
    pub fn reset_by_sql() {
        *BY_SQL.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The statements by text: (count, ns in SQLite, text), most time first.
    pub fn by_sql() -> Vec<(u64, u64, String)> {
        let by_sql = BY_SQL.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows: Vec<_> = by_sql
            .iter()
            .flatten()
            .map(|(text, (n, ns))| (*n, *ns, text.clone()))
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.1));
        rows
    }
}

fn wall(rt: &tokio::runtime::Runtime, bin: &Path, template: &Template) {
    let runs = template.runs.len();
    let transitions = template.history.transitions.len();
    println!(
        "1. Per-sprint wall time: {WALL_SPRINTS} sprints per repetition, {WALL_REPS} repetitions, A and B interleaved (A B, B A, ...)"
    );
    println!(
        "   A: in-process Orchestrator, one project, each sprint approved on done; B: {runs} bare spawns + {transitions} durable commits (WAL, synchronous=FULL, one row) per sprint"
    );
    println!(
        "   variants of A without some costs: A-shm (database and contract files on /dev/shm: no fsync, no ext4 file creation), A-nogit (no git on PATH), A-both (neither)"
    );
    let shm = Path::new("/dev/shm").is_dir();
    println!(
        "{:>4} {:>6} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10}  {:<5}",
        "rep", "order", "A /sprint", "B /sprint", "ratio", "A-shm", "A-nogit", "A-both", "load"
    );
    let mut per: HashMap<&str, Vec<Duration>> = HashMap::new();
    let mut spans = Vec::new();
    let mut spawns = Vec::new();
    let mut commits = Vec::new();
    let mut notes = Vec::new();
    // Folders go only at the end: freeing inodes nearby slows ext4's next allocations.
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    for rep in 0..WALL_REPS {
        let order = if rep % 2 == 0 {
            [Side::A, Side::B, Side::AShm, Side::ANoGit, Side::ABoth]
        } else {
            [Side::B, Side::A, Side::ABoth, Side::ANoGit, Side::AShm]
        };
        let mut row: HashMap<&str, Duration> = HashMap::new();
        for side in order {
            let label = side.label();
            if !shm && matches!(side, Side::AShm | Side::ABoth) {
                continue;
            }
            match side {
                Side::A | Side::AShm => {
                    let root = (side == Side::AShm).then(|| Path::new("/dev/shm"));
                    let a = rt.block_on(pipeline_once(bin, WALL_SPRINTS, "wall-a", root));
                    row.insert(label, a.elapsed / WALL_SPRINTS as u32);
                    check_pipeline(
                        &a,
                        template,
                        &format!("rep {}: {label}", rep + 1),
                        &mut notes,
                    );
                    if side == Side::A {
                        spans.extend(a.spans_ms.iter().copied());
                    }
                    keep.push(Box::new(a));
                }
                Side::ANoGit | Side::ABoth => {
                    let mode = if side == Side::ABoth { "both" } else { "nogit" };
                    let (elapsed, problems, _) = pipeline_child(mode, WALL_SPRINTS);
                    row.insert(label, elapsed / WALL_SPRINTS as u32);
                    for p in problems {
                        notes.push(format!("rep {}: {label}: {p}", rep + 1));
                    }
                }
                Side::B => {
                    let b = rt.block_on(baseline_once(bin, template, WALL_SPRINTS, "wall-b"));
                    row.insert(label, b.elapsed / WALL_SPRINTS as u32);
                    if b.mismatches > 0 {
                        notes.push(format!(
                            "rep {}: B: {} bare runs answered another verdict",
                            rep + 1,
                            b.mismatches
                        ));
                    }
                    spawns.extend(b.spawns.iter().copied());
                    commits.extend(b.commits.iter().copied());
                    keep.push(Box::new(b));
                }
            }
        }
        let get = |k: &str| row.get(k).copied().unwrap_or_default();
        println!(
            "{:>4} {:>6} {:>10} {:>10} {:>7.3} {:>10} {:>10} {:>10}  {:<5}",
            rep + 1,
            if rep % 2 == 0 { "A B" } else { "B A" },
            ms(get("A")),
            ms(get("B")),
            get("A").as_secs_f64() / get("B").as_secs_f64(),
            ms(get("A-shm")),
            ms(get("A-nogit")),
            ms(get("A-both")),
            loadavg_1(),
        );
        for (k, v) in row {
            per.entry(k).or_default().push(v);
        }
    }
    let med = |k: &str| per.get(k).map(|v| median(v)).unwrap_or_default();
    let (a_med, b_med) = (med("A"), med("B"));
    let ratio = a_med.as_secs_f64() / b_med.as_secs_f64();
    let ratios: Vec<f64> = per
        .get("A")
        .into_iter()
        .flatten()
        .zip(per.get("B").into_iter().flatten())
        .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
        .collect();
    println!(
        "median per sprint: A {}, B {}, extra {}; ratio of medians {ratio:.3} (per-rep {:.3}–{:.3}), target ≤ {WALL_RATIO_TARGET}: {}",
        ms(a_med),
        ms(b_med),
        ms(a_med.saturating_sub(b_med)),
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratios.iter().copied().fold(0.0, f64::max),
        if ratio <= WALL_RATIO_TARGET {
            "PASS"
        } else {
            "FAIL"
        }
    );
    let spawn_part = median(&spawns) * runs as u32;
    println!(
        "variants, median per sprint: A-shm {} (fsync and file creation: {} of A), A-nogit {} (git: {} of A), A-both {} = B's {runs} spawns ({}) + {} of the orchestrator's own work",
        ms(med("A-shm")),
        ms(a_med.saturating_sub(med("A-shm"))),
        ms(med("A-nogit")),
        ms(a_med.saturating_sub(med("A-nogit"))),
        ms(med("A-both")),
        ms(spawn_part),
        ms(med("A-both").saturating_sub(spawn_part))
    );
    for note in &notes {
        println!("  note: {note}");
    }
    spans.sort_unstable();
    println!(
        "A from its log (lock_acquired → deployed, ms clock) over {} sprints: median {} ms, p90 {} ms, max {} ms",
        spans.len(),
        percentile(&spans, 50),
        percentile(&spans, 90),
        spans.last().copied().unwrap_or(0)
    );
    println!(
        "B per step (median): one bare spawn {}, one commit {}; per sprint {runs} spawns + {transitions} commits = {}",
        us(median(&spawns)),
        us(median(&commits)),
        ms(median(&spawns) * runs as u32 + median(&commits) * transitions as u32)
    );
    drop(keep);
    reference_costs(
        rt,
        bin,
        template,
        median(&commits),
        a_med.saturating_sub(b_med),
    );
}

/// Notes what went other than planned in one pipeline pass.
fn check_pipeline(a: &PipelineRun, template: &Template, what: &str, notes: &mut Vec<String>) {
    for p in &a.problems {
        notes.push(format!("{what}: {p}"));
    }
    if a.deployed != a.n {
        notes.push(format!("{what}: deployed {} of {}", a.deployed, a.n));
    }
    let runs = template.runs.len();
    let transitions = template.history.transitions.len();
    if a.runs_per_sprint.keys().any(|&k| k != runs)
        || a.transitions_per_sprint.keys().any(|&k| k != transitions)
    {
        notes.push(format!(
            "{what}: runs per sprint {:?}, transitions per sprint {:?} (count → sprints)",
            a.runs_per_sprint, a.transitions_per_sprint
        ));
    }
    if a.outcomes.keys().any(|o| o != "handoff") {
        notes.push(format!("{what}: run outcomes {:?}", a.outcomes));
    }
}

/// What the orchestrator does per sprint beyond the baseline, each priced alone.
fn reference_costs(
    rt: &tokio::runtime::Runtime,
    bin: &Path,
    template: &Template,
    commit: Duration,
    extra: Duration,
) {
    let runs = template.runs.len() as u32;
    let transitions = template.history.transitions.len() as u32;
    let approvals = template
        .history
        .transitions
        .iter()
        .filter(|t| t.detail.is_human())
        .count() as u32;
    let setup = Setup::new("reference", bin);
    let workdir = setup.dir.path().join(PROJECT);

    // git: what one call costs. The pipeline above makes none: its workdir is not in a
    // repository (`sister::facts::in_git_repository`), so HEAD is not read before a spawn
    // and IMPL_DONE claims are not checked.
    let mut git = Vec::new();
    for _ in 0..REFERENCE_SAMPLES {
        let t = Instant::now();
        let _ = Command::new("git")
            .arg("-C")
            .arg(&workdir)
            .args(["rev-parse", "--verify", "--quiet", "HEAD"])
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null())
            .output();
        git.push(t.elapsed());
    }
    let git = median(&git);

    // The runner against a bare spawn, for this sister: a harang run (no git check), its
    // contract file a new file in a runs folder, as the orchestrator gives it.
    let harang = template
        .runs
        .iter()
        .find(|r| r.actor == Actor::Harang)
        .expect("the template has a harang run");
    let contract: ContractFile =
        serde_json::from_slice(&harang.contract_json).expect("the contract parses");
    let spec = setup.config().agent.spec(Actor::Harang);
    let runs_dir = setup.dir.path().join("hanarang.db.runs");
    let (mut runner, mut bare) = (Vec::new(), Vec::new());
    let mut outcomes = BTreeMap::<String, usize>::new();
    for i in 0..REFERENCE_SAMPLES {
        let request = RunRequest {
            spec: spec.clone(),
            contract: contract.clone(),
            contract_path: runs_dir.join(format!("X{i}.contract.json")),
            workdir: workdir.clone(),
            token_env: "DISCORD_TOKEN".into(),
        };
        let mut time_runner = || {
            let t = Instant::now();
            let report = rt.block_on(hanarang::sister::run(&request, RunControl::unattended()));
            *outcomes.entry(report.outcome.to_string()).or_default() += 1;
            t.elapsed()
        };
        let time_bare = || {
            let t = Instant::now();
            let _ = spawn_bare(bin, harang, &workdir);
            t.elapsed()
        };
        if i % 2 == 0 {
            runner.push(time_runner());
            bare.push(time_bare());
        } else {
            bare.push(time_bare());
            runner.push(time_runner());
        }
    }
    let runner_extra = median(&runner).saturating_sub(median(&bare));

    // A read of the kind the loop makes on every pass (`step`: pending commands, the
    // queue, sprints in stages; `spawn`: the sprint's runs; `finish`: the sprint), and
    // what one statement through a pool costs with and without sqlx's ping of the
    // connection at every acquire (`test_before_acquire`, on in the store's pool).
    let (read, ping_on, ping_off) = rt.block_on(async {
        let store = Store::open(&setup.url()).await.expect("open a database");
        let mut reads = Vec::new();
        for _ in 0..REFERENCE_SAMPLES {
            let t = Instant::now();
            let _ = store.sprints_in_stages().await;
            reads.push(t.elapsed());
        }
        store.close().await;
        let on = open_like_store(&setup.dir.path().join("ping-on.db"), true).await;
        let off = open_like_store(&setup.dir.path().join("ping-off.db"), false).await;
        let (mut with_ping, mut without) = (Vec::new(), Vec::new());
        for i in 0..10 * REFERENCE_SAMPLES {
            for (pool, times) in if i % 2 == 0 {
                [(&on, &mut with_ping), (&off, &mut without)]
            } else {
                [(&off, &mut without), (&on, &mut with_ping)]
            } {
                let t = Instant::now();
                let _: Option<i64> = sqlx::query_scalar("SELECT 1")
                    .fetch_optional(pool)
                    .await
                    .ok()
                    .flatten();
                times.push(t.elapsed());
            }
        }
        on.close().await;
        off.close().await;
        (median(&reads), median(&with_ping), median(&without))
    });

    // How many statements the orchestrator runs per sprint (a child process counts
    // sqlx's statement events; BEGIN and COMMIT are not among them, nor the bench's
    // own approval insert, taken off here).
    let (_, problems, fields) = pipeline_child("count", WALL_SPRINTS);
    let per_sprint = |key: &str| {
        fields
            .get(key)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / WALL_SPRINTS as f64
    };
    let statements = per_sprint("statements") - f64::from(approvals);
    let in_sqlite = Duration::from_secs_f64(per_sprint("in_sqlite_ns") / 1e9);

    // The store's fsynced writes per sprint: a transaction per transition (as B; a move
    // into a stage records its run in it), and the approval command.
    let extra_writes = approvals;
    println!(
        "A does per sprint, beyond B: {extra_writes} more fsynced write ({approvals} approval command; {} in all vs {transitions}; each run's start is in the commit of the transition that calls for it), no git process (the workdir is not a repository), the runner's own work on each of the {runs} spawns (contract file, pipes, validation), and {statements:.0} SQL statements (B: {transitions}) taking {} in SQLite{}",
        transitions + extra_writes,
        ms(in_sqlite),
        if problems.is_empty() {
            String::new()
        } else {
            format!(" (count child: {problems:?})")
        }
    );
    println!(
        "reference costs, median: git rev-parse in the workdir {}; one durable commit {} (from B); runner vs bare spawn of this sister {} vs {} (+{}, outcomes {:?}); one read (sprints_in_stages) {}; `SELECT 1` through a pool {} with sqlx's ping at acquire, {} without",
        us(git),
        us(commit),
        us(median(&runner)),
        us(median(&bare)),
        us(runner_extra),
        outcomes,
        us(read),
        us(ping_on),
        us(ping_off)
    );
    println!(
        "the orchestrator's statements per sprint, most time in SQLite first (autocommit writes include their fsync):"
    );
    for line in fields
        .get("by_sql")
        .map(String::as_str)
        .unwrap_or("")
        .lines()
        .take(12)
    {
        let mut parts = line.splitn(3, ' ');
        let (Some(n), Some(ns), Some(text)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let n: f64 = n.parse().unwrap_or(0.0);
        let ns: f64 = ns.parse().unwrap_or(0.0);
        let text: String = text.chars().take(110).collect();
        println!(
            "  {:>5.1} × {:>7.0} µs = {:>6.0} µs  {text}",
            n / WALL_SPRINTS as f64,
            ns / n.max(1.0) / 1e3,
            ns / WALL_SPRINTS as f64 / 1e3
        );
    }
    let accounted = commit * extra_writes + runner_extra * runs;
    let rest = extra.saturating_sub(accounted);
    println!(
        "accounted: {extra_writes} × commit + {runs} × runner extra = {} of the {} extra per sprint; the rest, {}, is {:.0} µs for each of the {:.0} extra statements (a `SELECT 1` round trip through the pool is {})",
        ms(accounted),
        ms(extra),
        ms(rest),
        rest.as_secs_f64() * 1e6 / (statements - f64::from(transitions)).max(1.0),
        statements - f64::from(transitions),
        us(ping_on)
    );
}

// --- 2. peak RSS of serve ------------------------------------------------------------------

/// Runs `serve` while `SERVE_SPRINTS` sprints pass through; returns its folder (the
/// database of part 3's "deployed by serve" row).
fn serve(rt: &tokio::runtime::Runtime, bin: &Path) -> Option<Setup> {
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
    let mut child = Command::new(bin)
        .arg("--config")
        .arg(&setup.config_path)
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
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
                    .submit_command(&sprint.id, CommandKind::Approve, None, "bench", at)
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

// --- 3. sprint status ----------------------------------------------------------------------

/// A database for the status timings.
struct StatusDb {
    label: String,
    setup: Setup,
}

fn status(
    rt: &tokio::runtime::Runtime,
    bin: &Path,
    template: &Template,
    serve_dir: Option<&Setup>,
) {
    println!(
        "3. `hanarang sprint status` as a whole process, median of {STATUS_SAMPLES} (interleaved), target < {} ms for --json with {STATUS_SPRINTS} sprints",
        STATUS_TARGET.as_millis()
    );
    // Built where fsync is free when there is such a place, then copied beside a config:
    // the timings read a database on the same file system as the other parts.
    let build_root = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let mut dbs = Vec::new();
    let empty = Setup::new("status-empty", bin);
    dbs.push(StatusDb {
        label: "empty (process floor)".into(),
        setup: empty,
    });
    let built = Instant::now();
    let queued = rt.block_on(build_db(bin, &build_root, "status-queued", None));
    println!(
        "built {STATUS_SPRINTS} queued sprints (create_sprint) in {:.1} s",
        built.elapsed().as_secs_f64()
    );
    dbs.push(StatusDb {
        label: format!("{STATUS_SPRINTS} queued (create_sprint)"),
        setup: queued,
    });
    let built = Instant::now();
    let history = &template.history;
    let with_history = rt.block_on(build_db(bin, &build_root, "status-history", Some(history)));
    println!(
        "built {STATUS_SPRINTS} sprints with a deployed sprint's history ({} runs, {} transitions, {} approval each, replayed through Store::start_run/commit) in {:.1} s",
        history.runs.len(),
        history.transitions.len(),
        history
            .transitions
            .iter()
            .filter(|t| t.detail.is_human())
            .count(),
        built.elapsed().as_secs_f64()
    );
    dbs.push(StatusDb {
        label: format!("{STATUS_SPRINTS} with history (deployed)"),
        setup: with_history,
    });

    // What each database holds, and what the commands print.
    let mut rows = Vec::new();
    for db in &dbs {
        let (sprints, runs, db_bytes) = rt.block_on(db_size(&db.setup));
        let json = run_status(bin, &db.setup.config_path, true, true);
        let count = serde_json::from_slice::<serde_json::Value>(&json.1)
            .ok()
            .and_then(|v| v.as_array().map(Vec::len));
        rows.push((sprints, runs, db_bytes, json.1.len(), count));
    }
    let serve_db = serve_dir.map(|s| {
        let (sprints, runs, db_bytes) = rt.block_on(db_size(s));
        let json = run_status(bin, &s.config_path, true, true);
        let count = serde_json::from_slice::<serde_json::Value>(&json.1)
            .ok()
            .and_then(|v| v.as_array().map(Vec::len));
        (sprints, runs, db_bytes, json.1.len(), count)
    });

    // Interleaved: every database and both forms once per round.
    let serve_label = format!("{SERVE_SPRINTS} deployed by serve (part 2)");
    let mut configs: Vec<(&str, &Path)> = dbs
        .iter()
        .map(|d| (d.label.as_str(), d.setup.config_path.as_path()))
        .collect();
    if let Some(s) = serve_dir {
        configs.push((serve_label.as_str(), s.config_path.as_path()));
    }
    let mut json_times = vec![Vec::new(); configs.len()];
    let mut text_times = vec![Vec::new(); configs.len()];
    let mut floor = Vec::new();
    let mut failures = Vec::new();
    for _ in 0..STATUS_SAMPLES {
        let t = Instant::now();
        let _ = Command::new(bin)
            .arg("--version")
            .stdout(Stdio::null())
            .status();
        floor.push(t.elapsed());
        for (i, (label, config)) in configs.iter().enumerate() {
            for (as_json, times) in [(true, &mut json_times[i]), (false, &mut text_times[i])] {
                let t = Instant::now();
                let (ok, _) = run_status(bin, config, as_json, false);
                times.push(t.elapsed());
                if !ok {
                    failures.push(format!("{label} (json: {as_json}) failed"));
                }
            }
        }
    }
    println!(
        "{:<36} {:>7} {:>7} {:>9} {:>10} {:>20} {:>20}  target",
        "database",
        "sprints",
        "runs",
        "db size",
        "json out",
        "--json med (min–max)",
        "text med (min–max)"
    );
    let mut sizes: Vec<_> = rows.into_iter().map(Some).collect();
    sizes.push(serve_db);
    for (i, (label, _)) in configs.iter().enumerate() {
        let (sprints, runs, db_bytes, json_bytes, count) = sizes
            .get(i)
            .copied()
            .flatten()
            .unwrap_or((0, 0, 0, 0, None));
        let json_med = median(&json_times[i]);
        let verdict = if sprints == STATUS_SPRINTS as i64 {
            if json_med < STATUS_TARGET {
                "PASS"
            } else {
                "FAIL"
            }
        } else {
            ""
        };
        let count_note = match count {
            Some(c) if c as i64 == sprints => String::new(),
            other => format!(" (printed {other:?} sprints)"),
        };
        println!(
            "{:<36} {:>7} {:>7} {:>9} {:>10} {:>20} {:>20}  {verdict}{count_note}",
            label,
            sprints,
            runs,
            mib(db_bytes),
            mib(json_bytes as u64),
            spread(&json_times[i]),
            spread(&text_times[i]),
        );
    }
    println!(
        "`hanarang --version` (exec + dynamic loading, no runtime, no database): {}",
        spread(&floor)
    );
    for f in failures.iter().take(5) {
        println!("  note: {f}");
    }

    // Where the time of the status command goes, in this process: what report::status
    // does, step by step, on the database with history.
    for (db, with_index) in [(dbs.get(1), false), (dbs.get(2), true)] {
        let Some(db) = db else { continue };
        let steps = rt.block_on(status_steps(&db.setup, with_index));
        println!(
            "in process, median of {}, {}: Store::open {}; sprints() {} (sqlx fetching the raw rows alone: {}); spend_by_sprint() {}{}; JSON: to_value {}, pretty text {} (compact: {})",
            2 * STATUS_SAMPLES,
            db.label,
            us(steps.open),
            us(steps.sprints),
            us(steps.raw_rows),
            us(steps.spend),
            steps
                .spend_indexed
                .map(|d| format!(
                    " (with a covering index on runs (sprint_id, input_tokens, output_tokens, cost_usd): {})",
                    us(d)
                ))
                .unwrap_or_default(),
            us(steps.to_value),
            us(steps.pretty),
            us(steps.compact)
        );
    }
}

/// A database of `STATUS_SPRINTS` sprints (queued, or each with `history`), filled under
/// `root`, then copied into a fresh setup.
async fn build_db(bin: &Path, root: &Path, label: &str, history: Option<&History>) -> Setup {
    let scratch = TempDir::new_in(root, label);
    let url = format!("sqlite://{}", scratch.path().join("hanarang.db").display());
    let setup = Setup::new(label, bin);
    let config = setup.config();
    let store = Store::open(&url).await.expect("open the scratch database");
    match history {
        None => {
            create_sprints(&store, &config, STATUS_SPRINTS).await;
        }
        Some(history) => replay(&store, &config, history, STATUS_SPRINTS).await,
    }
    store.close().await;
    for suffix in ["", "-wal"] {
        let from = scratch.path().join(format!("hanarang.db{suffix}"));
        if from.exists() {
            let to = PathBuf::from(format!("{}{suffix}", setup.db.display()));
            std::fs::copy(&from, &to).expect("copy the database");
        }
    }
    setup
}

/// Sprints with the history of the template sprint: its runs, transitions and approval,
/// written through the store's own calls (`start_run`, `submit_command`, `commit`).
async fn replay(store: &Store, config: &Config, history: &History, n: usize) {
    let policy = Policy::from(&config.pipeline);
    for i in 0..n {
        let mut sprint: Sprint = store
            .create_sprint(
                PROJECT,
                &goal(i),
                None,
                &config.pipeline.branch_template,
                now_ms(),
            )
            .await
            .expect("create a sprint");
        let mut run_ids: HashMap<String, String> = HashMap::new();
        let mut number = 0;
        for t in &history.transitions {
            let mut event = t.detail.clone();
            if let Event::Reported {
                sprint_id: Some(claimed),
                ..
            } = &mut event
            {
                claimed.clone_from(&sprint.id);
            }
            let now = now_ms();
            let end = match t
                .run_id
                .as_ref()
                .and_then(|id| history.runs.iter().find(|r| &r.run_id == id))
            {
                Some(r) => {
                    let parent = r
                        .parent_run_id
                        .as_ref()
                        .and_then(|p| run_ids.get(p))
                        .cloned();
                    number += 1;
                    let new_id = store
                        .start_run(NewRun {
                            sprint_id: &sprint.id,
                            number,
                            actor: r.actor,
                            round: r.round,
                            attempt: r.attempt,
                            parent_run_id: parent.as_deref(),
                            handoff: &r.handoff,
                            synthesized: r.synthesized,
                            focus: r.focus.as_deref(),
                            git_head: r.git_head.as_deref(),
                            started_at: now,
                        })
                        .await
                        .expect("start a run");
                    run_ids.insert(r.run_id.clone(), new_id.clone());
                    Some(RunEnd {
                        run_id: new_id,
                        outcome: r.outcome.unwrap_or(hanarang::sister::RunOutcome::Handoff),
                        detail: r.detail.clone().unwrap_or_default(),
                        rejection: r.rejection.clone(),
                        exit_code: r.exit_code,
                        signal: r.signal,
                        duration_ms: r.duration_ms.unwrap_or(0),
                        stdout_tail: r.stdout_tail.clone().unwrap_or_default(),
                        stderr_tail: r.stderr_tail.clone().unwrap_or_default(),
                        message: r.message.clone(),
                        input_tokens: r.input_tokens,
                        output_tokens: r.output_tokens,
                        cost_usd: r.cost_usd,
                        ended_at: now,
                    })
                }
                None => None,
            };
            let command = match &event {
                Event::Approve { by } => Some(
                    store
                        .submit_command(&sprint.id, CommandKind::Approve, None, by, now)
                        .await
                        .expect("submit a command"),
                ),
                _ => None,
            };
            let facts = Facts {
                sprint_id: &sprint.id,
                sister_running: false,
            };
            let transition =
                apply(sprint.position(), &event, facts, &policy).expect("the template replays");
            let mut after = sprint.clone();
            after.state = transition.to.state;
            after.round = transition.to.round;
            after.attempt = transition.to.attempt;
            after.resume = transition.to.resume;
            after.next_run_at = None;
            let result = format!(
                "{}: {} → {}",
                sprint.id, transition.from.state, transition.to.state
            );
            store
                .commit(Commit {
                    before: &sprint,
                    after: &after,
                    transition: &transition,
                    event: &event,
                    run: end.as_ref(),
                    command: command.map(|id| (id, result.as_str())),
                    at: now,
                    start: None,
                })
                .await
                .expect("commit a replayed transition");
            after.last_seq = sprint.last_seq + 1;
            sprint = after;
        }
    }
}

/// Sprints, runs, and the database's size on disk.
async fn db_size(setup: &Setup) -> (i64, i64, u64) {
    let store = Store::open(&setup.url()).await.expect("open a database");
    let sprints = store.sprints().await.map_or(0, |s| s.len() as i64);
    let run_count = count_runs(&setup.db).await;
    store.close().await;
    let bytes = ["", "-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", setup.db.display())).ok())
        .map(|m| m.len())
        .sum();
    (sprints, run_count, bytes)
}

/// How many runs a database holds (read only).
async fn count_runs(db: &Path) -> i64 {
    let Ok(options) = SqliteConnectOptions::from_str(&format!("sqlite://{}", db.display())) else {
        return 0;
    };
    let Ok(pool) = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options.read_only(true))
        .await
    else {
        return 0;
    };
    let n = sqlx::query_scalar("SELECT COUNT(*) FROM runs")
        .fetch_one(&pool)
        .await
        .unwrap_or(0);
    pool.close().await;
    n
}

/// `hanarang --config C sprint status [--json]`: whether it succeeded, and its stdout
/// when `capture` (else stdout goes to /dev/null).
fn run_status(bin: &Path, config: &Path, as_json: bool, capture: bool) -> (bool, Vec<u8>) {
    let mut cmd = Command::new(bin);
    cmd.arg("--config")
        .arg(config)
        .args(["sprint", "status"])
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    if as_json {
        cmd.arg("--json");
    }
    if capture {
        cmd.stdout(Stdio::piped());
        match cmd.output() {
            Ok(o) => (o.status.success(), o.stdout),
            Err(_) => (false, Vec::new()),
        }
    } else {
        cmd.stdout(Stdio::null());
        (cmd.status().is_ok_and(|s| s.success()), Vec::new())
    }
}

/// `report::status --json` step by step, in this process.
#[derive(Default)]
struct StatusSteps {
    open: Duration,
    sprints: Duration,
    /// `SELECT * FROM sprints ORDER BY number` through a pool, rows not decoded.
    raw_rows: Duration,
    spend: Duration,
    /// `spend_by_sprint` on a copy of the database with a covering index.
    spend_indexed: Option<Duration>,
    to_value: Duration,
    pretty: Duration,
    compact: Duration,
}

/// What `report::status` does for `--json`, step by step: open, the two queries, the
/// JSON value and its text. With `with_index`, `spend_by_sprint` is also timed on a copy
/// of the database that has a covering index for it.
async fn status_steps(setup: &Setup, with_index: bool) -> StatusSteps {
    let mut t_open = Vec::new();
    let mut t_sprints = Vec::new();
    let mut t_raw = Vec::new();
    let mut t_spend = Vec::new();
    let mut t_indexed = Vec::new();
    let mut t_value = Vec::new();
    let mut t_pretty = Vec::new();
    let mut t_compact = Vec::new();
    let indexed = if with_index {
        let copy = Setup::new("status-indexed", &hanarang_binary());
        for suffix in ["", "-wal"] {
            let from = PathBuf::from(format!("{}{suffix}", setup.db.display()));
            if from.exists() {
                let to = PathBuf::from(format!("{}{suffix}", copy.db.display()));
                std::fs::copy(&from, &to).expect("copy the database");
            }
        }
        let pool = open_like_store(&copy.db, true).await;
        sqlx::query(
            "CREATE INDEX bench_runs_spend ON runs (sprint_id, input_tokens, output_tokens, cost_usd)",
        )
        .execute(&pool)
        .await
        .expect("create the index");
        pool.close().await;
        Some(copy)
    } else {
        None
    };
    for _ in 0..2 * STATUS_SAMPLES {
        let t = Instant::now();
        let store = Store::open(&setup.url()).await.expect("open a database");
        t_open.push(t.elapsed());
        let t = Instant::now();
        let all = store.sprints().await.unwrap_or_default();
        t_sprints.push(t.elapsed());
        let t = Instant::now();
        let by_sprint = store.spend_by_sprint().await.unwrap_or_default();
        t_spend.push(t.elapsed());
        let t = Instant::now();
        let value = serde_json::Value::Array(
            all.iter()
                .map(|s| {
                    let mut v = serde_json::to_value(s).unwrap_or_default();
                    if let Some(obj) = v.as_object_mut() {
                        let usage = by_sprint.get(&s.id).cloned().unwrap_or_default();
                        obj.insert("usage".into(), serde_json::json!(usage));
                    }
                    v
                })
                .collect(),
        );
        t_value.push(t.elapsed());
        let t = Instant::now();
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        t_pretty.push(t.elapsed());
        drop(text);
        let t = Instant::now();
        let text = serde_json::to_string(&value).unwrap_or_default();
        t_compact.push(t.elapsed());
        drop(text);
        store.close().await;

        // As fresh as the store's connection after its migration check: schema read,
        // the table's pages not yet in this connection's cache.
        let pool = open_like_store(&setup.db, true).await;
        let _ = sqlx::query("SELECT version FROM _sqlx_migrations")
            .fetch_all(&pool)
            .await;
        let t = Instant::now();
        let rows = sqlx::query("SELECT * FROM sprints ORDER BY number")
            .fetch_all(&pool)
            .await
            .unwrap_or_default();
        t_raw.push(t.elapsed());
        drop(rows);
        pool.close().await;

        if let Some(copy) = &indexed {
            let store = Store::open(&copy.url()).await.expect("open the copy");
            let t = Instant::now();
            let _ = store.spend_by_sprint().await;
            t_indexed.push(t.elapsed());
            store.close().await;
        }
    }
    StatusSteps {
        open: median(&t_open),
        sprints: median(&t_sprints),
        raw_rows: median(&t_raw),
        spend: median(&t_spend),
        spend_indexed: indexed.is_some().then(|| median(&t_indexed)),
        to_value: median(&t_value),
        pretty: median(&t_pretty),
        compact: median(&t_compact),
    }
}

// --- numbers ---------------------------------------------------------------------------------

const MIB: f64 = 1024.0 * 1024.0;

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}

/// The p-th percentile of sorted values (nearest rank).
fn percentile(sorted: &[i64], p: usize) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn spread(samples: &[Duration]) -> String {
    let min = samples.iter().min().copied().unwrap_or_default();
    let max = samples.iter().max().copied().unwrap_or_default();
    format!(
        "{:.1} ({:.1}–{:.1}) ms",
        median(samples).as_secs_f64() * 1e3,
        min.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    )
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn loadavg_1() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}
