//! The loop's work with a project's forge: publishing an approved branch (hanarang's git
//! pushes it, then the pull request is opened or updated), watching the pull request (its
//! checks while `verifying`, what people do there while it waits), and merging it when a
//! person approves. A visit runs in a task of its own and reports back; the loop turns
//! what it found into events for the rules and notes for the sisters. A forge that is down
//! or rate-limited is visited again later: nothing waits on it, nothing is lost.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Orchestrator, OrchestratorError};
use crate::clock::now_ms;
use crate::config::ForgeConfig;
use crate::forge::{Forge, ForgeError, ForgeToken, connect};
use crate::git::Repo;
use crate::pipeline::forge::{AfterFault, after_fault};
use crate::pipeline::{Event, State};
use crate::store::{CommandKind, Sprint, Store, TransitionRecord};

/// The wait before another try after a visit failed (the forge down, an unknown answer);
/// a merge waiting for the forge backs off up to it.
pub(super) const RETRY: Duration = Duration::from_secs(60);
/// Visits start at most this often, across every pull request: never a burst at a forge,
/// however many wait at once.
const BETWEEN_VISITS: Duration = Duration::from_millis(500);
/// The sprints waiting on a forge are read again at least this often (a takeover, a
/// command that moved one), besides whenever a visit is due or one of them moved here.
const REREAD: Duration = Duration::from_secs(60);

/// One project's forge: its settings, its API, and the token git pushes with.
pub(super) struct ProjectForge {
    pub config: ForgeConfig,
    api: Box<dyn Forge>,
    pub(super) token: ForgeToken,
    /// Who may steer and note: the forge's people are held to it by their Discord id.
    pub(super) discord: Option<crate::config::DiscordConfig>,
}

/// Writes a pull request's body for a sprint: the summary people approve from, which the
/// wiring gives (the loop does not render it: `report` does).
pub type Describe = Arc<
    dyn Fn(Sprint) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<String>> + Send>>
        + Send
        + Sync,
>;

/// The forges of the configured projects, and when each sprint's pull request is looked
/// at next.
#[derive(Default)]
pub(super) struct Forges {
    by_project: HashMap<String, Arc<ProjectForge>>,
    /// The pull requests' bodies; without it, the goal and the contract.
    pub(super) describe: Option<Describe>,
    /// Sprint → when it is visited next, and whether a visit is under way.
    watch: HashMap<String, (Instant, bool)>,
    /// Sprint → how many merge visits in a row the forge did not answer.
    merge_failures: HashMap<String, u32>,
    /// No visit starts before this.
    next_start: Option<Instant>,
    /// When the sprints waiting on a forge were last read; `None`: read them at the next
    /// pass (one of them moved).
    read_at: Option<Instant>,
}

/// What a visit found.
pub(super) struct Visit {
    pub(super) sprint_id: String,
    /// The sprint's transition the visit saw: what it found applies only while the sprint
    /// is still there.
    pub(super) seq: i64,
    pub(super) events: Vec<Event>,
    /// Reviews and comments by the project's people, each once.
    pub(super) notes: Vec<PeoplesWord>,
    /// When to look again.
    pub(super) next: Duration,
    /// A merge the forge could not be asked for (down, rate-limited): tried again later,
    /// backing off.
    pub(super) merge_unanswered: bool,
}

impl Visit {
    /// A visit to `sprint` as it stands, that found nothing yet: looked at again `next`.
    pub(super) fn of(sprint: &Sprint, next: Duration) -> Visit {
        Visit {
            sprint_id: sprint.id.clone(),
            seq: sprint.last_seq,
            events: Vec::new(),
            notes: Vec::new(),
            next,
            merge_unanswered: false,
        }
    }
}

/// A person's word on the forge, for the sisters: a note, or (a "changes requested"
/// review at `done`) a request for changes.
pub(super) struct PeoplesWord {
    /// Where it was written (`forge:review:ID`): it is recorded once.
    pub(super) key: String,
    pub(super) by: String,
    pub(super) kind: CommandKind,
    pub(super) text: String,
}

