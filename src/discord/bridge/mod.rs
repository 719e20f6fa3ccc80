//! The forum bridge: one forum post per sprint, a status board edited in place, and one
//! line per transition. It works from the transitions log with a delivery cursor in the
//! database and uses the broadcast channel only as a wake-up, so after a restart, an
//! outage or a lagged receiver it catches up in order, with no line lost or posted twice
//! (every line carries a nonce Discord deduplicates on, for the case where a post arrived
//! but its answer did not).

mod board;
mod delivery;
mod forum;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use poise::serenity_prelude as serenity;
use serenity::futures::{self, StreamExt};
use serenity::{
    ChannelId, CreateAllowedMentions, CreateForumPost, CreateMessage, EditMessage, MessageId, Nonce,
};
use tokio::sync::broadcast;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

use super::buttons::{done_buttons, escalation_buttons};
use super::render::{MAX_CONTENT, board, cut, thread_title};
use crate::config::{Config, DiscordConfig};
use crate::notify::messages::{one_line, render};
use crate::pipeline::Backoff;
use crate::pipeline::State;
use crate::pipeline::fsm::Note;
use crate::store::{ForumPost, Sprint, Store, TransitionRecord};

/// The name of this notifier's cursor in the database.
pub const CURSOR: &str = "discord";
/// Every Discord call gives up after this long (and is retried).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// At most one status-board edit per sprint this often; bursts are coalesced.
pub const BOARD_INTERVAL: Duration = Duration::from_secs(3);
/// The shortest wait before a failed delivery is tried again...
const RETRY_BASE: Duration = Duration::from_millis(250);
/// ...which doubles with each failure in a row, up to a minute.
const RETRY: Backoff = Backoff::doubling(RETRY_BASE, Duration::from_secs(60));
/// Log entries read at a time.
const BATCH: i64 = 100;
/// Lines read ahead of their delivery at most (a sprint that waits on its backoff keeps
/// its lines here, and the others' lines are read past them).
const PENDING: usize = 10_000;
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
    /// A delivery's task ended without an answer (it panicked).
    #[error("a delivery ended without an answer: {0}")]
    Lost(String),
}

/// How often a bot on a shared database reads the log at least (other hosts' transitions
/// also wake it through the database).
const SHARED_POLL: Duration = Duration::from_secs(1);
/// How often notes from the thread that wait for a run are looked at again, to mark them
/// 📨 when one was given them (only while some wait).
const NOTES_POLL: Duration = Duration::from_secs(5);

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

    /// Discord says the thread is archived (and did not open it for the request).
    fn is_thread_archived(&self) -> bool {
        self.code() == Some(super::rest::THREAD_ARCHIVED)
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
    /// The text it was last edited to: the same text is not sent again.
    shown: Option<String>,
    /// The running sister's step it was last told (run id and step).
    step: Option<(String, crate::store::RunLive)>,
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
    /// So is a bridge that is `PENDING` lines behind.
    behind: super::Repeated,
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
    /// Told when a note from the thread was recorded: it waits for a run, to be marked.
    pub notes: Arc<tokio::sync::Notify>,
}

async fn call<T>(
    f: impl std::future::Future<Output = Result<T, super::rest::RestError>>,
) -> Result<T, DeliveryError> {
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(DeliveryError::Timeout),
    }
}

/// The lines read from the log and not yet done with.
#[derive(Default)]
struct Queue {
    /// The global seq of the last line read (`None`: start from the shared cursor).
    read: Option<i64>,
    /// The shared cursor as written.
    written: i64,
    /// The global seqs of the lines read and not done with.
    pending: BTreeSet<i64>,
    /// Per sprint, its lines not done with, in order.
    lines: HashMap<String, VecDeque<TransitionRecord>>,
    /// Sprints with a line on its way.
    busy: HashSet<String>,
}

