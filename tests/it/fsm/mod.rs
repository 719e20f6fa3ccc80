//! The pipeline's rules, state by state and event by event, and as properties over random
//! event sequences. Everything here runs the pure `apply` and `decide`: no process, no
//! database.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use hanarang::handoff::message::{Actor, Verdict};
use hanarang::pipeline::fsm::{Escalation, Note, ResumePoint};
use hanarang::pipeline::{
    Backoff, Before, Budget, Due, Event, Facts, Failure, FailureKind, Launch, Policy, Position,
    Stage, State, apply, decide, due,
};
use proptest::prelude::*;

mod properties;

const ID: &str = "SPRINT-007";

fn policy() -> Policy {
    Policy {
        max_attempts: 3,
        max_review_rounds: 3,
        backoff: Backoff {
            initial: Duration::from_secs(5),
            factor: 2.0,
            max: Duration::from_secs(300),
        },
    }
}

fn facts(sister_running: bool) -> Facts<'static> {
    Facts::of(ID, sister_running)
}

fn reported(actor: Actor, verdict: Verdict) -> Event {
    Event::Reported {
        actor,
        verdict,
        sprint_id: None,
        reason: Some("because".into()),
    }
}

fn failed(kind: FailureKind) -> Event {
    Event::Failed {
        failure: Failure {
            kind,
            detail: "exit code 1".into(),
        },
    }
}

fn human(name: &str) -> Event {
    let by = "cli".to_string();
    match name {
        "approve" => Event::Approve { by },
        "request_changes" => Event::RequestChanges {
            by,
            note: "rename the flag".into(),
        },
        "resume" => Event::Resume {
            by,
            focus: Some("only the tests".into()),
        },
        "abort" => Event::Abort { by, reason: None },
        "handoff" => Event::Handoff { by, focus: None },
        other => panic!("no human event {other}"),
    }
}

/// A sprint in `state`, as it would typically be found there.
fn at(state: State) -> Position {
    let (round, attempt, resume) = match state {
        State::Queued => (0, 0, None),
        State::Planning => (0, 1, None),
        State::Escalated => (
            3,
            3,
            Some(ResumePoint {
                stage: State::Implementing,
                round: 4,
            }),
        ),
        _ => (1, 1, None),
    };
    Position {
        state,
        round,
        attempt,
        resume,
    }
}

