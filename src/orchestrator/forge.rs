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
use crate::config::{CiPolicy, ForgeConfig};
use crate::forge::{
    CheckState, Forge, ForgeError, ForgeToken, PrState, PullRequest, ReviewState, connect,
};
use crate::git::Repo;
use crate::pipeline::fsm::FailedCheck;
use crate::pipeline::{Event, State};
use crate::store::{CommandKind, Sprint, Store, TransitionRecord};

/// How much of a failed check's log is read, and how many of its last lines are kept.
const LOG_BYTES: usize = 64 * 1024;
const LOG_LINES: usize = 40;
/// The wait before another try after a visit failed (the forge down, an unknown answer);
/// a merge waiting for the forge backs off up to it.
const RETRY: Duration = Duration::from_secs(60);
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
    token: ForgeToken,
    /// Who may steer and note: the forge's people are held to it by their Discord id.
    discord: Option<crate::config::DiscordConfig>,
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
    describe: Option<Describe>,
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
    sprint_id: String,
    /// The sprint's transition the visit saw: what it found applies only while the sprint
    /// is still there.
    seq: i64,
    events: Vec<Event>,
    /// Reviews and comments by the project's people, each once.
    notes: Vec<PeoplesWord>,
    /// When to look again.
    next: Duration,
    /// A merge the forge could not be asked for (down, rate-limited): tried again later,
    /// backing off.
    merge_unanswered: bool,
}

/// A person's word on the forge, for the sisters: a note, or (a "changes requested"
/// review at `done`) a request for changes.
struct PeoplesWord {
    /// Where it was written (`forge:review:ID`): it is recorded once.
    key: String,
    by: String,
    kind: CommandKind,
    text: String,
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
                        Some(ask) => merge_visit(&forge, ask, &sprint, &log, failures).await,
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
    let mut out = Visit {
        sprint_id: sprint.id.clone(),
        seq: sprint.last_seq,
        events: Vec::new(),
        notes: Vec::new(),
        next: if sprint.state == State::Verifying {
            interval
        } else {
            interval * 4
        },
        merge_unanswered: false,
    };
    let found = if sprint.state == State::Verifying && !published_since_verifying(log) {
        publish(forge, store, describe, repo, sprint, log).await
    } else {
        watch(forge, repo, sprint, log).await
    };
    match found {
        Ok((events, notes)) => {
            out.events = events;
            out.notes = notes;
        }
        // What trying again will not mend: a person decides.
        Err(
            e
            @ (ForgeError::Unauthorized(_) | ForgeError::NotFound(_) | ForgeError::Refused { .. }),
        ) => {
            tracing::warn!(error = %e, "the forge refused: escalated");
            out.events = vec![Event::ForgeFailed {
                reason: e.to_string(),
            }];
        }
        Err(ForgeError::RateLimited { until_ms }) => {
            let wait = u64::try_from(until_ms - now_ms()).unwrap_or(0);
            out.next = Duration::from_millis(wait).max(interval);
            tracing::warn!(error = %ForgeError::RateLimited { until_ms }, "the forge's rate limit: looking again after its reset");
        }
        Err(e) => {
            out.next = RETRY.min(interval * 2);
            tracing::warn!(error = %e, "the forge could not be visited; looking again later");
        }
    }
    out
}

/// A merge visit to a sprint in `merging` (`failures`: the visits before that the forge
/// did not answer): its answer as an event; a forge that cannot answer is tried again,
/// backing off, and the thread told once.
async fn merge_visit(
    forge: &ProjectForge,
    ask: Result<super::merge::MergeAsk, Event>,
    sprint: &Sprint,
    log: &[TransitionRecord],
    failures: u32,
) -> Visit {
    let interval = forge.config.poll_interval.0;
    let mut out = Visit {
        sprint_id: sprint.id.clone(),
        seq: sprint.last_seq,
        events: Vec::new(),
        notes: Vec::new(),
        next: interval,
        merge_unanswered: false,
    };
    let answer = match ask {
        Ok(ask) => super::merge::visit(forge, &ask).await,
        Err(event) => Ok(event),
    };
    match answer {
        Ok(event) => out.events = vec![event],
        Err(e) => {
            tracing::warn!(error = %e, "the forge could not be asked to merge; asking again later");
            out.merge_unanswered = true;
            out.next = match &e {
                ForgeError::RateLimited { until_ms } => {
                    Duration::from_millis(u64::try_from(until_ms - now_ms()).unwrap_or(0))
                }
                _ => Duration::ZERO,
            }
            .max(
                interval
                    .saturating_mul(2u32.saturating_pow(failures.min(16)))
                    .min(RETRY),
            );
            if !super::merge::delay_told(log) {
                out.events = vec![Event::MergeDelayed {
                    reason: e.to_string(),
                }];
            }
        }
    }
    out
}

