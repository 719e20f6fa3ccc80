//! The durable record behind one interface: sprints, their append-only transitions log,
//! every sister run, durable commands, the single-orchestrator lease and delivery cursors.
//! The orchestrator, the CLI, Discord, the tests and the benchmarks all go through
//! `Store`; nothing outside this folder opens a pool or writes SQL.
//!
//! Every transition is one database transaction that writes the sprint's new state,
//! appends to its log (contiguous `seq`), closes the run that caused it and answers the
//! command that asked for it.
//!
//! `Database` (`database.rs`) is the interface; each engine implements it with its own SQL
//! and migrations folder: `sqlite` (`migrations/sqlite/`, the embedded default) and
//! `postgres` (`migrations/postgres/`, several hosts on one database). Each engine's
//! writes go through the one `Writes` of its database: a write waits out a lock held by
//! another process (`retry_locked`), and a failed write names the database. `Store`
//! (`handle.rs`) holds an engine, opens it, and signs and verifies commands; every other
//! call reaches the engine through it (`Deref`). The records (`rows`, `commit`) know no
//! engine.

mod check;
mod command;
mod commit;
mod contract;
mod database;
mod handle;
mod live;
mod postgres;
pub mod rows;
pub mod signing;
mod sqlite;
mod status;
#[cfg(feature = "testing")]
pub mod testing;

use crate::pipeline::Backoff;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use check::{BaseCheck, CheckRecord};
pub use command::{Command, CommandKind, CommandStatus, NewCommand};
pub use commit::{Commit, NewRun, RunEnd};
pub use contract::{ContractItem, PLANNER, contract, contract_results, sourced};
pub use database::Database;
pub use handle::{HostScope, Store};
pub use live::RunLive;
pub use rows::{
    ForumPost, HostRecord, Lease, Run, Spend, Sprint, TransitionRecord, Usage, approved_head,
    ci_files_held, review_round, round_request, waiting_for,
};

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
    pub(crate) fn at(self, db: &str) -> StoreError {
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

/// The wait before a locked write is tried again: from 100 ms, doubling up to 5 s.
const LOCKED_RETRY: Backoff = Backoff::doubling(Duration::from_millis(100), Duration::from_secs(5));

/// Once the process is stopping, a locked write waits at most this long.
const LOCKED_WAIT_WHEN_STOPPING: Duration = Duration::from_secs(10);

/// Runs a write again, with backoff, for as long as another process holds the database's
/// write lock (a backup, the `sqlite3` shell): that is a wait, not a failure, and what is
/// being written (a finished sister's result) is kept in memory meanwhile, never dropped.
/// Every other error is returned at once. A locked write is logged once, then every 10th
/// try. Once `stopping` says so the wait has a bound: what is not written is found again
/// at the next start, as after a crash, so a stop never hangs on a lock.
async fn retry_locked<T, F>(
    what: &'static str,
    stopping: &AtomicBool,
    mut op: impl FnMut() -> F,
) -> Result<T>
where
    F: std::future::Future<Output = Result<T>>,
{
    let mut tries = 0u32;
    let started = tokio::time::Instant::now();
    loop {
        match op().await {
            Err(e)
                if e.is_locked()
                    && stopping.load(Ordering::Relaxed)
                    && started.elapsed() >= LOCKED_WAIT_WHEN_STOPPING =>
            {
                tracing::warn!(error = %e, "the database is still locked; shutting down without: {what}");
                return Err(e);
            }
            Err(e) if e.is_locked() => {
                tries += 1;
                let wait = LOCKED_RETRY.delay(tries);
                if tries % 10 == 1 {
                    tracing::warn!(error = %e, tries, retry_in = ?wait, "the database is locked by another process; {what}: will retry");
                }
                tokio::time::sleep(wait).await;
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

/// How every engine writes: a write is tried again while another process holds the
/// database's lock (`retry_locked`), and a failure of the storage under it names the
/// database (`StoreError::Storage`). One per opened database, shared by every handle made
/// from it, so that `stop` reaches them all.
#[derive(Debug, Clone)]
struct Writes {
    /// How errors name the database: its path, or its URL with the password hidden.
    db: Arc<str>,
    /// Set by `stop`: from then on a locked write waits only for a bound.
    stopping: Arc<AtomicBool>,
}

impl Writes {
    fn new(url: &str) -> Writes {
        Writes {
            db: database_name(url).into(),
            stopping: Arc::default(),
        }
    }

    /// A write, tried again while another process holds the database's lock; a failure
    /// of the storage under it names the database.
    async fn retry<T, F>(&self, what: &'static str, op: impl FnMut() -> F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        retry_locked(what, &self.stopping, op)
            .await
            .map_err(|e| e.at(&self.db))
    }

    /// A write tried once (the next one replaces it, or a deadline rather than a lock
    /// decides what follows); a failure of the storage under it names the database.
    fn once<T>(&self, written: Result<T>) -> Result<T> {
        written.map_err(|e| e.at(&self.db))
    }

    /// The process is stopping: see `Store::stopping`.
    fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
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

/// The database file a `sqlite:` URL names (`None` for an in-memory database, or a URL
/// that names no file, as a PostgreSQL one).
pub fn database_path(url: &str) -> Option<PathBuf> {
    if crate::config::is_postgres_url(url) {
        return None;
    }
    sqlite::database_path(url)
}

#[cfg(test)]
mod tests {
    use crate::pipeline::State;

    /// The states in which a sprint holds its project's pipeline lock are every state but
    /// `queued` and the terminal ones, and the engines' queue heads take them from
    /// `State::holds_lock` (a parameter), never from a list of their own.
    #[test]
    fn the_lock_holding_states_come_from_one_function() {
        assert_eq!(
            State::names(State::holds_lock),
            [
                "planning",
                "implementing",
                "reviewing",
                "verifying",
                "done",
                "merging",
                "deploying",
                "escalated"
            ]
        );
    }

    /// No statement of the store names a state but `queued` (the one a sprint is created
    /// in): which states hold a lock, have ended or are waited on is the pipeline's word,
    /// bound as a parameter (`states(…)`). Every source file of the store is read, and the
    /// migrations a database is left with (an old migration's list is replaced by a later
    /// one, never edited).
    #[test]
    fn no_statement_of_the_store_names_a_state() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        let mut dirs = vec![root.join("src/store")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && !path.ends_with("src/store/mod.rs")
                {
                    files.push(path);
                }
            }
        }
        assert!(files.len() > 20, "{files:?}");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for state in State::ALL.into_iter().filter(|s| *s != State::Queued) {
                assert!(
                    !text.contains(&format!("'{state}'")),
                    "{} names the state {state} in SQL",
                    file.display()
                );
            }
        }
        // The one trigger that named ended states is dropped by a later migration.
        let postgres = root.join("migrations/postgres");
        let dropped = std::fs::read_dir(&postgres)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .any(|sql| sql.contains("DROP TRIGGER sprints_ended_notify"));
        assert!(dropped, "sprints_ended_notify still names the ended states");
    }
}
