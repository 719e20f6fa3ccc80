//! The pipeline's rules (`SPEC.md` §2) as one pure function:
//! `(sprint, event, policy) -> Transition | Refusal`.
//!
//! No I/O, no clock, no randomness: the orchestrator passes in what it knows and applies
//! what comes out inside one database transaction. Every state change of a sprint goes
//! through `apply`; this is the only place the pipeline's rules are written down.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::policy::Policy;
use super::review::{Review, ReviewVerdict, merge};
use crate::domain::FailureKind;
use crate::domain::{Actor, Verdict};

/// Where a sprint is. Lower-case in JSON, the CLI and the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Queued,
    Planning,
    Implementing,
    Reviewing,
    Done,
    Deploying,
    Deployed,
    Escalated,
    Aborted,
}

impl State {
    pub const ALL: [State; 9] = [
        State::Queued,
        State::Planning,
        State::Implementing,
        State::Reviewing,
        State::Done,
        State::Deploying,
        State::Deployed,
        State::Escalated,
        State::Aborted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Planning => "planning",
            State::Implementing => "implementing",
            State::Reviewing => "reviewing",
            State::Done => "done",
            State::Deploying => "deploying",
            State::Deployed => "deployed",
            State::Escalated => "escalated",
            State::Aborted => "aborted",
        }
    }

    /// The stage a sister works in, if this state is one.
    pub fn stage(self) -> Option<Stage> {
        match self {
            State::Planning => Some(Stage::Planning),
            State::Implementing => Some(Stage::Implementing),
            State::Reviewing => Some(Stage::Reviewing),
            State::Deploying => Some(Stage::Deploying),
            _ => None,
        }
    }

    /// `deployed` and `aborted` accept no event.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Deployed | State::Aborted)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for State {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown state {s:?}"))
    }
}

/// A state in which one sister runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Planning,
    Implementing,
    Reviewing,
    Deploying,
}

impl Stage {
    pub const ALL: [Stage; 4] = [
        Stage::Planning,
        Stage::Implementing,
        Stage::Reviewing,
        Stage::Deploying,
    ];

    pub fn actor(self) -> Actor {
        match self {
            Stage::Planning => Actor::Harang,
            Stage::Implementing => Actor::Narang,
            Stage::Reviewing => Actor::Darang,
            Stage::Deploying => Actor::Erang,
        }
    }

    pub fn state(self) -> State {
        match self {
            Stage::Planning => State::Planning,
            Stage::Implementing => State::Implementing,
            Stage::Reviewing => State::Reviewing,
            Stage::Deploying => State::Deploying,
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.state().fmt(f)
    }
}

/// Where an escalated sprint goes back to when a human resumes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumePoint {
    pub stage: Stage,
    pub round: u32,
}

/// The part of a sprint the rules look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub state: State,
    /// Review round, from 1 once implementing starts (0 while queued or planning).
    pub round: u32,
    /// The try of the current (or last) stage, from 1.
    pub attempt: u32,
    /// Set while escalated.
    pub resume: Option<ResumePoint>,
}

impl Position {
    /// A sprint that was just created.
    pub const QUEUED: Position = Position {
        state: State::Queued,
        round: 0,
        attempt: 0,
        resume: None,
    };

    fn enter(stage: Stage, round: u32) -> Position {
        Position {
            state: stage.state(),
            round,
            attempt: 1,
            resume: None,
        }
    }

