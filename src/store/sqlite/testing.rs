//! What the test suite and the benchmarks do to a SQLite database that only SQLite has:
//! the write lock held by another process, and the bare floor a benchmark compares the
//! store with (`store::testing`). Each opens its own connection, as another process would.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection};

use crate::store::Result;

async fn connect(url: &str) -> Result<SqliteConnection> {
    Ok(SqliteConnectOptions::from_str(url)?.connect().await?)
}

/// The database's write lock, held by a connection of its own (as a backup or the
/// `sqlite3` shell would) until `release`.
pub struct WriteLock(SqliteConnection);

impl WriteLock {
    pub async fn take(url: &str) -> Result<WriteLock> {
        let mut conn = connect(url).await?;
        sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await?;
        Ok(WriteLock(conn))
    }

    pub async fn release(mut self) -> Result<()> {
        sqlx::query("ROLLBACK").execute(&mut self.0).await?;
        self.0.close().await?;
        Ok(())
    }
}

/// The least a benchmark's durable work costs: a database file opened as the store opens
/// its own (WAL, FULL, a busy timeout), without the store.
pub struct Floor(SqlitePool);

impl Floor {
    /// `ping`: whether sqlx tests each connection before handing it out (its default;
    /// the store turns it off).
    pub async fn open(path: &Path, ping: bool) -> Result<Floor> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        Ok(Floor(
            SqlitePoolOptions::new()
                .max_connections(4)
                .test_before_acquire(ping)
                .connect_with(options)
                .await?,
        ))
    }

    /// A table of log rows, for `append`.
    pub async fn create_log(&self) -> Result<()> {
        sqlx::query(
            "CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, sprint INTEGER NOT NULL,
                 seq INTEGER NOT NULL, event TEXT NOT NULL, event_json TEXT NOT NULL, at INTEGER NOT NULL)",
        )
        .execute(&self.0)
        .await?;
        Ok(())
    }

    /// One durable transaction that takes the write lock at once (as the store's): one
    /// row, commit.
    pub async fn append(
        &self,
        sprint: i64,
        seq: i64,
        event: &str,
        event_json: &str,
        at: i64,
    ) -> Result<()> {
        let mut tx = self.0.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query("INSERT INTO log (sprint, seq, event, event_json, at) VALUES (?, ?, ?, ?, ?)")
            .bind(sprint)
            .bind(seq)
            .bind(event)
            .bind(event_json)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// One statement's round trip through the pool (`SELECT 1`).
    pub async fn select_one(&self) -> Result<()> {
        sqlx::query("SELECT 1").fetch_optional(&self.0).await?;
        Ok(())
    }

    /// Reads the schema (as the store's migration check does when it opens).
    pub async fn read_schema(&self) -> Result<()> {
        sqlx::query("SELECT version FROM _sqlx_migrations")
            .fetch_all(&self.0)
            .await?;
        Ok(())
    }

    /// Every row of a hanarang database's `sprints`, fetched and not decoded; how many.
    pub async fn fetch_sprint_rows(&self) -> Result<usize> {
        Ok(sqlx::query("SELECT * FROM sprints ORDER BY number")
            .fetch_all(&self.0)
            .await?
            .len())
    }

    pub async fn close(&self) {
        self.0.close().await;
    }
}

/// The writes and counts `store::testing` asks of every engine.
#[async_trait::async_trait]
impl crate::store::testing::Engine for super::Db {
    async fn insert_commands_together(
        &self,
        sprint_id: &str,
        kinds: &[crate::store::CommandKind],
        macs: &[String],
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for (kind, mac) in kinds.iter().zip(macs) {
            sqlx::query(
                "INSERT INTO commands (sprint_id, kind, text, by, created_at, mac) VALUES (?, ?, NULL, 'cli', 1, ?)",
            )
            .bind(sprint_id)
            .bind(kind.as_str())
            .bind(mac)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        self.nudge();
        Ok(())
    }

    async fn insert_newer_migration(&self, version: i64) -> Result<()> {
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (?, 'from a newer hanarang', TRUE, ?, 0)",
        )
        .bind(version)
        .bind(vec![0u8])
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn write_sprint_state(&self, sprint_id: &str, state: &str) -> Result<()> {
        sqlx::query("UPDATE sprints SET state = ? WHERE id = ?")
            .bind(state)
            .bind(sprint_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn runs_on_record(&self) -> Result<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM runs")
            .fetch_one(&self.pool)
            .await?)
    }
}

/// Every `(table, column)` of hanarang's tables in the database `url` names (sqlx's and
/// SQLite's own bookkeeping left out).
pub async fn columns(url: &str) -> Result<Vec<(String, String)>> {
    let mut conn = connect(url).await?;
    let columns = sqlx::query_as(
        "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'
         ORDER BY 1, 2",
    )
    .fetch_all(&mut conn)
    .await?;
    conn.close().await?;
    Ok(columns)
}
