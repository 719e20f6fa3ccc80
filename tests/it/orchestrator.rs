//! Every transition of the pipeline driven end to end: a real orchestrator, a real SQLite
//! database and real sister processes (the scripted fixture sister) misbehaving on cue.

use hanarang::handoff::message::Actor;
use hanarang::orchestrator::client::Answer;
use hanarang::orchestrator::{LeaseError, Orchestrator, OrchestratorError};
use hanarang::pipeline::State;
use hanarang::pipeline::fsm::{Escalation, Note};
use hanarang::sister::RunOutcome;
use hanarang::store::{CommandKind, CommandStatus};

use crate::support;
use crate::support::alive;
use crate::support::db::{Engine, on_each_engine};
use crate::support::pipeline::{
    Files, PATIENCE, Pipeline, Setup, TWO_ROUNDS, assert_log_is_whole, path,
};

fn outcomes(runs: &[hanarang::store::Run]) -> Vec<String> {
    runs.iter()
        .map(|r| {
            format!(
                "{}:{}",
                r.actor,
                r.outcome.map_or("running", |o| o.as_str())
            )
        })
        .collect()
}

on_each_engine! {
async fn happy_path_from_queued_to_deployed_with_a_human_approval(engine) {
    let p = Pipeline::start(Setup { engine, ..Setup::default() }).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    assert_eq!(s.id, "SPRINT-001");
    p.wait_for(&s.id, State::Done).await;
    assert_eq!(
        p.command(&s.id, CommandKind::Approve, None).await,
        Answer::Applied("SPRINT-001: done → deploying".into())
    );
    p.wait_for(&s.id, State::Deployed).await;

    let log = p.transitions(&s.id).await;
    assert_log_is_whole(&log);
    assert_eq!(
        path(&log),
        [
            "queued",
            "planning",
            "implementing",
            "reviewing",
            "done",
            "deploying",
            "deployed"
        ]
    );
    let runs = p.runs(&s.id).await;
    assert_eq!(
        outcomes(&runs),
        [
            "harang:handoff",
            "narang:handoff",
            "darang:handoff",
            "erang:handoff"
        ]
    );
    // The lineage: each run was given the document of the one before.
    let parents: Vec<Option<&str>> = runs.iter().map(|r| r.parent_run_id.as_deref()).collect();
    assert_eq!(
        parents,
        [
            None,
            Some("SPRINT-001-R01"),
            Some("SPRINT-001-R02"),
            Some("SPRINT-001-R03")
        ]
    );
    // The planner's contract id is what the later sisters work against.
    let sprint = p.store.sprint(&s.id).await.unwrap().unwrap();
    assert_eq!(sprint.contract_id, "C-SPRINT-001");
    let narang = p.files.contract_of("SPRINT-001-R02");
    assert_eq!(narang["contractId"], "C-SPRINT-001");
    assert_eq!(narang["previousMessage"]["actor"], "harang");
    p.stop().await;
}
}

