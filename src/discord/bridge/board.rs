//! The status boards: each sprint's first message, edited in place at most once per
//! `BOARD_INTERVAL`, bursts coalesced.

use super::*;
use crate::say;

impl Bridge {
    /// A running sister's new step: its board is due for an edit (within the interval),
    /// unless the step is the one it was last told.
    pub(super) fn note_step(&self, step: &crate::orchestrator::LiveStep) -> bool {
        self.with(|s| {
            let board = s.boards.entry(step.sprint_id.clone()).or_default();
            let told = Some((step.run_id.clone(), step.live.clone()));
            if board.step == told {
                return false;
            }
            board.step = told;
            board.dirty = true;
            true
        })
    }

    /// Sharing the database, a sister may run on another host, whose steps this bot is
    /// not told of: they are read from the runs, each board due when its step changed.
    /// Returns whether any sister runs (then it is read again within the interval).
    pub(super) async fn read_steps(&self) -> Result<bool, DeliveryError> {
        let running = self.store.every_run_in_flight().await?;
        for run in &running {
            if let Some(live) = run.live.clone().filter(|l| l.step.is_some()) {
                self.note_step(&crate::orchestrator::LiveStep {
                    sprint_id: run.sprint_id.clone(),
                    run_id: run.run_id.clone(),
                    live,
                });
            }
        }
        Ok(!running.is_empty())
    }

    /// Edits the boards that changed and whose last edit is old enough. Returns how long
    /// until the next one is due.
    pub(super) async fn flush_boards(&self) -> Duration {
        let mut next = Duration::from_secs(3600);
        // A due board is clean from now: a line delivered while it is edited makes it
        // dirty again, for the next round.
        let due: Vec<String> = self.with(|s| {
            s.boards
                .iter_mut()
                .filter(|(_, b)| b.dirty)
                .filter_map(|(id, b)| {
                    let after_interval = b.last_edit.map(|at| at + BOARD_INTERVAL);
                    let due = after_interval.into_iter().chain(b.not_before).max();
                    match due {
                        Some(at) if at > Instant::now() => {
                            next = next.min(at - Instant::now());
                            None
                        }
                        _ => {
                            b.dirty = false;
                            Some(id.clone())
                        }
                    }
                })
                .collect()
        });
        // Each board is its own message: they are edited at once.
        let edited: Vec<(String, Result<(), DeliveryError>)> = futures::stream::iter(due)
            .map(|id| async move {
                let edited = self.edit_board(&id).await;
                (id, edited)
            })
            .buffer_unordered(AT_ONCE)
            .collect()
            .await;
        for (id, edited) in edited {
            match edited {
                Ok(()) => self.with(|s| {
                    let board = s.boards.entry(id).or_default();
                    board.last_edit = Some(Instant::now());
                    board.not_before = None;
                }),
                // A board that is gone (the next line makes a new post) or forbidden is
                // not edited again until the sprint moves.
                Err(e) if e.is_permanent() => {
                    tracing::warn!(sprint = %id, error = %e, "status board cannot be edited");
                }
                Err(e) => {
                    tracing::warn!(sprint = %id, error = %e, "status board edit failed; will retry");
                    // Not before a 429's wait is over.
                    let wait = e
                        .retry_after()
                        .unwrap_or(Duration::from_secs(5))
                        .max(RETRY_BASE);
                    self.with(|s| {
                        let board = s.boards.entry(id).or_default();
                        board.dirty = true;
                        board.not_before = Some(Instant::now() + wait);
                    });
                    next = next.min(wait);
                }
            }
        }
        next
    }

    /// Marks 📨 each note from a thread that a run was given, where it was written. Returns
    /// whether notes still wait for a run (or for a mark that failed for now).
    pub(super) async fn mark_notes(&self) -> Result<bool, DeliveryError> {
        let mut waiting = false;
        for note in self.store.notes_to_mark().await? {
            if note.delivered_run.is_none() {
                // A sprint that ended before a run was given the note never will be: the
                // note stops waiting, unmarked in Discord.
                let ended = self
                    .store
                    .sprint(&note.sprint_id)
                    .await?
                    .is_none_or(|s| s.state.is_terminal());
                if ended {
                    self.store
                        .mark_note(note.id, crate::clock::now_ms())
                        .await?;
                } else {
                    waiting = true;
                }
                continue;
            }
            // "<channel id>/<message id>", as the bot recorded it.
            let place = note.message.as_deref().and_then(|m| m.split_once('/'));
            let ids =
                place.and_then(|(c, m)| Some((c.parse::<u64>().ok()?, m.parse::<u64>().ok()?)));
            if let Some((channel, message)) = ids.filter(|(c, m)| *c != 0 && *m != 0) {
                let reacted = call(self.rest.react(
                    ChannelId::new(channel),
                    MessageId::new(message),
                    crate::discord::notes::GIVEN,
                ))
                .await;
                match reacted {
                    Ok(()) => {}
                    // The message was deleted, the thread archived or closed to the bot:
                    // the note was given all the same; nothing more to show.
                    Err(e) if e.is_permanent() || e.is_thread_archived() => {
                        tracing::info!(sprint = %note.sprint_id, note = note.id, error = %e, "a given note could not be marked");
                    }
                    Err(e) => {
                        tracing::warn!(sprint = %note.sprint_id, note = note.id, error = %e, "marking a given note failed; will retry");
                        waiting = true;
                        continue;
                    }
                }
            }
            self.store
                .mark_note(note.id, crate::clock::now_ms())
                .await?;
        }
        Ok(waiting)
    }

