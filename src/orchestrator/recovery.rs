//! Coming back after a crash: runs the last orchestrator left in flight are recorded as
//! `interrupted`, what is left of their process groups is killed, and the retry policy
//! decides (an interrupted deploy escalates: it is never re-run without a human's word).

use super::{Orchestrator, OrchestratorError, now_ms};
use crate::domain::FailureKind;
use crate::pipeline::{Event, Failure};
use crate::sister::{RunOutcome, process};
use crate::store::RunEnd;

const INTERRUPTED: &str = "the orchestrator stopped while this run was in flight (crash or kill)";

impl Orchestrator {
    pub(super) async fn recover(&mut self) -> Result<(), OrchestratorError> {
        for run in self.store.runs_in_flight().await? {
            // What is left of its sister is found by its environment, which names this run
            // and this database's contract file: a recycled pid, or the same run id of
            // another database, is never touched. Its whole process group goes.
            let grace = self.config.agent.spec(run.actor).kill_grace;
            let markers =
                process::run_markers(&run.run_id, &self.store.contract_path(&run.sprint_id));
            process::kill_run(None, &markers, grace).await;
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
            };
            let Some(sprint) = self.store.sprint(&run.sprint_id).await? else {
                self.store.end_run(&end).await?;
                continue;
            };
            let event = Event::Failed {
                failure: Failure {
                    kind: FailureKind::Interrupted,
                    detail: INTERRUPTED.into(),
                },
            };
            // Refused only when the sprint already left the stage (the run was cancelled
            // but the crash came first); then the run is simply closed.
            self.transition(&sprint, event, Some(&end), None, None)
                .await?;
        }
        Ok(())
    }
}
