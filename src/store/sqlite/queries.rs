//! The store's interface on SQLite: reads, and the writes that are one statement.
//! A transition's commit and a run's start and end are in `write.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::{Db, states};
use crate::pipeline::State;
use crate::store::command::CommandRaw;
use crate::store::database::{Database, IsGone};
use crate::store::rows::{KeyedSpend, RunRaw, SprintRaw, TransitionRaw};
use crate::store::{
    BaseCheck, CheckRecord, Command, CommandStatus, Commit, ForumPost, HostScope, Lease,
    NewCommand, NewRun, Result, Run, RunEnd, RunLive, Spend, Sprint, StoreError, TransitionRecord,
    Usage, sprint_branch,
};

/// The heads of the project queues whose pipeline lock is free. The lock holders are
/// named (an index finds them), and the heads are found project by project, each the
/// next one in the index: an idle `serve` sweeps this often.
pub(in crate::store) const NEXT_IN_QUEUES: &str = "SELECT * FROM sprints
     WHERE number IN (
         WITH RECURSIVE projects(name) AS (
             SELECT MIN(project) FROM sprints
             UNION ALL
             SELECT (SELECT MIN(p.project) FROM sprints p WHERE p.project > projects.name)
             FROM projects WHERE projects.name IS NOT NULL
         )
         SELECT (SELECT MIN(q.number) FROM sprints q
                 WHERE q.project = projects.name AND q.state = 'queued')
         FROM projects WHERE projects.name IS NOT NULL
     )
     AND NOT EXISTS (SELECT 1 FROM sprints b WHERE b.project = sprints.project
                     AND b.state IN (SELECT value FROM json_each(?)))
     ORDER BY number";

/// Every sprint and its rolled-up spend as one JSON text, oldest first: `[[sprint], [spend]]`
/// per row, the sprint's fields in `SprintRaw`'s order. Thousands of rows handed over one
/// by one through sqlx's worker thread cost far more than SQLite writing them as one text.
const SPRINTS_WITH_SPEND: &str = "SELECT COALESCE(json_group_array(json_array(
         json_array(id, number, project, goal, state, round, attempt, resume_stage, resume_round,
             contract_id, branch, next_run_at, focus, budget_usd, last_seq, created_at, updated_at,
             owner, epoch, started_by, focus_by, base_branch, base_commit),
         json_array(input_tokens, output_tokens, cost_usd))), '[]')
     FROM (SELECT * FROM sprints ORDER BY number)";

fn sprints_of(raws: Vec<SprintRaw>) -> Result<Vec<Sprint>> {
    raws.into_iter().map(Sprint::try_from).collect()
}

#[async_trait]
impl Database for Db {
    fn check_file(&self) -> Result<()> {
        self.file_unchanged()
    }

    fn single_connection(&self) -> Arc<dyn Database> {
        Arc::new(self.own_connection())
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    /// The shared pool handed back for an in-memory database stays open.
    async fn close_single_connection(&self) {
        if self.own {
            self.pool.close().await;
        }
    }

    fn shared_by(&self, _scope: HostScope) -> Option<Arc<dyn Database>> {
        None
    }

    async fn listen(&self, wake: Arc<tokio::sync::Notify>) -> Result<bool> {
        self.bind_wake_socket(wake).await
    }

    // --- sprints ------------------------------------------------------------------------

    async fn create_sprint(
        &self,
        project: &str,
        goal: &str,
        focus: Option<&str>,
        by: &str,
        branch_template: &str,
        at: i64,
    ) -> Result<Sprint> {
        let queued = self
            .writes
            .retry("queue a sprint", || async move {
                // The write lock is taken first, so the next number is this transaction's. The id
                // is handed out only once COMMIT returned: an insert whose row was read before a
                // commit that failed (a full disk) would name a sprint never stored.
                let mut tx = self.begin_write().await?;
                let number: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(number), 0) + 1 FROM sprints")
                    .fetch_one(&mut *tx)
                    .await?;
                let id = crate::domain::sprint_id(number);
                let branch = sprint_branch(branch_template, &id, project);
                let mut rows: Vec<SprintRaw> = sqlx::query_as(
                    "INSERT INTO sprints (id, number, project, goal, state, round, attempt, contract_id, branch, focus, created_at, updated_at, started_by, focus_by)
                     VALUES (?1, ?2, ?3, ?4, 'queued', 0, 0, ?1, ?5, ?6, ?7, ?7, ?8, ?9)
                     RETURNING *",
                )
                .bind(&id)
                .bind(number)
                .bind(project)
                .bind(goal)
                .bind(&branch)
                .bind(focus)
                .bind(at)
                .bind(by)
                .bind(focus.map(|_| by))
                .fetch_all(&mut *tx)
                .await?;
                let raw = rows.pop().ok_or(sqlx::Error::RowNotFound)?;
                tx.commit().await?;
                Sprint::try_from(raw)
            })
            .await?;
        self.nudge();
        Ok(queued)
    }