    fn with_state(self, state: State) -> Position {
        Position {
            state,
            resume: None,
            ..self
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    /// What the user needs to know: the exit code, the first validation error, the
    /// sister's own reason.
    pub detail: String,
}

/// Something that happened to a sprint. Human events carry who gave them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The project's pipeline lock was taken for this sprint.
    LockAcquired,
    /// A sister returned a valid HandoffMessage.
    Reported {
        actor: Actor,
        verdict: Verdict,
        /// The sprint the message says it is about (harang's `payload.sprintId`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sprint_id: Option<String>,
        /// The sister's reason, for ERROR, DEPLOY_FAILED and ABORT.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A run ended without a valid message.
    Failed {
        failure: Failure,
    },
    /// One of darang's reviewers answered, while several review the round in parallel
    /// (`SPEC.md` §10): the sprint stays in review until every one has.
    Reviewed {
        reviewer: String,
        verdict: ReviewVerdict,
    },
    /// One reviewer's run (its `attempt`-th for the round) ended without a valid message:
    /// it runs again alone, or the stage escalates.
    ReviewerFailed {
        reviewer: String,
        attempt: u32,
        failure: Failure,
    },
    /// Every reviewer of the round has answered (or one aborted): their verdicts, merged
    /// by `review::merge` into darang's.
    ReviewMerged {
        verdicts: std::collections::BTreeMap<String, ReviewVerdict>,
    },
    Approve {
        by: String,
    },
    RequestChanges {
        by: String,
        note: String,
    },
    Resume {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
    },
    Abort {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A fresh session of the running sister, seeded with a handoff document.
    Handoff {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
    },
    /// The sprint's rolled-up spend passed `pipeline.max_cost_usd`.
    BudgetExceeded {
        spent_usd: f64,
        limit_usd: f64,
    },
    /// The running sister said it hit its usage or rate limit (`[agent].pause_on`): the
    /// stage waits until `resume_at_ms` (unix ms; `delay_ms` from now), using no attempt.
    Paused {
        resume_at_ms: i64,
        delay_ms: u64,
        detail: String,
    },
}

impl Event {
    /// A short name for logs and the transitions table.
    pub fn name(&self) -> String {
        match self {
            Event::LockAcquired => "lock_acquired".into(),
            Event::Reported { actor, verdict, .. } => format!("{actor}:{verdict}"),
            Event::Failed { failure } => format!("failed:{}", failure.kind.as_str()),
            Event::Reviewed { reviewer, verdict } => {
                format!("darang/{reviewer}:{}", verdict.verdict())
            }
            Event::ReviewerFailed {
                reviewer, failure, ..
            } => format!("failed/{reviewer}:{}", failure.kind.as_str()),
            Event::ReviewMerged { verdicts } => {
                format!("darang:{}", merged_verdict(verdicts).verdict().verdict())
            }
            Event::Approve { .. } => "approve".into(),
            Event::RequestChanges { .. } => "request_changes".into(),
            Event::Resume { .. } => "resume".into(),
            Event::Abort { .. } => "abort".into(),
            Event::Handoff { .. } => "handoff".into(),
            Event::BudgetExceeded { .. } => "budget_exceeded".into(),
            Event::Paused { .. } => "paused".into(),
        }
    }

    /// Who gave it, for an event a person gave (`discord:<id>`, `cli:<user>@<host>`).
    pub fn by(&self) -> Option<&str> {
        match self {
            Event::Approve { by }
            | Event::RequestChanges { by, .. }
            | Event::Resume { by, .. }
            | Event::Abort { by, .. }
            | Event::Handoff { by, .. } => Some(by),
            _ => None,
        }
    }

    /// Given by a person (CLI or Discord), not by a sister or the orchestrator.
    pub fn is_human(&self) -> bool {
        matches!(
            self,
            Event::Approve { .. }
                | Event::RequestChanges { .. }
                | Event::Resume { .. }
                | Event::Abort { .. }
                | Event::Handoff { .. }
        )
    }
}

/// Why a sprint needs a human.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum Escalation {
    /// The stage failed `max_attempts` times.
    AttemptsExhausted {
        stage: Stage,
        attempts: u32,
        last: Failure,
    },
    /// The reviewer asked for another round past `max_review_rounds`.
    ReviewRoundsExhausted {
        rounds: u32,
    },
    /// The orchestrator died while a deploy ran: its outcome is unknown and a deploy is
    /// never re-run without a human's word.
    DeployInterrupted {
        detail: String,
    },
    BudgetExceeded {
        spent_usd: f64,
        limit_usd: f64,
    },
}

/// What the user should be told about a transition beyond its states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Note {
    /// The stage failed and runs again after `delay`.
    Retry {
        failure: Failure,
        delay_ms: u64,
    },
    Escalated {
        escalation: Escalation,
    },
    /// A valid message that is wrong for the state: the sprint is aborted.
    ProtocolViolation {
        reason: String,
    },
    /// The sister hit its usage limit: the stage runs again at `resume_at_ms`.
    Paused {
        resume_at_ms: i64,
        delay_ms: u64,
        detail: String,
    },
}

/// The result of an accepted event.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub from: Position,
    pub to: Position,
    pub note: Option<Note>,
}

impl Transition {
    /// How long to wait before the stage's sister is spawned again.
    pub fn retry_delay(&self) -> Option<Duration> {
        match &self.note {
            Some(Note::Retry { delay_ms, .. } | Note::Paused { delay_ms, .. }) => {
                Some(Duration::from_millis(*delay_ms))
            }
            _ => None,
        }
    }
}

/// An event the rules do not accept in this state; nothing changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Refusal {}

/// What the rules know of a sprint besides its position.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub sprint_id: &'a str,
    /// Whether a sister process of this sprint is running right now.
    pub sister_running: bool,
}