impl Forges {
    /// The forges of `config`'s projects; the error names the project whose token cannot
    /// be read.
    pub(super) fn open(config: &crate::config::Config) -> Result<Forges, String> {
        let mut by_project = HashMap::new();
        for (name, project) in &config.projects {
            let Some(forge) = &project.forge else {
                continue;
            };
            let key = format!("projects.{name}.forge");
            let token = crate::forge::read_token(forge).map_err(|e| format!("{key}: {e}"))?;
            let api = connect(forge, &token).map_err(|e| format!("{key}: {e}"))?;
            by_project.insert(
                name.clone(),
                Arc::new(ProjectForge {
                    config: forge.clone(),
                    api,
                    token,
                    discord: config.discord.clone(),
                }),
            );
        }
        Ok(Forges {
            by_project,
            ..Forges::default()
        })
    }

    pub(super) fn of(&self, project: &str) -> Option<&Arc<ProjectForge>> {
        self.by_project.get(project)
    }

    pub(super) fn any(&self) -> bool {
        !self.by_project.is_empty()
    }

    /// `sprint` is to be visited at once (it moved on since a visit saw it), or as soon as
    /// the visit under way has reported: never two at once.
    pub(super) fn now(&mut self, sprint_id: &str) {
        let busy = self.visiting(sprint_id);
        self.watch
            .insert(sprint_id.to_string(), (Instant::now(), busy));
        self.read_at = None;
    }

    /// Whether a visit to `sprint`'s forge is under way (for a sprint in `merging`: its
    /// merge is being asked).
    pub(super) fn visiting(&self, sprint_id: &str) -> bool {
        self.watch.get(sprint_id).is_some_and(|(_, busy)| *busy)
    }

    /// A sprint moved: the next pass reads which ones wait on a forge.
    pub(super) fn moved(&mut self) {
        self.read_at = None;
    }

    /// How long until a known visit is due, when the waiting sprints need not be read
    /// again for it: nothing moved, none is due, and they were read lately.
    fn quiet_for(&self, now: Instant) -> Option<Duration> {
        let read = self.read_at?;
        if now.duration_since(read) >= REREAD {
            return None;
        }
        let mut next = read + REREAD - now;
        for (at, busy) in self.watch.values() {
            if !busy {
                next = next.min(at.checked_duration_since(now)?);
            }
        }
        if let Some(start) = self.next_start {
            next = next.max(start.saturating_duration_since(now));
        }
        Some(next)
    }
}

impl ProjectForge {
    /// The forge's API.
    pub(super) fn api(&self) -> &dyn Forge {
        self.api.as_ref()
    }

    /// Fetches `branch` from the forge with hanarang's git: the commit it points at there.
    pub(super) async fn fetch(&self, repo: &Repo, branch: &str) -> Result<String, String> {
        let url = self.config.push_url().ok_or("no push URL")?;
        let user = self.api.git_user().await.map_err(|e| e.to_string())?;
        let remote = crate::git::remote::Remote {
            url: &url,
            user: &user,
            token: self.token.expose(),
        };
        crate::git::remote::fetch(repo, &remote, branch).await
    }
}

impl Orchestrator {
    /// What the deployer deploys after a merge on the forge: the merge commit on the base,
    /// fetched and checked out (detached) in the workdir, so it deploys the merged base
    /// and nothing else; the run is told so. `Err`: why it cannot (the run's
    /// `spawn_failed` detail).
    pub(super) async fn deploy_merged(
        &self,
        sprint: &Sprint,
        request: &mut crate::sister::RunRequest,
        commit: &str,
    ) -> Result<(), String> {
        let forge = self
            .forges
            .of(&sprint.project)
            .ok_or("the project no longer delivers through a forge")?;
        let base = request
            .contract
            .base_branch
            .clone()
            .ok_or("no base branch recorded")?;
        let fetched = forge.fetch(&request.repo, &base).await?;
        if fetched != commit {
            return Err(format!(
                "the forge's {base} is at {fetched}, not at the merge {commit}: something else was merged since; resume to deploy what the base holds now, or abort"
            ));
        }
        crate::git::branch::detach(&request.repo, commit).await?;
        request.contract.head = Some(commit.to_string());
        request.contract.merged = Some(commit.to_string());
        Ok(())
    }

