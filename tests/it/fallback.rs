//! A usage limit is not a stop: a deploy whose agent hits its limit is taken over at once
//! by the next agent of erang's chain (`fallback`), in the same attempt; when every agent
//! is at its limit the stage waits for the earliest reset; a chain that names an unknown
//! agent, itself or a cycle is refused with its key.

use hanarang::handoff::message::Actor;
use hanarang::pipeline::fsm::Note;
use hanarang::pipeline::{Event, State};
use hanarang::sister::RunOutcome;
use hanarang::store::{CommandKind, Run};

use crate::support::db::{Engine, TestDb, on_each_engine};
use crate::support::hosts::{Host, HostSetup};
use crate::support::pipeline::{Pipeline, Setup, wait_for};
use crate::support::{TempDir, sister_script};

/// erang's table (the Setup's `extra` lands in it): its agent's limit text, its chain,
/// and the profile `backup` (the scripted sister again, as `BACKUP_ARGS`, with the same
/// limit text).
pub(crate) fn erang_chain(backup_args: &str) -> &'static str {
    let text = format!(
        r#"pause_on = [{{ pattern = "usage limit reached\\|(?P<reset>\\S+)", source = "stderr" }}]
fallback = ["backup"]

[agent.profiles.backup]
program = "{script}"
args = {backup_args}
pause_on = [{{ pattern = "usage limit reached\\|(?P<reset>\\S+)", source = "stderr" }}]
"#,
        script = sister_script("scripted.sh"),
    );
    Box::leak(text.into_boxed_str())
}

pub(crate) fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// The deploy's runs: `(agent, outcome, attempt)`.
fn deploys(runs: &[Run]) -> Vec<(String, String, u32)> {
    runs.iter()
        .filter(|r| r.actor == Actor::Erang)
        .map(|r| {
            (
                r.agent.clone().unwrap_or_default(),
                r.outcome.map_or("running", |o| o.as_str()).to_string(),
                r.attempt,
            )
        })
        .collect()
}

fn text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