/// Every kind of event, with a column name for the table below.
fn columns() -> Vec<(&'static str, Event, Facts<'static>)> {
    vec![
        ("lock", Event::LockAcquired, facts(false)),
        (
            "h:PLAN_READY",
            reported(Actor::Harang, Verdict::PlanReady),
            facts(true),
        ),
        (
            "h:ABORT",
            reported(Actor::Harang, Verdict::Abort),
            facts(true),
        ),
        (
            "n:IMPL_DONE",
            reported(Actor::Narang, Verdict::ImplDone),
            facts(true),
        ),
        (
            "n:ERROR",
            reported(Actor::Narang, Verdict::Error),
            facts(true),
        ),
        (
            "d:APPROVE",
            reported(Actor::Darang, Verdict::Approve),
            facts(true),
        ),
        (
            "d:REQUEST_CHANGES",
            reported(Actor::Darang, Verdict::RequestChanges),
            facts(true),
        ),
        (
            "d:ABORT",
            reported(Actor::Darang, Verdict::Abort),
            facts(true),
        ),
        (
            "e:DEPLOY_DONE",
            reported(Actor::Erang, Verdict::DeployDone),
            facts(true),
        ),
        (
            "e:DEPLOY_FAILED",
            reported(Actor::Erang, Verdict::DeployFailed),
            facts(true),
        ),
        ("failed", failed(FailureKind::BadOutput), facts(true)),
        ("interrupted", failed(FailureKind::Interrupted), facts(true)),
        ("approve", human("approve"), facts(false)),
        ("request_changes", human("request_changes"), facts(false)),
        ("resume", human("resume"), facts(false)),
        ("abort", human("abort"), facts(true)),
        ("handoff", human("handoff"), facts(true)),
        ("handoff(idle)", human("handoff"), facts(false)),
        (
            "budget",
            Event::BudgetExceeded {
                spent_usd: 12.5,
                limit_usd: 10.0,
            },
            facts(true),
        ),
        (
            "paused",
            Event::Paused {
                resume_at_ms: 1_800_000_000_000,
                delay_ms: 60_000,
                detail: "usage limit".into(),
            },
            facts(true),
        ),
        (
            "fallback",
            Event::FellBack {
                agent: "claude-code".into(),
                until_ms: 1_800_000_000_000,
                next: "codex".into(),
                detail: "usage limit".into(),
            },
            facts(true),
        ),
        (
            "n:ID unchanged",
            reported(Actor::Narang, Verdict::ImplDone),
            Facts {
                unchanged_head: Some("3f2a1c9e"),
                ..facts(true)
            },
        ),
        (
            "d:RC same",
            reported(Actor::Darang, Verdict::RequestChanges),
            Facts {
                same_findings: true,
                ..facts(true)
            },
        ),
        (
            "approve(moved)",
            human("approve"),
            Facts {
                approved_head: Some("3f2a1c9e"),
                moved: Some("the branch moved"),
                ..facts(false)
            },
        ),
        (
            "resume(moved)",
            human("resume"),
            Facts {
                approved_head: Some("3f2a1c9e"),
                moved: Some("the branch moved"),
                ..facts(false)
            },
        ),
        (
            "moved",
            Event::Moved {
                reviewed: "3f2a1c9e".into(),
                why: "the branch moved".into(),
            },
            facts(false),
        ),
        (
            "published",
            Event::Published {
                pr: 12,
                url: "https://forge.example/acme/app/pull/12".into(),
                head: "3f2a1c9e".into(),
            },
            facts(false),
        ),
        (
            "checks_passed",
            Event::ChecksPassed {
                head: "3f2a1c9e".into(),
                checks: vec!["test".into()],
                none: false,
            },
            facts(false),
        ),
        (
            "checks_failed",
            Event::ChecksFailed {
                head: "3f2a1c9e".into(),
                failed: vec![hanarang::pipeline::fsm::FailedCheck {
                    name: "test".into(),
                    conclusion: "failure".into(),
                    url: None,
                    summary: None,
                    log_tail: Some("1 failed".into()),
                }],
            },
            facts(false),
        ),
        (
            "checks_timed_out",
            Event::ChecksTimedOut {
                head: "3f2a1c9e".into(),
                pending: vec!["test".into()],
            },
            facts(false),
        ),
        (
            "forge_merged",
            Event::ForgeMerged {
                by: Some("octocat".into()),
                commit: Some("8be0d41".into()),
            },
            facts(false),
        ),
        (
            "forge_closed",
            Event::ForgeClosed {
                by: Some("octocat".into()),
            },
            facts(false),
        ),
        (
            "approve(forge)",
            human("approve"),
            Facts {
                approved_head: Some("3f2a1c9e"),
                delivers: true,
                ..facts(false)
            },
        ),
        (
            "d:AP(forge)",
            reported(Actor::Darang, Verdict::Approve),
            Facts {
                delivers: true,
                ..facts(true)
            },
        ),
        (
            "forge_failed",
            Event::ForgeFailed {
                reason: "the forge refused the token: Bad credentials".into(),
            },
            facts(false),
        ),
        (
            "merged",
            Event::Merged {
                head: "3f2a1c9e".into(),
                commit: Some("8be0d41".into()),
            },
            facts(false),
        ),
        (
            "merge_refused",
            Event::MergeRefused {
                reason: "Required status check \"test\" is expected".into(),
            },
            facts(false),
        ),
        (
            "merge_delayed",
            Event::MergeDelayed {
                reason: "the forge cannot be reached: 502".into(),
            },
            facts(false),
        ),
        (
            "abort(merge asked)",
            human("abort"),
            Facts {
                merge_in_flight: true,
                ..facts(false)
            },
        ),
        (
            "ci_files_held",
            Event::CiFilesHeld {
                head: "3f2a1c9e".into(),
                files: vec![".github/workflows/ci.yml".into()],
            },
            facts(false),
        ),
        (
            "approve_ci",
            Event::ApproveCi { by: "cli".into() },
            Facts {
                ci_files_held: Some("3f2a1c9e"),
                ..facts(false)
            },
        ),
        (
            "approve_ci(nothing held)",
            Event::ApproveCi { by: "cli".into() },
            facts(false),
        ),
        (
            "request_changes(ci held)",
            human("request_changes"),
            Facts {
                ci_files_held: Some("3f2a1c9e"),
                ..facts(false)
            },
        ),
    ]
}

