//! Parallel reviewers through the real orchestrator, database and sister
//! processes: two reviewers of one round run at once (each waits for the other to have
//! started), their verdicts merge into darang's, what they found goes to the next
//! implementer with their names, an ABORT stops the other, and a failing reviewer runs
//! again alone.

use hanarang::handoff::message::Actor;
use hanarang::pipeline::State;
use hanarang::sister::RunOutcome;
use hanarang::store::{Run, Sprint};

use crate::support::pipeline::{Pipeline, Setup, TWO_ROUNDS, assert_log_is_whole, path};

/// `[agent.darang.reviewers.*]` for two reviewers, each with its scripted mode.
pub(crate) fn two_reviewers(static_mode: &str, runtime_mode: &str) -> &'static str {
    let args = |mode: &str| {
        let words: Vec<String> = mode.split(' ').map(|w| format!("{w:?}")).collect();
        format!("[{}]", words.join(", "))
    };
    Box::leak(
        format!(
            "[agent.darang.reviewers.static]\nargs = {}\n[agent.darang.reviewers.runtime]\nargs = {}\n",
            args(static_mode),
            args(runtime_mode)
        )
        .into_boxed_str(),
    )
}

/// A pipeline whose darang reviews with two reviewers, and a sprint started on it.
async fn with_two_reviewers(static_mode: &str, runtime_mode: &str) -> (Pipeline, Sprint) {
    let p = Pipeline::start(Setup {
        extra: two_reviewers(static_mode, runtime_mode),
        ..Setup::default()
    })
    .await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    (p, s)
}