type Found = Result<(Vec<Event>, Vec<PeoplesWord>), ForgeError>;

/// Pushes the reviewed branch (onto what hanarang pushed before, never over another's
/// push) and opens its pull request, or updates the one open.
async fn publish(
    forge: &ProjectForge,
    store: &Store,
    describe: Option<Describe>,
    repo: &Repo,
    sprint: &Sprint,
    log: &[TransitionRecord],
) -> Found {
    let head = crate::git::facts::branch_head(repo, &sprint.branch)
        .await
        .ok_or_else(|| ForgeError::Invalid(format!("the branch {} is gone", sprint.branch)))?;
    if let Some(held) = ci_files_held(forge, repo, sprint, log, &head).await? {
        return Ok((held.into_iter().collect(), Vec::new()));
    }
    let before = published(log).map(|(_, _, head, _)| head);
    let url = forge
        .config
        .push_url()
        .ok_or_else(|| ForgeError::Invalid("no push URL".into()))?;
    let user = forge.api.git_user().await?;
    let remote = crate::git::remote::Remote {
        url: &url,
        user: &user,
        token: forge.token.expose(),
    };
    if before.as_deref() != Some(head.as_str()) {
        crate::git::remote::push(repo, &remote, &sprint.branch, &head, before.as_deref())
            .await
            .map_err(|why| match unreachable(&why) {
                true => ForgeError::Unavailable(why),
                // Refused: a branch there that hanarang did not push, a token without write.
                false => ForgeError::Refused {
                    status: 0,
                    message: why,
                },
            })?;
    }
    let title = crate::forge::words::title(&sprint.goal);
    let described = match describe {
        Some(describe) => describe(sprint.clone()).await,
        None => None,
    };
    // Whatever the summary quotes of the agents, nothing of it acts on the forge.
    let body = crate::forge::words::defused(&match described {
        Some(text) => text,
        None => body(store, sprint, &head).await,
    });
    let pull = match forge.api.open_pull_request(&sprint.branch).await? {
        Some(open) => {
            forge
                .api
                .update_pull_request(open.number, &title, &body)
                .await?
        }
        None => {
            let base = match &sprint.base_branch {
                Some(base) => base.clone(),
                None => forge.api.repository().await?.default_branch,
            };
            forge
                .api
                .create_pull_request(&sprint.branch, &base, &title, &body)
                .await?
        }
    };
    let mut events = vec![Event::Published {
        pr: pull.number,
        url: pull.url.clone(),
        head: head.clone(),
    }];
    if forge.config.ci == CiPolicy::None {
        events.push(Event::ChecksPassed {
            head,
            checks: Vec::new(),
            none: false,
        });
    }
    Ok((events, Vec::new()))
}

/// Whether the reviewed `head` must wait before it is pushed, because it changes files the
/// forge would run (with the repository's secrets) and no person has let that head run:
/// `Some(None)` while it waits already, `Some(Some(event))` to hold it now, `None` to push.
async fn ci_files_held(
    forge: &ProjectForge,
    repo: &Repo,
    sprint: &Sprint,
    log: &[TransitionRecord],
    head: &str,
) -> Result<Option<Option<Event>>, ForgeError> {
    use crate::pipeline::fsm::Note;
    if crate::store::ci_files_held(log) == Some(head) {
        return Ok(Some(None));
    }
    let let_run = log
        .iter()
        .any(|t| matches!(&t.note, Some(Note::CiApproved { head: h }) if h == head));
    let Some(base) = sprint.base_commit.as_deref() else {
        return Ok(None);
    };
    if let_run {
        return Ok(None);
    }
    let changed: Vec<String> = crate::git::patch::diffstat(repo, base, head)
        .await
        .map_err(ForgeError::Invalid)?
        .into_iter()
        .map(|(path, _, _)| path)
        .collect();
    let files = crate::forge::ci_files::touched(&changed, &forge.config.ci_files);
    Ok((!files.is_empty()).then(|| {
        Some(Event::CiFilesHeld {
            head: head.to_string(),
            files,
        })
    }))
}

