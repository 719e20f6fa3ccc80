//! A transition's line in its sprint's thread, in turn with the sprint's others, and the
//! escalation's digest of attempts.

use super::*;

impl Bridge {
    /// One line, unless its sprint waits. A failure for now puts the sprint on its
    /// backoff; a failure for good skips the line, noted on the board. Only a refused token
    /// and the database stop delivery.
    pub(super) async fn deliver_in_turn(
        &self,
        record: &TransitionRecord,
    ) -> Result<Turn, DeliveryError> {
        let id = &record.sprint_id;
        if self.delivered_up_to(id).await? >= record.global_seq {
            return Ok(Turn::Before);
        }
        let now = Instant::now();
        if self.with(|s| {
            s.waiting.get(id).is_some_and(|w| w.until > now)
                || s.global_wait.is_some_and(|until| until > now)
        }) {
            return Ok(Turn::Waits);
        }
        match self.deliver(record).await {
            Ok(()) => {
                self.with(|s| s.waiting.remove(id));
                Ok(Turn::Delivered)
            }
            Err(e @ DeliveryError::Store(_)) => Err(e),
            Err(e) if e.is_refused() => Err(e),
            Err(e) if e.is_permanent() => {
                let first = self.with(|s| {
                    s.waiting.remove(id);
                    let skipped = s.skipped.entry(id.clone()).or_default();
                    skipped.lines += 1;
                    skipped.last_error = e.to_string();
                    s.boards.entry(id.clone()).or_default().dirty = true;
                    skipped.lines == 1
                });
                if first {
                    tracing::warn!(error = %e, "Discord will not take this sprint's line; it is skipped (the board says so)");
                }
                Ok(Turn::Delivered)
            }
            Err(e) if e.is_global_rate_limit() => {
                // The limit is the bot's, not the thread's: every sprint's lines wait.
                let wait = e.retry_after().unwrap_or(RETRY_MAX).max(RETRY_BASE);
                tracing::warn!(error = %e, retry_in = ?wait, "Discord's global rate limit: every sprint's lines wait");
                self.with(|s| s.global_wait = Some(Instant::now() + wait));
                Ok(Turn::Waits)
            }
            Err(e) => {
                let (wait, due) = self.with(|s| {
                    let failures = s.waiting.get(id).map_or(0, |w| w.failures) + 1;
                    // A 429 says how long: never sooner.
                    let wait = e
                        .retry_after()
                        .map_or(backoff(failures), |d| d.max(RETRY_BASE));
                    s.waiting.insert(
                        id.clone(),
                        Waiting {
                            failures,
                            until: Instant::now() + wait,
                        },
                    );
                    (wait, s.repeated.due())
                });
                if due {
                    tracing::warn!(error = %e, retry_in = ?wait, "Discord delivery failed; this sprint's lines wait, the others go on");
                } else {
                    tracing::debug!(error = %e, retry_in = ?wait, "Discord delivery failed again");
                }
                Ok(Turn::Waits)
            }
        }
    }

    /// The global seq of the sprint's last line delivered beyond the shared cursor.
    pub(super) async fn delivered_up_to(&self, sprint_id: &str) -> Result<i64, DeliveryError> {
        if let Some(seq) = self.with(|s| s.delivered.get(sprint_id).copied()) {
            return Ok(seq);
        }
        let seq = self.store.cursor(&sprint_cursor(sprint_id)).await?;
        // Only this sprint's delivery (one at a time) writes its entry.
        self.with(|s| s.delivered.insert(sprint_id.to_string(), seq));
        Ok(seq)
    }

