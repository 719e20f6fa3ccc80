//! The forum bridge: one forum post per sprint, a status board edited in place, and one
//! line per transition. It works from the transitions log with a delivery cursor in the
//! database and uses the broadcast channel only as a wake-up, so after a restart, an
//! outage or a lagged receiver it catches up in order, with no line lost or posted twice
//! (every line carries a nonce Discord deduplicates on, for the case where a post arrived
//! but its answer did not).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use poise::serenity_prelude as serenity;
use serenity::futures::{self, StreamExt};
use serenity::{
    ChannelId, CreateAllowedMentions, CreateForumPost, CreateMessage, EditMessage, MessageId, Nonce,
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
/// Sprints whose lines are delivered at once (each sprint's in order). Discord limits
/// each thread on its own, and serenity waits out every limit it is told of.
const AT_ONCE: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error(transparent)]
    Discord(#[from] super::rest::RestError),
    #[error("Discord did not answer within {}s", CALL_TIMEOUT.as_secs())]
    Timeout,
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// How often a bot on a shared database reads the log at least (other hosts' transitions
/// also wake it through the database).
const SHARED_POLL: Duration = Duration::from_secs(1);

impl DeliveryError {
    /// Discord's answer will not change by asking again: the channel or message is gone
    /// (404), the bot may not post there (403), or Discord rejects the request (400).
    fn is_permanent(&self) -> bool {
        self.status().is_some_and(|s| matches!(s, 400 | 403 | 404))
    }

    /// Discord says the channel does not exist (any more): 404 Unknown Channel.
    fn is_unknown_channel(&self) -> bool {
        self.status() == Some(404) && self.code() == Some(10003)
    }

    /// Discord refuses the token: not an outage to wait out.
    fn is_refused(&self) -> bool {
        self.status() == Some(401)
    }

    /// A 429 for the whole bot, not one route.
    fn is_global_rate_limit(&self) -> bool {
        matches!(self, DeliveryError::Discord(e) if e.is_global())
    }

    /// How long a 429 says to wait.
    fn retry_after(&self) -> Option<Duration> {
        match self {
            DeliveryError::Discord(e) => e.retry_after(),
            _ => None,
        }
    }

    fn status(&self) -> Option<u16> {
        match self {
            DeliveryError::Discord(e) => e.status(),
            _ => None,
        }
    }

    fn code(&self) -> Option<i64> {
        match self {
            DeliveryError::Discord(e) => e.code(),
            _ => None,
        }
    }
}

/// A status board waiting for its next edit.
#[derive(Debug, Default)]
struct Board {
    last_edit: Option<Instant>,
    dirty: bool,
    /// No edit before this (a failed edit's retry, a 429's `retry_after`).
    not_before: Option<Instant>,
}

/// A sprint whose next line failed for now: it waits its turn; the other sprints do not.
#[derive(Debug)]
struct Waiting {
    failures: u32,
    until: Instant,
}

/// Lines of a sprint that Discord would not take for good (shown on its board).
#[derive(Debug, Default, Clone)]
struct Skipped {
    lines: u32,
    last_error: String,
}

/// What the sprints delivered at once share; each holds it only between two awaits.
#[derive(Default)]
struct Shared {
    boards: HashMap<String, Board>,
    /// Delivery is per sprint: a sprint whose line failed waits on its own backoff.
    waiting: HashMap<String, Waiting>,
    /// Per sprint, the global seq of its last line delivered (or skipped) past the shared
    /// cursor, as its own cursor in the database holds it.
    delivered: HashMap<String, i64>,
    skipped: HashMap<String, Skipped>,
    /// No line before this: Discord's global rate limit (a 429 with `global: true`).
    global_wait: Option<Instant>,
    /// A Discord failure is logged once a minute, not on every retry.
    repeated: super::Repeated,
    /// Forum posts in Discord that may belong to sprints with none recorded, by title: a
    /// bot that stopped (or lost its lease, or whose call timed out) between creating a
    /// post and recording it leaves one, and the next post for that sprint is that one.
    /// `None` until read (at the start of each term as the bot, and after a creation
    /// whose outcome is unknown).
    unrecorded: Option<HashMap<String, ChannelId>>,
    /// How often `unrecorded` was dropped: a listing under way meanwhile may miss the post
    /// whose creation was in doubt, and is not kept.
    unrecorded_drops: u64,
}

pub struct Bridge {
    rest: super::rest::Rest,
    store: Store,
    config: Arc<Config>,
    discord: DiscordConfig,
    /// Among several hosts: the bot's lease, checked before each line.
    pub(super) lead: Option<super::Lead>,
    shared: std::sync::Mutex<Shared>,
    /// One listing of the forum's posts at a time (the sprints delivered at once may all
    /// want it at the start of a term).
    listing: tokio::sync::Mutex<()>,
}

async fn call<T>(
    f: impl std::future::Future<Output = Result<T, super::rest::RestError>>,
) -> Result<T, DeliveryError> {
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(DeliveryError::Timeout),
    }
}