on_each_engine! {
async fn request_changes_then_approve_sends_the_issues_to_the_implementer(engine) {
    let p = Pipeline::start(Setup {
        darang: "changes-until 2",
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let done = p.wait_for(&s.id, State::Done).await;
    assert_eq!(done.round, 2);
    let log = p.transitions(&s.id).await;
    assert_eq!(
        path(&log),
        TWO_ROUNDS
    );
    // Round 2's implementer got the reviewer's issues and the failed checklist item.
    let runs = p.runs(&s.id).await;
    let second = runs
        .iter()
        .find(|r| r.actor == Actor::Narang && r.round == 2)
        .unwrap();
    let contract = p.files.contract_of(&second.run_id);
    let issues = contract["reviewIssues"].as_array().unwrap();
    assert_eq!(issues.len(), 2, "{contract:#}");
    assert_eq!(issues[0]["message"], "validate the password length");
    assert!(
        issues[1]["message"]
            .as_str()
            .unwrap()
            .contains("no test for the empty form")
    );
    let stdin = p.files.stdin_of(&second.run_id);
    assert!(
        stdin.contains("- [major] src/login.rs:12 validate the password length"),
        "{stdin}"
    );
    p.stop().await;
}
}

on_each_engine! {
async fn three_failures_escalate_and_resume_with_focus_reaches_the_sister(engine) {
    let p = Pipeline::start(Setup {
        narang: "fail-first 3",
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let escalated = p.wait_for(&s.id, State::Escalated).await;
    assert_eq!(escalated.attempt, 3);
    let log = p.transitions(&s.id).await;
    let last = log.last().unwrap();
    match &last.note {
        Some(Note::Escalated {
            escalation:
                Escalation::AttemptsExhausted {
                    attempts: 3, last, ..
                },
        }) => assert_eq!(last.detail, "exited with code 1: simulated failure 3"),
        other => panic!("expected attempts exhausted, got {other:?}"),
    }
    let retries = log
        .iter()
        .filter(|t| matches!(t.note, Some(Note::Retry { .. })))
        .count();
    assert_eq!(retries, 2, "two retries between the three tries");

    let answer = p
        .command(&s.id, CommandKind::Resume, Some("try the simpler fix"))
        .await;
    assert_eq!(
        answer,
        Answer::Applied("SPRINT-001: escalated → implementing".into())
    );
    p.wait_for(&s.id, State::Done).await;
    let runs = p.runs(&s.id).await;
    let resumed = runs
        .iter()
        .filter(|r| r.actor == Actor::Narang)
        .nth(3)
        .unwrap();
    assert_eq!(resumed.attempt, 1, "resume resets the attempts");
    let stdin = p.files.stdin_of(&resumed.run_id);
    assert!(
        stdin.contains(
            "is for what a person asked: <request from=\"cli\">try the simpler fix</request>\n"
        ),
        "{stdin}"
    );
    assert!(!stdin.contains("Additional focus"), "{stdin}");
    p.stop().await;
}
}

on_each_engine! {
async fn review_rounds_exhausted_escalates(engine) {
    let p = Pipeline::start(Setup {
        darang: "changes-until 99",
        max_review_rounds: 2,
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let escalated = p.wait_for(&s.id, State::Escalated).await;
    assert_eq!(escalated.round, 2);
    let last = p.transitions(&s.id).await.pop().unwrap();
    assert!(matches!(
        last.note,
        Some(Note::Escalated {
            escalation: Escalation::ReviewRoundsExhausted { rounds: 2 }
        })
    ));
    p.stop().await;
}
}

on_each_engine! {
async fn harang_abort_ends_the_sprint(engine) {
    let p = Pipeline::start(Setup {
        harang: "abort",
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Aborted).await;
    assert_eq!(
        path(&p.transitions(&s.id).await),
        ["queued", "planning", "aborted"]
    );
    assert_eq!(
        p.command(&s.id, CommandKind::Resume, None).await,
        Answer::Refused("SPRINT-001 is aborted: a finished sprint accepts no more commands".into())
    );
    p.stop().await;
}
}

on_each_engine! {
async fn darang_abort_ends_the_sprint(engine) {
    let p = Pipeline::start(Setup {
        darang: "abort",
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Aborted).await;
    let log = p.transitions(&s.id).await;
    assert_eq!(
        path(&log),
        ["queued", "planning", "implementing", "reviewing", "aborted"]
    );
    assert_eq!(log.last().unwrap().event, "darang:ABORT");
    p.stop().await;
}
}

on_each_engine! {
async fn a_message_from_the_wrong_sister_is_a_protocol_violation(engine) {
    let p = Pipeline::start(Setup {
        narang: "wrong-actor",
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Aborted).await;
    let runs = p.runs(&s.id).await;
    let last = runs.last().unwrap();
    assert_eq!(last.outcome, Some(RunOutcome::ProtocolViolation));
    assert!(
        last.detail
            .as_deref()
            .unwrap()
            .contains("the message is from erang")
    );
    assert!(
        last.stdout_tail.as_deref().unwrap().contains("DEPLOY_DONE"),
        "the raw output is kept"
    );
    p.stop().await;
}
}

on_each_engine! {
async fn a_plan_for_another_sprint_is_a_protocol_violation(engine) {
    let p = Pipeline::start(Setup {
        harang: "wrong-sprint",
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Aborted).await;
    let runs = p.runs(&s.id).await;
    assert_eq!(runs[0].outcome, Some(RunOutcome::ProtocolViolation));
    p.stop().await;
}
}

on_each_engine! {
async fn a_user_abort_kills_the_running_sister_and_records_cancelled(engine) {
    let p = Pipeline::start(Setup {
        narang: "hang",
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Implementing).await;
    let pid = p.files.wait_hanging(Actor::Narang).await;
    let answer = p
        .command(&s.id, CommandKind::Abort, Some("wrong approach"))
        .await;
    assert_eq!(
        answer,
        Answer::Applied("SPRINT-001: implementing → aborted".into())
    );
    assert_eq!(alive(&[pid]), Vec::<u32>::new(), "the sister was killed");
    let runs = p.runs(&s.id).await;
    assert_eq!(runs.last().unwrap().outcome, Some(RunOutcome::Cancelled));
    p.stop().await;
}
}

on_each_engine! {
async fn two_approvals_make_one_transition_and_approve_after_abort_is_refused(engine) {
    // The deploy waits for a file the test creates: the second approval is answered
    // while it runs, however soon the loop hears of the first.
    let files = Files::new(&Setup {
        erang: "wait-for RELEASE",
        engine,
        ..Setup::default()
    });
    let release = files.state_dir.join("release");
    let config = std::fs::read_to_string(&files.config_path)
        .unwrap()
        .replace("\"RELEASE\"", &format!("{:?}", release.display().to_string()));
    std::fs::write(&files.config_path, config).unwrap();
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "one", None).await;
    p.wait_for(&s.id, State::Done).await;
    // Two approvals of the same card: exactly one may win.
    let now = hanarang::clock::now_ms();
    let a = p
        .store
        .submit_command(&s.id, CommandKind::Approve, None, "discord:1", None, now)
        .await
        .unwrap();
    let b = p
        .store
        .submit_command(&s.id, CommandKind::Approve, None, "cli", None, now)
        .await
        .unwrap();
    p.handle.wake();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while p.store.command(b).await.unwrap().unwrap().status.as_str() == "pending" {
        assert!(tokio::time::Instant::now() < deadline, "the second approval was never answered");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    std::fs::write(&release, "").unwrap();
    p.wait_for(&s.id, State::Deployed).await;
    let (a, b) = (
        p.store.command(a).await.unwrap().unwrap(),
        p.store.command(b).await.unwrap().unwrap(),
    );
    let statuses = [a.status.as_str(), b.status.as_str()];
    assert_eq!(statuses, ["applied", "refused"]);
    assert!(b.result.unwrap().contains("not done"));
    let approvals = p
        .transitions(&s.id)
        .await
        .iter()
        .filter(|t| t.event == "approve")
        .count();
    assert_eq!(approvals, 1);

    let t = p.start_sprint("app", "two", None).await;
    p.wait_for(&t.id, State::Done).await;
    assert_eq!(
        p.command(&t.id, CommandKind::Abort, None).await,
        Answer::Applied("SPRINT-002: done → aborted".into())
    );
    assert_eq!(
        p.command(&t.id, CommandKind::Approve, None).await,
        Answer::Refused("SPRINT-002 is aborted: a finished sprint accepts no more commands".into())
    );
    p.stop().await;
}
}

on_each_engine! {
async fn two_projects_run_at_once_and_one_projects_sprints_run_one_after_the_other(engine) {
    let files = Files::new(&Setup {
        harang: "wait-for RELEASE",
        projects: &["app", "web"],
        engine,
        ..Setup::default()
    });
    // The planner waits for a file the test creates: both projects' planners must be
    // running at the same time before it does.
    let release = files.state_dir.join("release");
    let config = std::fs::read_to_string(&files.config_path)
        .unwrap()
        .replace(
            "\"RELEASE\"",
            &format!("{:?}", release.display().to_string()),
        );
    std::fs::write(&files.config_path, config).unwrap();
    let p = Pipeline::start_with(files).await;
    let a1 = p.start_sprint("app", "app first", None).await;
    let a2 = p.start_sprint("app", "app second", None).await;
    let w1 = p.start_sprint("web", "web first", None).await;
    let running_both = async {
        loop {
            let in_flight = p.store.runs_in_flight().await.unwrap();
            let sprints: Vec<&str> = in_flight.iter().map(|r| r.sprint_id.as_str()).collect();
            if sprints.contains(&a1.id.as_str()) && sprints.contains(&w1.id.as_str()) {
                return sprints.len();
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    assert_eq!(
        running_both.await,
        2,
        "app's second sprint waits for the pipeline lock"
    );
    assert_eq!(
        p.store.sprint(&a2.id).await.unwrap().unwrap().state,
        State::Queued
    );
    std::fs::write(&release, "").unwrap();

    for id in [&a1.id, &w1.id] {
        p.wait_for(id, State::Done).await;
        p.command(id, CommandKind::Approve, None).await;
    }
    // The first app sprint holds the lock until it is deployed.
    p.wait_for(&a1.id, State::Deployed).await;
    p.wait_for(&a2.id, State::Done).await;
    let first_done = p.transitions(&a1.id).await.last().unwrap().global_seq;
    let second_starts = p.transitions(&a2.id).await.first().unwrap().global_seq;
    assert!(
        second_starts > first_done,
        "app's second sprint started only after the first was deployed"
    );
    p.stop().await;
}
}

on_each_engine! {
/// With PostgreSQL several hosts share a database, but not one host name.
async fn a_second_orchestrator_on_the_same_database_is_refused(engine) {
    let p = Pipeline::start(Setup { engine, ..Setup::default() }).await;
    let second = Orchestrator::start(p.config.clone(), p.store.clone()).await;
    match second {
        Err(OrchestratorError::Lease(LeaseError::Held(holder))) if engine == Engine::Sqlite => {
            assert_eq!(holder.pid, i64::from(std::process::id()));
        }
        Err(OrchestratorError::Lease(e @ LeaseError::HostHeld { .. })) if engine == Engine::Postgres => {
            let LeaseError::HostHeld { name, holder } = &e else { unreachable!() };
            assert_eq!(name, &p.config.host.name);
            assert_eq!(holder.pid, i64::from(std::process::id()));
            assert!(e.to_string().contains("give this one another [host] name"), "{e}");
        }
        Err(e) => panic!("expected the lease to be held, got {e}"),
        Ok(_) => panic!("a second orchestrator started"),
    }
    p.stop().await;
}
}

on_each_engine! {
async fn a_command_given_while_no_orchestrator_runs_is_applied_when_one_starts(engine) {
    let p = Pipeline::start(Setup { engine, ..Setup::default() }).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let files = p.stop().await;

    let out = files.hanarang(&["sprint", "approve", "SPRINT-001"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .contains("no orchestrator is running, so it is applied when `hanarang serve` starts"),
        "{stdout}"
    );

    let p = Pipeline::start_with(files).await;
    p.wait_for("SPRINT-001", State::Deployed).await;
    p.stop().await;
}
}

on_each_engine! {
async fn approve_on_a_sprint_not_in_done_is_refused_with_exit_4(engine) {
    let p = Pipeline::start(Setup {
        narang: "hang",
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Implementing).await;
    let out = p.files.hanarang(&["sprint", "approve", &s.id]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "refused: SPRINT-001 is implementing, not done: only a sprint waiting for deploy approval can be approved"
    );
    let unknown = p.files.hanarang(&["sprint", "approve", "SPRINT-404"]);
    assert_eq!(unknown.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no sprint SPRINT-404"));
    assert_eq!(
        p.store.sprint(&s.id).await.unwrap().unwrap().state,
        State::Implementing,
        "nothing changed"
    );
    p.stop().await;
}
}

on_each_engine! {
async fn spending_past_the_budget_escalates_with_the_figure_and_resume_allows_more(engine) {
    let p = Pipeline::start(Setup {
        max_cost_usd: Some(0.05),
        extra: "[agent.harang.env]\nSAY_COST = \"0.03\"\n[agent.narang.env]\nSAY_COST = \"0.03\"\n[agent.darang.env]\nSAY_COST = \"0.03\"\n",
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let escalated = p.wait_for(&s.id, State::Escalated).await;
    // Planning and implementing spent $0.06: the reviewer is not started.
    assert_eq!(
        escalated.resume.map(|r| r.stage.to_string()),
        Some("reviewing".into())
    );
    let last = p.transitions(&s.id).await.pop().unwrap();
    match &last.note {
        Some(Note::Escalated {
            escalation:
                Escalation::BudgetExceeded {
                    spent_usd,
                    limit_usd,
                },
        }) => {
            assert!((spent_usd - 0.06).abs() < 1e-9, "{spent_usd}");
            assert!((limit_usd - 0.05).abs() < 1e-9, "{limit_usd}");
        }
        other => panic!("expected a budget escalation, got {other:?}"),
    }
    let cx = hanarang::notify::Context {
        sprint_id: &s.id,
        branch: "b",
        locale: hanarang::config::Locale::Ko,
        nickname: "자기야",
        max_attempts: 3,
        agent_text: hanarang::notify::messages::one_line,
        person: str::to_string,
        merges_into: None,
    };
    let line = hanarang::notify::render(&last, &cx);
    assert_eq!(
        line.text,
        "🚨 SPRINT-001 예산 초과 ($0.06 / 한도 $0.05). 자기야 확인 필요"
    );
    assert!(line.mention);

    assert!(matches!(
        p.command(&s.id, CommandKind::Resume, None).await,
        Answer::Applied(_)
    ));
    p.wait_for(&s.id, State::Done).await;
    let out = p.files.hanarang(&["sprint", "log", &s.id, "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let total = log["usage"]["total"]["cost_usd"].as_f64().unwrap();
    assert!((total - 0.09).abs() < 1e-9, "{total}");
    assert_eq!(log["usage"]["by_sister"]["darang"]["input_tokens"], 1000);
    let status = p.files.hanarang(&["sprint", "status", &s.id, "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!((status["usage"]["cost_usd"].as_f64().unwrap() - 0.09).abs() < 1e-9);
    p.stop().await;
}
}

/// Numbers compared as f64 (SQLite and serde print floats differently), all else exactly.
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            (x.as_f64().unwrap_or(f64::NAN) - y.as_f64().unwrap_or(f64::NAN)).abs() < 1e-9
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_json(v, w))
        }
        _ => a == b,
    }
}

on_each_engine! {
async fn status_of_all_sprints_is_the_same_document_as_each_sprints_status(engine) {
    let p = Pipeline::start(Setup {
        narang: "fail-first 3",
        max_cost_usd: Some(100.0),
        extra: "[agent.harang.env]\nSAY_COST = \"0.07\"\n",
        engine,
        ..Setup::default()
    })
    .await;
    let first = p.start_sprint("app", "escalates", None).await;
    p.wait_for(&first.id, State::Escalated).await;
    // Queued behind the escalated one, with focus waiting for its first sister.
    p.start_sprint("app", "waits \"quoted\" ünïcode", Some("only the form"))
        .await;
    let all = p.files.hanarang(&["sprint", "status", "--json"]);
    assert_eq!(all.status.code(), Some(0));
    let all: serde_json::Value = serde_json::from_slice(&all.stdout).expect("one JSON array");
    let all = all.as_array().expect("an array");
    assert_eq!(all.len(), 2);
    for listed in all {
        let id = listed["id"].as_str().unwrap();
        let one = p.files.hanarang(&["sprint", "status", id, "--json"]);
        let one: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
        assert!(same_json(listed, &one), "list: {listed:#}\none: {one:#}");
    }
    assert_eq!(all[0]["resume"]["stage"], "implementing");
    assert!(all[0]["usage"]["cost_usd"].as_f64().unwrap() > 0.06);
    assert_eq!(all[1]["focus"], "only the form");
    assert!(
        all[1].get("resume").is_none(),
        "absent fields are left out, not null"
    );
    p.stop().await;
}
}

/// The loop has a thread of its own: a caller whose runtime is stuck (a task that
/// busy-loops, a blocking call) does not hold the pipeline up.
#[tokio::test] // one thread, which the test then blocks
async fn the_pipeline_goes_on_while_the_callers_runtime_is_stuck() {
    let files = Files::new(&Setup {
        narang: "hang",
        ..Setup::default()
    });
    let config = files.config();
    let s = hanarang::store::Store::open(&config.database.url)
        .await
        .unwrap()
        .create_sprint("app", "Add a login page", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    let p = Pipeline::start_with(files).await;
    // From here nothing of this test's runtime runs until the implementer has started
    // (not even what the orchestrator's start left to it): planning must run, be
    // committed and hand over without it.
    let deadline = std::time::Instant::now() + support::pipeline::PATIENCE;
    let pid = loop {
        if let Some(pid) = p.files.hanging_pid(Actor::Narang) {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pipeline stood still while the caller's runtime was stuck"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let runs = p.runs(&s.id).await;
    assert_eq!(outcomes(&runs), ["harang:handoff", "narang:running"]);
    let answer = p
        .command(&s.id, CommandKind::Abort, Some("done here"))
        .await;
    assert_eq!(
        answer,
        Answer::Applied("SPRINT-001: implementing → aborted".into())
    );
    assert_eq!(alive(&[pid]), Vec::<u32>::new());
    p.stop().await;
}

on_each_engine! {
/// An approval and an abort given together (read in one batch): the abort is applied
/// before any deploy starts.
async fn an_abort_given_with_an_approval_lands_before_the_deploy_starts(engine) {
    let p = Pipeline::start(Setup { engine, ..Setup::default() }).await;
    let s = p.start_sprint("app", "one", None).await;
    p.wait_for(&s.id, State::Done).await;
    // Both in one transaction, so the loop reads them together.
    hanarang::store::testing::submit_commands_together(
        &p.store,
        &s.id,
        &[CommandKind::Approve, CommandKind::Abort],
    )
    .await
    .unwrap();
    p.handle.wake();
    p.wait_for(&s.id, State::Aborted).await;
    let log = p.transitions(&s.id).await;
    let moves: Vec<(State, State)> = log.iter().map(|t| (t.from, t.to)).collect();
    assert_eq!(
        moves[moves.len() - 2..],
        [
            (State::Done, State::Deploying),
            (State::Deploying, State::Aborted)
        ]
    );
    let runs = p.runs(&s.id).await;
    assert!(
        runs.iter().all(|r| r.actor != Actor::Erang),
        "no deploy ran: {:?}",
        outcomes(&runs)
    );
    p.stop().await;
}
}

on_each_engine! {
/// An agent that hits its usage limit is not failing: the stage waits for the reset the
/// CLI named, uses no attempt, and a human's resume starts it at once.
async fn a_usage_limit_pauses_the_stage_until_its_reset_and_resume_starts_it_at_once(engine) {
    let reset = hanarang::clock::now_ms() / 1000 + 3 * 3600;
    let erang: &'static str = Box::leak(format!("limit-first 1 {reset}").into_boxed_str());
    let p = Pipeline::start(Setup {
        erang,
        extra: r#"pause_on = [{ pattern = "usage limit reached\\|(?P<reset>\\d+)", source = "stderr" }]"#,
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    p.command(&s.id, CommandKind::Approve, None).await;
    let paused = support::pipeline::wait_for(
        &p.store,
        &s.id,
        |s| s.state == State::Deploying && s.next_run_at.is_some(),
        "a paused deploy",
    )
    .await;
    assert_eq!(paused.attempt, 1, "a pause uses no attempt");
    assert_eq!(
        paused.next_run_at,
        Some(reset * 1000),
        "it waits for the reset the CLI named"
    );
    let runs = p.runs(&s.id).await;
    let last = runs.last().unwrap();
    assert_eq!(last.outcome, Some(RunOutcome::Paused));
    assert!(
        last.detail
            .as_deref()
            .unwrap_or_default()
            .starts_with(&format!(
                "usage limit: usage limit reached|{reset}; resumes at "
            )),
        "{:?}",
        last.detail
    );
    let log = p.transitions(&s.id).await;
    let note = log.last().unwrap();
    assert!(
        matches!(note.note, Some(Note::Paused { resume_at_ms, .. }) if resume_at_ms == reset * 1000)
    );
    let config = p.config.clone();
    let sprint = p.store.sprint(&s.id).await.unwrap().unwrap();
    let line = hanarang::notify::render(note, &hanarang::notify::Context::new(&config, &sprint));
    assert!(
        line.text.starts_with("⏸️ 이랑이 사용량 한도: "),
        "{}",
        line.text
    );
    assert!(!line.mention);
    // The forum post's board says when it runs again.
    let board = hanarang::discord::render::board(
        &paused,
        None,
        &hanarang::store::Usage::default(),
        hanarang::config::Locale::Ko,
        3,
        hanarang::clock::now_ms(),
    );
    assert!(board.contains("\n다시 시작: "), "{board}");
    // A human need not wait for the reset.
    match p.command(&s.id, CommandKind::Resume, None).await {
        Answer::Applied(_) => {}
        other => panic!("resume of a paused stage: {other:?}"),
    }
    let done = p.wait_for(&s.id, State::Deployed).await;
    assert_eq!(done.attempt, 1);
    p.stop().await;
}
}

on_each_engine! {
async fn an_approval_given_at_round_1s_done_does_not_approve_round_2(engine) {
    let p = Pipeline::start(Setup { engine, ..Setup::default() }).await;
    let s = p.start_sprint("app", "one", None).await;
    let seen = p.wait_for(&s.id, State::Done).await;
    // A person asks for changes; meanwhile another's approval of what they saw then
    // (round 1's done) is on its way, and lands once round 2 is done.
    let changes = p.command(&s.id, CommandKind::RequestChanges, Some("rename it")).await;
    assert_eq!(changes, Answer::Applied("SPRINT-001: done → implementing".into()));
    let round_2 = p.wait_for(&s.id, State::Done).await;
    assert_eq!(round_2.round, 2);
    let late = p
        .store
        .submit_command(&s.id, CommandKind::Approve, None, "cli:ann@box", Some(seen.last_seq), hanarang::clock::now_ms())
        .await
        .unwrap();
    p.handle.wake();
    let deadline = std::time::Instant::now() + crate::support::pipeline::PATIENCE;
    let answered = loop {
        let c = p.store.command(late).await.unwrap().unwrap();
        if c.status != hanarang::store::CommandStatus::Pending {
            break c;
        }
        assert!(std::time::Instant::now() < deadline, "the late approval was never answered");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(answered.status.as_str(), "refused");
    assert!(
        answered.result.as_deref().unwrap_or_default().contains("SPRINT-001 moved on since: it is now in round 2's done"),
        "{answered:?}"
    );
    let still = p.store.sprint(&s.id).await.unwrap().unwrap();
    assert_eq!((still.state, still.round), (State::Done, 2));
    p.stop().await;
}
}

on_each_engine! {
async fn a_command_row_hanarang_did_not_write_is_refused_and_never_applied(engine) {
    let p = Pipeline::start(Setup {
        engine,
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    // As an agent with the database open would: an approval from a Discord user who
    // never clicked, with no signature, then one with a made-up signature.
    let forged = [None, Some("ab".repeat(32))];
    for mac in &forged {
        let id = hanarang::store::testing::forge_command(
            &p.store,
            &s.id,
            CommandKind::Approve,
            "discord:1",
            mac.as_deref(),
        )
        .await
        .expect("the row is written");
        let answered = wait_for_command(&p.store, id).await;
        assert_eq!(answered.status, CommandStatus::Refused, "{answered:?}");
        assert!(
            answered
                .result
                .as_deref()
                .is_some_and(|r| r.contains("not written by hanarang")),
            "{answered:?}"
        );
    }
    let sprint = p.store.sprint(&s.id).await.unwrap().unwrap();
    assert_eq!(sprint.state, State::Done, "no deploy on a forged word");
    assert!(
        p.transitions(&s.id).await.iter().all(|t| t.event != "approve"),
        "nothing was applied"
    );
    // A person's approval still goes through.
    p.command(&s.id, CommandKind::Approve, None).await;
    p.wait_for(&s.id, State::Deployed).await;
    p.stop().await;
}
}

/// The command once the orchestrator answered it.
async fn wait_for_command(store: &hanarang::store::Store, id: i64) -> hanarang::store::Command {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let command = store.command(id).await.unwrap().expect("the command");
        if command.status != CommandStatus::Pending {
            return command;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} never answered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confined_sister_cannot_reach_the_database_the_config_other_runs_or_hanarang() {
    if hanarang::fence::available().is_err() {
        eprintln!("no Landlock on this kernel: nothing to test");
        return;
    }
    let files = Files::new(&Setup {
        darang: "attack",
        ..Setup::default()
    });
    let db = files.dir.path().join("hanarang.db");
    files.append_config(&format!(
        "[agent.darang.env]\nATTACK_DB = {:?}\nATTACK_CONFIG = {:?}\nATTACK_BIN = {:?}\n",
        db.display().to_string(),
        files.config_path.display().to_string(),
        env!("CARGO_BIN_EXE_hanarang"),
    ));
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let log =
        std::fs::read_to_string(p.files.state_dir.join("attack.log")).expect("the attack's log");
    let tried: Vec<&str> = log.lines().collect();
    assert_eq!(
        tried,
        [
            "write-db:denied",
            "read-db:denied",
            "read-config:denied",
            "write-other-run:denied",
            "approve:denied",
            "approve-from-env:denied",
            "wake:denied",
            "signal-hanarang:denied",
        ],
        "{log}"
    );
    // Nothing it tried reached the database: the sprint waits for a person.
    let commands = p.store.commands_of(&s.id).await.unwrap();
    assert!(commands.is_empty(), "{commands:?}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        p.store.sprint(&s.id).await.unwrap().unwrap().state,
        State::Done
    );
    p.stop().await;
}

/// `serve` in the test's own process: it drives a sprint queued before it started, and
/// stops with exit 0 when its shutdown future resolves, as at a signal.
#[tokio::test(flavor = "multi_thread")]
async fn serve_in_process_runs_until_its_shutdown_resolves() {
    let files = Files::new(&Setup::default());
    let queued = files.hanarang(&["sprint", "start", "Add a login page"]);
    assert!(
        queued.status.success(),
        "{}",
        String::from_utf8_lossy(&queued.stderr)
    );
    let config = std::sync::Arc::new(files.config());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serve = tokio::spawn(hanarang::startup::serve(config.clone(), async {
        let _ = stopped.await;
    }));
    let store = hanarang::store::Store::open_existing(&config.database.url)
        .await
        .unwrap();
    support::pipeline::wait_for(&store, "SPRINT-001", |s| s.state == State::Done, "done").await;
    stop.send(()).unwrap();
    assert_eq!(serve.await.unwrap(), hanarang::output::Exit::Success);
}