    async fn sprint(&self, id: &str) -> Result<Option<Sprint>> {
        let raw: Option<SprintRaw> = sqlx::query_as("SELECT * FROM sprints WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        raw.map(Sprint::try_from).transpose()
    }

    async fn record_base(
        &self,
        sprint_id: &str,
        base_branch: &str,
        base_commit: &str,
    ) -> Result<()> {
        self.writes
            .retry("record a sprint's base", || {
                self.write_base(sprint_id, base_branch, base_commit)
            })
            .await
    }

    async fn sprints(&self) -> Result<Vec<Sprint>> {
        sprints_of(
            sqlx::query_as("SELECT * FROM sprints ORDER BY number")
                .fetch_all(&self.pool)
                .await?,
        )
    }

    async fn sprints_with_spend(&self) -> Result<Vec<(Sprint, Spend)>> {
        let text: String = sqlx::query_scalar(SPRINTS_WITH_SPEND)
            .fetch_one(&self.pool)
            .await?;
        let rows: Vec<(SprintRaw, Spend)> = serde_json::from_str(&text).map_err(|e| {
            StoreError::corrupt("sprints", "", &format!("a row that does not read: {e}"))
        })?;
        rows.into_iter()
            .map(|(raw, spend)| Ok((Sprint::try_from(raw)?, spend)))
            .collect()
    }

    async fn sprints_in(&self, which: fn(State) -> bool) -> Result<Vec<Sprint>> {
        sprints_of(
            sqlx::query_as(
                "SELECT * FROM sprints
                 WHERE state IN (SELECT value FROM json_each(?))
                 ORDER BY number",
            )
            .bind(states(which))
            .fetch_all(&self.pool)
            .await?,
        )
    }

    async fn ahead_of(&self, sprint: &Sprint) -> Result<Option<Sprint>> {
        // Not ended, by name: the index finds them without the project's whole history.
        let raw: Option<SprintRaw> = sqlx::query_as(
            "SELECT * FROM sprints
             WHERE project = ? AND id != ?
               AND state IN (SELECT value FROM json_each(?))
               AND (state != 'queued' OR number < ?)
             ORDER BY state = 'queued', number
             LIMIT 1",
        )
        .bind(&sprint.project)
        .bind(&sprint.id)
        .bind(states(|s| !s.is_terminal()))
        .bind(sprint.number)
        .fetch_optional(&self.pool)
        .await?;
        raw.map(Sprint::try_from).transpose()
    }

    async fn next_in_queues(&self) -> Result<Vec<Sprint>> {
        self.writes
            .retry("claim queued sprints", || async move {
                sprints_of(
                    sqlx::query_as(NEXT_IN_QUEUES)
                        .bind(states(State::holds_lock))
                        .fetch_all(&self.pool)
                        .await?,
                )
            })
            .await
    }

    async fn commit(&self, c: Commit<'_>) -> Result<TransitionRecord> {
        self.writes
            .retry("commit a transition", || self.commit_batch(&c))
            .await
    }

    // --- the transitions log ------------------------------------------------------------

    async fn transitions(&self, sprint_id: &str) -> Result<Vec<TransitionRecord>> {
        let raws: Vec<TransitionRaw> =
            sqlx::query_as("SELECT * FROM transitions WHERE sprint_id = ? ORDER BY seq")
                .bind(sprint_id)
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(TransitionRecord::try_from).collect()
    }

    /// One transaction, so one snapshot: the sprint and its entries agree.
    async fn sprint_since(
        &self,
        id: &str,
        seq: i64,
    ) -> Result<Option<(Sprint, Vec<TransitionRecord>)>> {
        let mut tx = self.pool.begin().await?;
        let raw: Option<SprintRaw> = sqlx::query_as("SELECT * FROM sprints WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(raw) = raw else {
            return Ok(None);
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
        Ok(Some((Sprint::try_from(raw)?, records)))
    }

    async fn transitions_after(
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

    // --- runs -----------------------------------------------------------------------------

    /// SQLite's sprints are never taken over: `epoch` guards nothing here.
    async fn start_run(&self, new: NewRun<'_>, _epoch: i64) -> Result<String> {
        self.writes
            .retry("record a run's start", || self.insert_run(&new))
            .await
    }

    async fn end_run(&self, run: &RunEnd) -> Result<()> {
        self.writes
            .retry("record a run's end", || self.record_run_end(run))
            .await
    }

    async fn set_run_live(&self, run_id: &str, live: &RunLive) -> Result<()> {
        self.writes.once(self.record_run_live(run_id, live).await)
    }

    async fn runs(&self, sprint_id: &str) -> Result<Vec<Run>> {
        let raws: Vec<RunRaw> =
            sqlx::query_as("SELECT * FROM runs WHERE sprint_id = ? ORDER BY number")
                .bind(sprint_id)
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Run::try_from).collect()
    }

    async fn runs_in_flight(&self) -> Result<Vec<Run>> {
        let raws: Vec<RunRaw> =
            sqlx::query_as("SELECT * FROM runs WHERE outcome IS NULL ORDER BY sprint_id, number")
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Run::try_from).collect()
    }

    async fn paused_agents(&self, now_ms: i64) -> Result<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT agent, MAX(paused_until) FROM runs
             WHERE paused_until > ? AND agent IS NOT NULL GROUP BY agent",
        )
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn checks(&self, sprint_id: &str) -> Result<Vec<CheckRecord>> {
        self.read_checks(sprint_id).await
    }

