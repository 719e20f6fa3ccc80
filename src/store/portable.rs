//! The calls whose SQL is the same on every engine, written once and expanded into each
//! engine's module by `portable_calls!($db)` (on its `Db`, which has a `pool`, a
//! `begin_write` and a `write_returning`). Parameters are `$1`, `$2`, …: PostgreSQL's
//! form, which SQLite reads too. Only SQL both engines run alike goes here: the commit of
//! a transition, a run's start and end, and opening are each engine's own.

/// The states in which a sprint holds its project's pipeline lock, as SQL: every state
/// but `queued` and the terminal ones (`store::tests` checks it against `State`).
macro_rules! lock_holding_states {
    () => {
        "'planning', 'implementing', 'reviewing', 'done', 'deploying', 'escalated'"
    };
}
pub(super) use lock_holding_states;

/// Expands the portable calls for the engine whose sqlx database type is `$db`.
macro_rules! portable_calls {
    ($db:ty) => {
        /// The columns `SprintRaw` reads.
        macro_rules! sprint_columns {
            () => {
                "id, number, project, goal, state, round, attempt, resume_stage, resume_round, contract_id, branch, next_run_at, focus, budget_usd, last_seq, created_at, updated_at, owner, epoch, started_by, focus_by"
            };
        }

        /// The columns `SprintRaw` reads, for the engine's own queries.
        #[allow(dead_code)]
        const SPRINT_COLUMNS: &str = sprint_columns!();

        /// The orchestrator's lease is written at relaxed durability: a lease lost in a power
        /// cut was held by a process that stopped with the power, and its successor takes
        /// it over all the same.
        const LEASE_DURABILITY: crate::store::Durability = crate::store::Durability::Relaxed;

        /// A delivery cursor too: one lost in a power cut only has its lines sent again
        /// (Discord drops a repeated nonce for some minutes), and the next transition's
        /// commit, at full durability, makes every cursor moved before it durable. An fsync
        /// fewer for each line the bridge delivers, while the loop waits for its turn.
        const CURSOR_DURABILITY: crate::store::Durability = crate::store::Durability::Relaxed;

        /// A command's answer: status, result, time, id.
        const RESOLVE_COMMAND: &str = "UPDATE commands SET status = $1, result = $2, applied_at = $3
             WHERE id = $4 AND status = 'pending'";

        impl Db {
            // --- sprints -------------------------------------------------------------

            pub async fn create_sprint(
                &self,
                project: &str,
                goal: &str,
                focus: Option<&str>,
                by: &str,
                branch_template: &str,
                at: i64,
            ) -> crate::store::Result<crate::store::Sprint> {
                // The next number, then one statement that takes it: another sprint queued
                // in between has taken it first (its id and number are unique), and the
                // next one is read again. The insert is its own transaction, committed
                // explicitly: the id is printed only once the commit returned (an insert
                // whose RETURNING row was read before its implicit commit failed on a full
                // disk printed an id that was never stored).
                loop {
                    let mut tx = self.begin_write().await?;
                    let number: i64 = sqlx::query_scalar(
                        "SELECT CAST(COALESCE(MAX(number), 0) + 1 AS BIGINT) FROM sprints",
                    )
                    .fetch_one(&mut *tx)
                    .await?;
                    let id = crate::domain::sprint_id(number);
                    let branch = crate::store::sprint_branch(branch_template, &id, project);
                    let inserted = sqlx::query_as::<_, crate::store::rows::SprintRaw>(concat!(
                        "INSERT INTO sprints (id, number, project, goal, state, round, attempt, contract_id, branch, focus, created_at, updated_at, started_by, focus_by)
                         VALUES ($1, $2, $3, $4, 'queued', 0, 0, $1, $5, $6, $7, $7, $8, $9)
                         RETURNING ",
                        sprint_columns!()
                    ))
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
                    .await;
                    match inserted {
                        Ok(mut rows) => {
                            let raw = rows.pop().ok_or(sqlx::Error::RowNotFound)?;
                            tx.commit().await?;
                            return crate::store::Sprint::try_from(raw);
                        }
                        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => continue,
                        Err(e) => return Err(e.into()),
                    }
                }
            }

            pub async fn sprint(&self, id: &str) -> crate::store::Result<Option<crate::store::Sprint>> {
                let raw: Option<crate::store::rows::SprintRaw> = sqlx::query_as(concat!(
                    "SELECT ",
                    sprint_columns!(),
                    " FROM sprints WHERE id = $1"
                ))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
                raw.map(crate::store::Sprint::try_from).transpose()
            }

            pub async fn sprints(&self) -> crate::store::Result<Vec<crate::store::Sprint>> {
                self.sprints_where("TRUE").await
            }

            pub async fn sprints_in_stages(&self) -> crate::store::Result<Vec<crate::store::Sprint>> {
                self.sprints_where("state IN ('planning', 'implementing', 'reviewing', 'deploying')")
                    .await
            }

            /// Sprints matching `condition` (a constant of this module), oldest first.
            async fn sprints_where(
                &self,
                condition: &'static str,
            ) -> crate::store::Result<Vec<crate::store::Sprint>> {
                let sql = format!(
                    concat!("SELECT ", sprint_columns!(), " FROM sprints WHERE {} ORDER BY number"),
                    condition
                );
                let raws: Vec<crate::store::rows::SprintRaw> =
                    sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_all(&self.pool).await?;
                raws.into_iter().map(crate::store::Sprint::try_from).collect()
            }

            pub async fn ahead_of(
                &self,
                sprint: &crate::store::Sprint,
            ) -> crate::store::Result<Option<crate::store::Sprint>> {
                // Not ended, by name: the index finds them without reading the project's
                // whole history (`next_in_queues`).
                let raw: Option<crate::store::rows::SprintRaw> = sqlx::query_as(concat!(
                    "SELECT ",
                    sprint_columns!(),
                    " FROM sprints
                     WHERE project = $1 AND id != $2 AND state IN ('queued', ",
                    super::portable::lock_holding_states!(),
                    ")
                       AND (state != 'queued' OR number < $3)
                     ORDER BY state = 'queued', number
                     LIMIT 1"
                ))
                .bind(&sprint.project)
                .bind(&sprint.id)
                .bind(sprint.number)
                .fetch_optional(&self.pool)
                .await?;
                raw.map(crate::store::Sprint::try_from).transpose()
            }

            pub async fn next_in_queues(&self) -> crate::store::Result<Vec<crate::store::Sprint>> {
                // The lock holders by name, not as "neither queued nor ended": the index
                // then finds them at once, where `NOT IN` read every sprint the project
                // ever had (2 ms with 10,000 deployed, against 0.01 ms). The heads of the
                // queues are found project by project (each project the next one after
                // the last in the index), not by looking at every queued sprint: with
                // 10,000 queued in one project, on every sweep of an idle `serve`, 17 ms
                // against 0.01 ms on SQLite, 85 ms against 4 ms on PostgreSQL.
                self.sprints_where(concat!(
                    "number IN (
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
                                     AND b.state IN (",
                    super::portable::lock_holding_states!(),
                    "))"
                ))
                .await
            }

            pub async fn spend_by_sprint(
                &self,
            ) -> crate::store::Result<std::collections::HashMap<String, crate::store::Spend>> {
                let rows: Vec<crate::store::rows::KeyedSpend> =
                    sqlx::query_as("SELECT id AS key, input_tokens, output_tokens, cost_usd FROM sprints")
                        .fetch_all(&self.pool)
                        .await?;
                Ok(rows.into_iter().map(|r| (r.key, r.spend)).collect())
            }

            // --- the transitions log -------------------------------------------------

            pub async fn transitions(
                &self,
                sprint_id: &str,
            ) -> crate::store::Result<Vec<crate::store::TransitionRecord>> {
                let raws: Vec<crate::store::rows::TransitionRaw> =
                    sqlx::query_as("SELECT * FROM transitions WHERE sprint_id = $1 ORDER BY seq")
                        .bind(sprint_id)
                        .fetch_all(&self.pool)
                        .await?;
                raws.into_iter().map(crate::store::TransitionRecord::try_from).collect()
            }

            /// One transaction, so one snapshot: the sprint and its entries agree.
            pub async fn sprint_since(
                &self,
                id: &str,
                seq: i64,
            ) -> crate::store::Result<Option<(crate::store::Sprint, Vec<crate::store::TransitionRecord>)>> {
                let mut tx = self.begin_snapshot().await?;
                let sprint = match fetch_sprint(&mut tx, id).await {
                    Ok(sprint) => sprint,
                    Err(crate::store::StoreError::NoSprint(_)) => return Ok(None),
                    Err(e) => return Err(e),
                };
                let raws: Vec<crate::store::rows::TransitionRaw> = sqlx::query_as(
                    "SELECT * FROM transitions WHERE sprint_id = $1 AND seq > $2 ORDER BY seq",
                )
                .bind(id)
                .bind(seq)
                .fetch_all(&mut *tx)
                .await?;
                tx.commit().await?;
                let records = raws
                    .into_iter()
                    .map(crate::store::TransitionRecord::try_from)
                    .collect::<crate::store::Result<_>>()?;
                Ok(Some((sprint, records)))
            }

            pub async fn transitions_after(
                &self,
                global_seq: i64,
                limit: i64,
            ) -> crate::store::Result<Vec<crate::store::TransitionRecord>> {
                let raws: Vec<crate::store::rows::TransitionRaw> = sqlx::query_as(
                    "SELECT * FROM transitions WHERE global_seq > $1 ORDER BY global_seq LIMIT $2",
                )
                .bind(global_seq)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                raws.into_iter().map(crate::store::TransitionRecord::try_from).collect()
            }

            // --- runs ----------------------------------------------------------------

            pub async fn runs(&self, sprint_id: &str) -> crate::store::Result<Vec<crate::store::Run>> {
                let raws: Vec<crate::store::rows::RunRaw> =
                    sqlx::query_as("SELECT * FROM runs WHERE sprint_id = $1 ORDER BY number")
                        .bind(sprint_id)
                        .fetch_all(&self.pool)
                        .await?;
                raws.into_iter().map(crate::store::Run::try_from).collect()
            }

            pub async fn runs_in_flight(&self) -> crate::store::Result<Vec<crate::store::Run>> {
                let raws: Vec<crate::store::rows::RunRaw> = sqlx::query_as(
                    "SELECT * FROM runs WHERE outcome IS NULL ORDER BY sprint_id, number",
                )
                .fetch_all(&self.pool)
                .await?;
                raws.into_iter().map(crate::store::Run::try_from).collect()
            }

            pub async fn usage(&self, sprint_id: &str) -> crate::store::Result<crate::store::Usage> {
                let rows: Vec<crate::store::rows::KeyedSpend> = sqlx::query_as(
                    "SELECT actor AS key, CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS input_tokens,
                            CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS output_tokens,
                            COALESCE(SUM(cost_usd), 0.0) AS cost_usd
                     FROM runs WHERE sprint_id = $1 GROUP BY actor",
                )
                .bind(sprint_id)
                .fetch_all(&self.pool)
                .await?;
                let mut usage = crate::store::Usage::default();
                for row in rows {
                    usage.total.add(&row.spend);
                    usage.by_sister.insert(row.key, row.spend);
                }
                Ok(usage)
            }

            // --- commands ------------------------------------------------------------

            pub async fn submit_command(
                &self,
                sprint_id: &str,
                kind: crate::store::CommandKind,
                text: Option<&str>,
                by: &str,
                at: i64,
                durability: crate::store::Durability,
            ) -> crate::store::Result<i64> {
                use sqlx::Row;
                let rows = self
                    .write_returning(
                        "INSERT INTO commands (sprint_id, kind, text, by, created_at) VALUES ($1, $2, $3, $4, $5)
                         RETURNING id",
                        durability,
                        |q| q.bind(sprint_id).bind(kind.as_str()).bind(text).bind(by).bind(at),
                    )
                    .await?;
                match rows.first() {
                    Some(row) => Ok(row.try_get("id")?),
                    None => Err(sqlx::Error::RowNotFound.into()),
                }
            }

            pub async fn pending_commands(&self) -> crate::store::Result<Vec<crate::store::Command>> {
                let raws: Vec<crate::store::rows::CommandRaw> =
                    sqlx::query_as("SELECT * FROM commands WHERE status = 'pending' ORDER BY id")
                        .fetch_all(&self.pool)
                        .await?;
                raws.into_iter().map(crate::store::Command::try_from).collect()
            }

            pub async fn commands_of(&self, sprint_id: &str) -> crate::store::Result<Vec<crate::store::Command>> {
                let raws: Vec<crate::store::rows::CommandRaw> =
                    sqlx::query_as("SELECT * FROM commands WHERE sprint_id = $1 ORDER BY id")
                        .bind(sprint_id)
                        .fetch_all(&self.pool)
                        .await?;
                raws.into_iter().map(crate::store::Command::try_from).collect()
            }

            pub async fn command(&self, id: i64) -> crate::store::Result<Option<crate::store::Command>> {
                let raw: Option<crate::store::rows::CommandRaw> =
                    sqlx::query_as("SELECT * FROM commands WHERE id = $1")
                        .bind(id)
                        .fetch_optional(&self.pool)
                        .await?;
                raw.map(crate::store::Command::try_from).transpose()
            }

            pub async fn resolve_command(
                &self,
                id: i64,
                status: crate::store::CommandStatus,
                result: &str,
                at: i64,
            ) -> crate::store::Result<()> {
                sqlx::query(RESOLVE_COMMAND)
                .bind(status.as_str())
                .bind(result)
                .bind(at)
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            // --- the single-orchestrator lease ---------------------------------------

            pub async fn lease(&self) -> crate::store::Result<Option<crate::store::Lease>> {
                Ok(sqlx::query_as("SELECT * FROM instance_lease WHERE id = 1")
                    .fetch_optional(&self.pool)
                    .await?)
            }

            pub async fn acquire_lease(
                &self,
                me: &crate::store::Lease,
                is_gone: &impl Fn(&crate::store::Lease) -> bool,
            ) -> crate::store::Result<Result<(), crate::store::Lease>> {
                // The holder is judged, then replaced only if it is still the one judged:
                // of two starting at once, the second finds the first's lease and judges
                // it in turn.
                loop {
                    let current: Option<crate::store::Lease> =
                        sqlx::query_as("SELECT * FROM instance_lease WHERE id = 1")
                            .fetch_optional(&self.pool)
                            .await?;
                    if let Some(holder) = &current
                        && holder.token != me.token
                        && !is_gone(holder)
                    {
                        return Ok(Err(holder.clone()));
                    }
                    let judged = current.map(|holder| holder.token);
                    let taken = self
                        .write_returning(
                            "INSERT INTO instance_lease (id, token, pid, host, started_at, heartbeat_at) VALUES (1, $1, $2, $3, $4, $5)
                             ON CONFLICT (id) DO UPDATE SET token = excluded.token, pid = excluded.pid, host = excluded.host,
                                 started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at
                             WHERE instance_lease.token IS NOT DISTINCT FROM $6
                             RETURNING id",
                            LEASE_DURABILITY,
                            |q| {
                                q.bind(&me.token)
                                    .bind(me.pid)
                                    .bind(&me.host)
                                    .bind(me.started_at)
                                    .bind(me.heartbeat_at)
                                    .bind(judged)
                            },
                        )
                        .await?;
                    if taken.len() == 1 {
                        return Ok(Ok(()));
                    }
                }
            }

            pub async fn heartbeat(&self, token: &str, at: i64) -> crate::store::Result<bool> {
                let renewed = self
                    .write_returning(
                        "UPDATE instance_lease SET heartbeat_at = $1 WHERE id = 1 AND token = $2 RETURNING id",
                        LEASE_DURABILITY,
                        |q| q.bind(at).bind(token),
                    )
                    .await?;
                Ok(renewed.len() == 1)
            }

            pub async fn release_lease(&self, token: &str) -> crate::store::Result<()> {
                self.write_returning(
                    "DELETE FROM instance_lease WHERE id = 1 AND token = $1",
                    LEASE_DURABILITY,
                    |q| q.bind(token),
                )
                .await?;
                Ok(())
            }

            // --- Discord forum posts -------------------------------------------------

            pub async fn forum_post(
                &self,
                sprint_id: &str,
            ) -> crate::store::Result<Option<crate::store::ForumPost>> {
                Ok(sqlx::query_as("SELECT * FROM discord_threads WHERE sprint_id = $1")
                    .bind(sprint_id)
                    .fetch_optional(&self.pool)
                    .await?)
            }

            pub async fn save_forum_post(&self, post: &crate::store::ForumPost) -> crate::store::Result<()> {
                bind_forum_post(sqlx::query(
                    "INSERT INTO discord_threads (sprint_id, thread_id, board_message_id, done_message_id) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (sprint_id) DO UPDATE SET thread_id = excluded.thread_id,
                         board_message_id = excluded.board_message_id, done_message_id = excluded.done_message_id",
                ), post)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            pub async fn record_new_forum_post(
                &self,
                post: &crate::store::ForumPost,
                replacing: Option<i64>,
            ) -> crate::store::Result<crate::store::ForumPost> {
                if let Some(old) = replacing {
                    bind_forum_post(sqlx::query(
                        "UPDATE discord_threads SET thread_id = $2, board_message_id = $3, done_message_id = $4
                         WHERE sprint_id = $1 AND thread_id = $5",
                    ), post)
                    .bind(old)
                    .execute(&self.pool)
                    .await?;
                }
                bind_forum_post(sqlx::query(
                    "INSERT INTO discord_threads (sprint_id, thread_id, board_message_id, done_message_id) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (sprint_id) DO NOTHING",
                ), post)
                .execute(&self.pool)
                .await?;
                let recorded = self.forum_post(&post.sprint_id).await?;
                Ok(recorded.unwrap_or_else(|| post.clone()))
            }

            // --- delivery cursors ----------------------------------------------------

            pub async fn cursor(&self, consumer: &str) -> crate::store::Result<i64> {
                let seq: Option<i64> =
                    sqlx::query_scalar("SELECT global_seq FROM delivery_cursors WHERE consumer = $1")
                        .bind(consumer)
                        .fetch_optional(&self.pool)
                        .await?;
                Ok(seq.unwrap_or(0))
            }

            pub async fn set_cursor(&self, consumer: &str, global_seq: i64) -> crate::store::Result<()> {
                self.write_returning(
                    "INSERT INTO delivery_cursors (consumer, global_seq) VALUES ($1, $2)
                     ON CONFLICT (consumer) DO UPDATE SET global_seq = excluded.global_seq",
                    CURSOR_DURABILITY,
                    |q| q.bind(consumer).bind(global_seq),
                )
                .await?;
                Ok(())
            }
        }

        /// For `store::testing` only: writes hanarang itself never makes.
        impl Db {
            pub async fn submit_commands_together(
                &self,
                sprint_id: &str,
                kinds: &[crate::store::CommandKind],
            ) -> crate::store::Result<()> {
                let mut tx = self.pool.begin().await?;
                for kind in kinds {
                    sqlx::query(
                        "INSERT INTO commands (sprint_id, kind, text, by, created_at) VALUES ($1, $2, NULL, 'cli', 1)",
                    )
                    .bind(sprint_id)
                    .bind(kind.as_str())
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            pub async fn record_newer_migration(&self, version: i64) -> crate::store::Result<()> {
                sqlx::query(
                    "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
                     VALUES ($1, 'from a newer hanarang', TRUE, $2, 0)",
                )
                .bind(version)
                .bind(vec![0u8])
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            pub async fn overwrite_sprint_state(&self, sprint_id: &str, state: &str) -> crate::store::Result<()> {
                sqlx::query("UPDATE sprints SET state = $1 WHERE id = $2")
                    .bind(state)
                    .bind(sprint_id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            pub async fn count_runs(&self) -> crate::store::Result<i64> {
                Ok(sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM runs")
                    .fetch_one(&self.pool)
                    .await?)
            }
        }

        /// A sprint read inside a transaction; `NoSprint` when there is none.
        async fn fetch_sprint(
            tx: &mut sqlx::Transaction<'static, $db>,
            id: &str,
        ) -> crate::store::Result<crate::store::Sprint> {
            let raw: Option<crate::store::rows::SprintRaw> = sqlx::query_as(concat!(
                "SELECT ",
                sprint_columns!(),
                " FROM sprints WHERE id = $1"
            ))
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
            raw.map(crate::store::Sprint::try_from)
                .transpose()?
                .ok_or_else(|| crate::store::StoreError::NoSprint(id.to_string()))
        }

        /// Binds the sprint's columns a commit writes, after those already bound: state,
        /// round, attempt, resume stage and round, contract, branch, due time, focus and
        /// its author, budget, `last_seq`, `updated_at`, then the tokens and dollars its run adds.
        fn bind_sprint_after<'q>(
            query: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments>,
            c: &'q crate::store::Commit<'q>,
        ) -> sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments> {
            let after = c.after;
            query
                .bind(after.state.as_str())
                .bind(i64::from(after.round))
                .bind(i64::from(after.attempt))
                .bind(after.resume.map(|r| r.stage.state().as_str()))
                .bind(after.resume.map(|r| i64::from(r.round)))
                .bind(&after.contract_id)
                .bind(&after.branch)
                .bind(after.next_run_at)
                .bind(&after.focus)
                .bind(&after.focus_by)
                .bind(after.budget_usd)
                .bind(c.seq())
                .bind(c.at)
                .bind(c.run.and_then(|r| r.input_tokens).unwrap_or(0))
                .bind(c.run.and_then(|r| r.output_tokens).unwrap_or(0))
                .bind(c.run.and_then(|r| r.cost_usd).unwrap_or(0.0))
        }

        /// Binds a log entry's columns after its sprint and `seq`: from, to, event (its
        /// name and JSON), note, round, attempt, run, branch, time.
        fn bind_log_entry<'q>(
            query: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments>,
            c: &'q crate::store::Commit<'q>,
            event_json: &'q str,
            note_json: Option<&'q str>,
        ) -> sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments> {
            query
                .bind(c.transition.from.state.as_str())
                .bind(c.transition.to.state.as_str())
                .bind(c.event.name())
                .bind(event_json)
                .bind(note_json)
                .bind(i64::from(c.transition.to.round))
                .bind(i64::from(c.transition.to.attempt))
                .bind(c.run.map(|r| r.run_id.as_str()))
                .bind(&c.after.branch)
                .bind(c.at)
        }

        /// Binds a forum post's columns, in the table's order.
        fn bind_forum_post<'q>(
            query: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments>,
            post: &'q crate::store::ForumPost,
        ) -> sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments> {
            query
                .bind(&post.sprint_id)
                .bind(post.thread_id)
                .bind(post.board_message_id)
                .bind(post.done_message_id)
        }

        /// Binds a new run's parameters, in `INSERT_RUN`'s order, after those already bound.
        fn bind_new_run<'q>(
            query: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments>,
            new: &crate::store::NewRun<'q>,
        ) -> crate::store::Result<sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments>> {
            let handoff_json = serde_json::to_string(new.handoff)
                .map_err(|e| crate::store::StoreError::Encode("handoff", e))?;
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
                .bind(new.reviewer))
        }

        /// Binds a run's end, in `END_RUN`'s order, after those already bound.
        fn bind_run_end<'q>(
            query: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments>,
            run: &'q crate::store::RunEnd,
        ) -> crate::store::Result<sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments>> {
            let message_json = run
                .message
                .as_ref()
                .map(serde_json::to_string)
                .transpose()
                .map_err(|e| crate::store::StoreError::Encode("message", e))?;
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
    };
}

pub(super) use portable_calls;
