//! The orchestrator: the one place that joins the state machine, the sister runner and the
//! store. It queues sprints behind each project's pipeline lock, spawns the stage's sister,
//! turns the run's outcome into an event, applies it through `fsm::apply`, commits the
//! transition in one transaction and only then broadcasts it. Commands from the CLI and
//! Discord arrive through the database and are answered there.

pub mod client;
mod lease;
mod memory;
mod recovery;
mod review;
mod spawn;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, broadcast, mpsc, oneshot};
use tracing::Instrument;

use memory::Memory;

pub use lease::{LeaseError, LeaseGuard};

use crate::config::Config;
use crate::domain::FailureKind;
use crate::handoff::message::HandoffMessage;
use crate::pipeline::fsm::Note;
use crate::pipeline::{Event, Facts, Failure, Policy, State, Transition, apply};
use crate::sister::{RunOutcome, RunReport, Stop};
use crate::store::{
    Command, CommandKind, CommandStatus, Run, RunEnd, Sprint, Store, StoreError, TransitionRecord,
};

/// How often the database is looked at for commands from another process (the CLI).
const COMMAND_POLL: Duration = Duration::from_millis(50);

/// The same where other processes wake the loop themselves (PostgreSQL's LISTEN/NOTIFY,
/// a datagram on the socket beside a SQLite database): a safety sweep only. Several hosts
/// on PostgreSQL sweep more often: another host's lost lease is found by the sweep.
const COMMAND_POLL_LISTENING: Duration = Duration::from_secs(1);
const COMMAND_POLL_WOKEN: Duration = Duration::from_secs(5);

/// How long the loop sleeps when nothing is due (commands still wake it).
const IDLE: Duration = Duration::from_secs(3600);

/// How many transitions a slow subscriber may fall behind before it must catch up from
/// the log.
const BROADCAST_CAPACITY: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum OrchestratorError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error("cannot start the orchestrator's thread or its runtime: {0}")]
    Thread(std::io::Error),
    #[error("the orchestrator's thread ended without a result (it panicked; see the log above)")]
    Panicked,
}

use crate::clock::now_ms;

/// What an in-process caller (the Discord bridge, `run`) needs: a way to wake the loop
/// after writing a command, and the transition events.
#[derive(Debug, Clone)]
pub struct Handle {
    pub store: Store,
    wake: Arc<Notify>,
    events: broadcast::Sender<Arc<Committed>>,
}

/// A transition as broadcast after its commit: the log entry, and the sprint as the
/// database holds it now (`Sprint::last_seq` is the entry's). Shared: each of the
/// channel's slots is a pointer, not a copy.
#[derive(Debug)]
pub struct Committed {
    pub record: TransitionRecord,
    pub sprint: Sprint,
}

impl Handle {
    /// The same handle, reading and writing through `store` (the same database through
    /// another pool: the Discord bot's, on its own runtime).
    pub fn with_store(self, store: Store) -> Handle {
        Handle { store, ..self }
    }

    /// Tells the orchestrator a command was written, so it need not wait for its poll.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Transition events, sent after each commit. A lagging receiver catches up from the
    /// transitions log.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Committed>> {
        self.events.subscribe()
    }
}

/// The loop running on its own thread (`Orchestrator::run_on_own_thread`): resolves to
/// its result once it has stopped.
#[derive(Debug)]
pub struct Driver(oneshot::Receiver<Result<(), OrchestratorError>>);

impl std::future::Future for Driver {
    type Output = Result<(), OrchestratorError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(OrchestratorError::Panicked)))
    }
}

/// The sprint `hanarang run` drives, and what tells which sprints are ahead of it.
struct Only {
    id: String,
    project: String,
    number: i64,
}

/// A run that ended, sent back to the loop by its task.
struct Finished {
    sprint_id: String,
    run_id: String,
    report: RunReport,
}

pub struct Orchestrator {
    config: Arc<Config>,
    store: Store,
    policy: Policy,
    handle: Handle,
    lease: LeaseGuard,
    /// Only this sprint, and the sprints ahead of it in its project's queue, are driven
    /// (`hanarang run`); all open sprints otherwise.
    only: Option<Only>,
    /// Running sisters and the loop's copies of the sprints it wrote (`memory.rs`).
    memory: Memory,
    finished_tx: mpsc::UnboundedSender<Finished>,
    finished_rx: mpsc::UnboundedReceiver<Finished>,
    /// A sprint reached a state that frees its project's pipeline lock since the queues
    /// were last read.
    lock_freed: bool,
    /// No transition starts a sister: while recovering (the loop spawns once it runs),
    /// while a later command of the batch being applied is for the same sprint, and once
    /// shutting down.
    hold_spawns: bool,
}

