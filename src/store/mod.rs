//! The durable record behind one interface: sprints, their append-only transitions log,
//! every sister run, durable commands, the single-orchestrator lease and delivery cursors.
//! The orchestrator, the CLI, Discord, the tests and the benchmarks all go through
//! `Store`; nothing outside this folder opens a pool or writes SQL.
//!
//! Every transition is one database transaction that writes the sprint's new state,
//! appends to its log (contiguous `seq`), closes the run that caused it and answers the
//! command that asked for it.
//!
//! What every engine shares lives here: the records (`rows`), what a commit carries, the
//! errors, and the rule that a write waits out a lock held by another process
//! (`retry_locked`) instead of failing. Each engine is a module with its own SQL and a
//! migrations folder: `sqlite` (`migrations/sqlite/`, the embedded default) and `postgres`
//! (`migrations/postgres/`). The SQL both run alike is written once, in `portable`.

mod portable;
mod postgres;
pub mod rows;
mod sqlite;

use std::path::PathBuf;
use std::time::Duration;

pub use rows::{
    Command, CommandKind, CommandStatus, ForumPost, HostRecord, Lease, Run, Spend, Sprint,
    SprintStatus, StatusRow, StatusRows, TransitionRecord, Usage, review_round,
};
pub use sqlite::folds_log_at_stop;

use crate::domain::Actor;
use crate::domain::RunOutcome;
use crate::handoff::HandoffDocument;
use crate::pipeline::{Event, Transition};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database.url: cannot {verb} {url}: {source}", verb = if crate::config::is_postgres_url(url) { "connect to" } else { "open" })]
    Open { url: String, source: sqlx::Error },
    #[error("database {url}: migrations failed: {source}")]
    Migrate {
        url: String,
        source: sqlx::migrate::MigrateError,
    },
    #[error(
        "database {url} was migrated by a newer hanarang: it has migration {theirs}, this binary knows migrations up to {ours}; run the newer hanarang (or restore a backup made before the upgrade)"
    )]
    TooNew { url: String, theirs: i64, ours: i64 },
    #[error(
        "the database file {} was removed (or replaced) while in use: nothing more is written to it. Restore it from a backup (`<database>.backup-*`), or remove its -wal and -shm files to start afresh", .0.display()
    )]
    Removed(PathBuf),
    /// The database could not keep a write (disk full, read-only, I/O error): nothing of
    /// that write was kept.
    #[error("database {db}: {cause}")]
    Storage { db: String, cause: String },
    #[error("database error: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("the database holds bad data in {table} {key}: {what}")]
    Corrupt {
        table: &'static str,
        key: String,
        what: String,
    },
    #[error("no sprint {0}")]
    NoSprint(String),
    #[error(
        "no database at {}: nothing has been started with this config yet (`hanarang sprint start`, `run` or `serve` create it; check database.url)", .0.display()
    )]
    NoDatabase(PathBuf),
    #[error(
        "the database {0} has no hanarang tables yet: nothing has been started with this config (`hanarang sprint start`, `run` or `serve` create them; check database.url)"
    )]
    NotSetUp(String),
    #[error(
        "{0} belongs to another host now (it was taken over): this host's write for it was refused"
    )]
    Fenced(String),
    #[error("{0} changed while this transition was prepared; it was not applied")]
    Conflict(String),
    #[error(
        "run {0} is already on record (the orchestrator's copy of its sprint's runs is behind); the transition was not applied"
    )]
    RunTaken(String),
    #[error("cannot encode {0} as JSON: {1}")]
    Encode(&'static str, serde_json::Error),
}

impl StoreError {
    /// Another connection (another process) holds the lock this write needs, or every
    /// connection is busy: the same write may well succeed later.
    pub fn is_locked(&self) -> bool {
        match self {
            StoreError::Sql(sqlx::Error::PoolTimedOut) => true,
            StoreError::Sql(e) => sqlite::is_busy(e) || postgres::is_busy(e),
            _ => false,
        }
    }

    /// A failure of the storage under the database, named with the database (`db`, a
    /// path or a URL with its password hidden); any other error as it is.
    fn at(self, db: &str) -> StoreError {
        let StoreError::Sql(e) = &self else {
            return self;
        };
        match sqlite::storage_failure(e).or_else(|| postgres::storage_failure(e)) {
            Some(cause) => StoreError::Storage {
                db: db.to_string(),
                cause,
            },
            None => self,
        }
    }