    /// A sprint changed state: which ones wait on a forge is read again.
    pub(super) fn forges_moved(&mut self) {
        self.forges.moved();
    }

    /// Pull requests get `describe`'s bodies.
    pub fn describe_with(mut self, describe: Describe) -> Orchestrator {
        self.forges.describe = Some(describe);
        self
    }

    /// Starts a visit for each sprint waiting on its forge whose time has come; returns
    /// how long until the next one is due.
    pub(super) async fn visit_forges(&mut self) -> Result<Duration, OrchestratorError> {
        if !self.forges.any() {
            return Ok(super::IDLE);
        }
        let now = Instant::now();
        if let Some(wait) = self.forges.quiet_for(now) {
            return Ok(wait);
        }
        self.forges.read_at = Some(now);
        let waiting = self
            .store
            .sprints_in(|s| matches!(s, State::Verifying | State::Done | State::Merging))
            .await?;
        let mut next = REREAD;
        let ids: Vec<&str> = waiting.iter().map(|s| s.id.as_str()).collect();
        self.forges.watch.retain(|id, _| ids.contains(&id.as_str()));
        self.forges
            .merge_failures
            .retain(|id, _| ids.contains(&id.as_str()));
        for sprint in waiting {
            let Some(forge) = self.forges.of(&sprint.project).cloned() else {
                continue;
            };
            if !self.wants(&sprint) {
                continue;
            }
            let (at, busy) = *self
                .forges
                .watch
                .entry(sprint.id.clone())
                .or_insert((now, false));
            if busy {
                continue;
            }
            if at > now {
                next = next.min(at - now);
                continue;
            }
            if let Some(start) = self.forges.next_start
                && start > now
            {
                next = next.min(start - now);
                continue;
            }
            self.forges.next_start = Some(now + BETWEEN_VISITS);
            self.forges.watch.insert(sprint.id.clone(), (at, true));
            let log = self.store.transitions(&sprint.id).await?;
            let ask = match sprint.state {
                State::Merging => {
                    Some(super::merge::ask(&self.store, &self.config, &sprint, &log).await)
                }
                _ => None,
            };
            let failures = self
                .forges
                .merge_failures
                .get(&sprint.id)
                .copied()
                .unwrap_or(0);
            let repo = self.repo(
                &self
                    .config
                    .projects
                    .get(&sprint.project)
                    .map(|p| p.workdir.clone())
                    .unwrap_or_default(),
            );
            let tx = self.forge_tx.clone();
            let store = self.store.clone();
            let describe = self.forges.describe.clone();
            let span = tracing::info_span!("forge", sprint = %sprint.id);
            tokio::spawn(tracing::Instrument::instrument(
                async move {
                    let visit = match ask {
                        Some(ask) => {
                            super::merge::merge_visit(&forge, ask, &sprint, &log, failures).await
                        }
                        None => visit(&forge, &store, describe, &repo, &sprint, &log).await,
                    };
                    let _ = tx.send(visit);
                },
                span,
            ));
        }
        Ok(next)
    }

