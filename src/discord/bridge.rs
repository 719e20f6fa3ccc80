//! The forum bridge: one forum post per sprint, a status board edited in place, and one
//! line per transition. It works from the transitions log with a delivery cursor in the
//! database and uses the broadcast channel only as a wake-up, so after a restart, an
//! outage or a lagged receiver it catches up in order, with no line lost or posted twice
//! (every line carries a nonce Discord deduplicates on, for the case where a post arrived
//! but its answer did not).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use poise::serenity_prelude as serenity;
use serenity::{
    ChannelId, CreateAllowedMentions, CreateForumPost, CreateMessage, EditMessage, Http, MessageId,
    Nonce,
};
use tokio::sync::broadcast;
use tokio::time::Instant;
use tracing::Instrument;

use super::commands::done_buttons;
use super::render::{MAX_CONTENT, board, cut, thread_title};
use crate::config::{Config, DiscordConfig};
use crate::notify::messages::{Context, one_line, render};
use crate::pipeline::State;
use crate::pipeline::fsm::Note;
use crate::store::{ForumPost, Sprint, Store, TransitionRecord};

/// The name of this notifier's cursor in the database.
pub const CURSOR: &str = "discord";
/// Every Discord call gives up after this long (and is retried).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// At most one status-board edit per sprint this often; bursts are coalesced.
pub const BOARD_INTERVAL: Duration = Duration::from_secs(3);
/// Retries of a failed delivery wait twice as long each time, from this...
const RETRY_BASE: Duration = Duration::from_millis(250);
/// ...up to this.
const RETRY_MAX: Duration = Duration::from_secs(60);
/// Log entries read per pass.
const BATCH: i64 = 100;

#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("Discord: {0}")]
    Discord(#[from] serenity::Error),
    #[error("Discord did not answer within {}s", CALL_TIMEOUT.as_secs())]
    Timeout,
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// A status board waiting for its next edit.
#[derive(Debug, Default)]
struct Board {
    last_edit: Option<Instant>,
    dirty: bool,
}

pub struct Bridge {
    http: Arc<Http>,
    store: Store,
    config: Arc<Config>,
    discord: DiscordConfig,
    boards: HashMap<String, Board>,
}

async fn call<T>(
    f: impl std::future::Future<Output = Result<T, serenity::Error>>,
) -> Result<T, DeliveryError> {
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(DeliveryError::Timeout),
    }
}

impl Bridge {
    pub fn new(
        http: Arc<Http>,
        store: Store,
        config: Arc<Config>,
        discord: DiscordConfig,
    ) -> Bridge {
        Bridge {
            http,
            store,
            config,
            discord,
            boards: HashMap::new(),
        }
    }