fn reviewer_runs<'a>(runs: &'a [Run], name: &str) -> Vec<&'a Run> {
    runs.iter()
        .filter(|r| r.reviewer.as_deref() == Some(name))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_reviewers_run_at_once_and_their_findings_go_back_together() {
    let (p, s) =
        with_two_reviewers("meet 2 changes-until 2 {reviewer}", "meet 2 ok {reviewer}").await;
    let done = p.wait_for(&s.id, State::Done).await;
    assert_eq!(done.round, 2, "one reviewer's request made a second round");
    let log = p.transitions(&s.id).await;
    assert_log_is_whole(&log);
    let events: Vec<&str> = log.iter().map(|t| t.event.as_str()).collect();
    // Each reviewer's verdict is a line of its own, then the merged one; in whichever
    // order the two answered.
    for round in events.split(|e| *e == "narang:IMPL_DONE").skip(1) {
        let (answers, rest) = round.split_at(2);
        let mut answers = answers.to_vec();
        answers.sort();
        assert_eq!(answers.len(), 2, "{events:?}");
        assert!(answers[0].starts_with("darang/runtime:"), "{events:?}");
        assert!(answers[1].starts_with("darang/static:"), "{events:?}");
        assert!(rest[0].starts_with("darang:"), "{events:?}");
    }
    assert!(
        events.contains(&"darang/static:REQUEST_CHANGES"),
        "{events:?}"
    );
    assert!(events.contains(&"darang:REQUEST_CHANGES"), "{events:?}");
    assert_eq!(events.last(), Some(&"darang:APPROVE"), "{events:?}");
    assert_eq!(
        path(&log)
            .into_iter()
            .fold(Vec::<String>::new(), |mut v, s| {
                if v.last() != Some(&s) {
                    v.push(s);
                }
                v
            }),
        TWO_ROUNDS
    );

    let runs = p.runs(&s.id).await;
    // Each reviewer ran once a round, with the implementer's run as its parent.
    for name in ["static", "runtime"] {
        let mine = reviewer_runs(&runs, name);
        assert_eq!(mine.len(), 2, "{name}: {mine:#?}");
        for r in mine {
            assert_eq!(r.actor, Actor::Darang);
            let parent = runs
                .iter()
                .find(|p| Some(&p.run_id) == r.parent_run_id.as_ref())
                .expect("a reviewer's parent run");
            assert_eq!(parent.actor, Actor::Narang, "{}", r.run_id);
            assert_eq!(parent.round, r.round);
        }
    }
    // Each was given its name: `{reviewer}` in its arguments (the scripted sister echoes
    // them on stderr) and HANARANG_REVIEWER (it counts its runs under it).
    for r in runs.iter().filter(|r| r.reviewer.is_some()) {
        let name = r.reviewer.as_deref().unwrap_or_default();
        let stderr = r.stderr_tail.as_deref().unwrap_or_default();
        assert!(stderr.contains(&format!("darang-{name} run")), "{stderr}");
        assert!(stderr.trim_end().ends_with(&format!(" {name}")), "{stderr}");
    }
    // Round 2's implementer got every reviewer's findings, each with its name, and its
    // parent is the reviewer run that finished last.
    let second = runs
        .iter()
        .find(|r| r.actor == Actor::Narang && r.round == 2)
        .expect("round 2's implementer");
    let contract = p.files.contract_of(&second.run_id);
    let issues: Vec<&str> = contract["reviewIssues"]
        .as_array()
        .expect("reviewIssues")
        .iter()
        .filter_map(|i| i["message"].as_str())
        .collect();
    assert_eq!(
        issues,
        [
            "[static] validate the password length",
            "[static] checklist item \"tests\" failed: no test for the empty form"
        ],
        "{contract:#}"
    );
    let stdin = p.files.stdin_of(&second.run_id);
    assert!(
        stdin.contains(concat!(
            "<review-issues from=\"darang/static\">\n",
            "- [major] src/login.rs:12 [static] validate the password length\n"
        )),
        "{stdin}"
    );
    assert_eq!(
        contract["reviewIssuesBy"],
        serde_json::json!(["darang/static", "darang/static"])
    );
    let round_one: Vec<&Run> = runs
        .iter()
        .filter(|r| r.reviewer.is_some() && r.round == 1)
        .collect();
    let last = round_one
        .iter()
        .max_by_key(|r| r.ended_at)
        .expect("round 1's reviewers");
    assert_eq!(second.parent_run_id.as_ref(), Some(&last.run_id));

    // `sprint log` shows the fan-out and the merge, as text and as JSON.
    let out = p.files.hanarang(&["sprint", "log", &s.id]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for shown in [
        "다랑이 리뷰어 static 판정: REQUEST_CHANGES (라운드 1)",
        "다랑이 리뷰어 runtime 판정: APPROVE (라운드 1)",
        "리뷰 종합: 변경 요청 (static)",
        "darang/static",
        "darang/runtime",
    ] {
        assert!(text.contains(shown), "{shown:?} in:\n{text}");
    }
    let out = p.files.hanarang(&["sprint", "log", &s.id, "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("log --json");
    let reviewers: Vec<&str> = json["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["reviewer"].as_str())
        .collect();
    assert_eq!(reviewers.len(), 4, "{json:#}");
    let merged = json["transitions"]
        .as_array()
        .expect("transitions")
        .iter()
        .find(|t| t["detail"]["type"] == "review_merged")
        .unwrap_or_else(|| panic!("no merge in {json:#}"));
    assert_eq!(
        merged["detail"]["verdicts"]["static"], "REQUEST_CHANGES",
        "{merged:#}"
    );
    assert_eq!(
        merged["detail"]["verdicts"]["runtime"], "APPROVE",
        "{merged:#}"
    );
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reviewers_abort_stops_the_other_and_ends_the_sprint() {
    let (p, s) = with_two_reviewers("meet 2 abort", "meet 2 hang").await;
    p.wait_for(&s.id, State::Aborted).await;
    let runs = p.runs(&s.id).await;
    let outcome = |name| {
        let mine = reviewer_runs(&runs, name);
        assert_eq!(mine.len(), 1, "{name}: {mine:#?}");
        mine[0].outcome
    };
    assert_eq!(outcome("static"), Some(RunOutcome::Handoff));
    // The hanging one is stopped at once, not waited for: its run ends cancelled.
    let runtime = loop {
        let runs = p.runs(&s.id).await;
        let r = reviewer_runs(&runs, "runtime")[0].clone();
        if r.outcome.is_some() {
            break r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(runtime.outcome, Some(RunOutcome::Cancelled));
    let events: Vec<String> = p
        .transitions(&s.id)
        .await
        .into_iter()
        .map(|t| t.event)
        .collect();
    assert_eq!(
        events[events.len() - 2..],
        ["darang/static:ABORT", "darang:ABORT"],
        "{events:?}"
    );
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_reviewer_runs_again_alone() {
    let (p, s) = with_two_reviewers("fail-first 2", "ok").await;
    let done = p.wait_for(&s.id, State::Done).await;
    assert_eq!(done.round, 1);
    let runs = p.runs(&s.id).await;
    let attempts = |name| -> Vec<(u32, Option<RunOutcome>)> {
        reviewer_runs(&runs, name)
            .iter()
            .map(|r| (r.attempt, r.outcome))
            .collect()
    };
    assert_eq!(
        attempts("static"),
        [
            (1, Some(RunOutcome::ExitNonzero)),
            (2, Some(RunOutcome::ExitNonzero)),
            (3, Some(RunOutcome::Handoff))
        ]
    );
    assert_eq!(attempts("runtime"), [(1, Some(RunOutcome::Handoff))]);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_reviewer_failing_every_attempt_escalates_and_a_resume_runs_only_it() {
    let (p, s) = with_two_reviewers("fail-first 3", "ok").await;
    let escalated = p.wait_for(&s.id, State::Escalated).await;
    assert_eq!(
        escalated.resume.map(|r| r.stage),
        Some(hanarang::pipeline::State::Reviewing)
    );
    let answer = p
        .command(&s.id, hanarang::store::CommandKind::Resume, None)
        .await;
    assert!(
        matches!(answer, hanarang::orchestrator::client::Answer::Applied(_)),
        "{answer:?}"
    );
    p.wait_for(&s.id, State::Done).await;
    let runs = p.runs(&s.id).await;
    // The reviewer that had answered is not run again (one still running when the stage
    // escalated was stopped, and runs once more).
    let answered = reviewer_runs(&runs, "runtime")
        .iter()
        .filter(|r| r.outcome == Some(RunOutcome::Handoff))
        .count();
    assert_eq!(answered, 1, "{:#?}", reviewer_runs(&runs, "runtime"));
    let static_runs: Vec<(u32, Option<RunOutcome>)> = reviewer_runs(&runs, "static")
        .iter()
        .map(|r| (r.attempt, r.outcome))
        .collect();
    assert_eq!(
        static_runs.last(),
        Some(&(1, Some(RunOutcome::Handoff))),
        "after the resume it has every attempt again: {static_runs:?}"
    );
    p.stop().await;
}

/// Waits until both reviewers of the round run.
async fn both_reviewers_running(p: &Pipeline, s: &Sprint) {
    p.wait_for(&s.id, State::Reviewing).await;
    let deadline = tokio::time::Instant::now() + crate::support::pipeline::PATIENCE;
    while p
        .runs(&s.id)
        .await
        .iter()
        .filter(|r| r.reviewer.is_some() && r.outcome.is_none())
        .count()
        < 2
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "both reviewers never ran"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handoff_is_refused_while_several_reviewers_run_and_stops_none() {
    let (p, s) = with_two_reviewers("hang", "hang").await;
    both_reviewers_running(&p, &s).await;
    let answer = p
        .command(&s.id, hanarang::store::CommandKind::Handoff, None)
        .await;
    let hanarang::orchestrator::client::Answer::Refused(reason) = answer else {
        panic!("a handoff of several reviewers was not refused: {answer:?}");
    };
    assert!(reason.contains("several reviewers"), "{reason}");
    let runs = p.runs(&s.id).await;
    let running = runs
        .iter()
        .filter(|r| r.reviewer.is_some() && r.outcome.is_none())
        .count();
    assert_eq!(
        running, 2,
        "the refused handoff stopped a reviewer: {runs:#?}"
    );
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_users_abort_stops_every_reviewer_at_once() {
    let (p, s) = with_two_reviewers("hang", "hang").await;
    both_reviewers_running(&p, &s).await;
    let answer = p
        .command(
            &s.id,
            hanarang::store::CommandKind::Abort,
            Some("wrong approach"),
        )
        .await;
    assert_eq!(
        answer,
        hanarang::orchestrator::client::Answer::Applied("SPRINT-001: reviewing → aborted".into())
    );
    let runs = loop {
        let runs = p.runs(&s.id).await;
        if runs.iter().all(|r| r.outcome.is_some()) {
            break runs;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    for name in ["static", "runtime"] {
        let mine = reviewer_runs(&runs, name);
        assert_eq!(mine.len(), 1, "{name} ran once: {mine:#?}");
        assert_eq!(mine[0].outcome, Some(RunOutcome::Cancelled), "{name}");
    }
    let events: Vec<String> = p
        .transitions(&s.id)
        .await
        .into_iter()
        .map(|t| t.event)
        .collect();
    assert!(
        !events.iter().any(|e| e.starts_with("failed")),
        "a reviewer stopped by the abort is no failure: {events:?}"
    );
    p.stop().await;
}