    /// What a visit found, applied: notes recorded once, events given to the rules while
    /// the sprint is where the visit saw it.
    pub(super) async fn forge_visited(&mut self, visit: Visit) -> Result<(), OrchestratorError> {
        self.forges.watch.insert(
            visit.sprint_id.clone(),
            (Instant::now() + visit.next, false),
        );
        match visit.merge_unanswered {
            true => {
                *self
                    .forges
                    .merge_failures
                    .entry(visit.sprint_id.clone())
                    .or_default() += 1
            }
            false => {
                self.forges.merge_failures.remove(&visit.sprint_id);
            }
        }
        self.forges.moved();
        let Some(sprint) = self.store.sprint(&visit.sprint_id).await? else {
            return Ok(());
        };
        if !visit.notes.is_empty() {
            let known = self.store.commands_of(&sprint.id).await?;
            for word in &visit.notes {
                if known
                    .iter()
                    .any(|c| c.message.as_deref() == Some(word.key.as_str()))
                {
                    continue;
                }
                self.store
                    .submit_from_forge(
                        &sprint.id,
                        word.kind,
                        &word.text,
                        &word.by,
                        sprint.last_seq,
                        now_ms(),
                        &word.key,
                    )
                    .await?;
                self.handle.wake();
            }
        }
        if sprint.last_seq != visit.seq {
            // It moved on meanwhile: what the visit found is looked for again.
            self.forges.now(&sprint.id);
            return Ok(());
        }
        let mut sprint = sprint;
        for event in visit.events {
            let Some(record) = self.transition(&sprint, event, None, None, None).await? else {
                break;
            };
            // The next event of the visit follows only this one.
            match self.store.sprint(&sprint.id).await? {
                Some(now) if now.last_seq == record.seq => sprint = now,
                _ => break,
            }
        }
        Ok(())
    }
}

/// The sprint's pull request as its log tells it: the last one published (number, URL,
/// head pushed, when), if any.
pub(super) fn published(log: &[TransitionRecord]) -> Option<(u64, String, String, i64)> {
    log.iter().rev().find_map(|t| match &t.detail {
        Event::Published { pr, url, head } => Some((*pr, url.clone(), head.clone(), t.at)),
        _ => None,
    })
}

/// Whether the branch was published since the sprint last entered `verifying`.
fn published_since_verifying(log: &[TransitionRecord]) -> bool {
    for t in log.iter().rev() {
        if matches!(t.detail, Event::Published { .. }) {
            return true;
        }
        if t.to == State::Verifying && t.from != State::Verifying {
            return false;
        }
    }
    false
}

/// One look at a sprint's forge: publish what was approved, or watch what is open.
async fn visit(
    forge: &ProjectForge,
    store: &Store,
    describe: Option<Describe>,
    repo: &Repo,
    sprint: &Sprint,
    log: &[TransitionRecord],
) -> Visit {
    let interval = forge.config.poll_interval.0;
    let next = match sprint.state {
        State::Verifying => interval,
        _ => interval * 4,
    };
    let mut out = Visit::of(sprint, next);
    let found = if sprint.state == State::Verifying && !published_since_verifying(log) {
        super::publish::publish(forge, store, describe, repo, sprint, log).await
    } else {
        super::watch::watch(forge, repo, sprint, log).await
    };
    match found {
        Ok((events, notes)) => {
            out.events = events;
            out.notes = notes;
        }
        Err(e) => match after_fault(e.fault()) {
            AfterFault::Escalate => {
                tracing::warn!(error = %e, "the forge refused: escalated");
                out.events = vec![Event::ForgeFailed {
                    reason: e.to_string(),
                }];
            }
            AfterFault::AfterReset => {
                out.next = until_reset(&e).max(interval);
                tracing::warn!(error = %e, "the forge's rate limit: looking again after its reset");
            }
            AfterFault::Later => {
                out.next = RETRY.min(interval * 2);
                tracing::warn!(error = %e, "the forge could not be visited; looking again later");
            }
        },
    }
    out
}

/// How long until the rate limit `e` names is reset (none: zero).
pub(super) fn until_reset(e: &ForgeError) -> Duration {
    match e {
        ForgeError::RateLimited { until_ms } => {
            Duration::from_millis(u64::try_from(until_ms - now_ms()).unwrap_or(0))
        }
        _ => Duration::ZERO,
    }
}

pub(super) type Found = Result<(Vec<Event>, Vec<PeoplesWord>), ForgeError>;
