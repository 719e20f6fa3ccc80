//! A transition, end to end: the rules asked (`fsm::apply`), the sprint after it worked
//! out, the run a move into a stage starts composed, all committed in one transaction,
//! broadcast only after the commit, and the run launched.

use std::sync::Arc;

use super::{Committed, Orchestrator, OrchestratorError, spent_usd};
use crate::clock::now_ms;
use crate::handoff::message::HandoffMessage;
use crate::pipeline::{Event, Facts, State, Transition, apply, next_run_at};
use crate::sister::Stop;
use crate::store::{Command, CommandStatus, Run, RunEnd, Sprint, StoreError, TransitionRecord};

impl Orchestrator {
    /// Applies one event to a sprint and commits it; `Ok(None)` when the rules refuse it.
    /// A move into a stage whose sister may start at once records that run in the same
    /// commit and launches it. `runs`: the sprint's runs as they are with `run` ended, when
    /// the caller knows them (they are read otherwise).
    pub(super) async fn transition(
        &mut self,
        sprint: &Sprint,
        event: Event,
        run: Option<&RunEnd>,
        command: Option<&Command>,
        mut runs: Option<Vec<Run>>,
    ) -> Result<Option<TransitionRecord>, OrchestratorError> {
        // Whatever happens, a copy kept from before is no longer the sprint.
        self.memory.forget(&sprint.id);
        let sister_running = self.memory.runs_sister(&sprint.id);
        let ((unchanged_head, same_findings), known) =
            self.progress(sprint, &event, runs.take()).await?;
        runs = known;
        let facts = Facts {
            unchanged_head: unchanged_head.as_deref(),
            same_findings,
            ..Facts::of(&sprint.id, sister_running)
        };
        let t = match apply(sprint.position(), &event, facts, &self.policy) {
            Ok(t) => t,
            Err(refusal) => {
                self.memory.park(sprint.clone(), runs);
                if let Some(c) = command {
                    self.store
                        .resolve_command(c.id, CommandStatus::Refused, &refusal.reason, now_ms())
                        .await?;
                }
                if let Some(run) = run {
                    self.store.end_run(run).await?;
                }
                return Ok(None);
            }
        };
        let mut after = next_sprint(sprint, &t, &event, run, now_ms());
        if let (Event::Resume { .. }, Some(_)) = (&event, self.config.pipeline.max_cost_usd) {
            // A human's resume is their word to spend more.
            let known = self.runs_of(sprint, runs.take()).await?;
            after.budget_usd = self.budget(sprint).after_resume(spent_usd(&known));
            runs = Some(known);
        }
        // Several reviewers are started by the pass (`review`), not with the commit.
        let starts_now = after.state.stage().is_some()
            && after.next_run_at.is_none()
            && !sister_running
            && !self.fans_out(&after)
            && !self.hold_spawns
            && !self.at_cap()
            && self.wants(&after);
        let mut launch = None;
        if starts_now {
            let known = self.runs_of(sprint, runs.take()).await?;
            if self.over_budget(&after, &known).is_some() {
                // The next pass escalates it.
                runs = Some(known);
            } else {
                launch = self.compose(&after, known).await;
                // The run takes the focus with it.
                after.focus = None;
                after.focus_by = None;
            }
        }
        let at = now_ms();
        let result = format!("{}: {} → {}", sprint.id, t.from.state, t.to.state);
        let committed = self
            .store
            .commit(crate::store::Commit {
                before: sprint,
                after: &after,
                transition: &t,
                event: &event,
                run,
                command: command.map(|c| (c.id, result.as_str())),
                at,
                start: launch.as_ref().map(super::compose::Composed::record),
            })
            .await;
        let record = match committed {
            Ok(record) => record,
            Err(StoreError::Fenced(id)) => {
                // Its command (if any) stays for the host that owns the sprint now.
                self.lost(
                    &id,
                    &format!("{} → {} was refused", t.from.state, t.to.state),
                );
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        // The sprint as the database now holds it.
        after.last_seq = record.seq;
        after.updated_at = at;
        tracing::info!(sprint = %sprint.id, seq = record.seq, from = %t.from.state, to = %t.to.state, event = %record.event, "transition");
        // A terminal sprint frees its project's lock (a queued sprint aborted changes the
        // queue's head).
        if t.to.state.is_terminal() {
            self.lock_freed = true;
        }
        // After the commit, never before: a subscriber only ever hears of what is durable.
        let _ = self.handle.events.send(Arc::new(Committed {
            record: record.clone(),
            sprint: after.clone(),
        }));
        // Left a stage of several reviewers (escalated, aborted): the ones still running
        // stop, their runs `cancelled`.
        if self.fans_out(sprint) && after.state != State::Reviewing {
            self.memory.stop_sprint(&sprint.id, Stop::Abort);
        }
        if let Some(composed) = launch {
            let prepared = composed.prepare();
            self.launch(after, composed, prepared);
        } else {
            let fans_out = self.fans_out(&after);
            self.memory.keep(after, runs, fans_out);
        }
        Ok(Some(record))
    }
}

/// The sprint after a transition: the new position, plus what the event tells.
fn next_sprint(
    before: &Sprint,
    t: &Transition,
    event: &Event,
    run: Option<&RunEnd>,
    now_ms: i64,
) -> Sprint {
    let mut after = before.clone();
    after.state = t.to.state;
    after.round = t.to.round;
    after.attempt = t.to.attempt;
    after.resume = t.to.resume;
    after.next_run_at = next_run_at(t, event, before.next_run_at, now_ms);
    let message: Option<HandoffMessage> = run
        .and_then(|r| r.message.clone())
        .and_then(|m| serde_json::from_value(m).ok());
    if t.to.state != State::Aborted {
        match &message {
            Some(HandoffMessage::Harang(m)) => {
                if let Some(p) = &m.payload {
                    after.contract_id = p.contract_id.clone();
                }
            }
            Some(HandoffMessage::Narang(m)) => {
                if let Some(p) = &m.payload {
                    after.branch = p.branch.clone();
                }
            }
            _ => {}
        }
    }
    match event {
        Event::RequestChanges { by, note } => {
            after.focus = Some(note.clone());
            after.focus_by = Some(by.clone());
        }
        Event::Resume {
            focus: Some(focus),
            by,
        }
        | Event::Handoff {
            focus: Some(focus),
            by,
        } => {
            after.focus = Some(focus.clone());
            after.focus_by = Some(by.clone());
        }
        _ => {}
    }
    after
}

impl Orchestrator {
    /// What the rules must know of the work before a round goes on: at
    /// narang's `IMPL_DONE` from round 2, whether the branch's head is where the round
    /// before's review saw it; at a review's `REQUEST_CHANGES` from round 2, whether its
    /// findings are the round before's. Returns the sprint's runs when it read them.
    async fn progress(
        &self,
        sprint: &Sprint,
        event: &Event,
        runs: Option<Vec<Run>>,
    ) -> Result<((Option<String>, bool), Option<Vec<Run>>), OrchestratorError> {
        use crate::domain::{Actor, RunOutcome, Verdict};
        let asks_changes = |v: Verdict| v == Verdict::RequestChanges;
        let (implemented, reviewed) = match event {
            Event::Reported {
                actor: Actor::Narang,
                verdict: Verdict::ImplDone,
                ..
            } => (true, false),
            Event::Reported {
                actor: Actor::Darang,
                verdict,
                ..
            } => (false, asks_changes(*verdict)),
            Event::ReviewMerged { verdicts } => (
                false,
                asks_changes(
                    crate::pipeline::merged_verdict(verdicts)
                        .verdict()
                        .verdict(),
                ),
            ),
            _ => (false, false),
        };
        if sprint.round < 2 || !(implemented || reviewed) {
            return Ok(((None, false), runs));
        }
        let runs = self.runs_of(sprint, runs).await?;
        let reviews = |round: u32| {
            runs.iter()
                .filter(move |r| r.actor == Actor::Darang && r.round == round)
                .filter(|r| r.outcome == Some(RunOutcome::Handoff))
        };
        let mut unchanged = None;
        if implemented
            && let Some(project) = self.config.projects.get(&sprint.project)
            && let Some(before) = reviews(sprint.round - 1)
                .filter_map(|r| r.git_head.clone())
                .next_back()
            && let Some(now) =
                crate::sister::facts::branch_head(&self.repo(&project.workdir), &sprint.branch)
                    .await
            && now == before
        {
            unchanged = Some(now);
        }
        let same = reviewed && {
            let findings = |round| {
                crate::pipeline::rules::findings(reviews(round).filter_map(|r| r.message.as_ref()))
            };
            crate::pipeline::rules::same_findings(
                &findings(sprint.round - 1),
                &findings(sprint.round),
            )
        };
        Ok(((unchanged, same), Some(runs)))
    }
}
