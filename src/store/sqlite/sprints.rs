//! Sprints and their transitions log in SQLite: queueing, the queues, a transition's
//! commit in one round trip, and the reads of the log and the status document.

use sqlx::{Row, Sqlite, Transaction};

use super::BEGIN_WRITE;
use super::Db;
use super::records::RESOLVE_COMMAND;
use super::runs::{END_RUN, INSERT_RUN, bind_new_run, bind_run_end};
use crate::domain::sprint_id;
use crate::placeholder;
use crate::store::rows::{KeyedSpend, SprintRaw, TransitionRaw};
use crate::store::{CommandStatus, Commit, Result, Spend, Sprint, StoreError, TransitionRecord};

/// The columns `SprintRaw` reads: every one but the stored status document, which only
/// `status_json` wants (it would triple what a listing of sprints copies).
macro_rules! sprint_columns {
    () => {
        "id, number, project, goal, state, round, attempt, resume_stage, resume_round, contract_id, branch, next_run_at, focus, budget_usd, last_seq, created_at, updated_at"
    };
}

impl Db {
    pub async fn create_sprint(
        &self,
        project: &str,
        goal: &str,
        focus: Option<&str>,
        branch_template: &str,
        at: i64,
    ) -> Result<Sprint> {
        let mut tx = self.begin_write().await?;
        let number: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(number), 0) + 1 FROM sprints")
            .fetch_one(&mut *tx)
            .await?;
        let id = sprint_id(number);
        let lower = id.to_lowercase();
        let branch = placeholder::substitute(
            branch_template,
            &[
                ("sprint", &id),
                ("sprint_lower", &lower),
                ("project", project),
            ],
        );
        sqlx::query(
            "INSERT INTO sprints (id, number, project, goal, state, round, attempt, contract_id, branch, focus, created_at, updated_at)
             VALUES (?, ?, ?, ?, 'queued', 0, 0, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(number)
        .bind(project)
        .bind(goal)
        .bind(&id)
        .bind(&branch)
        .bind(focus)
        .bind(at)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        let sprint = fetch_sprint(&mut tx, &id).await?;
        tx.commit().await?;
        Ok(sprint)
    }

    pub async fn sprint(&self, id: &str) -> Result<Option<Sprint>> {
        let raw: Option<SprintRaw> = sqlx::query_as(concat!(
            "SELECT ",
            sprint_columns!(),
            " FROM sprints WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        raw.map(Sprint::try_from).transpose()
    }

    pub async fn sprints(&self) -> Result<Vec<Sprint>> {
        let raws: Vec<SprintRaw> = sqlx::query_as(concat!(
            "SELECT ",
            sprint_columns!(),
            " FROM sprints ORDER BY number"
        ))
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(Sprint::try_from).collect()
    }

    pub async fn sprints_in_stages(&self) -> Result<Vec<Sprint>> {
        let raws: Vec<SprintRaw> = sqlx::query_as(
            concat!(
                "SELECT ",
                sprint_columns!(),
                " FROM sprints WHERE state IN ('planning', 'implementing', 'reviewing', 'deploying') ORDER BY number"
            ),
        )
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(Sprint::try_from).collect()
    }

    pub async fn ahead_of(&self, sprint: &Sprint) -> Result<Option<Sprint>> {
        let raw: Option<SprintRaw> = sqlx::query_as(concat!(
            "SELECT ",
            sprint_columns!(),
            " FROM sprints
             WHERE project = ? AND id != ? AND state NOT IN ('deployed', 'aborted')
               AND (state != 'queued' OR number < ?)
             ORDER BY state = 'queued', number
             LIMIT 1"
        ))
        .bind(&sprint.project)
        .bind(&sprint.id)
        .bind(sprint.number)
        .fetch_optional(&self.pool)
        .await?;
        raw.map(Sprint::try_from).transpose()
    }

    pub async fn next_in_queues(&self) -> Result<Vec<Sprint>> {
        let raws: Vec<SprintRaw> = sqlx::query_as(concat!(
            "SELECT ",
            sprint_columns!(),
            " FROM sprints s
             WHERE s.state = 'queued'
               AND s.number = (SELECT MIN(q.number) FROM sprints q WHERE q.project = s.project AND q.state = 'queued')
               AND NOT EXISTS (SELECT 1 FROM sprints b WHERE b.project = s.project
                               AND b.state NOT IN ('queued', 'deployed', 'aborted'))
             ORDER BY s.number"
        ))
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(Sprint::try_from).collect()
    }

    pub async fn commit(&self, c: &Commit<'_>) -> Result<TransitionRecord> {
        let event_json =
            serde_json::to_string(c.event).map_err(|e| StoreError::Encode("event", e))?;
        let note_json = c
            .transition
            .note
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Encode("note", e))?;
        let seq = c.before.last_seq + 1;
        let after = c.after;
        let run_id = c.run.map(|r| r.run_id.as_str());
        // The whole transaction in one round trip to SQLite's thread: the sprint (the
        // run's spend is rolled up here), the log entry, the run's end, the command's
        // answer, then COMMIT. `?` parameters count on across statements. The log entry
        // takes its `seq` from the sprint row only where the update matched the `last_seq`
        // read before: a stale read makes it NULL (or a taken `seq`), and the insert fails
        // before the COMMIT.
        let mut sql = format!(
            "{BEGIN_WRITE};
             UPDATE sprints SET state = ?, round = ?, attempt = ?, resume_stage = ?, resume_round = ?,
                 contract_id = ?, branch = ?, next_run_at = ?, focus = ?, budget_usd = ?, last_seq = ?, updated_at = ?,
                 input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost_usd = cost_usd + ?
             WHERE id = ? AND last_seq = ?
             RETURNING 'sprint' AS written, last_seq AS n;
             INSERT INTO transitions (sprint_id, seq, from_state, to_state, event, event_json, note_json, round, attempt, run_id, branch, at)
             VALUES (?, (SELECT last_seq FROM sprints WHERE id = ? AND last_seq = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             RETURNING 'transition' AS written, global_seq AS n;",
        );
        if c.run.is_some() {
            sql.push_str(END_RUN);
        }
        if c.command.is_some() {
            sql.push_str(RESOLVE_COMMAND);
        }
        if c.start.is_some() {
            sql.push_str(INSERT_RUN);
            sql.push(';');
        }
        sql.push_str(" COMMIT;");
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(after.state.as_str())
            .bind(i64::from(after.round))
            .bind(i64::from(after.attempt))
            .bind(after.resume.map(|r| r.stage.state().as_str()))
            .bind(after.resume.map(|r| i64::from(r.round)))
            .bind(&after.contract_id)
            .bind(&after.branch)
            .bind(after.next_run_at)
            .bind(&after.focus)
            .bind(after.budget_usd)
            .bind(seq)
            .bind(c.at)
            .bind(c.run.and_then(|r| r.input_tokens).unwrap_or(0))
            .bind(c.run.and_then(|r| r.output_tokens).unwrap_or(0))
            .bind(c.run.and_then(|r| r.cost_usd).unwrap_or(0.0))
            .bind(&c.before.id)
            .bind(c.before.last_seq)
            .bind(&c.before.id)
            .bind(&c.before.id)
            .bind(seq)
            .bind(c.transition.from.state.as_str())
            .bind(c.transition.to.state.as_str())
            .bind(c.event.name())
            .bind(&event_json)
            .bind(&note_json)
            .bind(i64::from(c.transition.to.round))
            .bind(i64::from(c.transition.to.attempt))
            .bind(run_id)
            .bind(&c.after.branch)
            .bind(c.at);
        if let Some(run) = c.run {
            query = bind_run_end(query, run)?;
        }
        if let Some((id, result)) = c.command {
            query = query
                .bind(CommandStatus::Applied.as_str())
                .bind(result)
                .bind(c.at)
                .bind(id);
        }
        if let Some(new) = &c.start {
            query = bind_new_run(query, new)?;
        }
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
        // What was just written, as `transitions` reads it back.
        Ok(TransitionRecord {
            global_seq,
            sprint_id: c.before.id.clone(),
            seq,
            from: c.transition.from.state,
            to: c.transition.to.state,
            event: c.event.name(),
            round: c.transition.to.round,
            attempt: c.transition.to.attempt,
            at: c.at,
            run_id: run_id.map(str::to_string),
            branch: Some(c.after.branch.clone()),
            detail: c.event.clone(),
            note: c.transition.note.clone(),
        })
    }

    // --- the transitions log -------------------------------------------------------------

    pub async fn transitions(&self, sprint_id: &str) -> Result<Vec<TransitionRecord>> {
        let raws: Vec<TransitionRaw> =
            sqlx::query_as("SELECT * FROM transitions WHERE sprint_id = ? ORDER BY seq")
                .bind(sprint_id)
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(TransitionRecord::try_from).collect()
    }

    /// One read transaction: SQLite reads it from one snapshot.
    pub async fn sprint_since(
        &self,
        id: &str,
        seq: i64,
    ) -> Result<Option<(Sprint, Vec<TransitionRecord>)>> {
        let mut tx = self.pool.begin().await?;
        let sprint = match fetch_sprint(&mut tx, id).await {
            Ok(sprint) => sprint,
            Err(StoreError::NoSprint(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let raws: Vec<TransitionRaw> = sqlx::query_as(
            "SELECT * FROM transitions WHERE sprint_id = ? AND seq > ? ORDER BY seq",
        )
        .bind(id)
        .bind(seq)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let records = raws
            .into_iter()
            .map(TransitionRecord::try_from)
            .collect::<Result<_>>()?;
        Ok(Some((sprint, records)))
    }

    pub async fn transitions_after(
        &self,
        global_seq: i64,
        limit: i64,
    ) -> Result<Vec<TransitionRecord>> {
        let raws: Vec<TransitionRaw> = sqlx::query_as(
            "SELECT * FROM transitions WHERE global_seq > ? ORDER BY global_seq LIMIT ?",
        )
        .bind(global_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(TransitionRecord::try_from).collect()
    }

    /// The documents each sprint row keeps (kept current by the triggers of migration
    /// 0007), joined in order by SQLite: no 10,000 rows built and handed one by one across
    /// sqlx's worker thread.
    pub async fn status_json(&self) -> Result<String> {
        // The subquery hands the rows over in its order (a sort inside the aggregate,
        // `string_agg(.. ORDER BY number)`, costs three times the whole query).
        let json: Option<String> = sqlx::query_scalar(
            "SELECT '[' || COALESCE(group_concat(status_doc, ','), '') || ']'
             FROM (SELECT status_doc FROM sprints ORDER BY number)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(json.unwrap_or_else(|| "[]".into()))
    }

    pub async fn spend_by_sprint(&self) -> Result<std::collections::HashMap<String, Spend>> {
        let rows: Vec<KeyedSpend> =
            sqlx::query_as("SELECT id AS key, input_tokens, output_tokens, cost_usd FROM sprints")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(|r| (r.key, r.spend)).collect())
    }
}

async fn fetch_sprint(tx: &mut Transaction<'static, Sqlite>, id: &str) -> Result<Sprint> {
    let raw: Option<SprintRaw> = sqlx::query_as(concat!(
        "SELECT ",
        sprint_columns!(),
        " FROM sprints WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    raw.map(Sprint::try_from)
        .transpose()?
        .ok_or_else(|| StoreError::NoSprint(id.to_string()))
}
