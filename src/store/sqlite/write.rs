//! The writes that are more than one statement on SQLite: a transition's commit in one
//! round trip to SQLite's thread, a run's start and end, and a delivery cursor (the one
//! write made at less than full durability).

use sqlx::Row;
use sqlx::sqlite::SqliteArguments;

use super::Db;
use super::checks::{INSERT_CHECK, bind_check};
use crate::store::{
    CommandStatus, Commit, NewRun, Result, RunEnd, RunLive, StoreError, TransitionRecord,
};

type Query<'q> = sqlx::query::Query<'q, sqlx::Sqlite, SqliteArguments>;

/// A run's start; bound by `bind_new_run`.
const INSERT_RUN: &str = "INSERT INTO runs (id, sprint_id, number, actor, round, attempt, parent_run_id, handoff_json, synthesized, focus, git_head, started_at, reviewer, resumes, agent)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// How a run ended; bound by `bind_run_end`. A run already ended (recorded `interrupted`
/// at a restart) keeps its end. (A macro, so `COMMIT_BATCH` holds the same text.)
macro_rules! end_run {
    () => {
        "UPDATE runs SET outcome = ?, detail = ?, rejection = ?, exit_code = ?, signal = ?, duration_ms = ?,
        stdout_tail = ?, stderr_tail = ?, message_json = ?, input_tokens = ?, output_tokens = ?,
        cost_usd = ?, ended_at = ?, session_id = ?, paused_until = ?
     WHERE id = ? AND outcome IS NULL"
    };
}
const END_RUN: &str = end_run!();

/// The notes a new run is given (`NewRun::notes_upto`), marked as given to it: those given
/// to no run, or to a run that ended without an answer.
macro_rules! deliver_notes {
    () => {
        "UPDATE commands SET delivered_run = ?
     WHERE sprint_id = ? AND kind = 'note' AND status <> 'refused' AND (delivered_run IS NULL OR delivered_run IN (SELECT id FROM runs WHERE runs.sprint_id = commands.sprint_id AND outcome IS NOT NULL AND outcome <> 'handoff')) AND id <= ?"
    };
}
const DELIVER_NOTES: &str = deliver_notes!();