impl Orchestrator {
    /// Takes the database's lease (refusing when another orchestrator holds it), then
    /// recovers what a crash left behind.
    pub async fn start(
        config: Arc<Config>,
        store: Store,
    ) -> Result<Orchestrator, OrchestratorError> {
        // On PostgreSQL the database may be shared: this host drives what it claims.
        let store = store.shared_by(host_scope(&config, config.projects.keys().cloned()));
        let lease = LeaseGuard::acquire(&store).await?;
        let (finished_tx, finished_rx) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        let mut orchestrator = Orchestrator {
            policy: Policy::from(&config.pipeline),
            handle: Handle {
                store: store.clone(),
                wake: Arc::new(Notify::new()),
                events,
            },
            config,
            store,
            lease,
            only: None,
            memory: Memory::default(),
            finished_tx,
            finished_rx,
            lock_freed: true,
            hold_spawns: true,
        };
        orchestrator.recover().await?;
        orchestrator.hold_spawns = false;
        Ok(orchestrator)
    }

    /// Drive only this sprint (the foreground `run` command), and the sprints of its
    /// project that must move before it can start: the one holding the project's pipeline
    /// lock (a command given for it is applied, its sisters run) and older queued ones.
    pub fn only(mut self, sprint: &Sprint) -> Orchestrator {
        // It claims the sprints of this project only.
        if self.store.scope().is_some() {
            let scope = host_scope(&self.config, [sprint.project.clone()]);
            self.store = self.store.shared_by(scope);
        }
        self.only = Some(Only {
            id: sprint.id.clone(),
            project: sprint.project.clone(),
            number: sprint.number,
        });
        self
    }

    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// `run` on a thread of its own, with a single-threaded runtime: what `serve` and
    /// `run` do. The loop, its sisters' tasks and its database connection then share one
    /// thread, so a run's end reaches the loop without waking another thread (on a 2-core
    /// VM that cost more than a second worker gained: docs/benchmarks.md), and nothing
    /// else in the process (the Discord bot) can hold the loop up. The handle works from
    /// any thread.
    pub fn run_on_own_thread(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Driver {
        let (done_tx, done) = oneshot::channel();
        let loop_thread = move || {
            let result = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(self.run(shutdown)),
                Err(e) => Err(OrchestratorError::Thread(e)),
            };
            let _ = done_tx.send(result);
        };
        if let Err(e) = std::thread::Builder::new()
            .name("hanarang-loop".into())
            .spawn(loop_thread)
        {
            let (tx, rx) = oneshot::channel();
            let _ = tx.send(Err(OrchestratorError::Thread(e)));
            return Driver(rx);
        }
        Driver(done)
    }

    /// Runs until `shutdown` resolves. Running sisters are then stopped, their runs
    /// recorded as interrupted and the retry policy applied, and the lease released.
    pub async fn run(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), OrchestratorError> {
        // The loop's statements go through one connection, opened on the runtime that
        // runs the loop: its page cache stays warm, and no task of another runtime hands
        // it back (`Store::single_connection`). The handle's users read through the pool.
        self.store = self.store.single_connection();
        let own = self.store.clone();
        let result = self.drive(shutdown).await;
        own.close_single_connection().await;
        result
    }

