//! `Store`: the cheap-to-clone handle every caller holds. It picks the engine by the URL's
//! scheme and opens it, makes the handles for the loop's own connection and for a host
//! among several, signs and verifies commands, and knows where runs' files go. Every
//! other call is the engine's own, through `Database` (`Deref`).

use std::path::PathBuf;
use std::sync::Arc;

use super::database::Database;
use super::signing::CommandKey;
use super::{
    Command, CommandKind, MigrationStatus, NewCommand, Result, RunLive, StoreError, Writes,
    database_path, postgres, sqlite,
};

/// A handle on the database; cheap to clone. It is a `Database`: `store.sprint(id)`,
/// `store.commit(c)` are the engine's calls.
#[derive(Debug, Clone)]
pub struct Store {
    pub(super) db: Arc<dyn Database>,
    /// How the engine's writes wait out a lock and name the database, shared with it.
    writes: Writes,
    /// Where run contract files go (for SQLite: beside the database file).
    runs_dir: PathBuf,
    /// The host this store works for, among several on one PostgreSQL database
    /// (`Store::shared_by`); `None`: the only orchestrator, as with SQLite.
    scope: Option<HostScope>,
    /// The secret commands are signed with, read from the database on first need.
    key: Arc<tokio::sync::OnceCell<CommandKey>>,
}

impl std::ops::Deref for Store {
    type Target = dyn Database;

    fn deref(&self) -> &Self::Target {
        &*self.db
    }
}

/// A host among several on one PostgreSQL database: its name, the projects it
/// serves, and how long its lease lasts unrenewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostScope {
    pub name: String,
    pub projects: Vec<String>,
    pub lease_ttl_ms: i64,
    /// `[host] max_sisters`: it claims and takes over no more sprints than it can run.
    pub max_sisters: Option<u32>,
}

impl Store {
    /// Opens (creating if missing) the database `url` names and applies the embedded
    /// migrations; a database that already has tables is backed up before an upgrade
    /// touches it.
    pub async fn open(url: &str) -> Result<Store> {
        let writes = Writes::new(url);
        let (db, runs_dir): (Arc<dyn Database>, PathBuf) = if crate::config::is_postgres_url(url) {
            let (db, runs_dir) = postgres::Db::open(url, writes.clone()).await?;
            (Arc::new(db), runs_dir)
        } else {
            let (db, runs_dir) = sqlite::Db::open(url, writes.clone()).await?;
            (Arc::new(db), runs_dir)
        };
        Ok(Store {
            db,
            writes,
            runs_dir,
            scope: None,
            key: Arc::default(),
        })
    }

    /// Opens a database that already exists, for the commands that only read it or act on
    /// sprints in it: they never create one (`StoreError::NoDatabase` names where they
    /// looked).
    pub async fn open_existing(url: &str) -> Result<Store> {
        if let Some(path) = database_path(url)
            && !path.exists()
        {
            return Err(StoreError::NoDatabase(
                std::path::absolute(&path).unwrap_or(path),
            ));
        }
        if crate::config::is_postgres_url(url)
            && Store::migration_status(url).await? == MigrationStatus::NotCreated
        {
            return Err(StoreError::NotSetUp(crate::config::redacted(url)));
        }
        Store::open(url).await
    }

    /// Reads, without changing anything, which migrations a database still needs.
    pub async fn migration_status(url: &str) -> Result<MigrationStatus> {
        if crate::config::is_postgres_url(url) {
            postgres::Db::migration_status(url).await
        } else {
            sqlite::Db::migration_status(url).await
        }
    }

    /// The PostgreSQL server's version at `url`, without setting anything up (for
    /// `doctor`).
    pub async fn postgres_version_at(url: &str) -> Result<String> {
        postgres::Db::version_at(url).await
    }

    /// The same database, for the orchestrator of host `scope` among several: its lease
    /// is the host's, it drives only the sprints it claimed or took over, and it answers
    /// only their commands. Only PostgreSQL is shared; a SQLite store is returned as it
    /// is (one orchestrator drives every sprint).
    pub fn shared_by(&self, scope: HostScope) -> Store {
        let mut store = self.clone();
        if let Some(db) = self.db.shared_by(scope.clone()) {
            store.db = db;
            store.scope = Some(scope);
        }
        store
    }

    /// The host this store works for, when it shares the database with others.
    pub fn scope(&self) -> Option<&HostScope> {
        self.scope.as_ref()
    }

