//! Handoff on demand: a user stops the running sister and a fresh session of it starts
//! from a document composed from what the stopped one was given and what it observably did.

use hanarang::handoff::message::Actor;
use hanarang::orchestrator::client::Answer;
use hanarang::pipeline::State;
use hanarang::sister::RunOutcome;
use hanarang::store::CommandKind;

use crate::support::pipeline::{Files, Pipeline, Setup, assert_log_is_whole, workdir};
use crate::support::{alive, git};

#[tokio::test(flavor = "multi_thread")]
async fn a_handoff_restarts_the_sister_with_what_the_stopped_session_did() {
    let files = Files::new(&Setup {
        narang: "commit-then-hang-first 1",
        // In a git workdir the IMPL_DONE claim is checked: name a branch that exists.
        extra: "[agent.narang.env]\nSAY_BRANCH = \"feature/sprint-001\"\n",
        ..Setup::default()
    });
    let repo = workdir(&files, "app");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "root"]);
    let p = Pipeline::start_with(files).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    let pid = p.files.wait_hanging(Actor::Narang).await;

    let answer = p
        .command(
            &s.id,
            CommandKind::Handoff,
            Some("finish the form, skip the password rules"),
        )
        .await;
    assert_eq!(
        answer,
        Answer::Applied("SPRINT-001: implementing → implementing".into())
    );
    assert_eq!(
        alive(&[pid]),
        Vec::<u32>::new(),
        "the stopped session is gone"
    );
    p.wait_for(&s.id, State::Done).await;

    let runs = p.runs(&s.id).await;
    let narang: Vec<_> = runs.iter().filter(|r| r.actor == Actor::Narang).collect();
    assert_eq!(narang.len(), 2);
    let (stopped, fresh) = (narang[0], narang[1]);
    assert_eq!(stopped.outcome, Some(RunOutcome::HandedOff));
    assert_eq!(
        fresh.parent_run_id.as_deref(),
        Some(stopped.run_id.as_str())
    );
    assert_eq!(
        fresh.attempt, stopped.attempt,
        "a handoff is not a failed attempt"
    );
    assert!(fresh.synthesized);

    let stdin = p.files.stdin_of(&fresh.run_id);
    for expected in [
        "was handed off to this fresh session by a user",
        "add login form",
        "Files it changed: ",
        "login.txt",
        "- The end of its log:\n",
        "  wrote the login form; now stuck on the password rules\n",
    ] {
        assert!(
            stdin.contains(expected),
            "{expected:?} missing from\n{stdin}"
        );
    }
    // The prompt says the document was composed, and from which run.
    let source = format!(
        "in <handoff-context> at the end: synthesized by the orchestrator from narang run {}.",
        stopped.run_id
    );
    assert!(stdin.contains(&source), "{stdin}");
    // The focus is the person's word on the round: said once, where the job begins.
    assert!(
        stdin.contains(
            "is for what a person asked: <request from=\"cli\">finish the form, skip the password rules</request>\n"
        ),
        "{stdin}"
    );
    assert!(!stdin.contains("Additional focus"), "{stdin}");
    // The document the stopped session had is carried over.
    assert!(
        stdin.contains("harang") && stdin.contains("wrote the plan"),
        "{stdin}"
    );

    let log = p.transitions(&s.id).await;
    assert_log_is_whole(&log);
    let handoffs: Vec<_> = log.iter().filter(|t| t.event == "handoff").collect();
    assert_eq!(handoffs.len(), 1);
    assert_eq!(
        (handoffs[0].from, handoffs[0].to),
        (State::Implementing, State::Implementing)
    );

    // `sprint log` shows the chain.
    let out = p.files.hanarang(&["sprint", "log", &s.id]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("← {}", stopped.run_id)),
        "the fresh run names its parent:\n{text}"
    );
    assert!(text.contains("handed_off"), "{text}");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handoff_with_no_sister_running_is_refused() {
    let p = Pipeline::start(Setup::default()).await;
    let s = p.start_sprint("app", "Add a login page", None).await;
    p.wait_for(&s.id, State::Done).await;
    let out = p
        .files
        .hanarang(&["sprint", "handoff", &s.id, "--focus", "anything"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(
            "SPRINT-001 is done: no sister is running, so there is no session to hand off"
        ),
        "{stderr}"
    );
    p.stop().await;
}