/// Where a batch's lines stand, for the shared cursor.
struct Progress {
    /// Delivered, skipped for good, or done with in an earlier pass.
    done: Vec<bool>,
    /// The lines before this one are all done with.
    prefix: usize,
    /// Every line of the pass before this batch is done with: the shared cursor moves.
    moves: bool,
    /// The shared cursor as this batch wrote it.
    written: Option<i64>,
}

/// What became of one line in a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Posted now (or skipped for good): done with.
    Delivered,
    /// Done with in an earlier pass (past the shared cursor, on the sprint's own).
    Before,
    /// Its sprint waits on its backoff: not yet.
    Waits,
}

/// The wait before the next try after `failures` failures in a row.
fn backoff(failures: u32) -> Duration {
    (RETRY_BASE * (1u32 << failures.min(8))).min(RETRY_MAX)
}

/// How much older than its sprint a post it continues may be (the host's clock and
/// Discord's may differ).
const UNRECORDED_SLACK_MS: i64 = 5 * 60 * 1000;

/// A sprint's post as recorded for its thread: the starter message (the board) has the
/// thread's id.
fn post_of(sprint_id: &str, thread: ChannelId) -> ForumPost {
    let id = i64::try_from(thread.get()).unwrap_or_default();
    ForumPost {
        sprint_id: sprint_id.to_string(),
        thread_id: id,
        board_message_id: id,
        done_message_id: None,
    }
}

/// The database cursor of one sprint's lines, beside the shared `CURSOR`.
fn sprint_cursor(sprint_id: &str) -> String {
    format!("{CURSOR}:{sprint_id}")
}

impl Bridge {
    pub fn new(
        rest: super::rest::Rest,
        store: Store,
        config: Arc<Config>,
        discord: DiscordConfig,
    ) -> Bridge {
        Bridge {
            rest,
            store,
            config,
            discord,
            lead: None,
            shared: std::sync::Mutex::new(Shared::default()),
            listing: tokio::sync::Mutex::new(()),
        }
    }

