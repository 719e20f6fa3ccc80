//! Starting a stage's sister: the run is recorded first (so a crash while it runs is found
//! at restart), its contract is assembled from the sprint's history, and it runs in its
//! own task that reports back to the loop.

use tokio::sync::oneshot;
use tracing::Instrument;

use super::{Finished, Orchestrator, OrchestratorError, Running, now_ms};
use crate::handoff::compose::{Known, Observed, after_handoff, synthesize};
use crate::handoff::message::{HandoffMessage, ReviewIssue, Severity};
use crate::handoff::schema::{self, Dialect};
use crate::sister::{self, ContractFile, RunControl, RunOutcome, RunRequest};
use crate::store::{NewRun, Run, Sprint, Store};

impl Orchestrator {
    /// `runs`: the sprint's runs, when the commit that moved it here read them.
    pub(super) async fn spawn(
        &mut self,
        sprint: &Sprint,
        runs: Option<Vec<Run>>,
    ) -> Result<(), OrchestratorError> {
        let Some(stage) = sprint.state.stage() else {
            return Ok(());
        };
        let actor = stage.actor();
        let runs = match runs {
            Some(runs) => runs,
            None => self.store.runs(&sprint.id).await?,
        };
        let project_workdir = self
            .config
            .projects
            .get(&sprint.project)
            .map(|p| p.workdir.clone());
        let workdir = project_workdir.clone().unwrap_or_default();
        // The chain of documents: this run's parent is the last run that handed off a
        // valid message, or that a user handed off to a fresh session; its document (or
        // one composed from what it did) is this run's.
        let parent = runs
            .iter()
            .rev()
            .find(|r| matches!(r.outcome, Some(RunOutcome::Handoff | RunOutcome::HandedOff)));
        let previous_message: Option<HandoffMessage> = runs
            .iter()
            .rev()
            .find(|r| r.outcome == Some(RunOutcome::Handoff))
            .and_then(|r| r.message.clone())
            .and_then(|m| serde_json::from_value(m).ok());
        let known = Known {
            goal: &sprint.goal,
            branch: &sprint.branch,
            contract_id: &sprint.contract_id,
            round: sprint.round,
        };
        let (handoff, synthesized) = match parent {
            Some(stopped) if stopped.outcome == Some(RunOutcome::HandedOff) => {
                let observed = observe(stopped, &workdir).await;
                let sister = format!("{} ({})", actor.korean_name(), actor);
                (after_handoff(&stopped.handoff, &sister, &observed), true)
            }
            _ => match previous_message
                .as_ref()
                .and_then(|m| m.common().handoff.clone())
            {
                Some(doc) => (doc, false),
                None => (synthesize(known, previous_message.as_ref(), stage), true),
            },
        };
        let previous_rejection = previous_rejection(&runs, sprint);
        let review_issues = match (&previous_message, stage) {
            (Some(HandoffMessage::Darang(m)), crate::pipeline::Stage::Implementing) => {
                review_issues(m)
            }
            _ => Vec::new(),
        };
        let focus = sprint.focus.clone();
        let git_head = sister::facts::head(&workdir).await;

        // The next number: this loop is the only one that adds runs to its sprints.
        let number = runs.iter().map(|r| r.number).max().unwrap_or(0) + 1;
        let run_id = Store::run_id(&sprint.id, number);
        let contract = ContractFile {
            sprint_id: sprint.id.clone(),
            goal: sprint.goal.clone(),
            project: sprint.project.clone(),
            role: actor,
            round: sprint.round,
            attempt: sprint.attempt,
            branch: sprint.branch.clone(),
            contract_id: sprint.contract_id.clone(),
            run_id: run_id.clone(),
            workdir: workdir.display().to_string(),
            previous_message,
            review_issues,
            handoff,
            handoff_synthesized: synthesized,
            focus,
            previous_rejection,
            schema: schema::schema(Some(actor), Dialect::Draft07).unwrap_or_default(),
        };
        let request = RunRequest {
            spec: self.config.agent.spec(actor),
            contract,
            contract_path: self.store.contract_path(&sprint.id),
            workdir,
            token_env: self.config.token_env().to_string(),
        };
        let missing_project = project_workdir.is_none().then(|| sprint.project.clone());
        let new_run = NewRun {
            sprint_id: &sprint.id,
            number,
            actor,
            round: sprint.round,
            attempt: sprint.attempt,
            parent_run_id: parent.map(|r| r.run_id.as_str()),
            handoff: &request.contract.handoff,
            synthesized,
            focus: request.contract.focus.as_deref(),
            git_head: git_head.as_deref(),
            started_at: now_ms(),
        };
        // The run is on record before its sister starts; its files are written while the
        // record is.
        let (recorded, prepared) = tokio::join!(self.store.start_run(new_run), async {
            match &missing_project {
                // The project left the config since the sprint was queued.
                Some(project) => Err(Box::new(sister::RunReport::spawn_failed(format!(
                    "project {project:?} is no longer configured ([projects.{project}])"
                )))),
                None => sister::prepare(&request),
            }
        });
        recorded?;
        let (stop_tx, stop) = oneshot::channel();
        let (spawned_tx, spawned) = oneshot::channel();
        self.running.insert(
            sprint.id.clone(),
            Running {
                stop: Some(stop_tx),
                waiting: None,
                // `start_run` took the focus away with it.
                sprint: Sprint {
                    focus: None,
                    ..sprint.clone()
                },
            },
        );
        let store = self.store.clone();
        let finished = self.finished_tx.clone();
        let sprint_id = sprint.id.clone();
        let span = tracing::info_span!("run", sprint = %sprint_id, run = %run_id, actor = %actor);
        tracing::info!(parent: &span, round = sprint.round, attempt = sprint.attempt, "spawning sister");
        tokio::spawn(
            async move {
                let pid_run_id = run_id.clone();
                let record_pid = async move {
                    if let Ok(pid) = spawned.await
                        && let Err(e) = store.set_run_pid(&pid_run_id, pid).await
                    {
                        tracing::warn!(error = %e, "could not record the sister's pid");
                    }
                };
                let control = RunControl {
                    stop,
                    spawned: Some(spawned_tx),
                };
                let report = match prepared {
                    Ok(prepared) => {
                        let (report, ()) = tokio::join!(
                            sister::run_prepared(&request, prepared, control),
                            record_pid
                        );
                        report
                    }
                    Err(report) => *report,
                };
                let _ = finished.send(Finished {
                    sprint_id,
                    run_id,
                    report,
                });
            }
            .instrument(span),
        );
        Ok(())
    }
}

