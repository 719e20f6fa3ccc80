//! The PostgreSQL engine, chosen by `database.url = "postgres://…"`. What
//! is PostgreSQL's own lives here: `$n` parameters, identity columns, transactions of
//! separate statements (a prepared statement holds one), a transaction-scoped advisory
//! lock where SQLite's single writer made numbering safe, reading PostgreSQL's error
//! codes, and its migrations (`migrations/postgres/`).
//!
//! `queries.rs` answers the store's interface, `write.rs` holds a transition's commit and
//! a run's start and end, `hosts.rs` what several hosts on one database share.
//! A `Db` with a `HostScope` answers for that host: each call that differs says so.

mod checks;
mod hosts;
pub(super) mod queries;
#[cfg(feature = "testing")]
pub mod testing;
mod write;

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};

use super::{HostScope, MigrationStatus, Result, StoreError, Writes};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The channel the triggers of migration 0003 notify.
const NOTIFY_CHANNEL: &str = "hanarang";

/// The advisory lock a write transaction takes (`Db::begin_write`): the few writes that
/// read before they decide (a sprint's number, the lease) take turns, as under SQLite's
/// single writer.
const WRITE_LOCK: i64 = 0x6861_6e61_7261_6e67; // "hanarang"

/// How long one statement may wait for a row lock another host holds before it fails
/// (and the store tries it again): a host never hangs on a stuck peer.
const LOCK_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the server lets a transaction of this store sit idle before it ends the
/// session: a host frozen in the middle of one (stopped, swapped out, paused as a VM)
/// holds its locks only this long, and the other hosts go on; its late commit fails.
const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(5);

/// How long opening waits for a connection: a server that does not answer is an error
/// that names the URL, not a hang.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A PostgreSQL database; cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct Db {
    pool: PgPool,
    /// The host this handle answers for, among several (`Store::shared_by`); `None`: the
    /// only orchestrator on the database.
    scope: Option<HostScope>,
    writes: Writes,
}

fn options(url: &str) -> Result<PgConnectOptions> {
    Ok(PgConnectOptions::from_str(url)
        .map_err(|source| open_err(url, source))?
        .options([
            ("lock_timeout", format!("{}ms", LOCK_TIMEOUT.as_millis())),
            (
                "idle_in_transaction_session_timeout",
                format!("{}ms", IDLE_IN_TRANSACTION.as_millis()),
            ),
        ]))
}

fn open_err(url: &str, source: sqlx::Error) -> StoreError {
    StoreError::Open {
        url: crate::config::redacted(url),
        source,
    }
}

fn pool_options(max: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(CONNECT_TIMEOUT)
}

/// A pool of at most `max` connections to `url`. One connection is made first, on its
/// own: a server that refuses it (down, no such host, bad password) is said at once with
/// its cause, where the pool would retry until its time-out and name none.
async fn connect(url: &str, max: u32) -> Result<PgPool> {
    use sqlx::Connection;
    let options = options(url)?;
    let probe = tokio::time::timeout(
        CONNECT_TIMEOUT,
        sqlx::postgres::PgConnection::connect_with(&options),
    )
    .await
    .map_err(|_| open_err(url, sqlx::Error::PoolTimedOut))?
    .map_err(|e| open_err(url, e))?;
    let _ = probe.close().await;
    pool_options(max)
        .connect_with(options)
        .await
        .map_err(|e| open_err(url, e))
}

impl Db {
    /// Connects and applies the embedded migrations (sqlx holds an advisory lock while it
    /// does, so hosts starting together migrate once; each migration is a transaction of
    /// its own, so a failed one leaves the database as it was). Returns it with the
    /// folder for run contract files: on this machine, named after the database.
    pub(super) async fn open(url: &str, writes: Writes) -> Result<(Db, PathBuf)> {
        let options = options(url)?;
        let pool = connect(url, 4).await?;
        let (_, pending) = migrations_of(&pool, url).await?;
        if !pending.is_empty() {
            tracing::warn!(
                ?pending,
                "migrating the PostgreSQL database (back it up with pg_dump before an upgrade)"
            );
            MIGRATOR
                .run(&pool)
                .await
                .map_err(|source| StoreError::Migrate {
                    url: crate::config::redacted(url),
                    source,
                })?;
        }
        let name = format!(
            "{}-{}-{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("postgres")
        )
        .replace(
            |c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'),
            "_",
        );
        let runs_dir = std::env::temp_dir().join("hanarang-runs").join(name);
        let db = Db {
            pool,
            scope: None,
            writes,
        };
        Ok((db, runs_dir))
    }

