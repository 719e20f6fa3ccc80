//! A fresh PostgreSQL database for each test (`store::testing`), on a server the test
//! suite is pointed at, and its removal afterwards.

use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};

use crate::store::Result;

/// Creates an empty database on the server `server_url` points at (through the database
/// that URL names, usually `postgres`), and returns the URL of the new one. Its name
/// carries this process's id and a counter, so parallel tests never share one.
pub async fn fresh_database(server_url: &str) -> Result<String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "hanarang_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let options = PgConnectOptions::from_str(server_url)?;
    let mut admin = options.connect().await?;
    // A database left by an earlier run of a process with the same id.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    let (base, query) = server_url
        .split_once('?')
        .map_or((server_url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    Ok(match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    })
}

/// Drops the database `url` names (made by `fresh_database`), closing what still uses
/// it.
pub async fn drop_database(url: &str) -> Result<()> {
    let options = PgConnectOptions::from_str(url)?;
    let Some(name) = options.get_database().map(str::to_string) else {
        return Ok(());
    };
    let mut admin: PgConnection = options.database("postgres").connect().await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
        name.replace('"', "\"\"")
    )))
    .execute(&mut admin)
    .await?;
    admin.close().await?;
    Ok(())
}

/// A commit whose statements are written but not yet committed, as a host holds one
/// for a moment (or for long, frozen in the middle of it).
pub struct HeldCommit {
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    global_seq: i64,
}

impl HeldCommit {
    /// The `global_seq` its log entry will have.
    pub fn global_seq(&self) -> i64 {
        self.global_seq
    }

    /// Commits it.
    pub async fn finish(self) -> Result<()> {
        self.tx.commit().await?;
        Ok(())
    }
}

impl super::Db {
    pub(in crate::store) async fn hold_commit_open(
        &self,
        c: &crate::store::Commit<'_>,
    ) -> Result<HeldCommit> {
        let mut tx = self.pool.begin().await?;
        let global_seq = self.write_commit(&mut tx, c).await?;
        Ok(HeldCommit { tx, global_seq })
    }

    /// How many of this database's sessions wait for a lock another one holds.
    pub(in crate::store) async fn lock_waiters(&self) -> Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
             WHERE NOT l.granted AND d.datname = current_database()",
        )
        .fetch_one(&self.pool)
        .await?)
    }
}

/// Runs a plain-text `pg_dump` (its psql meta-commands removed) into the database `url`
/// names, on a connection of its own (a dump sets its session's `search_path`).
pub async fn restore_postgres(url: &str, dump: &str) -> Result<()> {
    let mut conn = PgConnectOptions::from_str(url)?.connect().await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(dump.to_string()))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    Ok(())
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
        let mut tx = self.pool.begin().await?;
        for (kind, mac) in kinds.iter().zip(macs) {
            sqlx::query(
                "INSERT INTO commands (sprint_id, kind, text, by, created_at, mac) VALUES ($1, $2, NULL, 'cli', 1, $3)",
            )
            .bind(sprint_id)
            .bind(kind.as_str())
            .bind(mac)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn insert_newer_migration(&self, version: i64) -> Result<()> {
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

    async fn write_sprint_state(&self, sprint_id: &str, state: &str) -> Result<()> {
        sqlx::query("UPDATE sprints SET state = $1 WHERE id = $2")
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

/// Every `(table, column)` of hanarang's tables in the database `url` names (sqlx's own
/// bookkeeping left out).
pub async fn columns(url: &str) -> Result<Vec<(String, String)>> {
    let mut conn = PgConnectOptions::from_str(url)?.connect().await?;
    let columns = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name <> '_sqlx_migrations'
         ORDER BY 1, 2",
    )
    .fetch_all(&mut conn)
    .await?;
    conn.close().await?;
    Ok(columns)
}