impl Queue {
    /// Where the shared cursor may go: every line up to it is done with.
    fn cursor(&self) -> i64 {
        let read = self.read.unwrap_or(self.written);
        self.pending.first().map_or(read, |&first| first - 1)
    }

    /// The sprint's first line is done with.
    fn pop(&mut self, sprint: &str) {
        if let Some(lines) = self.lines.get_mut(sprint) {
            lines.pop_front();
            if lines.is_empty() {
                self.lines.remove(sprint);
            }
        }
    }
}

/// Sleeps until `at`, or for ever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What became of one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Posted now (or skipped for good): done with.
    Delivered,
    /// Done with before (past the shared cursor, on the sprint's own).
    Before,
    /// Its sprint waits on its backoff (or the lease ran out): not yet.
    Waits,
}

/// The wait before the next try after `failures` failures in a row.
fn backoff(failures: u32) -> Duration {
    RETRY.delay(failures.saturating_add(1))
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
            notes: Arc::new(tokio::sync::Notify::new()),
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
    ///
    /// The lines of different sprints go at once (up to `AT_ONCE`), each sprint's in
    /// order: a sprint's line starts as soon as it is read and its sprint's line before it
    /// is done with, whatever other sprints' lines are still on their way. A sprint whose
    /// line failed for now waits on its own backoff, its later lines with it.
    pub async fn run(
        self,
        events: broadcast::Receiver<std::sync::Arc<crate::orchestrator::Committed>>,
        steps: broadcast::Receiver<std::sync::Arc<crate::orchestrator::LiveStep>>,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), super::StartError> {
        tokio::pin!(shutdown);
        let shared = self.store.scope().is_some();
        let news = self.listen(shared).await;
        let mut driver = Driver::new(self, shared, news, events, steps);
        loop {
            let now = Instant::now();
            driver.after_failure(now).await;
            driver.retry_when_due(now);
            if !driver.read_when_due().await {
                continue;
            }
            driver.start_lines().await;
            driver.start_boards(now);
            if let Some(end) = driver.wait(now, shutdown.as_mut()).await {
                return end;
            }
        }
    }

    /// The notifier the database tells of other hosts' transitions on, when it is shared.
    async fn listen(&self, shared: bool) -> Arc<tokio::sync::Notify> {
        // Sharing a PostgreSQL database, other hosts commit transitions too: the database
        // tells of each, and a poll every second is the safety net.
        let news = Arc::new(tokio::sync::Notify::new());
        if shared && let Err(e) = self.store.listen(news.clone()).await {
            tracing::warn!(error = %e, "cannot listen for other hosts' transitions: polling");
        }
        news
    }

    /// Delivers `record`'s line in its turn and records it done with, unless it waits.
    async fn deliver_line(
        &self,
        record: &TransitionRecord,
        queue: &tokio::sync::Mutex<Queue>,
    ) -> Result<Turn, DeliveryError> {
        // The lease may have run out while the line waited to start.
        if self.lead.as_ref().is_some_and(|l| !l.holds()) {
            return Ok(Turn::Waits);
        }
        let turn = self.deliver_in_turn(record).await?;
        if turn != Turn::Waits {
            self.done_with(record, turn, queue).await?;
        }
        Ok(turn)
    }

    /// One round of board edits, and of marking the notes given: how long until the next.
    async fn board_round(&self, shared: bool) -> Duration {
        let running = match shared {
            true => self.read_steps().await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "running sisters' steps could not be read");
                true
            }),
            false => false,
        };
        let mut next = self.flush_boards().await;
        if running {
            next = next.min(BOARD_INTERVAL);
        }
        match self.mark_notes().await {
            Ok(false) => next,
            Ok(true) => next.min(NOTES_POLL),
            Err(e) => {
                tracing::warn!(error = %e, "notes could not be marked as given; will retry");
                next.min(NOTES_POLL)
            }
        }
    }

    /// Reads the log past what was read into `queue`, at most `PENDING` lines not done
    /// with. Returns whether more is there to read.
    async fn read(&self, queue: &mut Queue) -> Result<bool, DeliveryError> {
        let mut after = match queue.read {
            Some(after) => after,
            None => {
                let cursor = self.store.cursor(CURSOR).await?;
                queue.written = cursor;
                cursor
            }
        };
        while queue.pending.len() < PENDING {
            let batch = self.store.transitions_after(after, BATCH).await?;
            let full = batch.len() as i64 == BATCH;
            for record in batch {
                after = record.global_seq;
                queue.pending.insert(record.global_seq);
                queue
                    .lines
                    .entry(record.sprint_id.clone())
                    .or_default()
                    .push_back(record);
            }
            queue.read = Some(after);
            if !full {
                return Ok(false);
            }
        }
        if self.with(|s| s.behind.due()) {
            tracing::warn!(
                lines = queue.pending.len(),
                "Discord delivery is this many lines behind; the log is read further as they go"
            );
        }
        Ok(true)
    }

    /// The next lines to start, at most `room`: the first line of each sprint with none on
    /// its way and no backoff to wait out, the sprints with the oldest lines first.
    fn next_lines(&self, queue: &mut Queue, room: usize) -> Vec<TransitionRecord> {
        let now = Instant::now();
        let (waiting, global) = self.with(|s| {
            let waiting: HashSet<String> = s
                .waiting
                .iter()
                .filter(|(_, w)| w.until > now)
                .map(|(id, _)| id.clone())
                .collect();
            (waiting, s.global_wait.is_some_and(|until| until > now))
        });
        if global || room == 0 {
            return Vec::new();
        }
        let mut ready: Vec<&TransitionRecord> = queue
            .lines
            .iter()
            .filter(|(id, _)| !queue.busy.contains(*id) && !waiting.contains(*id))
            .filter_map(|(_, lines)| lines.front())
            .collect();
        ready.sort_unstable_by_key(|r| r.global_seq);
        ready.truncate(room);
        let ready: Vec<TransitionRecord> = ready.into_iter().cloned().collect();
        queue.busy.extend(ready.iter().map(|r| r.sprint_id.clone()));
        ready
    }

    /// Records that `record`'s line is done with: on the shared cursor when every line
    /// before it is too, else on its sprint's own. The queue is held while writing, so the
    /// shared cursor is written in order.
    async fn done_with(
        &self,
        record: &TransitionRecord,
        turn: Turn,
        queue: &tokio::sync::Mutex<Queue>,
    ) -> Result<(), DeliveryError> {
        let mut q = queue.lock().await;
        q.pending.remove(&record.global_seq);
        let cursor = q.cursor();
        if cursor > q.written {
            self.store.set_cursor(CURSOR, cursor).await?;
            q.written = cursor;
        }
        if turn == Turn::Delivered && record.global_seq > cursor {
            let own = sprint_cursor(&record.sprint_id);
            self.store.set_cursor(&own, record.global_seq).await?;
            self.with(|s| {
                s.delivered
                    .insert(record.sprint_id.clone(), record.global_seq)
            });
        }
        Ok(())
    }
}