    /// The same database through a connection of the orchestrator loop's own, which does
    /// all of the loop's writes one at a time. Call it on the runtime that will use it.
    pub fn single_connection(&self) -> Store {
        Store {
            db: self.db.single_connection(),
            ..self.clone()
        }
    }

    /// The process is stopping (a signal): from now on a write waits for a locked database
    /// only for a bound, through this handle and every one made from it.
    pub fn stopping(&self) {
        self.writes.stop();
    }

    /// What a command does with its connections before it exits: closes them, so that
    /// nothing is left to a worker thread cut short by the process's end.
    pub async fn exit(self) {
        self.db.close().await;
    }

    /// The folder of the runs' contract files and artifact folders.
    pub fn runs_dir(&self) -> &std::path::Path {
        &self.runs_dir
    }

    /// Where the contract file of a sprint's runs is written: one file per sprint,
    /// rewritten in place for each of its runs (they run one at a time); creating a file
    /// per run is the slow part of a spawn on some file systems.
    pub fn contract_path(&self, sprint_id: &str) -> PathBuf {
        self.runs_dir.join(format!("{sprint_id}.contract.json"))
    }

    /// A run's own folder for what it makes besides commits (a reviewer's notes, a
    /// deployer's logs): outside the repository, kept with the run.
    pub fn artifact_dir(&self, run_id: &str) -> PathBuf {
        self.runs_dir.join(run_id)
    }

    // --- what `sprint status` shows ----------------------------------------------------

    /// The running sisters' latest steps, by sprint (the runs not ended that told one).
    pub async fn live_steps(&self) -> Result<std::collections::HashMap<String, RunLive>> {
        Ok(self
            .every_run_in_flight()
            .await?
            .into_iter()
            .filter_map(|r| Some((r.sprint_id, r.live.filter(|l| l.step.is_some())?)))
            .collect())
    }

    // --- signed commands -----------------------------------------------------------------

    /// Records a user's command, given against the sprint's transition `seq` (its
    /// `last_seq` as the person saw it); the orchestrator applies it and writes the answer.
    pub async fn submit_command(
        &self,
        sprint_id: &str,
        kind: CommandKind,
        text: Option<&str>,
        by: &str,
        seq: Option<i64>,
        at: i64,
    ) -> Result<i64> {
        let command = NewCommand {
            sprint_id,
            kind,
            text,
            by,
            seq,
            created_at: at,
        };
        self.submit_signed(&command, None).await
    }

    /// Records a note; from Discord, with where it was written
    /// (`<channel id>/<message id>`), so it can be marked there once a run is given it.
    pub async fn submit_note(
        &self,
        sprint_id: &str,
        text: &str,
        by: &str,
        seq: i64,
        at: i64,
        message: Option<&str>,
    ) -> Result<i64> {
        let note = NewCommand {
            sprint_id,
            kind: CommandKind::Note,
            text: Some(text),
            by,
            seq: Some(seq),
            created_at: at,
        };
        self.submit_signed(&note, message).await
    }

    /// Records a person's word on the forge as a command of `kind` (a note, a request for
    /// changes), with `key`, where it was written (`forge:review:ID`): the caller records
    /// each key once.
    #[allow(clippy::too_many_arguments)]
    pub async fn submit_from_forge(
        &self,
        sprint_id: &str,
        kind: CommandKind,
        text: &str,
        by: &str,
        seq: i64,
        at: i64,
        key: &str,
    ) -> Result<i64> {
        let command = NewCommand {
            sprint_id,
            kind,
            text: Some(text),
            by,
            seq: Some(seq),
            created_at: at,
        };
        self.submit_signed(&command, Some(key)).await
    }

    async fn submit_signed(&self, command: &NewCommand<'_>, message: Option<&str>) -> Result<i64> {
        let mac = self.signing_key().await?.sign(command);
        self.db.record_command(command, &mac, message).await
    }

    /// Whether a command came through hanarang's own paths: its signature verifies. A
    /// row something else wrote does not.
    pub async fn written_by_hanarang(&self, c: &Command) -> Result<bool> {
        let key = self.signing_key().await?;
        Ok(key.verifies(&c.asked(), c.mac.as_deref()))
    }

    /// The database's command key, made on first need.
    pub(super) async fn signing_key(&self) -> Result<&CommandKey> {
        self.key
            .get_or_try_init(|| async {
                let candidate = CommandKey::generate().map_err(|e| StoreError::Storage {
                    db: self.writes.db.to_string(),
                    cause: format!("cannot read /dev/urandom for the command key: {e}"),
                })?;
                CommandKey::from_stored(&self.db.command_key(&candidate).await?)
            })
            .await
    }
}
