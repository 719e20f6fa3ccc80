//! The one interface every engine implements: what the orchestrator, the CLI, Discord
//! and the tests ask of the database. `sqlite::Db` and `postgres::Db` each answer it with
//! their own SQL; callers reach it through `Store`, which holds one behind an `Arc`.

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    BaseCheck, CheckRecord, Command, CommandStatus, Commit, ForumPost, HostRecord, HostScope,
    Lease, NewCommand, NewRun, Result, Run, RunEnd, RunLive, Spend, Sprint, TransitionRecord,
    Usage,
};

/// Judges whether a lease's holder is gone (a dead pid on this machine, say).
/// What a test may ask of an engine beyond `Database`: to be reached as itself.
#[cfg(feature = "testing")]
pub trait Reach: std::any::Any {}
/// What a test may ask of an engine beyond `Database`: nothing, outside the tests.
#[cfg(not(feature = "testing"))]
pub trait Reach {}
impl<T: 'static> Reach for T {}

pub type IsGone<'a> = &'a (dyn Fn(&Lease) -> bool + Send + Sync);

/// One database, as the store sees it. A write waits out a lock another process holds
/// (`retry_locked`) and names the database in a storage error (`StoreError::Storage`);
/// one tried only once says so. An engine shared by several hosts
/// (PostgreSQL with a `HostScope`) answers for its host: the sprints, runs and commands
/// it owns.
///
/// `Reach`: with the `testing` feature only, `Any`, so that `store::testing` can reach the
/// engine itself; hanarang never does.
#[async_trait]
pub trait Database: Reach + Send + Sync + std::fmt::Debug {
    // --- the connection -----------------------------------------------------------------

    /// Whether the database is still the one opened: a SQLite file removed (or replaced)
    /// under a running process would take every write to a file nobody can open again;
    /// always fine for a server.
    fn check_file(&self) -> Result<()>;

    /// The same database through a connection of the caller's own (the loop's,
    /// `Store::single_connection`); call it on the runtime that will use it.
    fn single_connection(&self) -> Arc<dyn Database>;

    /// Closes every connection of the pool, and waits for it (SQLite folds its log into
    /// the file as the last connection closes).
    async fn close(&self);

    /// Closes the loop's own connection made by `single_connection` (on PostgreSQL the
    /// shared pool, which stays open), and waits for it.
    async fn close_single_connection(&self);

    /// The same database for host `scope` among several (`Store::shared_by`); `None` when
    /// the engine is never shared (SQLite: one orchestrator drives every sprint).
    fn shared_by(&self, scope: HostScope) -> Option<Arc<dyn Database>>;

    /// Wakes `wake` at once when another process writes a command, queues a sprint or
    /// frees a pipeline lock; `false` when the engine cannot tell (the caller polls).
    async fn listen(&self, wake: Arc<tokio::sync::Notify>) -> Result<bool>;

    // --- sprints ------------------------------------------------------------------------

