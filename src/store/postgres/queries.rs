//! The store's interface on PostgreSQL. A `Db` with a host scope (several hosts on one
//! database) answers for its host where that differs: which sprints, runs and
//! commands are its own, and its lease is the host's (`hosts.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::{Db, states};
use crate::pipeline::State;
use crate::store::command::CommandRaw;
use crate::store::database::{Database, IsGone};
use crate::store::rows::{KeyedSpend, RunRaw, SprintRaw, TransitionRaw};
use crate::store::status::SprintSpendRaw;
use crate::store::{
    BaseCheck, CheckRecord, Command, CommandStatus, Commit, ForumPost, HostRecord, HostScope,
    Lease, NewCommand, NewRun, Result, Run, RunEnd, RunLive, Spend, Sprint, TransitionRecord,
    Usage, sprint_branch,
};

/// The heads of the project queues whose pipeline lock is free; see SQLite's, which this
/// mirrors (the heads found project by project, the lock holders by name).
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
                     AND b.state = ANY($1))
     ORDER BY number";

fn sprints_of(raws: Vec<SprintRaw>) -> Result<Vec<Sprint>> {
    raws.into_iter().map(Sprint::try_from).collect()
}

#[async_trait]
impl Database for Db {
    /// Nothing to check: the database is not a file on this machine.
    fn check_file(&self) -> Result<()> {
        Ok(())
    }