    /// A write transaction that takes `WRITE_LOCK` first (released at its end).
    async fn begin_write(&self) -> Result<Transaction<'static, Postgres>> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(WRITE_LOCK)
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    /// A read transaction from one snapshot.
    async fn begin_snapshot(&self) -> Result<Transaction<'static, Postgres>> {
        Ok(self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await?)
    }

    /// Wakes `wake` whenever another writer notifies the hosts (migration 0003: a
    /// command, a queued sprint, a freed pipeline lock, a host gone), from a task on the
    /// caller's runtime that lives as long as the store is open. A lost connection is made again;
    /// meanwhile the caller's own poll still finds everything.
    async fn start_listening(&self, wake: std::sync::Arc<tokio::sync::Notify>) -> Result<()> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.listen(NOTIFY_CHANNEL).await?;
        let pool = self.pool.clone();
        tokio::spawn(async move {
            loop {
                match listener.recv().await {
                    Ok(_) => wake.notify_one(),
                    // The store was closed: its process is ending.
                    Err(_) if pool.is_closed() => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "lost the PostgreSQL wake-ups; listening again");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(())
    }

    /// Reads, without changing anything, which migrations a database still needs.
    pub async fn migration_status(url: &str) -> Result<MigrationStatus> {
        let pool = connect(url, 1).await?;
        let status = migrations_of(&pool, url).await;
        pool.close().await;
        let (applied, pending) = status?;
        Ok(if applied == 0 {
            MigrationStatus::NotCreated
        } else if pending.is_empty() {
            MigrationStatus::Current { applied }
        } else {
            MigrationStatus::Pending(pending)
        })
    }

    /// Connects to `url` only to ask the server's version.
    pub async fn version_at(url: &str) -> Result<String> {
        let pool = connect(url, 1).await?;
        let version = server_version(&pool).await;
        pool.close().await;
        version
    }
}

async fn server_version(pool: &PgPool) -> Result<String> {
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(pool)
        .await?;
    Ok(format!("PostgreSQL {version}"))
}

/// How many migrations a database has applied, and which of this binary's it lacks. A
/// migration this binary does not know is refused (`StoreError::TooNew`).
async fn migrations_of(pool: &PgPool, url: &str) -> Result<(usize, Vec<i64>)> {
    let has_table: Option<String> =
        sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text")
            .fetch_one(pool)
            .await?;
    let applied: Vec<i64> = if has_table.is_some() {
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(pool)
            .await?
    } else {
        Vec::new()
    };
    super::against(&MIGRATOR, &applied, url)
}

/// PostgreSQL's codes for a write that may well succeed if tried again: a lock another
/// transaction holds past `lock_timeout` (55P03), a serialization failure (40001), a
/// deadlock (40P01), and this host's own transaction ended by the server after
/// `IDLE_IN_TRANSACTION` (25P03: the process was frozen in the middle of it; nothing of it
/// was written, and the pool opens a new connection for the next try).
pub(super) fn is_busy(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.try_downcast_ref::<sqlx::postgres::PgDatabaseError>())
        .is_some_and(|d| matches!(d.code(), "55P03" | "40001" | "40P01" | "25P03"))
}

/// What a failure of the storage under the server is, in a few words (`None` for any other
/// error).
pub(super) fn storage_failure(e: &sqlx::Error) -> Option<String> {
    let d = e
        .as_database_error()?
        .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()?;
    match d.code() {
        "53100" => Some("disk full (on the database server)".into()),
        "25006" => Some(format!("read-only: {}", d.message())),
        "58030" => Some(format!("I/O error on the database server: {}", d.message())),
        _ => None,
    }
}

/// The constraint a unique violation names, if `e` is one.
fn unique_violation(e: &sqlx::Error) -> Option<String> {
    let d = e
        .as_database_error()?
        .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()?;
    (d.code() == "23505").then(|| d.constraint().unwrap_or_default().to_string())
}

/// The names of the states `which` keeps, as the text array a query reads with
/// `state = ANY($n)`.
pub(super) fn states(which: impl Fn(crate::pipeline::State) -> bool) -> Vec<String> {
    crate::pipeline::State::names(which)
        .into_iter()
        .map(String::from)
        .collect()
}
