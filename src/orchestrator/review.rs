//! Parallel reviewers: with `[agent.darang.reviewers.NAME]` tables, the
//! `reviewing` stage is one run per reviewer, started together. Each answer is a
//! transition of its own (`Event::Reviewed`), a failing reviewer retries alone
//! (`Event::ReviewerFailed`), and when every reviewer of the round has answered, or one
//! aborted, the verdicts are merged (`review::merge`) into darang's (`ReviewMerged`).
//!
//! What a round stands at is read from its runs, never kept apart: a reviewer's run after
//! the implementer's last one, with a valid message, is its verdict. So a resume, a crash
//! or a takeover re-runs exactly the reviewers without one.

use std::collections::BTreeMap;

use super::compose::review_of;
use super::{Orchestrator, OrchestratorError};
use crate::handoff::message::{DarangMessage, HandoffMessage};
use crate::pipeline::review::ReviewVerdict;
use crate::pipeline::{Event, State};
use crate::sister::RunOutcome;
use crate::store::{Run, Sprint, review_round};

/// Where one reviewer of the round stands.
#[derive(Debug, Clone, PartialEq)]
enum Standing {
    /// Its run for the round is in flight.
    Running,
    /// It answered: its run's message.
    Answered(Box<DarangMessage>),
    /// It has no verdict and no run in flight: its next run is this attempt.
    Due { attempt: u32 },
}

/// Each configured reviewer's standing in the round the runs tell of.
fn standings(reviewers: &[&str], runs: &[Run], max_attempts: u32) -> Vec<(String, Standing)> {
    let round = review_round(runs);
    reviewers
        .iter()
        .map(|name| {
            let mine: Vec<&Run> = round
                .iter()
                .filter(|r| r.reviewer.as_deref() == Some(name))
                .collect();
            let answered = mine
                .iter()
                .rev()
                .find_map(|r| match (&r.outcome, &r.message) {
                    (Some(RunOutcome::Handoff), Some(m)) => {
                        match serde_json::from_value::<HandoffMessage>(m.clone()) {
                            Ok(HandoffMessage::Darang(m)) => Some(m),
                            _ => None,
                        }
                    }
                    _ => None,
                });
            let standing = match (answered, mine.last()) {
                (Some(m), _) => Standing::Answered(Box::new(m)),
                (None, Some(last)) if last.outcome.is_none() => Standing::Running,
                // Stopped because the stage ended otherwise (another reviewer's failure
                // escalated it): not a try of its own.
                (None, Some(last)) if last.outcome == Some(RunOutcome::Cancelled) => {
                    Standing::Due {
                        attempt: last.attempt,
                    }
                }
                // A run that failed at the last attempt escalated the stage: a run after
                // it follows a human's resume, with every attempt again.
                (None, Some(last)) if last.attempt < max_attempts => Standing::Due {
                    attempt: last.attempt + 1,
                },
                (None, _) => Standing::Due { attempt: 1 },
            };
            (name.to_string(), standing)
        })
        .collect()
}

impl Orchestrator {
    /// Whether the sprint's stage is darang's with several reviewers.
    pub(super) fn fans_out(&self, sprint: &Sprint) -> bool {
        sprint.state == State::Reviewing && !self.config.agent.darang.reviewers.is_empty()
    }

    /// The review round of a sprint in `reviewing` with several reviewers, as its runs
    /// stand: merged once every reviewer answered or one aborted (the others are told to
    /// stop), else each reviewer without a verdict or a run in flight is started.
    pub(super) async fn review(&mut self, sprint: &Sprint) -> Result<(), OrchestratorError> {
        let runs = self.store.runs(&sprint.id).await?;
        let reviewers = self.config.agent.reviewers();
        let standings = standings(&reviewers, &runs, self.policy.max_attempts);
        let verdicts: BTreeMap<String, ReviewVerdict> = standings
            .iter()
            .filter_map(|(name, s)| match s {
                Standing::Answered(m) => Some((name.clone(), review_of(name, m).verdict)),
                _ => None,
            })
            .collect();
        let aborted = verdicts.values().any(|v| *v == ReviewVerdict::Abort);
        if aborted || verdicts.len() == reviewers.len() {
            // An ABORT stops the others at once: the move out of `reviewing` stops what
            // still runs (`transition`), their runs end `cancelled`.
            let event = Event::ReviewMerged { verdicts };
            self.transition(sprint, event, None, None, Some(runs))
                .await?;
            return Ok(());
        }
        for (name, standing) in standings {
            let Standing::Due { attempt } = standing else {
                continue;
            };
            if self.at_cap() {
                break;
            }
            // The runs as they are now: the reviewers started before this one included.
            let known = self.store.runs(&sprint.id).await?;
            let Some(composed) = self.compose_reviewer(sprint, known, &name, attempt).await else {
                continue;
            };
            if !self.start_run(sprint, composed).await? {
                return Ok(());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Actor;
    use crate::handoff::HandoffDocument;

    fn run(
        number: i64,
        actor: Actor,
        reviewer: Option<&str>,
        outcome: Option<RunOutcome>,
        attempt: u32,
    ) -> Run {
        let handoff = HandoffDocument::default();
        let new = crate::store::NewRun {
            sprint_id: "SPRINT-001",
            number,
            actor,
            round: 1,
            attempt,
            parent_run_id: None,
            handoff: &handoff,
            synthesized: true,
            focus: None,
            git_head: None,
            started_at: number,
            reviewer,
            resumes: None,
            notes_upto: None,
            agent: None,
        };
        let mut run = Run::started(&new);
        run.outcome = outcome;
        run.ended_at = outcome.map(|_| number);
        if outcome == Some(RunOutcome::Handoff) {
            run.message = Some(serde_json::json!({
                "actor": "darang", "verdict": "APPROVE",
                "payload": {"checklistResults": [], "issues": [], "artifactPath": "r.md"}
            }));
        }
        run
    }

    #[test]
    fn a_reviewer_stands_where_its_runs_after_the_implementer_say() {
        let runs = vec![
            run(1, Actor::Narang, None, Some(RunOutcome::Handoff), 1),
            // An answer from before the implementer's last run is not this round's.
            run(2, Actor::Darang, Some("lint"), Some(RunOutcome::Handoff), 1),
            run(3, Actor::Narang, None, Some(RunOutcome::Handoff), 1),
            run(
                4,
                Actor::Darang,
                Some("static"),
                Some(RunOutcome::Handoff),
                1,
            ),
            run(
                5,
                Actor::Darang,
                Some("runtime"),
                Some(RunOutcome::Timeout),
                1,
            ),
            run(6, Actor::Darang, Some("slow"), None, 1),
            run(
                7,
                Actor::Darang,
                Some("flaky"),
                Some(RunOutcome::BadOutput),
                3,
            ),
        ];
        let s = standings(&["flaky", "lint", "runtime", "slow", "static"], &runs, 3);
        let by: BTreeMap<_, _> = s.into_iter().collect();
        assert_eq!(by["lint"], Standing::Due { attempt: 1 });
        assert_eq!(by["runtime"], Standing::Due { attempt: 2 });
        assert_eq!(by["slow"], Standing::Running);
        assert!(matches!(by["static"], Standing::Answered(_)));
        // Failed at its last attempt: the stage escalated, and a resume starts it over.
        assert_eq!(by["flaky"], Standing::Due { attempt: 1 });
    }
}
