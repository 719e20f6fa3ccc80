//! Several hosts on one database: each host's lease, claims of queued sprints
//! under the per-project pipeline lock, and the takeover of an expired host's sprints.
//! Lease times are the database server's clock (`DB_NOW`), so the hosts need not agree
//! on the time.

use super::{Db, states};
use crate::pipeline::State;
use crate::store::database::IsGone;
use crate::store::rows::SprintRaw;
use crate::store::{HostRecord, HostScope, Lease, Result, Sprint};

/// The database server's clock, in unix milliseconds.
const DB_NOW: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// Whether sprint `b` holds its project's pipeline lock: in a state that holds it (the
/// bound parameter `$3`, `State::holds_lock`), or queued and claimed by a host.
const HOLDS_LOCK: &str = "(b.state = ANY($3) OR (b.state = 'queued' AND b.owner IS NOT NULL))";

impl Db {
    /// Takes the host's name, unless a live process holds it (its lease not expired, and,
    /// on this same machine, `is_gone` does not say it died): then that holder is
    /// returned. From another machine only the lease's expiry, on the database's clock,
    /// tells.
    pub(super) async fn acquire_host(
        &self,
        scope: &HostScope,
        me: &Lease,
        is_gone: IsGone<'_>,
    ) -> Result<Result<(), Lease>> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "SELECT token, pid, machine AS host, started_at, heartbeat_at,
                    heartbeat_at + lease_ttl_ms < {DB_NOW} AS expired
             FROM hosts WHERE name = $1 FOR UPDATE"
        );
        let current: Option<(Lease, bool)> =
            sqlx::query_as::<_, LeaseRow>(sqlx::AssertSqlSafe(sql))
                .bind(&scope.name)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| (r.lease, r.expired));
        if let Some((holder, expired)) = current
            && holder.token != me.token
            && !expired
            && !(holder.host == me.host && is_gone(&holder))
        {
            tx.rollback().await?;
            return Ok(Err(holder));
        }
        let projects = serde_json::to_string(&scope.projects)
            .map_err(|e| crate::store::StoreError::Encode("projects", e))?;
        let sql = format!(
            "INSERT INTO hosts (name, token, pid, machine, projects, lease_ttl_ms, started_at, heartbeat_at)
             VALUES ($1, $2, $3, $4, $5, $6, {DB_NOW}, {DB_NOW})
             ON CONFLICT (name) DO UPDATE SET token = excluded.token, pid = excluded.pid,
                 machine = excluded.machine, projects = excluded.projects,
                 lease_ttl_ms = excluded.lease_ttl_ms, started_at = excluded.started_at,
                 heartbeat_at = excluded.heartbeat_at"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&scope.name)
            .bind(&me.token)
            .bind(me.pid)
            .bind(&me.host)
            .bind(projects)
            .bind(scope.lease_ttl_ms)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// Renews the host's lease; `false` when another process took the name.
    pub(super) async fn renew_host(&self, scope: &HostScope, token: &str) -> Result<bool> {
        let sql =
            format!("UPDATE hosts SET heartbeat_at = {DB_NOW} WHERE name = $1 AND token = $2");
        let done = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&scope.name)
            .bind(token)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives the name up: the host's sprints are free for the others at once.
    pub(super) async fn release_host(&self, scope: &HostScope, token: &str) -> Result<()> {
        sqlx::query("DELETE FROM hosts WHERE name = $1 AND token = $2")
            .bind(&scope.name)
            .bind(token)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The hosts whose lease runs that answer for `sprint`: its owner, or while it has
    /// none, those that serve its project.
    pub(super) async fn hosts_answering(&self, sprint: &Sprint) -> Result<Vec<String>> {
        let sql = format!(
            "SELECT name FROM hosts
             WHERE heartbeat_at + lease_ttl_ms >= {DB_NOW}
               AND (name = $1 OR ($1 IS NULL AND projects::jsonb ? $2))
             ORDER BY name"
        );
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(&sprint.host)
            .bind(&sprint.project)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Every host on record, by name, with the sprints it owns.
    pub(super) async fn hosts_on_record(&self) -> Result<Vec<HostRecord>> {
        let sql = format!(
            "SELECT h.name, h.pid, h.machine, h.projects, h.lease_ttl_ms, h.started_at, h.heartbeat_at,
                    {DB_NOW} - h.heartbeat_at AS heartbeat_age_ms,
                    h.heartbeat_at + h.lease_ttl_ms < {DB_NOW} AS expired,
                    COALESCE((SELECT string_agg(s.id, ',' ORDER BY s.number) FROM sprints s
                              WHERE s.owner = h.name AND s.state = ANY($1)), '') AS sprints
             FROM hosts h ORDER BY h.name"
        );
        let rows: Vec<HostRaw> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(super::states(|s| !s.is_terminal()))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(HostRaw::parse).collect()
    }

    /// Claims, for each project of `scope` whose pipeline lock is free, its oldest queued
    /// sprint: one transaction per project, holding that project's advisory lock, so two
    /// hosts never claim two sprints of one project. A sprint another host is claiming
    /// right now is skipped (`SKIP LOCKED`).
    ///
    /// A host with `max_sisters` claims no more than it has room for (`room`): the other
    /// hosts take the rest.
    pub(super) async fn claim(&self, scope: &HostScope) -> Result<()> {
        // Only the projects with a sprint to claim, oldest first: one read when there is
        // none.
        let waiting: Vec<String> = sqlx::query_scalar(
            "SELECT project FROM sprints
             WHERE state = 'queued' AND owner IS NULL AND project = ANY($1)
             GROUP BY project ORDER BY MIN(number)",
        )
        .bind(&scope.projects)
        .fetch_all(&self.pool)
        .await?;
        if waiting.is_empty() {
            return Ok(());
        }
        let room = self.room(scope).await?;
        for project in waiting.iter().take(room) {
            let mut tx = self.pool.begin().await?;
            sqlx::query(
                "SELECT pg_advisory_xact_lock(hashtextextended('hanarang project ' || $1, 0))",
            )
            .bind(project)
            .execute(&mut *tx)
            .await?;
            let sql = format!(
                "UPDATE sprints SET owner = $1, epoch = epoch + 1
                 WHERE id = (
                     SELECT q.id FROM sprints q
                     WHERE q.project = $2 AND q.state = 'queued' AND q.owner IS NULL
                       AND NOT EXISTS (SELECT 1 FROM sprints b WHERE b.project = $2 AND {HOLDS_LOCK})
                     ORDER BY q.number LIMIT 1
                     FOR UPDATE SKIP LOCKED)"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(&scope.name)
                .bind(project)
                .bind(states(State::holds_lock))
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        Ok(())
    }

    /// How many more sprints the host may take on: `max_sisters` less the open sprints it
    /// owns that run or will run a sister (queued or in a stage; one resting in `done` or
    /// `escalated` runs none). No cap: any number.
    async fn room(&self, scope: &HostScope) -> Result<usize> {
        let Some(cap) = scope.max_sisters else {
            return Ok(usize::MAX);
        };
        let load: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM sprints WHERE owner = $1 AND state = ANY($2)")
                .bind(&scope.name)
                .bind(states(State::runs_a_sister))
                .fetch_one(&self.pool)
                .await?;
        Ok(usize::try_from(i64::from(cap) - load).unwrap_or(0))
    }

    /// The queued sprints `scope`'s host owns (claimed, not yet moved into planning),
    /// oldest first.
    pub(super) async fn owned_queued(&self, scope: &HostScope) -> Result<Vec<Sprint>> {
        self.sprints_owned(scope, |s| s == State::Queued).await
    }

    /// The sprints `scope`'s host owns in a stage with a sister to run, oldest first.
    pub(super) async fn sprints_owned(
        &self,
        scope: &HostScope,
        which: fn(State) -> bool,
    ) -> Result<Vec<Sprint>> {
        let raws: Vec<SprintRaw> = sqlx::query_as(
            "SELECT * FROM sprints WHERE owner = $1 AND state = ANY($2) ORDER BY number",
        )
        .bind(&scope.name)
        .bind(states(which))
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(Sprint::try_from).collect()
    }

    /// The runs never ended of the sprints `scope`'s host owns.
    pub(super) async fn owned_runs_in_flight(
        &self,
        scope: &HostScope,
    ) -> Result<Vec<crate::store::Run>> {
        let raws: Vec<crate::store::rows::RunRaw> = sqlx::query_as(
            "SELECT r.* FROM runs r JOIN sprints s ON s.id = r.sprint_id
             WHERE r.outcome IS NULL AND s.owner = $1 ORDER BY r.sprint_id, r.number",
        )
        .bind(&scope.name)
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter().map(crate::store::Run::try_from).collect()
    }

    /// The commands `scope`'s host answers: for the sprints it owns, and for the queued
    /// sprints of its projects no host has claimed.
    pub(super) async fn pending_commands_for(
        &self,
        scope: &HostScope,
    ) -> Result<Vec<crate::store::Command>> {
        let raws: Vec<crate::store::command::CommandRaw> = sqlx::query_as(
            "SELECT c.* FROM commands c JOIN sprints s ON s.id = c.sprint_id
             WHERE c.status = 'pending'
               AND (s.owner = $1 OR (s.owner IS NULL AND s.project = ANY($2)))
             ORDER BY c.id",
        )
        .bind(&scope.name)
        .bind(&scope.projects)
        .fetch_all(&self.pool)
        .await?;
        raws.into_iter()
            .map(crate::store::Command::try_from)
            .collect()
    }

    /// Takes over the open sprints of `scope`'s projects whose owner's lease expired (or
    /// whose owner gave its name up), oldest first and as many as it has room for: each is
    /// this host's from now on, at a new epoch. Returns them.
    pub(super) async fn take_over_expired(&self, scope: &HostScope) -> Result<Vec<Sprint>> {
        let room = i64::try_from(self.room(scope).await?).unwrap_or(i64::MAX);
        if room == 0 {
            return Ok(Vec::new());
        }
        let sql = format!(
            "UPDATE sprints SET owner = $1, epoch = epoch + 1
             WHERE id IN (
                 SELECT id FROM sprints
                 WHERE owner IS NOT NULL AND owner != $1 AND project = ANY($2)
                   AND state = ANY($4)
                   AND owner NOT IN (SELECT name FROM hosts WHERE heartbeat_at + lease_ttl_ms >= {DB_NOW})
                 ORDER BY number LIMIT $3
                 FOR UPDATE SKIP LOCKED)
             RETURNING *"
        );
        let raws: Vec<SprintRaw> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(&scope.name)
            .bind(&scope.projects)
            .bind(room)
            .bind(super::states(|s| !s.is_terminal()))
            .fetch_all(&self.pool)
            .await?;
        let mut taken: Vec<Sprint> = raws
            .into_iter()
            .map(Sprint::try_from)
            .collect::<Result<_>>()?;
        taken.sort_by_key(|s| s.number);
        Ok(taken)
    }
}

impl Db {
    /// Takes `role` for `scope`'s host under `token`, if nobody holds it or its holder's
    /// lease ran out; renews it if this token holds it. Whether this token holds it now.
    pub(super) async fn acquire_leader(
        &self,
        scope: &HostScope,
        role: &str,
        token: &str,
    ) -> Result<bool> {
        let sql = format!(
            "INSERT INTO leaders (role, host, token, heartbeat_at, lease_ttl_ms) VALUES ($1, $2, $3, {DB_NOW}, $4)
             ON CONFLICT (role) DO UPDATE SET host = excluded.host, token = excluded.token,
                 heartbeat_at = excluded.heartbeat_at, lease_ttl_ms = excluded.lease_ttl_ms
             WHERE leaders.token = excluded.token OR leaders.heartbeat_at + leaders.lease_ttl_ms < {DB_NOW}
             RETURNING token"
        );
        let held: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(role)
            .bind(&scope.name)
            .bind(token)
            .bind(scope.lease_ttl_ms)
            .fetch_optional(&self.pool)
            .await?;
        Ok(held.is_some())
    }

    /// Gives `role` up, if this token holds it: a standby host takes it at once.
    pub(super) async fn release_leader(&self, role: &str, token: &str) -> Result<()> {
        sqlx::query("DELETE FROM leaders WHERE role = $1 AND token = $2")
            .bind(role)
            .bind(token)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[derive(sqlx::FromRow)]
struct LeaseRow {
    #[sqlx(flatten)]
    lease: Lease,
    expired: bool,
}

#[derive(sqlx::FromRow)]
struct HostRaw {
    name: String,
    pid: i64,
    machine: String,
    projects: String,
    lease_ttl_ms: i64,
    started_at: i64,
    heartbeat_at: i64,
    heartbeat_age_ms: i64,
    expired: bool,
    sprints: String,
}

impl HostRaw {
    fn parse(self) -> Result<HostRecord> {
        let projects: Vec<String> = serde_json::from_str(&self.projects)
            .map_err(|_| crate::store::StoreError::corrupt("hosts", &self.name, "projects"))?;
        Ok(HostRecord {
            sprints: self
                .sprints
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            name: self.name,
            pid: self.pid,
            machine: self.machine,
            projects,
            lease_ttl_ms: self.lease_ttl_ms,
            started_at: self.started_at,
            heartbeat_at: self.heartbeat_at,
            heartbeat_age_ms: self.heartbeat_age_ms,
            expired: self.expired,
        })
    }
}
