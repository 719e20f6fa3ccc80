//! `hanarang demo`: a whole sprint on a fresh machine, with no config and no token. The
//! sisters are this same binary (`hanarang simulate-sister`), answering as a planner, an
//! implementer, two reviewers reviewing at once (a static review that asks for one round
//! of changes, a runtime review that approves), and a deployer would.

use crate::{errln, outln};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::config::{Config, Dur, ProjectConfig};

pub const PROJECT: &str = "demo";

/// A config that runs the simulated sisters in `dir`.
pub fn config(dir: &Path) -> std::io::Result<Config> {
    let workdir = dir.join("project");
    std::fs::create_dir_all(&workdir)?;
    let exe = std::env::current_exe()?;
    let mut config = Config::default();
    config.database.url = format!("sqlite://{}", dir.join("demo.db").display());
    config.agent.program = exe.display().to_string();
    config.agent.args = vec!["simulate-sister".into()];
    config.agent.kill_grace = Dur(Duration::from_secs(2));
    config.pipeline.backoff.initial = Dur(Duration::from_millis(200));
    config.pipeline.backoff.max = Dur(Duration::from_secs(1));
    config
        .projects
        .insert(PROJECT.into(), ProjectConfig::at(workdir));
    // The design's parallel reviewers (`SPEC.md` §10).
    for reviewer in ["static", "runtime"] {
        config
            .agent
            .darang
            .reviewers
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
    let message = match role.as_str() {
        "harang" => json!({
            "actor": "harang",
            "verdict": "PLAN_READY",
            "payload": {"planDir": "plans", "sprintId": sprint, "contractId": format!("C-{sprint}")},
            "handoff": handoff("plan written: one page, one test", "implement the page"),
            "usage": {"inputTokens": 1200, "outputTokens": 300, "costUsd": 0.01},
        }),
        "narang" => json!({
            "actor": "narang",
            "verdict": "IMPL_DONE",
            "payload": {"branch": format!("feature/{}", sprint.to_lowercase()), "commits": [], "workdir": ".", "selfTestReport": {"passed": 3}},
            "handoff": handoff(&format!("round {round} implemented"), "review the change"),
            "usage": {"inputTokens": 5000, "outputTokens": 2000, "costUsd": 0.05},
        }),
        "darang" if reviewer == "runtime" => json!({
            "actor": "darang",
            "verdict": "APPROVE",
            "payload": {"checklistResults": [{"id": "starts", "passed": true}, {"id": "healthcheck", "passed": true}], "issues": [], "artifactPath": format!("runtime-review-{round}.md")},
        }),
        "darang" if round < 2 => json!({
            "actor": "darang",
            "verdict": "REQUEST_CHANGES",
            "payload": {
                "checklistResults": [{"id": "tests", "passed": true}, {"id": "docs", "passed": false, "note": "README not updated"}],
                "issues": [{"severity": "minor", "file": "README.md", "message": "document the new page"}],
                "artifactPath": "review-1.md"
            },
        }),
        "darang" => json!({
            "actor": "darang",
            "verdict": "APPROVE",
            "payload": {"checklistResults": [{"id": "tests", "passed": true}, {"id": "docs", "passed": true}], "issues": [], "artifactPath": "review-2.md"},
        }),
        "erang" => json!({
            "actor": "erang",
            "verdict": "DEPLOY_DONE",
            "payload": {"deployArtifactPath": "dist/demo", "projectType": "demo", "verificationResults": {"healthcheck": "ok"}},
        }),
        other => {
            errln!("simulate-sister: unknown role {other:?}");
            return 2;
        }
    };
    outln!("{message}");
    0
}
