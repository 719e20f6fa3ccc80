//! A user's command (CLI or Discord), as the loop applies it: refused by the rules, or
//! waiting for the running sister to stop, or a transition.

use tracing::Instrument;

use super::{Orchestrator, OrchestratorError, now_ms};
use crate::pipeline::rules::{ended_for_notes, stale_command};
use crate::pipeline::{Facts, interrupts};
use crate::sister::Stop;
use crate::store::{Command, CommandStatus};

impl Orchestrator {
    /// A user's command, from the CLI or Discord.
    pub(super) async fn apply_command(
        &mut self,
        command: Command,
    ) -> Result<(), OrchestratorError> {
        let span = tracing::info_span!("command", id = command.id, sprint = %command.sprint_id, kind = command.kind.as_str());
        async {
            let (sprint, runs) = match self.memory.take_parked(&command.sprint_id) {
                Some((sprint, runs)) => (Some(sprint), Some(runs)),
                None => (self.store.sprint(&command.sprint_id).await?, None),
            };
            // A row something else wrote into the database (an agent, say) is no one's word.
            if !self.store.written_by_hanarang(&command).await? {
                tracing::warn!(
                    by = %command.by,
                    "a command that did not come through hanarang (its signature does not verify) was refused, not applied"
                );
                let reason = "refused: this command was not written by hanarang (its signature does not verify); give it again with `hanarang sprint …` or from Discord";
                self.store
                    .resolve_command(command.id, CommandStatus::Refused, reason, now_ms())
                    .await?;
                return Ok(());
            }
            let Some(sprint) = sprint else {
                let reason = format!("no sprint {}", command.sprint_id);
                self.store
                    .resolve_command(command.id, CommandStatus::Refused, &reason, now_ms())
                    .await?;
                return Ok(());
            };
            let Some(event) = command.event() else {
                // A note: no transition; the sprint's next sister run is given it.
                let (status, answer) = match ended_for_notes(&sprint.id, sprint.state) {
                    Some(reason) => (CommandStatus::Refused, reason),
                    None => (CommandStatus::Applied, noted(&sprint.id)),
                };
                self.store
                    .resolve_command(command.id, status, &answer, now_ms())
                    .await?;
                return Ok(());
            };
            if let Some(reason) = stale_command(
                &sprint.id,
                command.seq,
                sprint.last_seq,
                sprint.position(),
                &event,
            ) {
                self.store
                    .resolve_command(command.id, CommandStatus::Refused, &reason, now_ms())
                    .await?;
                return Ok(());
            }
            let several_reviewers = self.several_reviewers();
            if let Some(running) = self.memory.running_of(&sprint.id) {
                if running.waiting.is_some() {
                    // Another command is being carried out; this one waits its turn.
                    return Ok(());
                }
                let facts = Facts {
                    several_reviewers,
                    ..Facts::of(&sprint.id, true)
                };
                match interrupts(sprint.position(), &event, facts, &self.policy) {
                    Err(refusal) => {
                        self.store
                            .resolve_command(
                                command.id,
                                CommandStatus::Refused,
                                &refusal.reason,
                                now_ms(),
                            )
                            .await?;
                        return Ok(());
                    }
                    Ok(Some(interrupt)) => {
                        // Every sister of the sprint stops (several reviewers: all of them);
                        // the command is applied when the first has.
                        running.waiting = Some(command);
                        self.memory.stop_sprint(&sprint.id, Stop::from(interrupt));
                        return Ok(());
                    }
                    Ok(None) => {}
                }
            }
            self.transition(&sprint, event, None, Some(&command), runs)
                .await?;
            Ok(())
        }
        .instrument(span)
        .await
    }
}

/// A note's answer: recorded, for the sprint's next sister run.
pub(crate) fn noted(sprint_id: &str) -> String {
    format!("{sprint_id}: note recorded; the sprint's next sister run is given it")
}
