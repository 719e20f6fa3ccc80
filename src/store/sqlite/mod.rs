//! The SQLite engine: the embedded default, one file beside the config. Everything
//! that is SQLite's own lives here: the pragmas and the set-up lock of `open`, the
//! `VACUUM INTO` backup before an upgrade, `BEGIN IMMEDIATE`, the wake-up socket beside
//! the file, reading SQLite's error codes, and its migrations (`migrations/sqlite/`).
//! `queries.rs` answers the store's interface; `write.rs` holds a transition's commit
//! and a run's start and end.

mod checks;
pub(super) mod queries;
#[cfg(feature = "testing")]
pub mod testing;
mod write;

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::{MigrationStatus, Result, StoreError, Writes};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// How long one statement waits for SQLite's write lock before it reports the database
/// locked (and `retry_locked` tries it again).
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// A SQLite database; cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct Db {
    pool: SqlitePool,
    /// How `Db::single_connection` connects; `None` for an in-memory database (a second
    /// connection would be another database).
    single: Option<std::sync::Arc<SqliteConnectOptions>>,
    /// The database file and which file it was when opened (device, inode); `None` for an
    /// in-memory database.
    file: Option<(PathBuf, (u64, u64))>,
    /// Whether `pool` is the loop's own connection (`single_connection`), not the shared
    /// pool of the store it came from.
    own: bool,
    writes: Writes,
}

impl Db {
    /// The datagram socket through which a `serve` (or `run`) hears of what another
    /// process wrote for it (`listen`, `nudge`): in the abstract namespace, named for the
    /// database file (`hanarang-wake-<hash of its path>`), so no file is left behind and a
    /// fenced sister cannot reach it (Landlock scopes abstract sockets). `None` for an
    /// in-memory database.
    fn wake_address(&self) -> Option<std::os::unix::net::SocketAddr> {
        use sha2::Digest;
        use std::os::linux::net::SocketAddrExt;
        let (path, _) = self.file.as_ref()?;
        let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        let digest = sha2::Sha256::digest(path.as_os_str().as_encoded_bytes());
        let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        std::os::unix::net::SocketAddr::from_abstract_name(format!("hanarang-wake-{hex}")).ok()
    }