    async fn base_check(&self, project: &str, commit: &str) -> Result<Option<CheckRecord>> {
        self.read_base_check(project, commit).await
    }

    async fn forge_base_checks(
        &self,
        repository: &str,
        commit: &str,
    ) -> Result<Option<Vec<BaseCheck>>> {
        let text: Option<String> = sqlx::query_scalar(
            "SELECT checks FROM forge_base_checks WHERE repository = ? AND commit_id = ?",
        )
        .bind(repository)
        .bind(commit)
        .fetch_optional(&self.pool)
        .await?;
        text.map(|t| BaseCheck::decode(repository, commit, &t))
            .transpose()
    }

    async fn save_forge_base_checks(
        &self,
        repository: &str,
        commit: &str,
        checks: &[BaseCheck],
        at: i64,
    ) -> Result<()> {
        let text = BaseCheck::encode(checks)?;
        self.writes
            .retry("save the forge's checks at a base", || async {
                sqlx::query(
                    "INSERT INTO forge_base_checks (repository, commit_id, checks, read_at) VALUES (?, ?, ?, ?)
                     ON CONFLICT (repository, commit_id) DO UPDATE SET checks = excluded.checks, read_at = excluded.read_at",
                )
                .bind(repository)
                .bind(commit)
                .bind(&text)
                .bind(at)
                .execute(&self.pool)
                .await?;
                Ok(())
            })
            .await
    }