    /// The loop as a task of the runtime it is called on, through the store's own pool:
    /// what the foreground `hanarang run` does, whose process holds nothing else the loop
    /// could wait behind (no Discord bot). One thread and one database connection then
    /// serve the console and the loop: a short command pays for no second thread,
    /// runtime or connection (docs/benchmarks.md).
    pub fn run_here(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Driver {
        let (done_tx, done) = oneshot::channel();
        tokio::spawn(async move {
            let _ = done_tx.send(self.drive(shutdown).await);
        });
        Driver(done)
    }

    /// The loop itself (`run`, `run_here`).
    async fn drive(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), OrchestratorError> {
        tokio::pin!(shutdown);
        // Sharing the database, the host's lease is renewed every third of its life; a
        // renewal later than its life means the lease ran out meanwhile (the process was
        // frozen, the database unreachable): the other hosts may have taken its sprints.
        let ttl = self.config.host.lease_ttl.0;
        let shared = self.store.scope().is_some();
        let every = if shared { ttl / 3 } else { lease::HEARTBEAT };
        // Among several hosts the first beat is at once: it takes over what hosts that
        // went meanwhile left. Alone, `start` has just taken the lease: the first beat is
        // one period on.
        let first = tokio::time::Instant::now() + if shared { Duration::ZERO } else { every };
        let mut heartbeat = tokio::time::interval_at(first, every);
        let mut renewed = tokio::time::Instant::now();
        let poll = match self.store.listen(self.handle.wake.clone()).await {
            Ok(true) if self.store.scope().is_some() => COMMAND_POLL_LISTENING,
            Ok(true) => COMMAND_POLL_WOKEN,
            Ok(false) => COMMAND_POLL,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for the database's wake-ups: polling");
                COMMAND_POLL
            }
        };
        // Commands (and sprints queued by another process) are looked for on a wake-up
        // and at least every `poll`; a pass right after a run ended need not.
        let mut look_for_commands = true;
        let mut last_look = tokio::time::Instant::now();
        let result = loop {
            if look_for_commands || last_look.elapsed() >= poll {
                last_look = tokio::time::Instant::now();
                look_for_commands = true;
            }
            let next_due = match self.step(look_for_commands).await {
                Ok(d) => d,
                Err(e) => break Err(e),
            };
            look_for_commands = false;
            tokio::select! {
                () = &mut shutdown => break Ok(()),
                Some(done) = self.finished_rx.recv() => {
                    if let Err(e) = self.finish(done).await {
                        break Err(e);
                    }
                }
                () = self.handle.wake.notified() => look_for_commands = true,
                () = tokio::time::sleep(next_due.min(poll)) => look_for_commands = true,
                _ = heartbeat.tick() => {
                    // A database removed under us would take every write and keep none.
                    if let Err(e) = self.store.check_file() {
                        break Err(e.into());
                    }
                    if self.store.scope().is_some() && renewed.elapsed() > ttl {
                        self.lease_ran_out();
                    }
                    if let Err(e) = self.lease.renew(&self.store).await {
                        break Err(e.into());
                    }
                    renewed = tokio::time::Instant::now();
                    if let Err(e) = self.take_over().await {
                        break Err(e);
                    }
                    // Among several hosts, what was taken over is looked at now; alone,
                    // the sweep and the wake-ups suffice.
                    look_for_commands = self.store.scope().is_some();
                }
            }
        };
        let stopped = self.stop_all().await;
        self.lease.release(&self.store).await;
        result.and(stopped)
    }

    /// One pass: answer commands and look at the queues (when `look_for_commands`, or
    /// when a pipeline lock was freed), spawn due sisters. Returns how long until the next
    /// retry is due.
    async fn step(&mut self, look_for_commands: bool) -> Result<Duration, OrchestratorError> {
        if look_for_commands {
            let pending = self.store.pending_commands().await?;
            let sprints: Vec<String> = pending.iter().map(|c| c.sprint_id.clone()).collect();
            for (i, command) in pending.into_iter().enumerate() {
                if self.wants_id(&command.sprint_id).await? {
                    // A later command of this batch for the same sprint (an abort right
                    // after an approval) is applied before its sister starts.
                    self.hold_spawns = sprints[i + 1..].contains(&command.sprint_id);
                    self.apply_command(command).await?;
                } else if let Some(only) = &self.only {
                    // Said at once, rather than left for a `serve` that cannot start while
                    // this `run` holds the database.
                    let reason = format!(
                        "{} is not driven by this `hanarang run`, which drives {} and the sprints ahead of it in project {}: give the command again once it has ended, under `hanarang serve`",
                        command.sprint_id, only.id, only.project
                    );
                    self.store
                        .resolve_command(command.id, CommandStatus::Refused, &reason, now_ms())
                        .await?;
                }
            }
            self.hold_spawns = false;
        }
        // The design's single pipeline lock, per project: the oldest queued sprint starts
        // when no other sprint of its project is between planning and a terminal state. A
        // sprint waiting in `done` or `escalated` keeps the lock: the workdir holds its
        // branch. New sprints come from other processes too, hence the look on every poll.
        // A host at its cap of sisters claims nothing and starts nothing (the end of one
        // of its runs wakes the loop).
        if !self.at_cap() && (look_for_commands || self.lock_freed) {
            self.lock_freed = false;
            for sprint in self.store.next_in_queues().await? {
                if self.wants(&sprint) {
                    // A queued sprint has never run.
                    self.transition(&sprint, Event::LockAcquired, None, None, Some(Vec::new()))
                        .await?;
                }
            }
        }
        // A pass that reads the stages from the database drops these copies: the read
        // holds them too.
        let entered = self.memory.take_entered();
        let in_stages = if look_for_commands {
            let from_db = self.store.sprints_in_stages().await?;
            from_db.into_iter().map(|s| (s, None)).collect()
        } else {
            entered
        };
        let now = now_ms();
        let mut next_due = IDLE;
        // A sprint kept twice since the last pass (two reviewers' verdicts) is looked at
        // once, in its latest copy.
        let mut in_stages = in_stages;
        in_stages.reverse();
        let mut seen = std::collections::HashSet::new();
        in_stages.retain(|(s, _)| seen.insert(s.id.clone()));
        in_stages.reverse();
        for (sprint, runs) in in_stages {
            // A stage of several reviewers is looked at while some of them run.
            let fans_out = self.fans_out(&sprint);
            if !self.wants(&sprint)
                || (self.memory.runs_sister(&sprint.id) && !fans_out)
                || self.memory.stopping(&sprint.id)
            {
                continue;
            }
            if self.at_cap() {
                break;
            }
            match sprint.next_run_at {
                Some(at) if at > now => {
                    let wait = Duration::from_millis(u64::try_from(at - now).unwrap_or(0));
                    next_due = next_due.min(wait);
                }
                _ => {
                    let runs = self.runs_of(&sprint, runs).await?;
                    match self.over_budget(&sprint, &runs) {
                        Some((spent_usd, limit_usd)) => {
                            let event = Event::BudgetExceeded {
                                spent_usd,
                                limit_usd,
                            };
                            self.transition(&sprint, event, None, None, Some(runs))
                                .await?;
                        }
                        None if fans_out => self.review(&sprint).await?,
                        None => self.spawn(&sprint, runs).await?,
                    }
                }
            }
        }
        Ok(next_due)
    }