    /// Binds the wake-up socket and notifies `wake` at each datagram. `false` when it
    /// cannot be bound (an in-memory database, another process of this database holding
    /// it): the loop then polls.
    async fn bind_wake_socket(&self, wake: std::sync::Arc<tokio::sync::Notify>) -> Result<bool> {
        let Some(address) = self.wake_address() else {
            return Ok(false);
        };
        let bound = std::os::unix::net::UnixDatagram::bind_addr(&address)
            .and_then(|s| s.set_nonblocking(true).map(|()| s))
            .and_then(tokio::net::UnixDatagram::from_std);
        let socket = match bound {
            Ok(socket) => socket,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for other processes' commands to this database: polling");
                return Ok(false);
            }
        };
        tokio::spawn(async move {
            let mut buf = [0u8; 16];
            while socket.recv(&mut buf).await.is_ok() {
                wake.notify_one();
            }
        });
        Ok(true)
    }

    /// Tells the orchestrator listening on the database that something was written for
    /// it. Never waits and never fails: with nobody listening, the datagram goes nowhere,
    /// and the orchestrator's sweep finds the write all the same.
    fn nudge(&self) {
        let Some(address) = self.wake_address() else {
            return;
        };
        if let Ok(socket) = std::os::unix::net::UnixDatagram::unbound() {
            let _ = socket.set_nonblocking(true);
            let _ = socket.send_to_addr(b"!", &address);
        }
    }

    /// Opens (creating if missing) the database, in WAL mode with a busy timeout, and
    /// applies the embedded migrations (after a backup, on an upgrade). Returns it with the
    /// folder for run contract files: beside the database file.
    pub(super) async fn open(url: &str, writes: Writes) -> Result<(Db, PathBuf)> {
        let open_err = |source| StoreError::Open {
            url: crate::config::redacted(url),
            source,
        };
        let options = SqliteConnectOptions::from_str(url)
            .map_err(open_err)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: a committed transition survives a power cut, not just a crash.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let filename = options.get_filename().to_path_buf();
        let in_memory = file_of(&options, url).is_none();
        let connect = || {
            SqlitePoolOptions::new()
                // One connection: SQLite writes one transaction at a time anyway, the
                // pool hands a connection back in a task of its own (so a statement right
                // after another would open a second connection, at a millisecond each),
                // and every connection added re-reads the schema and prepares its
                // statements again. The loop has its own (`single_connection`).
                .max_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                // A local file: no connection goes stale, and the ping costs a round trip
                // on every statement.
                .test_before_acquire(false)
                .connect_with(options.clone())
        };
        // sqlx does not lock SQLite's set-up across processes: `serve` and a CLI command
        // opening a fresh database at once would both switch it to WAL (one of them then
        // fails with "database is locked") and both create the tables. A file lock beside
        // the database makes one wait for the other, from the first connection to the
        // last migration. Where it cannot be created (a folder this user may only read),
        // the database is not going to be set up by this user anyway.
        let setup_lock = if in_memory {
            None
        } else {
            let mut path = filename.clone().into_os_string();
            path.push("-migrate.lock");
            lock_file(PathBuf::from(path)).await.ok()
        };
        if !in_memory && !filename.exists() {
            // A database removed while a process still has it open leaves its WAL behind:
            // a new database here would take writes that the old one's users never see.
            let beside = |suffix: &str| {
                let mut p = filename.clone().into_os_string();
                p.push(suffix);
                PathBuf::from(p).exists()
            };
            if beside("-wal") || beside("-shm") {
                let path = std::path::absolute(&filename).unwrap_or(filename);
                return Err(StoreError::Removed(path));
            }
        }
        let mut pool = connect().await.map_err(open_err)?;
        let (applied, pending) = migrations_of(&pool, url).await?;
        // Nothing to do when every migration is applied: the usual case, and a cheap read.
        if !pending.is_empty() {
            // An upgrade: a database that already has tables gets a copy before the new
            // migrations touch it.
            if !in_memory && applied > 0 {
                let mut backup = filename.clone().into_os_string();
                backup.push(format!(".backup-{}", crate::clock::now_ms()));
                let backup = PathBuf::from(backup);
                sqlx::query("VACUUM INTO ?")
                    .bind(backup.display().to_string())
                    .execute(&pool)
                    .await?;
                tracing::warn!(backup = %backup.display(), ?pending, "database backed up before migrating");
            }
            MIGRATOR
                .run(&pool)
                .await
                .map_err(|source| StoreError::Migrate {
                    url: crate::config::redacted(url),
                    source,
                })?;
            if !in_memory {
                // The pool's other connections read the schema before it changed; SQLite
                // would prepare on their stale copy and then find more columns than sqlx
                // was told. Fresh connections read the new schema.
                pool.close().await;
                pool = connect().await.map_err(open_err)?;
            }
        }
        drop(setup_lock);
        let file = if in_memory {
            None
        } else {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(&filename).map_err(|e| StoreError::Open {
                url: crate::config::redacted(url),
                source: sqlx::Error::Io(e),
            })?;
            Some((filename.clone(), (m.dev(), m.ino())))
        };
        // A second pool on an in-memory database would be another database.
        let single = (!in_memory).then(|| std::sync::Arc::new(options));
        let runs_dir = if in_memory {
            std::env::temp_dir().join(format!("hanarang-runs-{}", std::process::id()))
        } else {
            let mut dir = filename.into_os_string();
            dir.push(".runs");
            // A sister runs in its project's workdir: the paths it is given are absolute.
            let dir = PathBuf::from(dir);
            std::path::absolute(&dir).unwrap_or(dir)
        };
        Ok((
            Db {
                pool,
                single,
                file,
                own: false,
                writes,
            },
            runs_dir,
        ))
    }

    /// Whether the database file is still the one this store opened: removed (or replaced)
    /// under a running process, every write would go to a file nobody can open again.
    fn file_unchanged(&self) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let Some((path, opened)) = &self.file else {
            return Ok(());
        };
        match std::fs::metadata(path) {
            Ok(m) if (m.dev(), m.ino()) != *opened => Err(StoreError::Removed(path.clone())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(StoreError::Removed(path.clone()))
            }
            // Gone or replaced is what is noticed; a folder this process may not list for a
            // moment (or a flaky network file system) is not a removal.
            Ok(_) | Err(_) => Ok(()),
        }
    }

    /// The same database through one connection of its own. SQLite drops a connection's
    /// whole page cache when another connection has written since it last read, so a pool
    /// that hands its connections round re-reads the tables on nearly every statement; one
    /// connection that does all of the loop's writes keeps its cache
    /// (docs/benchmarks/orchestrator-third-round.md).
    /// Its statements queue behind each other: the loop makes one at a time anyway.
    ///
    /// Call it on the runtime that will use it: sqlx hands a connection back to its pool
    /// in a task on the runtime that dropped it, and the pool has no other task (no idle
    /// timeout, no maximum lifetime: the connection stays open, and its cache warm).
    fn own_connection(&self) -> Db {
        let Some(options) = &self.single else {
            return self.clone();
        };
        Db {
            pool: SqlitePoolOptions::new()
                .max_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .test_before_acquire(false)
                .connect_lazy_with(SqliteConnectOptions::clone(options)),
            own: true,
            ..self.clone()
        }
    }

    /// A write transaction that takes SQLite's write lock at once, so it never fails
    /// half-way because another connection wrote first.
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Reads, without changing anything, which migrations a database still needs.
    pub async fn migration_status(url: &str) -> Result<MigrationStatus> {
        let open_err = |source| StoreError::Open {
            url: crate::config::redacted(url),
            source,
        };
        let options = SqliteConnectOptions::from_str(url).map_err(open_err)?;
        let path = options.get_filename().to_path_buf();
        if !path.exists() {
            return Ok(MigrationStatus::NotCreated);
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.read_only(true).create_if_missing(false))
            .await
            .map_err(open_err)?;
        let (applied, pending) = migrations_of(&pool, url).await?;
        pool.close().await;
        Ok(if pending.is_empty() {
            MigrationStatus::Current { applied }
        } else {
            MigrationStatus::Pending(pending)
        })
    }
}

