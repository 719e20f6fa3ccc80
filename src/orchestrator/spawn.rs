//! Starting a stage's sister: the composed run is recorded (in the commit of the
//! transition into the stage, or on its own for a run due later) so a crash while it runs
//! is found at restart, and it runs in its own task that reports back to the loop.

use tokio::sync::{oneshot, watch};
use tracing::Instrument;

use super::approval::Gate;
use super::compose::Composed;
use super::memory::Running;
use super::{Finished, Orchestrator, OrchestratorError};
use crate::pipeline::{Event, State};
use crate::sister::{self, Progress, RunControl};
use crate::store::{Run, Sprint, StoreError};

impl Orchestrator {
    /// Starts the stage's sister of a sprint already in its stage: the run is recorded,
    /// then launched. (A transition into a stage records its run itself: `transition`.)
    pub(super) async fn spawn(
        &mut self,
        sprint: &Sprint,
        runs: Vec<Run>,
    ) -> Result<(), OrchestratorError> {
        // A deploy that starts later than its approval (a retry, a host at its cap)
        // deploys nothing that moved meanwhile.
        if sprint.state == State::Deploying
            && let Some(Gate {
                approved,
                moved: Some(why),
            }) = self.gate(sprint).await?
        {
            let event = Event::Moved {
                reviewed: approved,
                why,
            };
            self.transition(sprint, event, None, None, Some(runs))
                .await?;
            return Ok(());
        }
        let Some(composed) = self.compose(sprint, runs).await else {
            return Ok(());
        };
        self.start_run(sprint, composed).await.map(|_| ())
    }

    /// Records a composed run and launches it; `false` when the sprint was taken over
    /// meanwhile (nothing is started).
    pub(super) async fn start_run(
        &mut self,
        sprint: &Sprint,
        composed: Composed,
    ) -> Result<bool, OrchestratorError> {
        // The run is on record before its sister starts; its files are written while the
        // record is.
        let (recorded, prepared) = tokio::join!(
            self.store.start_run(composed.record(), sprint.epoch),
            async { composed.prepare() }
        );
        match recorded {
            Ok(_) => {}
            Err(StoreError::Fenced(id)) => {
                self.lost(&id, "its next run was not started");
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        }
        // `start_run` took the focus away with it.
        let sprint = Sprint {
            focus: None,
            ..sprint.clone()
        };
        self.launch(sprint, composed, prepared);
        Ok(true)
    }

    /// Runs a recorded run's sister in its own task, which reports back to the loop.
    /// `prepared`: its files (or why they could not be written). `sprint`: as the database
    /// holds it once the run is recorded.
    pub(super) fn launch(
        &mut self,
        sprint: Sprint,
        composed: Composed,
        prepared: Result<sister::Prepared, Box<sister::RunReport>>,
    ) {
        let Composed {
            request,
            runs,
            reviewer: composed_reviewer,
            ..
        } = composed;
        let run_id = request.contract.run_id.clone();
        let actor = request.contract.role;
        let span = tracing::info_span!("run", sprint = %sprint.id, run = %run_id, actor = %actor);
        let attempt = request.contract.attempt;
        match &composed_reviewer {
            Some(reviewer) => {
                tracing::info!(parent: &span, round = sprint.round, attempt, %reviewer, "spawning reviewer")
            }
            None => tracing::info!(parent: &span, round = sprint.round, attempt, "spawning sister"),
        }
        let (stop_tx, stop) = oneshot::channel();
        // Its steps are recorded while it runs; the recorder ends with the run.
        let (progress, steps) = watch::channel(Progress::default());
        let recorder = tokio::spawn(super::steps::record(
            self.store.clone(),
            self.handle.live.clone(),
            sprint.id.clone(),
            run_id.clone(),
            steps,
        ));
        let sprint_id = sprint.id.clone();
        self.memory.launch(
            run_id.clone(),
            Running {
                stop: Some(stop_tx),
                waiting: None,
                sprint,
                runs,
            },
        );
        let finished = self.finished_tx.clone();
        // Sharing the database, the sister starts only while this host's claim lasts.
        let start_by = self
            .store
            .scope()
            .is_some()
            .then(|| self.renewed + self.config.host.lease_ttl.0);
        tokio::spawn(
            async move {
                let report = match prepared {
                    Ok(prepared) => {
                        let control = RunControl {
                            stop,
                            start_by,
                            progress: Some(progress),
                        };
                        sister::run_prepared(&request, prepared, control).await
                    }
                    Err(report) => {
                        drop(progress);
                        *report
                    }
                };
                // The run's last step is on record before its end is (unless the database
                // keeps it waiting).
                let _ = tokio::time::timeout(super::steps::LAST_STEP_WAIT, recorder).await;
                let _ = finished.send(Finished {
                    sprint_id,
                    run_id,
                    report,
                });
            }
            .instrument(span),
        );
    }
}