    /// `Some((spent, limit))` when the sprint has spent more than it may: checked before
    /// every spawn, so nothing more is spent without a human's word. `runs`: all of the
    /// sprint's, as recorded (what `Store::usage` sums).
    fn over_budget(&self, sprint: &Sprint, runs: &[Run]) -> Option<(f64, f64)> {
        let limit = self.config.pipeline.max_cost_usd?;
        let limit = sprint.budget_usd.unwrap_or(limit);
        let spent = spent_usd(runs);
        (spent > limit).then_some((spent, limit))
    }

    /// The sprint's runs: `known` when the loop kept them, read otherwise.
    async fn runs_of(
        &self,
        sprint: &Sprint,
        known: Option<Vec<Run>>,
    ) -> Result<Vec<Run>, OrchestratorError> {
        Ok(match known {
            Some(runs) => runs,
            None => self.store.runs(&sprint.id).await?,
        })
    }

    fn wants(&self, sprint: &Sprint) -> bool {
        self.only.as_ref().is_none_or(|only| {
            sprint.id == only.id || (sprint.project == only.project && sprint.number < only.number)
        })
    }

    /// `wants` for a sprint known by its id only (a command's).
    async fn wants_id(&self, sprint_id: &str) -> Result<bool, OrchestratorError> {
        let Some(only) = &self.only else {
            return Ok(true);
        };
        if sprint_id == only.id {
            return Ok(true);
        }
        Ok(match self.store.sprint(sprint_id).await? {
            Some(sprint) => self.wants(&sprint),
            // Nothing to drive; whoever runs next answers it.
            None => false,
        })
    }