    async fn usage(&self, sprint_id: &str) -> Result<Usage> {
        let rows: Vec<KeyedSpend> = sqlx::query_as(
            "SELECT actor AS key, COALESCE(SUM(input_tokens), 0) AS input_tokens,
                    COALESCE(SUM(output_tokens), 0) AS output_tokens,
                    COALESCE(SUM(cost_usd), 0.0) AS cost_usd
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

    async fn spend_by_sprint(&self) -> Result<HashMap<String, Spend>> {
        let rows: Vec<KeyedSpend> =
            sqlx::query_as("SELECT id AS key, input_tokens, output_tokens, cost_usd FROM sprints")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(|r| (r.key, r.spend)).collect())
    }

    // --- commands -------------------------------------------------------------------------

    async fn record_command(
        &self,
        c: &NewCommand<'_>,
        mac: &str,
        message: Option<&str>,
    ) -> Result<i64> {
        let id = self
            .writes
            .retry("record a command", || async move {
                // Every row read: the statement (and its commit) is over when the id is handed out.
                let ids: Vec<i64> = sqlx::query_scalar(
                    "INSERT INTO commands (sprint_id, kind, text, by, created_at, seq, mac, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                     RETURNING id",
                )
                .bind(c.sprint_id)
                .bind(c.kind.as_str())
                .bind(c.text)
                .bind(c.by)
                .bind(c.created_at)
                .bind(c.seq)
                .bind(mac)
                .bind(message)
                .fetch_all(&self.pool)
                .await?;
                ids.first()
                    .copied()
                    .ok_or_else(|| sqlx::Error::RowNotFound.into())
            })
            .await?;
        self.nudge();
        Ok(id)
    }

    async fn command_key(&self, candidate: &[u8]) -> Result<Vec<u8>> {
        self.writes
            .retry("record the command key", || async move {
                sqlx::query(
                    "INSERT INTO command_key (id, key) VALUES (1, ?) ON CONFLICT (id) DO NOTHING",
                )
                .bind(candidate)
                .execute(&self.pool)
                .await?;
                Ok(
                    sqlx::query_scalar("SELECT key FROM command_key WHERE id = 1")
                        .fetch_one(&self.pool)
                        .await?,
                )
            })
            .await
    }

    async fn pending_commands(&self) -> Result<Vec<Command>> {
        let raws: Vec<CommandRaw> =
            sqlx::query_as("SELECT * FROM commands WHERE status = 'pending' ORDER BY id")
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Command::try_from).collect()
    }

