//! Paying once, with the real Claude Code: a retry continues the rejected run's session.

use super::*;

/// What a retry costs after narang's answer was rejected: Claude Code continuing the
/// rejected run's session (`resume_args`), or starting afresh (no session recorded). The
/// fake model charges every turn the same, so the figure is the turns the retry takes.
async fn retry_after_a_rejected_answer(fresh: bool) -> (Vec<Value>, usize) {
    let model = FakeModel::start().await;
    model.reject_first("narang", 1);
    // Without a session id on record a retry cannot resume: it starts afresh.
    let extra = if fresh {
        "session_pointer = \"/no_session_here\"\n"
    } else {
        ""
    };
    let bench = Bench::with("claude-code", extra, "claude", &model);
    let out = bench
        .hanarang(&["run", "add a greeting file", "--auto-approve"])
        .await;
    run_ok(&out);
    let log = bench.assert_delivered("SPRINT-001", &model).await;
    let narang: Vec<Value> = log["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["actor"] == "narang")
        .cloned()
        .collect();
    assert_eq!(
        narang
            .iter()
            .map(|r| r["outcome"].clone())
            .collect::<Vec<_>>(),
        ["bad_output", "handoff"],
        "{log:#}"
    );
    let turns = model
        .requests()
        .iter()
        .filter(|r| r.actor.as_deref() == Some("narang"))
        .count();
    (narang, turns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the agent CLIs from npm: scripts/test runs it (cargo test -- --include-ignored)"]
async fn a_resumed_retry_pays_for_fewer_turns_than_a_fresh_one() {
    let (resumed, resumed_turns) = retry_after_a_rejected_answer(false).await;
    let (fresh, fresh_turns) = retry_after_a_rejected_answer(true).await;
    assert_eq!(resumed[1]["resumes"], resumed[0]["run_id"]);
    assert!(fresh[1]["resumes"].is_null());
    let tokens = |runs: &[Value]| runs[1]["input_tokens"].as_i64().unwrap_or(-1);
    // The resumed session still holds the commit its first run made: it answers at once.
    // A fresh one makes the commit again first.
    assert!(
        tokens(&resumed) < tokens(&fresh),
        "input tokens of the retry: resumed {} vs fresh {}",
        tokens(&resumed),
        tokens(&fresh)
    );
    eprintln!(
        "retry after a rejected answer: resumed {} input tokens ({} narang turns in all), fresh {} ({} turns)",
        tokens(&resumed),
        resumed_turns,
        tokens(&fresh),
        fresh_turns
    );
}