    /// Applies one event to a sprint and commits it; `Ok(None)` when the rules refuse it.
    /// A move into a stage whose sister may start at once records that run in the same
    /// commit and launches it. `runs`: the sprint's runs as they are with `run` ended, when
    /// the caller knows them (they are read otherwise).
    async fn transition(
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
        let facts = Facts {
            sprint_id: &sprint.id,
            sister_running,
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
        let mut after = self.next_sprint(sprint, &t, &event, run);
        if let (Event::Resume { .. }, Some(limit)) = (&event, self.config.pipeline.max_cost_usd) {
            // A human's resume is their word to spend more: another `max_cost_usd` from
            // what is spent now, summed as the budget check sums it.
            let known = self.runs_of(sprint, runs.take()).await?;
            let spent = spent_usd(&known);
            runs = Some(known);
            if spent >= sprint.budget_usd.unwrap_or(limit) {
                after.budget_usd = Some(spent + limit);
            }
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
                start: launch.as_ref().map(spawn::Composed::record),
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

    /// The sprint after a transition: the new position, plus what the event tells.
    fn next_sprint(
        &self,
        before: &Sprint,
        t: &Transition,
        event: &Event,
        run: Option<&RunEnd>,
    ) -> Sprint {
        let mut after = before.clone();
        after.state = t.to.state;
        after.round = t.to.round;
        after.attempt = t.to.attempt;
        after.resume = t.to.resume;
        // A pause waits for the reset it was given, to the millisecond; a retry for its
        // backoff from now.
        after.next_run_at = match (&t.note, event) {
            (Some(Note::Paused { resume_at_ms, .. }), _) => Some(*resume_at_ms),
            // One reviewer's verdict leaves another's retry waiting on its backoff.
            (None, Event::Reviewed { .. }) => before.next_run_at,
            _ => t
                .retry_delay()
                .map(|d| now_ms().saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))),
        };
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

    /// A user's command, from the CLI or Discord.
    async fn apply_command(&mut self, command: Command) -> Result<(), OrchestratorError> {
        let span = tracing::info_span!("command", id = command.id, sprint = %command.sprint_id, kind = command.kind.as_str());
        async {
            let (sprint, runs) = match self.memory.take_parked(&command.sprint_id) {
                Some((sprint, runs)) => (Some(sprint), Some(runs)),
                None => (self.store.sprint(&command.sprint_id).await?, None),
            };
            let Some(sprint) = sprint else {
                let reason = format!("no sprint {}", command.sprint_id);
                self.store
                    .resolve_command(command.id, CommandStatus::Refused, &reason, now_ms())
                    .await?;
                return Ok(());
            };
            let event = command.event();
            let fans_out = self.fans_out(&sprint);
            if fans_out
                && matches!(event, Event::Handoff { .. })
                && self.memory.runs_sister(&sprint.id)
            {
                let reason = format!(
                    "{} is being reviewed by several reviewers at once: a handoff takes one running sister (abort, or wait for their verdicts)",
                    sprint.id
                );
                self.store
                    .resolve_command(command.id, CommandStatus::Refused, &reason, now_ms())
                    .await?;
                return Ok(());
            }
            if let Some(running) = self.memory.running_of(&sprint.id) {
                if running.waiting.is_some() {
                    // Another command is being carried out; this one waits its turn.
                    return Ok(());
                }
                let stop = match &event {
                    Event::Abort { .. } => Some(Stop::Abort),
                    Event::Handoff { .. } => Some(Stop::Handoff),
                    _ => None,
                };
                if let Some(stop) = stop {
                    // The rules must accept it before the sister is stopped.
                    let facts = Facts {
                        sprint_id: &sprint.id,
                        sister_running: true,
                    };
                    if let Err(refusal) = apply(sprint.position(), &event, facts, &self.policy) {
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
                    // Every sister of the sprint stops (several reviewers: all of them); the
                    // command is applied when the first has.
                    running.waiting = Some(command);
                    self.memory.stop_sprint(&sprint.id, stop);
                    return Ok(());
                }
            }
            self.transition(&sprint, event, None, Some(&command), runs)
                .await?;
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// A run ended: record it and apply what it means, in one transaction.
    async fn finish(&mut self, done: Finished) -> Result<(), OrchestratorError> {
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

            match waiting {
                // A handoff that came too late: the sister finished first, and its result
                // stands.
                Some(command)
                    if command.kind == CommandKind::Handoff
                        && report.outcome != RunOutcome::HandedOff =>
                {
                    let reason = format!(
                        "{}'s run ended ({}) before it could be handed off",
                        sprint.id, report.outcome
                    );
                    self.store
                        .resolve_command(command.id, CommandStatus::Refused, &reason, now_ms())
                        .await?;
                }
                // The user's abort (or handoff) is what happened, whatever the sister
                // managed to print on its way out. The rules still see the sister as
                // running: that is when the command was accepted.
                Some(command) => {
                    let event = command.event();
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
                None => {}
            }
            self.memory.end(&done.run_id);
            let reviewer = runs
                .iter()
                .find(|r| r.run_id == done.run_id)
                .and_then(|r| r.reviewer.clone().map(|name| (name, r.attempt)));
            // A reviewer this loop stopped (a user's abort, another reviewer's ABORT, the
            // stage escalated): its end is recorded, and it is no failure of its own.
            if reviewer.is_some() && report.outcome == RunOutcome::Cancelled {
                self.store.end_run(&end).await?;
                return Ok(());
            }
            let failure = |outcome: &RunOutcome| Failure {
                kind: outcome.failure_kind().unwrap_or(FailureKind::Interrupted),
                detail: report.detail.clone(),
            };
            let event = match (&report.outcome, &report.message, reviewer) {
                // One of several reviewers: its answer, or its failure, is its own.
                (RunOutcome::Handoff, Some(valid), Some((reviewer, _)))
                    if let Some(verdict) =
                        crate::pipeline::review::ReviewVerdict::of(valid.message.verdict()) =>
                {
                    Event::Reviewed { reviewer, verdict }
                }
                (outcome, _, Some((reviewer, attempt)))
                    if !matches!(outcome, RunOutcome::Handoff | RunOutcome::Paused) =>
                {
                    Event::ReviewerFailed {
                        reviewer,
                        attempt,
                        failure: failure(outcome),
                    }
                }
                (RunOutcome::Handoff, Some(valid), _) => Event::Reported {
                    actor: valid.message.actor(),
                    verdict: valid.message.verdict(),
                    sprint_id: valid.message.claimed_sprint_id().map(str::to_string),
                    reason: valid.message.reason(),
                },
                // A usage limit: the stage waits for its reset, using no attempt.
                (RunOutcome::Paused, _, _) => {
                    let now = now_ms();
                    let resume_at_ms = report.resume_at_ms.unwrap_or(now).max(now);
                    Event::Paused {
                        resume_at_ms,
                        delay_ms: u64::try_from(resume_at_ms - now).unwrap_or(0),
                        detail: report.detail.clone(),
                    }
                }
                (outcome, _, _) => Event::Failed {
                    failure: failure(outcome),
                },
            };
            let facts = Facts {
                sprint_id: &sprint.id,
                sister_running: false,
            };
            if let Ok(t) = apply(sprint.position(), &event, facts, &self.policy)
                && let Some(Note::ProtocolViolation { reason }) = &t.note
            {
                tracing::warn!(%reason, raw = %report.stdout_tail, "protocol violation");
                end.outcome = RunOutcome::ProtocolViolation;
                end.detail = reason.clone();
            }
            let runs = with_end(runs, &end);
            self.transition(&sprint, event, Some(&end), None, Some(runs))
                .await?;
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// At shutdown: stop every running sister, record it as interrupted and apply the
    /// retry policy (an interrupted deploy escalates), so nothing is left in flight.
    /// Whether this host runs as many sisters as `[host] max_sisters` lets it.
    fn at_cap(&self) -> bool {
        self.config
            .host
            .max_sisters
            .is_some_and(|cap| self.memory.running_count() >= cap as usize)
    }

    /// Another host took the sprint over: nothing more is written for it here.
    pub(super) fn lost(&mut self, sprint_id: &str, what: &str) {
        tracing::warn!(sprint = %sprint_id, "{sprint_id} was taken over by another host: {what}");
        self.memory.lose(sprint_id);
    }

    /// The host's lease ran out before it was renewed: its sisters are stopped (the other
    /// hosts may have their sprints by now). What each run's end then writes is refused
    /// for a sprint taken over, and recorded as usual for one still this host's.
    fn lease_ran_out(&mut self) {
        tracing::error!(
            "this host's lease ran out before it could renew it (was the process frozen, or the database out of reach?): stopping its sisters"
        );
        self.memory.stop_all(Stop::Shutdown);
    }

    async fn stop_all(&mut self) -> Result<(), OrchestratorError> {
        self.hold_spawns = true;
        self.memory.stop_all(Stop::Shutdown);
        while self.memory.any_running() {
            let Some(done) = self.finished_rx.recv().await else {
                break;
            };
            self.finish(done).await?;
        }
        Ok(())
    }
}

/// This host among several on one database: its name, the projects it serves, its lease.
fn host_scope(
    config: &Config,
    projects: impl IntoIterator<Item = String>,
) -> crate::store::HostScope {
    crate::store::HostScope {
        name: config.host.name.clone(),
        projects: projects.into_iter().collect(),
        lease_ttl_ms: i64::try_from(config.host.lease_ttl.0.as_millis()).unwrap_or(i64::MAX),
        max_sisters: config.host.max_sisters,
    }
}

/// What a sprint's runs cost, in USD.
fn spent_usd(runs: &[Run]) -> f64 {
    runs.iter().filter_map(|r| r.cost_usd).sum()
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
        ended_at: now_ms(),
    }
}