/// The pipeline's rules. Pure: same inputs, same answer.
pub fn apply(
    at: Position,
    event: &Event,
    facts: Facts<'_>,
    policy: &Policy,
) -> Result<Transition, Refusal> {
    let id = facts.sprint_id;
    let refuse = |reason: String| Err(Refusal { reason });
    let to = |to: Position, note: Option<Note>| Ok(Transition { from: at, to, note });

    if at.state.is_terminal() {
        return refuse(format!(
            "{id} is {}: a finished sprint accepts no more commands",
            at.state
        ));
    }

    match event {
        Event::LockAcquired => match at.state {
            State::Queued => to(Position::enter(Stage::Planning, 0), None),
            other => refuse(format!(
                "{id} is {other}, not queued: it already has the lock"
            )),
        },

        Event::Reported {
            actor,
            verdict,
            sprint_id,
            reason,
        } => {
            let Some(stage) = at.state.stage() else {
                return refuse(format!(
                    "{id} is {}: no sister runs, so a message from {actor} is not expected",
                    at.state
                ));
            };
            if *actor != stage.actor() {
                return violation(
                    at,
                    format!(
                        "{id} is {}, so {} was expected to report, but the message is from {actor}",
                        at.state,
                        stage.actor()
                    ),
                );
            }
            if let Some(claimed) = sprint_id
                && claimed != id
            {
                return violation(
                    at,
                    format!("the message is about {claimed:?}, but this sprint is {id}"),
                );
            }
            let reason = reason.clone().unwrap_or_default();
            match (stage, verdict) {
                (Stage::Planning, Verdict::PlanReady) => {
                    to(Position::enter(Stage::Implementing, 1), None)
                }
                (Stage::Implementing, Verdict::ImplDone) => {
                    to(Position::enter(Stage::Reviewing, at.round), None)
                }
                (Stage::Reviewing, Verdict::Approve) => to(at.with_state(State::Done), None),
                (Stage::Reviewing, Verdict::RequestChanges) => {
                    let next = at.round + 1;
                    if next > policy.max_review_rounds {
                        to(
                            escalate(at, Stage::Implementing, next),
                            Some(Note::Escalated {
                                escalation: Escalation::ReviewRoundsExhausted { rounds: at.round },
                            }),
                        )
                    } else {
                        to(Position::enter(Stage::Implementing, next), None)
                    }
                }
                (Stage::Planning | Stage::Reviewing, Verdict::Abort) => {
                    to(at.with_state(State::Aborted), None)
                }
                (Stage::Implementing, Verdict::Error) => fail(
                    at,
                    stage,
                    Failure {
                        kind: FailureKind::Error,
                        detail: reason,
                    },
                    policy,
                ),
                (Stage::Deploying, Verdict::DeployDone) => to(at.with_state(State::Deployed), None),
                (Stage::Deploying, Verdict::DeployFailed) => fail(
                    at,
                    stage,
                    Failure {
                        kind: FailureKind::DeployFailed,
                        detail: reason,
                    },
                    policy,
                ),
                (_, verdict) => violation(
                    at,
                    format!(
                        "{actor} may not answer {verdict} while {id} is {}",
                        at.state
                    ),
                ),
            }
        }

        Event::Reviewed { reviewer, .. } => match at.state {
            State::Reviewing => to(at, None),
            other => refuse(format!(
                "{id} is {other}, not reviewing: reviewer {reviewer}'s verdict comes too late"
            )),
        },

        Event::ReviewerFailed {
            reviewer,
            attempt,
            failure,
        } => match at.state {
            State::Reviewing => fail(
                Position {
                    attempt: *attempt,
                    ..at
                },
                Stage::Reviewing,
                failure.clone(),
                policy,
            )
            .map(|t| Transition {
                // The sprint's own attempt is the stage's: each reviewer counts its own.
                from: at,
                to: Position {
                    attempt: if t.to.state == State::Reviewing {
                        at.attempt
                    } else {
                        t.to.attempt
                    },
                    ..t.to
                },
                note: t.note,
            }),
            other => refuse(format!(
                "{id} is {other}, not reviewing: reviewer {reviewer}'s failure no longer matters"
            )),
        },

        Event::ReviewMerged { verdicts } => match at.state {
            State::Reviewing => {
                let verdict = merged_verdict(verdicts).verdict().verdict();
                let reported = Event::Reported {
                    actor: Actor::Darang,
                    verdict,
                    sprint_id: None,
                    reason: None,
                };
                apply(at, &reported, facts, policy)
            }
            other => refuse(format!(
                "{id} is {other}, not reviewing: there is no review round to close"
            )),
        },

        Event::Failed { failure } => {
            let Some(stage) = at.state.stage() else {
                return refuse(format!(
                    "{id} is {}: no sister runs, so no run can fail",
                    at.state
                ));
            };
            fail(at, stage, failure.clone(), policy)
        }

        Event::Approve { .. } => match at.state {
            State::Done => to(Position::enter(Stage::Deploying, at.round), None),
            other => refuse(format!(
                "{id} is {other}, not done: only a sprint waiting for deploy approval can be approved"
            )),
        },

        Event::RequestChanges { note, .. } => match at.state {
            _ if note.trim().is_empty() => refuse(format!(
                "a request for changes to {id} needs a note saying what to change"
            )),
            State::Done => to(Position::enter(Stage::Implementing, at.round + 1), None),
            other => refuse(format!(
                "{id} is {other}, not done: changes can be requested only while it waits for deploy approval"
            )),
        },

        Event::Resume { .. } => match (at.state, at.resume) {
            (State::Escalated, Some(point)) => to(Position::enter(point.stage, point.round), None),
            (State::Escalated, None) => refuse(format!(
                "{id} is escalated but its resume point is unknown; abort it and start a new sprint"
            )),
            // A stage that waits (a usage-limit pause, a retry's backoff) starts at once:
            // same stage, same attempt, no wait.
            (other, _) if other.stage().is_some() && !facts.sister_running => to(at, None),
            (other, _) if other.stage().is_some() => refuse(format!(
                "{id} is {other} and its sister is running: there is nothing to resume"
            )),
            (other, _) => refuse(format!(
                "{id} is {other}: only an escalated sprint, or a stage waiting to run again, can be resumed"
            )),
        },

        Event::Abort { .. } => to(at.with_state(State::Aborted), None),

        Event::Handoff { .. } => match at.state.stage() {
            Some(_) if facts.sister_running => to(at, None),
            Some(stage) => refuse(format!(
                "no sister of {id} is running right now ({} is waiting to retry {stage}): there is no session to hand off",
                stage.actor()
            )),
            None => refuse(format!(
                "{id} is {}: no sister is running, so there is no session to hand off",
                at.state
            )),
        },

        Event::BudgetExceeded {
            spent_usd,
            limit_usd,
        } => match at.state.stage() {
            Some(stage) => to(
                escalate(at, stage, at.round),
                Some(Note::Escalated {
                    escalation: Escalation::BudgetExceeded {
                        spent_usd: *spent_usd,
                        limit_usd: *limit_usd,
                    },
                }),
            ),
            None => refuse(format!(
                "{id} is {}: nothing runs that could spend more",
                at.state
            )),
        },

        Event::Paused {
            resume_at_ms,
            delay_ms,
            detail,
        } => match at.state.stage() {
            Some(_) => to(
                at,
                Some(Note::Paused {
                    resume_at_ms: *resume_at_ms,
                    delay_ms: *delay_ms,
                    detail: detail.clone(),
                }),
            ),
            None => refuse(format!(
                "{id} is {}: no sister runs, so none can be paused",
                at.state
            )),
        },
    }
}

