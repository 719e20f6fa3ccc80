//! The orchestrator: the one place that joins the state machine, the sister runner and the
//! store. It queues sprints behind each project's pipeline lock, spawns the stage's sister,
//! turns the run's outcome into an event, asks the rules (`pipeline::decide`), commits the
//! transition in one transaction and only then broadcasts it. Commands from the CLI and
//! Discord arrive through the database and are answered there.

mod approval;
mod check;
mod checkout;
pub mod client;
mod commands;
mod compose;
mod findings;
mod finish;
mod forge;
pub use forge::Describe;
mod lease;
mod memory;
mod merge;
mod publish;
mod recovery;
mod reviewers;
mod session;
mod spawn;
pub mod steps;
mod transition;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, broadcast, mpsc, oneshot};

use memory::Memory;

pub use lease::{LeaseError, LeaseGuard};
pub use steps::LiveStep;

use crate::config::Config;
use crate::pipeline::{self, Budget, Due, Event, Policy};
use crate::sister::{RunReport, Stop};
use crate::store::{CommandStatus, Run, Sprint, Store, StoreError, TransitionRecord};

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
/// The same for running sisters' steps (a missed one is replaced by the next).
const LIVE_CAPACITY: usize = 64;

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
    #[error(
        "agent.confine = \"required\", and runs cannot be contained here: {0} (`hanarang doctor` says more)"
    )]
    Uncontained(String),
    #[error("{0}")]
    Forge(String),
}

use crate::clock::now_ms;

/// What an in-process caller (the Discord bridge, `run`) needs: a way to wake the loop
/// after writing a command, and the transition events.
#[derive(Debug, Clone)]
pub struct Handle {
    pub store: Store,
    wake: Arc<Notify>,
    events: broadcast::Sender<Arc<Committed>>,
    live: broadcast::Sender<Arc<LiveStep>>,
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

    /// Running sisters' steps, at most one a second per run (`live.rs`). A lagging
    /// receiver misses steps only: the latest is on the run.
    pub fn subscribe_live(&self) -> broadcast::Receiver<Arc<LiveStep>> {
        self.live.subscribe()
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
    /// When this host last renewed its lease, on the monotonic clock. Sharing the
    /// database, its claim on its sprints lasts the lease's life from then: no sister is
    /// started past it (a host frozen between recording a run and starting it may have
    /// lost the sprint to another meanwhile).
    renewed: tokio::time::Instant,
    /// Where each run's container is made; `None`: the host gives none (`serve` warned).
    containers: Option<crate::sister::container::Containers>,
    /// The projects' forges, and when each pull request is looked at next.
    forges: forge::Forges,
    forge_tx: mpsc::UnboundedSender<forge::Visit>,
    forge_rx: mpsc::UnboundedReceiver<forge::Visit>,
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
        let containers = match crate::sister::container::Containers::open(store.runs_dir()) {
            Ok(containers) => Some(containers),
            Err(why) if config.agent.confine == crate::config::Confine::Required => {
                return Err(OrchestratorError::Uncontained(why));
            }
            Err(why) => {
                tracing::debug!(%why, "runs get no container: their process groups are stopped");
                None
            }
        };
        let forges = forge::Forges::open(&config).map_err(OrchestratorError::Forge)?;
        let (forge_tx, forge_rx) = mpsc::unbounded_channel();
        let lease = LeaseGuard::acquire(&store).await?;
        let (finished_tx, finished_rx) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        let (live, _) = broadcast::channel(LIVE_CAPACITY);
        let mut orchestrator = Orchestrator {
            policy: Policy::from(&config.pipeline),
            handle: Handle {
                store: store.clone(),
                wake: Arc::new(Notify::new()),
                events,
                live,
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
            renewed: tokio::time::Instant::now(),
            containers,
            forges,
            forge_tx,
            forge_rx,
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

    /// `run` on a thread of its own, with a current-thread runtime (what `serve` does):
    /// nothing else in the process, the Discord bot included, can hold the loop up. The
    /// handle works from any thread.
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

    /// The loop as a task of the runtime it is called on: `hanarang run` and `demo`, whose
    /// process has no bot the loop could wait behind.
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
        self.renewed = tokio::time::Instant::now();
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
                Some(visit) = self.forge_rx.recv() => {
                    if let Err(e) = self.forge_visited(visit).await {
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
                    if self.store.scope().is_some() && self.renewed.elapsed() > ttl {
                        self.lease_ran_out();
                    }
                    // The claim is counted from before the renewal is asked for: never
                    // later than the heartbeat the other hosts read.
                    let asked = tokio::time::Instant::now();
                    if let Err(e) = self.lease.renew(&self.store).await {
                        break Err(e.into());
                    }
                    self.renewed = asked;
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
                    let later = sprints[i + 1..].iter().map(String::as_str);
                    self.hold_spawns = pipeline::holds_spawn(&command.sprint_id, later);
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
            match pipeline::waits(sprint.next_run_at, now) {
                Some(wait) => next_due = next_due.min(wait),
                None => {
                    let runs = self.runs_of(&sprint, runs).await?;
                    let spent = spent_usd(&runs);
                    match pipeline::due(
                        self.budget(&sprint),
                        spent,
                        self.several_reviewers(),
                        sprint.state,
                    ) {
                        Due::Exceeded(event) => {
                            self.transition(&sprint, event, None, None, Some(runs))
                                .await?;
                        }
                        Due::Reviewers => self.review(&sprint).await?,
                        Due::Stage => self.spawn(&sprint, runs).await?,
                    }
                }
            }
        }
        // Pull requests waiting on their forges: looked at when due.
        let forges_due = self.visit_forges().await?;
        Ok(next_due.min(forges_due))
    }

    fn budget(&self, sprint: &Sprint) -> Budget {
        Budget {
            limit_usd: self.config.pipeline.max_cost_usd,
            raised_usd: sprint.budget_usd,
        }
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

    /// Whether this host runs as many sisters as `[host] max_sisters` lets it.
    fn at_cap(&self) -> bool {
        pipeline::at_cap(self.config.host.max_sisters, self.memory.running_count())
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
