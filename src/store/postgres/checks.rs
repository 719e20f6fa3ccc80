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
            "SELECT id, run_id, command, head, exit_code, duration_ms, output_tail, at
             FROM checks WHERE sprint_id = $1 ORDER BY id",
        )
        .bind(sprint_id)
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(CheckRecord::try_from).collect()
    }
}