    /// The same pool: PostgreSQL keeps its cache in the server, shared by every
    /// connection, so the loop gains nothing from a connection of its own.
    fn single_connection(&self) -> Arc<dyn Database> {
        Arc::new(self.clone())
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    /// Nothing to close: `single_connection` handed back the shared pool.
    async fn close_single_connection(&self) {}

    fn shared_by(&self, scope: HostScope) -> Option<Arc<dyn Database>> {
        Some(Arc::new(Db {
            scope: Some(scope),
            ..self.clone()
        }))
    }

    /// The triggers of migration 0003 notify.
    async fn listen(&self, wake: Arc<tokio::sync::Notify>) -> Result<bool> {
        self.start_listening(wake).await.map(|()| true)
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
        self.writes
            .retry("queue a sprint", || async move {
                // The write lock (`begin_write`) makes the next number this transaction's. The id
                // is handed out only once COMMIT returned.
                let mut tx = self.begin_write().await?;
                let number: i64 = sqlx::query_scalar(
                    "SELECT CAST(COALESCE(MAX(number), 0) + 1 AS BIGINT) FROM sprints",
                )
                .fetch_one(&mut *tx)
                .await?;
                let id = crate::domain::sprint_id(number);
                let branch = sprint_branch(branch_template, &id, project);
                let raw: SprintRaw = sqlx::query_as(
                    "INSERT INTO sprints (id, number, project, goal, state, round, attempt, contract_id, branch, focus, created_at, updated_at, started_by, focus_by)
                     VALUES ($1, $2, $3, $4, 'queued', 0, 0, $1, $5, $6, $7, $7, $8, $9)
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
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                Sprint::try_from(raw)
            })
            .await
    }

    async fn sprint(&self, id: &str) -> Result<Option<Sprint>> {
        let raw: Option<SprintRaw> = sqlx::query_as("SELECT * FROM sprints WHERE id = $1")
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
        let raws: Vec<SprintSpendRaw> = sqlx::query_as("SELECT * FROM sprints ORDER BY number")
            .fetch_all(&self.pool)
            .await?;
        raws.into_iter().map(SprintSpendRaw::parse).collect()
    }

    /// When shared: those this host owns.
    async fn sprints_in(&self, which: fn(State) -> bool) -> Result<Vec<Sprint>> {
        if let Some(scope) = &self.scope {
            return self.sprints_owned(scope, which).await;
        }
        sprints_of(
            sqlx::query_as(
                "SELECT * FROM sprints
                 WHERE state = ANY($1)
                 ORDER BY number",
            )
            .bind(states(which))
            .fetch_all(&self.pool)
            .await?,
        )
    }

    async fn ahead_of(&self, sprint: &Sprint) -> Result<Option<Sprint>> {
        let raw: Option<SprintRaw> = sqlx::query_as(
            "SELECT * FROM sprints
             WHERE project = $1 AND id != $2
               AND state = ANY($4)
               AND (state != 'queued' OR number < $3)
             ORDER BY state = 'queued', number
             LIMIT 1",
        )
        .bind(&sprint.project)
        .bind(&sprint.id)
        .bind(sprint.number)
        .bind(states(|s| !s.is_terminal()))
        .fetch_optional(&self.pool)
        .await?;
        raw.map(Sprint::try_from).transpose()
    }

    /// When shared: the host first claims the head of each queue it serves, and the
    /// sprints are those it owns and has not started yet.
    async fn next_in_queues(&self) -> Result<Vec<Sprint>> {
        self.writes
            .retry("claim queued sprints", || async move {
                if let Some(scope) = &self.scope {
                    self.claim(scope).await?;
                    return self.owned_queued(scope).await;
                }
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
        let c = &c;
        self.writes
            .retry("commit a transition", || async move {
                let mut tx = self.pool.begin().await?;
                let global_seq = self.write_commit(&mut tx, c).await?;
                tx.commit().await?;
                Ok(c.record(global_seq))
            })
            .await
    }

    // --- the transitions log ------------------------------------------------------------

    async fn transitions(&self, sprint_id: &str) -> Result<Vec<TransitionRecord>> {
        let raws: Vec<TransitionRaw> =
            sqlx::query_as("SELECT * FROM transitions WHERE sprint_id = $1 ORDER BY seq")
                .bind(sprint_id)
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(TransitionRecord::try_from).collect()
    }

    /// One read-only transaction at one snapshot: the sprint and its entries agree.
    async fn sprint_since(
        &self,
        id: &str,
        seq: i64,
    ) -> Result<Option<(Sprint, Vec<TransitionRecord>)>> {
        let mut tx = self.begin_snapshot().await?;
        let raw: Option<SprintRaw> = sqlx::query_as("SELECT * FROM sprints WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(raw) = raw else {
            return Ok(None);
        };
        let raws: Vec<TransitionRaw> = sqlx::query_as(
            "SELECT * FROM transitions WHERE sprint_id = $1 AND seq > $2 ORDER BY seq",
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
            "SELECT * FROM transitions WHERE global_seq > $1 ORDER BY global_seq LIMIT $2",
        )
        .bind(global_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(TransitionRecord::try_from).collect()
    }

    // --- runs -----------------------------------------------------------------------------

    async fn start_run(&self, new: NewRun<'_>, epoch: i64) -> Result<String> {
        self.writes
            .retry("record a run's start", || self.insert_run(&new, epoch))
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
            sqlx::query_as("SELECT * FROM runs WHERE sprint_id = $1 ORDER BY number")
                .bind(sprint_id)
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Run::try_from).collect()
    }

    /// When shared: of the sprints this host owns.
    async fn runs_in_flight(&self) -> Result<Vec<Run>> {
        if let Some(scope) = &self.scope {
            return self.owned_runs_in_flight(scope).await;
        }
        self.every_run_in_flight().await
    }

    async fn every_run_in_flight(&self) -> Result<Vec<Run>> {
        let raws: Vec<RunRaw> =
            sqlx::query_as("SELECT * FROM runs WHERE outcome IS NULL ORDER BY sprint_id, number")
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Run::try_from).collect()
    }

    async fn paused_agents(&self, now_ms: i64) -> Result<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT agent, MAX(paused_until) FROM runs
             WHERE paused_until > $1 AND agent IS NOT NULL GROUP BY agent",
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
            "SELECT checks FROM forge_base_checks WHERE repository = $1 AND commit_id = $2",
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
                    "INSERT INTO forge_base_checks (repository, commit_id, checks, read_at) VALUES ($1, $2, $3, $4)
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
            "SELECT actor AS key, CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS input_tokens,
                    CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS output_tokens,
                    COALESCE(SUM(cost_usd), 0.0) AS cost_usd
             FROM runs WHERE sprint_id = $1 GROUP BY actor",
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

    /// The triggers of migration 0003 wake the other processes.
    async fn record_command(
        &self,
        c: &NewCommand<'_>,
        mac: &str,
        message: Option<&str>,
    ) -> Result<i64> {
        self.writes
            .retry("record a command", || async move {
                Ok(sqlx::query_scalar(
                    "INSERT INTO commands (sprint_id, kind, text, by, created_at, seq, mac, message) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
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
                .fetch_one(&self.pool)
                .await?)
            })
            .await
    }

    async fn command_key(&self, candidate: &[u8]) -> Result<Vec<u8>> {
        self.writes
            .retry("record the command key", || async move {
                sqlx::query(
                    "INSERT INTO command_key (id, key) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
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

    /// When shared: those for the sprints this host owns, and for the queued sprints of
    /// its projects no host has claimed yet.
    async fn pending_commands(&self) -> Result<Vec<Command>> {
        if let Some(scope) = &self.scope {
            return self.pending_commands_for(scope).await;
        }
        let raws: Vec<CommandRaw> =
            sqlx::query_as("SELECT * FROM commands WHERE status = 'pending' ORDER BY id")
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Command::try_from).collect()
    }

    async fn commands_of(&self, sprint_id: &str) -> Result<Vec<Command>> {
        let raws: Vec<CommandRaw> =
            sqlx::query_as("SELECT * FROM commands WHERE sprint_id = $1 ORDER BY id")
                .bind(sprint_id)
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Command::try_from).collect()
    }

    async fn command(&self, id: i64) -> Result<Option<Command>> {
        let raw: Option<CommandRaw> = sqlx::query_as("SELECT * FROM commands WHERE id = $1")
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
                sqlx::query("UPDATE commands SET marked_at = $1 WHERE id = $2")
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
                    "UPDATE commands SET status = $1, result = $2, applied_at = $3
                     WHERE id = $4 AND status = 'pending'",
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

    // --- the orchestrator's lease; several hosts ------------------------------------------

    async fn lease(&self) -> Result<Option<Lease>> {
        Ok(sqlx::query_as("SELECT * FROM instance_lease WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?)
    }

    /// When shared: the host's name is the lease (`hosts.rs`).
    async fn acquire_lease(
        &self,
        me: &Lease,
        is_gone: IsGone<'_>,
    ) -> Result<std::result::Result<(), Lease>> {
        self.writes
            .retry("take the lease", || async move {
                if let Some(scope) = &self.scope {
                    return self.acquire_host(scope, me, is_gone).await;
                }
                // The holder is judged, then replaced only if it is still the one judged.
                loop {
                    let current = self.lease().await?;
                    if let Some(holder) = &current
                        && holder.token != me.token
                        && !is_gone(holder)
                    {
                        return Ok(Err(holder.clone()));
                    }
                    let judged = current.map(|holder| holder.token);
                    let taken: Option<i32> = sqlx::query_scalar(
                        "INSERT INTO instance_lease (id, token, pid, host, started_at, heartbeat_at) VALUES (1, $1, $2, $3, $4, $5)
                         ON CONFLICT (id) DO UPDATE SET token = excluded.token, pid = excluded.pid, host = excluded.host,
                             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at
                         WHERE instance_lease.token IS NOT DISTINCT FROM $6
                         RETURNING 1",
                    )
                    .bind(&me.token)
                    .bind(me.pid)
                    .bind(&me.host)
                    .bind(me.started_at)
                    .bind(me.heartbeat_at)
                    .bind(judged)
                    .fetch_optional(&self.pool)
                    .await?;
                    if taken.is_some() {
                        return Ok(Ok(()));
                    }
                }
            })
            .await
    }

    /// When shared: the host's lease, tried once.
    async fn heartbeat(&self, token: &str, at: i64) -> Result<bool> {
        if let Some(scope) = &self.scope {
            return self.writes.once(self.renew_host(scope, token).await);
        }
        self.writes
            .retry("renew the lease", || async move {
                let renewed = sqlx::query(
                    "UPDATE instance_lease SET heartbeat_at = $1 WHERE id = 1 AND token = $2",
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
        if let Some(scope) = &self.scope {
            return self.release_host(scope, token).await;
        }
        sqlx::query("DELETE FROM instance_lease WHERE id = 1 AND token = $1")
            .bind(token)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn take_over(&self) -> Result<Vec<Sprint>> {
        let Some(scope) = &self.scope else {
            return Ok(Vec::new());
        };
        self.writes
            .retry("take over sprints", || self.take_over_expired(scope))
            .await
    }

    async fn live_hosts_for(&self, sprint: &Sprint) -> Result<Option<Vec<String>>> {
        Ok(Some(self.hosts_answering(sprint).await?))
    }

    async fn hosts(&self) -> Result<Option<Vec<HostRecord>>> {
        Ok(Some(self.hosts_on_record().await?))
    }

    /// Not shared: the only orchestrator plays every role.
    async fn lead(&self, role: &str, token: &str) -> Result<bool> {
        match &self.scope {
            Some(scope) => self.acquire_leader(scope, role, token).await,
            None => Ok(true),
        }
    }

    async fn release_lead(&self, role: &str, token: &str) -> Result<()> {
        match &self.scope {
            Some(_) => self.release_leader(role, token).await,
            None => Ok(()),
        }
    }

    // --- Discord forum posts and delivery cursors ---------------------------------------------

    async fn forum_post(&self, sprint_id: &str) -> Result<Option<ForumPost>> {
        Ok(
            sqlx::query_as("SELECT * FROM discord_threads WHERE sprint_id = $1")
                .bind(sprint_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn forum_post_of_thread(&self, thread_id: i64) -> Result<Option<ForumPost>> {
        Ok(
            sqlx::query_as("SELECT * FROM discord_threads WHERE thread_id = $1")
                .bind(thread_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn save_forum_post(&self, post: &ForumPost) -> Result<()> {
        self.writes
            .retry("save a forum post", || async move {
                sqlx::query(
                    "INSERT INTO discord_threads (sprint_id, thread_id, board_message_id, done_message_id) VALUES ($1, $2, $3, $4)
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
                        "UPDATE discord_threads SET thread_id = $2, board_message_id = $3, done_message_id = $4
                         WHERE sprint_id = $1 AND thread_id = $5",
                    )
                    .bind(&post.sprint_id)
                    .bind(post.thread_id)
                    .bind(post.board_message_id)
                    .bind(post.done_message_id)
                    .bind(old)
                    .execute(&self.pool)
                    .await?;
                }
                sqlx::query(
                    "INSERT INTO discord_threads (sprint_id, thread_id, board_message_id, done_message_id) VALUES ($1, $2, $3, $4)
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
            sqlx::query_scalar("SELECT global_seq FROM delivery_cursors WHERE consumer = $1")
                .bind(consumer)
                .fetch_optional(&self.pool)
                .await?;
        Ok(seq.unwrap_or(0))
    }

    async fn set_cursor(&self, consumer: &str, global_seq: i64) -> Result<()> {
        self.writes
            .retry("move a delivery cursor", || async move {
                sqlx::query(
                    "INSERT INTO delivery_cursors (consumer, global_seq) VALUES ($1, $2)
                     ON CONFLICT (consumer) DO UPDATE SET global_seq = excluded.global_seq",
                )
                .bind(consumer)
                .bind(global_seq)
                .execute(&self.pool)
                .await?;
                Ok(())
            })
            .await
    }
}