    pub(super) async fn deliver(&self, record: &TransitionRecord) -> Result<(), DeliveryError> {
        let Some(sprint) = self.store.sprint(&record.sprint_id).await? else {
            return Ok(());
        };
        let mut post = self.post_for(&sprint).await?;
        let cx = Context::new(&self.config, &sprint);
        let line = render(record, &cx);
        let user = self.discord.user_id.0;
        let (content, mentions) = if line.mention {
            (
                format!("<@{user}> {}", line.text),
                CreateAllowedMentions::new().users([serenity::UserId::new(user)]),
            )
        } else {
            (line.text, CreateAllowedMentions::new())
        };
        let entering_done = record.to == State::Done && record.from != State::Done;
        let mut message = CreateMessage::new()
            .content(cut(&content, MAX_CONTENT))
            .allowed_mentions(mentions)
            .nonce(Nonce::String(format!("hanarang-{}", record.global_seq)))
            .enforce_nonce(true);
        if entering_done {
            message = message.components(done_buttons(
                &sprint.id,
                record.seq,
                self.config.pipeline.locale,
            ));
        }
        let mut thread = ChannelId::new(u64::try_from(post.thread_id).unwrap_or_default());
        let sent = match call(self.rest.send_message(thread, &message)).await {
            // Someone deleted the sprint's post: a new one continues it, and says so.
            Err(e) if e.is_unknown_channel() => {
                tracing::warn!(
                    thread = post.thread_id,
                    "the sprint's forum post was deleted; a new one continues it"
                );
                post = self.new_post(&sprint, Some(post.thread_id)).await?;
                thread = ChannelId::new(u64::try_from(post.thread_id).unwrap_or_default());
                call(self.rest.send_message(thread, &message)).await?
            }
            other => other?,
        };
        if entering_done {
            post.done_message_id = i64::try_from(sent.id.get()).ok();
            self.store.save_forum_post(&post).await?;
        } else if record.from == State::Done
            && record.to != State::Done
            && let Some(done) = post.done_message_id
        {
            // The sprint left `done`: its buttons go. One try: a failure here must not hold
            // the sprint's next lines back (a stale button is refused by the state anyway).
            let id = MessageId::new(u64::try_from(done).unwrap_or_default());
            let edit = EditMessage::new().components(Vec::new());
            if let Err(e) = call(self.rest.edit_message(thread, id, &edit)).await {
                tracing::warn!(error = %e, "could not remove the done buttons; they stay, and are refused if clicked");
            }
            post.done_message_id = None;
            self.store.save_forum_post(&post).await?;
        }
        if let Some(Note::Escalated { .. }) = &record.note {
            self.post_digest(thread, &sprint, record).await?;
        }
        self.with(|s| s.boards.entry(sprint.id.clone()).or_default().dirty = true);
        Ok(())
    }

    /// After an escalation line: every attempt of the stage, so the human sees what was
    /// tried without opening logs.
    pub(super) async fn post_digest(
        &self,
        thread: ChannelId,
        sprint: &Sprint,
        record: &TransitionRecord,
    ) -> Result<(), DeliveryError> {
        let Some(stage) = sprint.resume.map(|r| r.stage).or(record.from.stage()) else {
            return Ok(());
        };
        let runs = self.store.runs(&sprint.id).await?;
        let mut text = format!("**{} · {}**\n", sprint.id, stage);
        for run in runs
            .iter()
            .filter(|r| r.actor == stage.actor() && r.round == record.round)
        {
            let took = run
                .duration_ms
                .map(|ms| {
                    humantime::format_duration(Duration::from_secs(
                        u64::try_from(ms / 1000).unwrap_or(0),
                    ))
                    .to_string()
                })
                .unwrap_or_default();
            let line = format!(
                "• `{}` attempt {} — {} ({took}): {}\n",
                run.run_id,
                run.attempt,
                run.outcome.map_or("running", |o| o.as_str()),
                one_line(run.detail.as_deref().unwrap_or("")),
            );
            text.push_str(&line);
        }
        let message = CreateMessage::new()
            .content(cut(&text, MAX_CONTENT))
            .allowed_mentions(CreateAllowedMentions::new())
            .nonce(Nonce::String(format!("hanarang-{}-d", record.global_seq)))
            .enforce_nonce(true);
        call(self.rest.send_message(thread, &message)).await?;
        Ok(())
    }
}