    /// Queues a new sprint; its id is the next `SPRINT-NNN`, returned only once committed.
    /// Wakes another process's orchestrator.
    async fn create_sprint(
        &self,
        project: &str,
        goal: &str,
        focus: Option<&str>,
        by: &str,
        branch_template: &str,
        at: i64,
    ) -> Result<Sprint>;
    async fn sprint(&self, id: &str) -> Result<Option<Sprint>>;
    /// Records the branch a sprint's branch was created from and its commit; a base
    /// already recorded stays (a restart reuses the branch it made).
    async fn record_base(
        &self,
        sprint_id: &str,
        base_branch: &str,
        base_commit: &str,
    ) -> Result<()>;
    /// Every sprint, oldest first.
    async fn sprints(&self) -> Result<Vec<Sprint>>;
    /// Every sprint with the spend rolled up on it, oldest first (`sprint status`).
    async fn sprints_with_spend(&self) -> Result<Vec<(Sprint, Spend)>>;
    /// Sprints whose stage has a sister to run (planning, implementing, reviewing,
    /// deploying), oldest first. When shared: those this host owns.
    async fn sprints_in_stages(&self) -> Result<Vec<Sprint>> {
        self.sprints_in(|s| s.stage().is_some()).await
    }
    /// Sprints in a state `which` keeps, oldest first. When shared: those this host owns.
    async fn sprints_in(&self, which: fn(crate::pipeline::State) -> bool) -> Result<Vec<Sprint>>;
    /// What a queued sprint waits for: the sprint holding its project's pipeline lock, else
    /// the oldest sprint queued before it in that project; `None` when it is next.
    async fn ahead_of(&self, sprint: &Sprint) -> Result<Option<Sprint>>;
    /// For each project whose pipeline lock is free (no sprint between planning and a
    /// terminal state), its oldest queued sprint.
    ///
    /// When shared, the host first claims such a sprint in each project it serves (two
    /// hosts never claim two sprints of one project), and the sprints are those it owns
    /// and has not started yet.
    async fn next_in_queues(&self) -> Result<Vec<Sprint>>;
    /// Records a transition and everything that goes with it, in one transaction.
    /// Returns the log entry to broadcast (only after this returns: after the commit).
    /// A sprint that changed since `before` was read is `StoreError::Conflict`, a run
    /// number already taken `StoreError::RunTaken`, a sprint another host took over
    /// `StoreError::Fenced`: nothing of the transition is written.
    async fn commit(&self, c: Commit<'_>) -> Result<TransitionRecord>;

    // --- the transitions log ------------------------------------------------------------

    async fn transitions(&self, sprint_id: &str) -> Result<Vec<TransitionRecord>>;
    /// A sprint and its log entries after `seq`, read as one snapshot of the database, so
    /// the entries end exactly at the sprint's `last_seq` however many transitions commit
    /// meanwhile.
    async fn sprint_since(
        &self,
        id: &str,
        seq: i64,
    ) -> Result<Option<(Sprint, Vec<TransitionRecord>)>>;
    /// Log entries after `global_seq`, in order, at most `limit`.
    async fn transitions_after(&self, global_seq: i64, limit: i64)
    -> Result<Vec<TransitionRecord>>;

    // --- runs -----------------------------------------------------------------------------

    /// Records a run before it is spawned, so a crash while it runs is found at restart.
    /// Returns its id (`domain::run_id`). A number already taken is an error: nothing is
    /// overwritten. A focus given with it is the run's: the sprint's is cleared with it.
    ///
    /// `epoch`: the sprint's as its caller read it; a sprint taken over since is
    /// `StoreError::Fenced`, and no run is recorded (SQLite's sprints are never taken over).
    async fn start_run(&self, new: NewRun<'_>, epoch: i64) -> Result<String>;
    /// Closes a run that caused no transition, and rolls its spend up on its sprint.
    async fn end_run(&self, run: &RunEnd) -> Result<()>;
    /// What a running sister is doing now (written about once a second while it runs); a
    /// run that ended keeps what it has. Tried once: the next step replaces a step another
    /// process's lock kept out.
    async fn set_run_live(&self, run_id: &str, live: &RunLive) -> Result<()>;
    async fn runs(&self, sprint_id: &str) -> Result<Vec<Run>>;
    /// Runs that were spawned and never recorded an end. When shared: of the sprints this
    /// host owns.
    async fn runs_in_flight(&self) -> Result<Vec<Run>>;
    /// Runs that were spawned and never recorded an end, whichever host runs them (what
    /// the thread and `sprint status` show).
    async fn every_run_in_flight(&self) -> Result<Vec<Run>> {
        self.runs_in_flight().await
    }
    /// Each agent a run found at its usage limit and whose reset is still ahead of
    /// `now_ms` (any sprint's, any host's): `(agent, paused until)`, its latest reset.
    async fn paused_agents(&self, now_ms: i64) -> Result<Vec<(String, i64)>>;
    /// The project's checks of a sprint's runs, oldest first.
    async fn checks(&self, sprint_id: &str) -> Result<Vec<CheckRecord>>;
    /// The latest check made at `commit` as a base of a sprint of `project` (any sprint's).
    async fn base_check(&self, project: &str, commit: &str) -> Result<Option<CheckRecord>>;
    /// What the forge's `repository` (its API and owner/name) said of its checks at
    /// `commit`, when it was read.
    async fn forge_base_checks(
        &self,
        repository: &str,
        commit: &str,
    ) -> Result<Option<Vec<BaseCheck>>>;
    /// Keeps what the forge's `repository` said of its checks at `commit` (the latest read
    /// wins).
    async fn save_forge_base_checks(
        &self,
        repository: &str,
        commit: &str,
        checks: &[BaseCheck],
        at: i64,
    ) -> Result<()>;
    /// What a sprint's runs cost, in all and per sister.
    async fn usage(&self, sprint_id: &str) -> Result<Usage>;
    /// Every sprint's total spend, in one query (for `sprint status`).
    async fn spend_by_sprint(&self) -> Result<std::collections::HashMap<String, Spend>>;

    // --- commands -------------------------------------------------------------------------

    /// Records a command as given, with its signature `mac` (`Store::submit_command` signs
    /// it) and, for a note from Discord, where it was written (`<channel>/<message>`).
    /// Wakes another process's orchestrator.
    async fn record_command(
        &self,
        command: &NewCommand<'_>,
        mac: &str,
        message: Option<&str>,
    ) -> Result<i64>;
    /// Notes from Discord not yet marked where they were written: given to a run, or
    /// still waiting for one.
    async fn notes_to_mark(&self) -> Result<Vec<Command>>;
    /// A note marked as given, where it was written.
    async fn mark_note(&self, id: i64, at: i64) -> Result<()>;
    /// The secret commands are signed with (`store::signing`): read, or made from
    /// `candidate` when the database has none yet (the first writer's wins).
    async fn command_key(&self, candidate: &[u8]) -> Result<Vec<u8>>;
    /// Commands not answered yet, in the order they were given.
    ///
    /// When shared: those for the sprints this host owns, and for the queued sprints of its
    /// projects that no host has claimed yet (an abort of a queued sprint).
    async fn pending_commands(&self) -> Result<Vec<Command>>;
    /// Every command given for a sprint, in the order given.
    async fn commands_of(&self, sprint_id: &str) -> Result<Vec<Command>>;
    async fn command(&self, id: i64) -> Result<Option<Command>>;
    /// Answers a command that caused no transition (a refusal, or nothing to do).
    async fn resolve_command(
        &self,
        id: i64,
        status: CommandStatus,
        result: &str,
        at: i64,
    ) -> Result<()>;

    // --- the orchestrator's lease, and several hosts ----------------------------------------

    async fn lease(&self) -> Result<Option<Lease>>;
    /// Takes the lease if nobody holds it, or if its holder is gone (`is_gone` says so,
    /// e.g. a dead pid on this host or a heartbeat too old). Returns the holder that keeps
    /// it otherwise. When shared, the lease is the host's name.
    async fn acquire_lease(
        &self,
        me: &Lease,
        is_gone: IsGone<'_>,
    ) -> Result<std::result::Result<(), Lease>>;
    /// Renews the lease; `false` when someone else took it. A host among several tries
    /// once: its lease's deadline, not a lock, decides what happens next.
    async fn heartbeat(&self, token: &str, at: i64) -> Result<bool>;
    /// Gives the lease up. Tried once.
    async fn release_lease(&self, token: &str) -> Result<()>;
    /// Takes over the open sprints of this host's projects whose owner's lease expired:
    /// they are this host's from now on (their in-flight runs are for it to recover).
    /// Nothing to take when the database is not shared.
    async fn take_over(&self) -> Result<Vec<Sprint>> {
        Ok(Vec::new())
    }
    /// The live hosts that answer a command for `sprint`: its owner, or, while no host
    /// owns it, those serving its project. `None` for a database that is not PostgreSQL
    /// (its one orchestrator holds `lease`).
    async fn live_hosts_for(&self, _sprint: &Sprint) -> Result<Option<Vec<String>>> {
        Ok(None)
    }
    /// The hosts sharing this database; `None` for a database that is not PostgreSQL.
    async fn hosts(&self) -> Result<Option<Vec<HostRecord>>> {
        Ok(None)
    }
    /// Takes (or renews) `role`, which one host among several plays at a time (the
    /// Discord bot), under `token`: whether this token holds it now. A database not shared
    /// always grants it (its one orchestrator plays every role). Tried once: it is asked
    /// again at its next renewal.
    async fn lead(&self, _role: &str, _token: &str) -> Result<bool> {
        Ok(true)
    }
    /// Gives `role` up (`lead`). Tried once.
    async fn release_lead(&self, _role: &str, _token: &str) -> Result<()> {
        Ok(())
    }

    // --- Discord forum posts and delivery cursors ---------------------------------------------

    async fn forum_post(&self, sprint_id: &str) -> Result<Option<ForumPost>>;
    /// The sprint post whose thread this is, if any.
    async fn forum_post_of_thread(&self, thread_id: i64) -> Result<Option<ForumPost>>;
    async fn save_forum_post(&self, post: &ForumPost) -> Result<()>;
    /// Records a sprint's new forum post unless one is recorded already (another bot, the
    /// one before a failover, was first), or, `replacing` a deleted one, unless another
    /// bot replaced that one first. Returns the post the sprint has now: this one, or the
    /// other bot's.
    async fn record_new_forum_post(
        &self,
        post: &ForumPost,
        replacing: Option<i64>,
    ) -> Result<ForumPost>;
    /// How far `consumer` has delivered the log (a `global_seq`; 0 before the first).
    async fn cursor(&self, consumer: &str) -> Result<i64>;
    /// Moves a delivery cursor. An engine may write it at less than full durability: a
    /// cursor lost in a power cut only has its lines sent again.
    async fn set_cursor(&self, consumer: &str, global_seq: i64) -> Result<()>;
}
