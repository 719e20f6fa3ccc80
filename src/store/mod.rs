//! The durable record, in SQLite through sqlx: sprints, their append-only transitions
//! log, every sister run, durable commands, the single-orchestrator lease and delivery
//! cursors. Only this module writes SQL.
//!
//! Every transition is one database transaction that writes the sprint's new state,
//! appends to its log (contiguous `seq`), closes the run that caused it and answers the
//! command that asked for it.
//!
//! Written for SQLite only, so far. Its specifics are not yet confined to one place:
//! `open` (pragmas, the setup lock, `VACUUM INTO` backups), `BEGIN_WRITE`, `relaxed` (a
//! per-batch `PRAGMA synchronous`), `last_insert_rowid`, `sqlite_master`, `group_concat`
//! in `status_json`, error-text parsing in `commit_once`, `SqliteArguments` in the bind
//! helpers, and the JSON triggers of migration 0007. A second engine needs them behind
//! one interface first.

pub mod rows;

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, Sqlite, SqlitePool, Transaction};

pub use rows::{
    Command, CommandKind, CommandStatus, ForumPost, Lease, Run, Spend, Sprint, TransitionRecord,
    Usage,
};

use crate::domain::Actor;
use crate::domain::RunOutcome;
use crate::domain::{run_id, sprint_id};
use crate::handoff::HandoffDocument;
use crate::pipeline::{Event, Transition};
use crate::placeholder;
use rows::{CommandRaw, KeyedSpend, RunRaw, SprintRaw, TransitionRaw};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {url}: {source}")]
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
    /// SQLite's "database is locked" (or "table is locked"): another connection holds the
    /// lock; the same statement may well succeed later.
    pub fn is_locked(&self) -> bool {
        match self {
            StoreError::Sql(sqlx::Error::Database(e)) => e
                .code()
                .and_then(|c| c.parse::<i64>().ok())
                .is_some_and(|c| matches!(c & 0xff, 5 | 6)),
            StoreError::Sql(sqlx::Error::PoolTimedOut) => true,
            _ => false,
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

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Takes SQLite's write lock at once, so a write transaction never fails half-way
/// because another connection wrote first.
const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

/// A run's start (`Store::start_run`).
const INSERT_RUN: &str = "INSERT INTO runs (id, sprint_id, number, actor, round, attempt, parent_run_id, handoff_json, synthesized, focus, git_head, started_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// Runs `sql` at `synchronous = NORMAL` on the connection it gets, and puts FULL back: for
/// the writes whose loss in a power cut loses no result and lets nothing happen without a
/// human's word (see `Store::start_run`). In WAL mode such a write
/// survives a crash of this process all the same, and the next FULL commit makes it
/// durable: the log is written in order.
fn relaxed(sql: &str) -> String {
    format!("PRAGMA synchronous = NORMAL; {sql}; PRAGMA synchronous = FULL;")
}

/// How long one statement waits for SQLite's write lock before it reports the database
/// locked (and `retry_locked` tries it again).
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);
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

/// Executes a batch that would leave its connection changed if it stopped half-way (a
/// transaction open, `synchronous` lowered): after an error that connection is closed,
/// never handed to anyone else.
async fn execute_batch<'q>(
    pool: &SqlitePool,
    query: sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>,
) -> Result<()> {
    let mut conn = pool.acquire().await?;
    if let Err(e) = query.execute(&mut *conn).await {
        conn.close_on_drop();
        return Err(e.into());
    }
    Ok(())
}

/// The columns `SprintRaw` reads: every one but the stored status document, which only
/// `status_json` wants (it would triple what a listing of sprints copies).
macro_rules! sprint_columns {
    () => {
        "id, number, project, goal, state, round, attempt, resume_stage, resume_round, contract_id, branch, next_run_at, focus, budget_usd, last_seq, created_at, updated_at"
    };
}

/// A handle on the database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    /// How `Store::single_connection` connects; `None` for an in-memory database (a
    /// second connection would be another database).
    single: Option<SqliteConnectOptions>,
    /// Where run contract files go: beside the database file.
    runs_dir: PathBuf,
    /// The database file and which file it was when opened (device, inode); `None` for an
    /// in-memory database.
    file: Option<(PathBuf, (u64, u64))>,
}

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
}

