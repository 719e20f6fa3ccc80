//! The state machine as one pure function:
//! `(position, event, facts, policy) -> Transition | Refusal`.
//!
//! No I/O, no clock, no randomness. Every state change of a sprint goes through `apply`,
//! asked by `decide` (`decide.rs`), which adds what the sprint becomes around the move;
//! this is the only place the moves themselves are written down.

use std::fmt;
use std::time::Duration;

use super::event::merged_verdict;
pub use super::event::{Escalation, Event, FailedCheck, Failure, Note};
use super::policy::Policy;
pub use super::position::{Position, ResumePoint, Stage, State};
use crate::domain::FailureKind;
use crate::domain::Verdict;

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
    /// the implementer's `IMPL_DONE` left the branch's head where the round before's review saw
    /// it (known in a git workdir, from round 2): that head.
    pub unchanged_head: Option<&'a str>,
    /// The review's findings are the round before's (`rules::same_findings`, from round 2).
    pub same_findings: bool,
    /// `[agent.darang.reviewers]` is set: the review stage is several runs at once.
    pub several_reviewers: bool,
    /// An approving review's verdict: the head it reviewed; an event that would start the
    /// deployer: the commit the review approved (both known in a git workdir).
    pub approved_head: Option<&'a str>,
    /// An event that would start the deployer: why the approved commit is no longer what
    /// the branch holds (it moved, an object's bytes changed).
    pub moved: Option<&'a str>,
    /// The project delivers through its forge: an approving review goes to `verifying`.
    pub delivers: bool,
    /// The project says what deploying means (`deploy`): after a forge merge, the
    /// deployer runs.
    pub deploys: bool,
    /// A sprint in `merging`: its merge is being asked of the forge right now, so its
    /// answer is not to be lost to another move.
    pub merge_in_flight: bool,
    /// A sprint in `verifying` whose reviewed head changes files the forge would run,
    /// waiting for a person's word before the push: that head.
    pub ci_files_held: Option<&'a str>,
}