    pub(crate) fn corrupt(table: &'static str, key: &str, what: &str) -> StoreError {
        StoreError::Corrupt {
            table,
            key: key.to_string(),
            what: what.to_string(),
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The first wait before a locked write is tried again; it doubles up to `LOCKED_RETRY_MAX`.
const LOCKED_RETRY_BASE: Duration = Duration::from_millis(100);
const LOCKED_RETRY_MAX: Duration = Duration::from_secs(5);

/// Set once the process is stopping: a locked write then waits at most
/// `LOCKED_WAIT_WHEN_STOPPING`.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
const LOCKED_WAIT_WHEN_STOPPING: Duration = Duration::from_secs(10);

/// The process is stopping (a signal): writes stop waiting for a locked database after a
/// bound.
pub fn stopping() {
    STOPPING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Runs a write again, with backoff, for as long as another process holds the database's
/// write lock (a backup, the `sqlite3` shell): that is a wait, not a failure, and what is
/// being written (a finished sister's result) is kept in memory meanwhile, never dropped.
/// Every other error is returned at once. A locked write is logged once, then every 10th
/// try.
async fn retry_locked<T, F>(what: &'static str, mut op: impl FnMut() -> F) -> Result<T>
where
    F: std::future::Future<Output = Result<T>>,
{
    let mut wait = LOCKED_RETRY_BASE;
    let mut tries = 0u32;
    let started = tokio::time::Instant::now();
    loop {
        match op().await {
            // Shutting down: the wait has a bound (what is not written is found again at
            // the next start, as after a crash), so a stop never hangs on a lock.
            Err(e)
                if e.is_locked()
                    && STOPPING.load(std::sync::atomic::Ordering::Relaxed)
                    && started.elapsed() >= LOCKED_WAIT_WHEN_STOPPING =>
            {
                tracing::warn!(error = %e, "the database is still locked; shutting down without: {what}");
                return Err(e);
            }
            Err(e) if e.is_locked() => {
                tries += 1;
                if tries % 10 == 1 {
                    tracing::warn!(error = %e, tries, retry_in = ?wait, "the database is locked by another process; {what}: will retry");
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(LOCKED_RETRY_MAX);
            }
            other => {
                if tries > 0 && other.is_ok() {
                    tracing::info!(tries, "the database is free again; {what}: done");
                }
                return other;
            }
        }
    }
}

/// A handle on the database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    engine: Engine,
    /// How errors name the database: its path, or its URL with the password hidden.
    name: std::sync::Arc<str>,
    /// Where run contract files go (for SQLite: beside the database file).
    runs_dir: PathBuf,
    /// The host this store works for, among several on one PostgreSQL database
    /// (`Store::shared_by`); `None`: the only orchestrator, as with SQLite.
    scope: Option<HostScope>,
}

/// A host among several on one PostgreSQL database (SPEC §9): its name, the projects it
/// serves, and how long its lease lasts unrenewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostScope {
    pub name: String,
    pub projects: Vec<String>,
    pub lease_ttl_ms: i64,
    /// `[host] max_sisters`: it claims and takes over no more sprints than it can run.
    pub max_sisters: Option<u32>,
}

/// The engine behind a `Store`, chosen by the scheme of `database.url`.
#[derive(Debug, Clone)]
enum Engine {
    Sqlite(sqlite::Db),
    Postgres(postgres::Db),
}

/// Runs `$body` with `$db` bound to the engine behind `$store`. Each arm is its own
/// future, so an engine call is awaited inside the body.
macro_rules! on_engine {
    ($store:expr, $db:ident => $body:expr) => {
        match &$store.engine {
            Engine::Sqlite($db) => $body,
            Engine::Postgres($db) => $body,
        }
    };
}

#[doc(hidden)]
pub mod testing;

/// The new state of a sprint after a transition, and what else the same transaction
/// records.
#[derive(Debug)]
pub struct Commit<'a> {
    /// The sprint as it was read before the transition (its `last_seq` guards the write).
    pub before: &'a Sprint,
    /// The sprint as it is after (state, round, attempt, resume, contract, branch, due
    /// time, focus).
    pub after: &'a Sprint,
    pub transition: &'a Transition,
    pub event: &'a Event,
    /// The run whose result caused the transition.
    pub run: Option<&'a RunEnd>,
    /// The command that asked for it, answered in the same transaction.
    pub command: Option<(i64, &'a str)>,
    pub at: i64,
    /// The run the move into a stage starts at once, recorded with it (as `start_run`
    /// would, at the transition's durability). Its focus, if any, is `after`'s no more.
    pub start: Option<NewRun<'a>>,
}

impl Commit<'_> {
    /// The `seq` of the log entry this commit appends.
    fn seq(&self) -> i64 {
        self.before.last_seq + 1
    }

    /// The event and the note as the log stores them.
    fn encoded(&self) -> Result<(String, Option<String>)> {
        let event =
            serde_json::to_string(self.event).map_err(|e| StoreError::Encode("event", e))?;
        let note = self
            .transition
            .note
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Encode("note", e))?;
        Ok((event, note))
    }

    /// What was written, as `transitions` reads it back, once the log gave it `global_seq`.
    fn record(&self, global_seq: i64) -> TransitionRecord {
        TransitionRecord {
            global_seq,
            sprint_id: self.before.id.clone(),
            seq: self.seq(),
            from: self.transition.from.state,
            to: self.transition.to.state,
            event: self.event.name(),
            round: self.transition.to.round,
            attempt: self.transition.to.attempt,
            at: self.at,
            run_id: self.run.map(|r| r.run_id.clone()),
            branch: Some(self.after.branch.clone()),
            by: self.event.by().map(str::to_string),
            detail: self.event.clone(),
            note: self.transition.note.clone(),
        }
    }
}

/// How a run ended, as recorded.
#[derive(Debug, Clone)]
pub struct RunEnd {
    pub run_id: String,
    pub outcome: RunOutcome,
    pub detail: String,
    pub rejection: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: i64,
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub message: Option<serde_json::Value>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    pub ended_at: i64,
}

/// A run about to be spawned.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub sprint_id: &'a str,
    /// The next number among the sprint's runs; the run's id is `domain::run_id`.
    pub number: i64,
    pub actor: Actor,
    pub round: u32,
    pub attempt: u32,
    pub parent_run_id: Option<&'a str>,
    pub handoff: &'a HandoffDocument,
    pub synthesized: bool,
    pub focus: Option<&'a str>,
    /// The workdir's git HEAD when it started, in a git workdir.
    pub git_head: Option<&'a str>,
    pub started_at: i64,
    /// Which of darang's reviewers this run is, when it has several.
    pub reviewer: Option<&'a str>,
}

/// How a write reaches the disk. `Relaxed` is SQLite's `synchronous = NORMAL`: the write
/// has no fsync of its own; it survives a crash of this process all the same (it is in
/// SQLite's log), and the next `Full` commit makes it durable with its own (the log is
/// written in order). Only for writes whose loss in a power cut loses no result and lets
/// nothing happen without a human's word. PostgreSQL writes everything alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Full,
    Relaxed,
}

