//! Whole sprints through an in-process orchestrator, each approved as it reaches `done`;
//! and the warm-up, whose first sprint is the template of the baseline and of part 3's
//! history.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use hanarang::clock::now_ms;
use hanarang::handoff::message::Actor;
use hanarang::orchestrator::Orchestrator;
use hanarang::pipeline::State;
use hanarang::sister::{ContractFile, render_prompt};
use hanarang::store::{CommandKind, Run, Store, TransitionRecord};
use tokio::sync::{broadcast, oneshot};

use crate::setup::{Setup, create_sprints};
use crate::sql_count;
use crate::support::TempDir;

/// One pass of N sprints through an in-process orchestrator.
pub struct PipelineRun {
    pub setup: Setup,
    pub n: usize,
    pub deployed: usize,
    pub elapsed: Duration,
    /// Per sprint: its first transition to its last (lock_acquired → deployed), from the log.
    pub spans_ms: Vec<i64>,
    pub runs_per_sprint: BTreeMap<usize, usize>,
    pub transitions_per_sprint: BTreeMap<usize, usize>,
    pub outcomes: BTreeMap<String, usize>,
    pub problems: Vec<String>,
    /// SQL statements run while timed, and their time in SQLite (counted only in the
    /// `count` child).
    pub statements: (u64, Duration),
    /// The same, by statement text (count, ns, text), most time first.
    pub by_sql: Vec<(u64, u64, String)>,
}

/// Queues `n` sprints, starts an orchestrator on them and approves each as it reaches
/// `done` (a command in the database plus a wake-up, as `run --auto-approve` does). Timed
/// from the orchestrator's first pass to the last sprint deployed.
pub async fn pipeline_once(
    bin: &Path,
    n: usize,
    label: &str,
    db_root: Option<&Path>,
) -> PipelineRun {
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
            Ok(Ok(committed)) => match committed.record.to {
                State::Done => {
                    store
                        .submit_command(
                            &committed.record.sprint_id,
                            CommandKind::Approve,
                            None,
                            "bench",
                            None,
                            now_ms(),
                        )
                        .await
                        .expect("submit the approval");
                    handle.wake();
                }
                State::Deployed => deployed += 1,
                State::Escalated | State::Aborted => {
                    let record = &committed.record;
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
pub struct BareRun {
    pub actor: Actor,
    pub round: u32,
    pub attempt: u32,
    pub run_id: String,
    pub sprint_id: String,
    pub contract_file: String,
    /// The very prompt the runner gave this run.
    pub prompt: String,
    /// What the sister answered (checked on every bare run).
    pub verdict: String,
    /// The contract as JSON (for the contract-write reference).
    pub contract_json: Vec<u8>,
}

/// A step of one sprint, in the order the orchestrator took them.
pub enum Step {
    /// Spawn the sister of this run (an index into `Template::runs`).
    Spawn(usize),
    /// Commit this transition.
    Commit { event: String, event_json: String },
}

/// The first sprint of the warm-up, as the store recorded it.
pub struct History {
    pub runs: Vec<Run>,
    pub transitions: Vec<TransitionRecord>,
}

pub struct Template {
    pub runs: Vec<BareRun>,
    pub steps: Vec<Step>,
    pub history: History,
    /// The warm-up's folder: the contract files the baseline names stay there.
    _warm_up: (Setup, TempDir),
}

pub async fn warm_up(bin: &Path) -> Template {
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
            prompt: render_prompt(&contract, &contract_file, None),
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

pub fn verdict(message: Option<&serde_json::Value>) -> String {
    message
        .and_then(|m| m.get("verdict"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("?")
        .to_string()
}