    async fn commands_of(&self, sprint_id: &str) -> Result<Vec<Command>> {
        let raws: Vec<CommandRaw> =
            sqlx::query_as("SELECT * FROM commands WHERE sprint_id = ? ORDER BY id")
                .bind(sprint_id)
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Command::try_from).collect()
    }

    async fn command(&self, id: i64) -> Result<Option<Command>> {
        let raw: Option<CommandRaw> = sqlx::query_as("SELECT * FROM commands WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        raw.map(Command::try_from).transpose()
    }

    async fn notes_to_mark(&self) -> Result<Vec<Command>> {
        let raws: Vec<CommandRaw> = sqlx::query_as(
            "SELECT * FROM commands
             WHERE kind = 'note' AND message IS NOT NULL AND marked_at IS NULL
             ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(Command::try_from).collect()
    }

    async fn mark_note(&self, id: i64, at: i64) -> Result<()> {
        self.writes
            .retry("mark a note as given", || async move {
                sqlx::query("UPDATE commands SET marked_at = ? WHERE id = ?")
                    .bind(at)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            })
            .await
    }

    async fn resolve_command(
        &self,
        id: i64,
        status: CommandStatus,
        result: &str,
        at: i64,
    ) -> Result<()> {
        self.writes
            .retry("answer a command", || async move {
                sqlx::query(
                    "UPDATE commands SET status = ?, result = ?, applied_at = ?
                     WHERE id = ? AND status = 'pending'",
                )
                .bind(status.as_str())
                .bind(result)
                .bind(at)
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(())
            })
            .await
    }

    // --- the orchestrator's lease -----------------------------------------------------------

    async fn lease(&self) -> Result<Option<Lease>> {
        Ok(sqlx::query_as("SELECT * FROM instance_lease WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn acquire_lease(
        &self,
        me: &Lease,
        is_gone: IsGone<'_>,
    ) -> Result<std::result::Result<(), Lease>> {
        self.writes
            .retry("take the lease", || async move {
                // The holder is judged, then replaced only if it is still the one judged: of two
                // starting at once, the second finds the first's lease and judges it in turn.
                loop {
                    let current = self.lease().await?;
                    if let Some(holder) = &current
                        && holder.token != me.token
                        && !is_gone(holder)
                    {
                        return Ok(Err(holder.clone()));
                    }
                    let judged = current.map(|holder| holder.token);
                    let taken: Vec<i64> = sqlx::query_scalar(
                        "INSERT INTO instance_lease (id, token, pid, host, started_at, heartbeat_at) VALUES (1, ?, ?, ?, ?, ?)
                         ON CONFLICT (id) DO UPDATE SET token = excluded.token, pid = excluded.pid, host = excluded.host,
                             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at
                         WHERE instance_lease.token IS ?
                         RETURNING id",
                    )
                    .bind(&me.token)
                    .bind(me.pid)
                    .bind(&me.host)
                    .bind(me.started_at)
                    .bind(me.heartbeat_at)
                    .bind(judged)
                    .fetch_all(&self.pool)
                    .await?;
                    if taken.len() == 1 {
                        return Ok(Ok(()));
                    }
                }
            })
            .await
    }

    async fn heartbeat(&self, token: &str, at: i64) -> Result<bool> {
        self.writes
            .retry("renew the lease", || async move {
                let renewed = sqlx::query(
                    "UPDATE instance_lease SET heartbeat_at = ? WHERE id = 1 AND token = ?",
                )
                .bind(at)
                .bind(token)
                .execute(&self.pool)
                .await?;
                Ok(renewed.rows_affected() == 1)
            })
            .await
    }

    async fn release_lease(&self, token: &str) -> Result<()> {
        sqlx::query("DELETE FROM instance_lease WHERE id = 1 AND token = ?")
            .bind(token)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    // --- Discord forum posts and delivery cursors ---------------------------------------------

    async fn forum_post(&self, sprint_id: &str) -> Result<Option<ForumPost>> {
        Ok(
            sqlx::query_as("SELECT * FROM discord_threads WHERE sprint_id = ?")
                .bind(sprint_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn forum_post_of_thread(&self, thread_id: i64) -> Result<Option<ForumPost>> {
        Ok(
            sqlx::query_as("SELECT * FROM discord_threads WHERE thread_id = ?")
                .bind(thread_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn save_forum_post(&self, post: &ForumPost) -> Result<()> {
        self.writes
            .retry("save a forum post", || async move {
                sqlx::query(
                    "INSERT INTO discord_threads (sprint_id, thread_id, board_message_id, done_message_id) VALUES (?, ?, ?, ?)
                     ON CONFLICT (sprint_id) DO UPDATE SET thread_id = excluded.thread_id,
                         board_message_id = excluded.board_message_id, done_message_id = excluded.done_message_id",
                )
                .bind(&post.sprint_id)
                .bind(post.thread_id)
                .bind(post.board_message_id)
                .bind(post.done_message_id)
                .execute(&self.pool)
                .await?;
                Ok(())
            })
            .await
    }

    async fn record_new_forum_post(
        &self,
        post: &ForumPost,
        replacing: Option<i64>,
    ) -> Result<ForumPost> {
        self.writes
            .retry("record a forum post", || async move {
                if let Some(old) = replacing {
                    sqlx::query(
                        "UPDATE discord_threads SET thread_id = ?, board_message_id = ?, done_message_id = ?
                         WHERE sprint_id = ? AND thread_id = ?",
                    )
                    .bind(post.thread_id)
                    .bind(post.board_message_id)
                    .bind(post.done_message_id)
                    .bind(&post.sprint_id)
                    .bind(old)
                    .execute(&self.pool)
                    .await?;
                }
                sqlx::query(
                    "INSERT INTO discord_threads (sprint_id, thread_id, board_message_id, done_message_id) VALUES (?, ?, ?, ?)
                     ON CONFLICT (sprint_id) DO NOTHING",
                )
                .bind(&post.sprint_id)
                .bind(post.thread_id)
                .bind(post.board_message_id)
                .bind(post.done_message_id)
                .execute(&self.pool)
                .await?;
                let recorded = self.forum_post(&post.sprint_id).await?;
                Ok(recorded.unwrap_or_else(|| post.clone()))
            })
            .await
    }

    async fn cursor(&self, consumer: &str) -> Result<i64> {
        let seq: Option<i64> =
            sqlx::query_scalar("SELECT global_seq FROM delivery_cursors WHERE consumer = ?")
                .bind(consumer)
                .fetch_optional(&self.pool)
                .await?;
        Ok(seq.unwrap_or(0))
    }

    async fn set_cursor(&self, consumer: &str, global_seq: i64) -> Result<()> {
        self.writes
            .retry("move a delivery cursor", || {
                self.write_cursor(consumer, global_seq)
            })
            .await
    }
}
