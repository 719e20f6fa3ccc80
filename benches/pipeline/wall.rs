//! Part 1: per-sprint wall time of the in-process pipeline against the baseline, its
//! variants without fsync or git, and the reference costs that account for the difference.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hanarang::handoff::message::Actor;
use hanarang::sister::{ContractFile, RunControl, RunRequest};
use hanarang::store::Store;
use hanarang::store::testing::Floor;

use crate::baseline::{baseline_once, spawn_bare};
use crate::child::pipeline_child;
use crate::common::{median, us};
use crate::numbers::{loadavg_1, ms, percentile};
use crate::setup::{PROJECT, Setup};
use crate::sprints::{PipelineRun, Template, pipeline_once};

/// Sprints per repetition, and repetitions of each side.
pub const WALL_SPRINTS: usize = 40;
const WALL_REPS: usize = 11;
const WALL_RATIO_TARGET: f64 = 1.25;
/// Samples for the reference costs printed under part 1.
const REFERENCE_SAMPLES: usize = 30;

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

pub fn wall(rt: &tokio::runtime::Runtime, bin: &Path, template: &Template) {
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
    // repository (`git::facts::in_git_repository`), so HEAD is not read before a spawn
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
            repo: hanarang::git::Repo::new(&workdir, &Default::default()),
            token_env: "DISCORD_TOKEN".into(),
            role_text: None,
            check: None,
            base_check: None,
            fence: None,
            containers: None,
            git_identity: None,
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
    // what one statement through a pool costs with and without the pool's ping of the
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
        let open = |name: &str, ping| {
            let path = setup.dir.path().join(name);
            async move {
                Floor::open(&path, ping)
                    .await
                    .expect("open a floor database")
            }
        };
        let on = open("ping-on.db", true).await;
        let off = open("ping-off.db", false).await;
        let (mut with_ping, mut without) = (Vec::new(), Vec::new());
        for i in 0..10 * REFERENCE_SAMPLES {
            for (pool, times) in if i % 2 == 0 {
                [(&on, &mut with_ping), (&off, &mut without)]
            } else {
                [(&off, &mut without), (&on, &mut with_ping)]
            } {
                let t = Instant::now();
                let _ = pool.select_one().await;
                times.push(t.elapsed());
            }
        }
        on.close().await;
        off.close().await;
        (median(&reads), median(&with_ping), median(&without))
    });

    // How many statements the orchestrator runs per sprint (a child process counts
    // the store's statement events; BEGIN and COMMIT are not among them, nor the bench's
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
        "reference costs, median: git rev-parse in the workdir {}; one durable commit {} (from B); runner vs bare spawn of this sister {} vs {} (+{}, outcomes {:?}); one read (sprints_in_stages) {}; `SELECT 1` through a pool {} with the pool's ping at acquire, {} without",
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