/// How many migrations a database has applied, and which of this binary's it lacks. A
/// database with a migration this binary does not know was made by a newer one: it is
/// refused (`StoreError::TooNew`), never opened with a schema this code does not expect.
async fn migrations_of(pool: &SqlitePool, url: &str) -> Result<(usize, Vec<i64>)> {
    // One connection for both reads: the pool hands a connection back in a task of its
    // own, so a second read right after the first would open another connection.
    let mut conn = pool.acquire().await?;
    let has_table: Option<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_optional(&mut *conn)
    .await?;
    let applied: Vec<i64> = if has_table.is_some() {
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success = 1")
            .fetch_all(&mut *conn)
            .await?
    } else {
        Vec::new()
    };
    super::against(&MIGRATOR, &applied, url)
}

/// The database file a `sqlite:` URL names (`None` for an in-memory database).
pub(super) fn database_path(url: &str) -> Option<PathBuf> {
    file_of(&SqliteConnectOptions::from_str(url).ok()?, url)
}

/// The file behind parsed options; `None` in memory (`sqlite::memory:`, which sqlx names
/// `file:sqlx-in-memory-N`, or `?mode=memory`).
fn file_of(options: &SqliteConnectOptions, url: &str) -> Option<PathBuf> {
    let path = options.get_filename();
    let name = path.as_os_str().to_string_lossy();
    let query = url.split_once('?').map_or("", |(_, q)| q);
    let in_memory = name.is_empty()
        || name == ":memory:"
        || name.starts_with("file:sqlx-in-memory-")
        || query.split('&').any(|kv| kv == "mode=memory");
    (!in_memory).then(|| path.to_path_buf())
}