on_each_engine! {
/// erang's agent says it is at its limit for three hours: the backup deploys at once, in
/// the same attempt; the thread and `sprint log`/`show` say who ran what.
async fn a_usage_limit_hands_the_stage_to_the_next_agent_at_once(engine) {
    let reset = hanarang::clock::now_ms() / 1000 + 3 * 3600;
    let p = Pipeline::start(Setup {
        erang: leak(format!("limit-first 1 {reset}")),
        extra: erang_chain(r#"["ok"]"#),
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    p.command(&s.id, CommandKind::Approve, None).await;
    let deployed = p.wait_for(&s.id, State::Deployed).await;
    assert_eq!(deployed.attempt, 1, "a usage limit uses no attempt");
    let runs = p.runs(&s.id).await;
    assert_eq!(
        deploys(&runs),
        [
            ("scripted.sh".to_string(), "paused".to_string(), 1),
            ("backup".to_string(), "handoff".to_string(), 1),
        ]
    );
    let paused = runs.iter().find(|r| r.outcome == Some(RunOutcome::Paused)).unwrap();
    assert_eq!(paused.paused_until, Some(reset * 1000));
    // A fresh session: the backup continues nothing of the other CLI's.
    assert_eq!(runs.last().unwrap().resumes, None);

    let log = p.transitions(&s.id).await;
    let fell = log
        .iter()
        .find(|t| matches!(t.detail, Event::FellBack { .. }))
        .expect("a fallback in the log");
    assert_eq!(fell.note, None, "no wait: the stage goes on at once");
    assert!(!log.iter().any(|t| matches!(t.note, Some(Note::Paused { .. }))));
    let config = p.config.clone();
    let sprint = p.store.sprint(&s.id).await.unwrap().unwrap();
    let mut cx = hanarang::notify::Context::new(&config, &sprint);
    let when = hanarang::notify::messages::clock_time(reset * 1000);
    assert_eq!(
        hanarang::notify::render(fell, &cx).text,
        format!("⏭️ 이랑이: scripted.sh 사용량 한도 ({when}까지), backup(으)로 계속")
    );
    cx.locale = hanarang::config::Locale::En;
    assert_eq!(
        hanarang::notify::render(fell, &cx).text,
        format!("⏭️ Erang: scripted.sh is at its usage limit until {when}; continuing with backup")
    );
    // The next sprint's deploy knows the limit another sprint found: the backup runs it.
    let next = p.start_sprint("app", "Add a logout button", None).await;
    p.wait_for(&next.id, State::Done).await;
    p.command(&next.id, CommandKind::Approve, None).await;
    p.wait_for(&next.id, State::Deployed).await;
    assert_eq!(
        deploys(&p.runs(&next.id).await),
        [("backup".to_string(), "handoff".to_string(), 1)]
    );
    let files = p.stop().await;

    let out = files.hanarang(&["sprint", "log", &s.id]);
    let shown = text(&out);
    assert!(shown.contains("⏭️ 이랑이: scripted.sh 사용량 한도"), "{shown}");
    assert!(shown.contains("paused") && shown.contains("agent scripted.sh"), "{shown}");
    assert!(shown.contains("agent backup"), "{shown}");
    let json: serde_json::Value =
        serde_json::from_slice(&files.hanarang(&["sprint", "log", &s.id, "--json"]).stdout).unwrap();
    let agents: Vec<&str> = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["agent"].as_str())
        .collect();
    assert_eq!(agents.len(), runs.len(), "every run names its agent: {json}");
    assert_eq!(&agents[agents.len() - 2..], ["scripted.sh", "backup"]);
    let show = text(&files.hanarang(&["sprint", "show", &s.id]));
    assert!(show.contains("backup") && show.contains("scripted.sh"), "{show}");
    let show: serde_json::Value =
        serde_json::from_slice(&files.hanarang(&["sprint", "show", &s.id, "--json"]).stdout).unwrap();
    assert_eq!(show["runs"].as_array().unwrap().last().unwrap()["agent"], "backup");
}
}

on_each_engine! {
/// Both agents at their limit: the stage waits for the earlier reset (the backup's, two
/// seconds after it said so), then the agent free again deploys, still in attempt 1.
async fn when_every_agent_is_paused_the_stage_waits_for_the_earliest_reset(engine) {
    let late = hanarang::clock::now_ms() / 1000 + 3 * 3600;
    // The scripted sister counts erang's runs whoever runs it: run 1 is erang's own agent,
    // run 2 the backup's first.
    let p = Pipeline::start(Setup {
        erang: leak(format!("limit-first 1 {late}")),
        // The backup's limit resets two seconds after it says so.
        extra: erang_chain(r#"["limit-first", "2", "2s"]"#),
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    p.command(&s.id, CommandKind::Approve, None).await;
    let deployed = p.wait_for(&s.id, State::Deployed).await;
    assert_eq!(deployed.attempt, 1);
    let runs = p.runs(&s.id).await;
    assert_eq!(
        deploys(&runs),
        [
            ("scripted.sh".to_string(), "paused".to_string(), 1),
            ("backup".to_string(), "paused".to_string(), 1),
            ("backup".to_string(), "handoff".to_string(), 1),
        ],
        "the agent whose limit reset first takes the stage once it has"
    );
    let log = p.transitions(&s.id).await;
    let waits: Vec<i64> = log
        .iter()
        .filter_map(|t| match t.note {
            Some(Note::Paused { resume_at_ms, .. }) => Some(resume_at_ms),
            _ => None,
        })
        .collect();
    let backup_reset = runs
        .iter()
        .filter(|r| r.agent.as_deref() == Some("backup"))
        .find_map(|r| r.paused_until);
    assert!(backup_reset.is_some_and(|at| at < late * 1000), "{runs:?}");
    assert_eq!(
        waits,
        backup_reset.into_iter().collect::<Vec<_>>(),
        "one wait, until the earliest reset"
    );
    p.stop().await;
}
}

on_each_engine! {
/// A restart while the backup runs: it is recorded interrupted, and the restarted loop
/// gives the stage to the backup again, since erang's own agent is still at its limit.
async fn a_restart_in_the_middle_of_a_chain_goes_on_with_the_agent_free_of_its_limit(engine) {
    let reset = hanarang::clock::now_ms() / 1000 + 3 * 3600;
    let p = Pipeline::start(Setup {
        erang: leak(format!("limit-first 1 {reset}")),
        extra: erang_chain(r#"["hang-first", "2"]"#),
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    p.command(&s.id, CommandKind::Approve, None).await;
    p.files.wait_hanging(Actor::Erang).await;
    let files = p.stop().await;
    let p = Pipeline::start_with(files).await;
    p.handle.wake();
    p.wait_for(&s.id, State::Escalated).await;
    let runs = p.runs(&s.id).await;
    // An interrupted deploy is never re-run without a person's word.
    assert_eq!(
        deploys(&runs),
        [
            ("scripted.sh".to_string(), "paused".to_string(), 1),
            ("backup".to_string(), "interrupted".to_string(), 1),
        ]
    );
    p.command(&s.id, CommandKind::Resume, None).await;
    p.wait_for(&s.id, State::Deployed).await;
    let runs = p.runs(&s.id).await;
    assert_eq!(
        deploys(&runs).last().map(|(agent, outcome, _)| (agent.as_str(), outcome.as_str())),
        Some(("backup", "handoff")),
        "erang's own agent is still at its limit"
    );
    p.stop().await;
}
}

/// A chain that names an unknown agent, its own agent, or comes back to where it started
/// is refused by `config check`, each with its key.
#[test]
fn a_bad_fallback_is_refused_naming_its_key() {
    let dir = TempDir::new("fallback-config");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[agent]\npreset = \"claude-code\"\nfallback = [\"gemini\"]\n\
         [agent.narang]\npreset = \"codex\"\nfallback = [\"codex\"]\n\
         [agent.profiles.a]\nprogram = \"a\"\nfallback = [\"b\"]\n\
         [agent.profiles.b]\nprogram = \"b\"\nfallback = [\"a\"]\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .arg("--config")
        .arg(&config)
        .args(["config", "check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "agent.fallback[0]: \"gemini\" is neither a preset (claude-code, codex, openclaw) nor a profile",
        "agent.narang.fallback[0]: \"codex\" is this table's own agent",
        "agent.profiles.a.fallback: the chain comes back to \"a\": a → b → a",
        "agent.profiles.b.fallback: the chain comes back to \"b\"",
    ] {
        assert!(said.contains(expected), "{expected:?} in\n{said}");
    }
}

/// `config check` shows each sister's chain.
#[test]
fn config_check_shows_each_sisters_chain() {
    let dir = TempDir::new("fallback-config");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[agent]\npreset = \"claude-code\"\nfallback = [\"codex\"]\n[agent.erang]\nfallback = []\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hanarang"))
        .arg("--config")
        .arg(&config)
        .args(["config", "check"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = text(&out);
    assert_eq!(
        said.matches("at a usage limit claude-code → codex").count(),
        3,
        "harang, narang and darang; erang has none: {said}"
    );
}

/// `doctor` checks the agents a chain falls back to, as it checks each sister's.
#[test]
fn doctor_checks_the_agents_a_chain_falls_back_to() {
    let files = crate::support::pipeline::Files::new(&Setup {
        extra: "fallback = [\"backup\"]\n[agent.profiles.backup]\nprogram = \"/nonexistent/agent\"\n",
        ..Setup::default()
    });
    let out = files.hanarang(&["doctor"]);
    let said = text(&out);
    assert!(
        said.lines().any(
            |l| l.starts_with("FAIL agent profile backup:") && l.contains("/nonexistent/agent")
        ),
        "{said}"
    );
    assert!(said.contains("agent.profiles.backup.program"), "{said}");
}

/// Two hosts on one PostgreSQL database, each serving its own project: the limit a deploy
/// met on one is known to the other, whose deploy goes to the backup at once.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: scripts/test runs it (cargo test -- --include-ignored)"]
async fn a_limit_met_on_one_host_is_known_to_the_others() {
    use hanarang::orchestrator::client::{self, Request};
    let db = TestDb::new(Engine::Postgres, "fallback").await;
    let dir = TempDir::new("fallback-hosts");
    let reset = hanarang::clock::now_ms() / 1000 + 3 * 3600;
    let script = sister_script("scripted.sh");
    let erang = format!(
        r#"
[agent.erang]
program = "{script}"
args = ["limit-first", "1", "{reset}"]
{chain}"#,
        chain = erang_chain(r#"["ok"]"#)
    );
    let start = |name: &str, project: &str| {
        Host::start(
            std::path::Path::new(env!("CARGO_BIN_EXE_hanarang")),
            dir.path(),
            &db.url,
            &HostSetup {
                name,
                projects: &[project.to_string()],
                lease_ttl: "2s",
                max_sisters: None,
                sister_seconds: "0.1",
                log_level: "hanarang=info",
                extra: &erang,
            },
        )
    };
    let (alpha, beta) = (start("alpha", "a"), start("beta", "b"));
    let deadline = tokio::time::Instant::now() + crate::support::pipeline::PATIENCE;
    let store = loop {
        if let Ok(store) = hanarang::store::Store::open_existing(&db.url).await {
            break store;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}\n{}",
            alpha.log(),
            beta.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let mut agents = Vec::new();
    for project in ["a", "b"] {
        let s = store
            .create_sprint(
                project,
                "Add a login page",
                None,
                "cli:tester@test",
                "feature/{sprint_lower}",
                hanarang::clock::now_ms(),
            )
            .await
            .unwrap();
        wait_for(&store, &s.id, |s| s.state == State::Done, "done").await;
        let approve = Request {
            sprint_id: &s.id,
            kind: CommandKind::Approve,
            text: None,
            by: "test",
            seq: None,
        };
        client::submit(
            &store,
            &hanarang::pipeline::Policy::default(),
            approve,
            None,
            std::time::Duration::ZERO,
        )
        .await
        .unwrap();
        wait_for(&store, &s.id, |s| s.state == State::Deployed, "deployed").await;
        let runs = store.runs(&s.id).await.unwrap();
        agents.push(
            deploys(&runs)
                .into_iter()
                .map(|(agent, _, _)| agent)
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(
        agents,
        [vec!["scripted.sh", "backup"], vec!["backup"]],
        "alpha's deploy met the limit; beta's knew it\n{}\n{}",
        alpha.log(),
        beta.log()
    );
}
