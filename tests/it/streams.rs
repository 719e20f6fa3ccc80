//! Sisters whose CLI prints an event stream (`stream = "claude-code"`), misbehaving: a
//! stream far past `max_output_bytes`, one line of 50 MiB, lines that are no JSON, a stream
//! cut before its final event, and a program that streams nothing at all. Each gets one
//! clear outcome, the final message is never lost when it is there, and the run's steps
//! come out as they happen.

use hanarang::config::EventStream;
use hanarang::handoff::message::Actor;
use hanarang::sister::{Progress, RunControl, RunOutcome, RunReport, run};
use tokio::sync::{oneshot, watch};

use crate::support::Fixture;

/// Runs `stream_events.sh <args>` as a Claude Code stream; its report and its last
/// progress.
async fn stream(args: &[&str]) -> (RunReport, Progress) {
    let mut f = Fixture::new(Actor::Harang, "stream_events.sh");
    f.request.spec.args = args.iter().map(|a| a.to_string()).collect();
    f.request.spec.stream = Some(EventStream::ClaudeCode);
    f.request.spec.output_pointer = "/structured_output".into();
    let (_stop_tx, stop) = oneshot::channel();
    let (progress, steps) = watch::channel(Progress::default());
    let report = run(
        &f.request,
        RunControl {
            stop,
            start_by: None,
            progress: Some(progress),
        },
    )
    .await;
    let last = steps.borrow().clone();
    (report, last)
}

#[tokio::test]
async fn a_50_mib_stream_delivers_its_final_message_and_its_last_step() {
    let (report, last) = stream(&["flood", "50"]).await;
    assert_eq!(report.outcome, RunOutcome::Handoff, "{}", report.detail);
    assert!(report.stdout_bytes > 50_000_000, "{}", report.stdout_bytes);
    assert!(report.stdout_tail.starts_with(r#"{"type":"result""#));
    assert_eq!(last.step.as_deref(), Some("▶️ pytest -q test.py"));
    assert_eq!((last.input_tokens, last.cost_usd), (7, Some(0.5)));
}

#[tokio::test]
async fn a_50_mib_line_is_skipped_and_the_final_message_kept() {
    let (report, _) = stream(&["long-line", "50"]).await;
    assert_eq!(report.outcome, RunOutcome::Handoff, "{}", report.detail);
    assert!(report.message.is_some());
}

#[tokio::test]
async fn lines_that_are_no_json_are_skipped() {
    let (report, last) = stream(&["garbage"]).await;
    assert_eq!(report.outcome, RunOutcome::Handoff, "{}", report.detail);
    assert_eq!(last.step.as_deref(), Some("💬 All good."));
}

#[tokio::test]
async fn a_stream_cut_before_its_final_event_is_bad_output_that_says_so() {
    let (report, last) = stream(&["cut"]).await;
    assert_eq!(report.outcome, RunOutcome::BadOutput);
    assert!(
        report
            .detail
            .starts_with("the event stream ended without its final event"),
        "{}",
        report.detail
    );
    assert_eq!(last.step.as_deref(), Some("✏️ Edit src/lib.rs"));
}

#[tokio::test]
async fn a_program_that_streams_nothing_still_hands_off() {
    let mut f = Fixture::new(Actor::Harang, "valid.sh");
    f.request.spec.stream = Some(EventStream::ClaudeCode);
    let report = run(&f.request, RunControl::unattended()).await;
    assert_eq!(report.outcome, RunOutcome::Handoff, "{}", report.detail);
}