/// Where a database stands against the migrations this binary carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigrationStatus {
    /// No database file yet: it is created at the first start.
    NotCreated,
    /// Every migration is applied.
    Current { applied: usize },
    /// These migration versions are not applied yet (they are, after a backup, at the
    /// next start).
    Pending(Vec<i64>),
}

impl Store {
    /// Opens (creating if missing) the database `url` names and applies the embedded
    /// migrations; a database that already has tables is backed up before an upgrade
    /// touches it.
    pub async fn open(url: &str) -> Result<Store> {
        let (engine, runs_dir) = if crate::config::is_postgres_url(url) {
            let (db, runs_dir) = postgres::Db::open(url).await?;
            (Engine::Postgres(db), runs_dir)
        } else {
            let (db, runs_dir) = sqlite::Db::open(url).await?;
            (Engine::Sqlite(db), runs_dir)
        };
        Ok(Store {
            engine,
            name: database_name(url).into(),
            runs_dir,
            scope: None,
        })
    }

    /// The same database, for the orchestrator of host `scope` among several: its lease
    /// is the host's, it drives only the sprints it claimed or took over, and it answers
    /// only their commands. Only PostgreSQL is shared; a SQLite store is returned as it
    /// is (one orchestrator drives every sprint).
    pub fn shared_by(&self, scope: HostScope) -> Store {
        let mut store = self.clone();
        if matches!(self.engine, Engine::Postgres(_)) {
            store.scope = Some(scope);
        }
        store
    }

