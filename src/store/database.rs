//! The one interface every engine implements: what the orchestrator, the CLI,
//! Discord and the tests ask of the database. `sqlite::Db` and `postgres::Db` each answer
//! it with their own SQL; `Store` holds one behind an `Arc` and adds what all engines
//! share (waiting out another process's lock, naming the database in errors).

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    CheckRecord, Command, CommandStatus, Commit, ForumPost, HostRecord, HostScope, Lease,
    NewCommand, NewRun, Result, Run, RunEnd, RunLive, Spend, Sprint, TransitionRecord, Usage,
};

/// Judges whether a lease's holder is gone (a dead pid on this machine, say).
pub type IsGone<'a> = &'a (dyn Fn(&Lease) -> bool + Send + Sync);

/// One database, as the store sees it. Each call is answered once: retries are the
/// store's. An engine shared by several hosts (PostgreSQL with a `HostScope`) answers for
/// its host: the sprints, runs and commands it owns.
#[async_trait]
pub trait Database: Send + Sync + std::fmt::Debug {
    // --- the connection -----------------------------------------------------------------

    /// The engine and its version, e.g. `SQLite 3.50.4`.
    async fn server_version(&self) -> Result<String>;

    /// Whether the database is still the one opened (a SQLite file removed under a running
    /// process); always fine for a server.
    fn check_file(&self) -> Result<()>;

    /// The same database through a connection of the caller's own (the loop's); call it on
    /// the runtime that will use it.
    fn single_connection(&self) -> Arc<dyn Database>;

    /// Closes every connection and waits for it.
    async fn close(&self);

    /// Closes what `single_connection` opened (and nothing shared).
    async fn close_single_connection(&self);

    /// The same database for host `scope` among several; `None` when the engine is never
    /// shared (SQLite: one orchestrator drives every sprint).
    fn shared_by(&self, scope: HostScope) -> Option<Arc<dyn Database>>;

    /// Wakes `wake` when another process writes something for the orchestrator; `false`
    /// when the engine cannot tell (the caller polls).
    async fn listen(&self, wake: Arc<tokio::sync::Notify>) -> Result<bool>;

    /// After a write another process's orchestrator acts on: wakes it, if the engine does
    /// not by itself.
    fn nudge(&self) {}

    // --- sprints ------------------------------------------------------------------------