    /// Delivers the log until `shutdown` resolves, or until Discord refuses the token (a
    /// token revoked while `serve` runs): that is not an outage to wait out.
    pub async fn run(
        mut self,
        mut events: broadcast::Receiver<TransitionRecord>,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), super::StartError> {
        tokio::pin!(shutdown);
        let mut failures = 0u32;
        let mut repeated = super::Repeated::default();
        loop {
            let wait = match self.pass().await {
                Ok(more) if more => continue,
                Ok(_) => {
                    failures = 0;
                    self.flush_boards().await
                }
                Err(DeliveryError::Discord(e)) if super::is_refused(&e) => {
                    return Err(super::StartError::TokenRefused(
                        self.discord.token_env.clone(),
                        e.to_string(),
                    ));
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    let backoff = (RETRY_BASE * (1u32 << failures.min(8))).min(RETRY_MAX);
                    if repeated.due() {
                        tracing::warn!(error = %e, retry_in = ?backoff, "Discord delivery failed; will retry");
                    } else {
                        tracing::debug!(error = %e, retry_in = ?backoff, "Discord delivery failed again");
                    }
                    backoff
                }
            };
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                // Any news (or a lag) means: read the log again; but a backoff runs its
                // course (a busy pipeline must not turn it into a hammering).
                _ = events.recv(), if failures == 0 => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Delivers what the log holds past the cursor, in order. `Ok(true)` when there is
    /// more to read.
    async fn pass(&mut self) -> Result<bool, DeliveryError> {
        let cursor = self.store.cursor(CURSOR).await?;
        let batch = self.store.transitions_after(cursor, BATCH).await?;
        for record in &batch {
            let span = tracing::info_span!("deliver", sprint = %record.sprint_id, seq = record.seq);
            self.deliver(record).instrument(span).await?;
            self.store.set_cursor(CURSOR, record.global_seq).await?;
        }
        Ok(batch.len() as i64 == BATCH)
    }

    async fn deliver(&mut self, record: &TransitionRecord) -> Result<(), DeliveryError> {
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
            message = message.components(done_buttons(&sprint.id, self.config.pipeline.locale));
        }
        let thread = ChannelId::new(u64::try_from(post.thread_id).unwrap_or_default());
        let sent = call(thread.send_message(&self.http, message)).await?;
        if entering_done {
            post.done_message_id = i64::try_from(sent.id.get()).ok();
            self.store.save_forum_post(&post).await?;
        } else if record.from == State::Done
            && record.to != State::Done
            && let Some(done) = post.done_message_id
        {
            // The sprint left `done`: its buttons go.
            let id = MessageId::new(u64::try_from(done).unwrap_or_default());
            call(thread.edit_message(&self.http, id, EditMessage::new().components(Vec::new())))
                .await?;
            post.done_message_id = None;
            self.store.save_forum_post(&post).await?;
        }
        if let Some(Note::Escalated { .. }) = &record.note {
            self.post_digest(thread, &sprint, record).await?;
        }
        self.boards.entry(sprint.id.clone()).or_default().dirty = true;
        Ok(())
    }

    /// After an escalation line: every attempt of the stage, so the human sees what was
    /// tried without opening logs.
    async fn post_digest(
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
        call(thread.send_message(&self.http, message)).await?;
        Ok(())
    }

    /// The sprint's forum post, created on first need with the board as its first message.
    async fn post_for(&self, sprint: &Sprint) -> Result<ForumPost, DeliveryError> {
        if let Some(post) = self.store.forum_post(&sprint.id).await? {
            return Ok(post);
        }
        let forum = ChannelId::new(self.discord.forum_channel_id.0);
        let first = CreateMessage::new()
            .content(self.board_text(sprint).await?)
            .allowed_mentions(CreateAllowedMentions::new());
        let thread = call(forum.create_forum_post(
            &self.http,
            CreateForumPost::new(thread_title(&sprint.id, &sprint.goal), first),
        ))
        .await?;
        // A forum post's starter message has the thread's id.
        let id = i64::try_from(thread.id.get()).unwrap_or_default();
        let post = ForumPost {
            sprint_id: sprint.id.clone(),
            thread_id: id,
            board_message_id: id,
            done_message_id: None,
        };
        self.store.save_forum_post(&post).await?;
        tracing::info!(sprint = %sprint.id, thread = id, "forum post created");
        Ok(post)
    }

    /// Edits the boards that changed and whose last edit is old enough. Returns how long
    /// until the next one is due.
    async fn flush_boards(&mut self) -> Duration {
        let mut next = Duration::from_secs(3600);
        let due: Vec<String> = self
            .boards
            .iter()
            .filter(|(_, b)| b.dirty)
            .filter_map(|(id, b)| match b.last_edit {
                Some(at) if at.elapsed() < BOARD_INTERVAL => {
                    next = next.min(BOARD_INTERVAL - at.elapsed());
                    None
                }
                _ => Some(id.clone()),
            })
            .collect();
        for id in due {
            match self.edit_board(&id).await {
                Ok(()) => {
                    let board = self.boards.entry(id).or_default();
                    board.dirty = false;
                    board.last_edit = Some(Instant::now());
                }
                Err(e) => {
                    tracing::warn!(sprint = %id, error = %e, "status board edit failed; will retry");
                    next = next.min(Duration::from_secs(5));
                }
            }
        }
        next
    }

    async fn edit_board(&self, sprint_id: &str) -> Result<(), DeliveryError> {
        let (Some(sprint), Some(post)) = (
            self.store.sprint(sprint_id).await?,
            self.store.forum_post(sprint_id).await?,
        ) else {
            return Ok(());
        };
        let thread = ChannelId::new(u64::try_from(post.thread_id).unwrap_or_default());
        let message = MessageId::new(u64::try_from(post.board_message_id).unwrap_or_default());
        let edit = EditMessage::new()
            .content(self.board_text(&sprint).await?)
            .allowed_mentions(CreateAllowedMentions::new());
        call(thread.edit_message(&self.http, message, edit)).await?;
        Ok(())
    }

    async fn board_text(&self, sprint: &Sprint) -> Result<String, DeliveryError> {
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
        Ok(board(
            sprint,
            last_verdict.as_deref(),
            &usage,
            self.config.pipeline.locale,
            self.config.pipeline.max_attempts,
            crate::orchestrator::now_ms(),
        ))
    }
}