impl Store {
    /// Opens (creating if missing) the database, in WAL mode with a busy timeout, and
    /// applies the embedded migrations.
    pub async fn open(url: &str) -> Result<Store> {
        let open_err = |source| StoreError::Open {
            url: url.to_string(),
            source,
        };
        let options = SqliteConnectOptions::from_str(url)
            .map_err(open_err)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: a committed transition survives a power cut, not just a crash.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let filename = options.get_filename().to_path_buf();
        let in_memory = file_of(&options, url).is_none();
        let connect = || {
            SqlitePoolOptions::new()
                .max_connections(4)
                // A local file: no connection goes stale, and the ping costs a round trip
                // on every statement.
                .test_before_acquire(false)
                .connect_with(options.clone())
        };
        // sqlx does not lock SQLite's set-up across processes: `serve` and a CLI command
        // opening a fresh database at once would both switch it to WAL (one of them then
        // fails with "database is locked") and both create the tables. A file lock beside
        // the database makes one wait for the other, from the first connection to the
        // last migration. Where it cannot be created (a folder this user may only read),
        // the database is not going to be set up by this user anyway.
        let setup_lock = if in_memory {
            None
        } else {
            let mut path = filename.clone().into_os_string();
            path.push("-migrate.lock");
            lock_file(PathBuf::from(path)).await.ok()
        };
        if !in_memory && !filename.exists() {
            // A database removed while a process still has it open leaves its WAL behind:
            // a new database here would take writes that the old one's users never see.
            let beside = |suffix: &str| {
                let mut p = filename.clone().into_os_string();
                p.push(suffix);
                PathBuf::from(p).exists()
            };
            if beside("-wal") || beside("-shm") {
                let path = std::path::absolute(&filename).unwrap_or(filename);
                return Err(StoreError::Removed(path));
            }
        }
        let mut pool = connect().await.map_err(open_err)?;
        let (applied, pending) = migrations_of(&pool, url).await?;
        // Nothing to do when every migration is applied: the usual case, and a cheap read.
        if !pending.is_empty() {
            // An upgrade: a database that already has tables gets a copy before the new
            // migrations touch it.
            if !in_memory && applied > 0 {
                let mut backup = filename.clone().into_os_string();
                backup.push(format!(".backup-{}", crate::clock::now_ms()));
                let backup = PathBuf::from(backup);
                sqlx::query("VACUUM INTO ?")
                    .bind(backup.display().to_string())
                    .execute(&pool)
                    .await?;
                tracing::warn!(backup = %backup.display(), ?pending, "database backed up before migrating");
            }
            MIGRATOR
                .run(&pool)
                .await
                .map_err(|source| StoreError::Migrate {
                    url: url.to_string(),
                    source,
                })?;
            if !in_memory {
                // The pool's other connections read the schema before it changed; SQLite
                // would prepare on their stale copy and then find more columns than sqlx
                // was told. Fresh connections read the new schema.
                pool.close().await;
                pool = connect().await.map_err(open_err)?;
            }
        }
        drop(setup_lock);
        let file = if in_memory {
            None
        } else {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(&filename).map_err(|e| StoreError::Open {
                url: url.to_string(),
                source: sqlx::Error::Io(e),
            })?;
            Some((filename.clone(), (m.dev(), m.ino())))
        };
        // A second pool on an in-memory database would be another database.
        let single = (!in_memory).then_some(options);
        let runs_dir = if in_memory {
            std::env::temp_dir().join(format!("hanarang-runs-{}", std::process::id()))
        } else {
            let mut dir = filename.into_os_string();
            dir.push(".runs");
            // A sister runs in its project's workdir: the paths it is given are absolute.
            let dir = PathBuf::from(dir);
            std::path::absolute(&dir).unwrap_or(dir)
        };
        Ok(Store {
            pool,
            single,
            runs_dir,
            file,
        })
    }

    /// Whether the database file is still the one this store opened: removed (or replaced)
    /// under a running process, every write would go to a file nobody can open again.
    pub fn check_file(&self) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let Some((path, opened)) = &self.file else {
            return Ok(());
        };
        match std::fs::metadata(path) {
            Ok(m) if (m.dev(), m.ino()) != *opened => Err(StoreError::Removed(path.clone())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(StoreError::Removed(path.clone()))
            }
            // Gone or replaced is what is noticed; a folder this process may not list for a
            // moment (or a flaky network file system) is not a removal.
            Ok(_) | Err(_) => Ok(()),
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
        Store::open(url).await
    }

    /// The same database through one connection of its own, for the orchestrator's loop.
    /// SQLite drops a connection's whole page cache when another connection has written
    /// since it last read, so a pool that hands its connections round re-reads the tables
    /// on nearly every statement; one connection that does all of the loop's writes keeps
    /// its cache (docs/benchmarks.md). Its statements queue behind each other: the loop
    /// makes one at a time anyway.
    ///
    /// Call it on the runtime that will use it: sqlx hands a connection back to its pool
    /// in a task on the runtime that dropped it, and the pool has no other task (no idle
    /// timeout, no maximum lifetime: the connection stays open, and its cache warm).
    pub fn single_connection(&self) -> Store {
        let Some(options) = &self.single else {
            return self.clone();
        };
        Store {
            pool: SqlitePoolOptions::new()
                .max_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .test_before_acquire(false)
                .connect_lazy_with(options.clone()),
            ..self.clone()
        }
    }

