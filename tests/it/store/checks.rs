//! The project's checks on record, on each engine: written with the end of the run they
//! checked (in a transition's commit, or alone), dropped with an end that comes too late,
//! and read back in order.

use hanarang::handoff::{Actor, HandoffDocument};
use hanarang::pipeline::{Event, Failure, FailureKind};
use hanarang::sister::RunOutcome;
use hanarang::store::{CheckRecord, NewRun, RunEnd, Store};

use crate::support::db::{TestDb, on_each_engine};
use crate::support::{commit_event, planner_run};

fn end(run_id: &str, outcome: RunOutcome, check: Option<CheckRecord>) -> RunEnd {
    RunEnd {
        run_id: run_id.to_string(),
        outcome,
        detail: "narang IMPL_DONE".into(),
        rejection: None,
        exit_code: Some(0),
        signal: None,
        duration_ms: 5,
        stdout_tail: "{}".into(),
        stderr_tail: String::new(),
        message: None,
        input_tokens: None,
        output_tokens: None,
        cost_usd: None,
        ended_at: 8,
        session_id: None,
        paused_until: None,
        check,
    }
}

fn check(run_id: &str, exit_code: Option<i32>, tail: &str) -> CheckRecord {
    CheckRecord {
        run_id: run_id.to_string(),
        command: vec!["cargo".into(), "test".into(), "--quiet".into()],
        head: Some("0123456789abcdef0123456789abcdef01234567".into()),
        exit_code,
        duration_ms: 1234,
        output_tail: tail.into(),
        at: 8,
        at_base: false,
    }
}

on_each_engine! {
async fn a_check_is_recorded_with_the_end_of_its_run(engine) {
    let db = TestDb::new(engine, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let queued = store
        .create_sprint("app", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    assert_eq!(store.checks(&queued.id).await.unwrap(), vec![]);
    let handoff = HandoffDocument::default();
    let first = planner_run(&queued.id, &handoff);
    let (running, _) = commit_event(&store, &queued, &Event::LockAcquired, None, Some(first), 2)
        .await
        .unwrap();
    let run_id = format!("{}-R01", queued.id);

    // In a transition's commit: the run's end and its failed check, together.
    let failed = check(&run_id, Some(1), "running 3 tests\nFAILED: login::empty \"form\"");
    let ended = end(&run_id, RunOutcome::CheckFailed, Some(failed.clone()));
    let event = Event::Failed {
        failure: Failure {
            kind: FailureKind::CheckFailed,
            detail: "check failed".into(),
        },
    };
    commit_event(&store, &running, &event, Some(&ended), None, 8)
        .await
        .unwrap();
    assert_eq!(store.checks(&queued.id).await.unwrap(), vec![failed.clone()]);
    let runs = store.runs(&queued.id).await.unwrap();
    assert_eq!(runs[0].outcome, Some(RunOutcome::CheckFailed));

    // An end that comes after the run's end was recorded is dropped, its check with it.
    let late = end(&run_id, RunOutcome::Handoff, Some(check(&run_id, Some(0), "ok")));
    store.end_run(&late).await.unwrap();
    assert_eq!(store.checks(&queued.id).await.unwrap(), vec![failed.clone()]);

    // Alone (`end_run`): a check killed at its timeout has no exit code, and none in a
    // workdir that is no git repository has no head.
    let second = NewRun {
        number: 2,
        actor: Actor::Narang,
        ..planner_run(&queued.id, &handoff)
    };
    let second_id = store.start_run(second, running.epoch).await.unwrap();
    let killed = CheckRecord {
        head: None,
        ..check(&second_id, None, "")
    };
    store
        .end_run(&end(&second_id, RunOutcome::CheckFailed, Some(killed.clone())))
        .await
        .unwrap();
    assert_eq!(store.checks(&queued.id).await.unwrap(), vec![failed, killed]);
    // Another sprint's checks are its own.
    let other = store
        .create_sprint("app", "other", None, "cli:tester@test", "b", 9)
        .await
        .unwrap();
    assert_eq!(store.checks(&other.id).await.unwrap(), vec![]);
}
}

on_each_engine! {
/// What a forge said at a base commit is kept per repository and commit; a later read
/// replaces it; another repository's or commit's is its own.
async fn the_forges_checks_at_a_base_are_kept_per_repository_and_commit(engine) {
    let db = TestDb::new(engine, "base-checks").await;
    let store = Store::open(&db.url).await.unwrap();
    let check = |name: &str, result: &str| hanarang::store::BaseCheck {
        name: name.into(),
        result: result.into(),
    };
    assert_eq!(store.forge_base_checks("app", "abc").await.unwrap(), None);
    store
        .save_forge_base_checks("app", "abc", &[check("static", "pending")], 1)
        .await
        .unwrap();
    store
        .save_forge_base_checks("app", "abc", &[check("static", "success"), check("tests", "failure")], 2)
        .await
        .unwrap();
    store
        .save_forge_base_checks("site", "abc", &[], 3)
        .await
        .unwrap();
    assert_eq!(
        store.forge_base_checks("app", "abc").await.unwrap(),
        Some(vec![check("static", "success"), check("tests", "failure")])
    );
    assert_eq!(store.forge_base_checks("site", "abc").await.unwrap(), Some(Vec::new()));
    assert_eq!(store.forge_base_checks("app", "def").await.unwrap(), None);
    store.close().await;
}
}
