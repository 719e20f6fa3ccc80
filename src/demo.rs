//! `hanarang demo`: a whole sprint on a fresh machine, with no config and no token. The
//! sisters are this same binary (`hanarang simulate-sister`), answering as a planner, an
//! implementer, two reviewers reviewing at once (a static review that asks for one round
//! of changes, a runtime review that approves), and a deployer would. The project has a
//! recipe and the sisters honour it: the plan is written in `plan_dir`
//! with a checklist, the reviewers report on every item, and the check
//! (`hanarang simulate-check`) passes.

use crate::{errln, outln};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::config::{Config, Dur, ProjectConfig};
use crate::domain::{Actor, Stage};

pub const PROJECT: &str = "demo";

/// A config that runs the simulated sisters in `dir`.
pub fn config(dir: &Path) -> std::io::Result<Config> {
    let workdir = dir.join("project");
    std::fs::create_dir_all(&workdir)?;
    let exe = std::env::current_exe()?;
    let mut config = Config::default();
    config.database.url = format!("sqlite://{}", dir.join("demo.db").display()).into();
    config.agent.program = exe.display().to_string();
    config.agent.args = vec!["simulate-sister".into()];
    config.agent.kill_grace = Dur(Duration::from_secs(2));
    config.pipeline.backoff.initial = Dur(Duration::from_millis(200));
    config.pipeline.backoff.max = Dur(Duration::from_secs(1));
    std::fs::write(
        workdir.join("AGENTS.md"),
        "Keep every page accessible: headings in order, text with enough contrast.\n",
    )?;
    let instructions = workdir.join("AGENTS.md");
    let mut project = ProjectConfig::at(workdir);
    project.check = vec![exe.display().to_string(), "simulate-check".into()];
    project.instructions = Some(instructions);
    project.deploy =
        Some("Copy dist/demo to the demo host, then open /health: it must say ok.".into());
    config.projects.insert(PROJECT.into(), project);
    // The design's parallel reviewers.
    for reviewer in ["static", "runtime"] {
        (config.agent.sister_mut(Stage::Reviewing.actor()).reviewers)
            .insert(reviewer.into(), crate::config::SisterConfig::default());
    }
    Ok(config)
}

/// The simulated sister: reads its prompt, takes a moment (`SIMULATE_DELAY_MS`, default
/// 300), answers for its role.
pub fn simulate_sister() -> i32 {
    let mut prompt = String::new();
    let _ = std::io::stdin().read_to_string(&mut prompt);
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let role = var("HANARANG_ROLE");
    let reviewer = var("HANARANG_REVIEWER");
    let sprint = var("HANARANG_SPRINT_ID");
    let round: u32 = var("HANARANG_ROUND").parse().unwrap_or(1);
    let contract: serde_json::Value = std::fs::read(var("HANARANG_CONTRACT_FILE"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    let plan_dir = contract["planDir"].as_str().unwrap_or("plans").to_string();
    // Every contract item reported, as the review rule asks; `failing` is the one that
    // did not pass.
    let results = |failing: Option<(&str, &str)>| -> Vec<serde_json::Value> {
        let ids = contract["checklist"].as_array().into_iter().flatten();
        ids.filter_map(|item| item["id"].as_str())
            .map(|id| match failing {
                Some((bad, note)) if bad == id => json!({"id": id, "passed": false, "note": note}),
                _ => json!({"id": id, "passed": true}),
            })
            .collect()
    };
    errln!("simulated {role}: working on {sprint} (round {round})");
    // A moment of "work" so the demo reads like one; benchmarks set it to 0.
    let delay: u64 = var("SIMULATE_DELAY_MS").parse().unwrap_or(300);
    std::thread::sleep(Duration::from_millis(delay));
    let handoff = |progress: &str, next: &str| {
        json!({
            "goal": format!("Demo sprint {sprint}"),
            "constraints": ["simulated sisters: nothing is really built or deployed"],
            "progress": [progress],
            "keyDecisions": [],
            "criticalContext": [],
            "nextSteps": [next],
        })
    };
    let message = match role.parse::<Actor>().map(Actor::stage) {
        Ok(Stage::Planning) => {
            if let Err(e) = write_plan(Path::new(&plan_dir)) {
                errln!("simulated {role}: cannot write the plan in {plan_dir}: {e}");
                return 1;
            }
            json!({
            "actor": role,
            "verdict": "PLAN_READY",
            "payload": {
                "planDir": plan_dir,
                "sprintId": sprint,
                "contractId": format!("C-{sprint}"),
                "checklist": [
                    {"id": "page", "text": "the greeting page renders at /hello"},
                    {"id": "tests", "text": "a test covers the greeting"},
                    {"id": "docs", "text": "README says how to reach the page"},
                ],
            },
            "handoff": handoff("plan written: one page, one test", "implement the page"),
            "usage": {"inputTokens": 1200, "outputTokens": 300, "costUsd": 0.01},
            })
        }
        Ok(Stage::Implementing) => json!({
            "actor": role,
            "verdict": "IMPL_DONE",
            "payload": {"branch": format!("feature/{}", sprint.to_lowercase()), "commits": [], "workdir": ".", "selfTestReport": {"passed": 3}},
            "handoff": handoff(&format!("round {round} implemented"), "review the change"),
            "usage": {"inputTokens": 5000, "outputTokens": 2000, "costUsd": 0.05},
        }),
        Ok(Stage::Reviewing) if reviewer == "runtime" => json!({
            "actor": role,
            "verdict": "APPROVE",
            "payload": {"checklistResults": with_own(results(None), json!({"id": "healthcheck", "passed": true})), "issues": [], "artifactPath": format!("runtime-review-{round}.md")},
        }),
        Ok(Stage::Reviewing) if round < 2 => json!({
            "actor": role,
            "verdict": "REQUEST_CHANGES",
            "payload": {
                "checklistResults": results(Some(("docs", "README not updated"))),
                "issues": [{"severity": "minor", "file": "README.md", "message": "document the new page"}],
                "artifactPath": "review-1.md"
            },
        }),
        Ok(Stage::Reviewing) => json!({
            "actor": role,
            "verdict": "APPROVE",
            "payload": {"checklistResults": results(None), "issues": [], "artifactPath": "review-2.md"},
        }),
        Ok(Stage::Deploying) => json!({
            "actor": role,
            "verdict": "DEPLOY_DONE",
            "payload": {"deployArtifactPath": "dist/demo", "projectType": "demo", "verificationResults": {"healthcheck": "ok"}},
        }),
        Err(_) => {
            errln!("simulate-sister: unknown role {role:?}");
            return 2;
        }
    };
    outln!("{message}");
    0
}

/// A reviewer's results: the contract's items and one of its own.
fn with_own(mut results: Vec<serde_json::Value>, own: serde_json::Value) -> Vec<serde_json::Value> {
    results.push(own);
    results
}

/// The simulated planner's plan, in the plan folder it was given.
fn write_plan(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("plan.md"),
        "# Plan\n\n1. A login page with a labelled form.\n2. A test for the empty form.\n3. A README line.\n",
    )
}

/// The demo project's check (`hanarang simulate-check`): its tests pass.
pub fn simulate_check() -> i32 {
    outln!("running 3 tests\ntest result: ok. 3 passed; 0 failed");
    0
}
