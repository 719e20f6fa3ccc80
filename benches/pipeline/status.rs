//! Part 3: `hanarang sprint status` as a whole process on databases of many sprints, and
//! its steps timed in this process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hanarang::clock::now_ms;
use hanarang::config::Config;
use hanarang::pipeline::{Event, Facts, Policy, apply};
use hanarang::store::testing::{Floor, count_runs};
use hanarang::store::{CommandKind, Commit, NewRun, RunEnd, Sprint, Store};

use crate::common::{median, mib, us};
use crate::numbers::spread;
use crate::serve::SERVE_SPRINTS;
use crate::setup::{PROJECT, Setup, create_sprints, goal};
use crate::sprints::{History, Template};
use crate::support::TempDir;

/// Part 3.
const STATUS_SPRINTS: usize = 10_000;
const STATUS_SAMPLES: usize = 10;
/// Issue 31's target: the text table with 10,000 sprints, what a person reads.
const STATUS_TARGET: Duration = Duration::from_millis(100);

/// A database for the status timings.
struct StatusDb {
    label: String,
    setup: Setup,
}

pub fn status(
    rt: &tokio::runtime::Runtime,
    bin: &Path,
    template: &Template,
    serve_dir: Option<&Setup>,
) {
    println!(
        "3. `hanarang sprint status` as a whole process, median of {STATUS_SAMPLES} (interleaved), target < {} ms for the text with {STATUS_SPRINTS} sprints",
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
        let verdict = if sprints == STATUS_SPRINTS as i64 {
            if median(&text_times[i]) < STATUS_TARGET {
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
    for db in dbs.iter().skip(1) {
        let steps = rt.block_on(status_steps(&db.setup));
        println!(
            "in process, median of {}, {}: Store::open {}; sprints() {} (the raw rows fetched alone: {}); spend_by_sprint() {}; JSON: to_value {}, pretty text {} (compact: {})",
            2 * STATUS_SAMPLES,
            db.label,
            us(steps.open),
            us(steps.sprints),
            us(steps.raw_rows),
            us(steps.spend),
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
                "cli:bench@bench",
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
                        .start_run(
                            NewRun {
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
                                reviewer: None,
                                resumes: None,
                                notes_upto: None,
                            },
                            0,
                        )
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
                        session_id: None,
                        check: None,
                    })
                }
                None => None,
            };
            let command = match &event {
                Event::Approve { by } => Some(
                    store
                        .submit_command(&sprint.id, CommandKind::Approve, None, by, None, now)
                        .await
                        .expect("submit a command"),
                ),
                _ => None,
            };
            let facts = Facts::of(&sprint.id, false);
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
    let run_count = count_runs(&store).await.unwrap_or(0);
    store.close().await;
    let bytes = ["", "-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", setup.db.display())).ok())
        .map(|m| m.len())
        .sum();
    (sprints, run_count, bytes)
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
    to_value: Duration,
    pretty: Duration,
    compact: Duration,
}

/// What `report::status` does for `--json`, step by step: open, the two queries, the
/// JSON value and its text.
async fn status_steps(setup: &Setup) -> StatusSteps {
    let mut t_open = Vec::new();
    let mut t_sprints = Vec::new();
    let mut t_raw = Vec::new();
    let mut t_spend = Vec::new();
    let mut t_value = Vec::new();
    let mut t_pretty = Vec::new();
    let mut t_compact = Vec::new();
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
        let floor = Floor::open(&setup.db, true)
            .await
            .expect("open the database bare");
        let _ = floor.read_schema().await;
        let t = Instant::now();
        let _ = floor.fetch_sprint_rows().await;
        t_raw.push(t.elapsed());
        floor.close().await;
    }
    StatusSteps {
        open: median(&t_open),
        sprints: median(&t_sprints),
        raw_rows: median(&t_raw),
        spend: median(&t_spend),
        to_value: median(&t_value),
        pretty: median(&t_pretty),
        compact: median(&t_compact),
    }
}
