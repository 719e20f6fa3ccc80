//! A transition's line in its sprint's thread, in turn with the sprint's others; after
//! `done`'s line the summary with the patch and the picture, after an escalation's the
//! digest of attempts with the picture.

use super::*;
use crate::discord::rest::File;
use crate::discord::{inert, summary};
use crate::domain::{Stage, Verdict};
use crate::report::evidence::Evidence;
use crate::say;

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
                let wait = e.retry_after().unwrap_or(RETRY.max).max(RETRY_BASE);
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
        let cx = crate::discord::render::line_context(&self.config, &sprint);
        let mut line = render(record, &cx);
        // The project's check ran at the end of the run this transition follows: its line
        // comes first, in the same message.
        if let Some(check) = self.check_of(record).await? {
            let check = super::super::render::check_line(&check, self.config.pipeline.locale);
            line.text = format!("{check}\n{}", line.text);
        }
        // A deploy's line says what was deployed and what was verified, as the deployer said it.
        if record.to == State::Deployed
            && let Some(deployed) = self.deployed_of(record).await?
        {
            line.text = format!("{}\n{deployed}", line.text);
        }
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
        let message = CreateMessage::new()
            .content(cut(&content, MAX_CONTENT))
            .allowed_mentions(mentions)
            .nonce(Nonce::String(format!("hanarang-{}", record.global_seq)))
            .enforce_nonce(true);
        let mut thread = ChannelId::new(u64::try_from(post.thread_id).unwrap_or_default());
        match self.post_in(thread, &message, &[]).await {
            // Someone deleted the sprint's post: a new one continues it, and says so.
            Err(e) if e.is_unknown_channel() => {
                tracing::warn!(
                    thread = post.thread_id,
                    "the sprint's forum post was deleted; a new one continues it"
                );
                post = self.new_post(&sprint, Some(post.thread_id)).await?;
                thread = ChannelId::new(u64::try_from(post.thread_id).unwrap_or_default());
                self.post_in(thread, &message, &[]).await?;
            }
            other => {
                other?;
            }
        }
        if record.from == State::Done
            && record.to != State::Done
            && let Some(done) = post.done_message_id
        {
            // The sprint left `done`: its buttons go. One try: a failure here must not hold
            // the sprint's next lines back (a stale button is refused by the state anyway).
            let id = MessageId::new(u64::try_from(done).unwrap_or_default());
            let edit = EditMessage::new().components(Vec::new());
            if let Err(e) = self.edit_in(thread, id, &edit).await {
                tracing::warn!(error = %e, "could not remove the done buttons; they stay, and are refused if clicked");
            }
            post.done_message_id = None;
            self.store.save_forum_post(&post).await?;
        }
        let escalated = matches!(&record.note, Some(Note::Escalated { .. }));
        let ci_files = match &record.note {
            Some(Note::CiFilesHeld { head, files }) => Some((head.as_str(), files.as_slice())),
            _ => None,
        };
        let extras = if entering_done {
            self.summary_parts(&sprint, record).await?
        } else if escalated {
            self.digest_parts(&sprint, record).await?
        } else if let Some((head, files)) = ci_files {
            self.ci_files_parts(&sprint, head, files).await
        } else {
            Vec::new()
        };
        self.post_parts(thread, record, extras).await?;
        if escalated {
            // What the person can do about it, under what it says of its cause. A note
            // joins the contract only where the resume goes back to the implementer.
            let joins = sprint
                .resume
                .is_some_and(|r| r.stage == crate::pipeline::State::Implementing);
            let locale = self.config.pipeline.locale;
            let text = if joins {
                say!(locale,
                    ko: "👆 위 내용을 보고 정해주세요: 메모와 함께 재개하면 그 메모가 다음 실행에 전달되고 계약에 추가됩니다",
                    en: "👆 Decide on the above: a note you resume with is told to the next run and added to the contract")
            } else {
                say!(locale,
                    ko: "👆 위 내용을 보고 정해주세요: 메모와 함께 재개하면 그 메모가 다음 실행에 전달됩니다",
                    en: "👆 Decide on the above: a note you resume with is told to the next run")
            };
            let rows = escalation_buttons(&sprint.id, record.seq, locale);
            self.post_in(thread, &offer(&text, rows, record, "settle"), &[])
                .await?;
        }
        if ci_files.is_some() {
            let locale = self.config.pipeline.locale;
            let text = say!(locale,
                ko: "👆 위 변경을 보고 정해주세요: 푸시하면 이 CI 파일이 저장소의 시크릿과 함께 실행됩니다",
                en: "👆 Decide on the change above: pushing runs these CI files with the repository's secrets");
            let rows = crate::discord::buttons::ci_files_buttons(&sprint.id, record.seq, locale);
            self.post_in(thread, &offer(&text, rows, record, "ci-files"), &[])
                .await?;
        }
        if entering_done {
            // The decision comes after the evidence it is made on: on a phone, one reads
            // the summary down to its buttons.
            let locale = self.config.pipeline.locale;
            let text = say!(locale,
                ko: "👆 위 요약을 보고 결정해주세요",
                en: "👆 Decide on the summary above");
            let rows = done_buttons(
                &sprint.id,
                record.seq,
                self.config.merges(&sprint.project),
                locale,
            );
            let sent = self
                .post_in(thread, &offer(&text, rows, record, "decide"), &[])
                .await?;
            post.done_message_id = i64::try_from(sent.id.get()).ok();
            self.store.save_forum_post(&post).await?;
        }
        self.with(|s| s.boards.entry(sprint.id.clone()).or_default().dirty = true);
        Ok(())
    }

    /// What the deployer reported of the deploy a transition into `deployed` follows: its artifact
    /// and what it verified, as inert text (cut to a few lines).
    async fn deployed_of(
        &self,
        record: &TransitionRecord,
    ) -> Result<Option<String>, DeliveryError> {
        use crate::handoff::message::HandoffMessage;
        let Some(run_id) = &record.run_id else {
            return Ok(None);
        };
        let runs = self.store.runs(&record.sprint_id).await?;
        let message = runs
            .iter()
            .find(|r| r.run_id == *run_id)
            .and_then(|r| r.message.clone())
            .and_then(|m| serde_json::from_value::<HandoffMessage>(m).ok());
        let Some(deployed) = message.as_ref().and_then(HandoffMessage::deployment) else {
            return Ok(None);
        };
        let verified = match &deployed.verification_results {
            serde_json::Value::Null => String::new(),
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let verified = crate::discord::render::cut(&verified, 600);
        let locale = self.config.pipeline.locale;
        let artifact = inert::line(&deployed.deploy_artifact_path);
        let mut text = say!(locale, ko: "📦 배포물: {artifact}", en: "📦 Deployed: {artifact}");
        if !verified.trim().is_empty() {
            let verified = inert::line(&verified);
            text.push_str(
                &say!(locale, ko: "\n🔎 확인: {verified}", en: "\n🔎 Verified: {verified}"),
            );
        }
        Ok(Some(text))
    }

    /// The project's check of the run a transition follows, when one ran: after the implementer's
    /// `IMPL_DONE` (it passed) or a `check_failed`.
    async fn check_of(
        &self,
        record: &TransitionRecord,
    ) -> Result<Option<crate::store::CheckRecord>, DeliveryError> {
        let Some(run_id) = &record.run_id else {
            return Ok(None);
        };
        let implemented = format!("{}:{}", Stage::Implementing.actor(), Verdict::ImplDone);
        if record.event != implemented && record.event != "failed:check_failed" {
            return Ok(None);
        }
        let checks = self.store.checks(&record.sprint_id).await?;
        Ok(checks.into_iter().rev().find(|c| c.run_id == *run_id))
    }

    /// After an escalation line: every attempt of the stage, so the human sees what was
    /// tried without opening logs, and the sprint's picture.
    pub(super) async fn digest_parts(
        &self,
        sprint: &Sprint,
        record: &TransitionRecord,
    ) -> Result<Vec<Part>, DeliveryError> {
        let Some(stage) = sprint
            .resume
            .and_then(|r| r.stage.stage())
            .or(record.from.stage())
        else {
            return Ok(Vec::new());
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
                inert::line(run.detail.as_deref().unwrap_or("")),
            );
            text.push_str(&line);
        }
        let checks = self.store.checks(&sprint.id).await?;
        let picture = self.picture(sprint, record, &runs, &checks);
        Ok(parts(&text, picture.into_iter().collect()))
    }

    /// The patch of `sprint` up to `head` (of `paths` alone, when any), as a file `name`.
    async fn patch_file(
        &self,
        sprint: &Sprint,
        head: &str,
        paths: &[String],
        name: String,
    ) -> Result<File, String> {
        let patch =
            crate::report::evidence::patch(&self.store, &self.config, sprint, Some(head), paths)
                .await?;
        Ok(File {
            name,
            mime: "text/x-diff",
            data: capped(patch, &sprint.id),
        })
    }

    /// A head held for its CI files: which files (inert) and their diff, attached.
    async fn ci_files_parts(&self, sprint: &Sprint, head: &str, files: &[String]) -> Vec<Part> {
        let locale = self.config.pipeline.locale;
        let listed: Vec<String> = files
            .iter()
            .map(|f| format!("- {}", inert::line(f)))
            .collect();
        let listed = listed.join("\n");
        let short = head.get(..7).unwrap_or(head);
        let mut text = say!(locale,
            ko: "🔐 {short}의 변경이 포지가 실행하는 파일을 건드립니다:\n{listed}",
            en: "🔐 The change at {short} touches files the forge runs:\n{listed}");
        let mut attached = Vec::new();
        let name = format!("{}-ci-files.patch", sprint.id);
        match self.patch_file(sprint, head, files, name).await {
            Ok(file) => attached.push(file),
            Err(why) => {
                let (why, id) = (inert::line(&why), &sprint.id);
                text.push_str(&say!(locale,
                    ko: "\n⚠️ 이 파일들의 diff를 만들 수 없습니다: {why} (`hanarang sprint diff {id}`)",
                    en: "\n⚠️ The diff of these files could not be made: {why} (`hanarang sprint diff {id}`)"));
            }
        }
        parts(&text, attached)
    }

    /// When a sprint enters `done`: what it did — the summary, the patch
    /// `base..branch` and the picture — as its last review saw it.
    pub(super) async fn summary_parts(
        &self,
        sprint: &Sprint,
        record: &TransitionRecord,
    ) -> Result<Vec<Part>, DeliveryError> {
        let e = Evidence::gather_until(&self.store, &self.config, sprint.clone(), Some(record.at))
            .await?;
        let mut summary = summary::summary(&e, self.config.pipeline.locale);
        let mut files = Vec::new();
        if let Some(Ok(work)) = &e.work {
            let name = format!("{}.patch", sprint.id);
            match self.patch_file(sprint, &work.head, &[], name).await {
                Ok(file) => files.push(file),
                Err(why) => {
                    // No evidence is never silent: the person is told not to approve from
                    // what they cannot see.
                    tracing::warn!(error = %why, "no patch to attach");
                    let why = inert::line(&why);
                    let id = &sprint.id;
                    summary.text.push_str(&say!(self.config.pipeline.locale,
                        ko: "\n⚠️ 패치를 만들 수 없습니다: {why}. 이 요약만 보고 승인하지 마세요 (`hanarang sprint diff {id}`)",
                        en: "\n⚠️ The patch could not be made: {why}. Do not approve from this summary alone (`hanarang sprint diff {id}`)"));
                }
            }
        }
        files.extend(self.picture(sprint, record, &e.runs, &e.checks));
        if let Some(findings) = summary.findings {
            files.push(File {
                name: summary::findings_file(&sprint.id),
                mime: "text/markdown",
                data: capped(findings, &sprint.id),
            });
        }
        Ok(parts(&summary.text, files))
    }

    /// The sprint's picture as it stood at `record`, or nothing (and a warning) when it
    /// cannot be drawn: the words go out without it.
    fn picture(
        &self,
        sprint: &Sprint,
        record: &TransitionRecord,
        runs: &[crate::store::Run],
        checks: &[crate::store::CheckRecord],
    ) -> Option<File> {
        let mut then = sprint.clone();
        then.state = record.to;
        then.round = record.round;
        let runs: Vec<_> = runs
            .iter()
            .filter(|r| r.started_at <= record.at)
            .cloned()
            .collect();
        match crate::report::picture::picture(&then, &runs, checks, record.at) {
            Ok(png) => Some(File {
                name: format!("{}.png", sprint.id),
                mime: "image/png",
                data: png,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "the sprint's picture could not be drawn");
                None
            }
        }
    }

    /// Posts `parts` after `record`'s line, each once: the database counts the parts
    /// posted, and each carries a nonce of its own, so a part whose answer was lost (or
    /// whose count a stop kept from being written) is not made twice when tried again.
    pub(super) async fn post_parts(
        &self,
        thread: ChannelId,
        record: &TransitionRecord,
        parts: Vec<Part>,
    ) -> Result<(), DeliveryError> {
        if parts.is_empty() {
            return Ok(());
        }
        let counter = parts_cursor(&record.sprint_id, record.global_seq);
        let posted = usize::try_from(self.store.cursor(&counter).await?).unwrap_or(0);
        for (i, part) in parts.into_iter().enumerate().skip(posted) {
            let message = CreateMessage::new()
                .content(part.text)
                .allowed_mentions(CreateAllowedMentions::new())
                .nonce(Nonce::String(format!(
                    "hanarang-{}-p{i}",
                    record.global_seq
                )))
                .enforce_nonce(true);
            self.post_in(thread, &message, &part.files).await?;
            self.store
                .set_cursor(&counter, i64::try_from(i + 1).unwrap_or(i64::MAX))
                .await?;
        }
        Ok(())
    }

    /// Posts in a sprint's thread. Posting opens an archived thread again; one Discord
    /// says is archived all the same (code 50083: a locked one) is opened first.
    pub(super) async fn post_in(
        &self,
        thread: ChannelId,
        message: &CreateMessage,
        files: &[File],
    ) -> Result<serenity::Message, DeliveryError> {
        let send = || async {
            if files.is_empty() {
                call(self.rest.send_message(thread, message)).await
            } else {
                call(self.rest.send_message_with_files(thread, message, files)).await
            }
        };
        match send().await {
            Err(e) if e.is_thread_archived() => {
                call(self.rest.unarchive(thread)).await?;
                send().await
            }
            other => other,
        }
    }

    /// Edits a message in a sprint's thread, opening the thread first when it archived.
    pub(super) async fn edit_in(
        &self,
        thread: ChannelId,
        message: MessageId,
        edit: &EditMessage,
    ) -> Result<serenity::Message, DeliveryError> {
        match call(self.rest.edit_message(thread, message, edit)).await {
            Err(e) if e.is_thread_archived() => {
                call(self.rest.unarchive(thread)).await?;
                call(self.rest.edit_message(thread, message, edit)).await
            }
            other => other,
        }
    }
}

