//! For the test suite and the benchmarks only: what hanarang itself never does to a
//! database (rows it would not write, a migration from a newer binary, an older schema, a
//! lock held by another process, a fresh PostgreSQL database per test, the bare floor a
//! benchmark compares with). Here so that all SQL stays in the store. The calls that take
//! a `Store` work on every engine; the others name theirs.

pub use super::postgres::testing::{HeldCommit, drop_database, fresh_database};
pub use super::sqlite::testing::{Floor, WriteLock, undo_status_migrations};

use super::{CommandKind, Commit, Engine, Result, Store, StoreError};

/// Several commands for one sprint in one transaction, so the orchestrator reads them in
/// one batch, as if given at once.
pub async fn submit_commands_together(
    store: &Store,
    sprint_id: &str,
    kinds: &[CommandKind],
) -> Result<()> {
    on_engine!(store, db => db.submit_commands_together(sprint_id, kinds).await)?;
    store.nudge();
    Ok(())
}

/// Records a migration this binary does not have, as a newer hanarang's sqlx would.
pub async fn record_newer_migration(store: &Store, version: i64) -> Result<()> {
    on_engine!(store, db => db.record_newer_migration(version).await)
}

/// Writes `state` into a sprint's row as it is, whether or not it names a state.
pub async fn overwrite_sprint_state(store: &Store, sprint_id: &str, state: &str) -> Result<()> {
    on_engine!(store, db => db.overwrite_sprint_state(sprint_id, state).await)
}

/// How many runs the database holds.
pub async fn count_runs(store: &Store) -> Result<i64> {
    on_engine!(store, db => db.count_runs().await)
}

/// On PostgreSQL: writes a commit's statements and holds its transaction open, as a
/// host does for a moment (or frozen in the middle of it), until `HeldCommit::finish`.
pub async fn hold_commit_open(store: &Store, c: Commit<'_>) -> Result<HeldCommit> {
    match &store.engine {
        Engine::Postgres(db) => db.hold_commit_open(&c).await,
        Engine::Sqlite(_) => Err(not_postgres("hold_commit_open")),
    }
}

/// On PostgreSQL: how many sessions on the store's database wait for a lock.
pub async fn lock_waiters(store: &Store) -> Result<i64> {
    match &store.engine {
        Engine::Postgres(db) => db.lock_waiters().await,
        Engine::Sqlite(_) => Err(not_postgres("lock_waiters")),
    }
}

fn not_postgres(what: &str) -> StoreError {
    StoreError::Sql(sqlx::Error::Configuration(
        format!("store::testing::{what} is for PostgreSQL").into(),
    ))
}