    /// Queues a new sprint (the next `SPRINT-NNN`); returned only once committed.
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
    async fn sprints(&self) -> Result<Vec<Sprint>>;
    /// Every sprint with the spend rolled up on it, oldest first.
    async fn sprints_with_spend(&self) -> Result<Vec<(Sprint, Spend)>>;
    async fn sprints_in_stages(&self) -> Result<Vec<Sprint>>;
    async fn ahead_of(&self, sprint: &Sprint) -> Result<Option<Sprint>>;
    async fn next_in_queues(&self) -> Result<Vec<Sprint>>;
    async fn commit(&self, c: &Commit<'_>) -> Result<TransitionRecord>;

    // --- the transitions log ------------------------------------------------------------

    async fn transitions(&self, sprint_id: &str) -> Result<Vec<TransitionRecord>>;
    async fn sprint_since(
        &self,
        id: &str,
        seq: i64,
    ) -> Result<Option<(Sprint, Vec<TransitionRecord>)>>;
    async fn transitions_after(&self, global_seq: i64, limit: i64)
    -> Result<Vec<TransitionRecord>>;

    // --- runs -----------------------------------------------------------------------------

    async fn start_run(&self, new: &NewRun<'_>, epoch: i64) -> Result<String>;
    async fn end_run(&self, run: &RunEnd) -> Result<()>;
    /// A running run's latest step and counts; a run that ended keeps what it has.
    async fn set_run_live(&self, run_id: &str, live: &RunLive) -> Result<()>;
    async fn runs(&self, sprint_id: &str) -> Result<Vec<Run>>;
    async fn runs_in_flight(&self) -> Result<Vec<Run>>;
    /// Every host's runs in flight, whichever host's store asks.
    async fn every_run_in_flight(&self) -> Result<Vec<Run>> {
        self.runs_in_flight().await
    }
    /// Each agent still at its usage limit at `now_ms`, whatever sprint found it out: its
    /// latest reset (unix ms).
    async fn paused_agents(&self, now_ms: i64) -> Result<Vec<(String, i64)>>;
    /// The project's checks of a sprint's runs, oldest first.
    async fn checks(&self, sprint_id: &str) -> Result<Vec<CheckRecord>>;
    async fn usage(&self, sprint_id: &str) -> Result<Usage>;
    async fn spend_by_sprint(&self) -> Result<std::collections::HashMap<String, Spend>>;

    // --- commands -------------------------------------------------------------------------

    /// `message`: where a note from Discord was written (`<channel>/<message>`).
    async fn submit_command(
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
    async fn pending_commands(&self) -> Result<Vec<Command>>;
    async fn commands_of(&self, sprint_id: &str) -> Result<Vec<Command>>;
    async fn command(&self, id: i64) -> Result<Option<Command>>;
    async fn resolve_command(
        &self,
        id: i64,
        status: CommandStatus,
        result: &str,
        at: i64,
    ) -> Result<()>;

    // --- the orchestrator's lease, and several hosts ----------------------------------------

    async fn lease(&self) -> Result<Option<Lease>>;
    async fn acquire_lease(
        &self,
        me: &Lease,
        is_gone: IsGone<'_>,
    ) -> Result<std::result::Result<(), Lease>>;
    async fn heartbeat(&self, token: &str, at: i64) -> Result<bool>;
    async fn release_lease(&self, token: &str) -> Result<()>;
    /// Takes over the sprints of expired hosts; nothing when not shared.
    async fn take_over(&self) -> Result<Vec<Sprint>> {
        Ok(Vec::new())
    }
    /// The live hosts that answer for `sprint`; `None` when the engine has no hosts.
    async fn live_hosts_for(&self, _sprint: &Sprint) -> Result<Option<Vec<String>>> {
        Ok(None)
    }
    /// The hosts on record; `None` when the engine has no hosts.
    async fn hosts(&self) -> Result<Option<Vec<HostRecord>>> {
        Ok(None)
    }
    /// Takes or renews `role`; a database that is not shared always grants it.
    async fn lead(&self, _role: &str, _token: &str) -> Result<bool> {
        Ok(true)
    }
    async fn release_lead(&self, _role: &str, _token: &str) -> Result<()> {
        Ok(())
    }

    // --- Discord forum posts and delivery cursors ---------------------------------------------

    async fn forum_post(&self, sprint_id: &str) -> Result<Option<ForumPost>>;
    /// The post whose thread this is, if it is a sprint's.
    async fn forum_post_of_thread(&self, thread_id: i64) -> Result<Option<ForumPost>>;
    async fn save_forum_post(&self, post: &ForumPost) -> Result<()>;
    async fn record_new_forum_post(
        &self,
        post: &ForumPost,
        replacing: Option<i64>,
    ) -> Result<ForumPost>;
    async fn cursor(&self, consumer: &str) -> Result<i64>;
    async fn set_cursor(&self, consumer: &str, global_seq: i64) -> Result<()>;

    // --- for the tests and benchmarks only (`store::testing`) ---------------------------------

    #[cfg(feature = "testing")]
    async fn submit_commands_together(
        &self,
        sprint_id: &str,
        kinds: &[crate::store::CommandKind],
        macs: &[String],
    ) -> Result<()>;
    #[cfg(feature = "testing")]
    async fn record_newer_migration(&self, version: i64) -> Result<()>;
    #[cfg(feature = "testing")]
    async fn overwrite_sprint_state(&self, sprint_id: &str, state: &str) -> Result<()>;
    #[cfg(feature = "testing")]
    async fn count_runs(&self) -> Result<i64>;
    /// The engine itself, for what only one engine can be asked.
    #[cfg(feature = "testing")]
    fn as_any(&self) -> &dyn std::any::Any;
}