/// The pull request's body where no summary is given: the sprint's goal and where the
/// branch comes from (no agent's words: they are quoted inert only by the summary).
async fn body(store: &Store, sprint: &Sprint, head: &str) -> String {
    let mut out = format!(
        "{}\n\nOpened by hanarang for {} (branch `{}` at `{}`).\n",
        sprint.goal, sprint.id, sprint.branch, head
    );
    if let (Ok(runs), Ok(log)) = (
        store.runs(&sprint.id).await,
        store.transitions(&sprint.id).await,
    ) {
        let contract = crate::store::contract_results(&runs, &log);
        let passed = contract.iter().filter(|c| c.passed == Some(true)).count();
        if !contract.is_empty() {
            out.push_str(&format!(
                "\nThe review passed {passed} of the contract's {} items.\n",
                contract.len()
            ));
        }
    }
    out
}

/// Looks at the open pull request: merged or closed there, its branch moved by someone
/// else, its checks (while verifying), and the words of the project's people.
async fn watch(
    forge: &ProjectForge,
    repo: &Repo,
    sprint: &Sprint,
    log: &[TransitionRecord],
) -> Found {
    let Some((number, _, pushed, pushed_at)) = published(log) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let pull = match forge.api.pull_request(number).await {
        Ok(pull) => pull,
        Err(ForgeError::NotFound(_)) => {
            return Ok((vec![Event::ForgeClosed { by: None }], Vec::new()));
        }
        Err(e) => return Err(e),
    };
    match &pull.state {
        PrState::Merged { by, commit } => {
            return Ok((
                vec![Event::ForgeMerged {
                    by: by.clone(),
                    commit: commit.clone(),
                }],
                Vec::new(),
            ));
        }
        PrState::Closed { by } => {
            return Ok((vec![Event::ForgeClosed { by: by.clone() }], Vec::new()));
        }
        PrState::Open => {}
    }
    let notes = peoples_words(forge, sprint, &pull).await?;
    if pull.head != pushed {
        return Ok((
            vec![moved(forge, repo, sprint, &pushed, &pull).await],
            notes,
        ));
    }
    if sprint.state != State::Verifying {
        return Ok((Vec::new(), notes));
    }
    let checks = forge.api.checks(&pushed).await?;
    let waited = Duration::from_millis(u64::try_from(now_ms() - pushed_at).unwrap_or(0));
    let failed: Vec<_> = checks
        .iter()
        .filter(|c| c.state == CheckState::Failed)
        .collect();
    let event = if !failed.is_empty() {
        let mut out = Vec::new();
        for check in failed {
            let log_tail = match forge.api.log_tail(check, LOG_BYTES).await {
                Ok(Some(text)) => Some(last_lines(&text, LOG_LINES)),
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!(check = %check.name, error = %e, "a failed check's log could not be read");
                    None
                }
            };
            out.push(FailedCheck {
                name: check.name.clone(),
                conclusion: check.conclusion.clone(),
                url: check.url.clone(),
                summary: check.summary.clone(),
                log_tail,
            });
        }
        Some(Event::ChecksFailed {
            head: pushed,
            failed: out,
        })
    } else if !checks.is_empty() && checks.iter().all(|c| c.state == CheckState::Passed) {
        Some(Event::ChecksPassed {
            head: pushed,
            checks: checks.iter().map(|c| c.name.clone()).collect(),
            none: false,
        })
    } else if checks.is_empty() && waited >= forge.config.ci_absent_after.0 {
        Some(Event::ChecksPassed {
            head: pushed,
            checks: Vec::new(),
            none: true,
        })
    } else if !checks.is_empty() && waited >= forge.config.ci_timeout.0 {
        Some(Event::ChecksTimedOut {
            head: pushed,
            pending: checks
                .iter()
                .filter(|c| c.state == CheckState::Pending)
                .map(|c| c.name.clone())
                .collect(),
        })
    } else {
        None
    };
    Ok((event.into_iter().collect(), notes))
}

