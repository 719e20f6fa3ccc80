//! The writes that are PostgreSQL's own: a transition's commit, and a run's start and
//! end, each a transaction of separate statements. The sprint row's `last_seq` guards a
//! commit: a transaction that finds it moved on (another writer committed first; with a
//! second writer on the row, PostgreSQL waits for it and then reads its result) writes
//! nothing.

use sqlx::Row;

use super::{Db, unique_violation};
use crate::store::{CommandStatus, Commit, NewRun, Result, RunEnd, RunLive, StoreError};

type Query<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// The advisory lock a commit holds from its log entry to its end: log entries become
/// visible in the order of their `global_seq` (a sequence alone hands out numbers in the
/// order of the inserts, and commits can land the other way round).
const LOG_LOCK: i64 = 0x6861_6e61_726c_6f67; // "hanarlog"

/// A run's start (`Database::start_run`); bound by `bind_new_run`.
const INSERT_RUN: &str = "INSERT INTO runs (id, sprint_id, number, actor, round, attempt, parent_run_id, handoff_json, synthesized, focus, git_head, started_at, reviewer, resumes, agent)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)";

/// How a run ended; bound by `bind_run_end`. A run already ended (recorded `interrupted`
/// by the host that took its sprint over) keeps its end.
const END_RUN: &str = "
    UPDATE runs SET outcome = $1, detail = $2, rejection = $3, exit_code = $4, signal = $5, duration_ms = $6,
        stdout_tail = $7, stderr_tail = $8, message_json = $9, input_tokens = $10, output_tokens = $11,
        cost_usd = $12, ended_at = $13, session_id = $14, paused_until = $15
    WHERE id = $16 AND outcome IS NULL";