    /// The state the sprints share, for `f` (which cannot await).
    fn with<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        let mut shared = self
            .shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut shared)
    }

    /// Delivers the log until `shutdown` resolves, or until Discord refuses the token (a
    /// token revoked while `serve` runs): that is not an outage to wait out.
    pub async fn run(
        self,
        mut events: broadcast::Receiver<std::sync::Arc<crate::orchestrator::Committed>>,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), super::StartError> {
        tokio::pin!(shutdown);
        let mut store_failures = 0u32;
        // Sharing a PostgreSQL database, other hosts commit transitions too: the database
        // tells of each, and a poll every second is the safety net.
        let news = std::sync::Arc::new(tokio::sync::Notify::new());
        let shared = self.store.scope().is_some();
        if shared && let Err(e) = self.store.listen(news.clone()).await {
            tracing::warn!(error = %e, "cannot listen for other hosts' transitions: polling");
        }
        loop {
            // A pass can take long while Discord times out: at shutdown it stops after the
            // line it is delivering (cancelling it there could post a line whose cursor is
            // never written, and post it again at the next start).
            let stop = AtomicBool::new(false);
            let passed = {
                let pass = self.pass(&stop);
                tokio::pin!(pass);
                tokio::select! {
                    r = &mut pass => r,
                    () = &mut shutdown => {
                        stop.store(true, Ordering::Relaxed);
                        let _ = pass.await;
                        return Ok(());
                    }
                }
            };
            let wait = match passed {
                Ok(()) => {
                    store_failures = 0;
                    let boards = self.flush_boards().await;
                    let retry = self.with(|s| {
                        s.waiting
                            .values()
                            .map(|w| w.until)
                            .chain(s.global_wait)
                            .map(|until| until.saturating_duration_since(Instant::now()))
                            .min()
                    });
                    retry.map_or(boards, |r| r.min(boards))
                }
                Err(e) if e.is_refused() => {
                    return Err(super::StartError::TokenRefused(
                        self.discord.token_env.clone(),
                        e.to_string(),
                    ));
                }
                Err(e) => {
                    // The database: all sprints wait for it alike.
                    store_failures = store_failures.saturating_add(1);
                    tracing::warn!(error = %e, "Discord delivery cannot read the log; will retry");
                    backoff(store_failures)
                }
            };
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                // Any news (or a lag) means: read the log again. A sprint that waits on its
                // backoff keeps waiting (`pass` skips it until its time).
                _ = events.recv() => {}
                () = news.notified() => {}
                () = tokio::time::sleep(if shared { wait.min(SHARED_POLL) } else { wait }) => {}
            }
        }
    }

    /// Delivers what the log holds past the shared cursor, in order per sprint, the lines
    /// of different sprints at once. A sprint whose line failed for now is passed over (and
    /// its later lines with it) until its backoff ends; the shared cursor stops before its
    /// first waiting line, and the lines of other sprints delivered beyond it are recorded
    /// on their own cursors.
    async fn pass(&self, stop: &AtomicBool) -> Result<(), DeliveryError> {
        let mut after = self.store.cursor(CURSOR).await?;
        // Whether every line so far in this pass is done with, so the shared cursor moves.
        let mut whole = true;
        // A sprint that waited once in this pass waits for the rest of it: its backoff may
        // run out meanwhile, and a later line delivered before the one that waits would
        // move its cursor past that one for good.
        let mut held: HashSet<String> = HashSet::new();
        loop {
            let batch = self.store.transitions_after(after, BATCH).await?;
            let Some(last) = batch.last() else {
                return Ok(());
            };
            after = last.global_seq;
            let mut sprints: Vec<(&str, Vec<usize>)> = Vec::new();
            let mut index: HashMap<&str, usize> = HashMap::new();
            for (i, record) in batch.iter().enumerate() {
                let at = *index.entry(&record.sprint_id).or_insert_with(|| {
                    sprints.push((&record.sprint_id, Vec::new()));
                    sprints.len() - 1
                });
                sprints[at].1.push(i);
            }
            let progress = tokio::sync::Mutex::new(Progress {
                done: vec![false; batch.len()],
                prefix: 0,
                moves: whole,
                written: None,
            });
            let halted = AtomicBool::new(false);
            let mut deliveries = Vec::with_capacity(sprints.len());
            for (id, lines) in sprints {
                let waits = held.contains(id);
                let (batch, progress, halted) = (&batch, &progress, &halted);
                deliveries.push(async move {
                    let ended = if waits {
                        Ok(true)
                    } else {
                        self.deliver_sprint(batch, &lines, progress, stop, halted)
                            .await
                    };
                    (id, ended)
                });
            }
            let ended: Vec<(&str, Result<bool, DeliveryError>)> = futures::stream::iter(deliveries)
                .buffer_unordered(AT_ONCE)
                .collect()
                .await;
            let mut failed = None;
            for (id, ended) in ended {
                match ended {
                    Ok(true) => {
                        held.insert(id.to_string());
                    }
                    Ok(false) => {}
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
            if stop.load(Ordering::Relaxed) || self.lead.as_ref().is_some_and(|l| !l.holds()) {
                return Ok(());
            }
            let progress = progress.into_inner();
            // Lines done with in an earlier pass move the shared cursor only now.
            if progress.moves
                && progress.prefix > 0
                && let Some(seq) = batch.get(progress.prefix - 1).map(|r| r.global_seq)
                && progress.written.is_none_or(|w| w < seq)
            {
                self.store.set_cursor(CURSOR, seq).await?;
            }
            whole = progress.moves && progress.prefix == batch.len();
            if (batch.len() as i64) < BATCH {
                return Ok(());
            }
        }
    }

    /// One sprint's lines of a batch, in order, until one waits (then `true`), the pass
    /// stops, or another sprint's delivery fails for all.
    async fn deliver_sprint(
        &self,
        batch: &[TransitionRecord],
        lines: &[usize],
        progress: &tokio::sync::Mutex<Progress>,
        stop: &AtomicBool,
        halted: &AtomicBool,
    ) -> Result<bool, DeliveryError> {
        for &i in lines {
            if stop.load(Ordering::Relaxed)
                || halted.load(Ordering::Relaxed)
                || self.lead.as_ref().is_some_and(|l| !l.holds())
            {
                return Ok(false);
            }
            let record = &batch[i];
            let span = tracing::info_span!("deliver", sprint = %record.sprint_id, seq = record.seq);
            let done = match self.deliver_in_turn(record).instrument(span).await {
                Ok(Turn::Waits) => return Ok(true),
                Ok(turn) => self.done_with(batch, i, turn, progress).await,
                Err(e) => Err(e),
            };
            if let Err(e) = done {
                halted.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        Ok(false)
    }

    /// Records that line `i` of the batch is done with: on the shared cursor when every
    /// line before it is too, else on its sprint's own. The lock is held while writing, so
    /// the shared cursor is written in order.
    async fn done_with(
        &self,
        batch: &[TransitionRecord],
        i: usize,
        turn: Turn,
        progress: &tokio::sync::Mutex<Progress>,
    ) -> Result<(), DeliveryError> {
        let mut p = progress.lock().await;
        p.done[i] = true;
        while p.moves && p.done.get(p.prefix).copied().unwrap_or(false) {
            p.prefix += 1;
        }
        if turn != Turn::Delivered {
            return Ok(());
        }
        let record = &batch[i];
        if i < p.prefix {
            let seq = batch[p.prefix - 1].global_seq;
            self.store.set_cursor(CURSOR, seq).await?;
            p.written = Some(seq);
        } else {
            let cursor = sprint_cursor(&record.sprint_id);
            self.store.set_cursor(&cursor, record.global_seq).await?;
            self.with(|s| {
                s.delivered
                    .insert(record.sprint_id.clone(), record.global_seq)
            });
        }
        Ok(())
    }

    /// One line, unless its sprint waits. A failure for now puts the sprint on its
    /// backoff; a failure for good skips the line, noted on the board. Only a refused token
    /// and the database stop the pass.
    async fn deliver_in_turn(&self, record: &TransitionRecord) -> Result<Turn, DeliveryError> {
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
    async fn delivered_up_to(&self, sprint_id: &str) -> Result<i64, DeliveryError> {
        if let Some(seq) = self.with(|s| s.delivered.get(sprint_id).copied()) {
            return Ok(seq);
        }
        let seq = self.store.cursor(&sprint_cursor(sprint_id)).await?;
        // Only this sprint's delivery (one at a time) writes its entry.
        self.with(|s| s.delivered.insert(sprint_id.to_string(), seq));
        Ok(seq)
    }

    async fn deliver(&self, record: &TransitionRecord) -> Result<(), DeliveryError> {
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
        call(self.rest.send_message(thread, &message)).await?;
        Ok(())
    }

    /// The sprint's forum post, created on first need with the board as its first message.
    async fn post_for(&self, sprint: &Sprint) -> Result<ForumPost, DeliveryError> {
        if let Some(post) = self.store.forum_post(&sprint.id).await? {
            return Ok(post);
        }
        if let Some(thread) = self.unrecorded_post(sprint).await? {
            tracing::info!(thread = %thread, "continuing the sprint's forum post an earlier bot created but did not record");
            let post = post_of(&sprint.id, thread);
            return Ok(self.store.record_new_forum_post(&post, None).await?);
        }
        self.new_post(sprint, None).await
    }

    /// A post in the forum titled as the sprint's would be, though none is recorded.
    async fn unrecorded_post(&self, sprint: &Sprint) -> Result<Option<ChannelId>, DeliveryError> {
        let listing = self.listing.lock().await;
        let drops = self.with(|s| s.unrecorded.is_none().then_some(s.unrecorded_drops));
        // A listing that cannot be kept (a creation came into doubt meanwhile) still
        // answers for this sprint.
        let mut unkept = None;
        if let Some(drops) = drops {
            let guild = serenity::GuildId::new(self.discord.guild_id.0);
            let forum = ChannelId::new(self.discord.forum_channel_id.0);
            let found = match call(self.rest.active_threads(guild)).await {
                Ok(threads) => threads
                    .into_iter()
                    .filter(|t| t.parent_id == Some(forum))
                    .map(|t| (t.name.trim().to_string(), t.id))
                    .collect(),
                // The list is a safeguard: without it a post may be there twice, and the
                // sprint's lines still go on.
                Err(e) if e.is_permanent() => {
                    tracing::warn!(error = %e, "cannot list the forum's posts; a post an earlier bot left unrecorded may stay beside the new one");
                    HashMap::new()
                }
                Err(e) => return Err(e),
            };
            unkept = self.with(|s| {
                if s.unrecorded_drops == drops {
                    s.unrecorded = Some(found);
                    None
                } else {
                    Some(found)
                }
            });
        }
        drop(listing);
        let title = thread_title(&sprint.id, &sprint.goal);
        let thread = match unkept {
            Some(mut found) => found.remove(title.trim()),
            None => self.with(|s| s.unrecorded.as_mut().and_then(|p| p.remove(title.trim()))),
        };
        let Some(thread) = thread else {
            return Ok(None);
        };
        // Made for this sprint, not for an earlier one of the same number and goal (a
        // database started afresh beside the same forum): not long before the sprint.
        // (A snowflake carries the time it was made.)
        let made_at = thread.created_at().unix_timestamp().saturating_mul(1000);
        Ok((made_at >= sprint.created_at - UNRECORDED_SLACK_MS).then_some(thread))
    }

    /// A new forum post for the sprint, or, `replacing` a deleted one (its thread id), its
    /// continuation, which its first line after the board says. Another bot may have
    /// recorded one first (the one before a failover, still finishing its call): that one
    /// is the sprint's, and this one's board becomes a pointer to it.
    async fn new_post(
        &self,
        sprint: &Sprint,
        replacing: Option<i64>,
    ) -> Result<ForumPost, DeliveryError> {
        let forum = ChannelId::new(self.discord.forum_channel_id.0);
        let first = CreateMessage::new()
            .content(self.board_text(sprint).await?)
            .allowed_mentions(CreateAllowedMentions::new());
        let post = CreateForumPost::new(thread_title(&sprint.id, &sprint.goal), first);
        let thread = match call(self.rest.create_forum_post(forum, &post)).await {
            Ok(thread) => thread,
            Err(e) => {
                if !e.is_permanent() {
                    // It may have been created all the same: look before the next try.
                    self.with(|s| {
                        s.unrecorded = None;
                        s.unrecorded_drops += 1;
                    });
                }
                return Err(e);
            }
        };
        let post = post_of(&sprint.id, thread.id);
        let id = post.thread_id;
        let recorded = self.store.record_new_forum_post(&post, replacing).await?;
        if recorded.thread_id != id {
            // Deleting it would take Manage Threads: it says where the sprint goes on.
            tracing::warn!(
                thread = id,
                kept = recorded.thread_id,
                "another bot recorded a post for this sprint first; this one points to it"
            );
            let pointer = match self.config.pipeline.locale {
                crate::config::Locale::Ko => {
                    format!(
                        "ℹ️ {}는 <#{}>에서 이어집니다",
                        sprint.id, recorded.thread_id
                    )
                }
                crate::config::Locale::En => {
                    format!("ℹ️ {} goes on in <#{}>", sprint.id, recorded.thread_id)
                }
            };
            let edit = EditMessage::new()
                .content(pointer)
                .allowed_mentions(CreateAllowedMentions::new());
            let board = MessageId::new(thread.id.get());
            if let Err(e) = call(self.rest.edit_message(thread.id, board, &edit)).await {
                tracing::warn!(error = %e, thread = id, "could not point the second post to the first; it keeps only its board");
            }
            return Ok(recorded);
        }
        tracing::info!(sprint = %sprint.id, thread = id, "forum post created");
        if replacing.is_some() {
            let note = match self.config.pipeline.locale {
                crate::config::Locale::Ko => format!(
                    "ℹ️ {}의 이전 포스트가 삭제되어 여기서 이어갑니다 (이전 기록: `hanarang sprint log {}`)",
                    sprint.id, sprint.id
                ),
                crate::config::Locale::En => format!(
                    "ℹ️ {}'s earlier post was deleted; it continues here (what came before: `hanarang sprint log {}`)",
                    sprint.id, sprint.id
                ),
            };
            let message = CreateMessage::new()
                .content(note)
                .allowed_mentions(CreateAllowedMentions::new());
            call(self.rest.send_message(thread.id, &message)).await?;
        }
        Ok(post)
    }

    /// Edits the boards that changed and whose last edit is old enough. Returns how long
    /// until the next one is due.
    async fn flush_boards(&self) -> Duration {
        let mut next = Duration::from_secs(3600);
        let due: Vec<String> = self.with(|s| {
            s.boards
                .iter()
                .filter(|(_, b)| b.dirty)
                .filter_map(|(id, b)| {
                    let after_interval = b.last_edit.map(|at| at + BOARD_INTERVAL);
                    let due = after_interval.into_iter().chain(b.not_before).max();
                    match due {
                        Some(at) if at > Instant::now() => {
                            next = next.min(at - Instant::now());
                            None
                        }
                        _ => Some(id.clone()),
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
                    board.dirty = false;
                    board.last_edit = Some(Instant::now());
                    board.not_before = None;
                }),
                // A board that is gone (the next line makes a new post) or forbidden is
                // not edited again until the sprint moves.
                Err(e) if e.is_permanent() => {
                    tracing::warn!(sprint = %id, error = %e, "status board cannot be edited");
                    self.with(|s| s.boards.entry(id).or_default().dirty = false);
                }
                Err(e) => {
                    tracing::warn!(sprint = %id, error = %e, "status board edit failed; will retry");
                    // Not before a 429's wait is over.
                    let wait = e.retry_after().unwrap_or(Duration::from_secs(5));
                    self.with(|s| {
                        s.boards.entry(id).or_default().not_before = Some(Instant::now() + wait);
                    });
                    next = next.min(wait);
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
        call(self.rest.edit_message(thread, message, &edit)).await?;
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
        let mut text = board(
            sprint,
            last_verdict.as_deref(),
            &usage,
            self.config.pipeline.locale,
            self.config.pipeline.max_attempts,
            crate::clock::now_ms(),
        );
        if let Some(reviewers) = super::render::reviewers_line(&runs, self.config.pipeline.locale) {
            text.push('\n');
            text.push_str(&reviewers);
        }
        if let Some(skipped) = self.with(|s| s.skipped.get(&sprint.id).cloned()) {
            let (n, why, id) = (skipped.lines, one_line(&skipped.last_error), &sprint.id);
            text.push_str(&match self.config.pipeline.locale {
                crate::config::Locale::Ko => format!(
                    "\n⚠️ 줄 {n}개를 올리지 못함 ({why}); 전체 기록: `hanarang sprint log {id}`"
                ),
                crate::config::Locale::En => format!(
                    "\n⚠️ {n} line(s) could not be posted ({why}); all of them: `hanarang sprint log {id}`"
                ),
            });
        }
        Ok(cut(&text, MAX_CONTENT))
    }
}
