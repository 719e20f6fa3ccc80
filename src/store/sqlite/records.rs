//! The smaller records in SQLite: durable commands, the single-orchestrator lease,
//! Discord forum posts and delivery cursors.

use super::Db;
use crate::store::rows::CommandRaw;
use crate::store::{Command, CommandKind, CommandStatus, ForumPost, Lease, Result};

/// A command's answer: status, result, time, id.
pub(super) const RESOLVE_COMMAND: &str = "
    UPDATE commands SET status = ?, result = ?, applied_at = ? WHERE id = ? AND status = 'pending';";

impl Db {
    pub async fn submit_command(
        &self,
        sprint_id: &str,
        kind: CommandKind,
        text: Option<&str>,
        by: &str,
        at: i64,
    ) -> Result<i64> {
        let id = sqlx::query(
            "INSERT INTO commands (sprint_id, kind, text, by, created_at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(sprint_id)
        .bind(kind.as_str())
        .bind(text)
        .bind(by)
        .bind(at)
        .execute(&self.pool)
        .await?
        .last_insert_rowid();
        Ok(id)
    }

    pub async fn pending_commands(&self) -> Result<Vec<Command>> {
        let raws: Vec<CommandRaw> =
            sqlx::query_as("SELECT * FROM commands WHERE status = 'pending' ORDER BY id")
                .fetch_all(&self.pool)
                .await?;
        raws.into_iter().map(Command::try_from).collect()
    }

    pub async fn command(&self, id: i64) -> Result<Option<Command>> {
        let raw: Option<CommandRaw> = sqlx::query_as("SELECT * FROM commands WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        raw.map(Command::try_from).transpose()
    }

    pub async fn resolve_command(
        &self,
        id: i64,
        status: CommandStatus,
        result: &str,
        at: i64,
    ) -> Result<()> {
        sqlx::query(RESOLVE_COMMAND)
            .bind(status.as_str())
            .bind(result)
            .bind(at)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    // --- the single-orchestrator lease ------------------------------------------------

    pub async fn lease(&self) -> Result<Option<Lease>> {
        Ok(sqlx::query_as("SELECT * FROM instance_lease WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?)
    }

    pub async fn acquire_lease(
        &self,
        me: &Lease,
        is_gone: &impl Fn(&Lease) -> bool,
    ) -> Result<Result<(), Lease>> {
        let mut tx = self.begin_write().await?;
        let current: Option<Lease> = sqlx::query_as("SELECT * FROM instance_lease WHERE id = 1")
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(holder) = current
            && holder.token != me.token
            && !is_gone(&holder)
        {
            tx.rollback().await?;
            return Ok(Err(holder));
        }
        sqlx::query(
            "INSERT INTO instance_lease (id, token, pid, host, started_at, heartbeat_at) VALUES (1, ?, ?, ?, ?, ?)
             ON CONFLICT (id) DO UPDATE SET token = excluded.token, pid = excluded.pid, host = excluded.host,
                 started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at",
        )
        .bind(&me.token)
        .bind(me.pid)
        .bind(&me.host)
        .bind(me.started_at)
        .bind(me.heartbeat_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    pub async fn heartbeat(&self, token: &str, at: i64) -> Result<bool> {
        let done =
            sqlx::query("UPDATE instance_lease SET heartbeat_at = ? WHERE id = 1 AND token = ?")
                .bind(at)
                .bind(token)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn release_lease(&self, token: &str) -> Result<()> {
        sqlx::query("DELETE FROM instance_lease WHERE id = 1 AND token = ?")
            .bind(token)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    // --- Discord forum posts --------------------------------------------------------------

    pub async fn forum_post(&self, sprint_id: &str) -> Result<Option<ForumPost>> {
        Ok(
            sqlx::query_as("SELECT * FROM discord_threads WHERE sprint_id = ?")
                .bind(sprint_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    pub async fn save_forum_post(&self, post: &ForumPost) -> Result<()> {
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
    }

    // --- delivery cursors --------------------------------------------------------------

    pub async fn cursor(&self, consumer: &str) -> Result<i64> {
        let seq: Option<i64> =
            sqlx::query_scalar("SELECT global_seq FROM delivery_cursors WHERE consumer = ?")
                .bind(consumer)
                .fetch_optional(&self.pool)
                .await?;
        Ok(seq.unwrap_or(0))
    }

    pub async fn set_cursor(&self, consumer: &str, global_seq: i64) -> Result<()> {
        sqlx::query(
            "INSERT INTO delivery_cursors (consumer, global_seq) VALUES (?, ?)
             ON CONFLICT (consumer) DO UPDATE SET global_seq = excluded.global_seq",
        )
        .bind(consumer)
        .bind(global_seq)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