    /// Where the contract file of a sprint's runs is written: one file per sprint,
    /// rewritten in place for each of its runs (they run one at a time). The database
    /// keeps every run's inputs; creating a file per run is the slow part of a spawn on
    /// some file systems (docs/benchmarks.md).
    pub fn contract_path(&self, sprint_id: &str) -> PathBuf {
        self.runs_dir.join(format!("{sprint_id}.contract.json"))
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A write transaction that takes SQLite's write lock at once (`BEGIN_WRITE`).
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with(BEGIN_WRITE).await?)
    }

    // --- sprints ---------------------------------------------------------------------

    /// Queues a new sprint; its id is the next `SPRINT-NNN`.
    pub async fn create_sprint(
        &self,
        project: &str,
        goal: &str,
        focus: Option<&str>,
        branch_template: &str,
        at: i64,
    ) -> Result<Sprint> {
        retry_locked("queue a sprint", || {
            self.create_sprint_once(project, goal, focus, branch_template, at)
        })
        .await
    }

    async fn create_sprint_once(
        &self,
        project: &str,
        goal: &str,
        focus: Option<&str>,
        branch_template: &str,
        at: i64,
    ) -> Result<Sprint> {
        let mut tx = self.begin_write().await?;
        let number: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(number), 0) + 1 FROM sprints")
            .fetch_one(&mut *tx)
            .await?;
        let id = sprint_id(number);
        let lower = id.to_lowercase();
        let branch = placeholder::substitute(
            branch_template,
            &[
                ("sprint", &id),
                ("sprint_lower", &lower),
                ("project", project),
            ],
        );
        sqlx::query(
            "INSERT INTO sprints (id, number, project, goal, state, round, attempt, contract_id, branch, focus, created_at, updated_at)
             VALUES (?, ?, ?, ?, 'queued', 0, 0, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(number)
        .bind(project)
        .bind(goal)
        .bind(&id)
        .bind(&branch)
        .bind(focus)
        .bind(at)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        let sprint = fetch_sprint(&mut tx, &id).await?;
        tx.commit().await?;
        Ok(sprint)
    }

    pub async fn sprint(&self, id: &str) -> Result<Option<Sprint>> {
        let raw: Option<SprintRaw> = sqlx::query_as(concat!(
            "SELECT ",
            sprint_columns!(),
            " FROM sprints WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        raw.map(Sprint::try_from).transpose()
    }

    /// Every sprint, oldest first.
    pub async fn sprints(&self) -> Result<Vec<Sprint>> {
        let raws: Vec<SprintRaw> = sqlx::query_as(concat!(
            "SELECT ",
            sprint_columns!(),
            " FROM sprints ORDER BY number"
        ))
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(Sprint::try_from).collect()
    }

    /// Sprints whose stage has a sister to run (planning, implementing, reviewing,
    /// deploying), oldest first.
    pub async fn sprints_in_stages(&self) -> Result<Vec<Sprint>> {
        let raws: Vec<SprintRaw> = sqlx::query_as(
            concat!(
                "SELECT ",
                sprint_columns!(),
                " FROM sprints WHERE state IN ('planning', 'implementing', 'reviewing', 'deploying') ORDER BY number"
            ),
        )
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(Sprint::try_from).collect()
    }

    /// What a queued sprint waits for: the sprint holding its project's pipeline lock, else
    /// the oldest sprint queued before it in that project; `None` when it is next.
    pub async fn ahead_of(&self, sprint: &Sprint) -> Result<Option<Sprint>> {
        let raw: Option<SprintRaw> = sqlx::query_as(concat!(
            "SELECT ",
            sprint_columns!(),
            " FROM sprints
             WHERE project = ? AND id != ? AND state NOT IN ('deployed', 'aborted')
               AND (state != 'queued' OR number < ?)
             ORDER BY state = 'queued', number
             LIMIT 1"
        ))
        .bind(&sprint.project)
        .bind(&sprint.id)
        .bind(sprint.number)
        .fetch_optional(&self.pool)
        .await?;
        raw.map(Sprint::try_from).transpose()
    }

    /// For each project whose pipeline lock is free (no sprint between planning and a
    /// terminal state), its oldest queued sprint.
    pub async fn next_in_queues(&self) -> Result<Vec<Sprint>> {
        let raws: Vec<SprintRaw> = sqlx::query_as(concat!(
            "SELECT ",
            sprint_columns!(),
            " FROM sprints s
             WHERE s.state = 'queued'
               AND s.number = (SELECT MIN(q.number) FROM sprints q WHERE q.project = s.project AND q.state = 'queued')
               AND NOT EXISTS (SELECT 1 FROM sprints b WHERE b.project = s.project
                               AND b.state NOT IN ('queued', 'deployed', 'aborted'))
             ORDER BY s.number"
        ))
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(Sprint::try_from).collect()
    }

    /// Records a transition and everything that goes with it, in one transaction.
    /// Returns the log entry to broadcast (only after this returns: after the commit).
    pub async fn commit(&self, c: Commit<'_>) -> Result<TransitionRecord> {
        retry_locked("commit a transition", || self.commit_once(&c)).await
    }

    async fn commit_once(&self, c: &Commit<'_>) -> Result<TransitionRecord> {
        let event_json =
            serde_json::to_string(c.event).map_err(|e| StoreError::Encode("event", e))?;
        let note_json = c
            .transition
            .note
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Encode("note", e))?;
        let seq = c.before.last_seq + 1;
        let after = c.after;
        let run_id = c.run.map(|r| r.run_id.as_str());
        // The whole transaction in one round trip to SQLite's thread: the sprint (the
        // run's spend is rolled up here), the log entry, the run's end, the command's
        // answer, then COMMIT. `?` parameters count on across statements. The log entry
        // takes its `seq` from the sprint row only where the update matched the `last_seq`
        // read before: a stale read makes it NULL (or a taken `seq`), and the insert fails
        // before the COMMIT.
        let mut sql = format!(
            "{BEGIN_WRITE};
             UPDATE sprints SET state = ?, round = ?, attempt = ?, resume_stage = ?, resume_round = ?,
                 contract_id = ?, branch = ?, next_run_at = ?, focus = ?, budget_usd = ?, last_seq = ?, updated_at = ?,
                 input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost_usd = cost_usd + ?
             WHERE id = ? AND last_seq = ?
             RETURNING 'sprint' AS written, last_seq AS n;
             INSERT INTO transitions (sprint_id, seq, from_state, to_state, event, event_json, note_json, round, attempt, run_id, branch, at)
             VALUES (?, (SELECT last_seq FROM sprints WHERE id = ? AND last_seq = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             RETURNING 'transition' AS written, global_seq AS n;",
        );
        if c.run.is_some() {
            sql.push_str(END_RUN);
        }
        if c.command.is_some() {
            sql.push_str(RESOLVE_COMMAND);
        }
        if c.start.is_some() {
            sql.push_str(INSERT_RUN);
            sql.push(';');
        }
        sql.push_str(" COMMIT;");
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(after.state.as_str())
            .bind(i64::from(after.round))
            .bind(i64::from(after.attempt))
            .bind(after.resume.map(|r| r.stage.state().as_str()))
            .bind(after.resume.map(|r| i64::from(r.round)))
            .bind(&after.contract_id)
            .bind(&after.branch)
            .bind(after.next_run_at)
            .bind(&after.focus)
            .bind(after.budget_usd)
            .bind(seq)
            .bind(c.at)
            .bind(c.run.and_then(|r| r.input_tokens).unwrap_or(0))
            .bind(c.run.and_then(|r| r.output_tokens).unwrap_or(0))
            .bind(c.run.and_then(|r| r.cost_usd).unwrap_or(0.0))
            .bind(&c.before.id)
            .bind(c.before.last_seq)
            .bind(&c.before.id)
            .bind(&c.before.id)
            .bind(seq)
            .bind(c.transition.from.state.as_str())
            .bind(c.transition.to.state.as_str())
            .bind(c.event.name())
            .bind(&event_json)
            .bind(&note_json)
            .bind(i64::from(c.transition.to.round))
            .bind(i64::from(c.transition.to.attempt))
            .bind(run_id)
            .bind(&c.after.branch)
            .bind(c.at);
        if let Some(run) = c.run {
            query = bind_run_end(query, run)?;
        }
        if let Some((id, result)) = c.command {
            query = query
                .bind(CommandStatus::Applied.as_str())
                .bind(result)
                .bind(c.at)
                .bind(id);
        }
        if let Some(new) = &c.start {
            query = bind_new_run(query, new)?;
        }
        let mut conn = self.pool.acquire().await?;
        let written = match query.fetch_all(&mut *conn).await {
            Ok(rows) => rows,
            Err(e) => {
                // The batch stopped at the failing statement, inside its transaction:
                // roll it back before the connection serves anyone else, or close it.
                if sqlx::query("ROLLBACK").execute(&mut *conn).await.is_err() {
                    conn.close_on_drop();
                }
                let database = e.as_database_error();
                // The run's number taken: the caller's copy of the sprint's runs is behind.
                if let (Some(d), Some(new)) = (database, &c.start)
                    && d.is_unique_violation()
                    && d.message().contains("runs.")
                {
                    return Err(StoreError::RunTaken(crate::domain::run_id(
                        new.sprint_id,
                        new.number,
                    )));
                }
                let stale = database.is_some_and(|d| {
                    d.is_unique_violation()
                        || matches!(d.kind(), sqlx::error::ErrorKind::NotNullViolation)
                });
                return Err(if stale {
                    StoreError::Conflict(c.before.id.clone())
                } else {
                    StoreError::Sql(e)
                });
            }
        };
        let returned = |what: &str| {
            written.iter().find_map(|row| {
                (row.try_get::<&str, _>("written").ok() == Some(what))
                    .then(|| row.try_get::<i64, _>("n").ok())
                    .flatten()
            })
        };
        let (Some(_), Some(global_seq)) = (returned("sprint"), returned("transition")) else {
            // Cannot happen: the log entry's insert fails unless the sprint's update
            // matched, and then both return their row.
            return Err(StoreError::corrupt(
                "transitions",
                &format!("{}#{seq}", c.before.id),
                "the commit returned no log entry",
            ));
        };
        // What was just written, as `transitions` reads it back.
        Ok(TransitionRecord {
            global_seq,
            sprint_id: c.before.id.clone(),
            seq,
            from: c.transition.from.state,
            to: c.transition.to.state,
            event: c.event.name(),
            round: c.transition.to.round,
            attempt: c.transition.to.attempt,
            at: c.at,
            run_id: run_id.map(str::to_string),
            branch: Some(c.after.branch.clone()),
            detail: c.event.clone(),
            note: c.transition.note.clone(),
        })
    }

    // --- the transitions log -------------------------------------------------------------

    pub async fn transitions(&self, sprint_id: &str) -> Result<Vec<TransitionRecord>> {
        let raws: Vec<TransitionRaw> =
            sqlx::query_as("SELECT * FROM transitions WHERE sprint_id = ? ORDER BY seq")
                .bind(sprint_id)
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(TransitionRecord::try_from).collect()
    }

    /// A sprint and its log entries after `seq`, read in one transaction: one snapshot of
    /// the database, so the entries end exactly at the sprint's `last_seq` however many
    /// transitions commit meanwhile.
    pub async fn sprint_since(
        &self,
        id: &str,
        seq: i64,
    ) -> Result<Option<(Sprint, Vec<TransitionRecord>)>> {
        let mut tx = self.pool.begin().await?;
        let sprint = match fetch_sprint(&mut tx, id).await {
            Ok(sprint) => sprint,
            Err(StoreError::NoSprint(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let raws: Vec<TransitionRaw> = sqlx::query_as(
            "SELECT * FROM transitions WHERE sprint_id = ? AND seq > ? ORDER BY seq",
        )
        .bind(id)
        .bind(seq)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let records = raws
            .into_iter()
            .map(TransitionRecord::try_from)
            .collect::<Result<_>>()?;
        Ok(Some((sprint, records)))
    }

    /// Log entries after `global_seq`, in order, at most `limit`.
    pub async fn transitions_after(
        &self,
        global_seq: i64,
        limit: i64,
    ) -> Result<Vec<TransitionRecord>> {
        let raws: Vec<TransitionRaw> = sqlx::query_as(
            "SELECT * FROM transitions WHERE global_seq > ? ORDER BY global_seq LIMIT ?",
        )
        .bind(global_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(TransitionRecord::try_from).collect()
    }

    // --- runs ----------------------------------------------------------------------------

    /// Records a run before it is spawned, so a crash while it runs is found at restart.
    /// Returns its id (`domain::run_id`). A number already taken is an error: nothing is
    /// overwritten.
    ///
    /// A deploy's start is written at FULL durability: after a power cut it must be found
    /// in flight, so that the deploy escalates instead of running again. The other stages'
    /// starts are `relaxed`: such a stage re-runs anyway.
    pub async fn start_run(&self, new: NewRun<'_>) -> Result<String> {
        retry_locked("record a run's start", || self.start_run_once(&new)).await
    }

    async fn start_run_once(&self, new: &NewRun<'_>) -> Result<String> {
        // The focus goes with this run; the next one does not get it again. One statement
        // is atomic on its own; two are a transaction.
        let sql = if new.focus.is_some() {
            format!(
                "{BEGIN_WRITE}; {INSERT_RUN}; UPDATE sprints SET focus = NULL WHERE id = ?; COMMIT"
            )
        } else {
            INSERT_RUN.to_string()
        };
        let sql = if new.actor == Actor::Erang {
            sql
        } else {
            relaxed(&sql)
        };
        let mut query = bind_new_run(sqlx::query(sqlx::AssertSqlSafe(sql)), new)?;
        if new.focus.is_some() {
            query = query.bind(new.sprint_id);
        }
        execute_batch(&self.pool, query).await?;
        Ok(run_id(new.sprint_id, new.number))
    }

    /// Closes a run that caused no transition, and rolls its spend up on its sprint.
    pub async fn end_run(&self, run: &RunEnd) -> Result<()> {
        retry_locked("record a run's end", || self.end_run_once(run)).await
    }

    async fn end_run_once(&self, run: &RunEnd) -> Result<()> {
        let sql = format!(
            "{END_RUN}
             UPDATE sprints SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
                 cost_usd = cost_usd + ?
             WHERE id = (SELECT sprint_id FROM runs WHERE id = ?);"
        );
        let query = bind_run_end(sqlx::query(sqlx::AssertSqlSafe(sql)), run)?
            .bind(run.input_tokens.unwrap_or(0))
            .bind(run.output_tokens.unwrap_or(0))
            .bind(run.cost_usd.unwrap_or(0.0))
            .bind(&run.run_id);
        let mut tx = self.begin_write().await?;
        query.execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn runs(&self, sprint_id: &str) -> Result<Vec<Run>> {
        let raws: Vec<RunRaw> =
            sqlx::query_as("SELECT * FROM runs WHERE sprint_id = ? ORDER BY number")
                .bind(sprint_id)
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Run::try_from).collect()
    }

    /// Runs that were spawned and never recorded an end.
    pub async fn runs_in_flight(&self) -> Result<Vec<Run>> {
        let raws: Vec<RunRaw> =
            sqlx::query_as("SELECT * FROM runs WHERE outcome IS NULL ORDER BY sprint_id, number")
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Run::try_from).collect()
    }

    // --- usage ------------------------------------------------------------------------

    /// What a sprint's runs cost, in all and per sister.
    pub async fn usage(&self, sprint_id: &str) -> Result<Usage> {
        let rows: Vec<KeyedSpend> = sqlx::query_as(
            "SELECT actor AS key, COALESCE(SUM(input_tokens), 0) AS input_tokens,
                    COALESCE(SUM(output_tokens), 0) AS output_tokens, COALESCE(SUM(cost_usd), 0.0) AS cost_usd
             FROM runs WHERE sprint_id = ? GROUP BY actor",
        )
        .bind(sprint_id)
        .fetch_all(&self.pool)
        .await?;
        let mut usage = Usage::default();
        for row in rows {
            usage.total.add(&row.spend);
            usage.by_sister.insert(row.key, row.spend);
        }
        Ok(usage)
    }

    /// Every sprint with its total spend as one JSON array: the documents each sprint
    /// row keeps (migration 0007), joined in order. The same document `sprint status
    /// --json` prints from `Sprint` + `Spend` (a test holds the two equal), without
    /// building or handing 10,000 rows one by one across sqlx's worker thread.
    pub async fn status_json(&self) -> Result<String> {
        // The subquery hands the rows over in its order (a sort inside the aggregate,
        // `string_agg(.. ORDER BY number)`, costs three times the whole query).
        let json: Option<String> = sqlx::query_scalar(
            "SELECT '[' || COALESCE(group_concat(status_doc, ','), '') || ']'
             FROM (SELECT status_doc FROM sprints ORDER BY number)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(json.unwrap_or_else(|| "[]".into()))
    }

    /// Every sprint's total spend, in one query (for `sprint status`).
    pub async fn spend_by_sprint(&self) -> Result<std::collections::HashMap<String, Spend>> {
        let rows: Vec<KeyedSpend> =
            sqlx::query_as("SELECT id AS key, input_tokens, output_tokens, cost_usd FROM sprints")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(|r| (r.key, r.spend)).collect())
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
        retry_locked("record a command", || {
            self.submit_command_once(sprint_id, kind, text, by, at)
        })
        .await
    }

    async fn submit_command_once(
        &self,
        sprint_id: &str,
        kind: CommandKind,
        text: Option<&str>,
        by: &str,
        at: i64,
    ) -> Result<i64> {
        let id = sqlx::query(
            "INSERT INTO commands (sprint_id, kind, text, by, created_at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(sprint_id)
        .bind(kind.as_str())
        .bind(text)
        .bind(by)
        .bind(at)
        .execute(&self.pool)
        .await?
        .last_insert_rowid();
        Ok(id)
    }

    pub async fn pending_commands(&self) -> Result<Vec<Command>> {
        let raws: Vec<CommandRaw> =
            sqlx::query_as("SELECT * FROM commands WHERE status = 'pending' ORDER BY id")
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Command::try_from).collect()
    }

    pub async fn command(&self, id: i64) -> Result<Option<Command>> {
        let raw: Option<CommandRaw> = sqlx::query_as("SELECT * FROM commands WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        raw.map(Command::try_from).transpose()
    }

    /// Answers a command that caused no transition (a refusal, or nothing to do).
    pub async fn resolve_command(
        &self,
        id: i64,
        status: CommandStatus,
        result: &str,
        at: i64,
    ) -> Result<()> {
        retry_locked("answer a command", || async move {
            sqlx::query(RESOLVE_COMMAND)
                .bind(status.as_str())
                .bind(result)
                .bind(at)
                .bind(id)
                .execute(&self.pool)
                .await?;
            Ok(())
        })
        .await
    }

    // --- the single-orchestrator lease ------------------------------------------------

    pub async fn lease(&self) -> Result<Option<Lease>> {
        Ok(sqlx::query_as("SELECT * FROM instance_lease WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Takes the lease if nobody holds it, or if its holder is gone (`is_gone` says so,
    /// e.g. a dead pid on this host or a heartbeat too old). Returns the holder that keeps
    /// it otherwise.
    pub async fn acquire_lease(
        &self,
        me: &Lease,
        is_gone: impl Fn(&Lease) -> bool,
    ) -> Result<Result<(), Lease>> {
        retry_locked("take the lease", || self.acquire_lease_once(me, &is_gone)).await
    }

    async fn acquire_lease_once(
        &self,
        me: &Lease,
        is_gone: &impl Fn(&Lease) -> bool,
    ) -> Result<Result<(), Lease>> {
        let mut tx = self.begin_write().await?;
        let current: Option<Lease> = sqlx::query_as("SELECT * FROM instance_lease WHERE id = 1")
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(holder) = current
            && holder.token != me.token
            && !is_gone(&holder)
        {
            tx.rollback().await?;
            return Ok(Err(holder));
        }
        sqlx::query(
            "INSERT INTO instance_lease (id, token, pid, host, started_at, heartbeat_at) VALUES (1, ?, ?, ?, ?, ?)
             ON CONFLICT (id) DO UPDATE SET token = excluded.token, pid = excluded.pid, host = excluded.host,
                 started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at",
        )
        .bind(&me.token)
        .bind(me.pid)
        .bind(&me.host)
        .bind(me.started_at)
        .bind(me.heartbeat_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// Renews the lease; `false` when someone else took it.
    pub async fn heartbeat(&self, token: &str, at: i64) -> Result<bool> {
        retry_locked("renew the lease", || self.heartbeat_once(token, at)).await
    }

    async fn heartbeat_once(&self, token: &str, at: i64) -> Result<bool> {
        let done =
            sqlx::query("UPDATE instance_lease SET heartbeat_at = ? WHERE id = 1 AND token = ?")
                .bind(at)
                .bind(token)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn release_lease(&self, token: &str) -> Result<()> {
        sqlx::query("DELETE FROM instance_lease WHERE id = 1 AND token = ?")
            .bind(token)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    // --- Discord forum posts --------------------------------------------------------------

    pub async fn forum_post(&self, sprint_id: &str) -> Result<Option<ForumPost>> {
        Ok(
            sqlx::query_as("SELECT * FROM discord_threads WHERE sprint_id = ?")
                .bind(sprint_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    pub async fn save_forum_post(&self, post: &ForumPost) -> Result<()> {
        retry_locked("save a forum post", || self.save_forum_post_once(post)).await
    }

    async fn save_forum_post_once(&self, post: &ForumPost) -> Result<()> {
        sqlx::query(
            "INSERT INTO discord_threads (sprint_id, thread_id, board_message_id, done_message_id) VALUES (?, ?, ?, ?)
             ON CONFLICT (sprint_id) DO UPDATE SET thread_id = excluded.thread_id,
                 board_message_id = excluded.board_message_id, done_message_id = excluded.done_message_id",
        )
        .bind(&post.sprint_id)
        .bind(post.thread_id)
        .bind(post.board_message_id)
        .bind(post.done_message_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    // --- delivery cursors --------------------------------------------------------------

    pub async fn cursor(&self, consumer: &str) -> Result<i64> {
        let seq: Option<i64> =
            sqlx::query_scalar("SELECT global_seq FROM delivery_cursors WHERE consumer = ?")
                .bind(consumer)
                .fetch_optional(&self.pool)
                .await?;
        Ok(seq.unwrap_or(0))
    }

    pub async fn set_cursor(&self, consumer: &str, global_seq: i64) -> Result<()> {
        retry_locked("move a delivery cursor", || {
            self.set_cursor_once(consumer, global_seq)
        })
        .await
    }

    async fn set_cursor_once(&self, consumer: &str, global_seq: i64) -> Result<()> {
        sqlx::query(
            "INSERT INTO delivery_cursors (consumer, global_seq) VALUES (?, ?)
             ON CONFLICT (consumer) DO UPDATE SET global_seq = excluded.global_seq",
        )
        .bind(consumer)
        .bind(global_seq)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
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
    /// Reads, without changing anything, which migrations a database still needs.
    pub async fn migration_status(url: &str) -> Result<MigrationStatus> {
        let open_err = |source| StoreError::Open {
            url: url.to_string(),
            source,
        };
        let options = SqliteConnectOptions::from_str(url).map_err(open_err)?;
        let path = options.get_filename().to_path_buf();
        if !path.exists() {
            return Ok(MigrationStatus::NotCreated);
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.read_only(true).create_if_missing(false))
            .await
            .map_err(open_err)?;
        let (applied, pending) = migrations_of(&pool, url).await?;
        pool.close().await;
        Ok(if pending.is_empty() {
            MigrationStatus::Current { applied }
        } else {
            MigrationStatus::Pending(pending)
        })
    }
}

/// How many migrations a database has applied, and which of this binary's it lacks. A
/// database with a migration this binary does not know was made by a newer one: it is
/// refused (`StoreError::TooNew`), never opened with a schema this code does not expect.
async fn migrations_of(pool: &SqlitePool, url: &str) -> Result<(usize, Vec<i64>)> {
    let has_table: Option<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_optional(pool)
    .await?;
    let applied: Vec<i64> = if has_table.is_some() {
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success = 1")
            .fetch_all(pool)
            .await?
    } else {
        Vec::new()
    };
    let ours = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    if let Some(&theirs) = applied.iter().filter(|&&v| v > ours).max() {
        return Err(StoreError::TooNew {
            url: url.to_string(),
            theirs,
            ours,
        });
    }
    let pending = MIGRATOR
        .iter()
        .map(|m| m.version)
        .filter(|v| !applied.contains(v))
        .collect();
    Ok((applied.len(), pending))
}

/// The database file a `sqlite:` URL names (`None` for an in-memory database).
pub fn database_path(url: &str) -> Option<PathBuf> {
    file_of(&SqliteConnectOptions::from_str(url).ok()?, url)
}

/// The file behind parsed options; `None` in memory (`sqlite::memory:`, which sqlx names
/// `file:sqlx-in-memory-N`, or `?mode=memory`).
fn file_of(options: &SqliteConnectOptions, url: &str) -> Option<PathBuf> {
    let path = options.get_filename();
    let name = path.as_os_str().to_string_lossy();
    let query = url.split_once('?').map_or("", |(_, q)| q);
    let in_memory = name.is_empty()
        || name == ":memory:"
        || name.starts_with("file:sqlx-in-memory-")
        || query.split('&').any(|kv| kv == "mode=memory");
    (!in_memory).then(|| path.to_path_buf())
}

/// Takes an exclusive lock on `path` (created if missing), waiting for it.
async fn lock_file(path: PathBuf) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| std::io::Error::from(errno))
    })
    .await
    .map_err(std::io::Error::other)?
}

async fn fetch_sprint(tx: &mut Transaction<'static, Sqlite>, id: &str) -> Result<Sprint> {
    let raw: Option<SprintRaw> = sqlx::query_as(concat!(
        "SELECT ",
        sprint_columns!(),
        " FROM sprints WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    raw.map(Sprint::try_from)
        .transpose()?
        .ok_or_else(|| StoreError::NoSprint(id.to_string()))
}

/// How a run ended; its parameters are bound by `bind_run_end`. Its spend is rolled up
/// on the sprint by the caller, in the same transaction.
const END_RUN: &str = "
    UPDATE runs SET outcome = ?, detail = ?, rejection = ?, exit_code = ?, signal = ?, duration_ms = ?,
        stdout_tail = ?, stderr_tail = ?, message_json = ?, input_tokens = ?, output_tokens = ?,
        cost_usd = ?, ended_at = ?
    WHERE id = ?;";

/// A command's answer: status, result, time, id.
const RESOLVE_COMMAND: &str = "
    UPDATE commands SET status = ?, result = ?, applied_at = ? WHERE id = ? AND status = 'pending';";

/// Binds `INSERT_RUN`'s parameters, in order, after those already bound.
fn bind_new_run<'q>(
    query: sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>,
    new: &NewRun<'q>,
) -> Result<sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>> {
    let handoff_json =
        serde_json::to_string(new.handoff).map_err(|e| StoreError::Encode("handoff", e))?;
    Ok(query
        .bind(run_id(new.sprint_id, new.number))
        .bind(new.sprint_id)
        .bind(new.number)
        .bind(new.actor.as_str())
        .bind(i64::from(new.round))
        .bind(i64::from(new.attempt))
        .bind(new.parent_run_id)
        .bind(handoff_json)
        .bind(i64::from(new.synthesized))
        .bind(new.focus)
        .bind(new.git_head)
        .bind(new.started_at))
}

/// Binds `END_RUN`'s parameters, in order, after those already bound.
fn bind_run_end<'q>(
    query: sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>,
    run: &'q RunEnd,
) -> Result<sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>> {
    let message_json = run
        .message
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| StoreError::Encode("message", e))?;
    Ok(query
        .bind(run.outcome.as_str())
        .bind(&run.detail)
        .bind(&run.rejection)
        .bind(run.exit_code)
        .bind(run.signal)
        .bind(run.duration_ms)
        .bind(&run.stdout_tail)
        .bind(&run.stderr_tail)
        .bind(message_json)
        .bind(run.input_tokens)
        .bind(run.output_tokens)
        .bind(run.cost_usd)
        .bind(run.ended_at)
        .bind(&run.run_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_in_memory_database_opens_and_leaves_no_file() {
        assert_eq!(database_path("sqlite://?mode=memory"), None);
        let store = Store::open("sqlite::memory:").await.unwrap();
        assert_eq!(database_path("sqlite::memory:"), None);
        let sprint = store
            .create_sprint("app", "goal", None, "b", 1)
            .await
            .unwrap();
        assert_eq!(sprint.id, "SPRINT-001");
        store.check_file().unwrap();
        assert!(!std::path::Path::new("file:sqlx-in-memory-0-migrate.lock").exists());
        assert_eq!(
            database_path("sqlite:///srv/h.db?mode=rwc"),
            Some(PathBuf::from("/srv/h.db"))
        );
    }

    /// A relaxed write that fails half-way must not leave its connection at NORMAL: the
    /// next transition committed on it would then not be durable.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_failed_relaxed_write_leaves_no_connection_at_normal() {
        let dir = std::env::temp_dir().join(format!("hanarang-relaxed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("hanarang.db").display());
        let store = Store::open(&url).await.unwrap().single_connection();
        let sprint = store
            .create_sprint("app", "goal", None, "b", 1)
            .await
            .unwrap();
        let handoff = HandoffDocument::default();
        let new = NewRun {
            sprint_id: &sprint.id,
            number: 1,
            actor: Actor::Harang,
            round: 0,
            attempt: 1,
            parent_run_id: None,
            handoff: &handoff,
            synthesized: true,
            focus: None,
            git_head: None,
            started_at: 2,
        };
        store.start_run(new.clone()).await.unwrap();
        let level = || async {
            sqlx::query_scalar::<_, i64>("PRAGMA synchronous")
                .fetch_one(&store.pool)
                .await
                .unwrap()
        };
        assert_eq!(level().await, 2, "FULL after a relaxed write");
        // The same number again: the INSERT fails between the two PRAGMAs.
        assert!(store.start_run(new).await.is_err());
        assert_eq!(level().await, 2, "FULL after a failed relaxed write");
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