    pub(super) async fn edit_board(&self, sprint_id: &str) -> Result<(), DeliveryError> {
        let (Some(sprint), Some(post)) = (
            self.store.sprint(sprint_id).await?,
            self.store.forum_post(sprint_id).await?,
        ) else {
            return Ok(());
        };
        let thread = ChannelId::new(u64::try_from(post.thread_id).unwrap_or_default());
        let message = MessageId::new(u64::try_from(post.board_message_id).unwrap_or_default());
        let text = self.board_text(&sprint).await?;
        if self.with(|s| s.boards.get(sprint_id).and_then(|b| b.shown.as_ref()) == Some(&text)) {
            return Ok(());
        }
        let edit = EditMessage::new()
            .content(text.clone())
            .allowed_mentions(CreateAllowedMentions::new());
        self.edit_in(thread, message, &edit).await?;
        self.with(|s| s.boards.entry(sprint_id.to_string()).or_default().shown = Some(text));
        Ok(())
    }

    pub(super) async fn board_text(&self, sprint: &Sprint) -> Result<String, DeliveryError> {
        let runs = self.store.runs(&sprint.id).await?;
        let last_verdict = runs.iter().rev().find_map(|r| {
            let m = r.message.as_ref()?;
            Some(format!(
                "{} {}",
                m.get("actor")?.as_str()?,
                m.get("verdict")?.as_str()?
            ))
        });
        let usage = self.store.usage(&sprint.id).await?;
        let mut text = board(
            sprint,
            last_verdict.as_deref(),
            &usage,
            self.config.pipeline.locale,
            self.config.pipeline.max_attempts,
            crate::clock::now_ms(),
        );
        if sprint.state.stage().is_some()
            && let Some(now) = crate::discord::render::now_line(
                &runs,
                self.config.pipeline.locale,
                crate::clock::now_ms(),
            )
        {
            text.push('\n');
            text.push_str(&now);
        }
        if let Some(reviewers) =
            crate::discord::render::reviewers_line(&runs, self.config.pipeline.locale)
        {
            text.push('\n');
            text.push_str(&reviewers);
        }
        let log = self.store.transitions(&sprint.id).await?;
        if let Some(contract) =
            crate::discord::render::contract_line(&runs, &log, self.config.pipeline.locale)
        {
            text.push('\n');
            text.push_str(&contract);
        }
        // The pull request, where the sprint is delivered through a forge: a link the bot
        // makes itself.
        if let Some((pr, url, head)) = log.iter().rev().find_map(|t| match &t.detail {
            crate::pipeline::Event::Published { pr, url, head } => Some((pr, url, head)),
            _ => None,
        }) {
            let head = head.get(..7).unwrap_or(head);
            text.push_str(&say!(self.config.pipeline.locale,
                ko: "\nPR: #{pr} ({head}) {url}",
                en: "\nPull request: #{pr} ({head}) {url}"));
        }
        if crate::store::waiting_for(&log) == Some("ci_files") {
            let id = &sprint.id;
            text.push_str(&say!(self.config.pipeline.locale,
                ko: "\n🔐 CI 파일이 사람의 결정을 기다림: 스레드의 **푸시하고 CI 실행**, 또는 `hanarang sprint approve-ci {id}`",
                en: "\n🔐 Its CI files wait for a person: **Push and run CI** in the thread, or `hanarang sprint approve-ci {id}`"));
        }
        if let Some(base) = sprint.base_commit.as_deref()
            && let Some(forge) = self.config.forge_of(&sprint.project)
            && let Some(checks) = self
                .store
                .forge_base_checks(&forge.repository_key(), base)
                .await?
        {
            text.push('\n');
            text.push_str(&crate::discord::render::base_ci_line(
                base,
                &checks,
                self.config.pipeline.locale,
            ));
        }
        let commands = self.store.commands_of(&sprint.id).await?;
        if let Some(people) = crate::discord::render::people_line(
            sprint.started_by.as_deref(),
            &commands,
            self.config.pipeline.locale,
        ) {
            text.push('\n');
            text.push_str(&people);
        }
        if let Some(skipped) = self.with(|s| s.skipped.get(&sprint.id).cloned()) {
            let (n, why, id) = (skipped.lines, one_line(&skipped.last_error), &sprint.id);
            text.push_str(&say!(self.config.pipeline.locale,
                ko: "\n⚠️ 줄 {n}개를 올리지 못함 ({why}); 전체 기록: `hanarang sprint log {id}`",
                en: "\n⚠️ {n} line(s) could not be posted ({why}); all of them: `hanarang sprint log {id}`"));
        }
        Ok(cut(&text, MAX_CONTENT))
    }
}