/// A failure of the running stage: retry after backoff, or escalate when the stage has
/// used its tries. An interrupted deploy always escalates.
fn fail(
    at: Position,
    stage: Stage,
    failure: Failure,
    policy: &Policy,
) -> Result<Transition, Refusal> {
    let (to, note) = if stage == Stage::Deploying && failure.kind == FailureKind::Interrupted {
        (
            escalate(at, stage, at.round),
            Note::Escalated {
                escalation: Escalation::DeployInterrupted {
                    detail: failure.detail,
                },
            },
        )
    } else if at.attempt >= policy.max_attempts {
        (
            escalate(at, stage, at.round),
            Note::Escalated {
                escalation: Escalation::AttemptsExhausted {
                    stage,
                    attempts: at.attempt,
                    last: failure,
                },
            },
        )
    } else {
        let delay = policy.backoff.delay(at.attempt);
        (
            Position {
                attempt: at.attempt + 1,
                ..at
            },
            Note::Retry {
                failure,
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            },
        )
    };
    Ok(Transition {
        from: at,
        to,
        note: Some(note),
    })
}

/// The round's verdict from its reviewers' (the merge rule, on verdicts alone).
fn merged_verdict(
    verdicts: &std::collections::BTreeMap<String, ReviewVerdict>,
) -> super::review::Merged<(), ()> {
    let reviews: Vec<Review<(), ()>> = verdicts
        .iter()
        .map(|(reviewer, verdict)| Review {
            reviewer: reviewer.clone(),
            verdict: *verdict,
            issues: Vec::new(),
            failed: Vec::new(),
        })
        .collect();
    merge(&reviews)
}

fn escalate(at: Position, stage: Stage, round: u32) -> Position {
    Position {
        state: State::Escalated,
        resume: Some(ResumePoint { stage, round }),
        ..at
    }
}

fn violation(at: Position, reason: String) -> Result<Transition, Refusal> {
    Ok(Transition {
        from: at,
        to: at.with_state(State::Aborted),
        note: Some(Note::ProtocolViolation { reason }),
    })
}