/// What can be seen of a run a user handed off: how long it ran, the end of its log, and
/// in a git workdir what it changed and committed.
async fn observe(stopped: &Run, workdir: &std::path::Path) -> Observed {
    let (files_changed, commits) = match &stopped.git_head {
        Some(head) => sister::facts::changes_since(workdir, head).await,
        None => (Vec::new(), Vec::new()),
    };
    Observed {
        duration: std::time::Duration::from_millis(
            u64::try_from(stopped.duration_ms.unwrap_or(0)).unwrap_or(0),
        ),
        log_tail: stopped.stderr_tail.clone().unwrap_or_default(),
        files_changed,
        commits,
    }
}

/// After a bad output of this stage's sister, the next attempt is told exactly why.
fn previous_rejection(runs: &[Run], sprint: &Sprint) -> Option<String> {
    let last = runs.last()?;
    let same_stage = sprint.state.stage().map(|s| s.actor()) == Some(last.actor)
        && last.round == sprint.round
        && sprint.attempt > last.attempt;
    (same_stage && last.outcome == Some(RunOutcome::BadOutput)).then(|| {
        last.rejection
            .clone()
            .or_else(|| last.detail.clone())
            .unwrap_or_else(|| "the output was not a valid HandoffMessage".into())
    })
}

/// What the reviewer wants fixed: its issues, plus each failed checklist item.
fn review_issues(m: &crate::handoff::message::DarangMessage) -> Vec<ReviewIssue> {
    let mut issues = m.payload.issues.clone();
    for item in m.payload.checklist_results.iter().filter(|c| !c.passed) {
        issues.push(ReviewIssue {
            id: Some(item.id.clone()),
            severity: Severity::Major,
            file: None,
            line: None,
            message: match &item.note {
                Some(note) => format!("checklist item {:?} failed: {note}", item.id),
                None => format!("checklist item {:?} failed", item.id),
            },
        });
    }
    issues
}