/// Someone else pushed to the pull request's branch: what they pushed is fetched and
/// checked out (when the workdir holds no change), so the review that follows sees it.
async fn moved(
    forge: &ProjectForge,
    repo: &Repo,
    sprint: &Sprint,
    pushed: &str,
    pull: &PullRequest,
) -> Event {
    let taken = match forge.fetch(repo, &sprint.branch).await {
        Ok(fetched) => crate::git::branch::take(repo, &sprint.branch, &fetched).await,
        Err(e) => Err(e),
    };
    let short = |id: &str| id.get(..7).unwrap_or(id).to_string();
    let mut why = format!(
        "someone else pushed to the pull request's branch on the forge: {} → {}",
        short(pushed),
        short(&pull.head)
    );
    if let Err(e) = taken {
        why.push_str(&format!(" (not checked out here: {e})"));
    }
    Event::Moved {
        reviewed: pushed.to_string(),
        why,
    }
}

/// What a login's words may be: `(note, steer)`. The people of `people` are held to the
/// rules of who may steer and note by the Discord id they map to (a role cannot be looked
/// up here: list such a person's id among `approver_user_ids`); without a Discord table,
/// the operator's list is all there is.
fn heard(forge: &ProjectForge, sprint: &Sprint, login: &str) -> (bool, bool) {
    let Some(id) = forge.config.people.get(login) else {
        return (false, false);
    };
    match &forge.discord {
        None => (true, true),
        Some(d) => (
            crate::config::may_note(d, *id, &[], sprint.started_by.as_deref()),
            crate::config::may_steer(d, *id, &[]),
        ),
    }
}

/// Reviews and comments by the project's people, as notes (a "changes requested" review
/// at `done`, by one who may steer: a request for changes with its line comments). Anyone
/// else's are not read.
async fn peoples_words(
    forge: &ProjectForge,
    sprint: &Sprint,
    pull: &PullRequest,
) -> Result<Vec<PeoplesWord>, ForgeError> {
    let people = &forge.config.people;
    if people.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for review in forge.api.reviews(pull.number).await? {
        let (note, steer) = heard(forge, sprint, &review.login);
        if !note {
            continue;
        }
        let mut text = review.body.clone();
        for c in &review.comments {
            let place = match c.line {
                Some(line) => format!("{}:{line}", c.path),
                None => c.path.clone(),
            };
            text.push_str(&format!("\n- {place}: {}", c.body));
        }
        if text.trim().is_empty() {
            continue;
        }
        let kind = match (review.state, sprint.state) {
            (ReviewState::ChangesRequested, State::Done) if steer => CommandKind::RequestChanges,
            (ReviewState::Other, _) => continue,
            _ => CommandKind::Note,
        };
        out.push(PeoplesWord {
            key: format!("forge:review:{}", review.id),
            by: format!("forge:{}", review.login),
            kind,
            text: text.trim().to_string(),
        });
    }
    for comment in forge.api.comments(pull.number).await? {
        if !heard(forge, sprint, &comment.login).0 || comment.body.trim().is_empty() {
            continue;
        }
        out.push(PeoplesWord {
            key: format!("forge:comment:{}", comment.id),
            by: format!("forge:{}", comment.login),
            kind: CommandKind::Note,
            text: comment.body.trim().to_string(),
        });
    }
    Ok(out)
}

/// Whether git's failure is the network's (tried again later) rather than a refusal.
fn unreachable(why: &str) -> bool {
    [
        "Could not resolve host",
        "Failed to connect",
        "Connection refused",
        "Connection timed out",
        "Operation timed out",
        "The requested URL returned error: 5",
        "timed out",
    ]
    .iter()
    .any(|sign| why.contains(sign))
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