/// `Bridge::run`'s loop: what it keeps from one turn to the next, and its steps.
struct Driver {
    bridge: Arc<Bridge>,
    /// The database is shared with other hosts: it is read every `SHARED_POLL` too.
    shared: bool,
    /// Told by the database of other hosts' transitions.
    news: Arc<tokio::sync::Notify>,
    events: broadcast::Receiver<Arc<crate::orchestrator::Committed>>,
    events_open: bool,
    steps: broadcast::Receiver<Arc<crate::orchestrator::LiveStep>>,
    steps_open: bool,
    queue: Arc<tokio::sync::Mutex<Queue>>,
    /// Each line and each round of board edits is a task of its own, so none waits for
    /// this loop to look after it.
    lines: JoinSet<Result<Turn, DeliveryError>>,
    sprint_of: HashMap<tokio::task::Id, String>,
    boards: JoinSet<Duration>,
    boards_due: Option<Instant>,
    read_due: bool,
    /// The database failed: nothing starts until the lines on their way are back,
    /// then all is read again from the database after a backoff.
    failed: Option<DeliveryError>,
    store_failures: u32,
    retry_at: Option<Instant>,
}

impl Driver {
    /// The loop of `bridge`, due to read the log and to edit the boards at once.
    fn new(
        bridge: Bridge,
        shared: bool,
        news: Arc<tokio::sync::Notify>,
        events: broadcast::Receiver<Arc<crate::orchestrator::Committed>>,
        steps: broadcast::Receiver<Arc<crate::orchestrator::LiveStep>>,
    ) -> Driver {
        Driver {
            bridge: Arc::new(bridge),
            shared,
            news,
            events,
            events_open: true,
            steps,
            steps_open: true,
            queue: Arc::new(tokio::sync::Mutex::new(Queue::default())),
            lines: JoinSet::new(),
            sprint_of: HashMap::new(),
            boards: JoinSet::new(),
            // The first round also marks the notes given while no bot ran.
            boards_due: Some(Instant::now()),
            read_due: true,
            failed: None,
            store_failures: 0,
            retry_at: None,
        }
    }

