//! What the loop keeps in memory of the sprints it drives: its running sisters, by run,
//! and its own copies of the sprints it wrote, so that a pass need not read them back.
//!
//! The rule, stated once: **what the loop wrote, it keeps.** Once a sprint is queued, this
//! loop is its only writer (the lease makes it the only loop on the database), so the copy
//! it made of a sprint at its last commit is that sprint as the database holds it. Every
//! copy here is made from what a commit wrote (`keep`, `launch`) or from a sprint as just
//! read (`park`), and the next transition of the sprint drops it first (`forget`): a copy
//! is never older than the sprint's last commit. What the loop did not write (a sprint
//! queued by another process, a command) is read from the database.

use std::collections::HashMap;

use tokio::sync::oneshot;

use crate::pipeline::State;
use crate::sister::Stop;
use crate::store::{CheckRecord, Command, Run, Sprint};

/// A sister run in progress.
pub(super) struct Running {
    pub stop: Option<oneshot::Sender<Stop>>,
    /// A user's command that waits for the run to end before it is committed.
    pub waiting: Option<Command>,
    /// The run's sprint as the database holds it, kept current by `Memory::keep`.
    pub sprint: Sprint,
    /// The sprint's runs as the database holds them, this one included (as started).
    pub runs: Vec<Run>,
}

#[derive(Default)]
pub(super) struct Memory {
    /// Running sisters, by run id (a sprint may one day have several at once).
    running: HashMap<String, Running>,
    /// Sprints moved into a stage since the stages were last read, with their runs when
    /// known: the next pass spawns from these.
    entered_stage: Vec<(Sprint, Option<Vec<Run>>)>,
    /// Sprints resting in `done` or `escalated` (waiting for a human's word), with their
    /// runs: a command on one needs no read. At most one per project: a resting sprint
    /// keeps its project's pipeline lock.
    parked: HashMap<String, (Sprint, Vec<Run>)>,
    /// The check of the run whose end is being committed: the transition composes the
    /// next run (the reviewer, told it passed) before the commit writes the check.
    last_check: Option<CheckRecord>,
}

impl Memory {
    /// Whether a sister of this sprint runs.
    pub fn runs_sister(&self, sprint_id: &str) -> bool {
        self.running.values().any(|r| r.sprint.id == sprint_id)
    }

    /// Whether a command that stops the sprint's sisters (an abort, a handoff) is being
    /// carried out: it is applied when the run that holds it ends, and until then nothing
    /// of the sprint starts (a reviewer that stopped first is not started again).
    pub fn stopping(&self, sprint_id: &str) -> bool {
        self.running
            .values()
            .any(|r| r.sprint.id == sprint_id && r.waiting.is_some())
    }

    /// The sprint's running run.
    pub fn running_of(&mut self, sprint_id: &str) -> Option<&mut Running> {
        self.running.values_mut().find(|r| r.sprint.id == sprint_id)
    }

    pub fn run(&mut self, run_id: &str) -> Option<&mut Running> {
        self.running.get_mut(run_id)
    }

    /// A run was recorded and its sister started.
    pub fn launch(&mut self, run_id: String, running: Running) {
        self.running.insert(run_id, running);
    }

    /// A run ended: it no longer runs.
    pub fn end(&mut self, run_id: &str) -> Option<Running> {
        self.running.remove(run_id)
    }

    pub fn any_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// How many sisters run.
    pub fn running_count(&self) -> usize {
        self.running.len()
    }

    /// The sprint is no longer this loop's (another host took it over): its sister is told
    /// to stop and every copy of it is dropped. Its run's report still comes; what it
    /// tries to write is refused.
    pub fn lose(&mut self, sprint_id: &str) {
        self.stop_sprint(sprint_id, Stop::Shutdown);
        self.parked.remove(sprint_id);
        self.entered_stage.retain(|(s, _)| s.id != sprint_id);
    }

    /// Tells every running sister to stop.
    pub fn stop_all(&mut self, stop: Stop) {
        for running in self.running.values_mut() {
            if let Some(tx) = running.stop.take() {
                let _ = tx.send(stop);
            }
        }
    }

    /// A commit wrote `sprint`: kept where the loop looks for it next (its running runs,
    /// the stages to spawn from, or the resting sprints). A stage of several runs at once
    /// (`fans_out`: the reviewer's parallel reviewers) is looked at again while some of them run.
    pub fn keep(&mut self, sprint: Sprint, runs: Option<Vec<Run>>, fans_out: bool) {
        let mut running = false;
        for r in self
            .running
            .values_mut()
            .filter(|r| r.sprint.id == sprint.id)
        {
            r.sprint = sprint.clone();
            running = true;
        }
        if running && !fans_out {
            return;
        }
        if sprint.state.stage().is_some() {
            self.entered_stage.push((sprint, runs));
        } else {
            self.park(sprint, runs);
        }
    }

    /// Tells every running sister of the sprint to stop.
    pub fn stop_sprint(&mut self, sprint_id: &str, stop: Stop) {
        for running in self.running.values_mut() {
            if running.sprint.id == sprint_id
                && let Some(tx) = running.stop.take()
            {
                let _ = tx.send(stop);
            }
        }
    }

    /// Keeps a sprint that rests in `done` or `escalated`, when its runs are known and no
    /// sister of it runs.
    pub fn park(&mut self, sprint: Sprint, runs: Option<Vec<Run>>) {
        if let Some(runs) = runs
            && matches!(sprint.state, State::Done | State::Escalated)
            && !self.runs_sister(&sprint.id)
        {
            self.parked.insert(sprint.id.clone(), (sprint, runs));
        }
    }

    /// The sprint is about to change: a resting copy of it is no longer the sprint.
    pub fn forget(&mut self, sprint_id: &str) {
        self.parked.remove(sprint_id);
    }

    /// The check of a run about to be committed (see `last_check`).
    pub fn keep_check(&mut self, check: Option<CheckRecord>) {
        self.last_check = check;
    }

    /// The check of `run_id`, when it is the one kept.
    pub fn check_of(&self, run_id: &str) -> Option<CheckRecord> {
        self.last_check
            .as_ref()
            .filter(|c| c.run_id == run_id)
            .cloned()
    }

    /// The resting copy of a sprint, taken out to act on it.
    pub fn take_parked(&mut self, sprint_id: &str) -> Option<(Sprint, Vec<Run>)> {
        self.parked.remove(sprint_id)
    }

    /// The sprints that entered a stage since the last call.
    pub fn take_entered(&mut self) -> Vec<(Sprint, Option<Vec<Run>>)> {
        std::mem::take(&mut self.entered_stage)
    }
}
