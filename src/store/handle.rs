//! `Store`: the cheap-to-clone handle every caller holds. It picks the engine by the URL's
//! scheme, and adds what every engine shares: a write waits out a lock another process
//! holds (`retry_locked`), a failed write names the database (`StoreError::Storage`), and
//! a write another process's orchestrator acts on wakes it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::database::Database;
use super::{
    CheckRecord, Command, CommandKind, CommandStatus, Commit, ForumPost, HostRecord, Lease,
    MigrationStatus, NewRun, Result, Run, RunEnd, RunLive, Spend, Sprint, SprintStatus, StoreError,
    TransitionRecord, Usage, database_name, database_path, postgres, retry_locked, sqlite,
};

/// A handle on the database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pub(super) db: Arc<dyn Database>,
    /// How errors name the database: its path, or its URL with the password hidden.
    name: Arc<str>,
    /// Where run contract files go (for SQLite: beside the database file).
    runs_dir: PathBuf,
    /// The host this store works for, among several on one PostgreSQL database
    /// (`Store::shared_by`); `None`: the only orchestrator, as with SQLite.
    scope: Option<HostScope>,
    /// Set by `stopping`, for this handle and every one made from it.
    stopping: Arc<AtomicBool>,
    /// The secret commands are signed with, read from the database on first need.
    key: Arc<tokio::sync::OnceCell<super::signing::CommandKey>>,
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
        let (db, runs_dir): (Arc<dyn Database>, PathBuf) = if crate::config::is_postgres_url(url) {
            let (db, runs_dir) = postgres::Db::open(url).await?;
            (Arc::new(db), runs_dir)
        } else {
            let (db, runs_dir) = sqlite::Db::open(url).await?;
            (Arc::new(db), runs_dir)
        };
        Ok(Store {
            db,
            name: database_name(url).into(),
            runs_dir,
            scope: None,
            stopping: Arc::default(),
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

    /// The process is stopping (a signal): from now on a write waits for a locked database
    /// only for a bound, through this handle and every one made from it.
    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// The engine and its version, e.g. `SQLite 3.50.4` or `PostgreSQL 15.20` (for
    /// `doctor`).
    pub async fn engine_version(&self) -> Result<String> {
        self.db.server_version().await
    }

    /// Whether the database is still the one this store opened: a SQLite file removed (or
    /// replaced) under a running process would take every write to a file nobody can
    /// open again.
    pub fn check_file(&self) -> Result<()> {
        self.db.check_file()
    }

    /// The same database through a connection of the orchestrator loop's own, which does
    /// all of the loop's writes one at a time. Call it on the runtime that will use it.
    pub fn single_connection(&self) -> Store {
        Store {
            db: self.db.single_connection(),
            ..self.clone()
        }
    }

    /// A write, tried again while another process holds the database's lock
    /// (`retry_locked`); a failure of the storage under it names the database.
    async fn write<T, F>(&self, what: &'static str, op: impl FnMut() -> F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        retry_locked(what, &self.stopping, op)
            .await
            .map_err(|e| e.at(&self.name))
    }

    /// Where the contract file of a sprint's runs is written: one file per sprint,
    /// rewritten in place for each of its runs (they run one at a time); creating a file
    /// per run is the slow part of a spawn on some file systems.
    /// The folder of the runs' contract files and artifact folders.
    pub fn runs_dir(&self) -> &std::path::Path {
        &self.runs_dir
    }

    pub fn contract_path(&self, sprint_id: &str) -> PathBuf {
        self.runs_dir.join(format!("{sprint_id}.contract.json"))
    }

    /// A run's own folder for what it makes besides commits (a reviewer's notes, a
    /// deployer's logs): outside the repository, kept with the run.
    pub fn artifact_dir(&self, run_id: &str) -> PathBuf {
        self.runs_dir.join(run_id)
    }

    /// Closes every connection of the pool, and waits for it (SQLite folds its log into
    /// the file as the last connection closes).
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// What a command does with its connections before it exits: closes them, so that
    /// nothing is left to a worker thread cut short by the process's end.
    pub async fn exit(self) {
        self.db.close().await;
    }

    /// Closes the loop's own connection made by `single_connection` (on PostgreSQL the
    /// shared pool, which stays open), and waits for it.
    pub async fn close_single_connection(&self) {
        self.db.close_single_connection().await;
    }

    // --- sprints ---------------------------------------------------------------------

    /// Queues a new sprint; its id is the next `SPRINT-NNN`.
    pub async fn create_sprint(
        &self,
        project: &str,
        goal: &str,
        focus: Option<&str>,
        by: &str,
        branch_template: &str,
        at: i64,
    ) -> Result<Sprint> {
        let queued = self
            .write("queue a sprint", || {
                self.db
                    .create_sprint(project, goal, focus, by, branch_template, at)
            })
            .await?;
        self.db.nudge();
        Ok(queued)
    }

    pub async fn sprint(&self, id: &str) -> Result<Option<Sprint>> {
        self.db.sprint(id).await
    }

    /// Records where a sprint's branch started (see `Database::record_base`).
    pub async fn record_base(
        &self,
        sprint_id: &str,
        base_branch: &str,
        base_commit: &str,
    ) -> Result<()> {
        self.write("record a sprint's base", || {
            self.db.record_base(sprint_id, base_branch, base_commit)
        })
        .await
    }

    /// Every sprint, oldest first.
    pub async fn sprints(&self) -> Result<Vec<Sprint>> {
        self.db.sprints().await
    }

    /// Every sprint with its total spend, oldest first (`sprint status`).
    pub async fn sprints_with_spend(&self) -> Result<Vec<(Sprint, Spend)>> {
        self.db.sprints_with_spend().await
    }

    /// Every sprint with its total spend as one compact JSON array, oldest first: what
    /// `sprint status --json` prints.
    pub async fn status_json(&self) -> Result<String> {
        SprintStatus::list_json(&self.sprints_with_spend().await?, &self.live_steps().await?)
    }

    /// The running sisters' latest steps, by sprint (the runs not ended that told one).
    pub async fn live_steps(&self) -> Result<std::collections::HashMap<String, RunLive>> {
        Ok(self
            .db
            .every_run_in_flight()
            .await?
            .into_iter()
            .filter_map(|r| Some((r.sprint_id, r.live.filter(|l| l.step.is_some())?)))
            .collect())
    }

    /// Sprints whose stage has a sister to run (planning, implementing, reviewing,
    /// deploying), oldest first. When shared: those this host owns.
    pub async fn sprints_in_stages(&self) -> Result<Vec<Sprint>> {
        self.db.sprints_in_stages().await
    }

    /// What a queued sprint waits for: the sprint holding its project's pipeline lock, else
    /// the oldest sprint queued before it in that project; `None` when it is next.
    pub async fn ahead_of(&self, sprint: &Sprint) -> Result<Option<Sprint>> {
        self.db.ahead_of(sprint).await
    }

    /// For each project whose pipeline lock is free (no sprint between planning and a
    /// terminal state), its oldest queued sprint.
    ///
    /// When shared, the host first claims such a sprint in each project it serves (two
    /// hosts never claim two sprints of one project), and the sprints are those it owns
    /// and has not started yet.
    pub async fn next_in_queues(&self) -> Result<Vec<Sprint>> {
        self.write("claim queued sprints", || self.db.next_in_queues())
            .await
    }

    /// Records a transition and everything that goes with it, in one transaction.
    /// Returns the log entry to broadcast (only after this returns: after the commit).
    /// A sprint that changed since `before` was read is `StoreError::Conflict`, a run
    /// number already taken `StoreError::RunTaken`, a sprint another host took over
    /// `StoreError::Fenced`: nothing of the transition is written.
    pub async fn commit(&self, c: Commit<'_>) -> Result<TransitionRecord> {
        self.write("commit a transition", || self.db.commit(&c))
            .await
    }

    // --- the transitions log -------------------------------------------------------------

    pub async fn transitions(&self, sprint_id: &str) -> Result<Vec<TransitionRecord>> {
        self.db.transitions(sprint_id).await
    }

    /// A sprint and its log entries after `seq`, read as one snapshot of the database, so
    /// the entries end exactly at the sprint's `last_seq` however many transitions commit
    /// meanwhile.
    pub async fn sprint_since(
        &self,
        id: &str,
        seq: i64,
    ) -> Result<Option<(Sprint, Vec<TransitionRecord>)>> {
        self.db.sprint_since(id, seq).await
    }

    /// Log entries after `global_seq`, in order, at most `limit`.
    pub async fn transitions_after(
        &self,
        global_seq: i64,
        limit: i64,
    ) -> Result<Vec<TransitionRecord>> {
        self.db.transitions_after(global_seq, limit).await
    }

    // --- runs ----------------------------------------------------------------------------

    /// Records a run before it is spawned, so a crash while it runs is found at restart.
    /// Returns its id (`domain::run_id`). A number already taken is an error: nothing is
    /// overwritten. A focus given with it is the run's: the sprint's is cleared with it.
    ///
    /// `epoch`: the sprint's as its caller read it; a sprint taken over since is
    /// `StoreError::Fenced`, and no run is recorded (SQLite's sprints are never taken over).
    pub async fn start_run(&self, new: NewRun<'_>, epoch: i64) -> Result<String> {
        self.write("record a run's start", || self.db.start_run(&new, epoch))
            .await
    }

    /// Closes a run that caused no transition, and rolls its spend up on its sprint.
    pub async fn end_run(&self, run: &RunEnd) -> Result<()> {
        self.write("record a run's end", || self.db.end_run(run))
            .await
    }

    /// What a running sister is doing now (written about once a second while it runs).
    /// Tried once: the next step replaces a step another process's lock kept out.
    pub async fn set_run_live(&self, run_id: &str, live: &RunLive) -> Result<()> {
        self.db
            .set_run_live(run_id, live)
            .await
            .map_err(|e| e.at(&self.name))
    }

    pub async fn runs(&self, sprint_id: &str) -> Result<Vec<Run>> {
        self.db.runs(sprint_id).await
    }

    /// Each agent a run found at its usage limit and whose reset is still ahead of
    /// `now_ms` (any sprint's, any host's): `(agent, paused until)`.
    pub async fn paused_agents(&self, now_ms: i64) -> Result<Vec<(String, i64)>> {
        self.db.paused_agents(now_ms).await
    }

    /// The project's checks of a sprint's runs, oldest first.
    pub async fn checks(&self, sprint_id: &str) -> Result<Vec<CheckRecord>> {
        self.db.checks(sprint_id).await
    }

    /// Runs that were spawned and never recorded an end. When shared: of the sprints this
    /// host owns.
    pub async fn runs_in_flight(&self) -> Result<Vec<Run>> {
        self.db.runs_in_flight().await
    }

    /// Runs that were spawned and never recorded an end, whichever host runs them (what
    /// the thread and `sprint status` show).
    pub async fn every_run_in_flight(&self) -> Result<Vec<Run>> {
        self.db.every_run_in_flight().await
    }

    /// What a sprint's runs cost, in all and per sister.
    pub async fn usage(&self, sprint_id: &str) -> Result<Usage> {
        self.db.usage(sprint_id).await
    }

    /// Every sprint's total spend, in one query (for `sprint status`).
    pub async fn spend_by_sprint(&self) -> Result<std::collections::HashMap<String, Spend>> {
        self.db.spend_by_sprint().await
    }

    // --- commands --------------------------------------------------------------------

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
        let command = super::NewCommand {
            sprint_id,
            kind,
            text,
            by,
            seq,
            created_at: at,
        };
        self.record_command(&command, None).await
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
        let note = super::NewCommand {
            sprint_id,
            kind: CommandKind::Note,
            text: Some(text),
            by,
            seq: Some(seq),
            created_at: at,
        };
        self.record_command(&note, message).await
    }

    async fn record_command(
        &self,
        command: &super::NewCommand<'_>,
        message: Option<&str>,
    ) -> Result<i64> {
        let key = self.command_key().await?;
        let mac = key.sign(command);
        let id = self
            .write("record a command", || {
                self.db.submit_command(command, &mac, message)
            })
            .await?;
        self.db.nudge();
        Ok(id)
    }

    /// Notes from Discord not yet marked where they were written: given to a run, or
    /// still waiting for one.
    pub async fn notes_to_mark(&self) -> Result<Vec<Command>> {
        self.db.notes_to_mark().await
    }

    /// A note marked as given, where it was written.
    pub async fn mark_note(&self, id: i64, at: i64) -> Result<()> {
        self.write("mark a note as given", || self.db.mark_note(id, at))
            .await
    }

    /// Whether a command came through hanarang's own paths: its signature verifies
    ///. A row something else wrote does not.
    pub async fn written_by_hanarang(&self, c: &Command) -> Result<bool> {
        let key = self.command_key().await?;
        Ok(key.verifies(&c.asked(), c.mac.as_deref()))
    }

    /// The database's command key, made on first need.
    pub(super) async fn command_key(&self) -> Result<&super::signing::CommandKey> {
        self.key
            .get_or_try_init(|| async {
                let candidate =
                    super::signing::CommandKey::generate().map_err(|e| StoreError::Storage {
                        db: self.name.to_string(),
                        cause: format!("cannot read /dev/urandom for the command key: {e}"),
                    })?;
                let stored = self
                    .write("record the command key", || self.db.command_key(&candidate))
                    .await?;
                super::signing::CommandKey::from_stored(&stored)
            })
            .await
    }

    /// Commands not answered yet, in the order they were given.
    ///
    /// When shared: those for the sprints this host owns, and for the queued sprints of its
    /// projects that no host has claimed yet (an abort of a queued sprint).
    pub async fn pending_commands(&self) -> Result<Vec<Command>> {
        self.db.pending_commands().await
    }

    /// Every command given for a sprint, in the order given.
    pub async fn commands_of(&self, sprint_id: &str) -> Result<Vec<Command>> {
        self.db.commands_of(sprint_id).await
    }

    pub async fn command(&self, id: i64) -> Result<Option<Command>> {
        self.db.command(id).await
    }

    /// Answers a command that caused no transition (a refusal, or nothing to do).
    pub async fn resolve_command(
        &self,
        id: i64,
        status: CommandStatus,
        result: &str,
        at: i64,
    ) -> Result<()> {
        self.write("answer a command", || {
            self.db.resolve_command(id, status, result, at)
        })
        .await
    }

    // --- the orchestrator's lease ------------------------------------------------------

    pub async fn lease(&self) -> Result<Option<Lease>> {
        self.db.lease().await
    }

    /// Takes the lease if nobody holds it, or if its holder is gone (`is_gone` says so,
    /// e.g. a dead pid on this host or a heartbeat too old). Returns the holder that keeps
    /// it otherwise. When shared, the lease is the host's name.
    pub async fn acquire_lease(
        &self,
        me: &Lease,
        is_gone: impl Fn(&Lease) -> bool + Send + Sync,
    ) -> Result<Result<(), Lease>> {
        self.write("take the lease", || self.db.acquire_lease(me, &is_gone))
            .await
    }

    /// Renews the lease; `false` when someone else took it. A host among several tries
    /// once: its lease's deadline, not a lock, decides what happens next.
    pub async fn heartbeat(&self, token: &str, at: i64) -> Result<bool> {
        if self.scope.is_some() {
            return self
                .db
                .heartbeat(token, at)
                .await
                .map_err(|e| e.at(&self.name));
        }
        self.write("renew the lease", || self.db.heartbeat(token, at))
            .await
    }

    pub async fn release_lease(&self, token: &str) -> Result<()> {
        self.db.release_lease(token).await
    }

    // --- several hosts (PostgreSQL) ---------------------------------------------------

    /// Takes over the open sprints of this host's projects whose owner's lease expired:
    /// they are this host's from now on (their in-flight runs are for it to recover).
    /// Nothing to take when the database is not shared.
    pub async fn take_over(&self) -> Result<Vec<Sprint>> {
        self.write("take over sprints", || self.db.take_over())
            .await
    }

    /// The live hosts that answer a command for `sprint`: its owner, or, while no host
    /// owns it, those serving its project. `None` for a database that is not PostgreSQL
    /// (its one orchestrator holds `lease`).
    pub async fn live_hosts_for(&self, sprint: &Sprint) -> Result<Option<Vec<String>>> {
        self.db.live_hosts_for(sprint).await
    }

    /// Wakes `wake` at once when another process writes a command, queues a sprint or
    /// frees a pipeline lock; `false` when the engine cannot tell (the caller polls).
    pub async fn listen(&self, wake: Arc<tokio::sync::Notify>) -> Result<bool> {
        self.db.listen(wake).await
    }

    /// Takes (or renews) `role`, which one host among several plays at a time (the
    /// Discord bot), under `token`: whether this token holds it now. A store not shared
    /// always holds it (it is the only orchestrator).
    pub async fn lead(&self, role: &str, token: &str) -> Result<bool> {
        self.db.lead(role, token).await
    }

    /// Gives `role` up (`lead`).
    pub async fn release_lead(&self, role: &str, token: &str) -> Result<()> {
        self.db.release_lead(role, token).await
    }

    /// The hosts sharing this database; `None` for a database that is not PostgreSQL.
    pub async fn hosts(&self) -> Result<Option<Vec<HostRecord>>> {
        self.db.hosts().await
    }

    // --- Discord forum posts --------------------------------------------------------------

    /// The sprint post whose thread this is, if any.
    pub async fn forum_post_of_thread(&self, thread_id: i64) -> Result<Option<ForumPost>> {
        self.db.forum_post_of_thread(thread_id).await
    }

    pub async fn forum_post(&self, sprint_id: &str) -> Result<Option<ForumPost>> {
        self.db.forum_post(sprint_id).await
    }

    pub async fn save_forum_post(&self, post: &ForumPost) -> Result<()> {
        self.write("save a forum post", || self.db.save_forum_post(post))
            .await
    }

    /// Records a sprint's new forum post unless one is recorded already (another bot, the
    /// one before a failover, was first), or, `replacing` a deleted one, unless another
    /// bot replaced that one first. Returns the post the sprint has now: this one, or the
    /// other bot's.
    pub async fn record_new_forum_post(
        &self,
        post: &ForumPost,
        replacing: Option<i64>,
    ) -> Result<ForumPost> {
        self.write("record a forum post", || {
            self.db.record_new_forum_post(post, replacing)
        })
        .await
    }

    // --- delivery cursors --------------------------------------------------------------

    /// How far `consumer` has delivered the log (a `global_seq`; 0 before the first).
    pub async fn cursor(&self, consumer: &str) -> Result<i64> {
        self.db.cursor(consumer).await
    }

    /// Moves a delivery cursor. An engine may write it at less than full durability: a
    /// cursor lost in a power cut only has its lines sent again.
    pub async fn set_cursor(&self, consumer: &str, global_seq: i64) -> Result<()> {
        self.write("move a delivery cursor", || {
            self.db.set_cursor(consumer, global_seq)
        })
        .await
    }
}
