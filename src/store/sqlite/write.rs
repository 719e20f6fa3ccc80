//! The writes that are SQLite's own: a transition's commit in one round trip to SQLite's
//! thread, and a run's start and end as batches (a run's start at relaxed durability
//! where that loses nothing, `relaxed`). Their `?` parameters count on across the
//! statements of a batch.

use sqlx::Row;

use super::{
    BEGIN_WRITE, Db, bind_log_entry, bind_new_run, bind_run_end, bind_sprint_after, execute_batch,
    relaxed,
};
use crate::domain::{Actor, run_id};
use crate::store::{CommandStatus, Commit, NewRun, Result, RunEnd, StoreError, TransitionRecord};

/// The head of a run's insert; its 13 parameters are bound by `bind_new_run`.
macro_rules! insert_run {
    () => {
        "INSERT INTO runs (id, sprint_id, number, actor, round, attempt, parent_run_id, handoff_json, synthesized, focus, git_head, started_at, reviewer)"
    };
}

/// A run's start (`Store::start_run`).
const INSERT_RUN: &str = concat!(
    insert_run!(),
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
);

/// How a run ended; its parameters are bound by `bind_run_end`. Its spend is rolled up
/// on the sprint by the caller, in the same transaction.
macro_rules! end_run {
    () => {
        "
    UPDATE runs SET outcome = ?, detail = ?, rejection = ?, exit_code = ?, signal = ?, duration_ms = ?,
        stdout_tail = ?, stderr_tail = ?, message_json = ?, input_tokens = ?, output_tokens = ?,
        cost_usd = ?, ended_at = ?
    WHERE id = ?;"
    };
}
const END_RUN: &str = end_run!();

/// A transition's commit, in one round trip to SQLite's thread: the sprint (the run's
/// spend is rolled up here), the log entry, the run's end, the command's answer, the next
/// run, then COMMIT. `?` parameters count on across statements. The log entry takes its
/// `seq` from the sprint row only where the update matched the `last_seq` read before: a
/// stale read makes it NULL (or a taken `seq`), and the insert fails before the COMMIT.
///
/// One text whatever goes with the transition: what does not is bound as NULL and touches
/// no row (the run's end and the command's answer match no id, the next run's insert
/// selects nothing). SQLite then prepares it once per connection; preparing it costs more
/// than running it (the sprint's update compiles the status document's trigger), and a
/// short `hanarang run` made four variants of it.
const COMMIT_BATCH: &str = concat!(
    "BEGIN IMMEDIATE;
     UPDATE sprints SET state = ?, round = ?, attempt = ?, resume_stage = ?, resume_round = ?,
         contract_id = ?, branch = ?, next_run_at = ?, focus = ?, focus_by = ?, budget_usd = ?, last_seq = ?, updated_at = ?,
         input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost_usd = cost_usd + ?
     WHERE id = ? AND last_seq = ?
     RETURNING 'sprint' AS written, last_seq AS n;
     INSERT INTO transitions (sprint_id, seq, from_state, to_state, event, event_json, note_json, round, attempt, run_id, branch, at)
     VALUES (?, (SELECT last_seq FROM sprints WHERE id = ? AND last_seq = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     RETURNING 'transition' AS written, global_seq AS n;",
    end_run!(),
    // The command's answer: status, result, time, id.
    "UPDATE commands SET status = ?, result = ?, applied_at = ? WHERE id = ? AND status = 'pending';",
    insert_run!(),
    " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE ?;
     COMMIT;"
);

/// How many parameters the run's end, the command's answer and the next run take.
const END_RUN_PARAMETERS: usize = 14;
const RESOLVE_COMMAND_PARAMETERS: usize = 4;
const INSERT_RUN_PARAMETERS: usize = 13;

/// Binds `n` NULLs: the parameters of a statement of the batch that is to touch nothing.
fn bind_nulls<'q>(
    mut query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    n: usize,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    for _ in 0..n {
        query = query.bind(None::<i64>);
    }
    query
}

impl Db {
    pub async fn commit(&self, c: &Commit<'_>) -> Result<TransitionRecord> {
        let (event_json, note_json) = c.encoded()?;
        let seq = c.seq();
        let sprint = bind_sprint_after(sqlx::query(COMMIT_BATCH), c)
            .bind(&c.before.id)
            .bind(c.before.last_seq)
            .bind(&c.before.id)
            .bind(&c.before.id)
            .bind(seq);
        let mut query = bind_log_entry(sprint, c, &event_json, note_json.as_deref());
        query = match c.run {
            Some(run) => bind_run_end(query, run)?,
            None => bind_nulls(query, END_RUN_PARAMETERS),
        };
        query = match c.command {
            Some((id, result)) => query
                .bind(CommandStatus::Applied.as_str())
                .bind(result)
                .bind(c.at)
                .bind(id),
            None => bind_nulls(query, RESOLVE_COMMAND_PARAMETERS),
        };
        query = match &c.start {
            Some(new) => bind_new_run(query, new)?.bind(true),
            None => bind_nulls(query, INSERT_RUN_PARAMETERS).bind(false),
        };
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
        Ok(c.record(global_seq))
    }

    pub async fn start_run(&self, new: &NewRun<'_>) -> Result<String> {
        // The focus goes with this run; the next one does not get it again. One statement
        // is atomic on its own; two are a transaction.
        let sql = if new.focus.is_some() {
            format!(
                "{BEGIN_WRITE}; {INSERT_RUN}; UPDATE sprints SET focus = NULL, focus_by = NULL WHERE id = ?; COMMIT"
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
}