/// Every state × every event. `-` is a refusal; `X!` means "to X as a protocol
/// violation"; `X+` means "the same stage again as a retry (attempt + 1)"; `X^` means "to
/// X with nothing deployed: the approved commit moved".
const TABLE: &[(State, &[&str])] = &[
    //              lock      h:PR          h:AB      n:ID         n:ER           d:AP      d:RC           d:AB      e:DD       e:DF         failed         interrupted    approve      req_changes    resume         abort      handoff        handoff(idle) budget paused fallback n:ID(same head) d:RC(same) approve(moved) resume(moved) moved published checks_passed checks_failed checks_timed_out forge_merged forge_closed approve(forge) d:AP(forge) forge_failed merged merge_refused merge_delayed abort(merge asked) ci_files_held approve_ci approve_ci(none) request_changes(ci held)
    (
        State::Queued,
        &[
            "planning", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "aborted", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "-", "-", "-", "-", "-", "-", "-", "aborted", "-", "-", "-", "-",
        ],
    ),
    (
        State::Planning,
        &[
            "-",
            "implementing",
            "aborted",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "planning+",
            "planning+",
            "-",
            "-",
            "planning",
            "aborted",
            "planning",
            "-",
            "escalated",
            "planning",
            "planning",
            "aborted!",
            "aborted!",
            "-",
            "planning",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "aborted!",
            "-",
            "-",
            "-",
            "-",
            "aborted",
            "-",
            "-",
            "-",
            "-",
        ],
    ),
    (
        State::Implementing,
        &[
            "-",
            "aborted!",
            "aborted!",
            "reviewing",
            "implementing+",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "implementing+",
            "implementing+",
            "-",
            "-",
            "implementing",
            "aborted",
            "implementing",
            "-",
            "escalated",
            "implementing",
            "implementing",
            "escalated",
            "aborted!",
            "-",
            "implementing",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "aborted!",
            "-",
            "-",
            "-",
            "-",
            "aborted",
            "-",
            "-",
            "-",
            "-",
        ],
    ),
    (
        State::Reviewing,
        &[
            "-",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "done",
            "implementing",
            "aborted",
            "aborted!",
            "aborted!",
            "reviewing+",
            "reviewing+",
            "-",
            "-",
            "reviewing",
            "aborted",
            "reviewing",
            "-",
            "escalated",
            "reviewing",
            "reviewing",
            "aborted!",
            "escalated",
            "-",
            "reviewing",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "verifying",
            "-",
            "-",
            "-",
            "-",
            "aborted",
            "-",
            "-",
            "-",
            "-",
        ],
    ),
    (
        State::Verifying,
        &[
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "aborted",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "reviewing^",
            "verifying",
            "done",
            "implementing",
            "escalated",
            "deployed",
            "aborted",
            "-",
            "-",
            "escalated",
            "-",
            "-",
            "-",
            "aborted",
            "verifying",
            "verifying",
            "-",
            "implementing",
        ],
    ),
    (
        State::Done,
        &[
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "deploying",
            "implementing",
            "-",
            "aborted",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "reviewing^",
            "-",
            "reviewing^",
            "-",
            "-",
            "-",
            "-",
            "deployed",
            "aborted",
            "merging",
            "-",
            "escalated",
            "-",
            "-",
            "-",
            "aborted",
            "-",
            "-",
            "-",
            "implementing",
        ],
    ),
    (
        State::Merging,
        &[
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "aborted",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "deployed",
            "aborted",
            "-",
            "-",
            "escalated",
            "deployed",
            "escalated",
            "merging",
            "-",
            "-",
            "-",
            "-",
            "-",
        ],
    ),
    (
        State::Deploying,
        &[
            "-",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "aborted!",
            "deployed",
            "deploying+",
            "deploying+",
            "escalated",
            "-",
            "-",
            "deploying",
            "aborted",
            "deploying",
            "-",
            "escalated",
            "deploying",
            "deploying",
            "aborted!",
            "aborted!",
            "-",
            "reviewing^",
            "reviewing^",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "aborted!",
            "-",
            "-",
            "-",
            "-",
            "aborted",
            "-",
            "-",
            "-",
            "-",
        ],
    ),
    (
        State::Deployed,
        &[
            "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "-", "-", "-", "-", "-", "-", "-", "-", "-",
        ],
    ),
    (
        State::Escalated,
        &[
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "implementing",
            "aborted",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "implementing",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "aborted",
            "-",
            "-",
            "-",
            "-",
        ],
    ),
    (
        State::Aborted,
        &[
            "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "-", "-", "-", "-", "-", "-", "-", "-", "-",
        ],
    ),
];

