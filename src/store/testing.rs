//! For the test suite and the benchmarks only (cargo feature `testing`): what hanarang
//! itself never does to a database (rows it would not write, a migration from a newer
//! binary, a lock held by another process, a fresh PostgreSQL database per test, the bare
//! floor a benchmark compares with). Here so that all SQL stays in the store. The calls
//! that take a `Store` work on every engine; the others name theirs.

pub use super::postgres::testing::{HeldCommit, drop_database, fresh_database, restore_postgres};
pub use super::sqlite::testing::{Floor, WriteLock};

use async_trait::async_trait;

use super::{CommandKind, Commit, Result, Store, StoreError, postgres, sqlite};

/// What the calls below that work on every engine ask of it; each engine answers in its
/// own `testing.rs`.
#[async_trait]
pub(super) trait Engine: Send + Sync {
    /// Several commands for one sprint in one transaction, signed with `macs`; wakes the
    /// orchestrator as `record_command` does.
    async fn insert_commands_together(
        &self,
        sprint_id: &str,
        kinds: &[CommandKind],
        macs: &[String],
    ) -> Result<()>;
    async fn insert_newer_migration(&self, version: i64) -> Result<()>;
    async fn write_sprint_state(&self, sprint_id: &str, state: &str) -> Result<()>;
    async fn runs_on_record(&self) -> Result<i64>;
}

/// The engine behind `store`, for what `Database` does not ask of it.
fn engine(store: &Store) -> Result<&dyn Engine> {
    let db: &dyn std::any::Any = &*store.db;
    if let Some(db) = db.downcast_ref::<sqlite::Db>() {
        return Ok(db);
    }
    match db.downcast_ref::<postgres::Db>() {
        Some(db) => Ok(db),
        None => Err(StoreError::Sql(sqlx::Error::Configuration(
            "store::testing knows no such engine".into(),
        ))),
    }
}

/// Every `(table, column)` of hanarang's tables in the database `url` names, on either
/// engine, sorted: what two engines' schemas are compared by.
pub async fn columns(url: &str) -> Result<Vec<(String, String)>> {
    if crate::config::is_postgres_url(url) {
        super::postgres::testing::columns(url).await
    } else {
        super::sqlite::testing::columns(url).await
    }
}

/// The `tracing` target of the SQL statements the store runs, one debug event each.
pub const SQL_EVENTS: &str = "sqlx::query";

/// Several commands for one sprint in one transaction, so the orchestrator reads them in
/// one batch, as if given at once.
pub async fn submit_commands_together(
    store: &Store,
    sprint_id: &str,
    kinds: &[CommandKind],
) -> Result<()> {
    let key = store.signing_key().await?;
    let macs: Vec<String> = kinds
        .iter()
        .map(|&kind| {
            key.sign(&super::NewCommand {
                sprint_id,
                kind,
                text: None,
                by: "cli",
                seq: None,
                created_at: 1,
            })
        })
        .collect();
    engine(store)?
        .insert_commands_together(sprint_id, kinds, &macs)
        .await
}

/// Records a migration this binary does not have, as a newer hanarang's sqlx would.
pub async fn record_newer_migration(store: &Store, version: i64) -> Result<()> {
    engine(store)?.insert_newer_migration(version).await
}

/// Writes `state` into a sprint's row as it is, whether or not it names a state.
pub async fn overwrite_sprint_state(store: &Store, sprint_id: &str, state: &str) -> Result<()> {
    engine(store)?.write_sprint_state(sprint_id, state).await
}

/// How many runs the database holds.
pub async fn count_runs(store: &Store) -> Result<i64> {
    engine(store)?.runs_on_record().await
}

/// The PostgreSQL engine behind `store`, for the calls only it answers.
fn postgres_of<'a>(store: &'a Store, what: &str) -> Result<&'a postgres::Db> {
    let db: &dyn std::any::Any = &*store.db;
    db.downcast_ref::<postgres::Db>().ok_or_else(|| {
        StoreError::Sql(sqlx::Error::Configuration(
            format!("store::testing::{what} is for PostgreSQL").into(),
        ))
    })
}

/// On PostgreSQL: writes a commit's statements and holds its transaction open, as a
/// host does for a moment (or frozen in the middle of it), until `HeldCommit::finish`.
pub async fn hold_commit_open(store: &Store, c: Commit<'_>) -> Result<HeldCommit> {
    postgres_of(store, "hold_commit_open")?
        .hold_commit_open(&c)
        .await
}

/// On PostgreSQL: how many sessions on the store's database wait for a lock.
pub async fn lock_waiters(store: &Store) -> Result<i64> {
    postgres_of(store, "lock_waiters")?.lock_waiters().await
}

/// Writes a command row as something other than hanarang would (an agent with the
/// database open): `mac` as given, `None` for none at all. Returns its id.
pub async fn forge_command(
    store: &Store,
    sprint_id: &str,
    kind: CommandKind,
    by: &str,
    mac: Option<&str>,
) -> Result<i64> {
    store
        .record_command(
            &super::NewCommand {
                sprint_id,
                kind,
                text: None,
                by,
                seq: None,
                created_at: crate::clock::now_ms(),
            },
            mac.unwrap_or(""),
            None,
        )
        .await
}