/// One message of what follows a line: text within Discord's limit, and files.
pub(super) struct Part {
    text: String,
    files: Vec<File>,
}

/// `text` split into messages, the files on the last.
fn parts(text: &str, files: Vec<File>) -> Vec<Part> {
    let mut parts: Vec<Part> = summary::split(text, MAX_CONTENT)
        .into_iter()
        .map(|text| Part {
            text,
            files: Vec::new(),
        })
        .collect();
    match parts.last_mut() {
        Some(last) => last.files = files,
        None if !files.is_empty() => parts.push(Part {
            text: String::new(),
            files,
        }),
        None => {}
    }
    parts
}

/// The most of a file attached: 8 MiB. A longer one is cut on a line boundary and says
/// so in its last line.
pub const MAX_FILE: usize = 8 * 1024 * 1024;

fn capped(text: String, sprint_id: &str) -> Vec<u8> {
    if text.len() <= MAX_FILE {
        return text.into_bytes();
    }
    let note = format!(
        "\n[cut by hanarang: the first 8 MiB of {} bytes; the whole: `hanarang sprint diff {sprint_id}` / `hanarang sprint show {sprint_id}`]\n",
        text.len()
    );
    let room = MAX_FILE - note.len();
    let end = text[..text.floor_char_boundary(room)]
        .rfind('\n')
        .map_or(text.floor_char_boundary(room), |i| i + 1);
    let mut data = text[..end].to_string();
    data.push_str(&note);
    data.into_bytes()
}

/// The database's count of the parts posted after one line.
fn parts_cursor(sprint_id: &str, global_seq: i64) -> String {
    format!("{CURSOR}:{sprint_id}:parts:{global_seq}")
}

/// The bot's buttons under what a line posted (its summary, its digest), pinging no one,
/// posted once: `part` names it in the nonce Discord deduplicates on.
fn offer(
    text: &str,
    rows: Vec<serenity::all::CreateActionRow>,
    record: &TransitionRecord,
    part: &str,
) -> CreateMessage {
    CreateMessage::new()
        .content(text)
        .allowed_mentions(CreateAllowedMentions::new())
        .components(rows)
        .nonce(Nonce::String(format!(
            "hanarang-{}-p-{part}",
            record.global_seq
        )))
        .enforce_nonce(true)
}
