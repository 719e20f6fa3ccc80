//! For the test suite and the benchmarks only: what hanarang itself never does to a
//! database (rows it would not write, a migration from a newer binary, an older schema, a
//! lock held by another process, a fresh PostgreSQL database per test, the bare floor a
//! benchmark compares with). Here so that all SQL stays in the store. The calls that take
//! a `Store` work on every engine; the others name theirs.

pub use super::postgres::testing::{drop_database, fresh_database};
pub use super::sqlite::testing::{Floor, WriteLock, undo_status_doc_migration};

use super::{CommandKind, Engine, Result, Store};

/// Several commands for one sprint in one transaction, so the orchestrator reads them in
/// one batch, as if given at once.
pub async fn submit_commands_together(
    store: &Store,
    sprint_id: &str,
    kinds: &[CommandKind],
) -> Result<()> {
    on_engine!(store, db => db.submit_commands_together(sprint_id, kinds).await)
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