impl<'a> Facts<'a> {
    /// A sprint's facts with nothing learnt from its work.
    pub fn of(sprint_id: &'a str, sister_running: bool) -> Facts<'a> {
        Facts {
            sprint_id,
            sister_running,
            unchanged_head: None,
            same_findings: false,
            several_reviewers: false,
            approved_head: None,
            moved: None,
            delivers: false,
            deploys: false,
            merge_in_flight: false,
            ci_files_held: None,
        }
    }
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
                (Stage::Implementing, Verdict::ImplDone) => match facts.unchanged_head {
                    // Nothing new to review: a human decides, the round stays open.
                    Some(head) => to(
                        escalate(at, Stage::Implementing, at.round),
                        Some(Note::Escalated {
                            escalation: Escalation::NoProgress {
                                round: at.round,
                                head: head.to_string(),
                            },
                        }),
                    ),
                    _ => to(Position::enter(Stage::Reviewing, at.round), None),
                },
                // With a forge, the pull request's checks come first.
                (Stage::Reviewing, Verdict::Approve) => to(
                    at.with_state(if facts.delivers {
                        State::Verifying
                    } else {
                        State::Done
                    }),
                    approved(facts),
                ),
                (Stage::Reviewing, Verdict::RequestChanges) => {
                    let next = at.round + 1;
                    if next > policy.max_review_rounds {
                        rounds_exhausted(at)
                    } else if facts.same_findings {
                        // Rounds remain, but another would be paid for nothing.
                        to(
                            escalate(at, Stage::Implementing, next),
                            Some(Note::Escalated {
                                escalation: Escalation::SameFindings { round: at.round },
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
                let verdict = merged_verdict(verdicts).verdict();
                let reported = Event::Reported {
                    actor: Stage::Reviewing.actor(),
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

        Event::Approve { .. } => match (at.state, facts.moved) {
            (State::Done, Some(why)) => back_to_review(at, facts.approved_head, why),
            // With a forge, an approval is committed first; the merge at the approved
            // head is asked after, and its answer is an event.
            (State::Done, None) if facts.delivers => {
                to(at.with_state(State::Merging), approved(facts))
            }
            (State::Done, None) => to(Position::enter(Stage::Deploying, at.round), approved(facts)),
            (other, _) => refuse(format!(
                "{id} is {other}, not done: only a sprint waiting for deploy approval can be approved"
            )),
        },

        Event::RequestChanges { note, .. } => match at.state {
            _ if note.trim().is_empty() => refuse(format!(
                "a request for changes to {id} needs a note saying what to change"
            )),
            State::Done => to(Position::enter(Stage::Implementing, at.round + 1), None),
            // Instead of letting its CI files run: the next round.
            State::Verifying if facts.ci_files_held.is_some() => {
                to(Position::enter(Stage::Implementing, at.round + 1), None)
            }
            other => refuse(format!(
                "{id} is {other}, not done: changes can be requested only while it waits for deploy approval"
            )),
        },

        Event::Resume { .. } => match (at.state, at.resume, facts.moved) {
            // A resume that would start the deployer deploys nothing that moved.
            (_, _, Some(why)) if !facts.sister_running && resumes_deploy(at) => {
                back_to_review(at, facts.approved_head, why)
            }
            (State::Escalated, Some(point), _) => to(
                Position::resumed(point),
                (point.stage == State::Deploying)
                    .then(|| approved(facts))
                    .flatten(),
            ),
            (State::Escalated, None, _) => refuse(format!(
                "{id} is escalated but its resume point is unknown; abort it and start a new sprint"
            )),
            // A stage that waits (a usage-limit pause, a retry's backoff) starts at once:
            // same stage, same attempt, no wait.
            (other, _, _) if other.stage().is_some() && !facts.sister_running => to(at, None),
            (other, _, _) if other.stage().is_some() => refuse(format!(
                "{id} is {other} and its sister is running: there is nothing to resume"
            )),
            (other, _, _) => refuse(format!(
                "{id} is {other}: only an escalated sprint, or a stage waiting to run again, can be resumed"
            )),
        },

        // A merge being asked has its answer first: the database never misses a merge.
        Event::Abort { .. } if at.state == State::Merging && facts.merge_in_flight => {
            refuse(format!(
                "{id} is merging: the forge is being asked to merge it right now; abort it once the forge has answered"
            ))
        }
        Event::Abort { .. } => to(at.with_state(State::Aborted), None),

        Event::Handoff { .. } => match at.state.stage() {
            Some(Stage::Reviewing) if facts.sister_running && facts.several_reviewers => {
                refuse(format!(
                    "{id} is being reviewed by several reviewers at once: a handoff takes one running sister (abort, or wait for their verdicts)"
                ))
            }
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

        Event::Moved { reviewed, why } => match at.state {
            State::Deploying | State::Done | State::Verifying if !facts.sister_running => {
                back_to_review(at, Some(reviewed), why)
            }
            other => refuse(format!(
                "{id} is {other}: only a deploy not yet started can find its commit moved"
            )),
        },

        Event::CiFilesHeld { head, files } => match at.state {
            State::Verifying => to(
                at,
                Some(Note::CiFilesHeld {
                    head: head.clone(),
                    files: files.clone(),
                }),
            ),
            other => refuse(format!(
                "{id} is {other}, not verifying: nothing is waiting to be pushed"
            )),
        },

        Event::ApproveCi { .. } => match (at.state, facts.ci_files_held) {
            (State::Verifying, Some(head)) => to(
                at,
                Some(Note::CiApproved {
                    head: head.to_string(),
                }),
            ),
            (other, _) => refuse(format!(
                "{id} is {other} and not waiting for a person's word on its CI files: there is nothing to let run"
            )),
        },

        Event::Published { .. } => match at.state {
            State::Verifying => to(at, None),
            other => refuse(format!(
                "{id} is {other}, not verifying: its pull request is published only after an approving review"
            )),
        },

        Event::ChecksPassed { head, .. } => match at.state {
            State::Verifying => to(
                at.with_state(State::Done),
                Some(Note::Approved { head: head.clone() }),
            ),
            other => refuse(format!(
                "{id} is {other}, not verifying: its checks' result comes too late"
            )),
        },

        // A failed check is a review that asks for changes: the next round, within the
        // same limit.
        Event::ChecksFailed { .. } => match at.state {
            State::Verifying if at.round + 1 > policy.max_review_rounds => rounds_exhausted(at),
            State::Verifying => to(Position::enter(Stage::Implementing, at.round + 1), None),
            other => refuse(format!(
                "{id} is {other}, not verifying: its checks' result comes too late"
            )),
        },

        Event::ChecksTimedOut { pending, .. } => match at.state {
            State::Verifying => to(
                escalate_to(at, State::Verifying, at.round),
                Some(Note::Escalated {
                    escalation: Escalation::ChecksTimedOut {
                        pending: pending.clone(),
                    },
                }),
            ),
            other => refuse(format!(
                "{id} is {other}, not verifying: no checks are waited for"
            )),
        },

        // What a person did on the forge counts: merged there, the sprint is delivered
        // (deployed, or the deployer runs); closed there, it ends.
        Event::ForgeMerged { .. } => match at.state {
            State::Verifying | State::Done | State::Merging if facts.deploys => {
                to(Position::enter(Stage::Deploying, at.round), approved(facts))
            }
            State::Verifying | State::Done | State::Merging => {
                to(at.with_state(State::Deployed), None)
            }
            other => refuse(format!(
                "{id} is {other}: its pull request is not waiting to be merged"
            )),
        },

        // hanarang's own merge, answered.
        Event::Merged { head, commit } => match at.state {
            State::Merging => to(
                if facts.deploys {
                    Position::enter(Stage::Deploying, at.round)
                } else {
                    at.with_state(State::Deployed)
                },
                Some(Note::Merged {
                    head: head.clone(),
                    commit: commit.clone(),
                }),
            ),
            other => refuse(format!("{id} is {other}, not merging: no merge was asked")),
        },
        Event::MergeRefused { reason } => match at.state {
            State::Merging => to(
                escalate_to(at, State::Done, at.round),
                Some(Note::Escalated {
                    escalation: Escalation::MergeRefused {
                        reason: reason.clone(),
                    },
                }),
            ),
            other => refuse(format!("{id} is {other}, not merging: no merge was asked")),
        },
        Event::MergeDelayed { reason } => match at.state {
            State::Merging => to(
                at,
                Some(Note::MergeDelayed {
                    reason: reason.clone(),
                }),
            ),
            other => refuse(format!("{id} is {other}, not merging: no merge was asked")),
        },

        // A resume of what the forge refused asks the person again (`done`).
        Event::ForgeFailed { reason } => match at.state {
            State::Verifying | State::Done | State::Merging => to(
                escalate_to(
                    at,
                    match at.state {
                        State::Merging => State::Done,
                        other => other,
                    },
                    at.round,
                ),
                Some(Note::Escalated {
                    escalation: Escalation::ForgeFailed {
                        reason: reason.clone(),
                    },
                }),
            ),
            other => refuse(format!("{id} is {other}: it is not waiting on its forge")),
        },

        Event::ForgeClosed { .. } => match at.state {
            State::Verifying | State::Done | State::Merging => {
                to(at.with_state(State::Aborted), None)
            }
            other => refuse(format!(
                "{id} is {other}: its pull request is not waiting to be merged"
            )),
        },

        // Another agent takes the stage over at once: same stage, same attempt.
        Event::FellBack { .. } => match at.state.stage() {
            Some(_) => to(at, None),
            None => refuse(format!(
                "{id} is {}: no sister runs, so no other agent can take over",
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

/// Whether a resume at `at` starts the deployer.
fn resumes_deploy(at: Position) -> bool {
    at.state == State::Deploying
        || (at.state == State::Escalated && at.resume.is_some_and(|p| p.stage == State::Deploying))
}

/// What the rules must be told of an event at `at` besides the position: whether it would
/// start the deployer (so `Facts::approved_head` and `Facts::moved` must be known), and
/// whether it is a review that approves (so `Facts::approved_head`, the head it saw, must
/// be).
pub fn asks(at: Position, event: &Event) -> (bool, bool) {
    let deploys = match event {
        Event::Approve { .. } => at.state == State::Done,
        Event::Resume { .. } => resumes_deploy(at),
        _ => false,
    };
    let approves = at.state == State::Reviewing
        && match event {
            Event::Reported { actor, verdict, .. } => {
                actor.stage() == Stage::Reviewing && *verdict == Verdict::Approve
            }
            Event::ReviewMerged { verdicts } => {
                merged_verdict(verdicts).verdict() == Verdict::Approve
            }
            _ => false,
        };
    (deploys, approves)
}

/// The approved commit is not what would deploy: nothing deploys, and whatever the branch
/// holds now is reviewed like any work (same round).
fn back_to_review(at: Position, reviewed: Option<&str>, why: &str) -> Result<Transition, Refusal> {
    Ok(Transition {
        from: at,
        to: Position::enter(Stage::Reviewing, at.round),
        note: Some(Note::Moved {
            reviewed: reviewed.unwrap_or_default().to_string(),
            why: why.to_string(),
        }),
    })
}

/// The note naming the approved commit, when it is known.
fn approved(facts: Facts<'_>) -> Option<Note> {
    facts.approved_head.map(|head| Note::Approved {
        head: head.to_string(),
    })
}

fn escalate(at: Position, stage: Stage, round: u32) -> Position {
    escalate_to(at, stage.state(), round)
}

/// Escalated, a resume going back to `state` (a stage's, `verifying` or `done`).
fn escalate_to(at: Position, state: State, round: u32) -> Position {
    Position {
        state: State::Escalated,
        resume: Some(ResumePoint {
            stage: state,
            round,
        }),
        ..at
    }
}

/// Another round was asked for past `max_review_rounds`: a human decides; resuming starts
/// the next implementation round.
fn rounds_exhausted(at: Position) -> Result<Transition, Refusal> {
    Ok(Transition {
        from: at,
        to: escalate(at, Stage::Implementing, at.round + 1),
        note: Some(Note::Escalated {
            escalation: Escalation::ReviewRoundsExhausted { rounds: at.round },
        }),
    })
}

fn violation(at: Position, reason: String) -> Result<Transition, Refusal> {
    Ok(Transition {
        from: at,
        to: at.with_state(State::Aborted),
        note: Some(Note::ProtocolViolation { reason }),
    })
}
