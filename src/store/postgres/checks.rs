//! The project's checks on PostgreSQL: the insert that goes with a run's end, and the read.

use super::Db;
use crate::store::check::CheckRaw;
use crate::store::{CheckRecord, Result, RunEnd};

/// A check, with the sprint of the run it checked.
const INSERT_CHECK: &str =
    "INSERT INTO checks (sprint_id, run_id, command, head, exit_code, duration_ms, output_tail, at)
     SELECT sprint_id, id, $1, $2, $3, $4, $5, $6 FROM runs WHERE id = $7";

/// Records `run`'s check, if it had one, in `tx` (where its end was just written).
pub(super) async fn insert_check(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    run: &RunEnd,
) -> Result<()> {
    let Some(check) = &run.check else {
        return Ok(());
    };
    sqlx::query(INSERT_CHECK)
        .bind(check.command_json()?)
        .bind(&check.head)
        .bind(check.exit_code.map(i64::from))
        .bind(check.duration_ms)
        .bind(&check.output_tail)
        .bind(check.at)
        .bind(&run.run_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl Db {
    pub(super) async fn read_checks(&self, sprint_id: &str) -> Result<Vec<CheckRecord>> {
        let raws: Vec<CheckRaw> = sqlx::query_as(
            "SELECT c.id, c.run_id, c.command, c.head, c.exit_code, c.duration_ms, c.output_tail, c.at,
                 COALESCE(c.head = s.base_commit, FALSE) AS at_base
             FROM checks c JOIN sprints s ON s.id = c.sprint_id
             WHERE c.sprint_id = $1 ORDER BY c.id",
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
                 TRUE AS at_base
             FROM checks c JOIN sprints s ON s.id = c.sprint_id
             WHERE c.head = s.base_commit AND c.head = $1 AND s.project = $2 ORDER BY c.id DESC LIMIT 1",
        )
        .bind(commit)
        .bind(project)
        .fetch_optional(&self.pool)
        .await?;
        raw.map(CheckRecord::try_from).transpose()
    }
}
