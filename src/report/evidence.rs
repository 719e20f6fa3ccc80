//! The evidence to approve, gathered once for every place that shows it
//! (`sprint show`, the summary in the sprint's thread, the picture): the sprint's commits
//! and diff against its base from git, the contract with the review's word on each item,
//! the checks, each review round's findings, and the time and spend per sister from the
//! database — never from what a sister claimed.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::domain::Stage;
use crate::fence::Own;
use crate::git::Repo;
use crate::git::facts;
use crate::notify::messages::one_line;
use crate::sister::RunOutcome;
use crate::store::{
    CheckRecord, ContractItem, Run, Sprint, Store, StoreError, TransitionRecord, Usage,
};

/// What git says of the sprint's branch against its base.
pub struct Work {
    pub head: String,
    /// `(full id, subject)`, oldest first.
    pub commits: Vec<(String, String)>,
    /// `(path, lines added, lines removed)`.
    pub diffstat: Vec<(String, u64, u64)>,
}

impl Work {
    /// Lines added and removed over all files.
    pub fn totals(&self) -> (u64, u64) {
        self.diffstat
            .iter()
            .fold((0, 0), |(a, r), (_, x, y)| (a + x, r + y))
    }
}

/// One reviewer's verdict in a round.
pub struct Review {
    pub reviewer: String,
    pub verdict: String,
    pub findings: Vec<Finding>,
}

/// One of a reviewer's findings, as it wrote it.
pub struct Finding {
    pub severity: String,
    /// `file:line`, `file`, or empty.
    pub place: String,
    pub message: String,
}

impl Finding {
    /// `[severity] file:line message` on one line, cut at 300 characters.
    pub fn line(&self) -> String {
        self.head() + &one_line(&self.message)
    }

    /// `[severity] file:line` and the whole message, as written.
    pub fn full(&self) -> String {
        self.head() + &self.message
    }

    fn head(&self) -> String {
        match self.place.as_str() {
            "" => format!("[{}] ", self.severity),
            place => format!("[{}] {place} ", self.severity),
        }
    }
}

/// A review round's verdicts.
pub struct Round {
    pub round: u32,
    /// What a person asked of the round, `(by, text)`: their request is judged with it.
    pub request: Option<(String, String)>,
    pub reviews: Vec<Review>,
}

pub struct Evidence {
    pub sprint: Sprint,
    pub runs: Vec<Run>,
    pub usage: Usage,
    /// The sprint's checks, the one at its base among them when it ran it.
    pub checks: Vec<CheckRecord>,
    /// What the check said at the sprint's base commit: its own, or the one an earlier
    /// sprint from the same base made.
    pub base_check: Option<CheckRecord>,
    pub contract: Vec<ContractItem>,
    pub rounds: Vec<Round>,
    /// `None` outside git or before a base was recorded; `Err` when git could not answer.
    pub work: Option<Result<Work, String>>,
    /// The commit the latest approving review saw: what an approval deploys (`None`
    /// outside git, or before a review approved).
    pub approved: Option<String>,
    /// The sprint's pull request on its project's forge, when one was opened.
    pub forge: Option<PullRequestSeen>,
    /// What the forge's checks said at the sprint's base commit, when the project delivers
    /// through one and they were read: `(base commit, checks)`.
    pub checks_at_base: Option<(String, Vec<crate::store::BaseCheck>)>,
    /// What the sprint waits for from a person besides an approval (`ci_files`).
    pub waiting: Option<&'static str>,
    /// The plan's folder in the repository (relative to the workdir) when the project
    /// keeps plans in its tree, so the change carries it; `None` when it lives outside.
    pub plan_in_tree: Option<String>,
}

/// A sprint's pull request as its log tells it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PullRequestSeen {
    pub pr: u64,
    pub url: String,
    /// The head hanarang pushed last.
    pub head: String,
    /// The forge's checks on it, as last reported: `(name, result)`.
    pub checks: Vec<(String, String)>,
}

