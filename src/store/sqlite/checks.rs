//! The project's checks on SQLite: the insert that goes with a run's end, and the read.

use super::Db;
use crate::store::check::CheckRaw;
use crate::store::{CheckRecord, Result, RunEnd};

/// A check, with the sprint of the run it checked; the run's end was written just before
/// in the same transaction (in the commit's batch, `changes()` says it was).
pub(super) const INSERT_CHECK: &str =
    "INSERT INTO checks (sprint_id, run_id, command, head, exit_code, duration_ms, output_tail, at)
     SELECT sprint_id, id, ?, ?, ?, ?, ?, ? FROM runs WHERE id = ?";

/// How many parameters `INSERT_CHECK` takes.
pub(super) const INSERT_CHECK_PARAMETERS: usize = 7;

type Query<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>;

/// Binds a run's check, in `INSERT_CHECK`'s order; NULLs (no row) when it had none.
pub(super) fn bind_check<'q>(query: Query<'q>, run: Option<&'q RunEnd>) -> Result<Query<'q>> {
    let Some((run, check)) = run.and_then(|r| Some((r, r.check.as_ref()?))) else {
        let mut query = query;
        for _ in 0..INSERT_CHECK_PARAMETERS {
            query = query.bind(None::<i64>);
        }
        return Ok(query);
    };
    Ok(query
        .bind(check.command_json()?)
        .bind(&check.head)
        .bind(check.exit_code)
        .bind(check.duration_ms)
        .bind(&check.output_tail)
        .bind(check.at)
        .bind(&run.run_id))
}

impl Db {
    pub(super) async fn read_checks(&self, sprint_id: &str) -> Result<Vec<CheckRecord>> {
        let raws: Vec<CheckRaw> = sqlx::query_as(
            "SELECT c.id, c.run_id, c.command, c.head, c.exit_code, c.duration_ms, c.output_tail, c.at,
                 COALESCE(c.head = s.base_commit, 0) AS at_base
             FROM checks c JOIN sprints s ON s.id = c.sprint_id
             WHERE c.sprint_id = ? ORDER BY c.id",
        )
        .bind(sprint_id)
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(CheckRecord::try_from).collect()
    }

    pub(super) async fn read_base_check(
        &self,
        project: &str,
        commit: &str,
    ) -> Result<Option<CheckRecord>> {
        let raw: Option<CheckRaw> = sqlx::query_as(
            "SELECT c.id, c.run_id, c.command, c.head, c.exit_code, c.duration_ms, c.output_tail, c.at,
                 1 AS at_base
             FROM checks c JOIN sprints s ON s.id = c.sprint_id
             WHERE c.head = s.base_commit AND c.head = ? AND s.project = ? ORDER BY c.id DESC LIMIT 1",
        )
        .bind(commit)
        .bind(project)
        .fetch_optional(&self.pool)
        .await?;
        raw.map(CheckRecord::try_from).transpose()
    }
}
