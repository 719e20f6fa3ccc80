//! Runs in SQLite: a run's start before its spawn, its end, and what the runs cost.

use sqlx::Sqlite;

use super::{BEGIN_WRITE, Db, execute_batch, relaxed};
use crate::domain::Actor;
use crate::domain::run_id;
use crate::store::rows::{KeyedSpend, RunRaw};
use crate::store::{NewRun, Result, Run, RunEnd, StoreError, Usage};

/// A run's start (`Store::start_run`).
pub(super) const INSERT_RUN: &str = "INSERT INTO runs (id, sprint_id, number, actor, round, attempt, parent_run_id, handoff_json, synthesized, focus, git_head, started_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// How a run ended; its parameters are bound by `bind_run_end`. Its spend is rolled up
/// on the sprint by the caller, in the same transaction.
pub(super) const END_RUN: &str = "
    UPDATE runs SET outcome = ?, detail = ?, rejection = ?, exit_code = ?, signal = ?, duration_ms = ?,
        stdout_tail = ?, stderr_tail = ?, message_json = ?, input_tokens = ?, output_tokens = ?,
        cost_usd = ?, ended_at = ?
    WHERE id = ?;";

impl Db {
    pub async fn start_run(&self, new: &NewRun<'_>) -> Result<String> {
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

    pub async fn end_run(&self, run: &RunEnd) -> Result<()> {
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

    pub async fn runs_in_flight(&self) -> Result<Vec<Run>> {
        let raws: Vec<RunRaw> =
            sqlx::query_as("SELECT * FROM runs WHERE outcome IS NULL ORDER BY sprint_id, number")
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Run::try_from).collect()
    }

    // --- usage ------------------------------------------------------------------------

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
}

/// Binds `INSERT_RUN`'s parameters, in order, after those already bound.
pub(super) fn bind_new_run<'q>(
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
pub(super) fn bind_run_end<'q>(
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