/// The pull request the log names, with the last word of its checks on its head.
fn pull_request_seen(log: &[TransitionRecord]) -> Option<PullRequestSeen> {
    use crate::pipeline::Event;
    let mut seen: Option<PullRequestSeen> = None;
    for t in log {
        match (&t.detail, &mut seen) {
            (Event::Published { pr, url, head }, _) => {
                seen = Some(PullRequestSeen {
                    pr: *pr,
                    url: url.clone(),
                    head: head.clone(),
                    checks: Vec::new(),
                });
            }
            (Event::ChecksPassed { checks, .. }, Some(s)) => {
                s.checks = checks
                    .iter()
                    .map(|c| (c.clone(), "success".into()))
                    .collect();
            }
            (Event::ChecksFailed { failed, .. }, Some(s)) => {
                s.checks = failed
                    .iter()
                    .map(|c| (c.name.clone(), c.conclusion.clone()))
                    .collect();
            }
            (Event::ChecksTimedOut { pending, .. }, Some(s)) => {
                s.checks = pending
                    .iter()
                    .map(|c| (c.clone(), "pending".into()))
                    .collect();
            }
            _ => {}
        }
    }
    seen
}

impl Evidence {
    /// Everything known of `sprint` now: its rows in the database, and git's word on its
    /// branch.
    pub async fn gather(
        store: &Store,
        config: &Config,
        sprint: Sprint,
    ) -> Result<Evidence, StoreError> {
        Evidence::gather_until(store, config, sprint, None).await
    }

    /// What was known of `sprint` at `until` (unix ms), when given: the runs and checks
    /// started by then, and the branch as its last review saw it (a summary delivered late
    /// shows the round it was made for, not a later one).
    pub async fn gather_until(
        store: &Store,
        config: &Config,
        sprint: Sprint,
        until: Option<i64>,
    ) -> Result<Evidence, StoreError> {
        let by_then = |at: i64| until.is_none_or(|until| at <= until);
        let mut runs = store.runs(&sprint.id).await?;
        runs.retain(|r| by_then(r.started_at));
        let usage = store.usage(&sprint.id).await?;
        let mut log = store.transitions(&sprint.id).await?;
        log.retain(|t| by_then(t.at));
        let mut checks = store.checks(&sprint.id).await?;
        checks.retain(|c| by_then(c.at));
        let base_check = match checks.iter().rev().find(|c| c.at_base) {
            Some(own) => Some(own.clone()),
            None => match &sprint.base_commit {
                Some(base) => store
                    .base_check(&sprint.project, base)
                    .await?
                    .filter(|c| by_then(c.at)),
                None => None,
            },
        };
        let approved = crate::store::approved_head(&log, &runs);
        let work = work(
            store,
            config,
            &sprint,
            until.and_then(|_| last_reviewed(&runs)),
        )
        .await;
        let plan_in_tree = config
            .projects
            .get(&sprint.project)
            .filter(|p| p.plans_in_tree())
            .map(|p| {
                let dir = p.plan_dir_of(&sprint.id, &sprint.project, store.runs_dir());
                let shown = dir.strip_prefix(&p.workdir).unwrap_or(&dir);
                format!("{}/", shown.display())
            });
        let checks_at_base = match (&sprint.base_commit, config.forge_of(&sprint.project)) {
            (Some(base), Some(forge)) => store
                .forge_base_checks(&forge.repository_key(), base)
                .await?
                .map(|checks| (base.clone(), checks)),
            _ => None,
        };
        Ok(Evidence {
            approved,
            checks_at_base,
            plan_in_tree,
            waiting: crate::store::waiting_for(&log),
            forge: pull_request_seen(&log),
            contract: crate::store::contract_results(&runs, &log),
            rounds: rounds(&runs, &log),
            sprint,
            runs,
            usage,
            checks,
            base_check,
            work,
        })
    }

    /// Time per sister: the summed duration of its runs.
    pub fn time_by_sister(&self) -> BTreeMap<String, i64> {
        let mut time = BTreeMap::new();
        for run in &self.runs {
            *time.entry(run.actor.to_string()).or_insert(0) += run.duration_ms.unwrap_or(0);
        }
        time
    }
}