    /// The host this store works for, when it shares the database with others.
    pub fn scope(&self) -> Option<&HostScope> {
        self.scope.as_ref()
    }

    /// The shared engine and the host, when this store is one host among several.
    fn shared(&self) -> Option<(&postgres::Db, &HostScope)> {
        match (&self.engine, &self.scope) {
            (Engine::Postgres(db), Some(scope)) => Some((db, scope)),
            _ => None,
        }
    }

    /// Opens a database that already exists, for the commands that only read it or act on
    /// sprints in it: they never create one (`StoreError::NoDatabase` names where they
    /// looked).
    pub async fn open_existing(url: &str) -> Result<Store> {
        if let Some(path) = database_path(url)
            && !path.exists()
        {
            return Err(StoreError::NoDatabase(
                std::path::absolute(&path).unwrap_or(path),
            ));
        }
        if crate::config::is_postgres_url(url)
            && Store::migration_status(url).await? == MigrationStatus::NotCreated
        {
            return Err(StoreError::NotSetUp(crate::config::redacted(url)));
        }
        Store::open(url).await
    }

    /// Reads, without changing anything, which migrations a database still needs.
    pub async fn migration_status(url: &str) -> Result<MigrationStatus> {
        if crate::config::is_postgres_url(url) {
            postgres::Db::migration_status(url).await
        } else {
            sqlite::Db::migration_status(url).await
        }
    }

    /// The PostgreSQL server's version at `url`, without setting anything up (for
    /// `doctor`).
    pub async fn postgres_version_at(url: &str) -> Result<String> {
        postgres::Db::version_at(url).await
    }

    /// The engine and its version, e.g. `SQLite 3.50.4` or `PostgreSQL 15.20` (for
    /// `doctor`).
    pub async fn engine_version(&self) -> Result<String> {
        on_engine!(self, db => db.server_version().await)
    }

    /// Whether the database is still the one this store opened: a SQLite file removed (or
    /// replaced) under a running process would take every write to a file nobody can
    /// open again.
    pub fn check_file(&self) -> Result<()> {
        on_engine!(self, db => db.check_file())
    }

    /// The same database through a connection of the orchestrator loop's own, which does
    /// all of the loop's writes one at a time. Call it on the runtime that will use it.
    pub fn single_connection(&self) -> Store {
        let engine = match &self.engine {
            Engine::Sqlite(db) => Engine::Sqlite(db.single_connection()),
            Engine::Postgres(db) => Engine::Postgres(db.single_connection()),
        };
        Store {
            engine,
            name: self.name.clone(),
            runs_dir: self.runs_dir.clone(),
            scope: self.scope.clone(),
        }
    }