    /// A failure with no line left on its way: the backoff starts and the queue is emptied.
    async fn after_failure(&mut self, now: Instant) {
        if !self.lines.is_empty() {
            return;
        }
        let Some(e) = self.failed.take() else {
            return;
        };
        self.store_failures = self.store_failures.saturating_add(1);
        tracing::warn!(error = %e, retry_in = ?backoff(self.store_failures), "Discord delivery stopped on an error (the database, or a delivery that ended without an answer); it reads the log again from its cursor after a wait");
        self.retry_at = Some(now + backoff(self.store_failures));
        *self.queue.lock().await = Queue::default();
    }

    /// The backoff after a failure is over: the log is due to be read again.
    fn retry_when_due(&mut self, now: Instant) {
        if self.retry_at.is_some_and(|at| at <= now) {
            self.retry_at = None;
            self.read_due = true;
        }
    }

    /// Reads the log when it is due and no failure waits; `false` when the read failed.
    async fn read_when_due(&mut self) -> bool {
        if !self.read_due || self.failed.is_some() || self.retry_at.is_some() {
            return true;
        }
        self.read_due = false;
        match self.bridge.read(&mut *self.queue.lock().await).await {
            Ok(more) => {
                self.read_due = more;
                true
            }
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }

    /// Starts the next lines there is room for, unless a failure waits or the lease is out.
    async fn start_lines(&mut self) {
        if self.failed.is_some() || !self.bridge.lead.as_ref().is_none_or(super::Lead::holds) {
            return;
        }
        let room = AT_ONCE.saturating_sub(self.lines.len());
        let queue = self.queue.clone();
        for record in self.bridge.next_lines(&mut *queue.lock().await, room) {
            self.start_line(record);
        }
    }

    /// Starts delivering `record`'s line as a task of its own.
    fn start_line(&mut self, record: TransitionRecord) {
        let sprint = record.sprint_id.clone();
        let (bridge, queue) = (self.bridge.clone(), self.queue.clone());
        let span = tracing::info_span!("deliver", sprint = %record.sprint_id, seq = record.seq);
        let task = self
            .lines
            .spawn(async move { bridge.deliver_line(&record, &queue).await }.instrument(span));
        self.sprint_of.insert(task.id(), sprint);
    }

    /// Starts a round of board edits when one is due and none is under way.
    fn start_boards(&mut self, now: Instant) {
        if !self.boards.is_empty() || self.boards_due.is_none_or(|at| at > now) {
            return;
        }
        self.boards_due = None;
        let (bridge, shared) = (self.bridge.clone(), self.shared);
        self.boards
            .spawn(async move { bridge.board_round(shared).await });
    }

    /// When to look again unprompted: a backoff's end, boards due, a retry, the next poll.
    fn wake(&self, now: Instant) -> Option<Instant> {
        self.bridge
            .with(|s| {
                s.waiting
                    .values()
                    .map(|w| w.until)
                    .chain(s.global_wait)
                    .filter(|&until| until > now)
                    .min()
            })
            .into_iter()
            .chain(self.boards_due.filter(|_| self.boards.is_empty()))
            .chain(self.retry_at)
            .chain(self.shared.then(|| now + SHARED_POLL))
            .min()
    }

    /// Waits for what comes next and looks after it: `Some` with how `run` ends.
    async fn wait(
        &mut self,
        now: Instant,
        shutdown: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> Option<Result<(), super::StartError>> {
        let wake = self.wake(now);
        tokio::select! {
            () = shutdown => {
                self.finish().await;
                return Some(Ok(()));
            }
            Some(ended) = self.lines.join_next_with_id(), if !self.lines.is_empty() => {
                return self.line_ended(ended).await;
            }
            Some(next) = self.boards.join_next(), if !self.boards.is_empty() => {
                // Boards that changed meanwhile are due again after their interval.
                self.boards_due_by(Instant::now() + next.unwrap_or(BOARD_INTERVAL));
            }
            // Any news (or a lag) means: read the log again.
            r = self.events.recv(), if self.events_open => {
                self.events_open = !matches!(r, Err(broadcast::error::RecvError::Closed));
                self.read_due = true;
            }
            r = self.steps.recv(), if self.steps_open => self.step(r),
            () = self.news.notified() => self.read_due = true,
            () = self.bridge.notes.notified() => self.boards_due_by(now),
            () = sleep_until(wake) => self.read_due |= self.shared,
        }
        None
    }

    /// Waits for every line on its way to end.
    async fn finish(&mut self) {
        // The lines on their way are let finish: cancelling one could post it with its
        // cursor never written, and post it again at the next start.
        while self.lines.join_next().await.is_some() {}
    }

    /// A line's task ended: its sprint goes on, or its failure is kept (`Some`: token refused).
    async fn line_ended(
        &mut self,
        ended: Result<(tokio::task::Id, Result<Turn, DeliveryError>), tokio::task::JoinError>,
    ) -> Option<Result<(), super::StartError>> {
        let (id, turn) = match ended {
            Ok((id, turn)) => (id, turn),
            Err(e) => (e.id(), Err(DeliveryError::Lost(e.to_string()))),
        };
        let sprint = self.sprint_of.remove(&id)?;
        let mut q = self.queue.lock().await;
        q.busy.remove(&sprint);
        match turn {
            Ok(Turn::Waits) => {}
            Ok(Turn::Delivered | Turn::Before) => {
                // Only a line done with, its cursor written, shows the database
                // works (a read alone does not: it may take no writes).
                self.store_failures = 0;
                q.pop(&sprint);
                self.boards_due = Some(Instant::now());
            }
            Err(e) if e.is_refused() => {
                drop(q);
                self.finish().await;
                return Some(Err(super::StartError::TokenRefused(
                    self.bridge.discord.token_source(),
                    e.to_string(),
                )));
            }
            Err(e) => self.failed = self.failed.take().or(Some(e)),
        }
        None
    }

    /// A running sister's step: its board is due within the interval.
    fn step(&mut self, r: Result<Arc<crate::orchestrator::LiveStep>, broadcast::error::RecvError>) {
        // A burst of steps shows the latest.
        match r {
            Ok(step) => {
                if self.bridge.note_step(&step) {
                    self.boards_due_by(Instant::now());
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => self.steps_open = false,
        }
    }

    /// The boards are due by `at` at the latest.
    fn boards_due_by(&mut self, at: Instant) {
        self.boards_due = Some(self.boards_due.map_or(at, |due| due.min(at)));
    }
}