#[test]
fn every_state_times_every_event() {
    let columns = columns();
    assert_eq!(TABLE.len(), State::ALL.len(), "one row per state");
    let mut failures = Vec::new();
    for (state, row) in TABLE {
        assert_eq!(
            row.len(),
            columns.len(),
            "row {state} has one cell per event"
        );
        for ((name, event, facts), expected) in columns.iter().zip(row.iter()) {
            let from = at(*state);
            let got = match apply(from, event, *facts, &policy()) {
                Err(refusal) => {
                    assert!(
                        refusal.reason.contains(ID),
                        "a refusal names the sprint: {refusal}"
                    );
                    "-".to_string()
                }
                Ok(t) => {
                    assert_eq!(t.from, from);
                    let mut cell = t.to.state.to_string();
                    match &t.note {
                        Some(Note::ProtocolViolation { .. }) => cell.push('!'),
                        Some(Note::Moved { .. }) => cell.push('^'),
                        Some(Note::Retry { .. }) => {
                            assert_eq!(t.to.attempt, from.attempt + 1, "{state} × {name}");
                            cell.push('+');
                        }
                        _ => {}
                    }
                    cell
                }
            };
            if got != *expected {
                failures.push(format!("{state} × {name}: expected {expected}, got {got}"));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn a_stage_fails_three_times_then_escalates_and_resume_starts_it_afresh() {
    let mut pos = Position::enter_for_test(State::Implementing, 2);
    let mut delays = Vec::new();
    for _ in 0..2 {
        let t = apply(pos, &failed(FailureKind::Timeout), facts(false), &policy()).unwrap();
        assert_eq!(t.to.state, State::Implementing);
        delays.push(t.retry_delay().unwrap());
        pos = t.to;
    }
    assert_eq!(
        delays,
        vec![Duration::from_secs(5), Duration::from_secs(10)]
    );
    assert_eq!(pos.attempt, 3);
    let t = apply(
        pos,
        &failed(FailureKind::ExitNonzero),
        facts(false),
        &policy(),
    )
    .unwrap();
    assert_eq!(t.to.state, State::Escalated);
    match &t.note {
        Some(Note::Escalated {
            escalation:
                Escalation::AttemptsExhausted {
                    stage,
                    attempts,
                    last,
                },
        }) => {
            assert_eq!(*stage, Stage::Implementing);
            assert_eq!(*attempts, 3);
            assert_eq!(last.kind, FailureKind::ExitNonzero);
        }
        other => panic!("expected attempts exhausted, got {other:?}"),
    }
    let resumed = apply(t.to, &human("resume"), facts(false), &policy()).unwrap();
    assert_eq!(resumed.to.state, State::Implementing);
    assert_eq!(resumed.to.attempt, 1, "resume resets the attempts");
    assert_eq!(resumed.to.round, 2, "resume keeps the round");
}

#[test]
fn review_rounds_exhausted_escalates_and_resume_starts_the_next_round() {
    let pos = Position::enter_for_test(State::Reviewing, 3);
    let t = apply(
        pos,
        &reported(Actor::Darang, Verdict::RequestChanges),
        facts(true),
        &policy(),
    )
    .unwrap();
    assert_eq!(t.to.state, State::Escalated);
    assert!(matches!(
        t.note,
        Some(Note::Escalated {
            escalation: Escalation::ReviewRoundsExhausted { rounds: 3 }
        })
    ));
    let resumed = apply(t.to, &human("resume"), facts(false), &policy()).unwrap();
    assert_eq!(
        (resumed.to.state, resumed.to.round),
        (State::Implementing, 4)
    );
}

#[test]
fn request_changes_below_the_limit_starts_the_next_round() {
    let pos = Position::enter_for_test(State::Reviewing, 1);
    let t = apply(
        pos,
        &reported(Actor::Darang, Verdict::RequestChanges),
        facts(true),
        &policy(),
    )
    .unwrap();
    assert_eq!(
        (t.to.state, t.to.round, t.to.attempt),
        (State::Implementing, 2, 1)
    );
}

#[test]
fn a_plan_for_another_sprint_is_a_protocol_violation() {
    let event = Event::Reported {
        actor: Actor::Harang,
        verdict: Verdict::PlanReady,
        sprint_id: Some("SPRINT-999".into()),
        reason: None,
    };
    let t = apply(at(State::Planning), &event, facts(true), &policy()).unwrap();
    assert_eq!(t.to.state, State::Aborted);
    match t.note {
        Some(Note::ProtocolViolation { reason }) => {
            assert!(
                reason.contains("SPRINT-999") && reason.contains(ID),
                "{reason}"
            )
        }
        other => panic!("expected a protocol violation, got {other:?}"),
    }
}

#[test]
fn an_interrupted_deploy_escalates_at_once_and_only_a_human_resumes_it() {
    let t = apply(
        at(State::Deploying),
        &failed(FailureKind::Interrupted),
        facts(false),
        &policy(),
    )
    .unwrap();
    assert_eq!(t.to.state, State::Escalated);
    assert!(matches!(
        t.note,
        Some(Note::Escalated {
            escalation: Escalation::DeployInterrupted { .. }
        })
    ));
    let resumed = apply(t.to, &human("resume"), facts(false), &policy()).unwrap();
    assert_eq!(resumed.to.state, State::Deploying);
}

#[test]
fn refusals_say_why() {
    let refusal = apply(
        at(State::Implementing),
        &human("approve"),
        facts(true),
        &policy(),
    )
    .unwrap_err();
    assert_eq!(
        refusal.reason,
        "SPRINT-007 is implementing, not done: only a sprint waiting for deploy approval can be approved"
    );
    let refusal = apply(
        at(State::Deployed),
        &human("abort"),
        facts(false),
        &policy(),
    )
    .unwrap_err();
    assert!(refusal.reason.contains("deployed"), "{refusal}");
    let empty_note = Event::RequestChanges {
        by: "cli".into(),
        note: "  ".into(),
    };
    let refusal = apply(at(State::Done), &empty_note, facts(false), &policy()).unwrap_err();
    assert!(refusal.reason.contains("needs a note"), "{refusal}");
    // A handoff takes one running sister: not a round of several reviewers.
    let several = Facts {
        several_reviewers: true,
        ..facts(true)
    };
    let refusal = apply(at(State::Reviewing), &human("handoff"), several, &policy()).unwrap_err();
    assert!(refusal.reason.contains("several reviewers"), "{refusal}");
    assert!(
        apply(
            at(State::Implementing),
            &human("handoff"),
            several,
            &policy()
        )
        .is_ok()
    );
}

// ---------------------------------------------------------------------------------------
// Properties over random event sequences.

trait EnterForTest {
    fn enter_for_test(state: State, round: u32) -> Position;
}

impl EnterForTest for Position {
    fn enter_for_test(state: State, round: u32) -> Position {
        Position {
            state,
            round,
            attempt: 1,
            resume: None,
        }
    }
}

#[test]
fn a_due_stage_escalates_past_its_budget_and_fans_out_to_several_reviewers() {
    let budget = Budget {
        limit_usd: Some(5.0),
        raised_usd: None,
    };
    assert_eq!(
        due(budget, 5.5, true, State::Reviewing),
        Due::Exceeded(Event::BudgetExceeded {
            spent_usd: 5.5,
            limit_usd: 5.0
        })
    );
    assert_eq!(due(budget, 5.0, true, State::Reviewing), Due::Reviewers);
    assert_eq!(due(budget, 5.0, true, State::Implementing), Due::Stage);
    let raised = Budget {
        raised_usd: Some(10.0),
        ..budget
    };
    assert_eq!(due(raised, 5.5, false, State::Deploying), Due::Stage);
}