/// The head the sprint's last review was given.
fn last_reviewed(runs: &[Run]) -> Option<String> {
    runs.iter()
        .rev()
        .find(|r| r.actor.stage() == Stage::Reviewing && r.outcome == Some(RunOutcome::Handoff))
        .and_then(|r| r.git_head.clone())
}

/// git's word on the branch against its base, up to `head` (its head now when `None`).
async fn work(
    store: &Store,
    config: &Config,
    sprint: &Sprint,
    head: Option<String>,
) -> Option<Result<Work, String>> {
    let workdir = &config.projects.get(&sprint.project)?.workdir;
    let base = sprint.base_commit.as_deref()?;
    let repo = repo(store, config, workdir);
    let head = match head {
        Some(head) => Some(head),
        None => facts::branch_head(&repo, &sprint.branch).await,
    };
    let Some(head) = head else {
        return Some(Err(format!(
            "the branch {:?} is gone from {}",
            sprint.branch,
            workdir.display()
        )));
    };
    let found = async {
        Ok(Work {
            commits: facts::commits_between(&repo, base, &head).await?,
            diffstat: crate::git::patch::diffstat(&repo, base, &head).await?,
            head: head.clone(),
        })
    };
    Some(found.await)
}

/// git on a project's workdir, fenced from hanarang's files as a sister is: a person's
/// `sprint show` and `sprint diff` run nothing the repository names.
fn repo(store: &Store, config: &Config, workdir: &std::path::Path) -> Repo {
    Repo::new(workdir, &Own::of(config, store.runs_dir()))
}

/// The patch `base..branch` of the sprint: the committed bytes (up to `head` when given;
/// of `paths` alone when any are given).
pub async fn patch(
    store: &Store,
    config: &Config,
    sprint: &Sprint,
    head: Option<&str>,
    paths: &[String],
) -> Result<String, String> {
    let (Some(project), Some(base)) = (
        config.projects.get(&sprint.project),
        sprint.base_commit.as_deref(),
    ) else {
        return Err(format!(
            "{}: no base recorded (its workdir is not a git repository, or no run started), so there is no diff",
            sprint.id
        ));
    };
    let repo = repo(store, config, &project.workdir);
    let head = match head {
        Some(head) => Some(head.to_string()),
        None => facts::branch_head(&repo, &sprint.branch).await,
    };
    let Some(head) = head else {
        return Err(format!(
            "{}: the branch {:?} is gone from {}",
            sprint.id,
            sprint.branch,
            project.workdir.display()
        ));
    };
    crate::git::patch::patch_of(&repo, base, &head, paths)
        .await
        .map_err(|e| format!("{}: {e}", sprint.id))
}

fn rounds(runs: &[Run], log: &[TransitionRecord]) -> Vec<Round> {
    let mut by_round: BTreeMap<u32, Vec<Review>> = BTreeMap::new();
    let reviews = runs
        .iter()
        .filter(|r| r.actor.stage() == Stage::Reviewing && r.outcome == Some(RunOutcome::Handoff));
    for run in reviews {
        let Some(m) = &run.message else { continue };
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        let findings = m["payload"]["issues"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| Finding {
                severity: text(&i["severity"]),
                place: match (i["file"].as_str(), i["line"].as_u64()) {
                    (Some(f), Some(l)) => format!("{f}:{l}"),
                    (Some(f), None) => f.to_string(),
                    _ => String::new(),
                },
                message: text(&i["message"]),
            })
            .collect();
        by_round.entry(run.round).or_default().push(Review {
            reviewer: (run.reviewer.clone()).unwrap_or_else(|| run.actor.to_string()),
            verdict: text(&m["verdict"]),
            findings,
        });
    }
    by_round
        .into_iter()
        .map(|(round, reviews)| Round {
            round,
            request: crate::store::round_request(log, round)
                .map(|(by, text)| (by.to_string(), text.to_string())),
            reviews,
        })
        .collect()
}
