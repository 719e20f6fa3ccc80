//! Parallel reviewers: with `[agent.darang.reviewers.NAME]` tables, the
//! `reviewing` stage is one run per reviewer, started together. Each answer is a
//! transition of its own (`Event::Reviewed`), a failing reviewer retries alone
//! (`Event::ReviewerFailed`), and when every reviewer of the round has answered, or one
//! aborted, the verdicts are merged (`review::merge`) into the reviewer's (`ReviewMerged`).
//!
//! What a round stands at is read from its runs, never kept apart, and judged by the pure
//! rule `pipeline::review_round::round`.

use super::{Orchestrator, OrchestratorError};
use crate::handoff::message::HandoffMessage;
use crate::pipeline::review_round::is_review;
use crate::pipeline::review_round::{ReviewerRun, Round, round};
use crate::pipeline::{Event, State};
use crate::sister::RunOutcome;
use crate::store::{Sprint, review_round};

impl Orchestrator {
    /// Whether several reviewers share the reviewer's stage (`[agent.darang.reviewers]`).
    pub(super) fn several_reviewers(&self) -> bool {
        !self.config.agent.reviewers().is_empty()
    }

    /// Whether the sprint's stage is the reviewer's with several reviewers.
    pub(super) fn fans_out(&self, sprint: &Sprint) -> bool {
        sprint.state == State::Reviewing && self.several_reviewers()
    }

    /// The review round of a sprint in `reviewing` with several reviewers, as its runs
    /// stand (`review::round`): merged, or each reviewer due started.
    pub(super) async fn review(&mut self, sprint: &Sprint) -> Result<(), OrchestratorError> {
        let runs = self.store.runs(&sprint.id).await?;
        let reviewers = self.config.agent.reviewers();
        let of_round: Vec<ReviewerRun<'_>> = review_round(&runs)
            .iter()
            .filter_map(|r| {
                let verdict = match (&r.outcome, &r.message) {
                    (Some(RunOutcome::Handoff), Some(m)) => {
                        serde_json::from_value::<HandoffMessage>(m.clone())
                            .ok()
                            .filter(|m| m.review().is_some())
                            .map(|m| m.verdict())
                            .filter(|v| is_review(*v))
                    }
                    _ => None,
                };
                Some(ReviewerRun {
                    reviewer: r.reviewer.as_deref()?,
                    attempt: r.attempt,
                    outcome: r.outcome,
                    verdict,
                })
            })
            .collect();
        let due = match round(&reviewers, &of_round, self.policy.max_attempts) {
            Round::Merge(verdicts) => {
                // The move out of `reviewing` stops what still runs (`transition`), their
                // runs end `cancelled`.
                let event = Event::ReviewMerged { verdicts };
                self.transition(sprint, event, None, None, Some(runs))
                    .await?;
                return Ok(());
            }
            Round::Start(due) => due,
        };
        for (name, attempt) in due {
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