    /// A write, in this process's turn on SQLite (`sqlite::Db::write_turn`), tried again
    /// while another process holds the database's lock (`retry_locked`).
    async fn write<T, F>(&self, what: &'static str, op: impl FnMut() -> F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let _turn = match &self.engine {
            Engine::Sqlite(db) => Some(db.write_turn().await),
            Engine::Postgres(_) => None,
        };
        retry_locked(what, op).await.map_err(|e| e.at(&self.name))
    }

    /// Where the contract file of a sprint's runs is written: one file per sprint,
    /// rewritten in place for each of its runs (they run one at a time). The database
    /// keeps every run's inputs; creating a file per run is the slow part of a spawn on
    /// some file systems (docs/benchmarks.md).
    pub fn contract_path(&self, sprint_id: &str) -> PathBuf {
        self.runs_dir.join(format!("{sprint_id}.contract.json"))
    }

    /// Closes every connection of the pool, and waits for it: what `serve` does as it
    /// stops. SQLite moves its write-ahead log into the database file as the last
    /// connection to it closes (a checkpoint: two fsyncs); a process that exits with a
    /// connection still open leaves the log behind, and the next process to open the
    /// database reads all of it again before its first statement (SQLite's commits keep it
    /// under `WAL_AUTOCHECKPOINT` pages).
    pub async fn close(&self) {
        on_engine!(self, db => db.close().await)
    }

    /// What a command that is about to exit does with its connections: PostgreSQL's are
    /// closed (the server would log each as lost); SQLite's are left open until the
    /// process ends, when the checkpoint of `close` would cost more than the next process
    /// pays to read the short log. Dropped instead, the last handle would close them on
    /// sqlx's worker thread while the process exits: a checkpoint cut short, or not, by
    /// chance. Everything written is committed by then.
    pub async fn exit(self) {
        if let Engine::Postgres(db) = &self.engine {
            db.close().await;
        } else {
            std::mem::forget(self);
        }
    }

    /// Closes the loop's own connection made by `single_connection` (on PostgreSQL the
    /// shared pool, which stays open), and waits for it.
    pub async fn close_single_connection(&self) {
        on_engine!(self, db => db.close_single_connection().await)
    }

    // --- sprints ---------------------------------------------------------------------

    /// Queues a new sprint; its id is the next `SPRINT-NNN`.
    pub async fn create_sprint(
        &self,
        project: &str,
        goal: &str,
        focus: Option<&str>,
        by: &str,
        branch_template: &str,
        at: i64,
    ) -> Result<Sprint> {
        let queued = self.write("queue a sprint", || async {
            on_engine!(self, db => db.create_sprint(project, goal, focus, by, branch_template, at).await)
        })
        .await?;
        self.nudge();
        Ok(queued)
    }

    pub async fn sprint(&self, id: &str) -> Result<Option<Sprint>> {
        on_engine!(self, db => db.sprint(id).await)
    }

    /// Every sprint, oldest first.
    pub async fn sprints(&self) -> Result<Vec<Sprint>> {
        on_engine!(self, db => db.sprints().await)
    }

    /// Sprints whose stage has a sister to run (planning, implementing, reviewing,
    /// deploying), oldest first.
    /// When shared: those this host owns.
    pub async fn sprints_in_stages(&self) -> Result<Vec<Sprint>> {
        if let Some((db, scope)) = self.shared() {
            return db.owned_in_stages(scope).await;
        }
        on_engine!(self, db => db.sprints_in_stages().await)
    }

    /// What a queued sprint waits for: the sprint holding its project's pipeline lock, else
    /// the oldest sprint queued before it in that project; `None` when it is next.
    pub async fn ahead_of(&self, sprint: &Sprint) -> Result<Option<Sprint>> {
        on_engine!(self, db => db.ahead_of(sprint).await)
    }

    /// For each project whose pipeline lock is free (no sprint between planning and a
    /// terminal state), its oldest queued sprint.
    ///
    /// When shared, the host first claims such a sprint in each project it serves (two
    /// hosts never claim two sprints of one project), and the sprints are those it owns
    /// and has not started yet.
    pub async fn next_in_queues(&self) -> Result<Vec<Sprint>> {
        if let Some((db, scope)) = self.shared() {
            self.write("claim queued sprints", || db.claim(scope))
                .await?;
            return db.owned_queued(scope).await;
        }
        on_engine!(self, db => db.next_in_queues().await)
    }

    /// Records a transition and everything that goes with it, in one transaction.
    /// Returns the log entry to broadcast (only after this returns: after the commit).
    /// A sprint that changed since `before` was read is `StoreError::Conflict`, a run
    /// number already taken `StoreError::RunTaken`: nothing of the transition is written.
    pub async fn commit(&self, c: Commit<'_>) -> Result<TransitionRecord> {
        self.write("commit a transition", || async {
            on_engine!(self, db => db.commit(&c).await)
        })
        .await
    }

    // --- the transitions log -------------------------------------------------------------

    pub async fn transitions(&self, sprint_id: &str) -> Result<Vec<TransitionRecord>> {
        on_engine!(self, db => db.transitions(sprint_id).await)
    }

    /// A sprint and its log entries after `seq`, read as one snapshot of the database, so
    /// the entries end exactly at the sprint's `last_seq` however many transitions commit
    /// meanwhile.
    pub async fn sprint_since(
        &self,
        id: &str,
        seq: i64,
    ) -> Result<Option<(Sprint, Vec<TransitionRecord>)>> {
        on_engine!(self, db => db.sprint_since(id, seq).await)
    }

    /// Log entries after `global_seq`, in order, at most `limit`.
    pub async fn transitions_after(
        &self,
        global_seq: i64,
        limit: i64,
    ) -> Result<Vec<TransitionRecord>> {
        on_engine!(self, db => db.transitions_after(global_seq, limit).await)
    }

    // --- runs ----------------------------------------------------------------------------

    /// Records a run before it is spawned, so a crash while it runs is found at restart.
    /// Returns its id (`domain::run_id`). A number already taken is an error: nothing is
    /// overwritten. A focus given with it is the run's: the sprint's is cleared with it.
    ///
    /// A deploy's start is written at full durability: after a power cut it must be
    /// found in flight, so that the deploy escalates instead of running again. An engine
    /// may write the other stages' starts with less: such a stage re-runs anyway.
    ///
    /// `epoch`: the sprint's as its caller read it; a sprint taken over since is
    /// `StoreError::Fenced`, and no run is recorded (SQLite's sprints are never taken over).
    pub async fn start_run(&self, new: NewRun<'_>, epoch: i64) -> Result<String> {
        self.write("record a run's start", || async {
            match &self.engine {
                Engine::Sqlite(db) => db.start_run(&new).await,
                Engine::Postgres(db) => db.start_run(&new, epoch).await,
            }
        })
        .await
    }

    /// Closes a run that caused no transition, and rolls its spend up on its sprint.
    pub async fn end_run(&self, run: &RunEnd) -> Result<()> {
        self.write("record a run's end", || async {
            on_engine!(self, db => db.end_run(run).await)
        })
        .await
    }

    pub async fn runs(&self, sprint_id: &str) -> Result<Vec<Run>> {
        on_engine!(self, db => db.runs(sprint_id).await)
    }

    /// Runs that were spawned and never recorded an end.
    /// When shared: of the sprints this host owns.
    pub async fn runs_in_flight(&self) -> Result<Vec<Run>> {
        if let Some((db, scope)) = self.shared() {
            return db.owned_runs_in_flight(scope).await;
        }
        on_engine!(self, db => db.runs_in_flight().await)
    }

    // --- usage ------------------------------------------------------------------------

    /// What a sprint's runs cost, in all and per sister.
    pub async fn usage(&self, sprint_id: &str) -> Result<Usage> {
        on_engine!(self, db => db.usage(sprint_id).await)
    }

    /// Every sprint with its total spend as one JSON array, oldest first: the same
    /// document `sprint status --json` prints from `Sprint` + `Spend` (a test holds the
    /// two equal), built by the database.
    pub async fn status_json(&self) -> Result<String> {
        on_engine!(self, db => db.status_json().await)
    }

    /// Every sprint's row of the `sprint status` table, oldest first.
    pub async fn status_rows(&self) -> Result<StatusRows> {
        on_engine!(self, db => db.status_rows().await)
    }

    /// Every sprint's total spend, in one query (for `sprint status`).
    pub async fn spend_by_sprint(&self) -> Result<std::collections::HashMap<String, Spend>> {
        on_engine!(self, db => db.spend_by_sprint().await)
    }

    // --- commands --------------------------------------------------------------------

    /// Records a user's command; the orchestrator applies it and writes the answer.
    pub async fn submit_command(
        &self,
        sprint_id: &str,
        kind: CommandKind,
        text: Option<&str>,
        by: &str,
        at: i64,
    ) -> Result<i64> {
        self.record_command(sprint_id, kind, text, by, at, Durability::Full)
            .await
    }

    /// `submit_command` for a command this process applies itself (the answer to `run`'s
    /// deploy question): a person's word, durable like any other.
    pub async fn submit_own_command(
        &self,
        sprint_id: &str,
        kind: CommandKind,
        text: Option<&str>,
        by: &str,
        at: i64,
    ) -> Result<i64> {
        self.record_command(sprint_id, kind, text, by, at, Durability::Full)
            .await
    }

    async fn record_command(
        &self,
        sprint_id: &str,
        kind: CommandKind,
        text: Option<&str>,
        by: &str,
        at: i64,
        durability: Durability,
    ) -> Result<i64> {
        let id = self.write("record a command", || async {
            on_engine!(self, db => db.submit_command(sprint_id, kind, text, by, at, durability).await)
        })
        .await?;
        self.nudge();
        Ok(id)
    }

    /// Commands not answered yet, in the order they were given.
    ///
    /// When shared: those for the sprints this host owns, and for the queued sprints of its
    /// projects that no host has claimed yet (an abort of a queued sprint).
    pub async fn pending_commands(&self) -> Result<Vec<Command>> {
        if let Some((db, scope)) = self.shared() {
            return db.pending_commands_for(scope).await;
        }
        on_engine!(self, db => db.pending_commands().await)
    }

    /// Every command given for a sprint, in the order given.
    pub async fn commands_of(&self, sprint_id: &str) -> Result<Vec<Command>> {
        on_engine!(self, db => db.commands_of(sprint_id).await)
    }

    pub async fn command(&self, id: i64) -> Result<Option<Command>> {
        on_engine!(self, db => db.command(id).await)
    }

    /// Answers a command that caused no transition (a refusal, or nothing to do).
    pub async fn resolve_command(
        &self,
        id: i64,
        status: CommandStatus,
        result: &str,
        at: i64,
    ) -> Result<()> {
        self.write("answer a command", || async {
            on_engine!(self, db => db.resolve_command(id, status, result, at).await)
        })
        .await
    }

    // --- the single-orchestrator lease ------------------------------------------------

    pub async fn lease(&self) -> Result<Option<Lease>> {
        on_engine!(self, db => db.lease().await)
    }

    /// Takes the lease if nobody holds it, or if its holder is gone (`is_gone` says so,
    /// e.g. a dead pid on this host or a heartbeat too old). Returns the holder that keeps
    /// it otherwise.
    pub async fn acquire_lease(
        &self,
        me: &Lease,
        is_gone: impl Fn(&Lease) -> bool,
    ) -> Result<Result<(), Lease>> {
        if let Some((db, scope)) = self.shared() {
            return self
                .write("take the host's lease", || {
                    db.acquire_host(scope, me, &is_gone)
                })
                .await;
        }
        self.write("take the lease", || async {
            on_engine!(self, db => db.acquire_lease(me, &is_gone).await)
        })
        .await
    }

    /// Renews the lease; `false` when someone else took it.
    pub async fn heartbeat(&self, token: &str, at: i64) -> Result<bool> {
        if let Some((db, scope)) = self.shared() {
            return db.renew_host(scope, token).await;
        }
        self.write("renew the lease", || async {
            on_engine!(self, db => db.heartbeat(token, at).await)
        })
        .await
    }

    pub async fn release_lease(&self, token: &str) -> Result<()> {
        if let Some((db, scope)) = self.shared() {
            return db.release_host(scope, token).await;
        }
        on_engine!(self, db => db.release_lease(token).await)
    }

    // --- several hosts (PostgreSQL) ---------------------------------------------------

    /// Takes over the open sprints of this host's projects whose owner's lease expired:
    /// they are this host's from now on (their in-flight runs are for it to recover).
    /// Nothing to take when the database is not shared.
    pub async fn take_over(&self) -> Result<Vec<Sprint>> {
        match self.shared() {
            Some((db, scope)) => {
                self.write("take over sprints", || db.take_over(scope))
                    .await
            }
            None => Ok(Vec::new()),
        }
    }

    /// The live hosts that answer a command for `sprint`: its owner, or, while no host
    /// owns it, those serving its project. `None` for a database that is not PostgreSQL
    /// (its one orchestrator holds `lease`).
    pub async fn live_hosts_for(&self, sprint: &Sprint) -> Result<Option<Vec<String>>> {
        match &self.engine {
            Engine::Postgres(db) => Ok(Some(db.live_hosts_for(sprint).await?)),
            Engine::Sqlite(_) => Ok(None),
        }
    }

    /// Wakes `wake` at once when another process writes a command, queues a sprint or
    /// frees a pipeline lock; `false` when the engine cannot tell (SQLite: the caller
    /// polls).
    pub async fn listen(&self, wake: std::sync::Arc<tokio::sync::Notify>) -> Result<bool> {
        match &self.engine {
            Engine::Postgres(db) => db.listen(wake).await.map(|()| true),
            Engine::Sqlite(db) => db.listen(wake).await,
        }
    }

    /// After a write another process's orchestrator acts on (a sprint queued, a command):
    /// wakes it. PostgreSQL's triggers notify by themselves.
    fn nudge(&self) {
        if let Engine::Sqlite(db) = &self.engine {
            db.nudge();
        }
    }

    /// Takes (or renews) `role`, which one host among several plays at a time (the
    /// Discord bot), under `token`: whether this token holds it now. A store not shared
    /// always holds it (it is the only orchestrator).
    pub async fn lead(&self, role: &str, token: &str) -> Result<bool> {
        match self.shared() {
            Some((db, scope)) => db.acquire_leader(scope, role, token).await,
            None => Ok(true),
        }
    }

    /// Gives `role` up (`lead`).
    pub async fn release_lead(&self, role: &str, token: &str) -> Result<()> {
        match self.shared() {
            Some((db, _)) => db.release_leader(role, token).await,
            None => Ok(()),
        }
    }

    /// The hosts sharing this database; `None` for a database that is not PostgreSQL.
    pub async fn hosts(&self) -> Result<Option<Vec<HostRecord>>> {
        match &self.engine {
            Engine::Postgres(db) => Ok(Some(db.hosts().await?)),
            Engine::Sqlite(_) => Ok(None),
        }
    }

    // --- Discord forum posts --------------------------------------------------------------

    pub async fn forum_post(&self, sprint_id: &str) -> Result<Option<ForumPost>> {
        on_engine!(self, db => db.forum_post(sprint_id).await)
    }

    pub async fn save_forum_post(&self, post: &ForumPost) -> Result<()> {
        self.write("save a forum post", || async {
            on_engine!(self, db => db.save_forum_post(post).await)
        })
        .await
    }

    /// Records a sprint's new forum post unless one is recorded already (another bot, the
    /// one before a failover, was first), or, `replacing` a deleted one, unless another
    /// bot replaced that one first. Returns the post the sprint has now: this one, or the
    /// other bot's.
    pub async fn record_new_forum_post(
        &self,
        post: &ForumPost,
        replacing: Option<i64>,
    ) -> Result<ForumPost> {
        self.write("record a forum post", || async {
            on_engine!(self, db => db.record_new_forum_post(post, replacing).await)
        })
        .await
    }

    // --- delivery cursors --------------------------------------------------------------

    /// How far `consumer` has delivered the log (a `global_seq`; 0 before the first).
    pub async fn cursor(&self, consumer: &str) -> Result<i64> {
        on_engine!(self, db => db.cursor(consumer).await)
    }

    pub async fn set_cursor(&self, consumer: &str, global_seq: i64) -> Result<()> {
        self.write("move a delivery cursor", || async {
            on_engine!(self, db => db.set_cursor(consumer, global_seq).await)
        })
        .await
    }
}