/// Takes an exclusive lock on `path` (created if missing), waiting for it.
async fn lock_file(path: PathBuf) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    use nix::fcntl::{Flock, FlockArg};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    // Nobody else setting the database up is the usual case: no thread to wait on.
    let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => return Ok(lock),
        Err((file, nix::errno::Errno::EWOULDBLOCK)) => file,
        Err((_, errno)) => return Err(errno.into()),
    };
    tokio::task::spawn_blocking(move || {
        Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| errno.into())
    })
    .await
    .map_err(std::io::Error::other)?
}

/// SQLite's "database is locked" (or "table is locked"): another connection holds the
/// lock; the same statement may well succeed later.
pub(super) fn is_busy(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.try_downcast_ref::<sqlx::sqlite::SqliteError>())
        .and_then(sqlx::error::DatabaseError::code)
        .and_then(|c| c.parse::<i64>().ok())
        .is_some_and(|c| matches!(c & 0xff, 5 | 6))
}

/// What a failure of the storage under the database is, in a few words: the disk is full,
/// the file cannot be written, an I/O error. `None` for any other error.
pub(super) fn storage_failure(e: &sqlx::Error) -> Option<String> {
    use sqlx::error::DatabaseError;
    let d = e
        .as_database_error()?
        .try_downcast_ref::<sqlx::sqlite::SqliteError>()?;
    let code = d.code()?.parse::<i64>().ok()?;
    match code & 0xff {
        13 => Some("disk full".into()),
        8 => Some(format!(
            "cannot write (read-only file or file system): {}",
            d.message()
        )),
        10 => Some(format!("I/O error: {}", d.message())),
        14 => Some(format!("cannot open the file: {}", d.message())),
        _ => None,
    }
}

/// The names of the states `which` keeps, as the JSON array a query reads with
/// `state IN (SELECT value FROM json_each(?))`.
pub(super) fn states(which: impl Fn(crate::pipeline::State) -> bool) -> String {
    let names = crate::pipeline::State::names(which);
    format!("[\"{}\"]", names.join("\",\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Database;

    #[tokio::test]
    async fn an_in_memory_database_opens_and_leaves_no_file() {
        assert_eq!(database_path("sqlite://?mode=memory"), None);
        let (store, _) = Db::open("sqlite::memory:", Writes::new("sqlite::memory:"))
            .await
            .unwrap();
        assert_eq!(database_path("sqlite::memory:"), None);
        let sprint = store
            .create_sprint("app", "goal", None, "cli:tester@test", "b", 1)
            .await
            .unwrap();
        assert_eq!(sprint.id, "SPRINT-001");
        store.check_file().unwrap();
        assert!(!std::path::Path::new("file:sqlx-in-memory-0-migrate.lock").exists());
        assert_eq!(
            database_path("sqlite:///srv/h.db?mode=rwc"),
            Some(PathBuf::from("/srv/h.db"))
        );
    }

    /// A cursor's relaxed write that fails half-way must not leave its connection at
    /// NORMAL: the next transition committed on it would then not be durable.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_failed_relaxed_write_leaves_no_connection_at_normal() {
        let dir = std::env::temp_dir().join(format!("hanarang-relaxed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("hanarang.db").display());
        let (store, _) = Db::open(&url, Writes::new(&url)).await.unwrap();
        let store = store.own_connection();
        store.set_cursor("discord", 1).await.unwrap();
        let level = || async {
            sqlx::query_scalar::<_, i64>("PRAGMA synchronous")
                .fetch_one(&store.pool)
                .await
                .unwrap()
        };
        assert_eq!(level().await, 2, "FULL after a relaxed write");
        // The cursor's INSERT fails between the two PRAGMAs.
        sqlx::query("DROP TABLE delivery_cursors")
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(store.set_cursor("discord", 2).await.is_err());
        assert_eq!(level().await, 2, "FULL after a failed relaxed write");
        store.pool.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
