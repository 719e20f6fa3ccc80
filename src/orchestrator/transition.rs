//! A transition, end to end: read what the rules need, ask them (`pipeline::decide`),
//! compose the run the decision starts, commit it all in one transaction, broadcast only
//! after the commit, and launch the run.

use std::sync::Arc;

use super::{Committed, Orchestrator, OrchestratorError, spent_usd};
use crate::clock::now_ms;
use crate::handoff::message::HandoffMessage;
use crate::pipeline::{Before, Decision, Event, Facts, Launch, Stage, decide};
use crate::sister::Stop;
use crate::store::{Command, CommandStatus, Run, RunEnd, Sprint, StoreError, TransitionRecord};

impl Orchestrator {
    /// Applies one event to a sprint: the rules decide (`pipeline::decide`), the decision
    /// is committed in one transaction, broadcast, and what it names launched. `Ok(None)`
    /// when the rules refuse it. `runs`: the sprint's runs as they are with `run` ended,
    /// when the caller knows them (they are read otherwise).
    pub(super) async fn transition(
        &mut self,
        sprint: &Sprint,
        event: Event,
        run: Option<&RunEnd>,
        command: Option<&Command>,
        runs: Option<Vec<Run>>,
    ) -> Result<Option<TransitionRecord>, OrchestratorError> {
        // Whatever happens, a copy kept from before is no longer the sprint.
        self.memory.forget(&sprint.id);
        let sister_running = self.memory.runs_sister(&sprint.id);
        let ((unchanged_head, same_findings), mut runs) =
            self.progress(sprint, &event, runs).await?;
        // What the sprint spent matters only under a limit.
        let budget = self.budget(sprint);
        let spent_usd = if budget.limit_usd.is_some() {
            let known = self.runs_of(sprint, runs.take()).await?;
            let spent = spent_usd(&known);
            runs = Some(known);
            spent
        } else {
            0.0
        };
        let message: Option<HandoffMessage> = run
            .and_then(|r| r.message.clone())
            .and_then(|m| serde_json::from_value(m).ok());
        let named_contract = message
            .as_ref()
            .and_then(|m| Some(m.plan()?.contract_id.as_str()));
        let named_branch = message
            .as_ref()
            .and_then(|m| Some(m.implementation()?.branch.as_str()));
        let before = Before {
            position: sprint.position(),
            next_run_at: sprint.next_run_at,
            focus: (sprint.focus.as_deref()).map(|text| (text, sprint.focus_by.as_deref())),
            budget,
            spent_usd,
            named_contract,
            named_branch,
            may_start: !self.hold_spawns && !self.at_cap() && self.wants(sprint),
        };
        let project = self.config.projects.get(&sprint.project);
        let delivers = project.is_some_and(|p| p.forge.is_some());
        let (gate, reviewed) = self.approval(sprint, &event, run, &mut runs).await?;
        let ci_held = self.ci_files_held(sprint).await?;
        let facts = Facts {
            unchanged_head: unchanged_head.as_deref(),
            same_findings,
            several_reviewers: self.several_reviewers(),
            approved_head: reviewed
                .as_deref()
                .or(gate.as_ref().map(|g| g.approved.as_str())),
            moved: gate.as_ref().and_then(|g| g.moved.as_deref()),
            delivers,
            deploys: project.is_some_and(|p| p.deploy.is_some()),
            merge_in_flight: self.forges.visiting(&sprint.id),
            ci_files_held: ci_held.as_deref(),
            ..Facts::of(&sprint.id, sister_running)
        };
        let decision = match decide(before, &event, facts, &self.policy, now_ms()) {
            Ok(decision) => decision,
            Err(refusal) => {
                self.refuse(sprint, runs, command, run, &refusal.reason)
                    .await?;
                return Ok(None);
            }
        };
        let t = &decision.transition;
        let mut after = sprint_after(sprint, &decision);
        let launch = match &decision.launch {
            Launch::Stage { focus, .. } => {
                let known = self.runs_of(sprint, runs.take()).await?;
                self.next_run(&after, focus.as_ref(), known, &decision, &event)
                    .await
            }
            Launch::Nothing | Launch::Reviewers => None,
        };
        let at = now_ms();
        let mut result = format!("{}: {} → {}", sprint.id, t.from.state, t.to.state);
        if let Some(crate::pipeline::fsm::Note::Moved { why, .. }) = &t.note {
            result.push_str(&format!(" (nothing deployed: {why})"));
        }
        let committed = self
            .store
            .commit(crate::store::Commit {
                before: sprint,
                after: &after,
                transition: t,
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
        self.committed(&record, after, &decision, launch, runs);
        Ok(Some(record))
    }

    /// What an approval is checked against: the gate before the deployer starts (the
    /// branch still at the approved commit), and the head an approving review saw.
    async fn approval(
        &self,
        sprint: &Sprint,
        event: &Event,
        run: Option<&RunEnd>,
        runs: &mut Option<Vec<Run>>,
    ) -> Result<(Option<super::approval::Gate>, Option<String>), OrchestratorError> {
        let (deploys, approves) = crate::pipeline::asks(sprint.position(), event);
        let gate = match deploys {
            true => self.gate(sprint).await?,
            false => None,
        };
        let reviewed = match (approves, run) {
            (true, Some(run)) => {
                let known = self.runs_of(sprint, runs.take()).await?;
                let head = super::approval::reviewed_head(&known, &run.run_id);
                *runs = Some(known);
                head
            }
            _ => None,
        };
        Ok((gate, reviewed))
    }

    /// The head of a sprint in `verifying` that waits for a person's word on its CI files
    /// (its last transition held it).
    async fn ci_files_held(&self, sprint: &Sprint) -> Result<Option<String>, OrchestratorError> {
        if sprint.state != crate::pipeline::State::Verifying {
            return Ok(None);
        }
        let log = self.store.transitions(&sprint.id).await?;
        Ok(crate::store::ci_files_held(&log).map(str::to_string))
    }

    /// Nothing changes: the sprint is kept as it was, its command refused with `why`, the
    /// run that ended (if any) recorded.
    async fn refuse(
        &mut self,
        sprint: &Sprint,
        runs: Option<Vec<Run>>,
        command: Option<&Command>,
        run: Option<&RunEnd>,
        why: &str,
    ) -> Result<(), OrchestratorError> {
        self.memory.park(sprint.clone(), runs);
        if let Some(c) = command {
            self.store
                .resolve_command(c.id, CommandStatus::Refused, why, now_ms())
                .await?;
        }
        if let Some(run) = run {
            self.store.end_run(run).await?;
        }
        Ok(())
    }

    /// The run a decision starts, composed for the sprint as it will be. It is given the
    /// focus the sprint no longer keeps; the log does not hold this move yet, so the round
    /// its checks failed starts with them, and the deploy after a merge on the merged base.
    async fn next_run(
        &self,
        after: &Sprint,
        focus: Option<&crate::pipeline::Focus>,
        runs: Vec<Run>,
        decision: &Decision,
        event: &Event,
    ) -> Option<super::compose::Composed> {
        let given = Sprint {
            focus: focus.map(|f| f.text.clone()),
            focus_by: focus.and_then(|f| f.by.clone()),
            ..after.clone()
        };
        let mut composed = self.compose(&given, runs).await?;
        if let Event::ChecksFailed { failed, .. } = event {
            composed.request.contract.forge_checks = failed.clone();
        }
        let merged = match (&decision.transition.note, event) {
            (Some(crate::pipeline::fsm::Note::Merged { commit, .. }), _)
            | (_, Event::ForgeMerged { commit, .. }) => commit.clone(),
            _ => None,
        };
        if let Some(commit) = merged
            && let Err(why) = self
                .deploy_merged(after, &mut composed.request, &commit)
                .await
        {
            composed.unpreparable = Some(why);
        }
        Some(composed)
    }

    /// After the commit, never before: what it frees and wakes, the subscribers told (they
    /// only ever hear of what is durable), the reviewers it stops, the run it starts.
    fn committed(
        &mut self,
        record: &TransitionRecord,
        after: Sprint,
        decision: &Decision,
        launch: Option<super::compose::Composed>,
        runs: Option<Vec<Run>>,
    ) {
        let t = &decision.transition;
        if decision.frees_lock {
            self.lock_freed = true;
        }
        if t.from.state != t.to.state {
            // Whether it now waits on a forge, or no longer does.
            self.forges_moved();
        }
        let asks_the_forge = (t.to.state == crate::pipeline::State::Merging
            && t.from.state != t.to.state)
            || matches!(t.note, Some(crate::pipeline::fsm::Note::CiApproved { .. }));
        if asks_the_forge {
            // Approved (a merge, CI files let run): the forge is asked now, after the
            // commit.
            self.forges.now(&after.id);
        }
        let _ = self.handle.events.send(Arc::new(Committed {
            record: record.clone(),
            sprint: after.clone(),
        }));
        if decision.stops_reviewers {
            // Their runs end `cancelled`.
            self.memory.stop_sprint(&after.id, Stop::Abort);
        }
        if let Some(composed) = launch {
            let prepared = composed.prepare();
            self.launch(after, composed, prepared);
        } else {
            let reviewers = decision.launch == Launch::Reviewers;
            self.memory.keep(after, runs, reviewers);
        }
    }
}

/// The sprint as the decision leaves it.
fn sprint_after(before: &Sprint, d: &Decision) -> Sprint {
    let to = d.transition.to;
    let focus = d.focus.clone();
    Sprint {
        state: to.state,
        round: to.round,
        attempt: to.attempt,
        resume: to.resume,
        next_run_at: d.next_run_at,
        focus_by: focus.as_ref().and_then(|f| f.by.clone()),
        focus: focus.map(|f| f.text),
        budget_usd: d.budget_usd,
        contract_id: d
            .contract_id
            .clone()
            .unwrap_or_else(|| before.contract_id.clone()),
        branch: d.branch.clone().unwrap_or_else(|| before.branch.clone()),
        ..before.clone()
    }
}

impl Orchestrator {
    /// What the rules must know of the work before a round goes on: at
    /// the implementer's `IMPL_DONE` from round 2, whether the branch's head is where the round
    /// before's review saw it; at a review's `REQUEST_CHANGES` from round 2, whether its
    /// findings are the round before's. Returns the sprint's runs when it read them.
    async fn progress(
        &self,
        sprint: &Sprint,
        event: &Event,
        runs: Option<Vec<Run>>,
    ) -> Result<((Option<String>, bool), Option<Vec<Run>>), OrchestratorError> {
        use crate::domain::RunOutcome;
        use crate::pipeline::ProgressCheck;
        let Some(check) = crate::pipeline::progress_check(sprint.round, event) else {
            return Ok(((None, false), runs));
        };
        let (implemented, reviewed) = (
            check == ProgressCheck::BranchMoved,
            check == ProgressCheck::FindingsRepeated,
        );
        let runs = self.runs_of(sprint, runs).await?;
        let reviews = |round: u32| {
            runs.iter()
                .filter(move |r| r.actor.stage() == Stage::Reviewing && r.round == round)
                .filter(|r| r.outcome == Some(RunOutcome::Handoff))
        };
        let mut unchanged = None;
        if implemented
            && let Some(project) = self.config.projects.get(&sprint.project)
            && let Some(before) = reviews(sprint.round - 1)
                .filter_map(|r| r.git_head.clone())
                .next_back()
            && let Some(now) =
                crate::git::facts::branch_head(&self.repo(&project.workdir), &sprint.branch).await
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
