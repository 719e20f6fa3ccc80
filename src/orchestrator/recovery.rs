//! Coming back after a crash: runs the last orchestrator left in flight are recorded as
//! `interrupted`, what is left of their process groups is killed, and the retry policy
//! decides (an interrupted deploy escalates: it is never re-run without a human's word).

use super::{Orchestrator, OrchestratorError, now_ms};
use crate::domain::FailureKind;
use crate::pipeline::{Event, Failure};
use crate::sister::{RunOutcome, process};
use crate::store::{Run, RunEnd};

const INTERRUPTED: &str = "the orchestrator stopped while this run was in flight (crash or kill)";

impl Orchestrator {
    pub(super) async fn recover(&mut self) -> Result<(), OrchestratorError> {
        let runs = self.store.runs_in_flight().await?;
        self.recover_runs(runs).await
    }

    /// Takes over the sprints of hosts whose lease expired (several hosts on one
    /// PostgreSQL database): their runs in flight were on the lost host, and are recovered
    /// here as after a crash of this one (an interrupted deploy escalates).
    pub(super) async fn take_over(&mut self) -> Result<(), OrchestratorError> {
        let taken = self.store.take_over().await?;
        if taken.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = taken.iter().map(|s| s.id.as_str()).collect();
        tracing::warn!(sprints = ?ids, "took over the sprints of a host whose lease expired");
        for id in &ids {
            self.memory.lose(id);
        }
        let runs = self
            .store
            .runs_in_flight()
            .await?
            .into_iter()
            .filter(|r| ids.contains(&r.sprint_id.as_str()))
            .collect();
        self.recover_runs(runs).await?;
        self.lock_freed = true;
        Ok(())
    }

    async fn recover_runs(&mut self, runs: Vec<Run>) -> Result<(), OrchestratorError> {
        for run in runs {
            // What is left of its sister is in the run's container, named for this run of
            // this database: a recycled pid, or the same run id of another database, is
            // never touched. Without containers, it is found by its environment.
            let grace = self.config.agent.spec(run.actor).kill_grace;
            match &self.containers {
                Some(containers) => containers.stop_leftovers(&run.run_id, grace).await,
                None => {
                    let contract = self.contract_path(&run.sprint_id, run.reviewer.as_deref());
                    let markers = process::run_markers(&run.run_id, &contract);
                    process::stop_marked(&markers, grace).await;
                }
            }
            tracing::warn!(sprint = %run.sprint_id, run = %run.run_id, "run was in flight: recorded as interrupted");
            let end = RunEnd {
                run_id: run.run_id.clone(),
                outcome: RunOutcome::Interrupted,
                detail: INTERRUPTED.into(),
                rejection: None,
                exit_code: None,
                signal: None,
                duration_ms: (now_ms() - run.started_at).max(0),
                stdout_tail: String::new(),
                stderr_tail: String::new(),
                message: None,
                input_tokens: None,
                output_tokens: None,
                cost_usd: None,
                ended_at: now_ms(),
                session_id: None,
                paused_until: None,
                check: None,
            };
            let Some(sprint) = self.store.sprint(&run.sprint_id).await? else {
                self.store.end_run(&end).await?;
                continue;
            };
            let failure = Failure {
                kind: FailureKind::Interrupted,
                detail: INTERRUPTED.into(),
            };
            // One of several reviewers retries alone.
            let event = match &run.reviewer {
                Some(reviewer) => Event::ReviewerFailed {
                    reviewer: reviewer.clone(),
                    attempt: run.attempt,
                    failure,
                },
                None => Event::Failed { failure },
            };
            // Refused only when the sprint already left the stage (the run was cancelled
            // but the crash came first); then the run is simply closed.
            self.transition(&sprint, event, Some(&end), None, None)
                .await?;
        }
        Ok(())
    }
}
