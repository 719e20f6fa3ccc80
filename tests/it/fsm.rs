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
            "approve(merged)",
            human("approve"),
            Facts {
                approved_head: Some("3f2a1c9e"),
                merge: Some(&MERGED),
                ..facts(false)
            },
        ),
        (
            "approve(refused)",
            human("approve"),
            Facts {
                approved_head: Some("3f2a1c9e"),
                merge: Some(&REFUSED),
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
    ]
}

/// The forge's answers to an approval's merge, as the table's columns give them.
static MERGED: Result<Option<String>, String> = Ok(None);
static REFUSED: Result<Option<String>, String> = Err(String::new());

/// Every state × every event. `-` is a refusal; `X!` means "to X as a protocol
/// violation"; `X+` means "the same stage again as a retry (attempt + 1)"; `X^` means "to
/// X with nothing deployed: the approved commit moved".
const TABLE: &[(State, &[&str])] = &[
    //              lock      h:PR          h:AB      n:ID         n:ER           d:AP      d:RC           d:AB      e:DD       e:DF         failed         interrupted    approve      req_changes    resume         abort      handoff        handoff(idle) budget paused fallback n:ID(same head) d:RC(same) approve(moved) resume(moved) moved published checks_passed checks_failed checks_timed_out forge_merged forge_closed approve(merged) approve(refused) d:AP(forge) forge_failed
    (
        State::Queued,
        &[
            "planning", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "aborted", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "-", "-", "-", "-", "-",
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
            "-",
            "aborted!",
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
            "-",
            "aborted!",
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
            "-",
            "verifying",
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
            "-",
            "escalated",
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
            "deployed",
            "escalated",
            "-",
            "escalated",
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
            "-",
            "aborted!",
            "-",
        ],
    ),
    (
        State::Deployed,
        &[
            "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "-", "-",
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
        ],
    ),
    (
        State::Aborted,
        &[
            "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
            "-", "-",
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

/// Every event the generator can pick from.
fn all_events() -> Vec<Event> {
    let mut events: Vec<Event> = columns().into_iter().map(|(_, e, _)| e).collect();
    for kind in [
        FailureKind::SpawnFailed,
        FailureKind::ExitNonzero,
        FailureKind::Timeout,
    ] {
        events.push(failed(kind));
    }
    events
}

/// One step of a random walk: which event, from which pool (mostly the events that move
/// the sprint on without ending it, so walks get deep into the pipeline; sometimes any
/// accepted event, or any event at all so refusals are exercised), and whether a sister
/// is running.
fn arb_step() -> impl Strategy<Value = (usize, u8, bool)> {
    (any::<usize>(), 0u8..10, any::<bool>())
}

fn arb_policy() -> impl Strategy<Value = Policy> {
    (1u32..5, 1u32..5).prop_map(|(max_attempts, max_review_rounds)| Policy {
        max_attempts,
        max_review_rounds,
        ..policy()
    })
}

fn is_failure(event: &Event) -> bool {
    matches!(
        event,
        Event::Failed { .. }
            | Event::Reported {
                verdict: Verdict::Error | Verdict::DeployFailed,
                ..
            }
    )
}

/// Whether a resting state (terminal or escalated) can be reached from `start` without a
/// user's abort: nothing can wander forever.
fn can_come_to_rest(start: Position, policy: &Policy) -> bool {
    let mut events: Vec<Event> = columns()
        .into_iter()
        .map(|(_, e, _)| e)
        .filter(|e| !matches!(e, Event::Abort { .. }))
        .collect();
    events.push(failed(FailureKind::Timeout));
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([(start, 0)]);
    while let Some((pos, depth)) = queue.pop_front() {
        if pos.state.is_terminal() || pos.state == State::Escalated {
            return true;
        }
        if depth > 12 || !seen.insert(format!("{pos:?}")) {
            continue;
        }
        for event in &events {
            if let Ok(t) = apply(pos, event, facts(false), policy) {
                queue.push_back((t.to, depth + 1));
            }
        }
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_event_sequences_keep_the_invariants(
        policy in arb_policy(),
        steps in proptest::collection::vec(arb_step(), 1..60),
    ) {
        let all = all_events();
        let mut pos = Position::QUEUED;
        let mut approved = false;
        for (pick, pool, running) in steps {
            // What the work showed: nothing, a head left where it was, findings repeated.
            let unchanged_head = (pick / 7 % 4 == 1 || pick / 7 % 4 == 3).then_some("3f2a1c9e");
            let same_findings = pick / 7 % 4 >= 2;
            let facts = |running| Facts { unchanged_head, same_findings, ..facts(running) };
            let accepted: Vec<&Event> = all
                .iter()
                .filter(|e| apply(pos, e, facts(running), &policy).is_ok())
                .collect();
            let onward: Vec<&Event> = accepted
                .iter()
                .copied()
                .filter(|e| {
                    apply(pos, e, facts(running), &policy)
                        .is_ok_and(|t| t.to.state != State::Aborted)
                })
                .collect();
            let event = match pool {
                0..=7 if !onward.is_empty() => onward[pick % onward.len()].clone(),
                8 if !accepted.is_empty() => accepted[pick % accepted.len()].clone(),
                _ => all[pick % all.len()].clone(),
            };
            let result = apply(pos, &event, facts(running), &policy);
            if pos.state.is_terminal() {
                prop_assert!(result.is_err(), "{} accepted {:?}", pos.state, event);
                continue;
            }
            let Ok(t) = result else { continue };
            prop_assert_eq!(t.from, pos);
            let to = t.to;

            // Nothing is reviewed twice for nothing: a head left where it was is never
            // sent to review, and repeated findings never start another round.
            if let Event::Reported { verdict, .. } = &event {
                if *verdict == Verdict::ImplDone && unchanged_head.is_some() && pos.state == State::Implementing {
                    prop_assert_eq!(to.state, State::Escalated);
                }
                if *verdict == Verdict::RequestChanges && same_findings && pos.state == State::Reviewing {
                    prop_assert_eq!(to.state, State::Escalated);
                }
            }

            // Attempts never exceed the limit.
            prop_assert!(to.attempt <= policy.max_attempts, "attempt {} > {}", to.attempt, policy.max_attempts);
            if to.state.stage().is_some() {
                prop_assert!(to.attempt >= 1);
            }

            // A sister's verdict never starts a round past the limit; only a human can.
            if !event.is_human() && to.state == State::Implementing && pos.state != State::Implementing {
                prop_assert!(to.round <= policy.max_review_rounds, "round {} > {}", to.round, policy.max_review_rounds);
            }

            // Every failure counts exactly once.
            if is_failure(&event) && pos.state.stage().is_some() && !matches!(t.note, Some(Note::ProtocolViolation { .. })) {
                if to.state == pos.state {
                    prop_assert_eq!(to.attempt, pos.attempt + 1);
                } else {
                    prop_assert_eq!(to.state, State::Escalated);
                }
            }

            // A deploy is only entered through a human's word: approval from done, or
            // resuming an escalated deploy.
            if to.state == State::Deploying && pos.state != State::Deploying {
                let by_approval = matches!(event, Event::Approve { .. }) && pos.state == State::Done;
                let by_resume = matches!(event, Event::Resume { .. })
                    && pos.state == State::Escalated
                    && pos.resume.map(|r| r.stage) == Some(State::Deploying);
                prop_assert!(by_approval || by_resume, "deploying entered from {} by {:?}", pos.state, event);
                prop_assert!(approved || by_approval, "a deploy before any approval");
            }
            if matches!(event, Event::Approve { .. }) {
                approved = true;
            }

            // Escalated always knows where to resume.
            prop_assert_eq!(to.state == State::Escalated, to.resume.is_some());

            pos = to;
            prop_assert!(can_come_to_rest(pos, &policy), "stuck at {:?}", pos);
        }
    }
}

/// What the loop may know around an event, drawn at random: a wait recorded, a focus
/// waiting, a limit (raised or not) and what was spent, several reviewers, room to start.
#[derive(Debug, Clone)]
struct Around {
    next_run_at: Option<i64>,
    focus: Option<(String, Option<String>)>,
    limit_usd: Option<f64>,
    raised_usd: Option<f64>,
    spent_usd: f64,
    several_reviewers: bool,
    may_start: bool,
    named: bool,
}

fn arb_around() -> impl Strategy<Value = Around> {
    (
        proptest::option::of(0i64..2_000_000),
        proptest::option::of(("[a-z ]{1,12}", proptest::option::of("discord:[0-9]{3}"))),
        proptest::option::of(1.0f64..10.0),
        proptest::option::of(1.0f64..20.0),
        0.0f64..25.0,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(next_run_at, focus, limit_usd, raised_usd, spent_usd, several, may_start, named)| {
                Around {
                    next_run_at,
                    focus,
                    limit_usd,
                    raised_usd,
                    spent_usd,
                    several_reviewers: several,
                    may_start,
                    named,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// `decide` is `apply` plus the rules around it, and the loop adds none: whether the
    /// stage's sister starts with the commit, where a person's words go, what a resume
    /// does to the budget, what frees the lock and stops reviewers.
    #[test]
    fn a_decision_is_the_whole_rule(
        policy in arb_policy(),
        steps in proptest::collection::vec((arb_step(), arb_around()), 1..40),
    ) {
        const NOW: i64 = 1_000_000;
        let all = all_events();
        let mut pos = Position::QUEUED;
        for ((pick, _, running), around) in steps {
            let event = {
                let accepted: Vec<&Event> = all
                    .iter()
                    .filter(|e| apply(pos, e, facts(running), &policy).is_ok())
                    .collect();
                if accepted.is_empty() || pick % 5 == 0 {
                    all[pick % all.len()].clone()
                } else {
                    accepted[pick % accepted.len()].clone()
                }
            };
            let budget = Budget { limit_usd: around.limit_usd, raised_usd: around.raised_usd };
            let before = Before {
                position: pos,
                next_run_at: around.next_run_at,
                focus: around.focus.as_ref().map(|(text, by)| (text.as_str(), by.as_deref())),
                budget,
                spent_usd: around.spent_usd,
                named_contract: around.named.then_some("C-9"),
                named_branch: around.named.then_some("sprint/9"),
                may_start: around.may_start,
            };
            let facts = |running| Facts { several_reviewers: around.several_reviewers, ..facts(running) };
            let applied = apply(pos, &event, facts(running), &policy);
            let decided = decide(before, &event, facts(running), &policy, NOW);
            let d = match (applied, decided) {
                (Err(a), Err(b)) => { prop_assert_eq!(a, b); continue; }
                (Ok(t), Ok(d)) => { prop_assert_eq!(&t, &d.transition); d }
                (a, b) => { prop_assert!(false, "apply {:?} but decide {:?}", a, b); unreachable!() }
            };
            let to = d.transition.to;

            // The budget: only a person's resume raises it, and past the limit it raises
            // it enough to go on.
            if matches!(event, Event::Resume { .. }) && around.limit_usd.is_some() {
                let raised = Budget { raised_usd: d.budget_usd, ..budget };
                if budget.exceeded(around.spent_usd).is_some() {
                    prop_assert!(raised.exceeded(around.spent_usd).is_none());
                }
            } else {
                prop_assert_eq!(d.budget_usd, around.raised_usd);
            }
            let spent_out = Budget { raised_usd: d.budget_usd, ..budget }
                .exceeded(around.spent_usd)
                .is_some();

            // The stage's sister starts with the commit exactly when it may.
            let several_here = around.several_reviewers && to.state == State::Reviewing;
            let starts = to.state.stage().is_some()
                && !several_here
                && d.next_run_at.is_none()
                && !running
                && around.may_start
                && !spent_out;
            match &d.launch {
                Launch::Stage { stage, attempt, .. } => {
                    prop_assert!(starts, "started {:?} from {:?} by {:?}", to, pos, event);
                    prop_assert_eq!(Some(*stage), to.state.stage());
                    prop_assert_eq!(*attempt, to.attempt);
                }
                Launch::Reviewers => prop_assert!(several_here),
                Launch::Nothing => prop_assert!(!starts && !several_here),
            }
            // A retry's wait or a pause is never skipped.
            if d.transition.retry_delay().is_some() {
                prop_assert!(d.next_run_at.is_some());
            }

            // A person's words are never lost: the run started takes them, else the
            // sprint keeps them; the event's words replace the ones waiting.
            let given = match &d.launch {
                Launch::Stage { focus, .. } => {
                    prop_assert!(d.focus.is_none());
                    focus.clone()
                }
                _ => d.focus.clone(),
            };
            let expected = event
                .focus()
                .map(|(by, text)| (text.to_string(), Some(by.to_string())))
                .or(around.focus.clone());
            prop_assert_eq!(given.map(|f| (f.text, f.by)), expected);

            // What a sister named is the sprint's, unless the sprint is aborted.
            let named = around.named && to.state != State::Aborted;
            prop_assert_eq!(d.contract_id.is_some(), named);
            prop_assert_eq!(d.branch.is_some(), named);

            prop_assert_eq!(d.frees_lock, to.state.is_terminal());
            prop_assert_eq!(
                d.stops_reviewers,
                around.several_reviewers && pos.state == State::Reviewing && to.state != State::Reviewing
            );
            pos = to;
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