/// A transition's commit, in one round trip to SQLite's thread: the sprint (the run's
/// spend is rolled up here), the log entry, the run's end and its check (only where the
/// end was written: `changes()`), the command's answer, the next run, then COMMIT. `?` parameters count on across statements. The log entry takes its
/// `seq` from the sprint row only where the update matched the `last_seq` read before: a
/// stale read makes it NULL (or a taken `seq`), and the insert fails before the COMMIT.
///
/// One text whatever goes with the transition (what does not is bound as NULL and touches
/// no row), so SQLite prepares it once per connection.
const COMMIT_BATCH: &str = concat!(
    "BEGIN IMMEDIATE;
     UPDATE sprints SET state = ?, round = ?, attempt = ?, resume_stage = ?, resume_round = ?,
         contract_id = ?, branch = ?, next_run_at = ?, focus = ?, focus_by = ?, budget_usd = ?, last_seq = ?, updated_at = ?,
         input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost_usd = cost_usd + ?
     WHERE id = ? AND last_seq = ?
     RETURNING 'sprint' AS written, last_seq AS n;
     INSERT INTO transitions (sprint_id, seq, from_state, to_state, event, event_json, note_json, round, attempt, run_id, branch, at)
     VALUES (?, (SELECT last_seq FROM sprints WHERE id = ? AND last_seq = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     RETURNING 'transition' AS written, global_seq AS n;
     ",
    end_run!(),
    ";
     INSERT INTO checks (sprint_id, run_id, command, head, exit_code, duration_ms, output_tail, at)
     SELECT sprint_id, id, ?, ?, ?, ?, ?, ? FROM runs WHERE id = ? AND changes() = 1;
     UPDATE commands SET status = ?, result = ?, applied_at = ? WHERE id = ? AND status = 'pending';
     INSERT INTO runs (id, sprint_id, number, actor, round, attempt, parent_run_id, handoff_json, synthesized, focus, git_head, started_at, reviewer, resumes, agent)
     SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE ?;
     ",
    deliver_notes!(),
    ";
     COMMIT;"
);

/// How many parameters the run's end, the command's answer and the next run take.
const END_RUN_PARAMETERS: usize = 16;
const RESOLVE_COMMAND_PARAMETERS: usize = 4;
const INSERT_RUN_PARAMETERS: usize = 15;

/// A cursor's move at `synchronous = NORMAL`: no fsync of its own (one lost in a power cut
/// only has its lines sent again, and the next commit at FULL makes it durable: the log
/// is written in order). FULL is put back in the same batch.
const SET_CURSOR: &str = "PRAGMA synchronous = NORMAL;
     INSERT INTO delivery_cursors (consumer, global_seq) VALUES (?, ?)
     ON CONFLICT (consumer) DO UPDATE SET global_seq = excluded.global_seq;
     PRAGMA synchronous = FULL;";

/// A running run's latest step and counts; a run that ended keeps what it has.
const RUN_LIVE: &str = "UPDATE runs SET live_step = ?, live_step_at = ?, live_input_tokens = ?,
        live_output_tokens = ?, live_cost_usd = ?
     WHERE id = ? AND outcome IS NULL";

impl Db {
    pub(super) async fn record_run_live(&self, run_id: &str, live: &RunLive) -> Result<()> {
        sqlx::query(RUN_LIVE)
            .bind(&live.step)
            .bind(live.step_at)
            .bind(live.input_tokens)
            .bind(live.output_tokens)
            .bind(live.cost_usd)
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The sprint's base, once: a base already recorded stays.
    pub(super) async fn write_base(
        &self,
        sprint_id: &str,
        base_branch: &str,
        base_commit: &str,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE sprints SET base_branch = ?, base_commit = ? WHERE id = ? AND base_commit IS NULL",
        )
        .bind(base_branch)
        .bind(base_commit)
        .bind(sprint_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(super) async fn commit_batch(&self, c: &Commit<'_>) -> Result<TransitionRecord> {
        let (event_json, note_json) = c.encoded()?;
        let seq = c.seq();
        let after = c.after;
        let mut query = sqlx::query(COMMIT_BATCH)
            .bind(after.state.as_str())
            .bind(i64::from(after.round))
            .bind(i64::from(after.attempt))
            .bind(after.resume.map(|r| r.stage.as_str()))
            .bind(after.resume.map(|r| i64::from(r.round)))
            .bind(&after.contract_id)
            .bind(&after.branch)
            .bind(after.next_run_at)
            .bind(&after.focus)
            .bind(&after.focus_by)
            .bind(after.budget_usd)
            .bind(seq)
            .bind(c.at)
            .bind(c.run.and_then(|r| r.input_tokens).unwrap_or(0))
            .bind(c.run.and_then(|r| r.output_tokens).unwrap_or(0))
            .bind(c.run.and_then(|r| r.cost_usd).unwrap_or(0.0))
            .bind(&c.before.id)
            .bind(c.before.last_seq)
            // The log entry.
            .bind(&c.before.id)
            .bind(&c.before.id)
            .bind(seq)
            .bind(c.transition.from.state.as_str())
            .bind(c.transition.to.state.as_str())
            .bind(c.event.name())
            .bind(&event_json)
            .bind(note_json.as_deref())
            .bind(i64::from(c.transition.to.round))
            .bind(i64::from(c.transition.to.attempt))
            .bind(c.run.map(|r| r.run_id.as_str()))
            .bind(&after.branch)
            .bind(c.at);
        query = match c.run {
            Some(run) => bind_run_end(query, run)?,
            None => bind_nulls(query, END_RUN_PARAMETERS),
        };
        query = bind_check(query, c.run)?;
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
        query = match &c.start {
            Some(new) => bind_notes(query, new),
            None => bind_nulls(query, 3),
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

    /// A run's start; with a focus, the sprint's is cleared in the same transaction (the
    /// next run does not get it again).
    pub(super) async fn insert_run(&self, new: &NewRun<'_>) -> Result<String> {
        let insert = bind_new_run(sqlx::query(INSERT_RUN), new)?;
        if new.focus.is_none() && new.notes_upto.is_none() {
            insert.execute(&self.pool).await?;
        } else {
            let mut tx = self.begin_write().await?;
            insert.execute(&mut *tx).await?;
            if new.focus.is_some() {
                sqlx::query("UPDATE sprints SET focus = NULL, focus_by = NULL WHERE id = ?")
                    .bind(new.sprint_id)
                    .execute(&mut *tx)
                    .await?;
            }
            bind_notes(sqlx::query(DELIVER_NOTES), new)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        Ok(crate::domain::run_id(new.sprint_id, new.number))
    }

    /// A run's end, its spend rolled up on its sprint; a run already ended keeps its end.
    pub(super) async fn record_run_end(&self, run: &RunEnd) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let ended = bind_run_end(sqlx::query(END_RUN), run)?
            .execute(&mut *tx)
            .await?;
        if ended.rows_affected() == 0 {
            tx.rollback().await?;
            tracing::warn!(run = %run.run_id, "this run's end was already recorded; this one is dropped");
            return Ok(());
        }
        if run.check.is_some() {
            bind_check(sqlx::query(INSERT_CHECK), Some(run))?
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "UPDATE sprints SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
                 cost_usd = cost_usd + ?
             WHERE id = (SELECT sprint_id FROM runs WHERE id = ?)",
        )
        .bind(run.input_tokens.unwrap_or(0))
        .bind(run.output_tokens.unwrap_or(0))
        .bind(run.cost_usd.unwrap_or(0.0))
        .bind(&run.run_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// `SET_CURSOR`. Should it stop half-way, its connection (maybe left at NORMAL) is
    /// closed, never handed to the next transition's commit.
    pub(super) async fn write_cursor(&self, consumer: &str, global_seq: i64) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        let moved = sqlx::query(SET_CURSOR)
            .bind(consumer)
            .bind(global_seq)
            .execute(&mut *conn)
            .await;
        if let Err(e) = moved {
            conn.close_on_drop();
            return Err(e.into());
        }
        Ok(())
    }
}

/// Binds `n` NULLs: the parameters of a statement of the batch that is to touch nothing.
fn bind_nulls(mut query: Query<'_>, n: usize) -> Query<'_> {
    for _ in 0..n {
        query = query.bind(None::<i64>);
    }
    query
}

/// Binds a new run's columns, in `INSERT_RUN`'s order.
fn bind_new_run<'q>(query: Query<'q>, new: &NewRun<'q>) -> Result<Query<'q>> {
    let handoff_json =
        serde_json::to_string(new.handoff).map_err(|e| StoreError::Encode("handoff", e))?;
    Ok(query
        .bind(crate::domain::run_id(new.sprint_id, new.number))
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
        .bind(new.started_at)
        .bind(new.reviewer)
        .bind(new.resumes)
        .bind(new.agent))
}

/// Binds `DELIVER_NOTES`' parameters for a new run (with no notes, it touches no row).
fn bind_notes<'q>(query: Query<'q>, new: &NewRun<'q>) -> Query<'q> {
    query
        .bind(crate::domain::run_id(new.sprint_id, new.number))
        .bind(new.sprint_id)
        .bind(new.notes_upto)
}

/// Binds a run's end, in `END_RUN`'s order.
fn bind_run_end<'q>(query: Query<'q>, run: &'q RunEnd) -> Result<Query<'q>> {
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
        .bind(&run.session_id)
        .bind(run.paused_until)
        .bind(&run.run_id))
}
