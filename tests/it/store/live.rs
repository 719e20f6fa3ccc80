//! A running sister's latest step on record, on each engine: written while its run goes
//! (the latest winning), read back with the run and by sprint, and kept as it was once the
//! run ended.

use hanarang::sister::RunOutcome;
use hanarang::store::{RunEnd, RunLive, Store};

use crate::support::db::{TestDb, on_each_engine};
use crate::support::record_planner_run;

fn live(step: &str, tokens: i64, cost: Option<f64>) -> RunLive {
    RunLive {
        step: Some(step.into()),
        step_at: Some(1_000 + tokens),
        input_tokens: tokens,
        output_tokens: tokens / 10,
        cost_usd: cost,
    }
}

on_each_engine! {
async fn a_runs_latest_step_is_kept_while_it_runs_and_after_it_ends(engine) {
    let db = TestDb::new(engine, "store").await;
    let store = Store::open(&db.url).await.unwrap();
    let sprint = store
        .create_sprint("app", "goal", None, "cli:tester@test", "b", 1)
        .await
        .unwrap();
    let run_id = record_planner_run(&store, &sprint.id).await;
    assert_eq!(store.runs(&sprint.id).await.unwrap()[0].live, None);
    assert!(store.live_steps().await.unwrap().is_empty());

    store.set_run_live(&run_id, &live("📖 Read README.md", 100, None)).await.unwrap();
    let latest = live("▶️ pytest -q test.py", 250, Some(0.125));
    store.set_run_live(&run_id, &latest).await.unwrap();
    assert_eq!(store.runs(&sprint.id).await.unwrap()[0].live.as_ref(), Some(&latest));
    assert_eq!(store.live_steps().await.unwrap().get(&sprint.id), Some(&latest));
    let status: serde_json::Value =
        serde_json::from_str(&hanarang::report::status_json(&store).await.unwrap()).unwrap();
    assert_eq!(status[0]["now"]["step"], "▶️ pytest -q test.py");
    assert_eq!(status[0]["now"]["input_tokens"], 250);

    store
        .end_run(&RunEnd {
            run_id: run_id.clone(),
            outcome: RunOutcome::ExitNonzero,
            detail: "exited with code 1".into(),
            rejection: None,
            exit_code: Some(1),
            signal: None,
            duration_ms: 5,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            message: None,
            input_tokens: None,
            output_tokens: None,
            cost_usd: None,
            ended_at: 9,
            session_id: None,
            check: None,
            paused_until: None,
        })
        .await
        .unwrap();
    // A step told after the end (a late writer) changes nothing: the run keeps its last.
    store.set_run_live(&run_id, &live("💬 late", 999, None)).await.unwrap();
    assert_eq!(store.runs(&sprint.id).await.unwrap()[0].live.as_ref(), Some(&latest));
    assert!(store.live_steps().await.unwrap().is_empty(), "no sister runs");
}
}