/// A running run's latest step and counts; a run that ended keeps what it has.
const RUN_LIVE: &str = "UPDATE runs SET live_step = $1, live_step_at = $2, live_input_tokens = $3,
        live_output_tokens = $4, live_cost_usd = $5
     WHERE id = $6 AND outcome IS NULL";

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
            "UPDATE sprints SET base_branch = $1, base_commit = $2 WHERE id = $3 AND base_commit IS NULL",
        )
        .bind(base_branch)
        .bind(base_commit)
        .bind(sprint_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Why a guarded write for `sprint_id` matched nothing: taken over (its epoch moved
    /// on) is `Fenced`, anything else (gone, or changed since it was read) `Conflict`.
    async fn refusal(&self, sprint_id: &str, epoch: i64) -> StoreError {
        let now: Result<Option<i64>, _> =
            sqlx::query_scalar("SELECT epoch FROM sprints WHERE id = $1")
                .bind(sprint_id)
                .fetch_optional(&self.pool)
                .await;
        match now {
            Ok(Some(e)) if e != epoch => StoreError::Fenced(sprint_id.to_string()),
            _ => StoreError::Conflict(sprint_id.to_string()),
        }
    }

    /// A commit's statements in `tx`, up to its end: the log entry's `global_seq`.
    pub(super) async fn write_commit(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
        c: &Commit<'_>,
    ) -> Result<i64> {
        let (event_json, note_json) = c.encoded()?;
        let seq = c.seq();
        let run = c.run;
        let after = c.after;
        let moved = sqlx::query(
            "UPDATE sprints SET state = $1, round = $2, attempt = $3, resume_stage = $4, resume_round = $5,
                 contract_id = $6, branch = $7, next_run_at = $8, focus = $9, focus_by = $10, budget_usd = $11, last_seq = $12,
                 updated_at = $13, input_tokens = input_tokens + $14, output_tokens = output_tokens + $15,
                 cost_usd = cost_usd + $16
             WHERE id = $17 AND last_seq = $18 AND epoch = $19",
        )
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
        .bind(run.and_then(|r| r.input_tokens).unwrap_or(0))
        .bind(run.and_then(|r| r.output_tokens).unwrap_or(0))
        .bind(run.and_then(|r| r.cost_usd).unwrap_or(0.0))
        .bind(&c.before.id)
        .bind(c.before.last_seq)
        .bind(c.before.epoch)
        .execute(&mut **tx)
        .await?;
        if moved.rows_affected() != 1 {
            // Gone, moved on since `before` was read, or taken over: nothing is written
            // (the caller's transaction is rolled back as it is dropped).
            return Err(self.refusal(&c.before.id, c.before.epoch).await);
        }
        if let Some(run) = run {
            let ended = bind_run_end(sqlx::query(END_RUN), run)?
                .execute(&mut **tx)
                .await?;
            // A run already ended keeps its end, and its check is not this one.
            if ended.rows_affected() == 1 {
                super::checks::insert_check(tx, run).await?;
            }
        }
        if let Some((id, result)) = c.command {
            sqlx::query(
                "UPDATE commands SET status = $1, result = $2, applied_at = $3
                 WHERE id = $4 AND status = 'pending'",
            )
            .bind(CommandStatus::Applied.as_str())
            .bind(result)
            .bind(c.at)
            .bind(id)
            .execute(&mut **tx)
            .await?;
        }
        if let Some(new) = &c.start {
            let started = bind_new_run(sqlx::query(INSERT_RUN), new)?
                .execute(&mut **tx)
                .await;
            if started.is_ok() {
                deliver_notes(tx, new).await?;
            }
            if let Err(e) = started {
                // The run's number taken: the caller's copy of the sprint's runs is behind.
                return Err(
                    if unique_violation(&e).is_some_and(|c| c.starts_with("runs")) {
                        StoreError::RunTaken(crate::domain::run_id(new.sprint_id, new.number))
                    } else {
                        e.into()
                    },
                );
            }
        }
        // Last, under the log's lock held to the commit: a `global_seq` is taken only
        // when every lower one is committed (or rolled back), so a reader that has seen
        // one has seen all before it, and its cursor never passes a line still to come.
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(LOG_LOCK)
            .execute(&mut **tx)
            .await?;
        let global_seq: i64 = sqlx::query(
            "INSERT INTO transitions (sprint_id, seq, from_state, to_state, event, event_json, note_json, round, attempt, run_id, branch, at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             RETURNING global_seq",
        )
        .bind(&c.before.id)
        .bind(seq)
        .bind(c.transition.from.state.as_str())
        .bind(c.transition.to.state.as_str())
        .bind(c.event.name())
        .bind(&event_json)
        .bind(note_json.as_deref())
        .bind(i64::from(c.transition.to.round))
        .bind(i64::from(c.transition.to.attempt))
        .bind(run.map(|r| r.run_id.as_str()))
        .bind(&after.branch)
        .bind(c.at)
        .fetch_one(&mut **tx)
        .await?
        .try_get(0)?;
        Ok(global_seq)
    }

    /// At full durability, whatever the stage: PostgreSQL's `synchronous_commit` is the
    /// server's setting, not this store's. Only while the sprint is still at `epoch`: a
    /// host that lost it starts nothing for it.
    pub(super) async fn insert_run(&self, new: &NewRun<'_>, epoch: i64) -> Result<String> {
        let mut tx = self.pool.begin().await?;
        let held = sqlx::query("SELECT 1 FROM sprints WHERE id = $1 AND epoch = $2 FOR SHARE")
            .bind(new.sprint_id)
            .bind(epoch)
            .fetch_optional(&mut *tx)
            .await?;
        if held.is_none() {
            tx.rollback().await?;
            return Err(self.refusal(new.sprint_id, epoch).await);
        }
        bind_new_run(sqlx::query(INSERT_RUN), new)?
            .execute(&mut *tx)
            .await?;
        if new.focus.is_some() {
            // The focus goes with this run; the next one does not get it again.
            sqlx::query("UPDATE sprints SET focus = NULL, focus_by = NULL WHERE id = $1")
                .bind(new.sprint_id)
                .execute(&mut *tx)
                .await?;
        }
        deliver_notes(&mut tx, new).await?;
        tx.commit().await?;
        Ok(crate::domain::run_id(new.sprint_id, new.number))
    }

    /// A run already ended (recorded `interrupted` by the host that took its sprint over)
    /// keeps its end; this one is dropped.
    pub(super) async fn record_run_end(&self, run: &RunEnd) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let ended = bind_run_end(sqlx::query(END_RUN), run)?
            .execute(&mut *tx)
            .await?;
        if ended.rows_affected() == 0 {
            tx.rollback().await?;
            tracing::warn!(run = %run.run_id, "this run's end was already recorded (its sprint was taken over); this one is dropped");
            return Ok(());
        }
        super::checks::insert_check(&mut tx, run).await?;
        sqlx::query(
            "UPDATE sprints SET input_tokens = input_tokens + $1, output_tokens = output_tokens + $2,
                 cost_usd = cost_usd + $3
             WHERE id = (SELECT sprint_id FROM runs WHERE id = $4)",
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
}

/// Marks the notes a new run is given (`NewRun::notes_upto`) as given to it.
async fn deliver_notes(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    new: &NewRun<'_>,
) -> Result<()> {
    let Some(upto) = new.notes_upto else {
        return Ok(());
    };
    sqlx::query(
        "UPDATE commands SET delivered_run = $1
         WHERE sprint_id = $2 AND kind = 'note' AND status <> 'refused' AND (delivered_run IS NULL OR delivered_run IN (SELECT id FROM runs WHERE runs.sprint_id = commands.sprint_id AND outcome IS NOT NULL AND outcome <> 'handoff')) AND id <= $3",
    )
    .bind(crate::domain::run_id(new.sprint_id, new.number))
    .bind(new.sprint_id)
    .bind(upto)
    .execute(&mut **tx)
    .await?;
    Ok(())
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
