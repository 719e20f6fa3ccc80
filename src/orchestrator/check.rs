//! The project's check as the loop hands it on: the implementer's run is given the
//! check to pass, the reviewer is told it passed, and the implementer's next attempt after
//! `check_failed` is told how it failed.

use super::Orchestrator;
use crate::config::ProjectConfig;
use crate::domain::{Actor, RunOutcome};
use crate::git::branch::Checkout;
use crate::pipeline::Stage;
use crate::sister::check::Check;
use crate::sister::contract::CheckResult;
use crate::sister::{CheckReport, RunReport};
use crate::store::{CheckRecord, Run, Sprint};

/// The check the implementer's run must pass after its `IMPL_DONE`, when the project sets one.
pub(super) fn for_run(project: Option<&ProjectConfig>, actor: Actor) -> Option<Check> {
    let project =
        project.filter(|p| actor.stage() == Stage::Implementing && !p.check.is_empty())?;
    Some(Check {
        command: project.check.clone(),
        timeout: project.check_timeout.0,
    })
}

/// The record of a run's check, for the transaction that ends the run.
pub(super) fn record(run_id: &str, report: &RunReport, at: i64) -> Option<CheckRecord> {
    let check: &CheckReport = report.check.as_ref()?;
    Some(CheckRecord {
        run_id: run_id.to_string(),
        command: check.command.clone(),
        head: check.head.clone(),
        exit_code: check.exit_code(),
        duration_ms: i64::try_from(check.duration.as_millis()).unwrap_or(i64::MAX),
        output_tail: check.output_tail.clone(),
        at,
        at_base: check.at_base,
    })
}

impl Orchestrator {
    /// What the stage's next run is told of the project's check: the reviewer (each reviewer
    /// too), of the check that passed on the implementation it reviews (`reviewed`); the implementer,
    /// of the check that failed its previous attempt.
    pub(super) async fn check_result(
        &self,
        sprint: &Sprint,
        runs: &[Run],
        reviewed: Option<&Run>,
        attempt: u32,
    ) -> Option<CheckResult> {
        let (run, passed) = match sprint.state.stage()? {
            Stage::Reviewing => (
                reviewed.filter(|r| r.actor.stage() == Stage::Implementing)?,
                true,
            ),
            Stage::Implementing => {
                let last = runs.last()?;
                let retried = last.actor.stage() == Stage::Implementing
                    && last.round == sprint.round
                    && attempt > last.attempt
                    && last.outcome == Some(RunOutcome::CheckFailed);
                (retried.then_some(last)?, false)
            }
            _ => return None,
        };
        let record = match self.memory.check_of(&run.run_id) {
            Some(kept) => Some(kept),
            None => match self.store.checks(&sprint.id).await {
                Ok(checks) => checks.into_iter().rev().find(|c| c.run_id == run.run_id),
                Err(e) => {
                    tracing::warn!(sprint = %sprint.id, run = %run.run_id, error = %e, "cannot read the sprint's checks");
                    None
                }
            },
        };
        match (record, passed) {
            (Some(c), true) if c.passed() => Some(result_of(c, None)),
            (Some(c), false) => Some(result_of(c, run.detail.clone())),
            // The failure's detail says it all when its record cannot be read.
            (None, false) => Some(CheckResult {
                run: run.run_id.clone(),
                command: Vec::new(),
                passed: false,
                exit_code: None,
                duration_ms: 0,
                head: None,
                output_tail: String::new(),
                detail: run.detail.clone(),
            }),
            _ => None,
        }
    }
}

/// What a run is told of the check at the base, and whether it must run it first.
#[derive(Debug, Default)]
pub(super) struct AtBase {
    /// The result on record (the sprint's own, or another sprint's from the same base).
    pub told: Option<CheckResult>,
    /// The check to run before the sister, when nothing is on record yet.
    pub run: Option<Check>,
}

impl Orchestrator {
    /// The check at the sprint's base: told to the planner, the implementer and the
    /// reviewers; run once, before the planner's run, while the branch is still at its base
    /// (`projects.NAME.check_base`); reused by every later sprint from the same base commit
    /// with the same check.
    pub(super) async fn at_base(
        &self,
        sprint: &Sprint,
        runs: &[Run],
        project: Option<&ProjectConfig>,
        checkout: Option<&Checkout>,
        actor: Actor,
    ) -> AtBase {
        let (Some(project), Some(checkout)) = (project, checkout) else {
            return AtBase::default();
        };
        if project.check.is_empty() || !project.check_base || actor.stage() == Stage::Deploying {
            return AtBase::default();
        }
        let base = &checkout.base_commit;
        // The run whose end is being committed has it in memory, not yet in the store.
        let kept = runs
            .iter()
            .find_map(|r| self.memory.check_of(&r.run_id))
            .filter(|c| c.at_base);
        // Else the store's: this sprint's or an earlier one's from the same base commit.
        let recorded = match kept {
            Some(kept) => Some(kept),
            None => self
                .store
                .base_check(&sprint.project, base)
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(sprint = %sprint.id, error = %e, "cannot read the checks at the base");
                    None
                }),
        }
        .filter(|c| c.command == project.check);
        match recorded {
            Some(c) => AtBase {
                told: Some(result_of(c, None)),
                run: None,
            },
            // Only the planner's run, on the untouched base, runs it.
            None if actor.stage() == Stage::Planning && checkout.head == *base => AtBase {
                told: None,
                run: Some(Check {
                    command: project.check.clone(),
                    timeout: project.check_timeout.0,
                }),
            },
            None => AtBase::default(),
        }
    }
}

fn result_of(c: CheckRecord, detail: Option<String>) -> CheckResult {
    CheckResult {
        passed: c.passed(),
        run: c.run_id,
        command: c.command,
        exit_code: c.exit_code,
        duration_ms: c.duration_ms,
        head: c.head,
        output_tail: c.output_tail,
        detail,
    }
}