/// Where a database that applied the migrations `applied` stands against `ours`: how many
/// it applied, and which of ours it lacks. A database with a migration this binary does
/// not know was made by a newer one: it is refused (`StoreError::TooNew`), never opened
/// with a schema this code does not expect.
fn against(
    ours: &sqlx::migrate::Migrator,
    applied: &[i64],
    url: &str,
) -> Result<(usize, Vec<i64>)> {
    let newest = ours.iter().map(|m| m.version).max().unwrap_or(0);
    if let Some(&theirs) = applied.iter().filter(|&&v| v > newest).max() {
        return Err(StoreError::TooNew {
            url: crate::config::redacted(url),
            theirs,
            ours: newest,
        });
    }
    let pending = ours
        .iter()
        .map(|m| m.version)
        .filter(|v| !applied.contains(v))
        .collect();
    Ok((applied.len(), pending))
}

/// A new sprint's branch: the template with the sprint's id and project put in.
fn sprint_branch(template: &str, id: &str, project: &str) -> String {
    let lower = id.to_lowercase();
    crate::placeholder::substitute(
        template,
        &[
            ("sprint", id),
            ("sprint_lower", &lower),
            ("project", project),
        ],
    )
}

/// The database file a `sqlite:` URL names (`None` for an in-memory database, or a URL
/// that names no file, as a PostgreSQL one).
/// How errors name the database at `url`: the file's path, or the URL with its password
/// hidden.
fn database_name(url: &str) -> String {
    match database_path(url) {
        Some(path) => std::path::absolute(&path)
            .unwrap_or(path)
            .display()
            .to_string(),
        None => crate::config::redacted(url),
    }
}

pub fn database_path(url: &str) -> Option<PathBuf> {
    if crate::config::is_postgres_url(url) {
        return None;
    }
    sqlite::database_path(url)
}

#[cfg(test)]
mod tests {
    use crate::pipeline::State;

    #[test]
    fn the_lock_holding_states_are_every_state_but_queued_and_the_ends() {
        let named: Vec<&str> = super::portable::lock_holding_states!()
            .split(", ")
            .map(|s| s.trim_matches('\''))
            .collect();
        let expected: Vec<&str> = State::ALL
            .iter()
            .filter(|s| **s != State::Queued && !s.is_terminal())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(named, expected);
    }
}
