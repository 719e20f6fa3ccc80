//! A run's end, as the loop records it: a user's command that was waiting for it, one
//! reviewer's answer among several, or the event the rules make of it; and the stop of
//! every sister at shutdown.

use tracing::Instrument;

use super::{Finished, Orchestrator, OrchestratorError, now_ms};
use crate::pipeline::{
    Answer, Event, Facts, RunEndIs, RunResult, event_of, interrupt_of, protocol_violation,
    run_end_is,
};
use crate::sister::{RunOutcome, RunReport, Stop};
use crate::store::{CommandStatus, Run, RunEnd};

impl Orchestrator {
    /// A run ended: record it and apply what it means, in one transaction.
    pub(super) async fn finish(&mut self, done: Finished) -> Result<(), OrchestratorError> {
        let span = tracing::info_span!("finish", sprint = %done.sprint_id, run = %done.run_id);
        async {
            let Some(running) = self.memory.run(&done.run_id) else {
                return Ok(());
            };
            let waiting = running.waiting.take();
            let (sprint, runs) = (running.sprint.clone(), std::mem::take(&mut running.runs));
            let report = done.report;
            let mut end = run_end(&done.run_id, &report);
            tracing::info!(outcome = %report.outcome, detail = %report.detail, "run ended");

            let reviewer = runs
                .iter()
                .find(|r| r.run_id == done.run_id)
                .and_then(|r| r.reviewer.clone().map(|name| (name, r.attempt)));
            let interrupt = waiting
                .as_ref()
                .and_then(|c| c.event())
                .and_then(|e| interrupt_of(&e));
            let mut is = run_end_is(interrupt, report.outcome, reviewer.is_some());
            if let (RunEndIs::ALateHandoffThenItsOwn, Some(command)) = (is, &waiting) {
                let reason = format!(
                    "{}'s run ended ({}) before it could be handed off",
                    sprint.id, report.outcome
                );
                self.store
                    .resolve_command(command.id, CommandStatus::Refused, &reason, now_ms())
                    .await?;
                is = run_end_is(None, report.outcome, reviewer.is_some());
            }
            match (is, waiting) {
                // The rules still see the sister as running: that is when the command was
                // accepted.
                (RunEndIs::TheCommand, Some(command)) => {
                    if let Some(event) = command.event() {
                        self.transition(&sprint, event, Some(&end), Some(&command), None)
                            .await?;
                        // A handed-off stage runs again, in a fresh session.
                        if let Some(ended) = self.memory.end(&done.run_id)
                            && ended.sprint.state.stage().is_some()
                        {
                            let fans_out = self.fans_out(&ended.sprint);
                            self.memory
                                .keep(ended.sprint, Some(with_end(runs, &end)), fans_out);
                        }
                        return Ok(());
                    }
                }
                (RunEndIs::OnlyRecorded, _) => {
                    self.memory.end(&done.run_id);
                    self.store.end_run(&end).await?;
                    return Ok(());
                }
                _ => {}
            }
            self.memory.end(&done.run_id);
            let answer = report
                .message
                .as_ref()
                .map(|valid| (&valid.message, valid.message.reason()));
            let event = event_of(
                RunResult {
                    outcome: report.outcome,
                    answer: answer.as_ref().map(|(m, reason)| Answer {
                        actor: m.actor(),
                        verdict: m.verdict(),
                        sprint_id: m.claimed_sprint_id(),
                        reason: reason.as_deref(),
                    }),
                    detail: &report.detail,
                    resume_at_ms: report.resume_at_ms,
                    reviewer: reviewer
                        .as_ref()
                        .map(|(name, attempt)| (name.as_str(), *attempt)),
                },
                now_ms(),
            );
            let event = self.after_pause(event, &mut end, &runs, &done.run_id).await;
            let facts = Facts::of(&sprint.id, false);
            if let Some(reason) = protocol_violation(sprint.position(), &event, facts, &self.policy)
            {
                tracing::warn!(%reason, raw = %report.stdout_tail, "protocol violation");
                end.outcome = RunOutcome::ProtocolViolation;
                end.detail = reason;
            }
            let runs = with_end(runs, &end);
            self.memory.keep_check(end.check.clone());
            self.transition(&sprint, event, Some(&end), None, Some(runs))
                .await?;
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// At shutdown: stop every running sister, record it as interrupted and apply the
    /// retry policy (an interrupted deploy escalates), so nothing is left in flight.
    pub(super) async fn stop_all(&mut self) -> Result<(), OrchestratorError> {
        self.hold_spawns = true;
        self.memory.stop_all(Stop::Shutdown);
        // Every sister is waited for even when recording one's end fails (a full disk):
        // none is left running. Its run stays in flight in the database, for the next
        // start to record as interrupted.
        let mut failed = None;
        while self.memory.any_running() {
            let Some(done) = self.finished_rx.recv().await else {
                break;
            };
            let run_id = done.run_id.clone();
            if let Err(e) = self.finish(done).await {
                self.memory.end(&run_id);
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

impl Orchestrator {
    /// A run paused at its agent's usage limit: that agent is paused until its reset (on
    /// the run's record), and the next agent of the sister's chain free of its limit takes
    /// the stage over at once; when none is, the stage waits for the earliest reset.
    async fn after_pause(
        &self,
        event: Event,
        end: &mut RunEnd,
        runs: &[Run],
        run_id: &str,
    ) -> Event {
        let Event::Paused { resume_at_ms, .. } = &event else {
            return event;
        };
        end.paused_until = Some(*resume_at_ms);
        let Some(run) = runs.iter().find(|r| r.run_id == run_id) else {
            return event;
        };
        let Some(agent) = run.agent.as_deref() else {
            return event;
        };
        let chain = self.config.chain(run.actor, run.reviewer.as_deref());
        let names: Vec<&str> = chain.iter().map(|c| c.name.as_str()).collect();
        let now = now_ms();
        let mut paused = self.paused_agents(runs, now).await;
        if *resume_at_ms > now {
            let until = paused.entry(agent.to_string()).or_insert(*resume_at_ms);
            *until = (*until).max(*resume_at_ms);
        }
        crate::pipeline::after_pause(event, agent, &names, &paused, now)
    }
}

/// A sprint's runs with one of them ended, as recording `end` leaves them.
fn with_end(mut runs: Vec<Run>, end: &RunEnd) -> Vec<Run> {
    if let Some(run) = runs.iter_mut().find(|r| r.run_id == end.run_id) {
        run.end(end);
    }
    runs
}

/// The record of a run's end, from the runner's report.
fn run_end(run_id: &str, report: &RunReport) -> RunEnd {
    // What the CLI reported counts over what the message says of itself.
    let claimed = report
        .message
        .as_ref()
        .and_then(|m| m.message.common().usage.clone())
        .unwrap_or_default();
    let reported = report.usage.clone().unwrap_or_default();
    let usage = crate::handoff::message::Usage {
        input_tokens: reported.input_tokens.or(claimed.input_tokens),
        output_tokens: reported.output_tokens.or(claimed.output_tokens),
        cost_usd: reported.cost_usd.or(claimed.cost_usd),
    };
    let ended_at = now_ms();
    RunEnd {
        run_id: run_id.to_string(),
        outcome: report.outcome,
        detail: report.detail.clone(),
        rejection: (!report.problems.is_empty()).then(|| {
            report
                .problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        }),
        exit_code: report.exit_code,
        signal: report.signal,
        duration_ms: i64::try_from(report.duration.as_millis()).unwrap_or(i64::MAX),
        stdout_tail: report.stdout_tail.clone(),
        stderr_tail: report.stderr_tail.clone(),
        message: report.message.as_ref().map(|m| m.raw.clone()),
        input_tokens: usage.input_tokens.and_then(|n| i64::try_from(n).ok()),
        output_tokens: usage.output_tokens.and_then(|n| i64::try_from(n).ok()),
        cost_usd: usage.cost_usd,
        ended_at,
        session_id: report.session_id.clone(),
        paused_until: None,
        check: super::check::record(run_id, report, ended_at),
    }
}
